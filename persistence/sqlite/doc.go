// Package sqlite is the embedded persistence.Store, the default: one file
// (plus SQLite's -wal and -shm) under the data directory, pure Go
// (modernc.org/sqlite, no cgo), so a node runs with a single command and no
// database server.
//
// # Why it is built this way
//
// SQLite has one writer at a time. Rather than let several connections race
// for the lock and retry on SQLITE_BUSY, every write goes through one
// connection that begins its transactions IMMEDIATE (it takes the write lock
// at BEGIN, so a transaction never fails halfway for want of it); callers
// queue in database/sql instead. Reads use a separate pool of query_only
// connections: in WAL mode they see the last commit and never block the
// writer. The actors batch their writes (group commit), so the single writer
// is not the limit: the fsync of each commit is, and a batch shares it.
//
// synchronous=FULL syncs the WAL at every commit. The store acknowledges a
// message only after its commit and rule 1 of the design ("durable before
// acknowledged") means that commit must survive power loss, which NORMAL in
// WAL mode does not promise.
//
// Every method is one transaction with a small, fixed number of statements
// whatever the batch size: multi-row INSERT ... RETURNING and UPDATE ... FROM
// (VALUES ...) for batches (chunked below SQLite's bound-parameter limit),
// outcomes decided in memory in input order between one read phase and one
// write phase (see changes.go: CompleteWork and ApplyStatus decide items
// one by one, the sweeps ExpireMessages, FailForwards and QueueForwards
// decide each candidate, and one writer applies the result). Every hot query
// has its index (see migrations/; TestHotQueriesUseIndexes checks the
// plans); Stats counts with aggregates, never by loading rows.
//
// Times are INTEGER unix microseconds, the precision both stores keep, so
// comparisons in SQL are integer comparisons and nothing depends on a text
// format. Ring tokens are uint64 kept as their int64 bit pattern.
//
// # Schema changes
//
// The schema is a sequence of embedded migrations/NNNN_what.sql files. Open
// applies, in order, each one schema_migrations does not record, each in its
// own transaction with its record, so a crash leaves the database at a
// version boundary. A database recording a version this binary does not know
// was written by a newer binary and is refused. Never edit an applied file:
// add the next one.
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
//     belong to the route it failed on) and rejects a restart state that is
//     final.
//   - A second Close returns ErrClosed, like every call after Close.
package sqlite
