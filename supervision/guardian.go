package supervision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// GuardianName is the name of the guardian actor: its children are
// "node/<name>". One guardian per actor system.
const GuardianName = "node"

// guardianKind labels the guardian's own metrics.
const guardianKind = "guardian"

var (
	// ErrNameTaken is returned by Guardian.Spawn for a name a live child has.
	ErrNameTaken = errors.New("supervision: child name taken")
	// ErrStopped is returned by Guardian.Spawn once StopAll has begun or the
	// guardian has stopped.
	ErrStopped = errors.New("supervision: guardian stopping or stopped")
	// ErrChildTerminated is the reason given to OnFatal when a child of the
	// guardian terminated while the node was running: its restart budget was
	// exhausted, or it stopped itself.
	ErrChildTerminated = errors.New("supervision: node child terminated")
	// ErrNoChild is returned by Guardian.Stop for a name no live child has.
	ErrNoChild = errors.New("supervision: no such child")
	// ErrGuardianFailed is the reason given to OnFatal (child GuardianName)
	// when the guardian itself panicked.
	ErrGuardianFailed = errors.New("supervision: node guardian failed")
)

// GuardianOptions configure SpawnGuardian.
type GuardianOptions struct {
	// Logger receives the guardian's logs and its children's panic reports.
	// Nil: nothing is logged.
	Logger *slog.Logger
	// Metrics receives the metrics of the guardian and its children. Nil: none.
	Metrics *Metrics
	// Budget is the restart budget of each child (and, through Props, of each
	// child's own children). Zero: DefaultBudget().
	Budget Budget
	// OnFatal is called once for each child that terminates while the guardian
	// is not stopping, and once with GuardianName if the guardian itself fails.
	// The node then shuts down and the process exits non-zero. It runs on its
	// own goroutine, so it may call StopAll. Required.
	OnFatal func(child string, reason error)
}

// Validate reports every problem with o.
func (o GuardianOptions) Validate() error {
	var errs []error
	if err := o.Budget.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.OnFatal == nil {
		errs = append(errs, errors.New("supervision: guardian: OnFatal is required"))
	}
	return errors.Join(errs...)
}

// Guardian is the node guardian: the root actor every node actor is spawned
// under. Its methods are safe from any goroutine except the guardian's own
// (they wait for the guardian to answer).
type Guardian struct {
	system  *actor.ActorSystem
	pid     *actor.PID
	logger  *slog.Logger
	onFatal func(string, error)
	done    chan struct{} // closed when the guardian actor has stopped
	failed  sync.Once
	// fatals tracks the OnFatal goroutines, so that tests can wait for them.
	fatals sync.WaitGroup
}

// SpawnGuardian spawns the node guardian as a root actor named GuardianName.
//
// The guardian supervises its children one for one with o.Budget. A root
// actor ignores WithSupervisor for its OWN failures (protoactor handles them
// with its default strategy, whose restart would stop the whole tree), so the
// guardian is spawned with actor.WithGuardian: a panic of the guardian itself
// stops it (its children with it) and calls OnFatal(GuardianName, ...).
func SpawnGuardian(system *actor.ActorSystem, o GuardianOptions) (*Guardian, error) {
	if system == nil {
		return nil, errors.New("supervision: guardian: nil actor system")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	budget := o.Budget.orDefault()
	g := &Guardian{
		system:  system,
		logger:  orDiscard(o.Logger),
		onFatal: o.OnFatal,
		done:    make(chan struct{}),
	}
	childOpts := Options{Logger: o.Logger, Metrics: o.Metrics, Budget: budget}
	props := Props(guardianKind, func() actor.Actor {
		return &guardianActor{
			g:         g,
			strategy:  &budgetStrategy{budget: budget},
			childOpts: childOpts,
			byName:    make(map[string]*child),
			byID:      make(map[string]*child),
		}
	}, childOpts)
	props.Configure(actor.WithGuardian(&guardianFailure{g: g}))
	pid, err := system.Root.SpawnNamed(props, GuardianName)
	if err != nil {
		return nil, fmt.Errorf("supervision: spawn guardian: %w", err)
	}
	g.pid = pid
	return g, nil
}

// PID is the guardian's PID.
func (g *Guardian) PID() *actor.PID { return g.pid }

// Done is closed once the guardian has stopped, after StopAll or after its
// own failure; all its children have stopped by then.
func (g *Guardian) Done() <-chan struct{} { return g.done }

// Spawn spawns a child named name (PID "node/<name>") built by
// Props(kind, producer, ...) and supervised with the guardian's budget.
// A name that a live child has is refused with ErrNameTaken; a producer that
// panics is an error, not a guardian failure.
func (g *Guardian) Spawn(name, kind string, producer actor.Producer) (*actor.PID, error) {
	var errs []error
	if name == "" {
		errs = append(errs, errors.New("supervision: spawn: empty name"))
	}
	if kind == "" {
		errs = append(errs, errors.New("supervision: spawn: empty kind"))
	}
	if producer == nil {
		errs = append(errs, errors.New("supervision: spawn: nil producer"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	select {
	case <-g.done:
		return nil, ErrStopped
	default:
	}
	reply := make(chan spawnReply, 1)
	g.system.Root.Send(g.pid, &spawnRequest{name: name, kind: kind, producer: producer, reply: reply})
	select {
	case r := <-reply:
		return r.pid, r.err
	case <-g.done:
		select {
		case r := <-reply: // answered just before stopping
			return r.pid, r.err
		default:
			return nil, ErrStopped
		}
	}
}

// StopAll stops the children leaves first: in reverse spawn order, one at a
// time, each with Poison (it handles the messages already in its mailbox,
// then stops; protoactor stops its own children before it finishes), waiting
// for each to terminate before the next. Then the guardian stops itself and
// StopAll returns nil. A child that panics while draining is restarted within
// its budget and keeps draining.
//
// If ctx ends first, the guardian is stopped at once: the remaining children
// are stopped without draining (their queued messages are dropped), and
// StopAll returns the context's error without waiting (see Done). Calling
// StopAll again, or after the guardian has stopped, is harmless.
func (g *Guardian) StopAll(ctx context.Context) error {
	select {
	case <-g.done:
		return nil
	default:
	}
	g.system.Root.Send(g.pid, &stopAllRequest{})
	select {
	case <-g.done:
		return nil
	case <-ctx.Done():
		g.system.Root.Stop(g.pid)
		return fmt.Errorf("supervision: stop children: %w", context.Cause(ctx))
	}
}

// Stop retires one child on purpose: it is poisoned (it handles what is in
// its mailbox, then stops) and its end is not escalated to OnFatal. Stop
// returns once the child has terminated, or with ctx's error.
func (g *Guardian) Stop(ctx context.Context, name string) error {
	reply := make(chan error, 1)
	select {
	case <-g.done:
		return ErrStopped
	default:
	}
	g.system.Root.Send(g.pid, &stopRequest{name: name, reply: reply})
	select {
	case err := <-reply:
		return err
	case <-g.done:
		select {
		case err := <-reply:
			return err
		default:
			return ErrStopped
		}
	case <-ctx.Done():
		return fmt.Errorf("supervision: stop %q: %w", name, context.Cause(ctx))
	}
}

// Ended is closed once the child pid has terminated, however it ended:
// at once for a pid no live child has (it ended already, or was never
// the guardian's), and once the guardian has stopped. A caller that
// waits for a child's answer waits on it too, so that a child gone
// before answering (its budget exhausted: OnFatal) is not waited for.
func (g *Guardian) Ended(pid *actor.PID) <-chan struct{} {
	select {
	case <-g.done:
		return g.done
	default:
	}
	reply := make(chan (<-chan struct{}), 1)
	g.system.Root.Send(g.pid, &endedRequest{id: pid.GetId(), reply: reply})
	select {
	case ended := <-reply:
		return ended
	case <-g.done:
		return g.done
	}
}

// escalate calls OnFatal on its own goroutine: it usually stops the node,
// which waits for the guardian, so calling it on the guardian's goroutine
// would deadlock.
func (g *Guardian) escalate(name string, reason error) {
	g.fatals.Go(func() { g.onFatal(name, reason) })
}

type spawnRequest struct {
	name, kind string
	producer   actor.Producer
	reply      chan<- spawnReply // buffered: the guardian never blocks on it
}

type spawnReply struct {
	pid *actor.PID
	err error
}

type stopAllRequest struct{}

// endedRequest asks for the channel closed when child id has terminated.
type endedRequest struct {
	id    string
	reply chan<- (<-chan struct{}) // buffered
}

// stopRequest retires one child on purpose: its end is not escalated.
type stopRequest struct {
	name  string
	reply chan<- error // buffered; answered when the child has terminated
}

type child struct {
	name, kind string
	pid        *actor.PID
	// retired is set when Stop asked for the child's end; it is answered
	// there instead of escalating.
	retired chan<- error
	// lastFailure is the panic that made the supervisor stop the child.
	lastFailure any
	// ended is closed when the child has terminated (made by Ended).
	ended chan struct{}
}

// guardianActor owns the children bookkeeping; only its goroutine touches it.
type guardianActor struct {
	g         *Guardian
	strategy  *budgetStrategy
	childOpts Options

	byName map[string]*child
	byID   map[string]*child
	order  []*child // live children in spawn order

	stopping bool   // StopAll began, or the actor is stopping for another reason
	halted   bool   // protoactor is stopping the guardian: it stops the children itself
	draining *child // the child StopAll is waiting for
}

var (
	_ actor.Actor              = (*guardianActor)(nil)
	_ actor.SupervisorStrategy = (*guardianActor)(nil)
)

func (a *guardianActor) Receive(c actor.Context) {
	switch msg := c.Message().(type) {
	case *spawnRequest:
		pid, err := a.spawn(c, msg)
		msg.reply <- spawnReply{pid: pid, err: err}
	case *stopAllRequest:
		if !a.stopping {
			a.stopping = true
			a.g.logger.Info("stopping node actors", slog.Int("children", len(a.order)))
			a.drainNext(c)
		}
	case *stopRequest:
		ch, ok := a.byName[msg.name]
		switch {
		case a.stopping:
			msg.reply <- ErrStopped
		case !ok:
			msg.reply <- fmt.Errorf("%w: %q", ErrNoChild, msg.name)
		case ch.retired != nil:
			msg.reply <- fmt.Errorf("supervision: %q is already stopping", msg.name)
		default:
			ch.retired = msg.reply
			c.Poison(ch.pid)
		}
	case *endedRequest:
		ch, ok := a.byID[msg.id]
		if !ok {
			ended := make(chan struct{})
			close(ended)
			msg.reply <- ended
			break
		}
		if ch.ended == nil {
			ch.ended = make(chan struct{})
		}
		msg.reply <- ch.ended
	case *actor.Terminated:
		a.terminated(c, msg.Who)
	case *actor.Stopping:
		// Reached by our own c.Stop after the drain, by StopAll's hard stop
		// on timeout, or by guardianFailure.
		a.stopping, a.halted, a.draining = true, true, nil
	case *actor.Stopped:
		for _, ch := range a.byID {
			if ch.ended != nil { // its Terminated did not come: it is gone with the guardian
				close(ch.ended)
			}
		}
		close(a.g.done)
	}
}

// HandleFailure makes the guardian its children's supervisor: protoactor
// prefers an actor that implements actor.SupervisorStrategy over the Props'
// WithSupervisor. It applies the budget and remembers why a child was
// stopped, for the OnFatal reason. It runs on the guardian's goroutine.
func (a *guardianActor) HandleFailure(system *actor.ActorSystem, supervisor actor.Supervisor, who *actor.PID,
	rs *actor.RestartStatistics, reason, _ any,
) {
	if a.strategy.handle(system, supervisor, who, rs, reason) == actor.StopDirective {
		if ch, ok := a.byID[who.GetId()]; ok {
			ch.lastFailure = reason
		}
	}
}

func (a *guardianActor) spawn(c actor.Context, r *spawnRequest) (pid *actor.PID, err error) {
	if a.stopping {
		return nil, ErrStopped
	}
	if _, ok := a.byName[r.name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrNameTaken, r.name)
	}
	defer func() {
		// The producer runs here, on the guardian's goroutine: its panic is
		// the caller's error, not a guardian failure.
		if p := recover(); p != nil {
			pid, err = nil, fmt.Errorf("supervision: spawn %q: producer panicked: %v", r.name, p)
		}
	}()
	pid, err = c.SpawnNamed(Props(r.kind, r.producer, a.childOpts), r.name)
	if err != nil {
		return nil, fmt.Errorf("supervision: spawn %q: %w", r.name, err)
	}
	ch := &child{name: r.name, kind: r.kind, pid: pid}
	a.byName[ch.name] = ch
	a.byID[pid.GetId()] = ch
	a.order = append(a.order, ch)
	return pid, nil
}

// drainNext poisons the most recently spawned live child, or stops the
// guardian when none is left.
func (a *guardianActor) drainNext(c actor.Context) {
	if a.halted || a.draining != nil {
		return
	}
	if len(a.order) == 0 {
		c.Stop(c.Self())
		return
	}
	ch := a.order[len(a.order)-1]
	a.draining = ch
	a.g.logger.Debug("stopping node actor", slog.String("child", ch.name), slog.String("kind", ch.kind))
	c.Poison(ch.pid)
}

// terminated handles a child's end. A parent gets *actor.Terminated for each
// child without Watch-ing it; Watch-ing as well would deliver it twice. The
// byID lookup makes a duplicate harmless anyway.
func (a *guardianActor) terminated(c actor.Context, who *actor.PID) {
	ch, ok := a.byID[who.GetId()]
	if !ok {
		return
	}
	delete(a.byID, who.GetId())
	delete(a.byName, ch.name)
	if ch.ended != nil {
		close(ch.ended)
	}
	for i, o := range a.order {
		if o == ch {
			a.order = append(a.order[:i], a.order[i+1:]...)
			break
		}
	}
	if ch.retired != nil {
		ch.retired <- nil
		if !a.stopping {
			return
		}
	}
	if a.stopping {
		if ch == a.draining {
			a.draining = nil
			a.drainNext(c)
		} else if !a.halted {
			// Not fatal any more, but it did not drain.
			a.g.logger.Warn("node actor terminated during shutdown",
				slog.String("child", ch.name), slog.String("kind", ch.kind), slog.Any("last_failure", ch.lastFailure))
		}
		return
	}
	err := childError(ch)
	a.g.logger.Error("node actor terminated, escalating",
		slog.String("child", ch.name), slog.String("kind", ch.kind), slog.Any("error", err))
	a.g.escalate(ch.name, err)
}

func childError(ch *child) error {
	if ch.lastFailure == nil {
		return fmt.Errorf("%w: %q (kind %s) stopped", ErrChildTerminated, ch.name, ch.kind)
	}
	if reason, ok := ch.lastFailure.(error); ok {
		return fmt.Errorf("%w: %q (kind %s): restart budget exhausted: %w", ErrChildTerminated, ch.name, ch.kind, reason)
	}
	return fmt.Errorf("%w: %q (kind %s): restart budget exhausted: %v", ErrChildTerminated, ch.name, ch.kind, ch.lastFailure)
}

// guardianFailure is the strategy protoactor applies when the guardian itself
// panics (actor.WithGuardian). Restarting would not help: a protoactor
// restart stops all the actor's children first, so the node would be left
// without actors. The guardian is stopped and the failure escalated.
type guardianFailure struct {
	g *Guardian
}

var _ actor.SupervisorStrategy = (*guardianFailure)(nil)

func (s *guardianFailure) HandleFailure(system *actor.ActorSystem, supervisor actor.Supervisor, who *actor.PID,
	_ *actor.RestartStatistics, reason, _ any,
) {
	system.EventStream.Publish(&actor.SupervisorEvent{Child: who, Reason: reason, Directive: actor.StopDirective})
	s.g.failed.Do(func() {
		s.g.logger.Error("node guardian failed, escalating", slog.Any("panic", reason))
		s.g.escalate(GuardianName, fmt.Errorf("%w: %v", ErrGuardianFailed, reason))
	})
	supervisor.StopChildren(who)
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
