// Package postgres is the persistence.Store for sites whose instances share
// one Postgres database (pgx/v5 and pgxpool).
//
// # Schema and migrations
//
// The schema is a series of versioned SQL files embedded from migrations/.
// Open applies the ones not yet recorded in schema_migrations, in one
// transaction, while holding a session advisory lock (migrationLockKey) on a
// connection of its own: several instances of a site start at once against
// one database, and only one of them migrates while the others wait and then
// find nothing left to do. Every table lives in the connection's current
// schema (search_path), so a DSN with search_path isolates a store; tests use
// that (persistence/pgtest). When no schema of the search_path exists (the
// server would refuse every CREATE TABLE with SQLSTATE 3F000), the same
// transaction first creates the one it names, its first name that is not
// $user, pg_catalog or a temp schema, read as the server reads it (quoted
// names keep their case); a role that may not create it, or may not use
// the one that is there, gets ErrSearchPath, which says what to run. A
// search_path one of whose schemas exists is left alone.
//
// # Concurrency
//
// Every method runs in one transaction, but a Write of new messages alone
// (Accept): its insert is one statement, which commits on its own, and the
// read of the ids it found taken follows in a round trip of its own; when
// that fails, the Write reports what the insert stored
// (persistence.PartialAccept). Several instances claim work from one
// outbox at once: ClaimWork locks candidate rows with FOR UPDATE SKIP LOCKED,
// so claimers never wait on each other and never claim one row twice.
//
// Batch transactions lock rows in one global order so that two of them can
// never wait on each other in a cycle (a deadlock Postgres would only break
// after deadlock_timeout by failing one of them):
//
//	outbox rows (ORDER BY id, or SKIP LOCKED)
//	  -> messages (ORDER BY id, FOR NO KEY UPDATE)
//	    -> a locked message's ledger and history rows
//
// In particular no transaction waits for an outbox row while it holds a
// message. The bus's relay takes (and marks) rows with SKIP LOCKED, marks
// them again after the bus lost them (RelayAgain) with SKIP LOCKED too, and
// gives rows back in id order, holding nothing else. CompleteWork, ApplyStatus, Resubmit and the sweeps
// (ExpireMessages, FailForwards, QueueForwards) lock every outbox row of
// their messages first, then the messages, in one round trip.
//
// Those calls decide in Go, with the decision core, on the rows they
// locked, and write the result in one more round trip (changes.go). A
// sweep finds its candidates without locks, so the core checks each again
// after locking and leaves those another transaction moved meanwhile.
// Outbox rows that another transaction wrote while they waited for a
// message (every writer of a message's rows holds the message, or creates
// it) were not among the rows they locked: the same round trip counts the
// messages' rows again once they hold them, and when there are more, the
// transaction is rolled back and runs again, rather than decide on a
// stale list or lock the new rows out of order (see queueLoad).
//
// Accept inserts new messages in id order for the same reason (a conflicting
// insert waits for the other transaction), and draws their seq in input order
// so that acceptance order is still what lists show.
//
// # The ring
//
// ring_state is one row (created by migration 0003 with epoch 0), so that
// fencing and publishing always meet on it. A ring-fenced ClaimWork reads
// it FOR SHARE, with the owner's ranges, in the round trip that begins the
// transaction and leases; PublishRing is an UPDATE ... WHERE epoch = prev
// of that row. The UPDATE waits for every claim that holds the row, and a
// claim that comes later waits for the UPDATE and then reads the new epoch:
// so every row claimed under epoch E is committed before E+1 is, and no
// claim under E commits after it. The claim statement also repeats the
// epoch test (one-time filter), so a claim whose fence fails locks no row;
// one whose ranges are not its owner's is rolled back. Tokens and range
// ends are stored as the uint64's bit pattern; a claim's ranges become
// signed ranges (persistence.SignedRanges), filtered on the rows the claim
// index yields in claim order.
//
// TryLead (persistence.Elector) takes a session advisory lock on a
// connection of its own, outside the pool, and checks that connection every
// second; when it breaks, the server has ended the session and freed the
// lock, and Lost is closed. A PublishRing under such a leadership asks
// pg_locks, after its compare-and-set and in its transaction, whether that
// session (its process id and start) still holds the lock: a session that
// ended counts at once, not a second or more later when Lost closes.
//
// # Rules
//
// No rule of a transition lives here: the decision core (package
// persistence) decides every item on the rows this package locked and
// loaded, and this package writes what it decided (changes.go), one
// statement per kind of change, all in one round trip.
//
// # Plans
//
// Batch statements take their keys as arrays (unnest) and join them, rather
// than filter with = ANY: the join can hash the list or look each key up.
// Transactions run with plan_cache_mode=force_custom_plan (unless the DSN
// sets plan_cache_mode), because one cached generic plan cannot suit batches
// of 1 and of 1000 keys, and one made while a table was small keeps scanning
// it whole long after it has grown. Accept keeps cached plans: it only
// inserts. Keys are COLLATE "C" (byte order, as in SQLite).
//
// # Sessions
//
// Unless the DSN sets them, the pool's sessions have the server end a
// transaction left idle for 10 s (idle_in_transaction_session_timeout) and
// probe a silent client (TCP keepalives: ~11 s): a claim left open by a
// paused or cut-off instance would otherwise hold its locks, the ring's
// state row among them, until the pause ends or TCP notices on its own.
//
// # Errors
//
// persistence.ErrNotFound, persistence.ErrClosed and persistence.ErrStaleEpoch are returned wrapped with
// %w; context cancellation keeps its context error; other driver errors keep
// only their text, so no pgx type leaks to callers.
package postgres
