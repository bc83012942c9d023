// Package persistence defines the Store that holds everything a node must not
// forget: messages and their history, the outbox of work those messages cause,
// the idempotency ledger, routes and frontends.
//
// Two implementations pass one conformance suite (persistence/storetest):
// persistence/sqlite, the embedded default, and persistence/postgres, for sites
// whose instances share a database.
//
// # One decision core
//
// What a transition does is decided here, once, by pure functions over
// plain rows; the stores only run SQL. A write transaction loads the rows a
// call names into a Loaded (messages as Row, their outbox rows as WorkRow,
// their ledger keys), asks the core about each item in input order, and
// writes the Changes the core returns:
//
//	Complete     one outcome of CompleteWork (per kind: StateAfter)
//	Status       one delivery_status report of ApplyStatus
//	Expire       one candidate of ExpireMessages
//	FailForward  one candidate of FailForwards
//	QueueForward one candidate of QueueForwards
//	Resubmit     one reroute of Resubmit
//	NewRow, NewWork, PlanAccept, AcceptResults, LocalFrontend   Accept
//	KnownResults, Partial   an Accept that failed after it stored some
//
// Changes.Move is the one place a message changes state: history (numbered
// from the row's HistoryLen; the second entry is held by the row, later
// ones are history rows: history.go; a deferral that follows a deferral of
// the same attempt folds into its entry instead, FoldsInto), queued_at,
// and the status work owed to an origin. The validators (validate.go) check every call's input and report
// every problem. A decision sees what earlier items of the same call did,
// because it changes the Loaded rows as it goes. Each store keeps its
// candidate queries, its row locking and loading (changes.go) and the
// statements that write Changes; both name their files alike (changes.go,
// messages.go, work.go, federation.go, expire.go, resubmit.go,
// directory.go, ring.go, migrate.go, store.go).
//
// # Choices the interface leaves open
//
//   - CompleteWork moves a message by the kind of its work: delivery work to
//     delivered, failed or retry; forward work to forwarded, forward_failed
//     or forward_queued; status work leaves the state alone (the message is
//     already final here) and is not subject to the "already final" rule.
//   - Any change that makes a message with a report_to delivered or failed
//     writes its status work (due now, replacing a row it had for that
//     origin): a final delivery outcome, an expiry, and also a peer's report
//     (ApplyStatus), although federation never forwards such a message on.
//   - ExpireMessages treats a message as leased when any of its outbox rows
//     has a live lease. It removes the delivery and forward rows (status rows
//     are reports owed to an origin, not the message's work) and writes a
//     failed ledger entry for each, or for (delivery, frontend) when it had
//     none. FailForwards likewise writes (forward, dest_smsc) for a queued
//     message without forward work.
//   - ApplyStatus writes the forward ledger entry with the report's result
//     (Resubmit removes every ledger entry of the message, so a message the
//     peer failed is forwarded again) and gives NoWork for a message of that
//     dest_smsc in any state it does not name (retry: local work).
//   - QueueForwards returns messages in acceptance order; FailForwards oldest
//     queued first.
//   - A peer registry without frontends is stored as no rows: the peer is
//     absent from PeerRegistries. Frontends are listed sorted, each once.
//   - Resubmit also removes the message's old delivery and forward rows (they
//     belong to the route it failed on) and its status rows (a report owed of
//     the outcome it undoes would tell the origin of a message not final any
//     more), and rejects a restart state that is final.
//   - A message's first history entry is its acceptance (state, created_at,
//     detail); the stores may keep it with the message instead of as a
//     history row.
//   - ExpireMessages returns messages oldest submission first.
//   - Every call that is given invalid input reports every problem and
//     changes nothing; a second Close returns ErrClosed, like every call
//     after Close.
//
// # The outbox
//
// Every state change that causes work (a delivery to a frontend, later a
// forward to a peer or a delivery_status back to an origin) writes an outbox
// row in the same transaction. Workers only ever work from the outbox:
//
//	Accept / Resubmit ──► outbox row (due_at) ──ClaimWork──► leased (lease_until, lease_owner)
//	       │                   ▲                                  ▲ │
//	       │                   └──── Retry (new due_at) ◄─────────┼─┤ CompleteWork
//	       └── NewMessage.Lease: written leased (handed over) ────┘ ▼
//	                                     Delivered / Failed: row deleted, ledger written
//
// A lease that runs out makes the row claimable again, so a crashed worker's
// work is retried with the same message id. ReleaseLeases takes back at once
// the leases of an earlier run of the same instance. Work for a worker that
// is ready may be written leased to it by the accepting commit itself
// (NewMessage.Lease; Accepted.Work is the leased row, as a claim would
// return it), so that it is handed over in memory rather than claimed in a
// transaction of its own; the store stays its record and recovery path.
//
// # One transaction, several parts
//
// Write does outcomes and delivery_status reports (decided by the core),
// new messages and claims in one transaction, in that order: a worker
// records what it finished and claims what comes next in one commit, the
// intake stores its group commit and a peer's reports together. Accept,
// CompleteWork, ApplyStatus and ClaimWork are its one-part forms (Calls). A
// claim the ring fence refuses comes back Refused without failing the rest.
//
// # The idempotency ledger
//
// The ledger records, per (message, target), the final outcome of its work.
// It is written in the transaction that records the outcome and read before
// every side effect: ClaimWork never hands out work whose outcome is recorded,
// and a second outcome for the same work (a late or repeated ack) changes
// nothing and is reported as already recorded. A retry is not final and
// writes no entry: its outbox row keeps the attempt it was for
// (retried_attempt), and a retry of that attempt again is already recorded
// too. A deferral (Outcome.Deferred: the frontend was busy, the message not
// attempted) is a retry that gives back the attempt its claim counted, so
// the next claim counts the same attempt again; it keeps no attempt on its
// row, and applies only while the row is still leased (once per claim),
// to the claim's owner when it names one (not to a claim made since).
//
// # The ring
//
// Instances of one site split the outbox by token (messages.TokenOf of the
// message id). PublishRing stores an assignment by compare-and-set on its
// epoch, confirming the publisher's leader lock in the same transaction; a
// ring-fenced claim (ClaimRequest.Ring) names the epoch and its ranges, is
// refused with ErrStaleEpoch unless they are the stored epoch's and its
// owner's, and leases rows with that epoch (lease_epoch; 0 for work
// leased otherwise: handed over at accept, claimed by id, claimed without
// a ring). A fenced outcome (one naming its claim's Outcome.Owner, at any
// epoch, 0 included) applies only while its row is still leased to that
// owner under that epoch; otherwise it is StaleEpoch: a newer claim speaks
// for the row. CompletionOf decides it; SignedRanges and Covered hold the
// range rules both stores' SQL uses.
//
// # Time
//
// Stores never read the clock: every call that writes a time takes `now`.
// Times are stored with microsecond precision and returned in UTC.
package persistence
