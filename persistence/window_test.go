package persistence

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/switchboard-dev/switchboard/messages"
)

func TestListWindow(t *testing.T) {
	fe := ListQuery{Frontend: "fe", Limit: 10, Budget: 100}
	with := func(q ListQuery, mutate func(*ListQuery)) ListQuery {
		mutate(&q)
		return q
	}
	bounds := SeqBounds{Min: 50, Max: 1000}
	cases := []struct {
		name string
		q    ListQuery
		b    SeqBounds
		want Window
	}{
		{"frontend, newest", fe, bounds, Window{Lo: 901, Older: true}},
		{"frontend, below a cursor", with(fe, func(q *ListQuery) { q.Before = 500 }), bounds, Window{Lo: 400, Older: true}},
		{"peer and state", ListQuery{Peer: "p", State: messages.StateFailed, Limit: 10, Budget: 100, Before: 500}, bounds,
			Window{Lo: 400, Older: true}},
		{"window reaches the oldest", with(fe, func(q *ListQuery) { q.Before = 150 }), bounds, Window{}},
		{"window starts at the oldest", with(fe, func(q *ListQuery) { q.Before = 151 }), bounds, Window{Lo: 51, Older: true}},
		{"cursor below the oldest", with(fe, func(q *ListQuery) { q.Before = 10 }), bounds, Window{}},
		{"empty store", fe, SeqBounds{}, Window{}},
		{"small store", fe, SeqBounds{Min: 1, Max: 100}, Window{}},
		{"default budget", ListQuery{Frontend: "fe", Limit: 10}, SeqBounds{Min: 1, Max: 1_000_000},
			Window{Lo: 1_000_001 - ListBudget, Older: true}},
		// The other queries have an index of their own or the caller's
		// range: no window.
		{"no filter", ListQuery{Limit: 10, Budget: 100}, bounds, Window{}},
		{"state alone", ListQuery{State: messages.StatePending, Limit: 10, Budget: 100}, bounds, Window{}},
		{"frontend and a number", with(fe, func(q *ListQuery) { q.Destination = NumberMatch{Key: "44"} }), bounds, Window{}},
		{"frontend and a source prefix", with(fe, func(q *ListQuery) { q.Source = NumberMatch{Key: "1", Prefix: true} }), bounds, Window{}},
		{"frontend, a client's own", with(fe, func(q *ListQuery) { q.SubmittedBy = "app" }), bounds, Window{}},
		{"frontend since", with(fe, func(q *ListQuery) { q.Since = t0 }), bounds, Window{}},
		{"frontend until", with(fe, func(q *ListQuery) { q.Until = t0 }), bounds, Window{}},
	}
	for _, c := range cases {
		if got := ListWindow(c.q, c.b); got != c.want {
			t.Errorf("%s: ListWindow = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestPageOfWindow(t *testing.T) {
	q := ListQuery{Frontend: "fe", Limit: 2}
	rows := func(seqs ...int64) []messages.Message {
		var out []messages.Message
		for _, s := range seqs {
			out = append(out, messages.Message{Seq: s, CreatedAt: t0})
		}
		return out
	}
	cases := []struct {
		name string
		w    Window
		rows []messages.Message
		want int64 // Next
		n    int
	}{
		{"full page: after its last row", Window{Lo: 10, Older: true}, rows(30, 20, 15), 20, 2},
		{"short page, older rows: at the window", Window{Lo: 10, Older: true}, rows(30), 10, 1},
		{"empty page, older rows: at the window", Window{Lo: 10, Older: true}, nil, 10, 0},
		{"exactly full, older rows: at the window", Window{Lo: 10, Older: true}, rows(30, 20), 10, 2},
		{"short page, no window: last", Window{}, rows(30), 0, 1},
		{"full page, no window", Window{}, rows(30, 20, 10), 20, 2},
	}
	for _, c := range cases {
		p := PageOf(q, c.w, c.rows)
		if p.Next != c.want || len(p.Messages) != c.n || !p.NextAt.IsZero() {
			t.Errorf("%s: PageOf = %d messages, next %d at %v; want %d, next %d", c.name, len(p.Messages), p.Next, p.NextAt, c.n, c.want)
		}
	}
	// A ByTime page keeps its time cursor.
	byTime := ListQuery{Since: t0.Add(-time.Hour), Limit: 1}
	if p := PageOf(byTime, Window{}, rows(30, 20)); p.Next != 30 || !p.NextAt.Equal(t0) {
		t.Errorf("ByTime: PageOf next = %d at %v, want 30 at %v", p.Next, p.NextAt, t0)
	}
}

// TestWindowedPagingFindsEveryMatch pages a reference store (a set of seqs,
// some of them the frontend's, some purged) the way the stores do: each
// page reads the Budget seqs below its cursor at most, and following the
// cursors yields every match once, newest first.
func TestWindowedPagingFindsEveryMatch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Int64Range(0, 300).Draw(t, "seqs")
		first := rapid.Int64Range(1, 50).Draw(t, "first seq")
		budget := rapid.Int64Range(1, 40).Draw(t, "budget")
		q := ListQuery{Frontend: "fe", Limit: rapid.IntRange(1, 8).Draw(t, "limit"), Budget: budget}
		var stored, want []int64 // newest first
		for s := first + n - 1; s >= first; s-- {
			if rapid.IntRange(0, 3).Draw(t, "purged") == 0 {
				continue
			}
			stored = append(stored, s)
			if rapid.IntRange(0, 9).Draw(t, "match") == 0 {
				want = append(want, s)
			}
		}
		var b SeqBounds
		if len(stored) > 0 {
			b = SeqBounds{Min: stored[len(stored)-1], Max: stored[0]}
		}
		var got []int64
		for page := 0; ; page++ {
			if page > int(n/budget)+len(want)+2 {
				t.Fatalf("paging does not end: %d pages", page)
			}
			w := ListWindow(q, b)
			var rows []messages.Message
			examined := 0
			for _, s := range stored {
				if (q.Before > 0 && s >= q.Before) || s < w.Lo || len(rows) > q.Limit {
					continue
				}
				examined++
				if slices.Contains(want, s) {
					rows = append(rows, messages.Message{Seq: s})
				}
			}
			if examined > int(budget) {
				t.Fatalf("page below %d examined %d rows, budget %d", q.Before, examined, budget)
			}
			p := PageOf(q, w, rows)
			for _, m := range p.Messages {
				got = append(got, m.Seq)
			}
			if p.Next == 0 {
				break
			}
			if q.Before > 0 && p.Next >= q.Before {
				t.Fatalf("cursor %d does not move below %d", p.Next, q.Before)
			}
			q.Before = p.Next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("paged %v, want %v", got, want)
		}
	})
}
