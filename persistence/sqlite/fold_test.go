package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// TestFoldWithinATransactionKeepsLastAt: the decision core folds a
// deferral into an entry its own transaction appended as a history row
// (persistence.TestDeferralsFoldWithinATransaction); the store keeps that
// entry's last_at like the one of a row it folds into later (no public
// call reaches it today).
func TestFoldWithinATransactionKeepsLastAt(t *testing.T) {
	ctx := context.Background()
	s := withFE(t, openAt(t, filepath.Join(t.TempDir(), "s.db"), nil))
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	nm := persistence.NewMessage{ID: "x", SourceMSISDN: "+15550100", DestinationMSISDN: "+447700900123", Body: "b",
		SourceSMSC: "in", DestSMSC: "out", Frontend: "fe", State: messages.StatePending, Detail: "accepted",
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe", DueAt: base}}
	if _, err := s.Accept(ctx, base, []persistence.NewMessage{nm}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ { // attempts 1 and 2 fail: history rows up to ordinal 3
		now := base.Add(time.Duration(i) * time.Hour)
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
	now := base.Add(10 * time.Hour)
	deferral := messages.HistoryEntry{Detail: "not attempted (attempt 3 given back): busy", Attempt: 3, Deferrals: 1}
	err := s.write(ctx, "test", func(tx querier) error {
		l := persistence.NewLoaded()
		if err := load(ctx, tx, l, []string{"x"}, false); err != nil {
			return err
		}
		m := l.Rows["x"]
		c := persistence.NewChanges(now)
		c.MoveWith(l, m, messages.StateRetry, deferral)
		c.MoveWith(l, m, messages.StateRetry, deferral)
		return writeChanges(ctx, tx, c)
	})
	if err != nil {
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
