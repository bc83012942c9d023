package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	sqlitedriver "modernc.org/sqlite"

	"github.com/switchboard-dev/switchboard/persistence"
)

const (
	// busyTimeout is how long a connection waits for a lock before SQLITE_BUSY,
	// in milliseconds (10 s). The single writer never waits on itself; this
	// covers checkpoints and a second process opening the same file.
	busyTimeout = 10000
	// readConns is the size of the reader pool (4 connections). WAL readers
	// never block the writer or each other; four serve the API and the
	// gauges while a drain is running without holding many file handles.
	readConns = 4
)

// Store is the embedded persistence.Store. It is safe for concurrent use:
// writes are jobs for its one writer (writer.go), reads use a pool.
type Store struct {
	// Calls are the one-part forms of Write (Accept, ClaimWork, ...).
	persistence.Calls
	path  string
	log   *slog.Logger
	wdb   *sql.DB    // exactly one connection, BEGIN IMMEDIATE; the writer's
	rdb   *sql.DB    // readers, query_only
	cdb   *sql.DB    // the checkpointer's one connection (nil without one)
	stmts *stmtCache // prepared statements of the writer
	wal   *syncer
	lock  *os.File // held from Open to Close (lockStore)

	jobs    chan *job
	commits chan commit
	// commitSeq numbers the writer's commits (from 1), taken before each
	// COMMIT; wal.synced is the last one made durable.
	commitSeq atomic.Uint64
	brokenErr atomic.Pointer[error]
	onFatal   func(error)
	onNoSpace func(error) // Config.OnNoSpace

	closed                   atomic.Bool
	closing                  chan struct{} // closed by Close: the loops end
	syncDone, checkpointDone chan struct{}
}

var _ persistence.Store = (*Store)(nil)

// errStoreClosed is what calls on a closed store fail with.
var errStoreClosed = persistence.ErrClosed

// Open opens (creating when missing) the database at cfg.Path, applies
// the migrations it lacks, makes them durable and starts the writer.
// It holds the store's lock until Close (lockStore): a database another
// running process has open is refused. A Config.Lock is Open's from the
// call on, whether it succeeds or not.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		_ = cfg.Lock.Close()
		return nil, err
	}
	held := cfg.Lock
	if held == nil {
		var err error
		if held, err = TakeLock(cfg.Path); err != nil {
			return nil, err
		}
	}
	lock, err := held.take(cfg.Path)
	if err != nil {
		_ = held.Close()
		return nil, err
	}
	s, err := open(ctx, cfg)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// open is Open once the lock is taken.
func open(ctx context.Context, cfg Config) (*Store, error) {
	log := cfg.Logger.With("component", "store", "store", "sqlite")

	wdb, err := sql.Open("sqlite", dsn(cfg.Path, roleWriter))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %v", err)
	}
	// One connection: SQLite has one writer anyway, and the writer
	// goroutine is its only user (between transactions the statement
	// cache prepares on it).
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	if err := wdb.PingContext(ctx); err != nil {
		_ = wdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %v", cfg.Path, flatten(err))
	}
	applied, err := migrate(ctx, wdb, migrationFiles(), log)
	if err != nil {
		_ = wdb.Close()
		return nil, err
	}

	// Let SQLite gather the planner statistics it lacks, bounded so that it
	// stays cheap on a large database (analysis_limit: SQLite's advice for
	// long-lived connections; without it ANALYZE reads every index whole,
	// seconds on a store of a million messages). Only a slower plan is at
	// stake, so a failure is logged.
	if _, err := wdb.ExecContext(ctx, "PRAGMA analysis_limit=400; PRAGMA optimize=0x10002"); err != nil {
		log.Warn("optimize failed", "err", flatten(err))
	} else if err := dropSamples(ctx, wdb); err != nil {
		log.Warn("dropping the planner's samples failed", "err", flatten(err))
	}

	rdb, err := sql.Open("sqlite", dsn(cfg.Path, roleReader))
	if err != nil {
		_ = wdb.Close()
		return nil, fmt.Errorf("sqlite: open: %v", err)
	}
	rdb.SetMaxOpenConns(readConns)
	rdb.SetMaxIdleConns(readConns)
	rdb.SetConnMaxIdleTime(0)
	if err := rdb.PingContext(ctx); err != nil {
		_ = rdb.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %v", cfg.Path, flatten(err))
	}
	var cdb *sql.DB
	if cfg.Checkpoint > 0 {
		if cdb, err = sql.Open("sqlite", dsn(cfg.Path, roleCheckpointer)); err != nil {
			_ = rdb.Close()
			_ = wdb.Close()
			return nil, fmt.Errorf("sqlite: open: %v", err)
		}
		cdb.SetMaxOpenConns(1)
		cdb.SetConnMaxIdleTime(0)
	}
	closeAll := func() {
		_ = rdb.Close()
		_ = wdb.Close()
		if cdb != nil {
			_ = cdb.Close()
		}
	}
	// What Open wrote (migrations, statistics) is durable before anything
	// else is written: the writer's connection syncs only at checkpoints.
	wal, err := openWAL(cfg.Path, cfg.Sync)
	if err == nil {
		err = wal.syncFile()
	}
	if err != nil {
		if wal != nil {
			_ = wal.close()
		}
		closeAll()
		return nil, fmt.Errorf("sqlite: open %s: write-ahead log: %w", cfg.Path, err)
	}
	s := &Store{path: cfg.Path, log: log, wdb: wdb, rdb: rdb, cdb: cdb, stmts: newStmtCache(wdb, maxCachedStmts), wal: wal,
		jobs: make(chan *job, maxJobs), commits: make(chan commit, 8), onFatal: cfg.OnFatal, onNoSpace: cfg.OnNoSpace,
		closing: make(chan struct{}), syncDone: make(chan struct{}), checkpointDone: make(chan struct{})}
	s.Calls = persistence.Calls{Writer: s}
	go s.writeLoop()
	go s.syncLoop()
	if cdb != nil {
		go s.checkpointLoop(cfg.Checkpoint, cfg.WALLimit)
	} else {
		close(s.checkpointDone)
	}
	log.Info("store opened", "path", cfg.Path, "migrations_applied", len(applied))
	return s, nil
}

// The roles of the store's connections.
const (
	roleWriter = iota
	roleReader
	roleCheckpointer
)

// dsn is the driver's data source name for path and a connection role.
// Every connection gets its pragmas from it, so a connection database/sql
// opens later is configured like the first.
func dsn(path string, role int) string {
	q := fmt.Sprintf("?_pragma=busy_timeout(%d)", busyTimeout)
	switch role {
	case roleWriter:
		// foreign_keys=OFF: the schema's REFERENCES are not enforced as the
		// writer writes. Every write goes through the decision core, which
		// writes a message's history, work and ledger with it and deletes
		// them before it (deletePurged); checking each reference again cost
		// a fifth of a purge's CPU (a probe of every child table per
		// message deleted, and a statement journal per DELETE) and ~3% of
		// an accept's (docs/performance.md). Postgres never declared
		// them, for the same reason. The store suite looks for orphans
		// instead, on both stores, after every case
		// (storetest.ReferenceChecker), where a path that left one would
		// show.
		// auto_vacuum=INCREMENTAL takes effect when the database is created
		// (before its first table; on an older database it is a no-op):
		// pages freed by a purge can then be given back by Compact. WAL lets
		// readers run beside the writer. synchronous=NORMAL: a
		// commit only writes its frames to the WAL; the syncer makes them
		// durable (writer.go) before anything that depends on them is
		// answered. Checkpoints are the checkpointer's (autocheckpoint 0),
		// so that the writer never waits for one; journal_size_limit
		// shrinks a WAL that a long read let grow. temp_store=MEMORY keeps
		// the writer's statement journals and its temporary b-trees in
		// memory rather than in temporary files (measured with foreign keys
		// checked, when a DELETE of hundreds of rows spilled its journal
		// past 64 KiB: ~12% of a purge's CPU and ~7% of an accept's,
		// docs/performance.md); their size is bounded by one
		// transaction's batch. IMMEDIATE takes the
		// write lock at BEGIN, so a transaction never fails halfway for
		// want of it.
		return path + q + "&_pragma=foreign_keys(0)&_pragma=auto_vacuum(INCREMENTAL)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(0)" +
			"&_pragma=journal_size_limit(67108864)&_pragma=temp_store(MEMORY)&_txlock=immediate"
	case roleCheckpointer:
		// Checkpoints sync the WAL before they copy it and the database
		// after (NORMAL does that much). No busy wait: a TRUNCATE
		// checkpoint that waited for a long reader would hold the writer
		// back meanwhile; without one it tries once and, when readers are
		// in the way, copies what it can as a PASSIVE one would.
		return path + "?_pragma=busy_timeout(0)&_pragma=synchronous(NORMAL)"
	}
	// The writer already switched the file to WAL (it is persistent).
	return path + q + "&_pragma=query_only(1)"
}

// Kind implements persistence.Store.
func (s *Store) Kind() string { return "sqlite" }

// Ping implements persistence.Store.
func (s *Store) Ping(ctx context.Context) error {
	const op = "ping"
	if err := s.check(op); err != nil {
		return err
	}
	if err := s.wdb.PingContext(ctx); err != nil {
		return s.fail(ctx, op, err)
	}
	if err := s.rdb.PingContext(ctx); err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}

// Close implements persistence.Store. Writes queued and not yet begun
// fail with ErrClosed; a transaction under way commits and is synced
// first. A second Close reports ErrClosed.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("sqlite: close: %w", persistence.ErrClosed)
	}
	close(s.closing)
	<-s.syncDone
	<-s.checkpointDone
	broken := s.broken() != nil
	if broken {
		holdWAL(s.path, s.log)
	}
	errs := []error{s.stmts.close(), s.rdb.Close(), s.wdb.Close(), s.wal.close()}
	if s.cdb != nil {
		errs = append(errs, s.cdb.Close())
	}
	if !broken && s.lock != nil {
		// A broken store keeps it, with the connection holdWAL keeps, to
		// the end of the process: no other opens the database meanwhile.
		errs = append(errs, s.lock.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: close: %v", flatten(err))
	}
	s.log.Info("store closed", "path", s.path)
	return nil
}

// heldWAL are the connections holdWAL keeps open to the end of the
// process.
var heldWAL struct {
	sync.Mutex
	conns []driver.Conn
}

// holdWAL keeps a connection to the database at path open for the rest of
// the process, so that the store's own connections close without a
// checkpoint. The last connection to close a WAL database copies the WAL
// into the database and deletes it; once an fsync failed, that would copy
// frames whose durability is unknown (and which the kernel may already
// have dropped: read back from disk they are stale) into the database
// through a descriptor that reports the sync a success. An open connection
// holds a shared lock on the database, so no other connection's close
// gets the exclusive lock a checkpoint needs: the WAL stays as it is, and
// the restart reads back what the disk holds. The process is stopping
// (the store broke); what is held is one file descriptor.
func holdWAL(path string, log *slog.Logger) {
	c, err := (&sqlitedriver.Driver{}).Open(dsn(path, roleReader))
	if err == nil {
		err = ping(c)
	}
	if err != nil {
		log.Warn("the broken store's WAL may be checkpointed as it closes", "err", err)
		if c != nil {
			_ = c.Close()
		}
		return
	}
	heldWAL.Lock()
	heldWAL.conns = append(heldWAL.conns, c)
	heldWAL.Unlock()
}

// ping reads on c, which takes its shared lock on the database.
func ping(c driver.Conn) error {
	q, ok := c.(driver.QueryerContext)
	if !ok {
		return errors.New("the driver's connection cannot query")
	}
	rows, err := q.QueryContext(context.Background(), "SELECT count(*) FROM sqlite_master", nil)
	if err != nil {
		return err
	}
	dest := make([]driver.Value, 1)
	err = rows.Next(dest)
	return errors.Join(err, rows.Close())
}

// check fails fast once the store is closed.
func (s *Store) check(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("sqlite: %s: %w", op, persistence.ErrClosed)
	}
	if err := s.broken(); err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return nil
}

// precheck fails a call of op on a closed store, or with the validator's
// verdict on its input (an ErrInvalid).
func (s *Store) precheck(op string, invalid error) error {
	if err := s.check(op); err != nil {
		return err
	}
	if invalid != nil {
		return fmt.Errorf("sqlite: %w", persistence.Invalid(invalid))
	}
	return nil
}

// fail turns an error from a store operation into what callers see: our
// sentinels and the context's errors stay in the chain; driver errors are
// flattened to text so nobody branches on a driver type. Every call's
// error passes here, so here Config.OnNoSpace is told.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	switch {
	case s.closed.Load():
		return fmt.Errorf("sqlite: %s: %w", op, persistence.ErrClosed)
	case ctx.Err() != nil:
		return fmt.Errorf("sqlite: %s: %w", op, ctx.Err())
	}
	err = fmt.Errorf("sqlite: %s: %w", op, flatten(err))
	if s.onNoSpace != nil && errors.Is(err, persistence.ErrNoSpace) {
		s.onNoSpace(err)
	}
	return err
}

// flatten replaces a driver error by its text; any other error (ours,
// database/sql's) is kept, so sentinels stay in the chain. A write that
// failed for want of room (SQLITE_FULL; SQLITE_READONLY, a file system
// mounted read-only) is persistence.ErrNoSpace.
func flatten(err error) error {
	var se *sqlitedriver.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteFull, sqliteReadOnly:
			return fmt.Errorf("%w: %s", persistence.ErrNoSpace, err.Error())
		}
		return errors.New(err.Error())
	}
	return err
}

// The primary result codes flatten knows (https://sqlite.org/rescode.html).
const (
	sqliteReadOnly = 8
	sqliteFull     = 13
)

// The extended result codes of SQLite's own failed fsyncs: of a file, of
// a directory (https://sqlite.org/rescode.html#ioerr_fsync).
const (
	sqliteIOErrFsync    = 1034
	sqliteIOErrDirFsync = 1290
)

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// read runs fn in one read transaction on the reader pool, so that the
// queries in it see one snapshot, and returns once every commit that
// snapshot may hold is durable (see awaitSynced): what a read returns
// leaves the process, and must not depend on a commit a power cut would
// undo.
func (s *Store) read(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if err := s.check(op); err != nil {
		return err
	}
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	err = fn(tx)
	_ = tx.Rollback()
	// What a read did not find is an answer built from the store too (a
	// 404 for a message whose purge is not yet durable): it waits for the
	// commits it may have seen as what it found does, and when they cannot
	// be made durable (the store broke) that error replaces the answer.
	if serr := s.awaitSynced(ctx); serr != nil {
		err = serr
	}
	if err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}

// toDB is t as stored: unix microseconds of its normalized value.
func toDB(t time.Time) int64 { return persistence.Normalize(t).UnixMicro() }

// fromDB is a stored time, in UTC.
func fromDB(us int64) time.Time { return time.UnixMicro(us).UTC() }

// dropSamples deletes the value samples ANALYZE keeps in sqlite_stat4 (the
// driver is built with SQLITE_ENABLE_STAT4) and reloads the statistics, so
// that only sqlite_stat1's row counts guide the planner. With samples, a
// plan that a bound value could change (the claim's due_at <= now, a
// range over created_at) marks its statement expired on every new binding,
// and SQLite parses and plans it again on each run: after a restart on a
// database with data, re-preparing took over half of the store's CPU. Our
// hot statements have one right plan whatever the values, which the plan
// tests pin.
func dropSamples(ctx context.Context, db *sql.DB) error {
	var n int
	err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_stat4'").Scan(&n)
	if err != nil || n == 0 {
		return err
	}
	_, err = db.ExecContext(ctx, "DELETE FROM sqlite_stat4; ANALYZE sqlite_schema")
	return err
}
