package intake_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// partialStore holds its first Write until released (entered says it
// came), and answers its second as a Postgres store whose read of the ids
// found taken failed after its insert committed: a PartialAccept, the
// entries of id unread Unread.
type partialStore struct {
	persistence.Store
	unread           string
	calls            atomic.Int64
	entered, release chan struct{}
}

func (s *partialStore) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	n := s.calls.Add(1)
	if n == 1 {
		close(s.entered)
		<-s.release
	}
	got, err := s.Store.Write(ctx, now, w)
	if n != 2 || err != nil {
		return got, err
	}
	for i, nm := range w.Accept {
		if nm.ID == s.unread {
			got.Accepted[i] = persistence.Accepted{Unread: true}
		}
	}
	return persistence.Written{}, persistence.Partial(got.Accepted, errors.New("connection lost reading the taken ids"))
}

// TestCommitThatStoredSomeAnswersEachEntry: a commit whose store stored
// its new message but could not read back the one whose id was taken (a
// client's retry) answers the stored one created (202), published and
// handed to the bus's relay as any, and only the other unavailable (503,
// retry with the same id); that retry finds the message stored.
func TestCommitThatStoredSomeAnswersEachEntry(t *testing.T) {
	st := &partialStore{Store: sqlitetest.Open(t), unread: "taken", entered: make(chan struct{}), release: make(chan struct{})}
	withFrontend(t, st, "44")
	relay := &fakeRelay{}
	relay.ready.Store(true)
	var (
		mu      sync.Mutex
		changes []string
	)
	publish := func(ch messages.StateChanged) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, ch.ID)
	}
	sys, pid, _ := startIntake(t, st, idle{}, intake.Config{Relay: relay, Publish: publish})
	submit := func(id string) chan messages.SubmitReply {
		reply := make(chan messages.SubmitReply, 1)
		sys.Root.Send(pid, &messages.Submit{Submission: messages.Submission{ID: id, SourceMSISDN: "15550001",
			DestinationMSISDN: "447700900001", Body: "hi"}, Reply: reply})
		return reply
	}

	// The first commit stores "taken" and is held in the store while the
	// next two submits queue behind it, for one commit.
	first := submit("taken")
	<-st.entered
	fresh, retry := submit("fresh"), submit("taken")
	queued := make(chan error, 1)
	sys.Root.Send(pid, &messages.DeleteRoute{Prefix: "99", Reply: queued}) // behind the submits
	<-queued
	close(st.release)
	if r := <-first; r.Err != nil || !r.Created {
		t.Fatalf("first submit of taken: %+v", r)
	}
	if r := <-fresh; r.Err != nil || !r.Created || r.Message.ID != "fresh" {
		t.Fatalf("fresh, stored by the commit that failed to read taken back: %+v, want created", r)
	}
	var me *messages.Error
	if r := <-retry; !errors.As(r.Err, &me) || me.Code != messages.CodeUnavailable {
		t.Fatalf("taken, not read back: %+v, want %s", r, messages.CodeUnavailable)
	}
	if n := st.calls.Load(); n != 2 {
		t.Fatalf("%d commits, want 2 (fresh and the retry in one)", n)
	}
	polltest.Until(t, 10*time.Second, "fresh's row handed to the relay", func() bool { return len(relay.published()) == 2 })
	if got := relay.published(); got[0].MessageID != "taken" || got[1].MessageID != "fresh" {
		t.Fatalf("handed to the relay: %+v, want taken's row and fresh's", got)
	}
	mu.Lock()
	if !slices.Equal(changes, []string{"taken", "fresh"}) {
		t.Errorf("published changes of %q, want taken's and fresh's", changes)
	}
	mu.Unlock()

	if r := <-submit("taken"); r.Err != nil || r.Created || r.Message.ID != "taken" {
		t.Fatalf("taken again, with the same id: %+v, want the stored message", r)
	}
}

// failingStore fails every Write with err.
type failingStore struct {
	persistence.Store
	err error
}

func (s failingStore) Write(context.Context, time.Time, persistence.Write) (persistence.Written, error) {
	return persistence.Written{}, s.err
}

// TestCommitFailedForWantOfRoomIsNotAnError: on a store with no room every
// commit fails, and each logged an ERROR "commit failed" (265 lines in
// 16 s on a full Postgres), where the storage gate already logs its one
// line (space.Gate). One that failed for want of room is logged at debug;
// any other failure stays an error.
func TestCommitFailedForWantOfRoomIsNotAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want slog.Level
	}{
		{"no room", fmt.Errorf("postgres: write: %w: could not extend file", persistence.ErrNoSpace), slog.LevelDebug},
		{"other", errors.New("connection reset"), slog.LevelError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys, pid, logs := failingIntake(t, tc.err)
			t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
			submitRefused(t, sys, pid, "x")
			if got := logs.Records(t, "commit failed"); len(got) != 1 || got[0]["level"] != tc.want.String() {
				t.Errorf("\"commit failed\" logged as %v, want once at %v", got, tc.want)
			}
		})
	}
}

// TestCommitFailuresAreLoggedAtABoundedRate: while a store is away every
// group commit fails, and each logged its own "commit failed" line (~8,000
// in a 20 s Postgres outage at 100 submits a second). At most
// commitFailureBurst lines a window are written now; the rest are counted,
// and the count is logged when the intake stops.
func TestCommitFailuresAreLoggedAtABoundedRate(t *testing.T) {
	sys, pid, logs := failingIntake(t, errors.New("connection reset"))
	const submits = 40
	for i := range submits {
		submitRefused(t, sys, pid, fmt.Sprintf("x%d", i))
	}
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	lines := logs.Records(t, "commit failed")
	if len(lines) == 0 || len(lines) > 10 {
		t.Fatalf("%d \"commit failed\" lines for %d failed commits, want 1 to 10", len(lines), submits)
	}
	summary := logs.Records(t, "commit failures not logged one by one")
	if len(summary) != 1 {
		t.Fatalf("summaries of the failures not logged: %v, want one at the stop", summary)
	}
	if got := fmt.Sprint(summary[0]["suppressed"]); got != fmt.Sprint(submits-len(lines)) {
		t.Errorf("summary counts %s failures not logged, want %d (%d of %d logged)", got, submits-len(lines), len(lines), submits)
	}
}

// failingIntake starts an intake on a store whose writes fail with err;
// its log is in logs. The caller stops it.
func failingIntake(t *testing.T, err error) (*actor.ActorSystem, *actor.PID, *logtest.Buffer) {
	t.Helper()
	base := sqlitetest.Open(t)
	withFrontend(t, base, "44")
	logger, logs := logtest.New()
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	n := 0
	cfg := intake.Config{Node: "alpha", Store: failingStore{Store: base, err: err}, Clock: clock.Real{}, Logger: logger,
		Frontends: sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return idle{} })),
		NewID:     func() string { n++; return fmt.Sprintf("m-%d", n) }, Publish: func(messages.StateChanged) {}}
	return sys, sys.Root.Spawn(actor.PropsFromProducer(intake.NewIntake(cfg))), logs
}

// submitRefused submits id to the intake at pid and wants it refused.
func submitRefused(t *testing.T, sys *actor.ActorSystem, pid *actor.PID, id string) {
	t.Helper()
	reply := make(chan messages.SubmitReply, 1)
	sys.Root.Send(pid, &messages.Submit{Submission: messages.Submission{ID: id, SourceMSISDN: "15550001",
		DestinationMSISDN: "447700900001", Body: "hi"}, Reply: reply})
	select {
	case r := <-reply:
		if r.Err == nil {
			t.Fatalf("submit %s on a failing store: %+v, want it refused", id, r)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("submit %s: no answer", id)
	}
}
