package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// maxCachedStmts bounds the writer's statement cache. The hot writes have a
// few dozen shapes (multi-row inserts differ by row count, and batches rarely
// exceed a few hundred rows); beyond the bound a statement is prepared for
// its one use, as without a cache.
const maxCachedStmts = 1024

// stmtCache keeps the writer's statements prepared. SQLite has no statement
// cache of its own, and parsing and compiling every statement of every write
// transaction cost about a sixth of the store's CPU on the ingest path.
// Statements are prepared on the writer *sql.DB, whose single connection
// every write transaction uses, between transactions (see cachedTx).
type stmtCache struct {
	db    *sql.DB
	limit int

	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB, limit int) *stmtCache {
	return &stmtCache{db: db, limit: limit, stmts: map[string]*sql.Stmt{}}
}

// get returns the cached statement for query, or nil when it is not
// prepared yet.
func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

// prepare prepares queries that were missed. It must run outside a write
// transaction: preparing on the writer *sql.DB takes its only connection.
func (c *stmtCache) prepare(ctx context.Context, queries []string) error {
	for _, q := range queries {
		c.mu.Lock()
		_, ok := c.stmts[q]
		full := len(c.stmts) >= c.limit
		c.mu.Unlock()
		if ok || full {
			continue
		}
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		c.mu.Lock()
		if _, ok := c.stmts[q]; ok {
			_ = st.Close()
		} else {
			c.stmts[q] = st
		}
		c.mu.Unlock()
	}
	return nil
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, st := range c.stmts {
		errs = append(errs, st.Close())
	}
	c.stmts = map[string]*sql.Stmt{}
	return errors.Join(errs...)
}

// cachedTx is a write transaction whose statements come from the cache.
// A statement not cached yet runs as usual and is noted in missed, to be
// prepared once the transaction has ended.
//
// Its statements run to their end whatever context a job passes: the
// transaction is shared by every job of the writer's round, and a
// statement interrupted because one caller's context ended makes SQLite
// roll the whole transaction back, every other job's work with it (a
// client that hung up would fail everyone's group commit). A job whose
// context has ended is not run (batch.run checks before it starts); one
// that is running finishes, and its caller still waits for its answer.
// Without a context that can end, neither database/sql nor the driver
// starts a goroutine per statement to watch it either.
type cachedTx struct {
	tx     *sql.Tx
	stmts  *stmtCache
	missed *[]string
}

// stmt is the transaction's handle on the cached statement, or nil.
// Tx.StmtContext prepares a statement on the transaction's connection once
// and reuses it there after; the writer has one connection.
func (t cachedTx) stmt(query string) *sql.Stmt {
	st := t.stmts.get(query)
	if st == nil {
		*t.missed = append(*t.missed, query)
		return nil
	}
	return t.tx.StmtContext(context.Background(), st)
}

// ExecContext runs query in the transaction; the context is not the
// statement's (see cachedTx).
func (t cachedTx) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	ctx := context.Background()
	if st := t.stmt(query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryContext runs query in the transaction; the context is not the
// statement's (see cachedTx).
func (t cachedTx) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx := context.Background()
	if st := t.stmt(query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query in the transaction; the context is not the
// statement's (see cachedTx).
func (t cachedTx) QueryRowContext(_ context.Context, query string, args ...any) *sql.Row {
	ctx := context.Background()
	if st := t.stmt(query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, query, args...)
}
