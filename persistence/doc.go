// Package persistence defines the Store that holds everything a node must not
// forget: messages and their history, the outbox of work those messages cause,
// the idempotency ledger, routes and frontends.
//
// Two implementations pass one conformance suite (persistence/storetest):
// persistence/sqlite, the embedded default, and persistence/postgres, for sites
// whose instances share a database.
//
// # The outbox
//
// Every state change that causes work (a delivery to a frontend, later a
// forward to a peer or a delivery_status back to an origin) writes an outbox
// row in the same transaction. Workers only ever work from the outbox:
//
//	Accept / Resubmit ──► outbox row (due_at) ──ClaimWork──► leased (lease_until, lease_owner)
//	                           ▲                                  │
//	                           └──── Retry (new due_at) ◄─────────┤ CompleteWork
//	                                                              ▼
//	                                     Delivered / Failed: row deleted, ledger written
//
// A lease that runs out makes the row claimable again, so a crashed worker's
// work is retried with the same message id. ReleaseLeases takes back at once
// the leases of an earlier run of the same instance.
//
// # The idempotency ledger
//
// The ledger records, per (message, target), the final outcome of its work.
// It is written in the transaction that records the outcome and read before
// every side effect: ClaimWork never hands out work whose outcome is recorded,
// and a second outcome for the same work (a late or repeated ack) changes
// nothing and is reported as already recorded.
//
// # The ring
//
// Instances of one site split the outbox by token (messages.TokenOf of the
// message id). PublishRing stores an assignment by compare-and-set on its
// epoch; a ring-fenced claim (ClaimRequest.Ring) names the epoch and its
// ranges, is refused with ErrStaleEpoch unless they are the stored epoch's
// and its owner's, and leases rows with that epoch (lease_epoch). A fenced
// outcome (Outcome.Epoch) applies only while its row is still leased to it
// under that epoch; otherwise it is StaleEpoch: a newer claim speaks for the
// row. CompletionOf and SignedRanges hold the rules both stores share.
//
// # Time
//
// Stores never read the clock: every call that writes a time takes `now`.
// Times are stored with microsecond precision and returned in UTC.
package persistence
