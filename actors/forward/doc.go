// Package forward is each peer's forward queue: it sends the peer the
// messages routed to it and the delivery_status reports owed to it, from
// the outbox, in batches, and records what the peer answered.
//
// The files without an actor in them are the pure core; they take the
// time as an argument and do no I/O:
//
//   - Policy (policy.go): what a peer's answer means for a message
//     (Judge, Unsent), how long a message may wait forward_queued, how
//     often the queue ticks.
//   - Lane (lane.go): the flow control of one kind of work: open while
//     the peer is healthy, at most InFlight requests, claims only while
//     there may be due work.
//   - Flow (flow.go): the two lanes and their batch sizes, the results
//     waiting to be recorded and the one store round at a time that
//     records them and claims the next batches; forwards handed over by
//     the intake; the queue's offer for the handover board.
//   - Link (link.go): the peer's link, as the peer actor last saw it, and
//     when to park the peer's pending messages (to forward_queued, a page
//     at a time): while it is not healthy, by peer.Parking, the rule the
//     peers actor parks a gone peer's messages by too; a page that failed
//     is tried again at the next tick.
//   - BoardOffer (offer.go): the offer the handover board last heard,
//     told only when it changes and only on a store this instance has
//     alone.
//
// The Queue actor (queue.go) is their shell: it feeds them the peer
// actor's PeerLink, kicks, ticks and the results of its calls, and carries
// out what they return: a parking page (store.go), a request to the peer
// (request.go) and a store round (store.go), each on a goroutine of its
// own whose result comes back as a message, and the board's offer.
//
// Requests: a batch goes to the peer in one call of the transport, which
// splits it into requests that fit the peer's bound on a request body and
// sends them one after another. Each request is bounded by Timeout
// (--http-timeout, the transport's own bound), the whole call by
// CallTimeout (twice that; the claims' lease outlives it). When a request
// fails, the answers to those before it are recorded as a whole call's
// would be, and only the work without an answer is retried. A call that
// timed out halves its lane's batch (Flow.Batch, down to 1); each that
// succeeds, cut at the batch as it is, doubles it back up to Policy.Batch.
//
// Failure: a request that did not complete closes its lane until the peer
// is found healthy again (one failed check for the peer actor per broken
// link) and its work without an answer waits forward_queued, due at once;
// a busy peer keeps the lane open and its work waits a retry interval. A
// store round that failed records nothing: the leases of its work run out
// and the work is claimed again (forwards are idempotent at the peer,
// reports at the origin), and its lanes claim nothing until the next kick
// or tick. A
// queue starts (and restarts) with the peer not healthy: it parks the
// peer's pending messages until the peer actor's next check says
// otherwise. A queue that stops (its peer gone from discovery, the node
// stopping) gives back what it holds (stop.go): the results waiting to be
// recorded are recorded, and the work of its rounds and requests, those
// still out included, is recorded unsent, due at once, so that the queue
// spawned when the peer is back claims it at once rather than when its
// leases end.
package forward
