package supervision

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Budget is how often a supervised actor may be restarted: at most MaxRestarts
// restarts within any window of length Within. The failure after that stops the
// actor instead, and its parent sees it terminate (for the node guardian's
// children that means escalation, see Guardian).
//
// The zero Budget means DefaultBudget(): a caller that leaves Options.Budget
// unset gets sane supervision, never "stop on the first panic".
type Budget struct {
	// MaxRestarts is the number of restarts allowed within Within. 0 with a
	// non-zero Within means "never restart": the first failure stops the actor.
	MaxRestarts int
	// Within is the sliding window the restarts are counted in.
	Within time.Duration
}

// DefaultBudget returns 10 restarts per minute.
//
// Why these numbers: a restart costs microseconds and drops only the message
// that panicked, so a handful of poison messages (a burst of malformed input)
// must not take the node down; 10 absorbs such a burst. A cause that does not
// go away (a bug in Started, a broken store row read on every start) panics
// again at once and burns the 10 restarts in milliseconds, so the actor stops
// and the node exits non-zero, where an operator and the process supervisor
// (systemd, Kubernetes back-off) see it. The window is a minute rather than
// protoactor's 10 seconds so that a steady crash loop of one panic every few
// seconds is caught too instead of restarting forever: sustained, the budget
// allows at most one restart every 6 s.
func DefaultBudget() Budget {
	return Budget{MaxRestarts: 10, Within: time.Minute}
}

// Validate reports every problem with b. The zero Budget is valid (it means
// DefaultBudget()).
func (b Budget) Validate() error {
	if b == (Budget{}) {
		return nil
	}
	var errs []error
	if b.MaxRestarts < 0 {
		errs = append(errs, fmt.Errorf("supervision: budget: MaxRestarts %d is negative", b.MaxRestarts))
	}
	if b.Within <= 0 {
		errs = append(errs, fmt.Errorf("supervision: budget: Within %s must be positive", b.Within))
	}
	return errors.Join(errs...)
}

func (b Budget) orDefault() Budget {
	if b == (Budget{}) {
		return DefaultBudget()
	}
	return b
}

// Strategy returns the supervisor strategy for the children of an actor: one
// for one (a failing child is handled alone, its siblings are untouched),
// restart on any panic, and stop the child once b is exhausted.
//
// It behaves like actor.NewOneForOneStrategy(b.MaxRestarts, b.Within,
// actor.DefaultDecider) and publishes the same *actor.SupervisorEvent on the
// system's EventStream (see WatchRestarts), with one difference: protoactor
// keeps every failure time of a child forever (RestartStatistics only grows),
// so a long-lived actor that panics now and then leaks; this strategy forgets
// the history once a whole window has passed without failure.
func Strategy(b Budget) actor.SupervisorStrategy {
	return &budgetStrategy{budget: b.orDefault()}
}

type budgetStrategy struct {
	budget Budget
}

var _ actor.SupervisorStrategy = (*budgetStrategy)(nil)

func (s *budgetStrategy) HandleFailure(system *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason, _ any,
) {
	s.handle(system, supervisor, child, rs, reason)
}

// handle applies the strategy and returns the directive it applied, so that
// the guardian can tell a restart from a stop.
func (s *budgetStrategy) handle(system *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason any,
) actor.Directive {
	directive := actor.RestartDirective
	if s.exhausted(rs) {
		directive = actor.StopDirective
	}
	// Publish before acting, as protoactor does: the subscribers (WatchRestarts)
	// run synchronously here, while the child is still known by kind.
	system.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: directive})
	if directive == actor.StopDirective {
		supervisor.StopChildren(child)
	} else {
		supervisor.RestartChildren(child)
	}
	return directive
}

// exhausted records one failure in rs and reports whether it is over budget.
func (s *budgetStrategy) exhausted(rs *actor.RestartStatistics) bool {
	if s.budget.MaxRestarts <= 0 {
		return true
	}
	if rs.FailureCount() > 0 && rs.NumberOfFailures(s.budget.Within) == 0 {
		rs.Reset() // a quiet window has passed: the old failures no longer count
	}
	rs.Fail()
	if rs.NumberOfFailures(s.budget.Within) > s.budget.MaxRestarts {
		rs.Reset()
		return true
	}
	return false
}
