package supervision

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// WatchRestarts feeds switchboard_actor_restarts_total and the logs from the
// supervision decisions of system: every supervisor (Strategy, protoactor's
// own strategies and guardians) publishes an *actor.SupervisorEvent on the
// EventStream when it applies a directive. Only RestartDirective counts as a
// restart; a restart is logged as a warning, a stop (budget exhausted) as an
// error, anything else as info. m and logger may be nil.
//
// The handler runs synchronously on the supervisor's goroutine, before the
// directive reaches the child, so the child's kind is still known. Call the
// returned stop (idempotent) before the system goes away.
func WatchRestarts(system *actor.ActorSystem, m *Metrics, logger *slog.Logger) (stop func()) {
	sub := system.EventStream.Subscribe(func(evt any) {
		ev, ok := evt.(*actor.SupervisorEvent)
		if !ok {
			return
		}
		kind := m.kindOf(system, ev.Child)
		attrs := []any{
			slog.String("kind", kind),
			slog.String("actor", ev.Child.GetId()),
			slog.String("directive", ev.Directive.String()),
			slog.String("reason", fmt.Sprint(ev.Reason)),
		}
		switch ev.Directive {
		case actor.RestartDirective:
			m.countRestart(kind)
			if logger != nil {
				logger.Warn("actor restarted", attrs...)
			}
		case actor.StopDirective:
			if logger != nil {
				logger.Error("actor stopped by its supervisor", attrs...)
			}
		default:
			if logger != nil {
				logger.Info("supervisor directive applied", attrs...)
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() { system.EventStream.Unsubscribe(sub) })
	}
}
