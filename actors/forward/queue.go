package forward

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/supervision"
)

// Private messages.
type (
	tick   struct{}
	parked struct{}
	// sent is a request's result, sent back by its goroutine.
	sent struct {
		batch   Batch
		forward []messages.ForwardResult
		status  []messages.StatusReply
		err     error
	}
	// roundDone is a store round's result.
	roundDone struct {
		round   *FlowRound
		written persistence.Written
		claims  []*persistence.Claim
		err     error
	}
)

// Queue is the forward queue actor of one peer: the shell of a Flow. It
// sends the peer's forward work and the delivery_status reports owed to
// it, from the outbox, in batches, while the peer is healthy; it records
// their results and claims the next batches in one store round at a time,
// on a goroutine of its own, so Receive waits neither on the network nor on
// the store. Build it with New.
type Queue struct {
	cfg     Config
	log     *slog.Logger
	link    messages.PeerLink
	flow    *Flow
	self    *actor.PID
	parent  *actor.PID
	sys     *actor.ActorSystem
	wake    *clock.Wakeup
	parking bool
	// parkAgain: a park failed; the next tick tries again while the peer
	// is not healthy.
	parkAgain bool
	offered   int // what the queue last put on the handover board
}

// New returns the producer of a forward queue actor.
func New(cfg Config) actor.Producer {
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = persistence.CallTimeout
	}
	return func() actor.Actor {
		return &Queue{
			cfg:  cfg,
			log:  cfg.Logger.With("component", "forward", "peer", cfg.Peer),
			flow: NewFlow(cfg.Peer, cfg.Owner, cfg.Policy),
		}
	}
}

// Receive implements actor.Actor.
func (q *Queue) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		q.self, q.parent, q.sys = c.Self(), c.Parent(), c.ActorSystem()
		if q.cfg.Board != nil {
			// A queue spawned for a peer that was gone has the PID of the
			// one before it (handover.Board.Forget).
			q.cfg.Board.Forget(q.boardKey(), q.self)
		}
		q.wake = clock.NewWakeup(q.cfg.Clock, func(uint64) { q.sys.Root.Send(q.self, tick{}) })
		q.schedule()
		// Until the peer actor says otherwise the peer is not healthy: its
		// pending messages (from before a restart) are queued.
		q.startParking(c)
		return
	case *actor.Restarting, *actor.Stopping:
		if q.wake != nil {
			q.wake.Cancel()
		}
		q.offer(0)
		return
	case *handover.Work:
		m.Arrived(q.cfg.Board, q.self)
		q.flow.Handover(m.Work)
	case messages.PeerLink:
		q.setLink(c, m)
	case *messages.KickPeer:
		if !q.link.Healthy && !m.Status {
			// A pending message committed while the peer turned unhealthy
			// (the intake saw it healthy): queue it like the others.
			q.startParking(c)
		}
		if m.Status {
			q.flow.Lane(persistence.WorkStatus).Kick()
		} else {
			q.flow.Lane(persistence.WorkForward).Kick()
		}
	case tick:
		q.schedule()
		if q.parkAgain && !q.link.Healthy {
			// A park that failed (the store was down): its pending
			// messages must still count down to forward_failed.
			q.parkAgain = false
			q.startParking(c)
		}
		for _, k := range kinds {
			q.flow.Lane(k).Kick()
		}
	case parked:
		q.park(c)
		return
	case *sent:
		q.sent(c, m)
	case *roundDone:
		if m.err != nil {
			q.log.Error("recording forward results failed; the leases will run out and the work be retried", "err", m.err)
		}
		sends, changes := q.flow.Done(q.cfg.Clock.Now(), m.round, m.written, m.claims, m.err)
		for _, ch := range changes {
			q.cfg.Publish(ch)
		}
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

// schedule arms the next tick: the retry interval, or sooner in a site of
// several instances, whose other instances commit work this queue owns
// without kicking it.
func (q *Queue) schedule() {
	every := q.cfg.Policy.RetryInterval
	if q.cfg.Fence != nil {
		if p := q.cfg.Fence.IdlePoll(); p > 0 {
			every = min(every, p)
		}
	}
	q.wake.Schedule(q.cfg.Clock.Now().Add(every))
}

func (q *Queue) setLink(c actor.Context, l messages.PeerLink) {
	was := q.link.Healthy
	q.link = l
	for _, k := range kinds {
		lane := q.flow.Lane(k)
		// A lane closed by a failed request reopens on the next passed
		// check; an open lane stays as it is.
		if l.Healthy && (!was || !lane.Open()) {
			lane.SetOpen(true)
		} else if !l.Healthy {
			lane.SetOpen(false)
		}
	}
	if l.Healthy {
		q.parking = false
	} else if was {
		q.startParking(c)
	}
}

func (q *Queue) startParking(c actor.Context) {
	if !q.parking {
		q.parking = true
		c.Send(c.Self(), parked{})
	}
}

// park moves one page of the peer's pending messages to forward_queued.
func (q *Queue) park(c actor.Context) {
	if !q.parking || q.link.Healthy {
		q.parking = false
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
	more, err := peer.Park(ctx, q.cfg.Store, q.cfg.Clock.Now(), q.cfg.Peer, "peer "+q.cfg.Peer+" is not healthy", q.cfg.Publish)
	cancel()
	if err != nil {
		q.log.Error("queueing pending forwards failed; trying again at the next tick", "err", err)
		q.parking, q.parkAgain = false, true
		return
	}
	if more {
		c.Send(c.Self(), parked{})
		return
	}
	q.parking = false
}

// step sends the handed-over forwards there is room for, starts the store
// round the flow asks for and updates the queue's offer.
func (q *Queue) step() {
	for _, b := range q.flow.HandedOut() {
		q.send(b)
	}
	if r, ok := q.flow.Next(q.cfg.Clock.Now(), q.lease()); ok {
		go q.run(r)
	}
	if q.cfg.Fence == nil || q.cfg.Fence.IdlePoll() == 0 {
		q.offer(q.flow.Offer())
	}
}

// offer puts what the queue can send at once on the handover board, when
// it changed.
func (q *Queue) offer(n int) {
	if q.cfg.Board == nil || n == q.offered {
		return
	}
	q.offered = n
	q.cfg.Board.Offer(q.boardKey(), n, q.lease(), q.self)
}

// boardKey is this queue's work on the handover board.
func (q *Queue) boardKey() handover.Key {
	return handover.Key{Kind: persistence.WorkForward, Target: q.cfg.Peer}
}

// run does one store round: the results and the claims in one Write, each
// claim fenced by the ring.
func (q *Queue) run(r *FlowRound) {
	defer supervision.CarryPanic(q.sys.Root, q.self, nil)
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
	defer cancel()
	res := &roundDone{round: r}
	res.written, res.claims, res.err = ring.Write(ctx, q.cfg.Store, q.cfg.Fence, q.cfg.Clock.Now(),
		persistence.Write{Outcomes: r.Outcomes, Statuses: r.Updates, Claims: r.Claims}, nil)
	q.sys.Root.Send(q.self, res)
}

// lease outlives the request it covers (timeout plus the commit after it);
// a crash in between lets another claim take the work after it.
func (q *Queue) lease() time.Duration { return 2*q.cfg.Timeout + 10*time.Second }

// sent takes a request's result: its outcomes wait for the next round.
func (q *Queue) sent(c actor.Context, r *sent) {
	now := q.cfg.Clock.Now()
	if r.err != nil {
		q.log.Warn("request to peer failed", "kind", r.batch.Kind, "messages", len(r.batch.Work), "err", r.err)
		q.cfg.Metrics.failed(q.cfg.Peer, r.batch.Kind)
	}
	for _, f := range r.forward {
		if f.Error == nil {
			q.cfg.Metrics.completed(q.cfg.Peer)
		}
	}
	if q.flow.Sent(now, r.batch, r.forward, r.err) {
		// One failed check per broken link, not one per request that was
		// in flight when it broke (a busy peer closes nothing: it is up).
		c.Send(q.parent, messages.PeerContactFailed{Err: r.err})
	}
}
