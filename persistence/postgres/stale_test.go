package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// queuedBehind runs first and second, two calls about message id, so that
// second waits for first and decides only once first has committed: a
// connection of the test's own holds the message's row while first starts,
// locks what it locks before the message (its outbox rows) and waits for
// it; then second starts and waits for first (on an outbox row first
// holds, or on the message); then the test's lock goes. Second's
// transaction began before first committed, so the outbox rows first
// writes are new to it. It returns their errors.
func queuedBehind(t *testing.T, s *Store, dsn, id string, first, second func(context.Context) error) (error, error) {
	t.Helper()
	ctx := t.Context()
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM messages WHERE id = $1 FOR NO KEY UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	var holderPID int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holderPID); err != nil {
		t.Fatal(err)
	}
	// waiter is the backend that waits for pid's locks.
	waiter := func(pid int) (int, error) {
		var n, w int
		err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(min(pid), 0) FROM pg_stat_activity
WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&n, &w)
		if err == nil && n == 0 {
			err = fmt.Errorf("nobody waits for backend %d yet", pid)
		}
		return w, err
	}
	start := func(call func(context.Context) error) chan error {
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		return done
	}

	firstDone := start(first)
	var firstPID int
	polltest.Eventually(t, 10*time.Second, func() (err error) {
		firstPID, err = waiter(holderPID)
		return err
	})
	secondDone := start(second)
	polltest.Eventually(t, 10*time.Second, func() error {
		_, err := waiter(firstPID)
		return err
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	return <-firstDone, <-secondDone
}

// wantCountsTrue fails the test when the maintained counters disagree with
// the tables.
func wantCountsTrue(t *testing.T, s *Store) {
	t.Helper()
	counted, maintained, err := seedingStore{s}.Recount(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(counted.Sorted()) != fmt.Sprint(maintained.Sorted()) {
		t.Errorf("counters drifted from the tables:\n counted    %v\n maintained %v", counted.Sorted(), maintained.Sorted())
	}
}

// A forward-timeout sweep (FailForwards) and the peer's delivery_status
// (ApplyStatus) for one SMPP-submitted message that asked for a receipt run
// at once, the status waiting for the sweep's lock of the forward row. The
// sweep moves the message to forward_failed and writes its receipt row; the
// status then moves it to delivered and writes the receipt row again: a
// replacement of the row the sweep wrote, which the status must see (it
// read the message's outbox rows before the sweep committed), or it counts
// a second receipt row that the table does not hold.
func TestStatusAfterForwardTimeoutReplacesTheReceiptRowItWaitedFor(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := open(t, dsn)
	ctx := t.Context()
	m := persistence.NewMessage{
		ID: "x", SourceMSISDN: "+15550100", DestinationMSISDN: "+447700900123", Body: "b",
		DestSMSC: "peer-p", Frontend: "far-fe", State: messages.StateForwardQueued, Detail: "peer down",
		ReportTo: persistence.ReceiptReportTo("esme-e", false),
		Work:     &persistence.WorkSpec{Kind: persistence.WorkForward, Target: "peer-p", DueAt: t0},
	}
	if _, err := s.Accept(ctx, t0, []persistence.NewMessage{m}); err != nil {
		t.Fatal(err)
	}

	now := t0.Add(2 * time.Hour)
	sweepErr, statusErr := queuedBehind(t, s, dsn, "x",
		func(ctx context.Context) error {
			_, err := s.FailForwards(ctx, persistence.ForwardExpiry{Now: now, QueuedBefore: t0.Add(time.Hour), Limit: 10})
			return err
		},
		func(ctx context.Context) error {
			_, err := s.ApplyStatus(ctx, now, []persistence.StatusUpdate{{ID: "x", From: "peer-p", Result: persistence.ResultDelivered}})
			return err
		})
	if sweepErr != nil || statusErr != nil {
		t.Fatalf("FailForwards: %v; ApplyStatus: %v", sweepErr, statusErr)
	}

	if got, err := s.GetMessage(ctx, "x"); err != nil || got.State != messages.StateDelivered {
		t.Fatalf("message %v (%v), want delivered", got.State, err)
	}
	wantCountsTrue(t, s)
	if st, err := s.Stats(ctx); err != nil || st.OutboxDepth != 1 {
		t.Errorf("Stats: outbox depth %d (%v), want 1 (the receipt row)", st.OutboxDepth, err)
	}
}

// A resubmit waits for the peer's report that a forwarded message failed
// (ApplyStatus), which writes a status row owing the message's origin that
// report. The resubmit, whose transaction began before the report
// committed, must see that row and remove it with the outcome it undoes
// (persistence.Resubmit): left behind, it would tell the origin that a
// message pending again failed.
func TestResubmitRemovesTheStatusRowOfTheFailureItWaitedFor(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := withFE(t, open(t, dsn))
	ctx := t.Context()
	m := persistence.NewMessage{
		ID: "x", SourceMSISDN: "+15550100", DestinationMSISDN: "+447700900123", Body: "b",
		DestSMSC: "peer-p", Frontend: "far-fe", State: messages.StateForwarded, Detail: "forwarded",
		ReportTo: "peer-o",
	}
	if _, err := s.Accept(ctx, t0, []persistence.NewMessage{m}); err != nil {
		t.Fatal(err)
	}

	now := t0.Add(time.Minute)
	statusErr, resubmitErr := queuedBehind(t, s, dsn, "x",
		func(ctx context.Context) error {
			_, err := s.ApplyStatus(ctx, now, []persistence.StatusUpdate{{ID: "x", From: "peer-p", Result: persistence.ResultFailed}})
			return err
		},
		func(ctx context.Context) error {
			_, err := s.Resubmit(ctx, now, []persistence.Reroute{{ID: "x", Frontend: "fe", State: messages.StatePending,
				Detail: "resubmitted", Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe"}}})
			return err
		})
	if statusErr != nil || resubmitErr != nil {
		t.Fatalf("ApplyStatus: %v; Resubmit: %v", statusErr, resubmitErr)
	}

	if got, err := s.GetMessage(ctx, "x"); err != nil || got.State != messages.StatePending {
		t.Fatalf("message %v (%v), want pending (resubmitted after the failure)", got.State, err)
	}
	c, err := s.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkStatus, Target: "peer-o", Owner: "w",
		Limit: 10, Now: now.Add(time.Hour), Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Work) != 0 {
		t.Errorf("status work for the origin after the resubmit: %+v, want none", c.Work)
	}
	wantCountsTrue(t, s)
}
