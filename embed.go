package switchboard

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/delivery"
	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/supervision"
)

// System is the node's actor system, for sending messages to actors an
// embedder spawned. Never pass its PIDs to another node's system.
func (n *Node) System() *actor.ActorSystem { return n.system }

// Spawn starts an actor under the node guardian: it is restarted on a panic
// within the restart budget (the panic is logged with its stack), measured
// by the actor metrics under kind, and stopped with the node (after the
// node's own actors have drained, since it was spawned later). A name is
// unique among the guardian's children, holds no "/" (protoactor's
// separator of a child's name from its parent's) and is none of the
// node's own actors' names.
func (n *Node) Spawn(name, kind string, producer actor.Producer) (*actor.PID, error) {
	if !n.ready.Load() {
		return nil, errors.New("switchboard: spawn needs a started node")
	}
	if err := checkActorName(name); err != nil {
		return nil, err
	}
	return n.guardian.Spawn(name, kind, producer)
}

// RegisterFrontend registers an in-process frontend: messages routed to
// name are sent to pid as *messages.Delivery, and pid must Respond with a
// *messages.DeliveryResult within the webhook timeout. The registration is
// stored (routes may name it); the PID is not: after a restart register
// again, and until then its messages wait. A registration that fails
// leaves the actor registered before (if any) in place. The node watches
// the actor: when it ends, however it ends, the frontend is unregistered
// as by StopActor, unless it was registered again meanwhile.
func (n *Node) RegisterFrontend(ctx context.Context, name string, pid *actor.PID) error {
	if pid == nil {
		return messages.Errorf(messages.CodeInvalidRequest, "frontend %q: nil PID", name)
	}
	// The PID is in place before the intake's FrontendUp kicks the worker,
	// which looks it up then.
	undo := n.actors.Swap(name, pid)
	_, err := n.gw.PutFrontend(ctx, messages.Frontend{Name: name, Mode: messages.ModeActor})
	if err != nil {
		undo()
		// The worker holds again if no actor is left, and sends to the
		// restored one.
		n.workers.Send(&messages.Kick{Frontend: name})
	}
	return err
}

// Subscribe calls fn with every committed state change until cancel is
// called. It may be called before Start, so that nothing committed after
// Start (work resumed from an earlier run included) is missed. fn runs on
// the committing actor's goroutine: keep it short, or hand the event to your
// own goroutine or actor. A panic of fn is recovered and logged (at a
// bounded rate, with its stack): the event is lost to fn, never to the
// other subscribers, and the committing actor goes on.
func (n *Node) Subscribe(fn func(messages.StateChanged)) (cancel func()) {
	n.subMu.Lock()
	defer n.subMu.Unlock()
	n.subSeq++
	id := n.subSeq
	subs := map[uint64]func(messages.StateChanged){id: fn}
	for k, v := range *n.subs.Load() {
		subs[k] = v
	}
	n.subs.Store(&subs)
	return func() {
		n.subMu.Lock()
		defer n.subMu.Unlock()
		subs := map[uint64]func(messages.StateChanged){}
		for k, v := range *n.subs.Load() {
			if k != id {
				subs[k] = v
			}
		}
		n.subs.Store(&subs)
	}
}

// publish announces a committed transition to the subscribers. The map is
// copied on write, so publishing (hot) takes no lock. A message that ends
// failed or forward_failed is logged (at a bounded rate): it waits for an
// operator.
func (n *Node) publish(ev messages.StateChanged) {
	if ev.State == messages.StateDelivered || ev.State == messages.StateFailed {
		n.kickStatus()
	}
	n.events.count(ev)
	n.kickReceipts(ev)
	if ev.State == messages.StateFailed || ev.State == messages.StateForwardFailed {
		n.failures.Write("id", ev.ID, "state", ev.State, "frontend", ev.Frontend, "reason", ev.Reason, "detail", ev.Detail)
	}
	for id, fn := range *n.subs.Load() {
		n.notify(id, fn, ev)
	}
}

// notify calls one subscriber. Its panic is the embedder's bug, not the
// committing actor's: left to unwind, it would restart the intake or a
// worker (dropping what it was doing) and, repeated, exhaust their
// restart budget and stop the node.
func (n *Node) notify(id uint64, fn func(messages.StateChanged), ev messages.StateChanged) {
	defer func() {
		if r := recover(); r != nil {
			n.subPanics.Write("subscriber", id, "id", ev.ID, "state", ev.State, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	fn(ev)
}

// Props builds supervised props for an actor an embedder's actor spawns as
// its own child: the same panic logging, actor metrics (under kind) and
// restart budget as the node's actors. Valid after Start (and after Stop,
// for the children of actors still stopping). Before Start it panics: the
// node has no logger and no metrics yet: its props left their actor's
// panics unlogged and the actor unmeasured, without a word.
func (n *Node) Props(kind string, producer actor.Producer) *actor.Props {
	if !n.supervised.Load() {
		panic("switchboard: Props needs a started node (call it after Start)")
	}
	return supervision.Props(kind, producer, n.supOpts)
}

// StopActor stops an actor spawned with Spawn, on purpose: it handles what
// is in its mailbox, then stops, and its end is not a fatal error. It
// returns once the actor has terminated. An in-process frontend it served
// is unregistered first: its messages wait, as for a frontend not
// registered yet, until RegisterFrontend names another actor.
func (n *Node) StopActor(ctx context.Context, name string) error {
	if !n.ready.Load() {
		return errors.New("switchboard: stop actor needs a started node")
	}
	if err := checkActorName(name); err != nil {
		return err
	}
	// Before the stop: deliveries already in its mailbox are answered as
	// it drains, and no new one is sent to a PID about to die (it would
	// time out and use up an attempt).
	pid := actor.NewPID(n.system.Address(), supervision.GuardianName+"/"+name)
	for _, fe := range n.actors.Forget(pid) {
		n.unregistered(fe, pid, "its actor stops")
	}
	return n.guardian.Stop(ctx, name)
}

// actorEnded is the in-process watcher's news that the actor of r ended
// while registered (StopActor unregisters before the stop: this is an
// actor that stopped other than through StopActor, by itself included, or
// one the node's Stop stopped); r is already unregistered.
func (n *Node) actorEnded(r delivery.Registration) {
	n.unregistered(r.Frontend, r.PID, "its actor ended")
}

// unregistered kicks the worker of frontend, whose actor pid was just
// unregistered: it then holds the frontend's messages, pending and
// without using their attempts, until the frontend is registered again.
func (n *Node) unregistered(frontend string, pid *actor.PID, why string) {
	// The worker withdraws its offer of new work when the kick makes it
	// hold; until then the intake could still hand it some.
	n.board.Revoke(handover.Key{Kind: persistence.WorkDelivery, Target: frontend})
	n.log.Info("in-process frontend unregistered", "frontend", frontend, "actor", pid.GetId(), "why", why)
	n.workers.Send(&messages.Kick{Frontend: frontend})
}

// The embedding API's calls of the gateway: the same calls the HTTPS API
// makes (backend.go), for a program that runs the node in its own process.

// Submit accepts a message and returns after its commit. created is false
// when a message with the submission's id was already stored (it is
// returned unchanged). Submission.Trace, a sampled W3C traceparent or
// empty, is the message's trace: Submit starts none of its own.
func (n *Node) Submit(ctx context.Context, s messages.Submission) (m messages.Message, created bool, err error) {
	return n.gw.Submit(ctx, s)
}

// Message returns a message with its history (not_found when none has id).
func (n *Node) Message(ctx context.Context, id string) (messages.Message, error) {
	return n.gw.Message(ctx, id)
}

// PutRoute creates or replaces a route; its frontend must be registered.
// It returns the route as stored.
func (n *Node) PutRoute(ctx context.Context, r messages.Route) (messages.Route, error) {
	detail := httpapi.RouteAuditDetail(r)
	return embeddedCall(n, ctx, messages.AuditRoutePut, r.Prefix, func(messages.Route) string { return detail },
		func(ctx context.Context) (messages.Route, error) { return n.gw.PutRoute(ctx, r) })
}

// PutFrontend registers (or changes) a pull or webhook frontend (an
// in-process one registers with RegisterFrontend). It returns the
// frontend as stored.
func (n *Node) PutFrontend(ctx context.Context, f messages.Frontend) (messages.Frontend, error) {
	detail := httpapi.FrontendAuditDetail(f)
	return embeddedCall(n, ctx, messages.AuditFrontendPut, f.Name, func(messages.Frontend) string { return detail },
		func(ctx context.Context) (messages.Frontend, error) { return n.gw.PutFrontend(ctx, f) })
}

// Poll is a pull frontend's long-poll: up to max messages, waiting up to
// wait, each leased for lease. The node's stop answers it empty.
func (n *Node) Poll(ctx context.Context, frontend string, max int, wait, lease time.Duration) ([]messages.Outgoing, error) {
	return n.gw.Poll(ctx, frontend, max, wait, lease)
}

// Ack records a pull frontend's verdicts; it returns after their commit.
func (n *Node) Ack(ctx context.Context, frontend string, results []messages.DeliveryResult) ([]messages.AckOutcome, error) {
	return n.gw.Ack(ctx, frontend, results)
}

// Peers lists every peer the node knows, with its forward queue depth.
func (n *Node) Peers(ctx context.Context) ([]messages.PeerInfo, error) { return n.gw.Peers(ctx) }

// Messages lists messages, newest first, a page at a time (q.Limit must be
// positive; q.Validate says what else a query may hold): the list of GET
// /api/messages.
func (n *Node) Messages(ctx context.Context, q persistence.ListQuery) (persistence.Page, error) {
	return n.gw.Messages(ctx, q)
}

// Routes lists the routes.
func (n *Node) Routes(ctx context.Context) ([]messages.Route, error) { return n.gw.Routes(ctx) }

// DeleteRoute removes the route of prefix (not_found when none).
func (n *Node) DeleteRoute(ctx context.Context, prefix string) error {
	_, err := embeddedCall(n, ctx, messages.AuditRouteDelete, prefix, func(struct{}) string { return "" },
		func(ctx context.Context) (struct{}, error) { return struct{}{}, n.gw.DeleteRoute(ctx, prefix) })
	return err
}

// Frontends lists the local frontends.
func (n *Node) Frontends(ctx context.Context) ([]messages.Frontend, error) {
	return n.gw.Frontends(ctx)
}

// DeleteFrontend removes a frontend that no route names (frontend_in_use
// while one does; not_found when there is none). An in-process frontend's
// actor is unregistered with it.
func (n *Node) DeleteFrontend(ctx context.Context, name string) error {
	_, err := embeddedCall(n, ctx, messages.AuditFrontendDelete, name, func(struct{}) string { return "" },
		func(ctx context.Context) (struct{}, error) { return struct{}{}, n.gw.DeleteFrontend(ctx, name) })
	return err
}

// Status is the document of GET /api/status: counts by state, queue
// depths, frontends, peers.
func (n *Node) Status(ctx context.Context) (httpapi.Status, error) { return n.gw.Status(ctx) }

// Resubmit routes a failed or forward_failed message again, as a new
// attempt series; it returns the message as committed.
func (n *Node) Resubmit(ctx context.Context, id string) (messages.Message, error) {
	return embeddedCall(n, ctx, messages.AuditResubmit, id, httpapi.ResubmitAuditDetail,
		func(ctx context.Context) (messages.Message, error) { return n.gw.Resubmit(ctx, id) })
}

// ResubmitBulk routes every message in state (failed or forward_failed)
// again.
func (n *Node) ResubmitBulk(ctx context.Context, state messages.State) (messages.BulkReply, error) {
	ctx, record := embeddedChange(n, ctx, messages.AuditResubmitBulk, string(state), httpapi.BulkAuditDetail)
	res, err := n.gw.ResubmitBulk(ctx, state)
	if err == nil || res.Resubmitted > 0 {
		record(res) // one that failed part of the way resubmitted the pages before
	}
	return res, err
}
