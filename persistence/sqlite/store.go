package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
// writes queue for its one writer connection, reads use a pool.
type Store struct {
	path   string
	log    *slog.Logger
	wdb    *sql.DB    // exactly one connection, BEGIN IMMEDIATE
	rdb    *sql.DB    // readers, query_only
	stmts  *stmtCache // prepared statements of the writer
	closed atomic.Bool
}

var _ persistence.Store = (*Store)(nil)

// Open opens (creating when missing) the database at cfg.Path and applies
// the migrations it lacks.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	log := cfg.Logger.With("component", "store", "store", "sqlite")

	wdb, err := sql.Open("sqlite", dsn(cfg.Path, true))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %v", err)
	}
	// One connection: SQLite has one writer anyway, and queueing in
	// database/sql is cheaper and fairer than SQLITE_BUSY retries.
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
	// stays cheap on a large database (SQLite's advice for long-lived
	// connections). Only a slower plan is at stake, so a failure is logged.
	if _, err := wdb.ExecContext(ctx, "PRAGMA optimize=0x10002"); err != nil {
		log.Warn("optimize failed", "err", flatten(err))
	}

	rdb, err := sql.Open("sqlite", dsn(cfg.Path, false))
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
	log.Info("store opened", "path", cfg.Path, "migrations_applied", len(applied))
	return &Store{path: cfg.Path, log: log, wdb: wdb, rdb: rdb, stmts: newStmtCache(wdb, maxCachedStmts)}, nil
}

// dsn is the driver's data source name for path. Every connection gets its
// pragmas from it, so a connection database/sql opens later is configured
// like the first.
func dsn(path string, writer bool) string {
	q := fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)", busyTimeout)
	if writer {
		// WAL lets readers run beside the writer; FULL syncs the WAL at every
		// commit, so an acknowledged message survives power loss. IMMEDIATE
		// takes the write lock at BEGIN, so a transaction never fails halfway
		// for want of it.
		return path + q + "&_pragma=journal_mode(WAL)&_txlock=immediate"
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

// Close implements persistence.Store. A second Close reports ErrClosed.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("sqlite: close: %w", persistence.ErrClosed)
	}
	// No statement runs here: the writer connection may be busy, and Close
	// must not wait for it. database/sql closes busy connections when they
	// are returned.
	err := errors.Join(s.stmts.close(), s.rdb.Close(), s.wdb.Close())
	if err != nil {
		return fmt.Errorf("sqlite: close: %v", flatten(err))
	}
	s.log.Info("store closed", "path", s.path)
	return nil
}

// check fails fast once the store is closed.
func (s *Store) check(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("sqlite: %s: %w", op, persistence.ErrClosed)
	}
	return nil
}

// precheck fails a call of op on a closed store, or with the validator's
// verdict on its input.
func (s *Store) precheck(op string, invalid error) error {
	if err := s.check(op); err != nil {
		return err
	}
	if invalid != nil {
		return fmt.Errorf("sqlite: %w", invalid)
	}
	return nil
}

// fail turns an error from a store operation into what callers see: our
// sentinels and the context's errors stay in the chain; driver errors are
// flattened to text so nobody branches on a driver type.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	switch {
	case s.closed.Load():
		return fmt.Errorf("sqlite: %s: %w", op, persistence.ErrClosed)
	case ctx.Err() != nil:
		return fmt.Errorf("sqlite: %s: %w", op, ctx.Err())
	}
	return fmt.Errorf("sqlite: %s: %w", op, flatten(err))
}

// flatten replaces a driver error by its text; any other error (ours,
// database/sql's) is kept, so sentinels stay in the chain.
func flatten(err error) error {
	var se *sqlitedriver.Error
	if errors.As(err, &se) {
		return errors.New(err.Error())
	}
	return err
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// write runs fn in one write transaction (BEGIN IMMEDIATE on the writer
// connection) and commits it, or rolls back when fn fails.
func (s *Store) write(ctx context.Context, op string, fn func(tx querier) error) error {
	if err := s.check(op); err != nil {
		return err
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	var missed []string
	err = fn(cachedTx{tx: tx, stmts: s.stmts, missed: &missed})
	if err != nil {
		_ = tx.Rollback()
	} else {
		err = tx.Commit()
	}
	if err != nil {
		return s.fail(ctx, op, err)
	}
	// Statements this transaction parsed are kept prepared for the next.
	// A failure here costs only speed.
	if err := s.stmts.prepare(ctx, missed); err != nil {
		s.log.Debug("statement not cached", "op", op, "err", err)
	}
	return nil
}

// read runs fn in one read transaction on the reader pool, so that the
// queries in it see one snapshot.
func (s *Store) read(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if err := s.check(op); err != nil {
		return err
	}
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}

// toDB is t as stored: unix microseconds of its normalized value.
func toDB(t time.Time) int64 { return persistence.Normalize(t).UnixMicro() }

// fromDB is a stored time, in UTC.
func fromDB(us int64) time.Time { return time.UnixMicro(us).UTC() }
