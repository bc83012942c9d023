package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/postgres"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// The search figures (measured once, on each store):
//
//	search-<store>         a search by destination number on a store
//	                       holding --search-rows messages (median ms of
//	                       searchQueries queries, each a page of 50: an
//	                       exact number; search-prefix-<store> a prefix of
//	                       100 numbers (~1,000 messages); search-time-<store>
//	                       a window of acceptance time holding ~2,000
//	                       messages); baseline = the same exact search
//	                       without the index (a full scan).
//	search-ingest-<store>  Accept rate (rows/s, batches of 512 like the
//	                       intake's group commits) with the search indexes,
//	                       against the same store with them dropped: what
//	                       the indexes cost ingest (ratio < 1).
//
// The messages go to searchNumbers distinct destinations (~10 a number at
// 10M rows) under a few country prefixes, and are accepted over a day; the
// store is filled in bulk with the rows Accept would write (searchfill.go).

const (
	searchBatch   = 1000
	searchQueries = 25
	// searchSpan is the acceptance time the fill spreads its rows over,
	// from searchStart.
	searchSpan = 24 * time.Hour
)

// searchStart is when the fill's first message is accepted.
var searchStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// searchResult is the figures of one store.
type searchResult struct {
	store                    string
	rows                     int64
	fill                     time.Duration // the bulk fill, of which:
	fillRows, fillIndexes    time.Duration // its rows, then its indexes
	bytes                    int64         // the store's size on disk once filled
	exact, prefix, minute    time.Duration // medians
	scan                     time.Duration // the exact search without its index
	ingest, ingestBare       float64       // rows/s with and without the search indexes
	exactRows, prefixRows    int
	minuteRows, scanRowsSeen int
}

// searchStore is a store under measurement and a raw connection to the
// same data for what the store does not offer (dropping indexes, the
// planner's statistics, the forced scan).
type searchStore struct {
	store persistence.Store
	// fill bulk-fills the store with the messages of searchBatches.
	fill func(ctx context.Context, rows int64) (fillReport, error)
	// scan runs the exact search for number without an index.
	scan func(ctx context.Context, number string) (int, error)
	// exec runs a statement on the raw connection; analyze is the
	// statement that updates the planner's statistics, as a store filled
	// for a while has them (autovacuum, SQLite's optimize).
	exec    func(ctx context.Context, sql string) error
	analyze string
	// rows reads a query's rows on the raw connection (the test that holds
	// the bulk fill to Accept compares the two stores' tables with it).
	rows  func(ctx context.Context, sql string) ([][]any, error)
	close func() error
}

// bare drops the search indexes of s.
func (s *searchStore) bare(ctx context.Context) error {
	for _, ix := range searchIndexes {
		if err := s.exec(ctx, "DROP INDEX "+ix); err != nil {
			return err
		}
	}
	return nil
}

// runSearch measures both stores (Postgres only when pg is set).
func runSearch(o options, dir string, pg *pgServer, out io.Writer) ([]searchResult, error) {
	var res []searchResult
	opens := []struct {
		name string
		open func(tag string) (*searchStore, error)
	}{{"sqlite", func(tag string) (*searchStore, error) { return openSearchSQLite(filepath.Join(dir, tag)) }}}
	if pg != nil {
		opens = append(opens, struct {
			name string
			open func(tag string) (*searchStore, error)
		}{"postgres", func(string) (*searchStore, error) { return openSearchPostgres(pg) }})
	}
	for _, st := range opens {
		r := searchResult{store: st.name, rows: o.searchRows}
		var err error
		if r.ingest, r.ingestBare, err = searchIngest(o, st.open); err != nil {
			return nil, fmt.Errorf("%s: ingest: %w", st.name, err)
		}
		fmt.Fprintf(out, "# search-ingest-%s: %.0f rows/s with the search indexes, %.0f without\n", st.name, r.ingest, r.ingestBare)
		s, err := st.open("fill")
		if err != nil {
			return nil, err
		}
		err = searchFill(s, &r)
		if err == nil {
			err = s.exec(context.Background(), s.analyze)
		}
		var stats persistence.Stats
		if err == nil {
			stats, err = s.store.Stats(context.Background())
		}
		if err == nil {
			r.bytes = stats.StoreBytes
			fmt.Fprintf(out, "# search-%s: %d messages bulk-filled in %v (rows %v, indexes built again %v; ANALYZE after); store size %.2f GB (%.0f bytes a message)\n",
				st.name, r.rows, r.fill.Round(time.Second), r.fillRows.Round(time.Second), r.fillIndexes.Round(time.Second),
				float64(r.bytes)/1e9, float64(r.bytes)/float64(r.rows))
			err = searchMeasure(s, &r)
		}
		if cerr := s.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
		res = append(res, r)
	}
	return res, nil
}

// searchNumbers is how many distinct destinations the fill uses.
func searchNumbers(rows int64) int64 { return max(rows/10, 100) }

// searchNumber is the i-th destination: 12 digits under one of 4 country
// codes.
func searchNumber(i int64) string {
	return fmt.Sprintf("%d%010d", []int{44, 33, 49, 1}[i%4], 7000000000+i)
}

// searchMessage is a message of a fill with the given id.
func searchMessage(id string, rng *rand.Rand, numbers int64) persistence.NewMessage {
	return persistence.NewMessage{
		ID: id, SourceMSISDN: fmt.Sprintf("1555%06d", rng.IntN(1000)),
		DestinationMSISDN: "+" + searchNumber(rng.Int64N(numbers)), Body: "search bench message body, about the size of an SMS",
		SourceSMSC: "bench", DestSMSC: "bench", Frontend: "fe", State: messages.StatePending, Detail: "accepted",
	}
}

// searchBatches makes the messages of a fill of rows, in batches of
// searchBatch that share their acceptance time (at), spread over
// searchSpan, and passes each to f. The ids are numbered in order, as an
// id that grows with time would be.
func searchBatches(rows int64, f func(at time.Time, batch []persistence.NewMessage) error) error {
	rng := rand.New(rand.NewPCG(1, 2))
	numbers := searchNumbers(rows)
	batch := make([]persistence.NewMessage, 0, searchBatch)
	for i := int64(0); i < rows; i += searchBatch {
		batch = batch[:0]
		for j := i; j < min(i+searchBatch, rows); j++ {
			batch = append(batch, searchMessage(fmt.Sprintf("m-%010d", j), rng, numbers))
		}
		if err := f(searchStart.Add(time.Duration(float64(searchSpan)*float64(i)/float64(rows))), batch); err != nil {
			return err
		}
	}
	return nil
}

// searchFill bulk-fills the store with r.rows messages (searchfill.go).
func searchFill(s *searchStore, r *searchResult) error {
	start := time.Now()
	rep, err := s.fill(context.Background(), r.rows)
	if err != nil {
		return err
	}
	r.fill, r.fillRows, r.fillIndexes = time.Since(start), rep.rows, rep.indexes
	return nil
}

// searchMeasure times the searches and the full scan.
func searchMeasure(s *searchStore, r *searchResult) error {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	numbers := searchNumbers(r.rows)
	t0 := searchStart
	// A time window holding two batches of the fill (which share their
	// acceptance time): ~2,000 messages, under 20 s at 10M a day.
	window := max(time.Duration(float64(searchSpan)*2*searchBatch/float64(r.rows)), time.Second)
	timed := func(q persistence.ListQuery) (time.Duration, int, error) {
		start := time.Now()
		p, err := s.store.ListMessages(ctx, q)
		return time.Since(start), len(p.Messages), err
	}
	var exact, prefix, minute, scan []time.Duration
	for range searchQueries {
		n := searchNumber(rng.Int64N(numbers))
		d, rows, err := timed(persistence.ListQuery{Limit: 50, Destination: persistence.NumberMatch{Key: n}})
		if err != nil {
			return err
		}
		exact, r.exactRows = append(exact, d), r.exactRows+rows
		d, rows, err = timed(persistence.ListQuery{Limit: 50, Destination: persistence.NumberMatch{Key: n[:len(n)-2], Prefix: true}})
		if err != nil {
			return err
		}
		prefix, r.prefixRows = append(prefix, d), r.prefixRows+rows
		since := t0.Add(time.Duration(rng.Int64N(int64(searchSpan - window))))
		d, rows, err = timed(persistence.ListQuery{Limit: 50, Since: since, Until: since.Add(window)})
		if err != nil {
			return err
		}
		minute, r.minuteRows = append(minute, d), r.minuteRows+rows
	}
	// The scan reads the whole table each time: a few suffice.
	for range 3 {
		start := time.Now()
		rows, err := s.scan(ctx, searchNumber(rng.Int64N(numbers)))
		if err != nil {
			return err
		}
		scan, r.scanRowsSeen = append(scan, time.Since(start)), r.scanRowsSeen+rows
	}
	r.exact, r.prefix, r.minute, r.scan = medianDur(exact), medianDur(prefix), medianDur(minute), medianDur(scan)
	return nil
}

// searchIngest measures Accept's rate with and without the search indexes,
// alternating fresh stores for the measurement time of each.
func searchIngest(o options, open func(tag string) (*searchStore, error)) (with, without float64, err error) {
	var rates [2][]float64
	for rep := range 3 {
		for k, bare := range []bool{false, true} {
			s, err := open(fmt.Sprintf("ingest-%d-%d", rep, k))
			if err != nil {
				return 0, 0, err
			}
			if bare {
				err = s.bare(context.Background())
			}
			var rate float64
			if err == nil {
				rate, err = acceptRate(s.store, o.window)
			}
			if cerr := s.close(); err == nil {
				err = cerr
			}
			if err != nil {
				return 0, 0, err
			}
			rates[k] = append(rates[k], rate)
		}
	}
	return median(rates[0]), median(rates[1]), nil
}

// acceptRate accepts batches of 512 for window and returns rows/s.
func acceptRate(st persistence.Store, window time.Duration) (float64, error) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	start, n := time.Now(), int64(0)
	// A store creates a message for local delivery only while its
	// frontend is registered.
	if err := st.PutFrontend(ctx, persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: start, UpdatedAt: start}); err != nil {
		return 0, err
	}
	batch := make([]persistence.NewMessage, 512)
	for time.Since(start) < window {
		for j := range batch {
			batch[j] = searchMessage(fmt.Sprintf("i-%d", n+int64(j)), rng, 100000)
			batch[j].Work = &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe"}
		}
		if _, err := st.Accept(ctx, time.Now(), batch); err != nil {
			return 0, err
		}
		n += int64(len(batch))
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// searchIndexes are the indexes of migration 0006 that serve the search.
var searchIndexes = []string{"messages_destination", "messages_source", "messages_created"}

func openSearchSQLite(dir string) (*searchStore, error) {
	cfg := sqlite.DefaultConfig()
	cfg.Path = filepath.Join(dir, "switchboard.db")
	st, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+cfg.Path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		st.Close()
		return nil, err
	}
	return &searchStore{store: st,
		fill: func(ctx context.Context, rows int64) (fillReport, error) { return fillSQLite(ctx, cfg.Path, rows) },
		scan: func(ctx context.Context, number string) (int, error) {
			return countRows(db.QueryContext(ctx, `SELECT id FROM messages NOT INDEXED WHERE ltrim(destination_msisdn, '+') = ?
				ORDER BY seq DESC LIMIT 50`, number))
		},
		exec: func(ctx context.Context, sql string) error {
			_, err := db.ExecContext(ctx, sql)
			return err
		},
		analyze: "ANALYZE",
		rows: func(ctx context.Context, query string) ([][]any, error) {
			rows, err := db.QueryContext(ctx, query)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			cols, err := rows.Columns()
			if err != nil {
				return nil, err
			}
			var out [][]any
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					return nil, err
				}
				out = append(out, vals)
			}
			return out, rows.Err()
		},
		close: func() error { db.Close(); return st.Close() },
	}, nil
}

func openSearchPostgres(pg *pgServer) (*searchStore, error) {
	dsn, _, drop, err := pg.schema("sb_search")
	if err != nil {
		return nil, err
	}
	cfg := postgres.DefaultConfig()
	cfg.DSN = dsn
	st, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		_ = drop()
		return nil, err
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		st.Close()
		_ = drop()
		return nil, err
	}
	return &searchStore{store: st,
		fill: func(ctx context.Context, rows int64) (fillReport, error) { return fillPostgres(ctx, dsn, rows) },
		scan: func(ctx context.Context, number string) (int, error) {
			// The same search with the index turned off for this one
			// statement's transaction.
			tx, err := conn.Begin(ctx)
			if err != nil {
				return 0, err
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_indexonlyscan = off"); err != nil {
				return 0, err
			}
			rows, err := tx.Query(ctx, `SELECT id FROM messages WHERE (ltrim(destination_msisdn, '+') COLLATE "C") = $1
				ORDER BY seq DESC LIMIT 50`, number)
			if err != nil {
				return 0, err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			return len(ids), err
		},
		exec: func(ctx context.Context, sql string) error {
			_, err := conn.Exec(ctx, sql)
			return err
		},
		analyze: "ANALYZE messages",
		rows: func(ctx context.Context, query string) ([][]any, error) {
			rows, err := conn.Query(ctx, query)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
		},
		close: func() error {
			conn.Close(context.Background())
			st.Close()
			return drop()
		},
	}, nil
}

// countRows counts the rows of a query.
func countRows(rows *sql.Rows, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// medianDur is the median of ds.
func medianDur(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// printSearch prints the search figures' lines.
func printSearch(out io.Writer, res []searchResult) {
	for _, r := range res {
		avg := func(n int) float64 { return float64(n) / float64(searchQueries) }
		fmt.Fprintf(out, "# search-%s (%d messages, measured once; median ms of %d queries, page of 50): exact number %.2f (%.1f rows), prefix of 100 numbers %.2f (%.1f rows), "+
			"a time window of ~2,000 messages %.2f (%.1f rows); the exact search without its index (a full scan) %.1f\n",
			r.store, r.rows, searchQueries, ms(r.exact), avg(r.exactRows), ms(r.prefix), avg(r.prefixRows), ms(r.minute), avg(r.minuteRows), ms(r.scan))
		fmt.Fprintf(out, "bench: search-%s %.3f ms baseline=%.1f ratio=%.5f\n", r.store, ms(r.exact), ms(r.scan), ratioOf(ms(r.exact), ms(r.scan)))
		fmt.Fprintf(out, "bench: search-prefix-%s %.3f ms baseline=%.1f ratio=%.5f\n", r.store, ms(r.prefix), ms(r.scan), ratioOf(ms(r.prefix), ms(r.scan)))
		fmt.Fprintf(out, "bench: search-time-%s %.3f ms baseline=%.1f ratio=%.5f\n", r.store, ms(r.minute), ms(r.scan), ratioOf(ms(r.minute), ms(r.scan)))
		fmt.Fprintf(out, "# search-ingest-%s: Accept in batches of 512 with the search indexes against the same store without them (what the indexes cost ingest; ratio < 1)\n", r.store)
		fmt.Fprintf(out, "bench: search-ingest-%s %s rows/s baseline=%s ratio=%.3f\n", r.store, rateText(r.ingest), rateText(r.ingestBare), ratioOf(r.ingest, r.ingestBare))
	}
}

func ratioOf(v, base float64) float64 {
	if base == 0 {
		return 0
	}
	return v / base
}
