package supervision

import (
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// offActor starts a goroutine per *work that panics with the work's
// panicWith (else reports the work's n): the shape of an actor whose store
// rounds run off its goroutine.
type offActor struct {
	seen    chan<- int
	started chan<- struct{}
	before  chan<- struct{}
	log     *slog.Logger
}

func (a *offActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.started <- struct{}{}
	case *work:
		root, self := c.ActorSystem().Root, c.Self()
		go func() {
			defer CarryPanic(root, self, func() { a.before <- struct{}{} })
			if m.panicWith != nil {
				panic(m.panicWith)
			}
			a.seen <- m.n
		}()
	case *Panicked:
		m.Rethrow(a.log, "the call")
	}
}

// TestCarriedPanicRestartsTheActor: a panic on a goroutine the actor
// started does not end the process; it comes back to the actor, runs the
// before function, is logged with its stack there and restarts the actor
// through its supervisor, which goes on with the next message.
func TestCarriedPanicRestartsTheActor(t *testing.T) {
	system := newSystem(t)
	m, _ := newMetrics(t)
	logger, logs := logtest.New()
	defer WatchRestarts(system, m, logger)()
	g, fatals := newGuardian(t, system, m, logger, Budget{})

	seen, started, before := make(chan int, 4), make(chan struct{}, 4), make(chan struct{}, 4)
	pid, err := g.Spawn("off", "off", func() actor.Actor { return &offActor{seen: seen, started: started, before: before, log: logger} })
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	recv(t, started, "the first start")
	system.Root.Send(pid, &work{n: 1, panicWith: "store exploded"})
	recv(t, before, "the before function")
	recv(t, started, "the restart")
	system.Root.Send(pid, &work{n: 2})
	if got := recv(t, seen, "the next work"); got != 2 {
		t.Fatalf("processed %d, want 2", got)
	}
	if got := testutil.ToFloat64(m.restarts.WithLabelValues("off")); got != 1 {
		t.Errorf("restarts_total{kind=off} = %v, want 1", got)
	}
	carried := logs.Records(t, "the call panicked")
	if len(carried) != 1 || carried[0]["panic"] != "store exploded" || !contains(carried[0]["stack"], "offActor).Receive.func1") {
		t.Errorf("carried panic records = %v; want one, with the goroutine's stack", carried)
	}
	if panics := logs.Records(t, "actor panicked"); len(panics) != 1 || panics[0]["panic"] != "store exploded" {
		t.Errorf("actor panic records = %v; want one, of the carried panic", panics)
	}
	noFatal(t, g, fatals)
}
