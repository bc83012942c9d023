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
// items decided in memory by the decision core in input order between one
// read phase and one write phase (changes.go). Every hot query
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
// # Rules
//
// No rule of a transition lives here: the decision core (package
// persistence) decides every item, this package loads the rows it needs
// and writes what it decided (changes.go).
package sqlite
