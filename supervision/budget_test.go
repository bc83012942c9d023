package supervision

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBudgetValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    Budget
		ok   bool
	}{
		{"zero means default", Budget{}, true},
		{"default", DefaultBudget(), true},
		{"never restart", Budget{MaxRestarts: 0, Within: time.Second}, true},
		{"negative restarts", Budget{MaxRestarts: -1, Within: time.Second}, false},
		{"no window", Budget{MaxRestarts: 3}, false},
		{"negative window", Budget{MaxRestarts: 3, Within: -time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.b.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// fakeSupervisor records the directives a strategy applies.
type fakeSupervisor struct {
	restarted, stopped int
}

func (*fakeSupervisor) Children() []*actor.PID          { return nil }
func (*fakeSupervisor) EscalateFailure(any, any)        {}
func (f *fakeSupervisor) RestartChildren(...*actor.PID) { f.restarted++ }
func (f *fakeSupervisor) StopChildren(...*actor.PID)    { f.stopped++ }
func (*fakeSupervisor) ResumeChildren(...*actor.PID)    {}

func TestStrategyRestartsWithinBudgetThenStops(t *testing.T) {
	system := newSystem(t)
	m, _ := newMetrics(t)
	defer WatchRestarts(system, m, nil)()
	child := system.NewLocalPID("not-built-by-props")

	for _, tc := range []struct {
		name     string
		b        Budget
		failures int
		restarts int
		stops    int
	}{
		{"within budget", Budget{MaxRestarts: 3, Within: time.Minute}, 3, 3, 0},
		{"one over", Budget{MaxRestarts: 3, Within: time.Minute}, 4, 3, 1},
		// After a stop the history is reset: a new incarnation starts afresh.
		{"after a stop", Budget{MaxRestarts: 3, Within: time.Minute}, 5, 4, 1},
		{"never restart", Budget{MaxRestarts: 0, Within: time.Minute}, 2, 0, 2},
		{"zero is default", Budget{}, 11, 10, 1},
		// Failures further apart than the window never add up.
		{"spread out", Budget{MaxRestarts: 1, Within: time.Nanosecond}, 20, 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Strategy(tc.b)
			sup := &fakeSupervisor{}
			rs := actor.NewRestartStatistics()
			for range tc.failures {
				s.HandleFailure(system, sup, child, rs, "boom", nil)
			}
			if sup.restarted != tc.restarts || sup.stopped != tc.stops {
				t.Errorf("restarted %d stopped %d, want %d and %d", sup.restarted, sup.stopped, tc.restarts, tc.stops)
			}
			if rs.FailureCount() > max(tc.b.orDefault().MaxRestarts, 1) {
				t.Errorf("restart history holds %d failures, want it bounded", rs.FailureCount())
			}
		})
	}
	// Restarts of an actor not built by Props still count, as kind "unknown".
	if got := testutil.ToFloat64(m.restarts.WithLabelValues(unknownKind)); got != 3+3+4+0+10+20 {
		t.Errorf("restarts_total{kind=unknown} = %v", got)
	}
}

func TestGuardianFailureStrategyEscalatesOnce(t *testing.T) {
	system := newSystem(t)
	fatals := make(chan fatal, 4)
	g := &Guardian{
		logger:  orDiscard(nil),
		onFatal: func(child string, err error) { fatals <- fatal{child, err} },
		done:    make(chan struct{}),
	}
	s := &guardianFailure{g: g}
	sup := &fakeSupervisor{}
	pid := system.NewLocalPID(GuardianName)
	s.HandleFailure(system, sup, pid, actor.NewRestartStatistics(), "broken", nil)
	s.HandleFailure(system, sup, pid, actor.NewRestartStatistics(), "broken again", nil)
	g.fatals.Wait()
	if len(fatals) != 1 {
		t.Fatalf("%d OnFatal calls, want 1", len(fatals))
	}
	if f := <-fatals; f.child != GuardianName || !contains(f.err, "broken") {
		t.Errorf("OnFatal(%q, %v)", f.child, f.err)
	}
	if sup.stopped != 2 || sup.restarted != 0 {
		t.Errorf("restarted %d stopped %d, want the guardian stopped, never restarted", sup.restarted, sup.stopped)
	}
}
