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
	// Peers is the peers actor, kicked after commits of forward work (nil
	// without federation).
	Peers *actor.PID
	// Remote finds the peer serving a frontend this node does not serve
	// (the peer book; nil without federation).
	Remote func(frontend string) (peer string, healthy, ok bool)
	// LocalFrontends, when set, is told the names of the local frontends
	// whenever they change (our registry for peers).
	LocalFrontends func(names []string)
	// Publish receives a StateChanged for every committed transition.
	Publish func(messages.StateChanged)
	// NewID generates ids for submissions without one.
	NewID func() string
	// MaxBatch bounds one group commit (default 512: large enough to absorb
	// a burst, small enough that one transaction stays in the milliseconds).
	MaxBatch int
	// StoreTimeout bounds each store call (default 30s).
	StoreTimeout time.Duration
	// Shared is true when other instances of the site change the directory
	// in the same store: a batch holding a message without a route (or a
	// forward for a frontend not known here) reads the directory again
	// before refusing it, so a frontend registered through another
	// instance a moment ago is found. One read per commit at most.
	Shared bool
}

// bulkPage is how many messages one step of a bulk resubmit handles; submits
// queued meanwhile are served between steps.
const bulkPage = 256

// Intake is the intake actor. Build it with NewIntake.
type Intake struct {
	cfg   Config
	log   *slog.Logger
	table *Table
	// batch holds what the next commit stores: submits and forwarded
	// messages. An entry is zeroed once answered.
	batch []entry
	// flushQueued is true while a flush message is in our mailbox.
	flushQueued bool
}

// entry is one message of a group commit: a client's submit, or one
// message of a peer's forward request.
type entry struct {
	sub *messages.Submit
	fwd *forwardReq
	idx int
}

// forwardReq collects the results of one AcceptForwards; it is answered
// when its last message is settled (always within one commit).
type forwardReq struct {
	m       *messages.AcceptForwards
	results []messages.ForwardResult
	left    int
}

func (f *forwardReq) settle(i int, r messages.ForwardResult) {
	f.results[i] = r
	f.left--
	if f.left == 0 {
		f.m.Reply <- messages.AcceptForwardsReply{Results: f.results}
	}
}

// fail answers every entry of the batch that is not answered yet.
func failAll(batch []entry, err error) {
	failed := map[*forwardReq]bool{}
	for _, e := range batch {
		switch {
		case e.sub != nil:
			e.sub.Reply <- messages.SubmitReply{Err: err}
		case e.fwd != nil && !failed[e.fwd] && e.fwd.left > 0:
			failed[e.fwd] = true
			e.fwd.m.Reply <- messages.AcceptForwardsReply{Err: err}
		}
	}
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
		failAll(a.batch, messages.Errorf(messages.CodeUnavailable,
			"the intake restarted before answering; retry with the same id"))
		a.batch = nil
	case *messages.Submit:
		a.submit(c, m)
	case *messages.AcceptForwards:
		a.acceptForwards(c, m)
	case *messages.ApplyStatuses:
		m.Reply <- a.applyStatuses(m)
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
	case *messages.ReloadDirectory:
		a.reload(c)
	}
}

// reload reads the directory again: another instance of the site may have
// changed it in the shared store. Frontends that appeared or changed get
// their worker (FrontendUp of an unchanged one only kicks it), those that
// went away lose it.
func (a *Intake) reload(c actor.Context) {
	old := a.table.LocalNames()
	frontends, err := a.readDirectory()
	if err != nil {
		a.log.Warn("reloading the directory failed; keeping the one known", "err", err)
		return
	}
	now := map[string]bool{}
	for _, f := range frontends {
		now[f.Name] = true
		c.Send(a.cfg.Frontends, &messages.FrontendUp{Frontend: f})
	}
	for _, name := range old {
		if !now[name] {
			c.Send(a.cfg.Frontends, &messages.FrontendDown{Name: name})
		}
	}
	a.localChanged()
}

// load reads the directory. A store that cannot be read is a failure the
// supervisor retries (within its budget).
func (a *Intake) load() {
	_, err := a.readDirectory()
	if err != nil {
		panic(fmt.Errorf("intake: %w", err))
	}
	a.localChanged()
}

// readDirectory builds the routing table from the store's routes and
// frontends and returns the frontends.
func (a *Intake) readDirectory() ([]messages.Frontend, error) {
	ctx, cancel := a.storeCtx()
	defer cancel()
	routes, err := a.cfg.Store.Routes(ctx)
	if err != nil {
		return nil, fmt.Errorf("load routes: %w", err)
	}
	frontends, err := a.cfg.Store.Frontends(ctx)
	if err != nil {
		return nil, fmt.Errorf("load frontends: %w", err)
	}
	a.table = NewTable(routes, frontends)
	a.table.SetRemote(a.cfg.Remote)
	return frontends, nil
}

// localChanged tells LocalFrontends the local frontends' names.
func (a *Intake) localChanged() {
	if a.cfg.LocalFrontends != nil {
		a.cfg.LocalFrontends(a.table.LocalNames())
	}
}

// submit queues a submission for the next commit. It was validated by
// Node.Submit, the only sender of Submit.
func (a *Intake) submit(c actor.Context, m *messages.Submit) {
	// On a shared store the commit resolves it, after reading the
	// directory again if needed.
	if _, err := a.table.Resolve(m.Submission.DestinationMSISDN); err != nil && !a.cfg.Shared {
		m.Reply <- messages.SubmitReply{Err: err}
		return
	}
	a.batch = append(a.batch, entry{sub: m})
	a.queued(c)
}

// queued commits a full batch, or makes sure a flush follows.
func (a *Intake) queued(c actor.Context) {
	if len(a.batch) >= a.cfg.MaxBatch {
		a.commit(c)
		return
	}
	if !a.flushQueued {
		a.flushQueued = true
		c.Send(c.Self(), flush{})
	}
}

// acceptForwards queues a peer's forwarded messages for the next commit.
// They were validated by the gateway; here each is checked against this
// node: it must be addressed to us, for a frontend we serve.
func (a *Intake) acceptForwards(c actor.Context, m *messages.AcceptForwards) {
	req := &forwardReq{m: m, results: make([]messages.ForwardResult, len(m.Forwards)), left: len(m.Forwards)}
	if req.left == 0 {
		m.Reply <- messages.AcceptForwardsReply{Results: req.results}
		return
	}
	for i := range m.Forwards {
		a.batch = append(a.batch, entry{fwd: req, idx: i})
	}
	a.queued(c)
}

// forwardTarget checks a forwarded message against this node.
func (a *Intake) forwardTarget(f messages.Forward) error {
	if f.DestSMSC != a.cfg.Node {
		return messages.Errorf(messages.CodeNotOurFrontend, "dest_smsc is %q; this node is %q", f.DestSMSC, a.cfg.Node)
	}
	if _, ok := a.table.Frontend(f.Frontend); !ok {
		return messages.Errorf(messages.CodeNotOurFrontend, "frontend %q is not served by %s", f.Frontend, a.cfg.Node)
	}
	return nil
}

// newMessage builds what the store keeps for a submission routed to t.
func (a *Intake) newMessage(s messages.Submission, t Target, now time.Time) persistence.NewMessage {
	nm := persistence.NewMessage{
		ID: s.ID, SourceMSISDN: s.SourceMSISDN, DestinationMSISDN: s.DestinationMSISDN,
		Body: s.Body, SourceSMSC: a.cfg.Node, DestSMSC: a.cfg.Node, Frontend: t.Frontend,
		State:  messages.StatePending,
		Detail: "accepted for frontend " + t.Frontend,
		Work:   &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: t.Frontend, DueAt: now},
	}
	if t.Peer != "" {
		nm.DestSMSC = t.Peer
		nm.Work = &persistence.WorkSpec{Kind: persistence.WorkForward, Target: t.Peer, DueAt: now}
		nm.Detail = fmt.Sprintf("accepted for frontend %s at peer %s", t.Frontend, t.Peer)
		if !t.Healthy {
			nm.State = messages.StateForwardQueued
			nm.Detail = fmt.Sprintf("queued for frontend %s at peer %s, which is not healthy", t.Frontend, t.Peer)
		}
	}
	return nm
}

// commit writes the batch in one transaction and answers every submitter.
func (a *Intake) commit(c actor.Context) {
	if len(a.batch) == 0 {
		return
	}
	// a.batch keeps the entries until the store call has returned, so that
	// a panic in it still lets Restarting answer them.
	batch := a.batch
	now := a.cfg.Clock.Now()
	stored, from := a.route(c, batch, now)
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
		live := make([]entry, 0, len(from))
		for _, i := range from {
			live = append(live, batch[i])
		}
		failAll(live, messages.Errorf(messages.CodeUnavailable, "the message store is unavailable; retry with the same id"))
		return
	}
	kicked := map[string]bool{}
	for k, acc := range accepted {
		a.answer(batch[from[k]], acc, nil)
		if !acc.Created {
			continue
		}
		w := stored[k].Work
		a.cfg.Publish(messages.StateChanged{ID: acc.Message.ID, State: acc.Message.State,
			Frontend: acc.Message.Frontend, At: now, Detail: stored[k].Detail})
		if kicked[string(w.Kind)+"/"+w.Target] {
			continue
		}
		kicked[string(w.Kind)+"/"+w.Target] = true
		switch {
		case w.Kind == persistence.WorkDelivery:
			c.Send(a.cfg.Frontends, &messages.Kick{Frontend: w.Target})
		case acc.Message.State == messages.StatePending && a.cfg.Peers != nil:
			c.Send(a.cfg.Peers, &messages.KickPeer{Peer: w.Target})
		}
	}
}

// route turns the batch into what the store keeps; stored[k] came from
// batch[from[k]]. Entries that cannot go are answered and zeroed. On a
// shared store an entry without a route first has the directory read again.
func (a *Intake) route(c actor.Context, batch []entry, now time.Time) (stored []persistence.NewMessage, from []int) {
	errs := make([]error, len(batch))
	stored = make([]persistence.NewMessage, len(batch))
	missed := false
	for i, e := range batch {
		stored[i], errs[i] = a.entryMessage(e, now)
		missed = missed || isMiss(errs[i])
	}
	if missed && a.cfg.Shared {
		a.reload(c)
		for i, e := range batch {
			if isMiss(errs[i]) {
				stored[i], errs[i] = a.entryMessage(e, now)
			}
		}
	}
	from = make([]int, 0, len(batch))
	k := 0
	for i, e := range batch {
		if errs[i] != nil {
			a.answer(e, persistence.Accepted{}, errs[i])
			batch[i] = entry{} // answered
			continue
		}
		stored[k] = stored[i]
		from = append(from, i)
		k++
	}
	return stored[:k], from
}

// isMiss reports whether err refuses a message for want of a route or a
// frontend: what another instance's directory change may have cured.
func isMiss(err error) bool {
	var me *messages.Error
	return errors.As(err, &me) && (me.Code == messages.CodeNoRoute || me.Code == messages.CodeNotOurFrontend)
}

// entryMessage routes one entry into what the store keeps.
func (a *Intake) entryMessage(e entry, now time.Time) (persistence.NewMessage, error) {
	if e.sub != nil {
		s := e.sub.Submission
		// Resolve again: a directory change may have arrived after the submit.
		t, err := a.table.Resolve(s.DestinationMSISDN)
		if err != nil {
			return persistence.NewMessage{}, err
		}
		if s.ID == "" {
			s.ID = a.cfg.NewID()
		}
		return a.newMessage(s, t, now), nil
	}
	f := e.fwd.m.Forwards[e.idx]
	if err := a.forwardTarget(f); err != nil {
		return persistence.NewMessage{}, err
	}
	return persistence.NewMessage{
		ID: f.ID, SourceMSISDN: f.SourceMSISDN, DestinationMSISDN: f.DestinationMSISDN,
		Body: f.Body, SourceSMSC: f.SourceSMSC, DestSMSC: a.cfg.Node, Frontend: f.Frontend,
		State:    messages.StatePending,
		Detail:   fmt.Sprintf("forwarded by %s for frontend %s", e.fwd.m.From, f.Frontend),
		Work:     &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: f.Frontend, DueAt: now},
		ReportTo: e.fwd.m.From,
	}, nil
}

// answer replies to one entry: the stored message, or err.
func (a *Intake) answer(e entry, acc persistence.Accepted, err error) {
	if e.sub != nil {
		if err != nil {
			e.sub.Reply <- messages.SubmitReply{Err: err}
			return
		}
		e.sub.Reply <- messages.SubmitReply{Message: acc.Message, Created: acc.Created}
		return
	}
	id := e.fwd.m.Forwards[e.idx].ID
	r := messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: id}}
	switch {
	case err != nil:
		var me *messages.Error
		if !errors.As(err, &me) {
			me = messages.Errorf(messages.CodeInternal, "%v", err)
		}
		r.Error = me
	case !acc.Created && acc.Message.SourceSMSC != e.fwd.m.Forwards[e.idx].SourceSMSC:
		// Ids are global; one from another origin is another message.
		r.Error = messages.Errorf(messages.CodeInvalidState,
			"id %q is already used here by a message from %s", id, acc.Message.SourceSMSC)
	default:
		r.Duplicate, r.State = !acc.Created, acc.Message.State
		if acc.Message.State == messages.StateFailed {
			r.Reason = acc.Message.Reason
		}
	}
	e.fwd.settle(e.idx, r)
}

// applyStatuses records a peer's delivery_status reports.
func (a *Intake) applyStatuses(m *messages.ApplyStatuses) messages.ApplyStatusesReply {
	now := a.cfg.Clock.Now()
	updates := make([]persistence.StatusUpdate, len(m.Reports))
	for i, r := range m.Reports {
		res := persistence.ResultDelivered
		if r.Status == messages.ReportFailed {
			res = persistence.ResultFailed
		}
		updates[i] = persistence.StatusUpdate{ID: r.ID, From: m.From, Result: res, Reason: r.Reason, At: r.At}
	}
	ctx, cancel := a.storeCtx()
	defer cancel()
	comps, err := a.cfg.Store.ApplyStatus(ctx, now, updates)
	if err != nil {
		return messages.ApplyStatusesReply{Err: a.unavailable("apply status", err)}
	}
	out := make([]messages.StatusReply, len(comps))
	for i, comp := range comps {
		out[i] = messages.StatusReply{ID: updates[i].ID, Outcome: string(comp)}
		if comp != persistence.Applied {
			continue
		}
		state := messages.StateDelivered
		if updates[i].Result == persistence.ResultFailed {
			state = messages.StateFailed
		}
		a.cfg.Publish(messages.StateChanged{ID: updates[i].ID, State: state, At: now,
			Detail: "reported by " + m.From, Reason: updates[i].Reason})
	}
	return messages.ApplyStatusesReply{Results: out}
}

// reroute builds the re-routing of a message to whichever frontend serves
// its destination now.
func (a *Intake) reroute(m messages.Message, now time.Time) (persistence.Reroute, error) {
	t, err := a.table.Resolve(m.DestinationMSISDN)
	if err != nil {
		return persistence.Reroute{}, err
	}
	nm := a.newMessage(messages.Submission{ID: m.ID}, t, now)
	return persistence.Reroute{
		ID: m.ID, Frontend: nm.Frontend, DestSMSC: nm.DestSMSC, State: nm.State,
		Detail: fmt.Sprintf("resubmitted from %s: %s", m.State, nm.Detail),
		Work:   nm.Work,
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
		key := string(r.Work.Kind) + "/" + r.Work.Target
		if kicked[key] {
			continue
		}
		kicked[key] = true
		switch {
		case r.Work.Kind == persistence.WorkDelivery:
			c.Send(a.cfg.Frontends, &messages.Kick{Frontend: r.Work.Target})
		case r.State == messages.StatePending && a.cfg.Peers != nil:
			c.Send(a.cfg.Peers, &messages.KickPeer{Peer: r.Work.Target})
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
	if !a.table.Known(r.Frontend) {
		return messages.Errorf(messages.CodeUnknownFrontend, "frontend %q is served neither here nor by a known peer", r.Frontend)
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
	a.localChanged()
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
	a.localChanged()
	c.Send(a.cfg.Frontends, &messages.FrontendDown{Name: name})
	a.log.Info("frontend deleted", "frontend", name)
	return nil
}

func (a *Intake) unavailable(op string, err error) error {
	a.log.Error("store call failed", "op", op, "err", err)
	return messages.Errorf(messages.CodeUnavailable, "the message store is unavailable (%s)", op)
}
