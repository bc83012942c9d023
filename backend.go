package switchboard

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/smpp"
)

// The node is the gateway's Backend: each call sends an actor message and
// waits for its reply (or reads the store).
var _ httpapi.Backend = (*Node)(nil)

// ask sends msg to pid and waits for the reply on ch, the request's
// deadline, or the node's stop.
func ask[T any](ctx context.Context, n *Node, pid *actor.PID, msg any, ch <-chan T) (T, error) {
	var zero T
	if !n.ready.Load() {
		return zero, unavailable("the node is not running")
	}
	n.system.Root.Send(pid, msg)
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return zero, unavailable("no answer in time: " + ctx.Err().Error())
	}
}

func unavailable(why string) error { return messages.Errorf(messages.CodeUnavailable, "%s", why) }

// storeErr turns a store error of a read into an API error.
func (n *Node) storeErr(op string, err error, notFound string) error {
	if errors.Is(err, persistence.ErrNotFound) && notFound != "" {
		return messages.Errorf(messages.CodeNotFound, "%s", notFound)
	}
	n.log.Error("store read failed", "op", op, "err", err)
	return unavailable("the message store is unavailable")
}

// Submit accepts a message: it returns after the commit. created is false
// when a message with the submission's id was already stored (it is
// returned unchanged).
func (n *Node) Submit(ctx context.Context, s messages.Submission) (messages.Message, bool, error) {
	if err := s.Validate(); err != nil {
		return messages.Message{}, false, err
	}
	if err := s.CheckTimes(n.clock.Now(), n.cfg.MessageValidity); err != nil {
		return messages.Message{}, false, err
	}
	if err := n.roomForNew(); err != nil {
		return messages.Message{}, false, err
	}
	if n.inflight.Add(1) > int64(n.cfg.MaxPendingSubmits) {
		n.inflight.Add(-1)
		return messages.Message{}, false, messages.Errorf(messages.CodeOverloaded,
			"more than %d submits are waiting for their commit; retry shortly", n.cfg.MaxPendingSubmits)
	}
	defer n.inflight.Add(-1)
	ch := make(chan messages.SubmitReply, 1)
	r, err := ask(ctx, n, n.intake, &messages.Submit{Submission: s, Reply: ch}, ch)
	if err != nil {
		return messages.Message{}, false, err
	}
	n.noteFull(r.Err)
	return r.Message, r.Created, r.Err
}

// Message returns a message with its history.
func (n *Node) Message(ctx context.Context, id string) (messages.Message, error) {
	m, err := n.store.GetMessage(ctx, id)
	if err != nil {
		return m, n.storeErr("get message", err, "no message with id "+id)
	}
	return m, nil
}

// Messages lists messages, newest first.
func (n *Node) Messages(ctx context.Context, q persistence.ListQuery) (persistence.Page, error) {
	p, err := n.store.ListMessages(ctx, q)
	if err != nil {
		return p, n.storeErr("list messages", err, "")
	}
	return p, nil
}

// Resubmit re-routes one failed or forward_failed message.
func (n *Node) Resubmit(ctx context.Context, id string) (messages.Message, error) {
	ch := make(chan messages.ResubmitReply, 1)
	r, err := ask(ctx, n, n.intake, &messages.Resubmit{ID: id, Reply: ch}, ch)
	if err != nil {
		return messages.Message{}, err
	}
	return r.Message, r.Err
}

// ResubmitBulk re-routes every message in state (failed or forward_failed).
func (n *Node) ResubmitBulk(ctx context.Context, state messages.State) (messages.BulkReply, error) {
	ch := make(chan messages.BulkReply, 1)
	r, err := ask(ctx, n, n.intake, &messages.ResubmitBulk{State: state, Reply: ch}, ch)
	if err != nil {
		return r, err
	}
	return r, r.Err
}

// Status is the document of GET /api/status.
func (n *Node) Status(ctx context.Context) (httpapi.Status, error) {
	st, err := n.stats.get(ctx)
	if err != nil {
		return httpapi.Status{}, n.storeErr("stats", err, "")
	}
	fes, err := n.store.Frontends(ctx)
	if err != nil {
		return httpapi.Status{}, n.storeErr("frontends", err, "")
	}
	doc := httpapi.Status{
		Node: n.cfg.Name, InstanceID: n.cfg.InstanceID, Version: n.cfg.Version, Store: n.store.Kind(),
		Federation: n.cfg.Federation, Counts: map[string]int64{}, OutboxDepth: st.OutboxDepth, DLQDepth: st.DLQDepth,
		ForwardQueueDepth: forwardDepth(st),
		Frontends:         fes,
		Delivery:          "store",
		TraceURL:          n.cfg.TraceURL,
	}
	if n.bus != nil {
		state, why := n.bus.State()
		doc.Bus = &httpapi.BusStatus{State: state, Stream: n.bus.Stream(), Reason: why}
		if state == "up" {
			doc.Delivery = "bus"
		}
	}
	if doc.Peers, err = n.Peers(ctx); err != nil {
		return httpapi.Status{}, err
	}
	if doc.Frontends == nil {
		doc.Frontends = []messages.Frontend{}
	}
	for _, s := range messages.AllStates {
		doc.Counts[string(s)] = st.ByState[s]
	}
	if !st.OldestOutbox.IsZero() {
		t := st.OldestOutbox
		doc.OutboxOldest = &t
	}
	return doc, nil
}

// Routes lists the routes.
func (n *Node) Routes(ctx context.Context) ([]messages.Route, error) {
	rs, err := n.store.Routes(ctx)
	if err != nil {
		return nil, n.storeErr("routes", err, "")
	}
	return rs, nil
}

// PutRoute creates or replaces a route; its frontend must be registered.
// It returns the route as stored.
func (n *Node) PutRoute(ctx context.Context, r messages.Route) (messages.Route, error) {
	if err := n.askErr(ctx, func(ch chan<- error) any { return &messages.PutRoute{Route: r, Reply: ch} }); err != nil {
		return messages.Route{}, err
	}
	n.touchRing()
	routes, err := n.Routes(ctx)
	return findStored(routes, err, func(x messages.Route) bool { return x.Prefix == r.Prefix })
}

// findStored returns the element of a fresh read that a write just stored.
func findStored[T any](all []T, err error, is func(T) bool) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	for _, x := range all {
		if is(x) {
			return x, nil
		}
	}
	return zero, messages.Errorf(messages.CodeUnavailable, "the record was changed again before it could be read back")
}

// DeleteRoute removes a route.
func (n *Node) DeleteRoute(ctx context.Context, prefix string) error {
	err := n.askErr(ctx, func(ch chan<- error) any { return &messages.DeleteRoute{Prefix: prefix, Reply: ch} })
	if err == nil {
		n.touchRing()
	}
	return err
}

// Frontends lists the local frontends.
func (n *Node) Frontends(ctx context.Context) ([]messages.Frontend, error) {
	fes, err := n.store.Frontends(ctx)
	if err != nil {
		return nil, n.storeErr("frontends", err, "")
	}
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
	}
	return fes, nil
}

// PutFrontend registers (or changes) a pull or webhook frontend. It
// returns the frontend as stored.
func (n *Node) PutFrontend(ctx context.Context, f messages.Frontend) (messages.Frontend, error) {
	if err := n.askErr(ctx, func(ch chan<- error) any { return &messages.PutFrontend{Frontend: f, Reply: ch} }); err != nil {
		return messages.Frontend{}, err
	}
	n.touchRing()
	fes, err := n.Frontends(ctx)
	return findStored(fes, err, func(x messages.Frontend) bool { return x.Name == f.Name })
}

// DeleteFrontend removes a frontend that no route names.
func (n *Node) DeleteFrontend(ctx context.Context, name string) error {
	err := n.askErr(ctx, func(ch chan<- error) any { return &messages.DeleteFrontend{Name: name, Reply: ch} })
	if err == nil {
		n.actors.Delete(name)
		n.touchRing()
	}
	return err
}

func (n *Node) askErr(ctx context.Context, build func(chan<- error) any) error {
	ch := make(chan error, 1)
	r, err := ask(ctx, n, n.intake, build(ch), ch)
	if err != nil {
		return err
	}
	return r
}

// Poll is a pull frontend's long-poll.
func (n *Node) Poll(ctx context.Context, fe string, max int, wait, lease time.Duration) ([]messages.Outgoing, error) {
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
	r, err := ask(pollCtx, n, n.frontends, &messages.Poll{Frontend: fe, Max: max, Wait: wait, Lease: lease, Done: pollCtx.Done(), Reply: ch}, ch)
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
func (n *Node) Ack(ctx context.Context, fe string, results []messages.DeliveryResult) ([]messages.AckOutcome, error) {
	ch := make(chan messages.AckReply, 1)
	r, err := ask(ctx, n, n.frontends, &messages.Ack{Frontend: fe, Results: results, Reply: ch}, ch)
	if err != nil {
		return nil, err
	}
	return r.Outcomes, r.Err
}

// Bus implements httpapi.Backend.
func (n *Node) Bus() (state, why string) { return n.BusState() }

// Storage implements httpapi.Backend.
func (n *Node) Storage() (state, why string) { return n.storageState() }

// Ready reports why the node cannot serve (nil when it can).
func (n *Node) Ready(ctx context.Context) error {
	if !n.ready.Load() {
		return errors.New("the node is starting, stopping or failed")
	}
	if err := n.store.Ping(ctx); err != nil {
		return errors.New("the store does not answer")
	}
	return nil
}
