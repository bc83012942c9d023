package sqlite

import (
	"context"
	"database/sql"
	"os"

	"github.com/switchboard-dev/switchboard/persistence"
)

// The maintained counts (persistence.Counts) live in the counters table,
// one row per counter. The store has one writer, so the transaction that
// makes a change adds its deltas to the rows themselves: no row is hot for
// anyone else.

// writeCounts adds a transaction's deltas to the counters (one statement).
func writeCounts(ctx context.Context, q querier, c persistence.Counts) error {
	if len(c) == 0 {
		return nil
	}
	d := c.Sorted()
	args := make([]any, 0, 3*len(d))
	for _, x := range d {
		args = append(args, x.Of, x.Key, x.N)
	}
	return chunks(len(d), func(lo, hi int) error {
		_, err := q.ExecContext(ctx, `INSERT INTO counters (of, key, n) VALUES `+tuples(hi-lo, 3)+
			` ON CONFLICT (of, key) DO UPDATE SET n = n + excluded.n`, args[3*lo:3*hi]...)
		return err
	})
}

// readCounts reads every counter (those that read 0 are left out).
func readCounts(ctx context.Context, q querier) (persistence.Counts, error) {
	rows, err := q.QueryContext(ctx, `SELECT of, key, n FROM counters`)
	if err != nil {
		return nil, err
	}
	c := persistence.Counts{}
	err = scanEach(rows, func(r *sql.Rows) error {
		var k persistence.Counter
		var n int64
		err := r.Scan(&k.Of, &k.Key, &n)
		if n != 0 {
			c[k] = n
		}
		return err
	})
	return c, err
}

// fileBytes is the size on disk of the database and its write-ahead log.
func (s *Store) fileBytes() int64 {
	var n int64
	for _, p := range []string{s.path, s.path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
