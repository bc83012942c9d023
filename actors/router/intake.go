package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Config is what the intake actor needs.
type Config struct {
	// Node is this node's name: the source_smsc and dest_smsc of local work.
	Node  string
	Store persistence.Store
	Clock clock.Clock
	// Logger gets component=intake added.
	Logger *slog.Logger
	// Frontends is the frontend supervisor, told about directory changes
	// and kicked after commits.
	Frontends *actor.PID
	// Publish receives a StateChanged for every committed transition.
	Publish func(messages.StateChanged)
	// NewID generates ids for submissions without one.
	NewID func() string
	// MaxBatch bounds one group commit (default 512: large enough to absorb
	// a burst, small enough that one transaction stays in the milliseconds).
	MaxBatch int
	// StoreTimeout bounds each store call (default 30s).
	StoreTimeout time.Duration
}

// bulkPage is how many messages one step of a bulk resubmit handles; submits
// queued meanwhile are served between steps.
const bulkPage = 256

// Intake is the intake actor. Build it with NewIntake.
type Intake struct {
	cfg   Config
	log   *slog.Logger
	table *Table
	batch []*messages.Submit
	// flushQueued is true while a flush message is in our mailbox.
	flushQueued bool
}

// flush commits the current batch; it is sent to ourselves behind the
// submits already queued, so one transaction takes a whole mailbox drain.
type flush struct{}

// bulkStep continues a bulk resubmit after `before`.
type bulkStep struct {
	req    *messages.ResubmitBulk
	before int64
	acc    messages.BulkReply
}

// NewIntake returns the producer of the intake actor.
func NewIntake(cfg Config) actor.Producer {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 30 * time.Second
	}
	return func() actor.Actor {
		return &Intake{cfg: cfg, log: cfg.Logger.With("component", "intake")}
	}
}

func (a *Intake) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.cfg.StoreTimeout)
}

// Receive implements actor.Actor.
func (a *Intake) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.load()
	case *actor.Stopping:
		// A flush queued behind the poison pill never runs: commit and
		// answer what is left now (the store is still open).
		a.commit(c)
	case *actor.Restarting:
		// The batch being built dies with this incarnation: answer it now so
		// submitters retry at once rather than at their deadline. If the
		// panic came after the commit, a retry with the same id finds the
		// stored message (submits with an id are idempotent).
		for _, m := range a.batch {
			if m == nil {
				continue // already answered
			}
			m.Reply <- messages.SubmitReply{Err: messages.Errorf(messages.CodeUnavailable,
				"the intake restarted before answering; retry with the same id")}
		}
		a.batch = nil
	case *messages.Submit:
		a.submit(c, m)
	case flush:
		a.flushQueued = false
		a.commit(c)
	case *messages.Resubmit:
		m.Reply <- a.resubmit(c, m.ID)
	case *messages.ResubmitBulk:
		if !m.State.Resubmittable() {
			m.Reply <- messages.BulkReply{Err: messages.Errorf(messages.CodeInvalidRequest,
				"state %q: only failed and forward_failed messages can be resubmitted", m.State)}
			return
		}
		a.bulk(c, bulkStep{req: m})
	case bulkStep:
		a.bulk(c, m)
	case *messages.PutRoute:
		m.Reply <- a.putRoute(m.Route)
	case *messages.DeleteRoute:
		m.Reply <- a.deleteRoute(m.Prefix)
	case *messages.PutFrontend:
		m.Reply <- a.putFrontend(c, m.Frontend)
	case *messages.DeleteFrontend:
		m.Reply <- a.deleteFrontend(c, m.Name)
	}
}

// load reads the directory. A store that cannot be read is a failure the
// supervisor retries (within its budget).
func (a *Intake) load() {
	ctx, cancel := a.storeCtx()
	defer cancel()
	routes, err := a.cfg.Store.Routes(ctx)
	if err != nil {
		panic(fmt.Errorf("intake: load routes: %w", err))
	}
	frontends, err := a.cfg.Store.Frontends(ctx)
	if err != nil {
		panic(fmt.Errorf("intake: load frontends: %w", err))
	}
	a.table = NewTable(routes, frontends)
}

// submit queues a submission for the next commit. It was validated by
// Node.Submit, the only sender of Submit.
func (a *Intake) submit(c actor.Context, m *messages.Submit) {
	if _, err := a.table.Resolve(m.Submission.DestinationMSISDN); err != nil {
		m.Reply <- messages.SubmitReply{Err: err}
		return
	}
	a.batch = append(a.batch, m)
	if len(a.batch) >= a.cfg.MaxBatch {
		a.commit(c)
		return
	}
	if !a.flushQueued {
		a.flushQueued = true
		c.Send(c.Self(), flush{})
	}
}

// commit writes the batch in one transaction and answers every submitter.
func (a *Intake) commit(c actor.Context) {
	if len(a.batch) == 0 {
		return
	}
	// a.batch keeps the submits until the store call has returned, so that
	// a panic in it still lets Restarting answer them.
	batch := a.batch
	now := a.cfg.Clock.Now()
	// stored[k] came from batch[from[k]].
	stored := make([]persistence.NewMessage, 0, len(batch))
	from := make([]int, 0, len(batch))
	for i, m := range batch {
		s := m.Submission
		// Resolve again: a directory change may have arrived after the submit.
		fe, err := a.table.Resolve(s.DestinationMSISDN)
		if err != nil {
			m.Reply <- messages.SubmitReply{Err: err}
			batch[i] = nil // answered
			continue
		}
		if s.ID == "" {
			s.ID = a.cfg.NewID()
		}
		stored = append(stored, persistence.NewMessage{
			ID: s.ID, SourceMSISDN: s.SourceMSISDN, DestinationMSISDN: s.DestinationMSISDN,
			Body: s.Body, SourceSMSC: a.cfg.Node, DestSMSC: a.cfg.Node, Frontend: fe.Name,
			State:  messages.StatePending,
			Detail: "accepted for frontend " + fe.Name,
			Work:   &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: fe.Name, DueAt: now},
		})
		from = append(from, i)
	}
	if len(stored) == 0 {
		a.batch = nil
		return
	}
	ctx, cancel := a.storeCtx()
	accepted, err := a.cfg.Store.Accept(ctx, now, stored)
	cancel()
	a.batch = nil
	if err != nil {
		a.log.Error("accept failed", "messages", len(stored), "err", err)
		e := messages.Errorf(messages.CodeUnavailable, "the message store is unavailable; retry with the same id")
		for _, i := range from {
			batch[i].Reply <- messages.SubmitReply{Err: e}
		}
		return
	}
	kicked := map[string]bool{}
	for k, acc := range accepted {
		batch[from[k]].Reply <- messages.SubmitReply{Message: acc.Message, Created: acc.Created}
		if !acc.Created {
			continue
		}
		a.cfg.Publish(messages.StateChanged{ID: acc.Message.ID, State: messages.StatePending,
			Frontend: acc.Message.Frontend, At: now, Detail: stored[k].Detail})
		if !kicked[acc.Message.Frontend] {
			kicked[acc.Message.Frontend] = true
			c.Send(a.cfg.Frontends, &messages.Kick{Frontend: acc.Message.Frontend})
		}
	}
}

// reroute builds the re-routing of a message to whichever frontend serves
// its destination now.
func (a *Intake) reroute(m messages.Message, now time.Time) (persistence.Reroute, error) {
	fe, err := a.table.Resolve(m.DestinationMSISDN)
	if err != nil {
		return persistence.Reroute{}, err
	}
	return persistence.Reroute{
		ID: m.ID, Frontend: fe.Name, DestSMSC: a.cfg.Node, State: messages.StatePending,
		Detail: fmt.Sprintf("resubmitted from %s to frontend %s", m.State, fe.Name),
		Work:   &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: fe.Name, DueAt: now},
	}, nil
}

func (a *Intake) resubmit(c actor.Context, id string) messages.ResubmitReply {
	ctx, cancel := a.storeCtx()
	defer cancel()
	m, err := a.cfg.Store.GetMessage(ctx, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return messages.ResubmitReply{Err: messages.Errorf(messages.CodeNotFound, "no message with id %q", id)}
	}
	if err != nil {
		return messages.ResubmitReply{Err: a.unavailable("get message", err)}
	}
	if !m.State.Resubmittable() {
		return messages.ResubmitReply{Err: messages.Errorf(messages.CodeInvalidState,
			"message %s is %s; only failed and forward_failed messages can be resubmitted", id, m.State)}
	}
	now := a.cfg.Clock.Now()
	r, err := a.reroute(m, now)
	if err != nil {
		return messages.ResubmitReply{Err: err}
	}
	res, err := a.cfg.Store.Resubmit(ctx, now, []persistence.Reroute{r})
	if err != nil {
		return messages.ResubmitReply{Err: a.unavailable("resubmit", err)}
	}
	if !res[0].Applied {
		return messages.ResubmitReply{Err: messages.Errorf(messages.CodeInvalidState,
			"message %s is %s; only failed and forward_failed messages can be resubmitted", id, res[0].State)}
	}
	// Read the message as resubmitted before the worker is kicked (and
	// claims it), so the reply shows it as the resubmit left it.
	m, err = a.cfg.Store.GetMessage(ctx, id)
	a.resubmitted(c, []persistence.Reroute{r}, now)
	if err != nil {
		return messages.ResubmitReply{Err: a.unavailable("get message", err)}
	}
	return messages.ResubmitReply{Message: m}
}

// resubmitted publishes and kicks for applied reroutes.
func (a *Intake) resubmitted(c actor.Context, rs []persistence.Reroute, now time.Time) {
	kicked := map[string]bool{}
	for _, r := range rs {
		a.cfg.Publish(messages.StateChanged{ID: r.ID, State: r.State, Frontend: r.Frontend, At: now, Detail: r.Detail})
		if !kicked[r.Frontend] {
			kicked[r.Frontend] = true
			c.Send(a.cfg.Frontends, &messages.Kick{Frontend: r.Frontend})
		}
	}
}

// bulk handles one page of a bulk resubmit and queues the next step, so
// that submits are served in between.
func (a *Intake) bulk(c actor.Context, step bulkStep) {
	ctx, cancel := a.storeCtx()
	defer cancel()
	page, err := a.cfg.Store.ListMessages(ctx, persistence.ListQuery{State: step.req.State, Limit: bulkPage, Before: step.before})
	if err != nil {
		step.acc.Err = a.unavailable("list messages", err)
		step.req.Reply <- step.acc
		return
	}
	now := a.cfg.Clock.Now()
	var rs []persistence.Reroute
	for _, m := range page.Messages {
		r, err := a.reroute(m, now)
		if err != nil {
			step.acc.Skipped++
			continue
		}
		rs = append(rs, r)
	}
	if len(rs) > 0 {
		res, err := a.cfg.Store.Resubmit(ctx, now, rs)
		if err != nil {
			step.acc.Err = a.unavailable("resubmit", err)
			step.req.Reply <- step.acc
			return
		}
		applied := rs[:0]
		for i, r := range res {
			if r.Applied {
				applied = append(applied, rs[i])
			}
		}
		step.acc.Resubmitted += len(applied)
		a.resubmitted(c, applied, now)
	}
	if page.Next == 0 {
		step.req.Reply <- step.acc
		return
	}
	step.before = page.Next
	c.Send(c.Self(), step)
}

func (a *Intake) putRoute(r messages.Route) error {
	if !messages.ValidPrefix(r.Prefix) {
		return messages.Errorf(messages.CodeInvalidRequest, "prefix %q must be 1-20 digits", r.Prefix)
	}
	if !messages.ValidName(r.Frontend) {
		return messages.Errorf(messages.CodeInvalidRequest, "frontend %q is not a valid name", r.Frontend)
	}
	if _, ok := a.table.Frontend(r.Frontend); !ok {
		return messages.Errorf(messages.CodeUnknownFrontend, "frontend %q is not registered", r.Frontend)
	}
	r.UpdatedAt = a.cfg.Clock.Now()
	ctx, cancel := a.storeCtx()
	defer cancel()
	if err := a.cfg.Store.PutRoute(ctx, r); err != nil {
		return a.unavailable("put route", err)
	}
	a.table.PutRoute(r.Prefix, r.Frontend)
	a.log.Info("route set", "prefix", r.Prefix, "frontend", r.Frontend)
	return nil
}

func (a *Intake) deleteRoute(prefix string) error {
	ctx, cancel := a.storeCtx()
	defer cancel()
	err := a.cfg.Store.DeleteRoute(ctx, prefix)
	if errors.Is(err, persistence.ErrNotFound) {
		return messages.Errorf(messages.CodeNotFound, "no route with prefix %q", prefix)
	}
	if err != nil {
		return a.unavailable("delete route", err)
	}
	a.table.DeleteRoute(prefix)
	a.log.Info("route deleted", "prefix", prefix)
	return nil
}

func (a *Intake) putFrontend(c actor.Context, f messages.Frontend) error {
	if err := f.Validate(); err != nil {
		return err
	}
	now := a.cfg.Clock.Now()
	f.CreatedAt, f.UpdatedAt = now, now
	ctx, cancel := a.storeCtx()
	defer cancel()
	if err := a.cfg.Store.PutFrontend(ctx, f); err != nil {
		return a.unavailable("put frontend", err)
	}
	a.table.PutFrontend(f)
	c.Send(a.cfg.Frontends, &messages.FrontendUp{Frontend: f})
	a.log.Info("frontend registered", "frontend", f.Name, "mode", f.Mode, "url", f.URL)
	return nil
}

func (a *Intake) deleteFrontend(c actor.Context, name string) error {
	if prefixes := a.table.RoutesTo(name); len(prefixes) > 0 {
		return messages.Errorf(messages.CodeFrontendInUse,
			"frontend %q is still named by routes %v; delete or change them first", name, prefixes)
	}
	ctx, cancel := a.storeCtx()
	defer cancel()
	err := a.cfg.Store.DeleteFrontend(ctx, name)
	if errors.Is(err, persistence.ErrNotFound) {
		return messages.Errorf(messages.CodeNotFound, "no frontend named %q", name)
	}
	if err != nil {
		return a.unavailable("delete frontend", err)
	}
	a.table.DeleteFrontend(name)
	c.Send(a.cfg.Frontends, &messages.FrontendDown{Name: name})
	a.log.Info("frontend deleted", "frontend", name)
	return nil
}

func (a *Intake) unavailable(op string, err error) error {
	a.log.Error("store call failed", "op", op, "err", err)
	return messages.Errorf(messages.CodeUnavailable, "the message store is unavailable (%s)", op)
}
