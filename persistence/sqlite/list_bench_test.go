package sqlite_test

import (
	"context"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// BenchmarkWindowedList measures one page of a search by a frontend that
// has no message, on a store of 200,000 pending messages: the page
// examines a window of persistence.ListBudget seqs ("window"; "window,
// state" with a state every message is in), where it examined the whole
// table before windows ("whole table", a budget that covers it). It backs
// ListBudget's figure:
//
//	go test -run '^$' -bench WindowedList ./persistence/sqlite/
//
// On 2 cores: 3.3 ms, 3.8 ms, and 35 ms for the whole table. The state's
// index read instead of the table took 9 ms for the window of a state.
func BenchmarkWindowedList(b *testing.B) {
	ctx := context.Background()
	s, base, next := purgeStore(b)
	for range 200 {
		batch := make([]persistence.NewMessage, 1000)
		for j := range batch {
			batch[j] = next()
		}
		if _, err := s.Accept(ctx, base, batch); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		q    persistence.ListQuery
	}{
		{"window", persistence.ListQuery{Frontend: "none", Limit: 50}},
		{"window, state", persistence.ListQuery{Frontend: "none", State: messages.StatePending, Limit: 50}},
		{"whole table", persistence.ListQuery{Frontend: "none", Limit: 50, Budget: 1 << 40}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				p, err := s.ListMessages(ctx, c.q)
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Messages) != 0 || (p.Next == 0) != (c.q.Budget != 0) {
					b.Fatalf("page of %d messages, next %d", len(p.Messages), p.Next)
				}
			}
		})
	}
}
