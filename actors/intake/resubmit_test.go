package intake_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/intake"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
)

// unreadAfterResubmit is a store whose reads of a message fail once a
// resubmit was applied, or panic if panics.
type unreadAfterResubmit struct {
	persistence.Store
	panics      bool
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
		if s.panics {
			panic("injected fault in GetMessage")
		}
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

// TestResubmitReadBackPanicSaysItWasMade: a resubmit applied whose read
// back panics is answered as one not read back (unavailable wrapping
// messages.ErrNotReadBack, with what it set), not told to retry as if
// nothing was done (a retry would be refused invalid_state, and the API
// would record no change); the panic still restarts the intake.
func TestResubmitReadBackPanicSaysItWasMade(t *testing.T) {
	st := &unreadAfterResubmit{Store: sqlitetest.Open(t), panics: true}
	withFrontend(t, st.Store, "44")
	withFailed(t, st.Store, "m-failed")
	sys, pid, _ := startIntake(t, st, idle{}, intake.Config{})
	restarted := make(chan any, 1)
	sub := sys.EventStream.Subscribe(func(ev any) {
		if se, ok := ev.(*actor.SupervisorEvent); ok && se.Child.Equal(pid) && se.Directive == actor.RestartDirective {
			select {
			case restarted <- se.Reason:
			default:
			}
		}
	})
	t.Cleanup(func() { sys.EventStream.Unsubscribe(sub) })

	reply := make(chan messages.ResubmitReply, 1)
	sys.Root.Send(pid, &messages.Resubmit{ID: "m-failed", Reply: reply})
	r := <-reply
	var me *messages.Error
	if !errors.Is(r.Err, messages.ErrNotReadBack) || !errors.As(r.Err, &me) || me.Code != messages.CodeUnavailable {
		t.Fatalf("resubmit whose read back panicked answered %v, want unavailable wrapping messages.ErrNotReadBack", r.Err)
	}
	if r.Message.ID != "m-failed" || r.Message.Frontend != "fe-a" || r.Message.State != messages.StatePending {
		t.Errorf("reply's message %s on %q, %s; want m-failed on fe-a, pending (what the resubmit set)", r.Message.ID, r.Message.Frontend, r.Message.State)
	}
	if m, err := st.Store.GetMessage(context.Background(), "m-failed"); err != nil || m.State != messages.StatePending || m.Frontend != "fe-a" {
		t.Fatalf("stored message %+v, %v; want it resubmitted to fe-a", m, err)
	}
	select {
	case reason := <-restarted:
		if reason != "injected fault in GetMessage" {
			t.Fatalf("intake restarted for %v, want the read back's panic", reason)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("intake not restarted in 30s after its resubmit's read back panicked")
	}
}

// heldStore holds the first call of op (GetMessage, ListMessages,
// Resubmit) until letGo (entered says it came), and panics in every Write
// while panics is set, in every GetMessage while panicsGet is. A test lets it go at its end, before the intake
// stops: t.Cleanup(st.letGo) after startIntake (cleanups run last first).
type heldStore struct {
	persistence.Store
	op                string
	once              sync.Once
	entered, release  chan struct{}
	panics, panicsGet atomic.Bool
}

func newHeldStore(t *testing.T, op string) *heldStore {
	t.Helper()
	return &heldStore{Store: sqlitetest.Open(t), op: op, entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *heldStore) hold(op string) {
	if op == s.op {
		s.once.Do(func() {
			close(s.entered)
			<-s.release
		})
	}
}

// letGo releases the call held, once.
func (s *heldStore) letGo() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

func (s *heldStore) GetMessage(ctx context.Context, id string) (messages.Message, error) {
	if s.panicsGet.Load() {
		panic("injected fault in GetMessage")
	}
	s.hold("GetMessage")
	return s.Store.GetMessage(ctx, id)
}

func (s *heldStore) ListMessages(ctx context.Context, q persistence.ListQuery) (persistence.Page, error) {
	s.hold("ListMessages")
	return s.Store.ListMessages(ctx, q)
}

func (s *heldStore) Resubmit(ctx context.Context, now time.Time, rs []persistence.Reroute) ([]persistence.ResubmitResult, error) {
	s.hold("Resubmit")
	return s.Store.Resubmit(ctx, now, rs)
}

func (s *heldStore) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	if s.panics.Load() {
		panic("injected fault in Write")
	}
	return s.Store.Write(ctx, now, w)
}

// withFailed stores failed messages of ids, each for a destination fe-a
// serves (withFrontend "44").
func withFailed(t *testing.T, st persistence.Store, ids ...string) {
	t.Helper()
	var nms []persistence.NewMessage
	for _, id := range ids {
		nms = append(nms, persistence.NewMessage{ID: id, SourceMSISDN: "15550001", DestinationMSISDN: "447700900123",
			Body: "hi", SourceSMSC: "alpha", DestSMSC: "alpha", Frontend: "fe-gone", State: messages.StateFailed, Detail: "max_attempts"})
	}
	if _, err := st.Accept(context.Background(), clock.Real{}.Now(), nms); err != nil {
		t.Fatal(err)
	}
}

// submitOne submits a message for fe-a with id and returns its reply.
func submitOne(sys *actor.ActorSystem, pid *actor.PID, id string) chan messages.SubmitReply {
	reply := make(chan messages.SubmitReply, 1)
	sys.Root.Send(pid, &messages.Submit{Submission: messages.Submission{ID: id, SourceMSISDN: "15550001",
		DestinationMSISDN: "447700900001", Body: "hi"}, Reply: reply})
	return reply
}

// TestSubmitsGoOnWhileAResubmitIsInTheStore: while a resubmit's store call
// is held (a bulk's list or write, a single one's read or write), a submit
// is committed and answered; then the resubmit ends as it would have.
func TestSubmitsGoOnWhileAResubmitIsInTheStore(t *testing.T) {
	for _, tc := range []struct {
		name, op string
		bulk     bool
	}{
		{name: "bulk listing", op: "ListMessages", bulk: true},
		{name: "bulk writing", op: "Resubmit", bulk: true},
		{name: "single reading", op: "GetMessage"},
		{name: "single writing", op: "Resubmit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newHeldStore(t, tc.op)
			withFrontend(t, st, "44")
			withFailed(t, st, "m-failed")
			sys, pid, _ := startIntake(t, st, idle{}, intake.Config{})
			t.Cleanup(st.letGo)

			one, bulk := make(chan messages.ResubmitReply, 1), make(chan messages.BulkReply, 1)
			if tc.bulk {
				sys.Root.Send(pid, &messages.ResubmitBulk{State: messages.StateFailed, Reply: bulk})
			} else {
				sys.Root.Send(pid, &messages.Resubmit{ID: "m-failed", Reply: one})
			}
			<-st.entered
			select {
			case r := <-submitOne(sys, pid, "m-new"):
				if r.Err != nil || !r.Created {
					t.Fatalf("submit while the resubmit is held: %+v, want created", r)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("submit not answered in 30s while the resubmit's %s is held in the store", tc.op)
			}
			if m, err := st.Store.GetMessage(context.Background(), "m-new"); err != nil || m.State != messages.StatePending {
				t.Fatalf("submitted message %+v, %v; want it stored pending", m, err)
			}
			st.letGo()
			if tc.bulk {
				if r := <-bulk; r.Err != nil || r.Resubmitted != 1 || r.Skipped != 0 {
					t.Fatalf("bulk resubmit: %+v, want 1 resubmitted", r)
				}
			} else if r := <-one; r.Err != nil || r.Message.ID != "m-failed" || r.Message.State != messages.StatePending || r.Message.Frontend != "fe-a" {
				t.Fatalf("resubmit: %+v, want m-failed pending on fe-a", r)
			}
		})
	}
}

// TestResubmitOutLivesARestart: the intake restarts (a commit panicked)
// while a resubmit's read is held in the store and a bulk resubmit waits
// behind it: the bulk's caller is told unavailable at the restart, the
// held resubmit comes back to the new incarnation, which makes it and
// answers it, and resubmits go on after.
func TestResubmitOutLivesARestart(t *testing.T) {
	st := newHeldStore(t, "GetMessage")
	withFrontend(t, st, "44")
	withFailed(t, st, "m-held", "m-after")
	sys, pid, _ := startIntake(t, st, idle{}, intake.Config{})
	t.Cleanup(st.letGo)

	held, bulk := make(chan messages.ResubmitReply, 1), make(chan messages.BulkReply, 1)
	sys.Root.Send(pid, &messages.Resubmit{ID: "m-held", Reply: held})
	<-st.entered
	sys.Root.Send(pid, &messages.ResubmitBulk{State: messages.StateFailed, Reply: bulk})
	st.panics.Store(true)
	r := <-submitOne(sys, pid, "m-panics")
	var me *messages.Error
	if !errors.As(r.Err, &me) || me.Code != messages.CodeUnavailable {
		t.Fatalf("submit whose commit panicked: %+v, want unavailable", r)
	}
	st.panics.Store(false)
	if r := <-bulk; !errors.As(r.Err, &me) || me.Code != messages.CodeUnavailable || r.Resubmitted != 0 {
		t.Fatalf("bulk resubmit queued at the restart: %+v, want unavailable, none resubmitted", r)
	}
	st.letGo()
	if r := <-held; r.Err != nil || r.Message.ID != "m-held" || r.Message.State != messages.StatePending {
		t.Fatalf("resubmit held across the restart: %+v, want m-held pending", r)
	}
	after := make(chan messages.ResubmitReply, 1)
	sys.Root.Send(pid, &messages.Resubmit{ID: "m-after", Reply: after})
	if r := <-after; r.Err != nil || r.Message.State != messages.StatePending {
		t.Fatalf("resubmit after the restart: %+v, want m-after pending", r)
	}
}

// TestResubmitsAnsweredAtStop: the intake stops while a resubmit's read is
// held and another waits behind it: once the read has ended, both callers
// are told unavailable (the answer sent back would not be read).
func TestResubmitsAnsweredAtStop(t *testing.T) {
	st := newHeldStore(t, "GetMessage")
	withFrontend(t, st, "44")
	withFailed(t, st, "m-held", "m-queued")
	sys, pid, _ := startIntake(t, st, idle{}, intake.Config{})
	t.Cleanup(st.letGo)

	held, queued := make(chan messages.ResubmitReply, 1), make(chan messages.ResubmitReply, 1)
	sys.Root.Send(pid, &messages.Resubmit{ID: "m-held", Reply: held})
	<-st.entered
	sys.Root.Send(pid, &messages.Resubmit{ID: "m-queued", Reply: queued})
	// Stopped by a message behind the resubmits, so that both were taken.
	sys.Root.Poison(pid)
	st.letGo()
	var me *messages.Error
	for name, reply := range map[string]chan messages.ResubmitReply{"held": held, "queued": queued} {
		if r := <-reply; !errors.As(r.Err, &me) || me.Code != messages.CodeUnavailable {
			t.Errorf("%s resubmit at the stop: %+v, want unavailable", name, r)
		}
	}
}

// seesStopping is a receiver middleware that closes stopping as the
// intake receives *actor.Stopping: from then on it reads no more messages.
func seesStopping(stopping chan<- struct{}) actor.PropsOption {
	return actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.Stopping); ok {
				close(stopping)
			}
			next(c, env)
		}
	})
}

// TestResubmitWrittenAtStopIsAnsweredAsMade: the intake stops while a
// resubmit's write is held in the store, and the write is then made. Its
// caller is answered as made, not told to retry (a retry would be refused
// invalid_state, and the API would record no change in the audit trail):
// a single resubmit with the message (or, its read back panicking, as not
// read back), a bulk with the page written (and stopped() when pages are
// left, which the stop leaves undone), the changes published.
func TestResubmitWrittenAtStopIsAnsweredAsMade(t *testing.T) {
	for _, tc := range []struct {
		name            string
		bulk, panicsGet bool
		messages        int
	}{
		{name: "single", messages: 1},
		{name: "single, its read back panicking", panicsGet: true, messages: 1},
		{name: "bulk", bulk: true, messages: 1},
		{name: "bulk with a page left", bulk: true, messages: 257},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newHeldStore(t, "Resubmit")
			withFrontend(t, st, "44")
			ids := make([]string, tc.messages)
			for i := range ids {
				ids[i] = fmt.Sprintf("m-%03d", i)
			}
			withFailed(t, st, ids...)
			events := make(chan messages.StateChanged, tc.messages)
			stopping := make(chan struct{})
			sys, pid, _ := startIntake(t, st, idle{}, intake.Config{Publish: func(e messages.StateChanged) { events <- e }},
				seesStopping(stopping))
			t.Cleanup(st.letGo)

			one, bulk := make(chan messages.ResubmitReply, 1), make(chan messages.BulkReply, 1)
			if tc.bulk {
				sys.Root.Send(pid, &messages.ResubmitBulk{State: messages.StateFailed, Reply: bulk})
			} else {
				sys.Root.Send(pid, &messages.Resubmit{ID: ids[0], Reply: one})
			}
			<-st.entered
			st.panicsGet.Store(tc.panicsGet)
			stopped := sys.Root.StopFuture(pid)
			<-stopping
			st.letGo()
			if err := stopped.Wait(); err != nil {
				t.Fatal(err)
			}

			page, err := st.Store.ListMessages(context.Background(), persistence.ListQuery{State: messages.StatePending, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			made := min(tc.messages, 256)
			if len(page.Messages) != made {
				t.Fatalf("%d messages pending after the stop, want %d (the write held)", len(page.Messages), made)
			}
			if len(events) != made {
				t.Errorf("%d changes published, want %d", len(events), made)
			}
			if !tc.bulk {
				r := <-one
				if tc.panicsGet != errors.Is(r.Err, messages.ErrNotReadBack) || !tc.panicsGet && r.Err != nil ||
					r.Message.ID != ids[0] || r.Message.State != messages.StatePending || r.Message.Frontend != "fe-a" {
					t.Fatalf("resubmit whose write was made at the stop answered %v, %s %s on %q; want %s pending on fe-a (not read back: %t)",
						r.Err, r.Message.ID, r.Message.State, r.Message.Frontend, ids[0], tc.panicsGet)
				}
				return
			}
			r := <-bulk
			if r.Resubmitted != made {
				t.Fatalf("bulk resubmit whose write was made at the stop answered %+v, want %d resubmitted", r, made)
			}
			var me *messages.Error
			if left := made < tc.messages; left && (!errors.As(r.Err, &me) || me.Code != messages.CodeUnavailable) || !left && r.Err != nil {
				t.Fatalf("bulk resubmit whose write was made at the stop answered %v, want unavailable with a page left, else nil", r.Err)
			}
		})
	}
}

// TestResubmitWhoseStoreCallPanicked: a resubmit whose store call panics
// is answered unavailable, the intake restarts, and the next resubmit is
// made.
func TestResubmitWhoseStoreCallPanicked(t *testing.T) {
	st := newHeldStore(t, "")
	withFrontend(t, st, "44")
	withFailed(t, st, "m-failed")
	sys, pid, _ := startIntake(t, st, idle{}, intake.Config{})

	st.panicsGet.Store(true)
	reply := make(chan messages.ResubmitReply, 1)
	sys.Root.Send(pid, &messages.Resubmit{ID: "m-failed", Reply: reply})
	var me *messages.Error
	if r := <-reply; !errors.As(r.Err, &me) || me.Code != messages.CodeUnavailable {
		t.Fatalf("resubmit whose read panicked: %+v, want unavailable", r)
	}
	st.panicsGet.Store(false)
	sys.Root.Send(pid, &messages.Resubmit{ID: "m-failed", Reply: reply})
	if r := <-reply; r.Err != nil || r.Message.State != messages.StatePending {
		t.Fatalf("resubmit again: %+v, want m-failed pending", r)
	}
}
