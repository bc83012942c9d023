package supervision

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

type fatal struct {
	child string
	err   error
}

// newGuardian spawns a guardian whose OnFatal reports on the returned channel,
// and stops it at the end of the test.
func newGuardian(t *testing.T, system *actor.ActorSystem, m *Metrics, logger *slog.Logger, b Budget) (*Guardian, chan fatal) {
	t.Helper()
	fatals := make(chan fatal, 16)
	g, err := SpawnGuardian(system, GuardianOptions{
		Logger:  logger,
		Metrics: m,
		Budget:  b,
		OnFatal: func(child string, reason error) { fatals <- fatal{child, reason} },
	})
	if err != nil {
		t.Fatalf("SpawnGuardian: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := g.StopAll(ctx); err != nil {
			t.Errorf("StopAll: %v", err)
		}
		g.fatals.Wait()
	})
	return g, fatals
}

func noFatal(t *testing.T, g *Guardian, fatals chan fatal) {
	t.Helper()
	g.fatals.Wait()
	select {
	case f := <-fatals:
		t.Fatalf("unexpected OnFatal(%q, %v)", f.child, f.err)
	default:
	}
}

func TestPanicRestartsAndKeepsProcessing(t *testing.T) {
	system := newSystem(t)
	m, _ := newMetrics(t)
	logger, logs := logtest.New()
	defer WatchRestarts(system, m, logger)()
	g, fatals := newGuardian(t, system, m, logger, Budget{})

	seen := make(chan int, 16)
	pid, err := g.Spawn("worker", "worker", func() actor.Actor { return &worker{seen: seen} })
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	if pid.GetId() != GuardianName+"/worker" {
		t.Errorf("pid id = %q, want %q", pid.GetId(), GuardianName+"/worker")
	}

	// Queue everything behind a gate so that the messages after the panic are
	// already in the mailbox when it happens.
	release := holdAt(t, system, pid)
	for n := 1; n <= 9; n++ {
		w := &work{n: n}
		if n == 5 {
			w.panicWith = "boom"
		}
		system.Root.Send(pid, w)
	}
	release()
	for _, want := range []int{1, 2, 3, 4, 6, 7, 8, 9} {
		if got := recv(t, seen, "a processed message"); got != want {
			t.Fatalf("processed %d, want %d", got, want)
		}
	}

	// The restart was published before the child resumed, so it is counted.
	if got := testutil.ToFloat64(m.restarts.WithLabelValues("worker")); got != 1 {
		t.Errorf("restarts_total{kind=worker} = %v, want 1", got)
	}
	panics := logs.Records(t, "actor panicked")
	if len(panics) != 1 {
		t.Fatalf("%d panic records, want exactly 1", len(panics))
	}
	p := panics[0]
	if p["level"] != "ERROR" || p["kind"] != "worker" || p["actor"] != GuardianName+"/worker" ||
		p["message_type"] != "*supervision.work" || p["panic"] != "boom" {
		t.Errorf("panic record = %v", p)
	}
	if !contains(p["stack"], "supervision.(*worker).Receive") {
		t.Errorf("panic stack does not show the panic site:\n%v", p["stack"])
	}
	restarted := logs.Records(t, "actor restarted")
	if len(restarted) != 1 || restarted[0]["level"] != "WARN" || restarted[0]["kind"] != "worker" {
		t.Errorf("restart records = %v", restarted)
	}
	noFatal(t, g, fatals)
}

var errBoom = errors.New("boom")

func TestBudgetExhaustedCallsOnFatalOnce(t *testing.T) {
	system := newSystem(t)
	m, reg := newMetrics(t)
	logger, logs := logtest.New()
	defer WatchRestarts(system, m, logger)()
	g, fatals := newGuardian(t, system, m, logger, Budget{MaxRestarts: 2, Within: time.Minute})

	seen := make(chan int, 16)
	pid, err := g.Spawn("crasher", "crasher", func() actor.Actor { return &worker{seen: seen} })
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	release := holdAt(t, system, pid)
	for n := 1; n <= 5; n++ {
		system.Root.Send(pid, &work{n: n, panicWith: errBoom})
	}
	release()
	f := recv(t, fatals, "OnFatal")
	if f.child != "crasher" || !errors.Is(f.err, ErrChildTerminated) || !errors.Is(f.err, errBoom) {
		t.Errorf("OnFatal(%q, %v), want crasher, ErrChildTerminated wrapping errBoom", f.child, f.err)
	}
	if got := testutil.ToFloat64(m.restarts.WithLabelValues("crasher")); got != 2 {
		t.Errorf("restarts_total{kind=crasher} = %v, want 2", got)
	}
	if n := len(logs.Records(t, "actor stopped by its supervisor")); n != 1 {
		t.Errorf("%d stop records, want 1", n)
	}
	if n := len(logs.Records(t, "actor panicked")); n != 3 {
		t.Errorf("%d panic records, want 3 (2 restarts + the one that stopped it)", n)
	}
	// The last 2 messages stay in the stopped actor's suspended mailbox
	// forever: only forgetting the mailbox brings the depth back to 0.
	polltest.Until(t, waitTimeout, "depth 0 after the budget stop", depthIs(t, reg, "crasher", 0))

	// The name is free again once the child is gone.
	if _, err := g.Spawn("crasher", "crasher", func() actor.Actor { return &worker{seen: seen} }); err != nil {
		t.Errorf("Spawn after termination: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := g.StopAll(ctx); err != nil {
		t.Fatalf("StopAll: %v", err)
	}
	noFatal(t, g, fatals) // exactly once: nothing more after the guardian stopped
}

// startCrasher panics on every start: a crash loop that must not last.
type startCrasher struct{}

func (startCrasher) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		panic("cannot start")
	}
}

func TestCrashLoopInStartedEscalates(t *testing.T) {
	system := newSystem(t)
	m, _ := newMetrics(t)
	logger, logs := logtest.New()
	defer WatchRestarts(system, m, logger)()
	g, fatals := newGuardian(t, system, m, logger, Budget{MaxRestarts: 3, Within: time.Minute})

	if _, err := g.Spawn("loop", "loop", func() actor.Actor { return startCrasher{} }); err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	f := recv(t, fatals, "OnFatal")
	if f.child != "loop" || !errors.Is(f.err, ErrChildTerminated) || !contains(f.err, "cannot start") {
		t.Errorf("OnFatal(%q, %v)", f.child, f.err)
	}
	if got := testutil.ToFloat64(m.restarts.WithLabelValues("loop")); got != 3 {
		t.Errorf("restarts_total{kind=loop} = %v, want 3", got)
	}
	for _, r := range logs.Records(t, "actor panicked") {
		if r["message_type"] != "*actor.Started" {
			t.Errorf("panic record message_type = %v", r["message_type"])
		}
	}
}

func TestStopAllStopsInReverseOrderAndDrains(t *testing.T) {
	system := newSystem(t)
	m, reg := newMetrics(t)
	logger, _ := logtest.New()
	g, fatals := newGuardian(t, system, m, logger, Budget{})

	names := []string{"a", "b", "c"}
	stopped := make(chan string, len(names))
	seen := map[string]chan int{}
	var releases []func()
	for _, name := range names {
		seen[name] = make(chan int, 16)
		pid, err := g.Spawn(name, name, func() actor.Actor {
			return &worker{name: name, seen: seen[name], stopped: stopped}
		})
		if err != nil {
			t.Fatalf("Spawn %s: %v", name, err)
		}
		releases = append(releases, holdAt(t, system, pid))
		for n := 1; n <= 5; n++ {
			system.Root.Send(pid, &work{n: n})
		}
	}

	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		errc <- g.StopAll(ctx)
	}()
	// c is poisoned first: the pill is queued behind its 5 messages while it
	// is blocked. Stop would drop them; Poison must not.
	polltest.Until(t, waitTimeout, "the poison pill behind c's messages", depthIs(t, reg, "c", 6))
	for _, release := range releases {
		release()
	}
	if err := recv(t, errc, "StopAll"); err != nil {
		t.Fatalf("StopAll: %v", err)
	}
	select {
	case <-g.Done():
	default:
		t.Fatal("guardian not stopped when StopAll returned")
	}

	var order []string
	for range names {
		order = append(order, recv(t, stopped, "a child to stop"))
	}
	if want := []string{"c", "b", "a"}; !slices.Equal(order, want) {
		t.Errorf("stop order %v, want %v", order, want)
	}
	for _, name := range names {
		for want := 1; want <= 5; want++ {
			select {
			case got := <-seen[name]:
				if got != want {
					t.Errorf("%s processed %d, want %d", name, got, want)
				}
			default:
				t.Errorf("%s stopped without processing message %d", name, want)
			}
		}
	}
	if _, err := g.Spawn("late", "late", func() actor.Actor { return &worker{} }); !errors.Is(err, ErrStopped) {
		t.Errorf("Spawn after StopAll: %v, want ErrStopped", err)
	}
	noFatal(t, g, fatals)
}

func TestStopAllHonoursContext(t *testing.T) {
	system := newSystem(t)
	m, reg := newMetrics(t)
	logger, _ := logtest.New()
	g, fatals := newGuardian(t, system, m, logger, Budget{})

	seen := make(chan int, 16)
	pid, err := g.Spawn("slow", "slow", func() actor.Actor { return &worker{seen: seen} })
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	release := holdAt(t, system, pid)
	defer release()
	for n := 1; n <= 3; n++ {
		system.Root.Send(pid, &work{n: n})
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.StopAll(ctx) }()
	polltest.Until(t, waitTimeout, "the poison pill", depthIs(t, reg, "slow", 4))
	cancel()
	if err := recv(t, errc, "StopAll"); !errors.Is(err, context.Canceled) {
		t.Fatalf("StopAll = %v, want context.Canceled", err)
	}
	release()
	recv(t, g.Done(), "the guardian to stop")
	polltest.Until(t, waitTimeout, "depth 0 after the hard stop", depthIs(t, reg, "slow", 0))
	noFatal(t, g, fatals)
}

func TestGuardianOwnFailureEscalates(t *testing.T) {
	system := newSystem(t)
	m, _ := newMetrics(t)
	logger, logs := logtest.New()
	defer WatchRestarts(system, m, logger)()
	g, fatals := newGuardian(t, system, m, logger, Budget{})

	stopped := make(chan string, 1)
	// A closed reply channel makes the guardian panic after it spawned the
	// child: the only way to break it from outside.
	reply := make(chan spawnReply, 1)
	close(reply)
	system.Root.Send(g.PID(), &spawnRequest{
		name: "x", kind: "x",
		producer: func() actor.Actor { return &worker{name: "x", stopped: stopped} },
		reply:    reply,
	})
	f := recv(t, fatals, "OnFatal")
	if f.child != GuardianName || !errors.Is(f.err, ErrGuardianFailed) {
		t.Errorf("OnFatal(%q, %v), want the guardian", f.child, f.err)
	}
	recv(t, g.Done(), "the guardian to stop")
	if got := recv(t, stopped, "the child to stop"); got != "x" {
		t.Errorf("stopped %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := g.StopAll(ctx); err != nil {
		t.Errorf("StopAll after failure: %v", err)
	}
	if _, err := g.Spawn("y", "y", func() actor.Actor { return &worker{} }); !errors.Is(err, ErrStopped) {
		t.Errorf("Spawn after failure: %v, want ErrStopped", err)
	}
	recs := logs.Records(t, "actor stopped by its supervisor")
	if len(recs) != 1 || recs[0]["kind"] != guardianKind {
		t.Errorf("stop records = %v", recs)
	}
	noFatal(t, g, fatals) // not for the child stopped with the guardian
}

func TestSpawnErrors(t *testing.T) {
	system := newSystem(t)
	g, fatals := newGuardian(t, system, nil, nil, Budget{})
	producer := func() actor.Actor { return &worker{} }

	if _, err := g.Spawn("one", "k", producer); err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	if _, err := g.Spawn("one", "k", producer); !errors.Is(err, ErrNameTaken) {
		t.Errorf("duplicate Spawn: %v, want ErrNameTaken", err)
	}
	if _, err := g.Spawn("", "", nil); err == nil || !contains(err, "empty name") ||
		!contains(err, "empty kind") || !contains(err, "nil producer") {
		t.Errorf("invalid Spawn: %v, want every problem reported", err)
	}
	if _, err := g.Spawn("bad", "k", func() actor.Actor { panic("no") }); err == nil || !contains(err, "producer panicked") {
		t.Errorf("panicking producer: %v", err)
	}
	if _, err := g.Spawn("two", "k", producer); err != nil {
		t.Errorf("Spawn after a failed one: %v", err)
	}
	noFatal(t, g, fatals)
}

func TestSpawnGuardianValidates(t *testing.T) {
	system := newSystem(t)
	_, err := SpawnGuardian(system, GuardianOptions{Budget: Budget{MaxRestarts: -1}})
	if err == nil || !contains(err, "OnFatal") || !contains(err, "MaxRestarts") {
		t.Errorf("SpawnGuardian = %v, want every problem reported", err)
	}
	if _, err := SpawnGuardian(nil, GuardianOptions{OnFatal: func(string, error) {}}); err == nil {
		t.Error("SpawnGuardian(nil system) succeeded")
	}
	// One guardian per system: the name is fixed.
	g, _ := newGuardian(t, system, nil, nil, Budget{})
	if _, err := SpawnGuardian(system, GuardianOptions{OnFatal: func(string, error) {}}); !errors.Is(err, actor.ErrNameExists) {
		t.Errorf("second SpawnGuardian = %v, want ErrNameExists", err)
	}
	_ = g
}

func TestStopRetiresOneChildWithoutEscalating(t *testing.T) {
	system := newSystem(t)
	m, _ := newMetrics(t)
	logger, _ := logtest.New()
	g, fatals := newGuardian(t, system, m, logger, Budget{})

	seen := make(chan int, 16)
	pid, err := g.Spawn("retiree", "worker", func() actor.Actor { return &worker{seen: seen} })
	if err != nil {
		t.Fatal(err)
	}
	release := holdAt(t, system, pid)
	for n := 1; n <= 3; n++ {
		system.Root.Send(pid, &work{n: n})
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- g.Stop(ctx, "retiree") }()
	release()
	if err := recv(t, stopped, "Stop"); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// It drained its mailbox (Poison), and its end was not fatal.
	for n := 1; n <= 3; n++ {
		if got := recv(t, seen, "work"); got != n {
			t.Fatalf("got work %d, want %d", got, n)
		}
	}
	noFatal(t, g, fatals)
	if err := g.Stop(ctx, "retiree"); !errors.Is(err, ErrNoChild) {
		t.Fatalf("second Stop: %v, want ErrNoChild", err)
	}
	if _, err := g.Spawn("retiree", "worker", func() actor.Actor { return &worker{seen: seen} }); err != nil {
		t.Fatalf("name not free after Stop: %v", err)
	}
}

// TestEndedTellsAChildsEnd: Ended is closed when the child terminates
// however it ends, at once for one already gone, and once the guardian
// has stopped.
func TestEndedTellsAChildsEnd(t *testing.T) {
	system := newSystem(t)
	m, _ := newMetrics(t)
	logger, _ := logtest.New()
	g, fatals := newGuardian(t, system, m, logger, Budget{})
	pid, err := g.Spawn("short", "worker", func() actor.Actor { return &worker{seen: make(chan int, 1)} })
	if err != nil {
		t.Fatal(err)
	}
	ended := g.Ended(pid)
	select {
	case <-ended:
		t.Fatal("Ended closed for a live child")
	default:
	}
	system.Root.Stop(pid) // not through the guardian: fatal
	recv(t, ended, "the child's end")
	recv(t, fatals, "OnFatal")
	recv(t, g.Ended(pid), "Ended of a child already gone")
	other, err := g.Spawn("other", "worker", func() actor.Actor { return &worker{seen: make(chan int, 1)} })
	if err != nil {
		t.Fatal(err)
	}
	ended = g.Ended(other)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := g.StopAll(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, ended, "the end of a child stopped with the guardian")
	recv(t, g.Ended(other), "Ended after the guardian stopped")
}
