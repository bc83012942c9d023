package intake_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/intake"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
)

// unreadAfterResubmit is a store whose reads of a message fail once a
// resubmit was applied.
type unreadAfterResubmit struct {
	persistence.Store
	resubmitted atomic.Bool
}

func (s *unreadAfterResubmit) Resubmit(ctx context.Context, now time.Time, rs []persistence.Reroute) ([]persistence.ResubmitResult, error) {
	res, err := s.Store.Resubmit(ctx, now, rs)
	if err == nil {
		s.resubmitted.Store(true)
	}
	return res, err
}

func (s *unreadAfterResubmit) GetMessage(ctx context.Context, id string) (messages.Message, error) {
	if s.resubmitted.Load() {
		return messages.Message{}, errors.New("disk I/O error")
	}
	return s.Store.GetMessage(ctx, id)
}

// TestResubmitNotReadBackSaysItWasMade: a resubmit applied whose message
// the intake then fails to read back is answered with an error that says
// the change was made (it wraps messages.ErrNotReadBack, so that the API
// records it in the audit trail) and is still the store's unavailable,
// with the frontend and state the resubmit set.
func TestResubmitNotReadBackSaysItWasMade(t *testing.T) {
	st := sqlitetest.Open(t)
	withFrontend(t, st, "44")
	ctx := context.Background()
	now := clock.Real{}.Now()
	if _, err := st.Accept(ctx, now, []persistence.NewMessage{{ID: "m-failed", SourceMSISDN: "15550001",
		DestinationMSISDN: "447700900123", Body: "hi", SourceSMSC: "alpha", DestSMSC: "alpha", Frontend: "fe-gone",
		State: messages.StateFailed, Detail: "max_attempts"}}); err != nil {
		t.Fatal(err)
	}
	sys, pid, _ := startIntake(t, &unreadAfterResubmit{Store: st}, idle{}, intake.Config{})

	reply := make(chan messages.ResubmitReply, 1)
	sys.Root.Send(pid, &messages.Resubmit{ID: "m-failed", Reply: reply})
	r := <-reply
	var me *messages.Error
	if !errors.Is(r.Err, messages.ErrNotReadBack) || !errors.As(r.Err, &me) || me.Code != messages.CodeUnavailable {
		t.Fatalf("resubmit not read back answered %v, want unavailable wrapping messages.ErrNotReadBack", r.Err)
	}
	if r.Message.ID != "m-failed" || r.Message.Frontend != "fe-a" || r.Message.State != messages.StatePending {
		t.Errorf("reply's message %s on %q, %s; want m-failed on fe-a, pending (what the resubmit set)", r.Message.ID, r.Message.Frontend, r.Message.State)
	}
	if m, err := st.GetMessage(ctx, "m-failed"); err != nil || m.State == messages.StateFailed || m.Frontend != "fe-a" {
		t.Fatalf("stored message %+v, %v; want it resubmitted to fe-a", m, err)
	}
}
