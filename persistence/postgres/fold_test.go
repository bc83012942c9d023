package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
)

// TestFoldWithinATransactionKeepsLastAt: a deferral folded into an entry
// the same transaction appended as a history row keeps its last_at (as
// the SQLite store's test; no public call reaches it today, the core
// allows it: persistence.TestDeferralsFoldWithinATransaction).
func TestFoldWithinATransactionKeepsLastAt(t *testing.T) {
	ctx := context.Background()
	s := withFE(t, open(t, pgtest.DSN(t)))
	if _, err := s.Accept(ctx, t0, []persistence.NewMessage{delivery("x", "fe")}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		now := t0.Add(time.Duration(i) * time.Hour)
		c, err := s.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: "fe", Owner: "o", Limit: 1, Now: now, Lease: time.Minute})
		if err != nil || len(c.Work) != 1 {
			t.Fatalf("claim %d: %+v %v", i, c, err)
		}
		r, err := s.CompleteWork(ctx, now.Add(time.Second), []persistence.Outcome{{Kind: persistence.WorkDelivery, Target: "fe", MessageID: "x",
			Result: persistence.ResultRetry, RetryAt: now.Add(time.Minute), Detail: "attempt failed", Attempt: i}})
		if err != nil || r[0] != persistence.Applied {
			t.Fatalf("complete %d: %v %v", i, r, err)
		}
	}
	now := t0.Add(10 * time.Hour)
	deferral := messages.HistoryEntry{Detail: "not attempted (attempt 3 given back): busy", Attempt: 3, Deferrals: 1}
	p := decidePart(now, []string{"x"}, func(l *persistence.Loaded, c *persistence.Changes) {
		m := l.Rows["x"]
		c.MoveWith(l, m, messages.StateRetry, deferral)
		c.MoveWith(l, m, messages.StateRetry, deferral)
	})
	first := &pgx.Batch{}
	p.queue(first)
	if err := s.inTx(ctx, first, func(tx pgx.Tx) error { return p.run(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMessage(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	e := m.History[len(m.History)-1]
	if e.Deferrals != 2 || e.LastAt == nil {
		t.Errorf("the folded entry written: deferrals %d, last_at %v; want 2 and %v (its detail: %q)", e.Deferrals, e.LastAt, now, e.Detail)
	}
}
