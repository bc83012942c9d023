package delivery

import (
	"slices"
	"testing"
	"time"
)

// TestSpanBook replays a worker's spans: each step books, takes, lets
// leases lapse or takes them all, and says which spans come out to end and
// when the book next needs a look.
func TestSpanBook(t *testing.T) {
	type op int
	const (
		add op = iota
		take
		lapse
		all
	)
	type step struct {
		op    op
		id    string        // add, take
		span  string        // add
		until time.Duration // add: the lease's end from t0 (0: none); lapse: the time from t0
		out   []string      // the spans that come out to end
		wake  time.Duration // the book's wake from t0 (-1: none)
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{name: "a verdict ends an actor's span", steps: []step{
			{op: add, id: "a", span: "a1", wake: -1},
			{op: lapse, until: time.Hour, wake: -1},
			{op: take, id: "a", out: []string{"a1"}, wake: -1},
			{op: take, id: "a", wake: -1},
		}},
		{name: "a lease lapses unacknowledged", steps: []step{
			{op: add, id: "p", span: "p1", until: 30 * time.Second, wake: 30 * time.Second},
			{op: add, id: "q", span: "q1", until: 10 * time.Second, wake: 10 * time.Second},
			{op: lapse, until: 9 * time.Second, wake: 10 * time.Second},
			{op: lapse, until: 10 * time.Second, out: []string{"q1"}, wake: 30 * time.Second},
			{op: lapse, until: time.Minute, out: []string{"p1"}, wake: -1},
		}},
		{name: "an ack before the lease's end leaves a wake-up that moves on", steps: []step{
			{op: add, id: "p", span: "p1", until: 10 * time.Second, wake: 10 * time.Second},
			{op: add, id: "q", span: "q1", until: 20 * time.Second, wake: 10 * time.Second},
			{op: take, id: "p", out: []string{"p1"}, wake: 10 * time.Second},
			{op: lapse, until: 10 * time.Second, wake: 20 * time.Second},
			{op: lapse, until: 20 * time.Second, out: []string{"q1"}, wake: -1},
		}},
		{name: "offered again before its end", steps: []step{
			{op: add, id: "p", span: "p1", until: 10 * time.Second, wake: 10 * time.Second},
			{op: add, id: "p", span: "p2", until: 40 * time.Second, out: []string{"p1"}, wake: 10 * time.Second},
			{op: lapse, until: 10 * time.Second, wake: 40 * time.Second},
			{op: take, id: "p", out: []string{"p2"}, wake: 40 * time.Second},
		}},
		{name: "the worker stops", steps: []step{
			{op: add, id: "b", span: "b1", until: 10 * time.Second, wake: 10 * time.Second},
			{op: add, id: "a", span: "a1", wake: 10 * time.Second},
			{op: all, out: []string{"a1", "b1"}, wake: -1},
			{op: lapse, until: time.Hour, wake: -1},
			{op: all, wake: -1},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b spanBook[string]
			for i, s := range c.steps {
				var out []string
				switch s.op {
				case add:
					var until time.Time
					if s.until > 0 {
						until = t0.Add(s.until)
					}
					if old, ok := b.add(s.id, s.span, until); ok {
						out = []string{old}
					}
				case take:
					if sp, ok := b.take(s.id); ok {
						out = []string{sp}
					}
				case lapse:
					out = b.lapsed(t0.Add(s.until))
				case all:
					out = b.all()
				}
				if !slices.Equal(out, s.out) {
					t.Fatalf("step %d: out %q, want %q", i, out, s.out)
				}
				want := time.Time{}
				if s.wake >= 0 {
					want = t0.Add(s.wake)
				}
				if w := b.wake(); !w.Equal(want) {
					t.Fatalf("step %d: wake %v, want %v", i, w, want)
				}
			}
		})
	}
}
