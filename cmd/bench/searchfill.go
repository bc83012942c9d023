package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/persistence"
)

// The search figures' store is filled in bulk: Accept stores 8,000 (shared
// store) to 21,000 (embedded) messages a second, so 10 million would take
// 8 to 20 minutes of a run. The bulk fill writes the rows Accept writes for
// the same messages (persistence.NewRow, the columns of each store's
// accept), with seq drawn in input order and the state counters raised as
// Accept raises them, but it drops the table's secondary indexes first and
// builds them again from their own definitions afterwards (sorted once
// instead of 10 million B-tree inserts each), and it writes through a
// connection of its own: on SQLite without waiting for the disk, in
// transactions of searchFillTx rows, on Postgres in one COPY.
// TestBulkFillMatchesAccept holds its rows, indexes, counters and search
// answers to those of Accept.

// searchFillTx is how many rows an SQLite fill transaction writes (a
// multiple of searchBatch; the test makes it small).
var searchFillTx int64 = 100_000

// fillChunk is how many rows one INSERT of the SQLite fill writes (24
// parameters a row: SQLite takes 32,766).
const fillChunk = 500

// fillColumns are the messages columns Accept writes (both stores; seq is
// drawn by the store, the others keep their defaults).
var fillColumns = []string{"id", "token", "source_msisdn", "destination_msisdn", "body", "state", "source_smsc", "dest_smsc", "frontend",
	"attempts", "created_at", "updated_at", "submitted_at", "queued_at", "report_to", "history_len", "first_state", "first_detail",
	"data_coding", "body_binary", "validity_until", "deliver_after", "submitted_by", "traceparent"}

// fillValues are the values of fillColumns for a message accepted at at,
// times as the store keeps them (at converts one; nil stays NULL).
func fillValues(nm persistence.NewMessage, at time.Time, conv func(*time.Time) any) []any {
	r := persistence.NewRow(nm, at)
	return []any{r.ID, int64(r.Token), r.SourceMSISDN, r.DestinationMSISDN, r.Body, string(r.State), r.SourceSMSC, r.DestSMSC, r.Frontend,
		r.Attempts, conv(&r.CreatedAt), conv(&r.UpdatedAt), conv(&r.SubmittedAt), conv(r.QueuedAt), r.ReportTo, r.HistoryLen,
		string(r.State), nm.Detail, string(r.DataCoding), r.Binary, conv(r.ValidityUntil), conv(r.DeliverAfter), r.SubmittedBy, r.Trace}
}

// fillReport is what a bulk fill took.
type fillReport struct {
	rows, indexes time.Duration // writing the rows, building the indexes again
	count         persistence.Counts
}

// countBatch adds the counters' deltas of accepting batch (no message of
// the fill carries work).
func countBatch(c persistence.Counts, batch []persistence.NewMessage) {
	for _, nm := range batch {
		c.State(nm.State, 1)
	}
}

// fillSQLite bulk-fills the SQLite database at path (the store holding it
// stays open and idle meanwhile).
func fillSQLite(ctx context.Context, path string, rows int64) (fillReport, error) {
	rep := fillReport{count: persistence.Counts{}}
	// For the fill's connection only: it does not wait for the disk (a
	// crash would lose the bench's data, nothing else), and it sorts the
	// indexes it builds in memory (a few hundred MB at 10M rows).
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=synchronous(OFF)"+
		"&_pragma=cache_size(-262144)&_pragma=temp_store(MEMORY)")
	if err != nil {
		return rep, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ixs, err := queryPairs(db.QueryContext(ctx, `SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'messages' AND sql IS NOT NULL`))
	if err != nil {
		return rep, err
	}
	for _, ix := range ixs {
		if _, err := db.ExecContext(ctx, "DROP INDEX "+ix[0]); err != nil {
			return rep, err
		}
	}
	start := time.Now()
	micros := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		return t.UnixMicro()
	}
	// Each transaction writes searchFillTx rows, fillChunk a statement (the
	// statements of a transaction are prepared once, by row count).
	var tx *sql.Tx
	var stmts map[int]*sql.Stmt
	args := make([]any, 0, fillChunk*len(fillColumns))
	written := int64(0)
	err = searchBatches(rows, func(at time.Time, batch []persistence.NewMessage) error {
		if tx == nil {
			var err error
			if tx, err = db.BeginTx(ctx, nil); err != nil {
				return err
			}
			stmts = map[int]*sql.Stmt{}
		}
		for lo := 0; lo < len(batch); lo += fillChunk {
			part := batch[lo:min(lo+fillChunk, len(batch))]
			stmt, ok := stmts[len(part)]
			if !ok {
				var err error
				tuple := "(?" + strings.Repeat(", ?", len(fillColumns)-1) + ")"
				if stmt, err = tx.PrepareContext(ctx, `INSERT INTO messages (`+strings.Join(fillColumns, ", ")+`) VALUES `+
					tuple+strings.Repeat(", "+tuple, len(part)-1)); err != nil {
					return err
				}
				stmts[len(part)] = stmt
			}
			args = args[:0]
			for _, nm := range part {
				args = append(args, fillValues(nm, at, micros)...)
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				return err
			}
		}
		countBatch(rep.count, batch)
		if written += int64(len(batch)); written%searchFillTx == 0 {
			t := tx
			tx = nil
			return t.Commit()
		}
		return nil
	})
	if err == nil && tx == nil {
		tx, err = db.BeginTx(ctx, nil)
	}
	if err != nil {
		if tx != nil {
			_ = tx.Rollback()
		}
		return rep, err
	}
	// The counters as Accept keeps them (persistence.Counts), in the last
	// transaction.
	for _, d := range rep.count.Sorted() {
		if _, err := tx.ExecContext(ctx, `INSERT INTO counters (of, key, n) VALUES (?, ?, ?)
			ON CONFLICT (of, key) DO UPDATE SET n = n + excluded.n`, d.Of, d.Key, d.N); err != nil {
			_ = tx.Rollback()
			return rep, err
		}
	}
	if err := tx.Commit(); err != nil {
		return rep, err
	}
	rep.rows = time.Since(start)
	start = time.Now()
	for _, ix := range ixs {
		if _, err := db.ExecContext(ctx, ix[1]); err != nil {
			return rep, fmt.Errorf("index %s: %w", ix[0], err)
		}
	}
	rep.indexes = time.Since(start)
	_, err = db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	return rep, err
}

// queryPairs reads a query's rows of two strings.
func queryPairs(rows *sql.Rows, err error) ([][2]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var p [2]string
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// fillPostgres bulk-fills the messages table of the DSN's schema.
func fillPostgres(ctx context.Context, dsn string, rows int64) (fillReport, error) {
	rep := fillReport{count: persistence.Counts{}}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return rep, err
	}
	defer conn.Close(context.Background())
	// The indexes that are not constraints (the primary key on id and
	// seq's uniqueness stay: their keys arrive in order).
	r, err := conn.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'messages'
		AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = 'messages'::regclass) ORDER BY indexname`)
	if err != nil {
		return rep, err
	}
	ixs, err := pgx.CollectRows(r, func(row pgx.CollectableRow) (ix [2]string, err error) {
		return ix, row.Scan(&ix[0], &ix[1])
	})
	if err != nil {
		return rep, err
	}
	for _, ix := range ixs {
		if _, err := conn.Exec(ctx, "DROP INDEX "+pgx.Identifier{ix[0]}.Sanitize()); err != nil {
			return rep, err
		}
	}
	start := time.Now()
	// The rows as one stream of batches (a goroutine makes them; COPY
	// pulls them one at a time).
	type row struct {
		at time.Time
		nm persistence.NewMessage
	}
	next := make(chan []row, 4)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(next)
		_ = searchBatches(rows, func(at time.Time, batch []persistence.NewMessage) error {
			b := make([]row, len(batch))
			for i, nm := range batch {
				b[i] = row{at, nm}
			}
			countBatch(rep.count, batch)
			select {
			case next <- b:
				return nil
			case <-done:
				return context.Canceled
			}
		})
	}()
	var cur []row
	stamp := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		return *t
	}
	// The rows and the counters' deltas in one transaction, as Accept.
	tx, err := conn.Begin(ctx)
	if err != nil {
		return rep, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"messages"}, fillColumns, pgx.CopyFromFunc(func() ([]any, error) {
		if len(cur) == 0 {
			var ok bool
			if cur, ok = <-next; !ok {
				return nil, nil
			}
		}
		x := cur[0]
		cur = cur[1:]
		return fillValues(x.nm, x.at, stamp), nil
	})); err != nil {
		return rep, err
	}
	// The counters' deltas as Accept appends them (postgres/counts.go);
	// the generator has counted every batch once COPY read the last.
	for _, d := range rep.count.Sorted() {
		if _, err := tx.Exec(ctx, `INSERT INTO counter_deltas (of, key, n) VALUES ($1, $2, $3)`, d.Of, d.Key, d.N); err != nil {
			return rep, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return rep, err
	}
	rep.rows = time.Since(start)
	start = time.Now()
	if _, err := conn.Exec(ctx, "SET maintenance_work_mem = '256MB'"); err != nil {
		return rep, err
	}
	for _, ix := range ixs {
		if _, err := conn.Exec(ctx, ix[1]); err != nil {
			return rep, fmt.Errorf("index %s: %w", ix[0], err)
		}
	}
	rep.indexes = time.Since(start)
	return rep, nil
}
