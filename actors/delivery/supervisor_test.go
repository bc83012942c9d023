package delivery

import (
	"context"
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
	clk := &manualClock{now: t0, fires: make(chan func(), 16)}
	var n int
	var mu sync.Mutex
	d := &Deps{
		Owner: "me", Store: directoryStore{fes: []messages.Frontend{fe}}, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Publish: func(messages.StateChanged) {},
		HTTPClient: http.DefaultClient, Actors: &Actors{}, Policy: dispatchPolicy, SendTimeout: time.Second,
		Props: func(string, actor.Producer) *actor.Props {
			mu.Lock()
			n++
			dead := n <= 2 // the first two; the third runs
			mu.Unlock()
			return actor.PropsFromProducer(func() actor.Actor { return stubWorker{dead: dead} })
		},
		Down: &Down{},
	}
	down := func(want time.Time) {
		t.Helper()
		at, ok := d.Down.Of(fe.Name)
		if ok != !want.IsZero() || !at.Equal(want) || d.Down.Len() != map[bool]int{false: 0, true: 1}[ok] {
			t.Fatalf("Down: %v %v (%d down), want down until %v", at, ok, d.Down.Len(), want)
		}
	}
	spawned := func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
	producer, err := NewSupervisor(d)
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(10 * time.Millisecond))
	sup := sys.Root.Spawn(actor.PropsFromProducer(producer))
	defer func() { _ = sys.Root.PoisonFuture(sup).Wait() }()
	// barrier returns once the supervisor handled what was sent before.
	barrier := func() {
		t.Helper()
		reply := make(chan messages.PollReply, 1)
		sys.Root.Send(sup, &messages.Poll{Frontend: "none", Reply: reply})
		select {
		case <-reply:
		case <-time.After(10 * time.Second):
			t.Fatal("the supervisor does not answer")
		}
	}

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
