package supervision

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait in these tests; a hang is a failure, not a
// CI timeout.
const waitTimeout = 10 * time.Second

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	system := actor.NewActorSystem(
		// The dead-letter throttle leaves a goroutine alive for one interval.
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
	)
	t.Cleanup(system.Shutdown)
	return system
}

func newMetrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatalf("NewMetrics: %v", err)
	}
	return m, reg
}

// recv waits for one value from ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// gate blocks the worker until release is closed, so that the test can queue
// messages behind it.
type gate struct {
	entered chan<- struct{}
	release <-chan struct{}
}

// work is handled by a worker: it panics with panicWith when set, else
// reports n.
type work struct {
	n         int
	panicWith any
}

type worker struct {
	name    string
	seen    chan<- int
	stopped chan<- string
}

func (w *worker) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *gate:
		if m.entered != nil {
			m.entered <- struct{}{}
		}
		<-m.release
	case *work:
		if m.panicWith != nil {
			panic(m.panicWith)
		}
		w.seen <- m.n
	case *actor.Stopped:
		if w.stopped != nil {
			w.stopped <- w.name
		}
	}
}

// holdAt sends a gate to pid and waits until the actor is inside it.
func holdAt(t *testing.T, system *actor.ActorSystem, pid *actor.PID) (release func()) {
	t.Helper()
	entered := make(chan struct{}, 1)
	ch := make(chan struct{})
	system.Root.Send(pid, &gate{entered: entered, release: ch})
	recv(t, entered, "the actor to enter the gate")
	return sync.OnceFunc(func() { close(ch) })
}

// gaugeValue returns the value of metric{kind} from reg, and whether it exists.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name, kind string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == "kind" && lp.GetValue() == kind {
					switch {
					case mt.Gauge != nil:
						return mt.GetGauge().GetValue(), true
					case mt.Counter != nil:
						return mt.GetCounter().GetValue(), true
					case mt.Histogram != nil:
						return float64(mt.GetHistogram().GetSampleCount()), true
					}
				}
			}
		}
	}
	return 0, false
}

func depthIs(t *testing.T, reg *prometheus.Registry, kind string, want float64) func() bool {
	return func() bool {
		v, ok := gaugeValue(t, reg, "switchboard_actor_mailbox_depth", kind)
		return ok && v == want
	}
}

func contains(s any, sub string) bool {
	return strings.Contains(fmt.Sprint(s), sub)
}
