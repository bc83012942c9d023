package delivery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// manualClock is a clock that moves only when told, and keeps the
// functions scheduled on it until the test runs them.
type manualClock struct {
	mu    sync.Mutex
	now   time.Time
	fires chan func()
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *manualClock) AfterFunc(_ time.Duration, f func()) func() bool {
	c.fires <- f
	return func() bool { return true }
}

// next waits for the next function scheduled.
func (c *manualClock) next(t *testing.T) func() {
	t.Helper()
	select {
	case f := <-c.fires:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("nothing scheduled")
		return nil
	}
}

// directoryStore is a store that only lists frontends.
type directoryStore struct {
	persistence.Store
	fes []messages.Frontend
}

func (s directoryStore) Frontends(context.Context) ([]messages.Frontend, error) { return s.fes, nil }

// stubWorker is a worker that does nothing; dead, it stops as it starts
// (it used up its restart budget).
type stubWorker struct{ dead bool }

func (w stubWorker) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok && w.dead {
		c.Stop(c.Self())
	}
}

// supervised is a frontend supervisor of one frontend on a manual clock,
// whose first workers are dead: they stop as they start (their restart
// budget used up).
type supervised struct {
	t    *testing.T
	d    *Deps
	clk  *manualClock
	sys  *actor.ActorSystem
	pid  *actor.PID
	mu   sync.Mutex
	n    int
	dead int
}

func newSupervised(t *testing.T, fe messages.Frontend, dead int) *supervised {
	s := &supervised{t: t, clk: &manualClock{now: t0, fires: make(chan func(), 16)}, dead: dead}
	s.d = &Deps{
		Owner: "me", Store: directoryStore{fes: []messages.Frontend{fe}}, Clock: s.clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Publish: func(messages.StateChanged) {},
		HTTPClient: http.DefaultClient, Actors: &Actors{}, Policy: dispatchPolicy, SendTimeout: time.Second,
		Props: func(string, actor.Producer) *actor.Props {
			s.mu.Lock()
			s.n++
			dead := s.n <= s.dead
			s.mu.Unlock()
			return actor.PropsFromProducer(func() actor.Actor { return stubWorker{dead: dead} })
		},
		Down: &Down{},
	}
	producer, err := NewSupervisor(s.d)
	if err != nil {
		t.Fatal(err)
	}
	s.sys = actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(10 * time.Millisecond))
	s.pid = s.sys.Root.Spawn(actor.PropsFromProducer(producer))
	t.Cleanup(func() { _ = s.sys.Root.PoisonFuture(s.pid).Wait() })
	return s
}

// spawned is how many workers the supervisor spawned.
func (s *supervised) spawned() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// poll asks the supervisor for a poll of the frontend name and returns the
// answer if the supervisor answers it (the frontend has no pull worker);
// the frontend "none" makes it a barrier: answered once the supervisor
// handled what was sent before.
func (s *supervised) poll(name string) messages.PollReply {
	s.t.Helper()
	reply := make(chan messages.PollReply, 1)
	s.sys.Root.Send(s.pid, &messages.Poll{Frontend: name, Reply: reply})
	select {
	case r := <-reply:
		return r
	case <-time.After(10 * time.Second):
		s.t.Fatal("the supervisor does not answer")
		return messages.PollReply{}
	}
}

// TestSupervisorRespawnWaitsForAChange: a frontend whose worker used up
// its restart budget (lost) gets a new one when its wait is over
// (respawnAfter), or at once when the frontend changes. It came up again
// unchanged whenever the directory was read again (any route or frontend
// changed through the API, or on another instance), and that spawned its
// worker at once: a fault that stays looped as fast as the directory
// changed. Meanwhile Down says the frontend's worker is down, and until
// when.
func TestSupervisorRespawnWaitsForAChange(t *testing.T) {
	fe := messages.Frontend{Name: "hook", Mode: messages.ModeWebhook, URL: "https://a.example/hook"}
	s := newSupervised(t, fe, 2) // the first two; the third runs
	clk, d, sys, sup, spawned := s.clk, s.d, s.sys, s.pid, s.spawned
	down := func(want time.Time) {
		t.Helper()
		at, ok := d.Down.Of(fe.Name)
		if ok != !want.IsZero() || !at.Equal(want) || d.Down.Len() != map[bool]int{false: 0, true: 1}[ok] {
			t.Fatalf("Down: %v %v (%d down), want down until %v", at, ok, d.Down.Len(), want)
		}
	}
	barrier := func() { s.poll("none") }

	// The worker spawned at the start stops: its respawn is scheduled.
	respawn := clk.next(t)
	if got := spawned(); got != 1 {
		t.Fatalf("%d workers spawned at the start", got)
	}
	down(t0.Add(respawnMin))
	// The directory read again: the frontend comes up unchanged.
	sys.Root.Send(sup, &messages.FrontendUp{Frontend: fe})
	barrier()
	if got := spawned(); got != 1 {
		t.Fatalf("%d workers spawned: the frontend came up unchanged, and its new worker did not wait", got)
	}
	down(t0.Add(respawnMin))
	// Its wait is over.
	clk.advance(respawnMin)
	go respawn()
	clk.next(t) // the new one stops too: its respawn is scheduled
	if got := spawned(); got != 2 {
		t.Fatalf("%d workers spawned once the wait was over, want 2", got)
	}
	down(t0.Add(respawnMin + 2*respawnMin)) // it waits twice as long
	// A change spawns one at once.
	changed := fe
	changed.URL = "https://b.example/hook"
	sys.Root.Send(sup, &messages.FrontendUp{Frontend: changed})
	barrier()
	if got := spawned(); got != 3 {
		t.Fatalf("%d workers spawned after a change, want 3", got)
	}
	down(time.Time{})
}

// TestSupervisorPollWhileWorkerDown: a poll or an ack of a pull frontend
// whose worker is down (its restart budget used up, lost) was answered
// not_found, "no frontend named", as if the frontend had been deleted. It
// is answered unavailable now, naming when its worker starts again; a
// frontend deleted meanwhile is not found.
func TestSupervisorPollWhileWorkerDown(t *testing.T) {
	fe := messages.Frontend{Name: "pf", Mode: messages.ModePull}
	s := newSupervised(t, fe, 1)
	s.clk.next(t) // the worker stopped: its respawn is scheduled
	code := func(err error) string {
		var e *messages.Error
		if !errors.As(err, &e) {
			return fmt.Sprint(err)
		}
		return e.Code
	}
	if r := s.poll("pf"); code(r.Err) != messages.CodeUnavailable {
		t.Fatalf("poll while the worker is down: %v, want %s", r.Err, messages.CodeUnavailable)
	}
	reply := make(chan messages.AckReply, 1)
	s.sys.Root.Send(s.pid, &messages.Ack{Frontend: "pf", Reply: reply})
	if r := <-reply; code(r.Err) != messages.CodeUnavailable {
		t.Fatalf("ack while the worker is down: %v, want %s", r.Err, messages.CodeUnavailable)
	}
	s.sys.Root.Send(s.pid, &messages.FrontendDown{Name: "pf"})
	if r := s.poll("pf"); code(r.Err) != messages.CodeNotFound {
		t.Fatalf("poll once deleted: %v, want %s", r.Err, messages.CodeNotFound)
	}
}
