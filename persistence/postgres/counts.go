package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/persistence"
)

// The maintained counts (persistence.Counts). Every instance of a site
// writes them, so a transaction appends its deltas to counter_deltas
// instead of updating the counter rows, which every instance's
// transactions would queue on; foldSQL (Compact, run by the janitor) moves
// the deltas into counters. A count is the sum of both, read in one
// statement (one snapshot): exact whenever it is read.

const (
	countsSQL     = `INSERT INTO counter_deltas (of, key, n) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])`
	readCountsSQL = `SELECT of, key, sum(n)::bigint FROM (
	SELECT of, key, n FROM counters UNION ALL SELECT of, key, n FROM counter_deltas) t GROUP BY of, key`
	// foldSQL folds the deltas it sees into the counters; deltas committed
	// meanwhile stay for the next fold.
	foldSQL = `WITH d AS (DELETE FROM counter_deltas RETURNING of, key, n)
INSERT INTO counters (of, key, n) SELECT of, key, sum(n) FROM d GROUP BY of, key
ON CONFLICT (of, key) DO UPDATE SET n = counters.n + excluded.n`
)

// queueCounts queues the statement that records a transaction's deltas.
func queueCounts(b *pgx.Batch, c persistence.Counts) {
	if len(c) == 0 {
		return
	}
	d := c.Sorted()
	ofs, keys, ns := make([]string, len(d)), make([]string, len(d)), make([]int64, len(d))
	for i, x := range d {
		ofs[i], keys[i], ns[i] = x.Of, x.Key, x.N
	}
	b.Queue(countsSQL, ofs, keys, ns)
}

// scanCounts reads readCountsSQL's rows into c (counters that read 0 are
// left out).
func scanCounts(c persistence.Counts) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		for rows.Next() {
			var k persistence.Counter
			var n int64
			if err := rows.Scan(&k.Of, &k.Key, &n); err != nil {
				return err
			}
			if n != 0 {
				c[k] = n
			}
		}
		return rows.Err()
	}
}
