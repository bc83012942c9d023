package supervision

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
)

// Options are what Props installs around an actor.
type Options struct {
	// Logger receives the panic reports. Nil: panics are not logged (the
	// supervisor still acts on them).
	Logger *slog.Logger
	// Metrics receives the actor metrics. Nil: no metrics, and restarts of
	// this actor cannot be attributed to its kind.
	Metrics *Metrics
	// Budget is the restart budget of the actor's CHILDREN (protoactor's
	// WithSupervisor governs children, not the actor itself). Zero: DefaultBudget().
	Budget Budget
	// Dispatcher, when set, replaces protoactor's default dispatcher, e.g.
	// actor.NewSynchronizedDispatcher(300) in deterministic tests.
	Dispatcher actor.Dispatcher
}

// Props is the one way Switchboard actors are built. kind labels the metrics
// and logs: a low-cardinality name of the concept ("peer", "forward"), never a
// per-instance name. It installs
//   - an unbounded mailbox whose depth is reported per kind (a bounded mailbox
//     would block the sender, HTTP handlers included, when full);
//   - a receiver middleware that times and counts every receive, and that logs
//     a panic once with its stack before re-panicking so that the supervisor
//     restarts the actor (protoactor itself logs panics without a stack);
//   - Strategy(o.Budget) as the supervisor of the actor's children.
//
// Props panics if kind is empty or producer is nil: both are programming errors.
func Props(kind string, producer actor.Producer, o Options) *actor.Props {
	if kind == "" {
		panic("supervision: Props needs a kind")
	}
	if producer == nil {
		panic("supervision: Props needs a producer")
	}
	mailbox := actor.Unbounded()
	if o.Metrics != nil {
		o.Metrics.addKind(kind)
		mailbox = o.Metrics.mailboxProducer(kind)
	}
	opts := []actor.PropsOption{
		actor.WithMailbox(mailbox),
		actor.WithReceiverMiddleware(receiverMiddleware(kind, o.Logger, o.Metrics)),
		actor.WithSupervisor(Strategy(o.Budget)),
	}
	if o.Dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(o.Dispatcher))
	}
	return actor.PropsFromProducer(producer, opts...)
}

// receiverMiddleware sees every message the actor receives, lifecycle messages
// (Started, Restarting, Stopping, Stopped, Terminated) included.
func receiverMiddleware(kind string, logger *slog.Logger, m *Metrics) actor.ReceiverMiddleware {
	var (
		messages prometheus.Counter
		receive  prometheus.Observer
	)
	if m != nil {
		messages = m.messages.WithLabelValues(kind)
		receive = m.receive.WithLabelValues(kind)
	}
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if m != nil {
				switch env.Message.(type) {
				case *actor.Started:
					// Registered before the actor's own code runs, so a panic in
					// Started is still attributed to the kind.
					m.actorStarted(c.ActorSystem(), c.Self(), kind)
				case *actor.Stopped:
					defer m.actorStopped(c.ActorSystem(), c.Self())
				}
			}
			start := time.Now()
			defer func() {
				if m != nil {
					messages.Inc()
					receive.Observe(time.Since(start).Seconds())
				}
				if r := recover(); r != nil {
					// The deferred call runs before the stack unwinds, so
					// debug.Stack shows where the panic happened.
					if logger != nil {
						logger.Error("actor panicked",
							slog.String("kind", kind),
							slog.String("actor", c.Self().GetId()),
							slog.String("message_type", fmt.Sprintf("%T", env.Message)),
							slog.Any("panic", r),
							slog.String("stack", string(debug.Stack())))
					}
					panic(r) // the mailbox recovers it and escalates to the supervisor
				}
			}()
			next(c, env)
		}
	}
}
