package forward

import (
	"context"
	"errors"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/ring"
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
// stopped, the goroutine records the result's work as unsent instead.
func (q *Queue) deliver(g *gate, r result) {
	if !g.deliver(q.sys.Root, q.self, r) {
		q.giveBack(q.flow.Unsent(q.cfg.Clock.Now(), r.unrecorded(), errStopped), nil)
	}
}

// finish, when the queue stops, records what it holds unrecorded (the
// flow's leftovers, and the results it was sent and has not read) on a
// goroutine of its own.
func (q *Queue) finish() {
	now := q.cfg.Clock.Now()
	outcomes, updates := q.flow.Leftover(now, errStopped)
	for _, r := range q.gate.stop() {
		outcomes = append(outcomes, q.flow.Unsent(now, r.unrecorded(), errStopped)...)
	}
	if len(outcomes)+len(updates) > 0 {
		go q.giveBack(outcomes, updates)
	}
}

// giveBack records outcomes and updates of a queue that stopped. A
// failure leaves their work to its leases, as a crash would.
func (q *Queue) giveBack(outcomes []persistence.Outcome, updates []persistence.StatusUpdate) {
	if len(outcomes)+len(updates) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
	defer cancel()
	_, _, err := ring.Write(ctx, q.cfg.Store, q.cfg.Fence, q.cfg.Clock.Now(),
		persistence.Write{Outcomes: outcomes, Statuses: updates}, nil)
	switch {
	case errors.Is(err, persistence.ErrClosed):
		q.log.Debug("a stopped queue's work not given back: the store is closed; its leases run out", "work", len(outcomes)+len(updates))
	case err != nil:
		q.log.Warn("a stopped queue's work not given back: its leases run out", "work", len(outcomes)+len(updates), "err", err)
	}
}
