// Package sqlite is the embedded persistence.Store, the default: one file
// (plus SQLite's -wal and -shm) under the data directory, pure Go
// (modernc.org/sqlite, no cgo), so a node runs with a single command and no
// database server.
//
// # Why it is built this way
//
// SQLite has one writer at a time. Rather than let several connections race
// for the lock and retry on SQLITE_BUSY, every write is a job for one writer
// goroutine on one connection that begins its transactions IMMEDIATE (it
// takes the write lock at BEGIN, so a transaction never fails halfway for
// want of it). The writer runs every job queued while it was busy in one
// transaction, each job in a savepoint of its own (one job's failure rolls
// back only that job): writes of different callers (the intake's group
// commit, a delivery worker's acks and claim, a forward queue's results)
// share a commit. Upkeep that no request waits on (the cleaner's purge
// batches, Compact) goes behind: it begins the transaction after the jobs
// queued with it, so a submit never waits for it because it was queued
// first. Reads use a separate pool of query_only connections: in
// WAL mode they see the last commit and never block the writer.
//
// # Durable before anything leaves
//
// The writer's connection runs with synchronous=NORMAL: COMMIT only writes
// the transaction's frames to the -wal file. A second goroutine, the
// syncer, makes them durable with an fdatasync of that file (one for all
// the commits made meanwhile) while the writer already runs the next batch:
// batch N+1 executes while batch N syncs. The rule that keeps this as
// durable as synchronous=FULL, from the design: nothing that depends on
// store state leaves the process until the synced position has reached the
// last commit that existed when that state was written or read.
//
//   - A write returns only after the sync that covers its commit (its
//     caller answers a client, a peer or a frontend, or hands work to a
//     worker, only then).
//   - A read returns only after every commit its snapshot may hold is synced
//     (awaitSynced): commits are numbered before COMMIT, so a commit a
//     reader can see has a number no higher than the one it reads
//     afterwards. A duplicate submit's 200 and a message document are
//     built from such reads. What a read does not find waits likewise (a
//     404 for a message whose purge is not yet durable), and so does the
//     error of a write whose transaction was rolled back (a verdict on
//     what it read: not found, a conflict), until the commits before it
//     are durable.
//   - Why a synced WAL is enough: SQLite recovers a WAL by reading frames
//     from its start up to the last valid commit frame (checksums, salts), so
//     frames of a commit that was never synced, or half written, are
//     dropped, and nothing answered depended on them. A checkpoint (on its
//     own connection, every 200ms while commits come, so that the writer
//     never waits for one) syncs the WAL before it copies pages into the
//     database and the database after, in NORMAL as in FULL; a WAL restarted
//     after a complete checkpoint is synced like any other. The directory
//     entry of the -wal file is synced once, when the store opens.
//   - An fsync that fails stops the store for good: every later call
//     fails, every answer that waited for it reports the store broken
//     (a verdict such as not found included: what it was built from may
//     not be on disk), and Config.OnFatal is told (the node stops). So
//     does one that SQLite reports from a checkpoint's own fsyncs
//     (SQLITE_IOERR_FSYNC, SQLITE_IOERR_DIR_FSYNC). A broken store closes
//     without the checkpoint SQLite's last connection would make (it
//     would copy frames whose sync failed into the database and delete
//     the WAL): a connection held to the end of the process keeps the
//     WAL as the disk has it. Retrying an fsync
//     can report success without the data (Linux drops the dirty pages of a
//     failed write-back), so the only honest recovery is a restart that
//     reads back what the disk holds.
//
// The tests hold the sync back and check that writes, reads and a
// duplicate accept wait for it (writer_test.go, and at the node level
// durability_test.go), and emulate a power cut by cutting the -wal file back
// to the size the last returned sync covered (kill -9 keeps the page cache,
// so it proves nothing here): every answered write survives.
//
// Every method is one transaction with a small, fixed number of statements
// whatever the batch size: multi-row INSERT ... RETURNING and UPDATE ... FROM
// (VALUES ...) for batches (chunked below SQLite's bound-parameter limit),
// items decided in memory by the decision core in input order between one
// read phase and one write phase (changes.go). Every hot query
// has its index (see migrations/; TestHotQueriesUseIndexes checks the
// plans); Stats counts with aggregates, never by loading rows.
//
// The schema declares its references (history, outbox and ledger name
// their message) but the writer does not enforce them (foreign_keys=OFF,
// as Postgres, which never declared them): every write comes from the
// decision core, which writes a message's rows with it and deletes them
// before it, and checking again cost a fifth of a purge. The store suite
// looks for orphans after every case on both stores
// (storetest.ReferenceChecker).
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
