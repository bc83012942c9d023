package delivery

import (
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/actors/smppout"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/supervision"
)

// Worker is the delivery worker of one frontend: the actor shell of a
// Dispatcher and of the pure parts of its step (pace), its bus link
// (busLink) and its spans (spanBook). It runs the dispatcher's store
// rounds on goroutines of their own (the result comes back as a message,
// so Receive never waits on the store), and does what their effects say
// (effects.go). Build it with NewWorker.
type Worker struct {
	d    *Deps
	fe   messages.Frontend
	log  *slog.Logger
	rng  *rand.Rand
	self *actor.PID
	sys  *actor.ActorSystem
	wake *clock.Wakeup
	core *Dispatcher
	pace pace
	// seat is the worker's place on the handover board.
	seat seat
	// link is the worker's side of the bus (with Deps.Bus); fetching is
	// its last fetch.
	link     busLink[*bus.Msg]
	fetching fetchOut
	// spans are the open delivery spans of traced messages handed to a
	// pull frontend or an in-process actor (trace.go).
	spans spanBook[trace.Span]
	// smpp is an smpp frontend's client (nil for other modes, or when it
	// could not start: the worker then claims nothing).
	smpp *smppout.Client
	// life is what the worker's incarnations share (see workerLife);
	// stopped is set once this one stops itself (retired).
	life    *workerLife
	stopped bool
}

// workerLife is what a worker keeps across its restarts (a panic builds a
// new Worker from the producer): its smpp client, got by the supervisor
// as it spawned the worker (after a change of its frontend the registry's
// client for the name is its successor's); whether it retires, and by
// when, and whether it drains (the node stops), with the drains waiting
// for it (a restart must not turn a retiring or draining worker back into
// one that claims, nor forget a drain); what the last incarnation handed
// the next (carry: what it had under way, to record and held, and its
// fetch out); the bus messages its fetches sent it that it has not taken
// yet (busInbox: queued in the mailbox, they come to the next
// incarnation; a stop naks them); and whether an incarnation started
// already (a restart keeps what the handover board owes the worker,
// seat.started).
type workerLife struct {
	smpp      *smppout.Client
	retireBy  time.Time
	draining  bool
	drainDone []chan<- struct{}
	carry     carry
	// inbox is what the worker's fetches sent it and it has not taken yet.
	inbox   *busInbox
	started bool
	// unserve ends the bus's Serve of the frontend, which lasts from the
	// first incarnation's start to the last one's stop.
	unserve func()
}

// wakeMsg is the worker's wake-up (its Wakeup fired).
type wakeMsg struct{}

// retire tells a worker that its frontend's settings changed (planUp) or
// that it went away (planDown): it drains what it has in flight and stops
// once it has, at the latest by.
type retire struct{ by time.Time }

// NewWorker returns the producer of the worker of one frontend; cl is an
// smpp frontend's client (Clients.Get; nil for another mode), released
// when the worker stops.
func NewWorker(d *Deps, fe messages.Frontend, cl *smppout.Client) actor.Producer {
	cfg := d.dispatcherConfig(fe)
	life := &workerLife{smpp: cl, inbox: &busInbox{}}
	return func() actor.Actor {
		return &Worker{
			d: d, fe: fe, pace: pace{mode: fe.Mode}, link: newBusLink[*bus.Msg](cfg.Pull),
			log:  d.Logger.With("component", "delivery", "frontend", fe.Name, "mode", fe.Mode),
			rng:  d.rng(fe.Name),
			core: NewDispatcher(cfg),
			life: life,
		}
	}
}

// Receive implements actor.Actor.
func (w *Worker) Receive(c actor.Context) {
	now := w.d.Clock.Now()
	switch m := c.Message().(type) {
	case *actor.Started:
		w.self, w.sys = c.Self(), c.ActorSystem()
		w.seat = seatOf(w.d.Board, w.fe, w.self)
		w.seat.started(w.life.started)
		if !w.life.started && w.d.Bus != nil {
			w.life.unserve = w.d.Bus.Serve(w.fe.Name)
		}
		w.life.started = true
		w.wake = clock.NewWakeup(w.d.Clock, func(uint64) { w.sys.Root.Send(w.self, wakeMsg{}) })
		w.smpp = w.life.smpp
		w.inherit()
		if w.life.draining {
			w.apply(c, w.core.Drain())
		}
		if !w.life.retireBy.IsZero() {
			w.seat.retire(w.core) // what the board still owes it (kept across the restart)
			w.apply(c, w.core.Retire(now, w.life.retireBy))
		}
	case *actor.Stopping:
		// What it lets go is naked before the stop returns: the node
		// closes the bus right after its workers stopped, and a nak left
		// to a goroutine (afterFetch) went out on a closed connection,
		// the message back only after the AckWait. Naked once the fetch
		// it cancels has ended (its late messages naked too), so that
		// none goes back to that fetch's request.
		let := append(w.link.letGo(now), untaken(w.life.inbox.stop())...)
		if w.fetching.cancel != nil {
			w.fetching.cancel()
		}
		if ended := w.fetching.ended; ended != nil {
			select {
			case <-ended:
			case <-time.After(busStopWait):
			}
		}
		w.settle(let)
		w.stopping(c)
		w.seat.stopped()
		if w.life.unserve != nil {
			w.life.unserve()
		}
		if w.smpp != nil {
			w.d.SMPP.Release(w.smpp)
		}
		return
	case *actor.Restarting:
		w.handOn(now)
		w.stopping(c)
		return
	case *handover.Work:
		m.Arrived(w.d.Board, w.self)
		w.apply(c, w.core.Handover(now, m.Work))
	case *messages.Kick:
		w.core.Kick()
	case wakeMsg:
		if w.pace.idle(w.read()) > 0 {
			w.core.Kick() // another instance may have committed work we may take
		}
		w.tickHolds(now)
		w.apply(c, w.core.Tick(now, w.rng))
	case *busMsgs:
		w.takeAll(m, now)
	case *fetchDone:
		w.fetched(m, now)
	case *messages.Poll:
		w.apply(c, w.core.Poll(now, m))
	case *messages.Ack:
		w.ack(c, m, now)
	case *ackRead:
		w.apply(c, w.core.Ack(now, m.ack, m.attempts, m.err, w.rng))
	case *pushResult:
		w.core.Verdict(now, m.id, m.attempt, m.result, false, w.rng)
	case *messages.DeliveryResult:
		w.core.ActorVerdict(now, *m, w.rng)
	case messages.DeliveryResult:
		w.core.ActorVerdict(now, m, w.rng)
	case *supervision.Panicked:
		m.Rethrow(w.log, "store call")
	case *roundDone:
		if m.err != nil {
			w.log.Error("store round failed", "outcomes", len(m.round.Outcomes), "claim", m.round.Claim != nil, "err", m.err)
		}
		if w.core.Earlier(m.round) && m.claimed != nil && len(m.claimed.Work) > 0 {
			w.log.Warn("a store round of the worker before its restart claimed work: it waits for its lease",
				"messages", len(m.claimed.Work), "lease_until", m.claimed.Work[0].LeaseUntil)
		}
		earlier := w.core.Earlier(m.round)
		w.apply(c, w.core.Done(now, m.round, m.completions, m.claimed, m.err))
		if earlier {
			w.link.earlierDone(m.round)
		}
	case *messages.Drain:
		w.life.draining = true
		w.life.drainDone = append(w.life.drainDone, m.Done)
		w.apply(c, w.core.Drain())
	case *retire:
		w.life.retireBy = m.by
		w.seat.retire(w.core)
		w.apply(c, w.core.Retire(now, m.by))
	default:
		return
	}
	if !w.stopped {
		w.step()
	}
}

// stopping ends what the worker has under way (a stop or a restart; a
// stop also cancels its fetch, a restart hands it on).
func (w *Worker) stopping(c actor.Context) {
	w.wake.Cancel()
	w.apply(c, w.core.Stop())
	w.closeSpans()
	w.seat.offer(offered{})
}

// step does what the worker's pace and its dispatcher decide after each
// message: the hold of claims, the round, the fetch, the wake-up, the offer
// on the board. Its board calls bracket the round: the debt (and, before a
// claim of the free slots, the offer's withdrawal) before it, the offer of
// what is left after it (seat).
func (w *Worker) step() {
	now, r := w.d.Clock.Now(), w.read()
	w.core.Hold(w.pace.held(r))
	w.core.Limit(r.inFlight)
	if w.d.Bus != nil {
		w.core.SetBus(r.busUp)
	}
	w.seat.owe(w.core, now)
	w.settle(w.link.release(now, w.core.Outstanding))
	if round, ok := w.core.Next(now); ok {
		go w.run(round)
	}
	w.fetch(now)
	w.endLapsedSpans(now)
	if next := w.pace.next(now, r, w.core.Wake(), w.link.wake(r.busUp), w.spans.wake()); !next.IsZero() {
		w.wake.Schedule(next)
	}
	if w.pace.offers(r) {
		n, lease := w.core.Offer()
		w.seat.offer(offered{n: n, lease: lease})
	}
}

// read reads what the worker's pace rests on.
func (w *Worker) read() reading {
	r := reading{busUp: w.d.Bus.Up(), waiting: w.core.Waiting(), client: w.smpp != nil}
	if w.d.Fence != nil {
		r.fenceIdle = w.d.Fence.IdlePoll()
	}
	if w.fe.Mode == messages.ModeActor {
		_, r.registered = w.d.Actors.Get(w.fe.Name)
	}
	if w.smpp != nil {
		r.bound = w.smpp.Bound()
		r.pacedUntil, r.inFlight = w.smpp.PacedUntil(w.d.SendTimeout), w.smpp.InFlight(w.d.SendTimeout)
	}
	return r
}
