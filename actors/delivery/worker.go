package delivery

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/actors/smppout"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/supervision"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// Worker is the delivery worker of one frontend: the actor shell of a
// Dispatcher. It runs the dispatcher's store rounds on goroutines of their
// own (the result comes back as a message, so Receive never waits on the
// store), and does what the dispatcher's effects say. Build it with
// NewWorker.
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

	// link is the worker's side of the bus (with Deps.Bus); fetchCancel
	// cancels its last fetch.
	link        busLink[*bus.Msg]
	fetchCancel context.CancelFunc

	drainDone []chan<- struct{}

	// spans are the open delivery spans of traced messages handed to a
	// pull frontend or an in-process actor (trace.go).
	spans spanBook[trace.Span]

	// smpp is an smpp frontend's client (nil for other modes, or when it
	// could not start: the worker then claims nothing).
	smpp *smppout.Client
}

// Private messages of the worker.
type (
	wakeMsg    struct{}
	pushResult struct {
		id      string
		attempt int
		result  messages.DeliveryResult
	}
	// roundDone is a store round's result.
	roundDone struct {
		round       *Round
		completions []persistence.Completion
		claimed     *persistence.Claim
		err         error
	}
	// ackRead is an ack whose verdicts' attempt counts were read.
	ackRead struct {
		ack      *messages.Ack
		attempts Attempts
		err      error
	}
)

// NewWorker returns the producer of the worker of one frontend.
func NewWorker(d *Deps, fe messages.Frontend) actor.Producer {
	inFlight := d.MaxInFlight
	if fe.Mode == messages.ModeSMPP {
		// No more claimed than the SMSC's window takes: a claimed message
		// waiting for a slot would wait on its lease.
		if o, err := messages.ParseSMPPURL(fe.URL); err == nil {
			inFlight = o.Window
		}
	}
	return func() actor.Actor {
		return &Worker{
			d: d, fe: fe, pace: pace{mode: fe.Mode},
			log: d.Logger.With("component", "delivery", "frontend", fe.Name, "mode", fe.Mode),
			rng: d.rng(fe.Name),
			core: NewDispatcher(DispatcherConfig{
				Frontend: fe.Name, Pull: fe.Mode == messages.ModePull, Owner: d.Owner, Policy: d.Policy,
				MaxInFlight: inFlight, MaxClaim: maxClaim,
				PushLease: d.pushLease(), DeliveryTimeout: d.SendTimeout + time.Second,
				Bus: d.Bus != nil, BusOverdue: busOverdue, BusBackstop: busBackstop,
			}),
			link: newBusLink[*bus.Msg](fe.Mode == messages.ModePull),
		}
	}
}

// maxClaim bounds one claim for a pull frontend's waiting polls (1000
// rows: one transaction stays in the milliseconds).
const maxClaim = 1000

// Receive implements actor.Actor.
func (w *Worker) Receive(c actor.Context) {
	now := w.d.Clock.Now()
	switch m := c.Message().(type) {
	case *actor.Started:
		w.self, w.sys = c.Self(), c.ActorSystem()
		w.seat = seat{board: w.d.Board, key: w.boardKey(), self: w.self, push: w.fe.Mode != messages.ModePull}
		w.seat.forget()
		w.wake = clock.NewWakeup(w.d.Clock, func(uint64) { w.sys.Root.Send(w.self, wakeMsg{}) })
		w.startSMPP()
	case *actor.Stopping:
		w.stopping(c)
		if w.smpp != nil {
			w.d.SMPP.Release(w.fe)
		}
		return
	case *actor.Restarting:
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
		w.takeAll(m.ms, now)
	case *fetchDone:
		w.fetched(m.err, now)
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
		w.apply(c, w.core.Done(now, m.round, m.completions, m.claimed, m.err))
	case *messages.Drain:
		w.drainDone = append(w.drainDone, m.Done)
		w.apply(c, w.core.Drain())
	default:
		return
	}
	w.step()
}

// stopping ends what the worker has under way (a stop or a restart).
func (w *Worker) stopping(c actor.Context) {
	w.wake.Cancel()
	if w.fetchCancel != nil {
		w.fetchCancel()
	}
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
	if w.d.Bus != nil {
		w.core.SetBus(r.busUp)
	}
	w.seat.owe(w.core, now)
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
	}
	return r
}

// boardKey is this worker's work on the handover board.
func (w *Worker) boardKey() handover.Key {
	return handover.Key{Kind: persistence.WorkDelivery, Target: w.fe.Name}
}

// run does one store round: the verdicts and the claim in one Write. A
// push frontend's claim is the ring's (this instance delivers its own
// tokens); a pull frontend's poll takes due messages of the whole ring,
// whichever instance it reached: the consumer's lease is the ownership (the
// store leases each row to one poll at a time), and a consumer connected to
// one instance of the site must still get every message.
func (w *Worker) run(r *Round) {
	defer supervision.CarryPanic(w.sys.Root, w.self, nil)
	wr := persistence.Write{Outcomes: r.Outcomes}
	if r.Claim != nil {
		wr.Claims = []persistence.ClaimRequest{*r.Claim} // the round is the actor's: its claim is read, not changed
	}
	ctx, cancel := w.d.storeCtx()
	defer cancel()
	// A claim of what the bus named is the bus's share, not the ring's.
	written, claims, err := ring.Write(ctx, w.d.Store, w.d.Fence, w.d.Clock.Now(), wr, func(req persistence.ClaimRequest) bool {
		return w.fe.Mode != messages.ModePull && req.IDs == nil
	})
	res := &roundDone{round: r, completions: written.Completions, err: err}
	if len(claims) > 0 {
		res.claimed = claims[0]
	}
	w.sys.Root.Send(w.self, res)
}

// apply carries out the dispatcher's effects.
func (w *Worker) apply(c actor.Context, e Effects) {
	now := w.d.Clock.Now()
	w.settle(w.link.settle(e, now))
	for _, o := range e.LateRefused {
		w.log.Warn("late verdict on a final message not recorded: it stays as it is; check with the frontend before resubmitting",
			"message", o.MessageID, "result", o.Result, "detail", o.Detail)
	}
	for _, o := range e.Dropped {
		w.log.Error("verdict dropped: the store refuses it", "message", o.MessageID, "result", o.Result,
			"reason", o.Reason, "detail", o.Detail)
	}
	for _, o := range e.Applied {
		if w.smpp != nil && len(o.SMSCMessageIDs) > 0 {
			w.smpp.Committed(o.SMSCMessageIDs)
		}
		w.closeSpan(o)
		w.d.Metrics.count(o)
		w.d.Publish(messages.StateChanged{ID: o.MessageID, State: persistence.StateAfter(o.Kind, o.Result),
			Frontend: w.fe.Name, At: now, Detail: persistence.CleanText(o.Detail), Reason: persistence.CleanText(o.Reason)})
	}
	for _, a := range e.Acks {
		a.Ack.Reply <- a.Reply
	}
	for _, a := range e.Answers {
		for i, m := range a.Reply.Messages {
			w.openSpan(telemetry.SpanDeliverPull, m, a.Until[i])
		}
		a.Poll.Reply <- a.Reply
	}
	if len(e.Start) > 0 {
		w.start(c, e.Start)
	}
	if e.Drained {
		for _, d := range w.drainDone {
			close(d)
		}
		w.drainDone = nil
	}
}

// start delivers to a push frontend: a webhook call on a goroutine of its
// own, or a request to the in-process frontend's actor.
func (w *Worker) start(c actor.Context, work []persistence.Work) {
	var target *actor.PID
	if w.fe.Mode == messages.ModeActor {
		pid, ok := w.d.Actors.Get(w.fe.Name)
		if !ok {
			// Unregistered since the claim: the attempts count as retries at
			// their deadline.
			return
		}
		target = pid
	}
	deadline := w.d.Clock.Now().Add(w.d.SendTimeout)
	for _, wk := range work {
		out := messages.OutgoingOf(wk.Message)
		if target != nil {
			w.openSpan(telemetry.SpanDeliverActor, out, time.Time{}) // ends with its verdict or its timeout
			w.core.Asked(out.ID, out.Attempt)
			c.Request(target, &messages.Delivery{Message: out, Deadline: deadline})
			continue
		}
		if w.fe.Mode == messages.ModeSMPP {
			go w.sendSMPP(wk, out)
			continue
		}
		go w.sendWebhook(out)
	}
}
