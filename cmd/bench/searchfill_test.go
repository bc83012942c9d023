package main

import (
	"cmp"
	"context"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// TestBulkFillMatchesAccept: the search figures' bulk fill stores what
// Accept stores for the same messages, on each store: the same rows (every
// column, seq included), the same indexes, the same counts, and the same
// answers to the searches the API makes (ListMessages), page by page.
// 1,500 messages: a full batch and a partial one (on SQLite each in a
// transaction of its own).
func TestBulkFillMatchesAccept(t *testing.T) {
	defer func(n int64) { searchFillTx = n }(searchFillTx)
	searchFillTx = searchBatch
	pg, _, err := openPostgres(cmp.Or(os.Getenv(envPostgres), defaultPostgres))
	if err != nil {
		t.Fatal(err)
	}
	const rows = 1500
	stores := []struct {
		name    string
		open    func(t *testing.T) (*searchStore, error)
		dump    string // every row of messages, in seq order
		indexes string // the definitions of the indexes, by name
	}{
		{"sqlite", func(t *testing.T) (*searchStore, error) { return openSearchSQLite(t.TempDir()) },
			`SELECT * FROM messages ORDER BY seq`,
			`SELECT name, tbl_name, sql FROM sqlite_schema WHERE type = 'index' ORDER BY name`},
		{"postgres", func(*testing.T) (*searchStore, error) { return openSearchPostgres(pg) },
			`SELECT * FROM messages ORDER BY seq`,
			`SELECT indexname, replace(indexdef, current_schema() || '.', '') FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname`},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			open := func() *searchStore {
				s, err := st.open(t)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := s.close(); err != nil {
						t.Error(err)
					}
				})
				return s
			}
			accepted, bulk := open(), open()
			err := searchBatches(rows, func(at time.Time, batch []persistence.NewMessage) error {
				_, err := accepted.store.Accept(ctx, at, batch)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := bulk.fill(ctx, rows)
			if err != nil {
				t.Fatal(err)
			}
			if n := rep.count[persistence.Counter{Of: persistence.CountState, Key: "pending"}]; n != rows {
				t.Errorf("the fill counted %d pending messages, want %d", n, rows)
			}
			for _, q := range []string{st.dump, st.indexes} {
				want, err := accepted.rows(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				got, err := bulk.rows(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(want) == 0 || !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\nbulk   %d rows, first %v\naccept %d rows, first %v", q, len(got), first(got), len(want), first(want))
				}
			}
			compareStats(t, accepted.store, bulk.store)
			compareSearches(t, accepted.store, bulk.store, rows)
		})
	}
}

func first(rows [][]any) []any {
	if len(rows) == 0 {
		return nil
	}
	return rows[0]
}

// compareStats: the same counts by state and of work.
func compareStats(t *testing.T, want, got persistence.Store) {
	t.Helper()
	ws, err := want.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gs, err := got.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gs.ByState, ws.ByState) || gs.OutboxDepth != ws.OutboxDepth || !reflect.DeepEqual(gs.ForwardQueue, ws.ForwardQueue) {
		t.Errorf("stats: bulk %v %d %v, accept %v %d %v", gs.ByState, gs.OutboxDepth, gs.ForwardQueue, ws.ByState, ws.OutboxDepth, ws.ForwardQueue)
	}
}

// compareSearches: every page of the figure's searches (exact numbers,
// prefixes of 100 numbers, a source, time windows, everything) is the
// same on both stores.
func compareSearches(t *testing.T, want, got persistence.Store, rows int64) {
	t.Helper()
	var qs []persistence.ListQuery
	for i := int64(0); i < searchNumbers(rows); i += 7 {
		n := searchNumber(i)
		qs = append(qs, persistence.ListQuery{Limit: 4, Destination: persistence.NumberMatch{Key: n}},
			persistence.ListQuery{Limit: 200, Destination: persistence.NumberMatch{Key: n[:len(n)-2], Prefix: true}})
	}
	for h := 0; h < 24; h += 6 {
		since := searchStart.Add(time.Duration(h) * time.Hour)
		qs = append(qs, persistence.ListQuery{Limit: 200, Since: since, Until: since.Add(6 * time.Hour)})
	}
	qs = append(qs, persistence.ListQuery{Limit: 50, Source: persistence.NumberMatch{Key: "1555000007"}},
		persistence.ListQuery{Limit: 50, Destination: persistence.NumberMatch{Key: "44"}, Frontend: "fe"},
		persistence.ListQuery{Limit: 500})
	found := 0
	for _, q := range qs {
		for {
			wp, err := want.ListMessages(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			gp, err := got.ListMessages(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gp, wp) {
				t.Fatalf("%+v:\nbulk   %+v\naccept %+v", q, gp, wp)
			}
			found += len(gp.Messages)
			if gp.Next == 0 {
				break
			}
			q.Before, q.BeforeAt = gp.Next, gp.NextAt
		}
	}
	// Each message once by its time window, once in the whole list, and
	// some by their number, a prefix, the source and the country.
	if found < 2*int(rows)+500 {
		t.Errorf("the searches found %d messages, want at least %d", found, 2*rows+500)
	}
}
