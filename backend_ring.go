package switchboard

import (
	"context"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// The gateway's ring API (docs/ring.md): a slave's calls to its master,
// answered by the ring coordinator, and GET /api/ring/status.

// ringStatusWait bounds how long GET /api/ring/status waits for the
// coordinator, whatever the request's own deadline.
const ringStatusWait = 5 * time.Second

// sameSite refuses a ring caller that is not an instance of this site.
func (g *gateway) sameSite(from string) error {
	n := g.n
	if from != n.cfg.Name {
		n.log.Warn("ring call from another site refused", "component", "ring", "from", from)
		return messages.Errorf(messages.CodeRingNodeMismatch,
			"%q is not this site (%q): only instances with the same name form a ring", from, n.cfg.Name)
	}
	if n.ring.Load() == nil {
		return messages.Errorf(messages.CodeUnavailable, "the ring is not running yet")
	}
	return nil
}

// askRing sends a request to the coordinator and waits for its answer.
func askRing[T any](ctx context.Context, g *gateway, msg any, reply <-chan T) (T, error) {
	return ask(ctx, g.n.system.Root, g.n.ring.Load(), msg, reply, "the ring coordinator did not answer in time")
}

// RingJoin admits a slave of this site (httpapi.RingBackend).
func (g *gateway) RingJoin(ctx context.Context, from string, j messages.RingJoin) (messages.RingAssignment, error) {
	if err := g.sameSite(from); err != nil {
		return messages.RingAssignment{}, err
	}
	reply := make(chan messages.RingAnswer, 1)
	ans, err := askRing(ctx, g, &messages.RingJoinRequest{Join: j, Reply: reply}, reply)
	if err != nil {
		return messages.RingAssignment{}, err
	}
	return ans.Assignment, ans.Err
}

// RingPoll is a slave's subscription (httpapi.RingBackend): it waits in
// the coordinator; when its caller goes away first it is withdrawn.
func (g *gateway) RingPoll(ctx context.Context, from string, p messages.RingPoll) (messages.RingAssignment, error) {
	n := g.n
	if err := g.sameSite(from); err != nil {
		return messages.RingAssignment{}, err
	}
	req := &messages.RingPollRequest{Poll: p, Reply: make(chan messages.RingAnswer, 1)}
	pid := n.ring.Load()
	n.system.Root.Send(pid, req)
	select {
	case ans := <-req.Reply:
		return ans.Assignment, ans.Err
	case <-n.stopping: // the coordinator answers its subscriptions as it stops
		return messages.RingAssignment{}, messages.Errorf(messages.CodeUnavailable, "the ring master is stopping")
	case <-ctx.Done():
		select {
		case <-n.stopping: // the coordinator may be gone already
		default:
			n.system.Root.Send(pid, &messages.RingPollGone{Request: req})
		}
	}
	return messages.RingAssignment{}, messages.Errorf(messages.CodeUnavailable, "the subscription ended before a publication")
}

// RingLeave removes a slave of this site at once (httpapi.RingBackend).
func (g *gateway) RingLeave(ctx context.Context, from string, l messages.RingLeave) error {
	if err := g.sameSite(from); err != nil {
		return err
	}
	reply := make(chan error, 1)
	err, askErr := askRing(ctx, g, &messages.RingLeaveRequest{Leave: l, Reply: reply}, reply)
	if askErr != nil {
		return askErr
	}
	return err
}

// RingStatus is this instance's view of its ring (httpapi.RingBackend).
func (g *gateway) RingStatus(ctx context.Context) (messages.RingStatus, error) {
	refused := messages.Errorf(messages.CodeUnavailable, "the ring coordinator did not answer")
	if g.n.ring.Load() == nil {
		return messages.RingStatus{}, refused
	}
	ctx, cancel := context.WithTimeout(ctx, ringStatusWait)
	defer cancel()
	reply := make(chan messages.RingStatus, 1)
	st, err := askRing(ctx, g, &messages.RingStatusRequest{Reply: reply}, reply)
	if err != nil {
		return messages.RingStatus{}, refused
	}
	st.Delivery = "ring"
	if g.n.bus.Load().Up() {
		st.Delivery = "bus"
	}
	return st, nil
}
