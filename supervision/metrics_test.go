package supervision

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

func TestMetricsMoveAndMailboxDepthReturnsToZero(t *testing.T) {
	system := newSystem(t)
	m, reg := newMetrics(t)
	logger, _ := logtest.New()
	defer WatchRestarts(system, m, logger)()

	// A kind is reported from the moment Props is called.
	seen := make(chan int, 16)
	props := Props("depth", func() actor.Actor { return &worker{seen: seen} }, Options{Logger: logger, Metrics: m})
	if v, ok := gaugeValue(t, reg, "switchboard_actor_mailbox_depth", "depth"); !ok || v != 0 {
		t.Fatalf("depth before spawn = %v (present %v), want 0", v, ok)
	}
	pid := system.Root.Spawn(props)

	// Drain: queued messages are counted, then handled.
	release := holdAt(t, system, pid)
	for n := 1; n <= 5; n++ {
		system.Root.Send(pid, &work{n: n})
	}
	if v, _ := gaugeValue(t, reg, "switchboard_actor_mailbox_depth", "depth"); v != 5 {
		t.Errorf("depth with 5 queued = %v, want 5", v)
	}
	release()
	for range 5 {
		recv(t, seen, "a processed message")
	}
	polltest.Until(t, waitTimeout, "depth 0 after the drain", depthIs(t, reg, "depth", 0))

	// Panic: the mailbox middleware never sees the panicking message received,
	// the depth must not keep it.
	release = holdAt(t, system, pid)
	system.Root.Send(pid, &work{n: 6, panicWith: "boom"})
	system.Root.Send(pid, &work{n: 7})
	system.Root.Send(pid, &work{n: 8})
	if v, _ := gaugeValue(t, reg, "switchboard_actor_mailbox_depth", "depth"); v != 3 {
		t.Errorf("depth with 3 queued = %v, want 3", v)
	}
	release()
	recv(t, seen, "message 7")
	recv(t, seen, "message 8")
	polltest.Until(t, waitTimeout, "depth 0 after the panic", depthIs(t, reg, "depth", 0))
	// A root actor is restarted by protoactor's default strategy, which
	// publishes the same event.
	if got := testutil.ToFloat64(m.restarts.WithLabelValues("depth")); got != 1 {
		t.Errorf("restarts_total{kind=depth} = %v, want 1", got)
	}

	// Stop: the queue is dropped with the actor, and so is its depth.
	release = holdAt(t, system, pid)
	for n := 9; n <= 12; n++ {
		system.Root.Send(pid, &work{n: n})
	}
	stopped := system.Root.StopFuture(pid)
	release()
	if _, err := stopped.Result(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	polltest.Until(t, waitTimeout, "depth 0 after the stop", depthIs(t, reg, "depth", 0))
	select {
	case n := <-seen:
		t.Errorf("message %d handled after Stop", n)
	default:
	}
	polltest.Until(t, waitTimeout, "the stopped mailbox to be forgotten", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.mailboxes) == 0
	})
	if got := m.kindOf(system, pid); got != unknownKind {
		t.Errorf("kind of a stopped actor = %q, want it forgotten", got)
	}

	messages, _ := gaugeValue(t, reg, "switchboard_actor_messages_total", "depth")
	observed, _ := gaugeValue(t, reg, "switchboard_actor_receive_seconds", "depth")
	// 3 gates + 7 work messages (the panicking one included) + lifecycle.
	if messages < 10 {
		t.Errorf("messages_total{kind=depth} = %v, want at least 10", messages)
	}
	if observed != messages {
		t.Errorf("receive_seconds count %v != messages_total %v", observed, messages)
	}

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestMailboxDepthSumsLiveActorsOfAKind checks the sum over actors, with a
// synchronous dispatcher (Options.Dispatcher) for the idle ones.
func TestMailboxDepthSumsLiveActorsOfAKind(t *testing.T) {
	system := newSystem(t)
	m, reg := newMetrics(t)
	seen := make(chan int, 16)
	opts := Options{Metrics: m}
	one := system.Root.Spawn(Props("pair", func() actor.Actor { return &worker{seen: seen} }, opts))
	two := system.Root.Spawn(Props("pair", func() actor.Actor { return &worker{seen: seen} }, opts))
	syncPID := system.Root.Spawn(Props("sync", func() actor.Actor { return &worker{seen: seen} },
		Options{Metrics: m, Dispatcher: actor.NewSynchronizedDispatcher(300)}))

	r1, r2 := holdAt(t, system, one), holdAt(t, system, two)
	system.Root.Send(one, &work{n: 1})
	system.Root.Send(two, &work{n: 2})
	system.Root.Send(two, &work{n: 3})
	if v, _ := gaugeValue(t, reg, "switchboard_actor_mailbox_depth", "pair"); v != 3 {
		t.Errorf("depth{pair} = %v, want 3", v)
	}
	// The synchronous dispatcher handles the message on this goroutine.
	system.Root.Send(syncPID, &work{n: 4})
	if got := recv(t, seen, "the synchronous message"); got != 4 {
		t.Errorf("got %d, want 4", got)
	}
	r1()
	r2()
	for range 3 {
		recv(t, seen, "a processed message")
	}
	polltest.Until(t, waitTimeout, "depth{pair} 0", depthIs(t, reg, "pair", 0))
	for _, pid := range []*actor.PID{one, two, syncPID} {
		if err := system.Root.PoisonFuture(pid).Wait(); err != nil {
			t.Errorf("poison: %v", err)
		}
	}
}

func TestNewMetricsRegistersAllOrNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	clash := prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_actor_restarts_total", Help: "clash"})
	reg.MustRegister(clash)
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("NewMetrics succeeded despite a clash")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchboard_actor_restarts_total" {
			t.Errorf("%s left registered after a failed NewMetrics", mf.GetName())
		}
	}
	if _, err := NewMetrics(nil); err == nil {
		t.Error("NewMetrics(nil) succeeded")
	}
}
