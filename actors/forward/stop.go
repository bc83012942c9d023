package forward

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// errStopped is why a queue that stopped gives its work back.
var errStopped = errors.New("the forward queue stopped (the peer is gone from discovery, or the node stops)")

// result is what one of the queue's goroutines sends back: a store
// round's (*roundDone) or a request's (*sent). unrecorded is the work it
// leaves leased and unrecorded when no queue takes it.
type result interface {
	unrecorded() []persistence.Work
}

func (r *roundDone) unrecorded() []persistence.Work {
	var work []persistence.Work
	for _, c := range r.claims {
		if c != nil {
			work = append(work, c.Work...)
		}
	}
	return work
}

func (s *sent) unrecorded() []persistence.Work { return s.batch.Work }

// gate carries the results of one queue's goroutines to its mailbox, and
// knows those it has not read. A queue that stops (its peer gone from
// discovery, the node stopping) reads nothing more: a result sent to it
// would go to the dead letters, and its work stay leased to no one until
// its lease ends, so that the queue spawned when the peer is back could
// not send it for up to 2x --http-timeout + 10 s. Once stopped, the gate
// hands over what was sent and not read, and a goroutine that ends later
// is told to give its work back itself.
type gate struct {
	mu      sync.Mutex
	stopped bool
	unread  map[result]struct{}
}

func newGate() *gate { return &gate{unread: map[result]struct{}{}} }

// deliver sends r to the queue, or reports that the queue has stopped.
func (g *gate) deliver(root *actor.RootContext, pid *actor.PID, r result) (delivered bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	g.unread[r] = struct{}{}
	root.Send(pid, r)
	return true
}

// read notes that the queue took r.
func (g *gate) read(r result) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.unread, r)
}

// stop closes the gate and returns what was sent and not read.
func (g *gate) stop() []result {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	var left []result
	for r := range g.unread {
		left = append(left, r)
	}
	g.unread = nil
	return left
}

// deliver sends a goroutine's result to the queue; when the queue has
// stopped, the goroutine records what the result leaves itself.
func (q *Queue) deliver(g *gate, r result) {
	if !g.deliver(q.sys.Root, q.self, r) {
		q.giveBack(q.leftOf(q.cfg.Clock.Now(), r))
	}
}

// leftOf is what a result the queue will not read leaves to record: the
// work it holds, as unsent. A store round's own results are committed:
// their changes are published here, as the queue would have.
func (q *Queue) leftOf(now time.Time, r result) *FlowRound {
	if d, ok := r.(*roundDone); ok && d.err == nil {
		q.publish(d.round.Changes(now, q.cfg.Peer, d.written))
	}
	return q.flow.GiveBack(now, r.unrecorded(), errStopped)
}

// finish, when the queue stops, records what it holds unrecorded (the
// flow's leftovers, and what the results it was sent and has not read
// leave) on a goroutine of its own.
func (q *Queue) finish() {
	now := q.cfg.Clock.Now()
	r := q.flow.Leftover(now, errStopped)
	for _, res := range q.gate.stop() {
		r.Add(q.leftOf(now, res))
	}
	if len(r.Outcomes)+len(r.Updates) > 0 {
		go q.giveBack(r)
	}
}

// giveBack records the results of r for a queue that stopped and
// publishes the changes they made. A failure leaves their work to its
// leases, as a crash would.
func (q *Queue) giveBack(r *FlowRound) {
	if len(r.Outcomes)+len(r.Updates) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
	defer cancel()
	now := q.cfg.Clock.Now()
	written, _, err := ring.Write(ctx, q.cfg.Store, q.cfg.Fence, now,
		persistence.Write{Outcomes: r.Outcomes, Statuses: r.Updates}, nil)
	switch {
	case errors.Is(err, persistence.ErrClosed):
		q.log.Debug("a stopped queue's work not given back: the store is closed; its leases run out", "work", len(r.Outcomes)+len(r.Updates))
	case err != nil:
		q.log.Warn("a stopped queue's work not given back: its leases run out", "work", len(r.Outcomes)+len(r.Updates), "err", err)
	default:
		q.publish(r.Changes(now, q.cfg.Peer, written))
	}
}

// publish publishes changes the queue's results made.
func (q *Queue) publish(changes []messages.StateChanged) {
	for _, ch := range changes {
		q.cfg.Publish(ch)
	}
}
