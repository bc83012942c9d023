package switchboard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/smpp"
	"github.com/switchboard-dev/switchboard/smsc"
)

// gateway is the node as its listeners see it: the HTTPS gateway's
// Backend and RingBackend, and the SMPP listener's Backend. Each call
// checks the request's limits against the node's state and sends an
// actor message and waits for its reply, or reads the store; the
// embedding API's calls of the same names are the same calls
// (Node.Submit, Node.PutRoute ...).
//
// It reads the node rather than copies of its parts: most of them (the
// store, the actors, the peer book) are set while Start runs, the ring
// coordinator only after the gateway serves, and an embedder may call
// before Start.
type gateway struct{ n *Node }

var (
	_ httpapi.Backend     = (*gateway)(nil)
	_ httpapi.RingBackend = (*gateway)(nil)
	_ smsc.Backend        = (*gateway)(nil)
)

// ask sends msg to pid and waits for the reply on ch; when ctx ends first
// it answers unavailable, late saying who did not answer.
func ask[T any](ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, ch <-chan T, late string) (T, error) {
	root.Send(pid, msg)
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		var zero T
		return zero, unavailable(late + ": " + ctx.Err().Error())
	}
}

// askNode asks one of the node's own actors, which answer only while the
// node runs.
func askNode[T any](ctx context.Context, g *gateway, pid *actor.PID, msg any, ch <-chan T) (T, error) {
	if !g.n.ready.Load() {
		var zero T
		return zero, notRunning()
	}
	return ask(ctx, g.n.system.Root, pid, msg, ch, "no answer in time")
}

// askChange is askNode for a change the actor makes and then answers.
// When ctx ends first, its caller is answered unavailable, yet the actor
// may still make the change: its answer is then awaited on its own, and
// one that says the change was made (made) is handed to the call's
// httpapi.LateChange as the result the call would have returned (result),
// which records it in the audit trail with its detail.
func askChange[T any](ctx context.Context, g *gateway, pid *actor.PID, msg any, ch <-chan T, made func(T) bool, result func(T) any) (T, error) {
	if !g.n.ready.Load() {
		var zero T
		return zero, notRunning()
	}
	r, err := ask(ctx, g.n.system.Root, pid, msg, ch, "no answer in time")
	if late := httpapi.LateChange(ctx); err != nil && late != nil {
		go awaitLate(g, msg, ch, func(r T) {
			if made(r) {
				late(result(r))
			}
		})
	}
	return r, err
}

// awaitLate hands the answer to msg that comes after its caller left to
// answered, while the node runs. One that has not come when the node
// stops is logged: the change may have been made unrecorded.
func awaitLate[T any](g *gateway, msg any, ch <-chan T, answered func(T)) {
	select {
	case r := <-ch:
		answered(r)
		return
	case <-g.n.stopping:
	}
	select {
	case r := <-ch:
		answered(r)
	default:
		g.n.log.Warn("the node stopped before answering a change whose caller was answered unavailable: it may have been made without its audit record",
			"change", fmt.Sprintf("%T", msg))
	}
}

// notRunning is the answer of every call before Start and once Stop began.
func notRunning() error { return unavailable("the node is not running") }

// reads is the store for a read: the node's while it runs (from the end
// of Start to the beginning of Stop), else unavailable.
func (g *gateway) reads() (persistence.Store, error) {
	if s := g.n.serving.Load(); s != nil {
		return *s, nil
	}
	return nil, notRunning()
}

// slot waits for one of the node's read slots (Node.readSlots) for a read
// of the API and returns its release; unavailable when ctx ends first.
func (g *gateway) slot(ctx context.Context) (release func(), err error) {
	slots := g.n.readSlots
	if slots == nil {
		return func() {}, nil
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, unavailable("the message store is busy: no answer in time")
	}
}

func unavailable(why string) error { return messages.Errorf(messages.CodeUnavailable, "%s", why) }

// storeErr turns a store error of a read into an API error. A read the
// store refused for its input (ErrInvalid) is the request's fault, not the
// store's: 400 invalid_request, never 503 (which tells a client to retry
// the same request). The gateway's parsers should have refused it first:
// the warning shows where one lets through what the store does not take.
func (g *gateway) storeErr(op string, err error, notFound string) error {
	switch {
	case errors.Is(err, persistence.ErrNotFound) && notFound != "":
		return messages.Errorf(messages.CodeNotFound, "%s", notFound)
	case errors.Is(err, persistence.ErrInvalid):
		g.n.log.Warn("store refused a read's input", "op", op, "err", err)
		return messages.Errorf(messages.CodeInvalidRequest, "%v", err)
	}
	g.n.log.Error("store read failed", "op", op, "err", err)
	return unavailable("the message store is unavailable")
}

// Submit accepts a message: it returns after the commit. created is false
// when a message with the submission's id was already stored (it is
// returned unchanged).
func (g *gateway) Submit(ctx context.Context, s messages.Submission) (messages.Message, bool, error) {
	n := g.n
	if err := s.Validate(); err != nil {
		return messages.Message{}, false, err
	}
	if !n.ready.Load() {
		// Before the checks below, which read what Start sets up.
		return messages.Message{}, false, notRunning()
	}
	// A submission with an id that fails these checks may be a retry of
	// one stored before they failed (its validity has passed since, the
	// disk filled, an instance of an earlier version joined the site): the
	// commit answers it with the stored message if its id is stored, else
	// with the refusal. That costs no read of its own.
	refusal := s.CheckTimes(n.clock.Now(), n.cfg.MessageValidity)
	if refusal == nil {
		refusal = n.roomForNew()
	}
	if refusal == nil {
		refusal = n.siteRefusal(s.Options, messages.CodeSiteCapability)
	}
	if refusal != nil && s.ID == "" {
		return messages.Message{}, false, refusal
	}
	if n.inflight.Add(1) > int64(n.cfg.MaxPendingSubmits) {
		n.inflight.Add(-1)
		return messages.Message{}, false, messages.Errorf(messages.CodeOverloaded,
			"more than %d submits are waiting for their commit; retry shortly", n.cfg.MaxPendingSubmits)
	}
	defer n.inflight.Add(-1)
	ch := make(chan messages.SubmitReply, 1)
	r, err := askNode(ctx, g, n.intake, &messages.Submit{Submission: s, Refusal: refusal, Reply: ch}, ch)
	if err != nil {
		return messages.Message{}, false, err
	}
	if refusal == nil {
		n.noteFull(r.Err)
	}
	if r.Err == nil && !r.Created {
		// A retry is answered with the stored message as GET
		// /api/messages/{id} shows it (history, last detail, next attempt):
		// a read on the duplicate path only, never on a first submit's. If
		// the read fails, the commit's copy (without them) still is the
		// stored message.
		if m, err := n.store.GetMessage(ctx, r.Message.ID); err == nil {
			r.Message = m
		} else {
			n.log.Warn("reading the stored message of a retried submit failed; answering the commit's copy", "id", r.Message.ID, "err", err)
		}
	}
	return r.Message, r.Created, r.Err
}

// Message returns a message with its history.
func (g *gateway) Message(ctx context.Context, id string) (messages.Message, error) {
	st, err := g.reads()
	if err != nil {
		return messages.Message{}, err
	}
	release, err := g.slot(ctx)
	if err != nil {
		return messages.Message{}, err
	}
	defer release()
	m, err := st.GetMessage(ctx, id)
	if err != nil {
		return m, g.storeErr("get message", err, fmt.Sprintf("no message with id %q", id))
	}
	return m, nil
}

// Messages lists messages, newest first.
func (g *gateway) Messages(ctx context.Context, q persistence.ListQuery) (persistence.Page, error) {
	st, err := g.reads()
	if err != nil {
		return persistence.Page{}, err
	}
	release, err := g.slot(ctx)
	if err != nil {
		return persistence.Page{}, err
	}
	defer release()
	p, err := st.ListMessages(ctx, q)
	if err != nil {
		return p, g.storeErr("list messages", err, "")
	}
	return p, nil
}

// Resubmit re-routes one failed or forward_failed message.
func (g *gateway) Resubmit(ctx context.Context, id string) (messages.Message, error) {
	ch := make(chan messages.ResubmitReply, 1)
	r, err := askChange(ctx, g, g.n.intake, &messages.Resubmit{ID: id, Reply: ch}, ch,
		func(r messages.ResubmitReply) bool { return r.Err == nil || errors.Is(r.Err, messages.ErrNotReadBack) },
		func(r messages.ResubmitReply) any { return r.Message })
	if err != nil {
		return messages.Message{}, err
	}
	return r.Message, r.Err
}

// ResubmitBulk re-routes every message in state (failed or forward_failed).
func (g *gateway) ResubmitBulk(ctx context.Context, state messages.State) (messages.BulkReply, error) {
	ch := make(chan messages.BulkReply, 1)
	r, err := askChange(ctx, g, g.n.intake, &messages.ResubmitBulk{State: state, Reply: ch}, ch,
		func(r messages.BulkReply) bool { return r.Err == nil || r.Resubmitted > 0 },
		func(r messages.BulkReply) any { return r })
	if err != nil {
		return r, err
	}
	return r, r.Err
}

// Status is the document of GET /api/status.
func (g *gateway) Status(ctx context.Context) (httpapi.Status, error) {
	n := g.n
	store, err := g.reads()
	if err != nil {
		return httpapi.Status{}, err
	}
	st, due, err := n.stats.read(ctx)
	if err != nil {
		return httpapi.Status{}, g.storeErr("stats", err, "")
	}
	fes, err := store.Frontends(ctx)
	if err != nil {
		return httpapi.Status{}, g.storeErr("frontends", err, "")
	}
	n.live(fes)
	doc := httpapi.Status{
		Node: n.cfg.Name, InstanceID: n.cfg.InstanceID, Version: n.cfg.Version, Store: store.Kind(),
		Federation: n.cfg.Federation, Counts: map[string]int64{}, OutboxDepth: st.OutboxDepth, DLQDepth: st.DLQDepth,
		ForwardQueueDepth: forwardDepth(st),
		Frontends:         fes,
		Delivery:          "store",
		TraceURL:          n.cfg.TraceURL,
		Now:               n.clock.Now().UTC(),
	}
	if b := n.bus.Load(); b != nil {
		state, why := b.State()
		doc.Bus = &httpapi.BusStatus{State: state, Stream: b.Stream(), Reason: why}
		if state == "up" {
			doc.Delivery = "bus"
		}
	}
	if doc.Peers, err = g.Peers(ctx); err != nil {
		return httpapi.Status{}, err
	}
	if doc.Frontends == nil {
		doc.Frontends = []messages.Frontend{}
	}
	for _, s := range messages.AllStates {
		doc.Counts[string(s)] = st.ByState[s]
	}
	// Since when the oldest work due and not being done has waited: what
	// switchboard_outbox_oldest_age_seconds counts from.
	if !due.IsZero() {
		doc.OutboxOldest = &due
	}
	return doc, nil
}

// Routes lists the routes.
func (g *gateway) Routes(ctx context.Context) ([]messages.Route, error) {
	st, err := g.reads()
	if err != nil {
		return nil, err
	}
	rs, err := st.Routes(ctx)
	if err != nil {
		return nil, g.storeErr("routes", err, "")
	}
	return rs, nil
}

// PutRoute creates or replaces a route; its frontend must be registered.
// It returns the route as stored.
func (g *gateway) PutRoute(ctx context.Context, r messages.Route) (messages.Route, error) {
	if err := g.change(ctx, func(ch chan<- error) any { return &messages.PutRoute{Route: r, Reply: ch} }); err != nil {
		return messages.Route{}, err
	}
	g.n.touchRing()
	routes, err := g.Routes(ctx)
	return findStored(routes, err, func(x messages.Route) bool { return x.Prefix == r.Prefix })
}

// findStored returns the element of a fresh read that a write just stored.
// Its errors wrap httpapi.ErrNotReadBack: the write was made.
func findStored[T any](all []T, err error, is func(T) bool) (T, error) {
	var zero T
	if err != nil {
		return zero, fmt.Errorf("%w: %w", httpapi.ErrNotReadBack, err)
	}
	for _, x := range all {
		if is(x) {
			return x, nil
		}
	}
	return zero, fmt.Errorf("%w: %w", httpapi.ErrNotReadBack,
		messages.Errorf(messages.CodeUnavailable, "the record was changed again before it could be read back"))
}

// DeleteRoute removes a route.
func (g *gateway) DeleteRoute(ctx context.Context, prefix string) error {
	err := g.change(ctx, func(ch chan<- error) any { return &messages.DeleteRoute{Prefix: prefix, Reply: ch} })
	if err == nil {
		g.n.touchRing()
	}
	return err
}

// Frontends lists the local frontends.
func (g *gateway) Frontends(ctx context.Context) ([]messages.Frontend, error) {
	st, err := g.reads()
	if err != nil {
		return nil, err
	}
	fes, err := st.Frontends(ctx)
	if err != nil {
		return nil, g.storeErr("frontends", err, "")
	}
	g.n.live(fes)
	return fes, nil
}

// live fills in what the API shows of each frontend's life on this
// instance: an smpp frontend's bind state, and whether its delivery worker
// is down (its restart budget used up) and until when.
func (n *Node) live(fes []messages.Frontend) {
	var states map[string]smpp.BindState
	if n.smpp != nil {
		states = n.smpp.States()
	}
	for i, f := range fes {
		if f.Mode == messages.ModeSMPP {
			st, ok := states[f.Name]
			if !ok {
				st = smpp.StateClosed
			}
			fes[i].BindState = st.String()
		}
		if at, down := n.workersDown.Of(f.Name); down {
			fes[i].Worker = messages.WorkerDown
			if !at.IsZero() {
				at = at.UTC()
				fes[i].WorkerRestartAt = &at
			}
		}
	}
}

// PutFrontend registers (or changes) a pull or webhook frontend. It
// returns the frontend as stored.
func (g *gateway) PutFrontend(ctx context.Context, f messages.Frontend) (messages.Frontend, error) {
	if err := g.change(ctx, func(ch chan<- error) any { return &messages.PutFrontend{Frontend: f, Reply: ch} }); err != nil {
		return messages.Frontend{}, err
	}
	g.n.touchRing()
	fes, err := g.Frontends(ctx)
	return findStored(fes, err, func(x messages.Frontend) bool { return x.Name == f.Name })
}

// DeleteFrontend removes a frontend that no route names.
func (g *gateway) DeleteFrontend(ctx context.Context, name string) error {
	err := g.change(ctx, func(ch chan<- error) any { return &messages.DeleteFrontend{Name: name, Reply: ch} })
	if err == nil {
		g.n.actors.Delete(name)
		g.n.touchRing()
	}
	return err
}

// change asks the intake for a change of the directory, whose reply is
// its error.
func (g *gateway) change(ctx context.Context, build func(chan<- error) any) error {
	ch := make(chan error, 1)
	r, err := askChange(ctx, g, g.n.intake, build(ch), ch, func(err error) bool { return err == nil },
		func(error) any { return nil })
	if err != nil {
		return err
	}
	return r
}

// Poll is a pull frontend's long-poll.
func (g *gateway) Poll(ctx context.Context, fe string, max int, wait, lease time.Duration) ([]messages.Outgoing, error) {
	n := g.n
	ch := make(chan messages.PollReply, 1)
	done := make(chan struct{})
	defer close(done)
	// The node's stop ends the wait too: a poll answered empty is harmless.
	pollCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-n.stopping:
			cancel()
		case <-done:
		}
	}()
	r, err := askNode(pollCtx, g, n.frontends, &messages.Poll{Frontend: fe, Max: max, Wait: wait, Lease: lease, Done: pollCtx.Done(), Reply: ch}, ch)
	if err != nil {
		select {
		case <-n.stopping:
			return []messages.Outgoing{}, nil
		default:
		}
		return nil, err
	}
	return r.Messages, r.Err
}

// Ack records a pull frontend's verdicts; it returns after their commit.
func (g *gateway) Ack(ctx context.Context, fe string, results []messages.DeliveryResult) ([]messages.AckOutcome, error) {
	ch := make(chan messages.AckReply, 1)
	r, err := askNode(ctx, g, g.n.frontends, &messages.Ack{Frontend: fe, Results: results, Reply: ch}, ch)
	if err != nil {
		return nil, err
	}
	return r.Outcomes, r.Err
}

// Timeline is the last hour's points of the node's own chart (timeline.go).
func (g *gateway) Timeline(context.Context) (httpapi.Timeline, error) {
	return httpapi.Timeline{IntervalSeconds: int(timelineInterval / time.Second), Points: g.n.timeline.snapshot()}, nil
}

// Audit records a change a caller made (audit.go).
func (g *gateway) Audit(ctx context.Context, e messages.AuditEntry) { g.n.audit(ctx, e) }

// AuditTrail is a page of the audit trail.
func (g *gateway) AuditTrail(ctx context.Context, q persistence.AuditQuery) (persistence.AuditPage, error) {
	st, err := g.reads()
	if err != nil {
		return persistence.AuditPage{}, err
	}
	release, err := g.slot(ctx)
	if err != nil {
		return persistence.AuditPage{}, err
	}
	defer release()
	p, err := st.ListAudit(ctx, q)
	if err != nil {
		return p, g.storeErr("list audit", err, "")
	}
	return p, nil
}

// Bus is the delivery bus's state (bus.go).
func (g *gateway) Bus() (state, why string) { return g.n.BusState() }

// Storage is the free-space gate's state (space.go).
func (g *gateway) Storage() (state, why string) { return g.n.storageState() }

// Credentials are the SMPP accounts' credentials in force (access.go).
func (g *gateway) Credentials() *auth.Set { return g.n.creds.Current() }

// readyPingWait bounds a readiness check's ping of the store: a store that
// hangs (a Postgres that stopped answering without closing its
// connections) is reported within the probes' timeouts (the StatefulSet's
// is 3 s), not after the request's own.
const readyPingWait = 2 * time.Second

// Ready reports why the node cannot serve (nil when it can).
func (g *gateway) Ready(ctx context.Context) error {
	st, err := g.reads()
	if !g.n.ready.Load() || err != nil {
		return errors.New("the node is starting, stopping or failed")
	}
	ctx, cancel := context.WithTimeout(ctx, readyPingWait)
	defer cancel()
	if err := st.Ping(ctx); err != nil {
		return errors.New("the store does not answer")
	}
	return nil
}
