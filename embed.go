package switchboard

import (
	"context"
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
)

// System is the node's actor system, for sending messages to actors an
// embedder spawned. Never pass its PIDs to another node's system.
func (n *Node) System() *actor.ActorSystem { return n.system }

// Spawn starts an actor under the node guardian: it is restarted on a panic
// within the restart budget (the panic is logged with its stack), measured
// by the actor metrics under kind, and stopped with the node (after the
// node's own actors have drained, since it was spawned later). A name is
// unique among the guardian's children.
func (n *Node) Spawn(name, kind string, producer actor.Producer) (*actor.PID, error) {
	if !n.ready.Load() {
		return nil, errors.New("switchboard: spawn needs a started node")
	}
	return n.guardian.Spawn(name, kind, producer)
}

// RegisterFrontend registers an in-process frontend: messages routed to
// name are sent to pid as *messages.Delivery, and pid must Respond with a
// *messages.DeliveryResult within the webhook timeout. The registration is
// stored (routes may name it); the PID is not: after a restart register
// again, and until then its messages wait.
func (n *Node) RegisterFrontend(ctx context.Context, name string, pid *actor.PID) error {
	if pid == nil {
		return messages.Errorf(messages.CodeInvalidRequest, "frontend %q: nil PID", name)
	}
	n.actors.Set(name, pid)
	_, err := n.PutFrontend(ctx, messages.Frontend{Name: name, Mode: messages.ModeActor})
	if err != nil {
		n.actors.Delete(name)
	}
	return err
}

// Subscribe calls fn with every committed state change until cancel is
// called. fn runs on the committing actor's goroutine: keep it short, or
// hand the event to your own goroutine or actor.
func (n *Node) Subscribe(fn func(messages.StateChanged)) (cancel func()) {
	sub := n.system.EventStream.Subscribe(func(evt any) {
		if ev, ok := evt.(*messages.StateChanged); ok {
			fn(*ev)
		}
	})
	return func() { n.system.EventStream.Unsubscribe(sub) }
}

// publish announces a committed transition.
func (n *Node) publish(ev messages.StateChanged) { n.system.EventStream.Publish(&ev) }
