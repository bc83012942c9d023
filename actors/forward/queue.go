package forward

import (
	"context"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/supervision"
)

// Private messages (the results of calls are in request.go and store.go).
type (
	tick   struct{}
	parked struct{}
)

// Queue is the forward queue actor of one peer: the shell of a Flow and a
// Link. It sends the peer's forward work and the delivery_status reports
// owed to it, from the outbox, in batches, while the peer is healthy; it
// records their results and claims the next batches in one store round at
// a time, on a goroutine of its own, so Receive waits neither on the
// network nor on the store. Build it with New.
type Queue struct {
	cfg    Config
	log    *slog.Logger
	flow   *Flow
	link   Link
	board  BoardOffer
	self   *actor.PID
	parent *actor.PID
	sys    *actor.ActorSystem
	wake   *clock.Wakeup
	// page is the parking page under way (its token; 0: none) and
	// pageCancel ends it when the queue stops.
	page       uint64
	pageCancel context.CancelFunc
	// gate carries this incarnation's goroutines' results (stop.go).
	gate *gate
}

// New returns the producer of a forward queue actor.
func New(cfg Config) actor.Producer {
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = persistence.CallTimeout
	}
	return func() actor.Actor {
		return &Queue{
			cfg:   cfg,
			log:   cfg.Logger.With("component", "forward", "peer", cfg.Peer),
			flow:  NewFlow(cfg.Peer, cfg.Owner, cfg.Policy),
			board: NewBoardOffer(cfg.Board != nil),
		}
	}
}

// Receive implements actor.Actor.
func (q *Queue) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		q.self, q.parent, q.sys = c.Self(), c.Parent(), c.ActorSystem()
		q.gate = newGate()
		if q.cfg.Board != nil {
			// A restarted queue has the PID of the one before it
			// (handover.Board.Forget).
			q.cfg.Board.Forget(q.boardKey(), q.self)
		}
		q.wake = clock.NewWakeup(q.cfg.Clock, func(uint64) { q.sys.Root.Send(q.self, tick{}) })
		q.schedule()
		q.park(c, q.link.Pending())
		return
	case *actor.Restarting, *actor.Stopping:
		if q.wake != nil {
			q.wake.Cancel()
		}
		if q.pageCancel != nil {
			q.pageCancel()
		}
		_, final := m.(*actor.Stopping)
		switch {
		case final && q.cfg.Board != nil:
			// Stopped for good: no queue will have its PID again (each
			// actor of a peer has a name of its own), so what the board
			// owes it would never be settled (handover.Board.Forget).
			q.cfg.Board.Forget(q.boardKey(), q.self)
		case q.board.Withdraw():
			q.cfg.Board.Offer(q.boardKey(), 0, q.cfg.lease(), q.self)
		}
		if final && q.gate != nil {
			// A restart keeps the mailbox and the PID: the next
			// incarnation reads what this one did not.
			q.finish()
		}
		return
	case *handover.Work:
		m.Arrived(q.cfg.Board, q.self)
		q.flow.Handover(m.Work)
	case messages.PeerLink:
		q.flow.SetLink(m)
		q.park(c, q.link.Set(m))
	case *messages.KickPeer:
		k := persistence.WorkStatus
		if !m.Status {
			k = persistence.WorkForward
			q.park(c, q.link.Pending())
		}
		q.flow.Lane(k).Kick()
	case tick:
		q.schedule()
		q.park(c, q.link.Tick())
		q.flow.Tick()
	case parked:
		if q.link.Page() {
			var ctx context.Context
			ctx, q.pageCancel = context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
			q.page = peer.PageToken()
			go q.parkPage(ctx, q.page)
		}
		return
	case *pageDone:
		if m.token != q.page {
			return // a page of the queue before its restart
		}
		q.page = 0
		q.pageCancel()
		q.park(c, q.link.Paged(m.more, m.err))
		return
	case *sent:
		q.gate.read(m)
		if m.err != nil {
			q.log.Warn("request to peer failed", "kind", m.batch.Kind, "messages", len(m.batch.Work), "answered", m.answered(), "err", m.err)
		}
		q.cfg.Metrics.sent(q.cfg.Peer, m.batch.Kind, m.forward, m.err)
		if q.flow.Sent(q.cfg.Clock.Now(), m.batch, m.forward, m.status, m.err) {
			// One failed check per broken link, not one per request that
			// was in flight when it broke (a busy peer closes nothing: it
			// is up).
			c.Send(q.parent, messages.PeerContactFailed{Err: m.err})
		}
	case *roundDone:
		q.gate.read(m)
		if m.err != nil {
			q.log.Error("recording forward results failed; the leases will run out and the work be retried", "err", m.err)
		}
		sends, changes := q.flow.Done(q.cfg.Clock.Now(), m.round, m.written, m.claims, m.err)
		q.publish(changes)
		for _, b := range sends {
			q.send(b)
		}
	case *supervision.Panicked:
		m.Rethrow(q.log, "store call")
	default:
		return
	}
	q.step()
}

// schedule arms the next tick.
func (q *Queue) schedule() {
	q.wake.Schedule(q.cfg.Clock.Now().Add(q.cfg.Policy.Tick(q.cfg.idlePoll())))
}

// park asks for a page of parking when the Link says so.
func (q *Queue) park(c actor.Context, page bool) {
	if page {
		c.Send(c.Self(), parked{})
	}
}

// step sends the handed-over forwards there is room for, starts the store
// round the flow asks for and updates the queue's offer.
func (q *Queue) step() {
	for _, b := range q.flow.HandedOut() {
		q.send(b)
	}
	if r, ok := q.flow.Next(q.cfg.Clock.Now(), q.cfg.lease()); ok {
		go q.run(q.gate, r)
	}
	if n := q.flow.Offer(); q.board.Set(n, q.cfg.idlePoll()) {
		q.cfg.Board.Offer(q.boardKey(), n, q.cfg.lease(), q.self)
	}
}

// boardKey is this queue's work on the handover board.
func (q *Queue) boardKey() handover.Key {
	return handover.Key{Kind: persistence.WorkForward, Target: q.cfg.Peer}
}
