package delivery

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/clock"
	"github.com/switchboard-dev/switchboard/actors/frontend"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// storeRetry is how soon a worker tries again after a store call failed.
const storeRetry = time.Second

// defaultPollLease is a pull lease when the poll names none.
const defaultPollLease = 30 * time.Second

// Worker is the delivery worker of one frontend. Build it with NewWorker.
type Worker struct {
	d    *Deps
	fe   messages.Frontend
	log  *slog.Logger
	rng  *rand.Rand
	self *actor.PID
	sys  *actor.ActorSystem
	wake *clock.Wakeup

	// push frontends: deliveries under way, by message id.
	inflight map[string]flight
	// pull frontends: long-polls waiting for work.
	waiters frontend.Waiters[*messages.Poll]

	// pending verdicts, committed together by the next flush.
	pending     []pendingOutcome
	flushQueued bool
	// commitRetry is set while pending outcomes wait for the store to recover.
	commitRetry bool

	draining  bool
	drainDone []chan<- struct{}
}

type flight struct {
	work     persistence.Work
	deadline time.Time
}

type pendingOutcome struct {
	o persistence.Outcome
	// done, when set, is told what the commit did (nil Completion on error).
	done func(c persistence.Completion, err error)
}

// Private messages of the worker.
type (
	wakeMsg    struct{}
	flushMsg   struct{}
	pushResult struct {
		id      string
		attempt int
		result  messages.DeliveryResult
	}
)

// NewWorker returns the producer of the worker of one frontend.
func NewWorker(d *Deps, fe messages.Frontend) actor.Producer {
	return func() actor.Actor {
		return &Worker{
			d: d, fe: fe,
			log:      d.Logger.With("component", "delivery", "frontend", fe.Name, "mode", fe.Mode),
			rng:      d.rng(fe.Name),
			inflight: map[string]flight{},
		}
	}
}

// Receive implements actor.Actor.
func (w *Worker) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		w.self, w.sys = c.Self(), c.ActorSystem()
		w.wake = clock.NewWakeup(w.d.Clock, func(uint64) { w.sys.Root.Send(w.self, wakeMsg{}) })
		w.pump(c)
	case *actor.Restarting:
		w.stop()
	case *actor.Stopping:
		w.stop()
	case *messages.Kick:
		w.pump(c)
	case wakeMsg:
		w.onWake(c)
	case *messages.Poll:
		w.poll(c, m)
	case *messages.Ack:
		w.ack(c, m)
	case *pushResult:
		w.verdict(c, m.id, m.attempt, m.result)
	case *messages.DeliveryResult:
		w.verdict(c, m.ID, 0, *m)
	case messages.DeliveryResult:
		w.verdict(c, m.ID, 0, m)
	case flushMsg:
		w.flushQueued = false
		w.commit(c)
	case *messages.Drain:
		w.draining = true
		w.drainDone = append(w.drainDone, m.Done)
		w.answerWaiters()
		w.maybeDrained()
	}
}

// stop releases what outlives the actor: its timer and its waiting polls
// (answered empty; the poller simply polls again).
func (w *Worker) stop() {
	if w.wake != nil {
		w.wake.Cancel()
	}
	w.answerWaiters()
	for _, p := range w.pending {
		if p.done != nil {
			p.done("", errUnavailable("the delivery worker restarted"))
		}
	}
	w.pending = nil
}

func (w *Worker) answerWaiters() {
	for _, p := range w.waiters.All() {
		p.Reply <- messages.PollReply{Messages: []messages.Outgoing{}}
	}
}

func (w *Worker) onWake(c actor.Context) {
	now := w.d.Clock.Now()
	for _, p := range w.waiters.Expire(now) {
		p.Reply <- messages.PollReply{Messages: []messages.Outgoing{}}
	}
	for id, f := range w.inflight {
		if !f.deadline.After(now) {
			w.verdict(c, id, f.work.Message.Attempts, messages.DeliveryResult{ID: id, Status: messages.Retry, Reason: "timeout"})
		}
	}
	if w.commitRetry {
		w.commitRetry = false
		w.queueFlush(c)
	}
	w.pump(c)
}

// pump takes on whatever work is due (none while draining), then arms the
// wake-up for the next, or for the deadline of a delivery in flight: a
// drain waits for those.
func (w *Worker) pump(c actor.Context) {
	var next time.Time
	switch {
	case w.draining:
	case w.fe.Mode == messages.ModePull:
		next = w.servePolls(c)
	default:
		next = w.fillPush(c)
	}
	for _, f := range w.inflight {
		next = clock.Earliest(next, f.deadline)
	}
	if p := w.idlePoll(); p > 0 {
		next = clock.Earliest(next, w.d.Clock.Now().Add(p))
	}
	if !next.IsZero() {
		w.wake.Schedule(next)
	}
}

// idlePoll is how soon to look for work again without being kicked: in a
// site of several instances the one that commits work we may take cannot
// kick us. A pull worker looks only while polls wait.
func (w *Worker) idlePoll() time.Duration {
	if w.draining || w.d.Fence == nil || (w.fe.Mode == messages.ModePull && w.waiters.Len() == 0) {
		return 0
	}
	return w.d.Fence.IdlePoll()
}

// claim leases up to limit messages and sets aside those the policy says
// must not be attempted (their failure is queued for the next commit).
func (w *Worker) claim(c actor.Context, limit int, lease time.Duration) (attempt []persistence.Work, claimed int, next time.Time, ok bool) {
	now := w.d.Clock.Now()
	ctx, cancel := w.d.storeCtx()
	req := persistence.ClaimRequest{
		Kind: persistence.WorkDelivery, Target: w.fe.Name, Owner: w.d.Owner,
		Limit: limit, Now: now, Lease: lease,
	}
	// Push deliveries are the ring's: this instance delivers its own tokens.
	// A pull frontend's poll takes due messages of the whole ring, whichever
	// instance it reached: the consumer's lease is the ownership (the store
	// leases each row to one poll at a time), and a consumer connected to
	// one instance of the site must still get every message.
	fence := w.d.Fence
	if w.fe.Mode == messages.ModePull {
		fence = nil
	}
	cl, ok, err := ring.Claim(ctx, w.d.Store, fence, req)
	cancel()
	if err != nil {
		w.log.Error("claim failed", "err", err)
		return nil, 0, now.Add(storeRetry), false
	}
	if !ok {
		return nil, 0, time.Time{}, false // not ours now: a new assignment kicks us
	}
	for _, wk := range cl.Work {
		if o, ok := w.d.Policy.Before(wk, now); !ok {
			w.pending = append(w.pending, pendingOutcome{o: w.fenced(o, wk)})
			w.queueFlush(c)
			continue
		}
		attempt = append(attempt, wk)
	}
	return attempt, len(cl.Work), cl.NextDue, true
}

// fillPush starts deliveries up to MaxInFlight.
func (w *Worker) fillPush(c actor.Context) time.Time {
	var target *actor.PID
	if w.fe.Mode == messages.ModeActor {
		pid, ok := w.d.Actors.Get(w.fe.Name)
		if !ok {
			return time.Time{} // idle until the embedder registers it (it kicks us)
		}
		target = pid
	}
	free := w.d.MaxInFlight - len(w.inflight)
	if free <= 0 {
		return time.Time{} // verdicts will pump again
	}
	work, _, next, _ := w.claim(c, free, w.d.pushLease())
	now := w.d.Clock.Now()
	for _, wk := range work {
		w.inflight[wk.MessageID] = flight{work: wk, deadline: now.Add(w.d.SendTimeout + time.Second)}
		out := messages.OutgoingOf(wk.Message)
		if target != nil {
			c.Request(target, &messages.Delivery{Message: out, Deadline: now.Add(w.d.SendTimeout)})
			continue
		}
		go w.sendWebhook(out)
	}
	return next
}

func (w *Worker) sendWebhook(out messages.Outgoing) {
	ctx, cancel := context.WithTimeout(context.Background(), w.d.SendTimeout)
	defer cancel()
	r := frontend.Webhook{URL: w.fe.URL, Client: w.d.HTTPClient}.Send(ctx, out)
	w.sys.Root.Send(w.self, &pushResult{id: out.ID, attempt: out.Attempt, result: r})
}

// verdict turns a push frontend's verdict into a pending outcome. attempt
// is 0 when the sender does not know it (an in-process frontend's reply).
// A verdict for a delivery no longer in flight (it timed out, or the worker
// restarted) is still recorded when it is final: the frontend has spoken.
// A late retry verdict is dropped: the timeout already scheduled one.
func (w *Worker) verdict(c actor.Context, id string, attempt int, r messages.DeliveryResult) {
	f, inFlight := w.inflight[id]
	if inFlight {
		delete(w.inflight, id)
		attempt = f.work.Message.Attempts
	}
	if !r.Status.Valid() {
		r = messages.DeliveryResult{ID: id, Status: messages.Retry, Reason: "frontend replied with unknown status " + string(r.Status)}
	}
	if !inFlight && (r.Status == messages.Retry || attempt == 0 && w.fe.Mode != messages.ModeActor) {
		return
	}
	o := w.d.Policy.After(w.fe.Name, id, attempt, r, w.d.Clock.Now(), w.rng)
	if inFlight {
		o = w.fenced(o, f.work)
	}
	w.pending = append(w.pending, pendingOutcome{o: o})
	w.queueFlush(c)
}

// fenced stamps an outcome of a delivery in flight (a push frontend's
// verdict, delivered ones included, or a timeout) with the claim it comes
// from: if our lease ran out and the ring's new owner of the token claimed
// the row since, the store refuses it (StaleEpoch) and the new owner's
// attempt, under the same Idempotency-Key, speaks for the message. A pull
// frontend's ack and a verdict arriving after its delivery left the
// flight are not fenced: the frontend has spoken.
func (w *Worker) fenced(o persistence.Outcome, wk persistence.Work) persistence.Outcome {
	if wk.LeaseEpoch > 0 {
		o.Epoch, o.Owner = wk.LeaseEpoch, w.d.Owner
	}
	return o
}

// servePolls answers waiting polls, oldest first, while work is due.
func (w *Worker) servePolls(c actor.Context) time.Time {
	var next time.Time
	for w.waiters.Len() > 0 {
		wt, _ := w.waiters.Peek()
		p := wt.Poll
		if gone(p.Done) {
			w.waiters.Pop()
			continue
		}
		lease := p.Lease
		if lease <= 0 {
			lease = defaultPollLease
		}
		work, claimed, due, ok := w.claim(c, max(p.Max, 1), lease)
		next = due
		if !ok || claimed == 0 {
			break
		}
		if len(work) == 0 {
			continue // all claimed were failed by the policy; look again
		}
		out := make([]messages.Outgoing, len(work))
		for i, wk := range work {
			out[i] = messages.OutgoingOf(wk.Message)
		}
		p.Reply <- messages.PollReply{Messages: out}
		w.waiters.Pop()
	}
	return clock.Earliest(next, w.waiters.NextDeadline())
}

func (w *Worker) poll(c actor.Context, p *messages.Poll) {
	if w.draining {
		p.Reply <- messages.PollReply{Err: errUnavailable("the node is stopping")}
		return
	}
	w.waiters.Add(p, w.d.Clock.Now().Add(p.Wait))
	w.pump(c)
}

// ack queues a pull frontend's verdicts; the reply follows their commit.
func (w *Worker) ack(c actor.Context, a *messages.Ack) {
	now := w.d.Clock.Now()
	outcomes := make([]messages.AckOutcome, len(a.Results))
	left := len(a.Results)
	var failure error
	var finish func()
	if left == 0 {
		a.Reply <- messages.AckReply{Outcomes: outcomes}
		return
	}
	// An id repeated within one ack is a repeat of its first occurrence.
	first := map[string]int{}
	dupOf := map[int]int{}
	finish = func() {
		left--
		if left > 0 {
			return
		}
		for i, j := range dupOf {
			outcomes[i].Outcome = outcomes[j].Outcome
			if outcomes[i].Outcome == string(persistence.Applied) {
				outcomes[i].Outcome = string(persistence.AlreadyRecorded)
			}
		}
		a.Reply <- messages.AckReply{Outcomes: outcomes, Err: failure}
	}
	for i, r := range a.Results {
		outcomes[i].ID = r.ID
		if j, dup := first[r.ID]; dup {
			dupOf[i] = j
			finish()
			continue
		}
		first[r.ID] = i
		// A retry needs the attempt count (for the backoff and the budget);
		// a verdict naming its attempt is checked for staleness.
		attempt := 0
		if r.Status == messages.Retry || (r.Status == messages.Failed && r.Attempt > 0) {
			ctx, cancel := w.d.storeCtx()
			m, err := w.d.Store.GetMessage(ctx, r.ID)
			cancel()
			if err != nil {
				outcomes[i].Outcome = string(persistence.NoWork)
				if !isNotFound(err) {
					failure = errUnavailable("cannot read message " + r.ID)
				}
				finish()
				continue
			}
			if r.Attempt > 0 && r.Attempt < m.Attempts {
				outcomes[i].Outcome = messages.OutcomeStale
				finish()
				continue
			}
			attempt = m.Attempts
		}
		o := w.d.Policy.After(w.fe.Name, r.ID, attempt, r, now, w.rng)
		w.pending = append(w.pending, pendingOutcome{o: o, done: func(comp persistence.Completion, err error) {
			outcomes[i].Outcome = string(comp)
			if err != nil {
				failure = err
			}
			finish()
		}})
	}
	w.queueFlush(c)
}

func (w *Worker) queueFlush(c actor.Context) {
	if !w.flushQueued && len(w.pending) > 0 {
		w.flushQueued = true
		c.Send(c.Self(), flushMsg{})
	}
}

// commit records every pending outcome in one transaction.
func (w *Worker) commit(c actor.Context) {
	if len(w.pending) == 0 {
		w.maybeDrained()
		return
	}
	// batch stays in w.pending until the commit returns, so that a panic in
	// it still lets stop() answer the acks waiting on it.
	batch := w.pending
	outcomes := make([]persistence.Outcome, len(batch))
	for i, p := range batch {
		outcomes[i] = p.o
	}
	now := w.d.Clock.Now()
	ctx, cancel := w.d.storeCtx()
	comps, err := w.d.Store.CompleteWork(ctx, now, outcomes)
	cancel()
	w.pending = w.pending[len(batch):]
	if err != nil {
		w.log.Error("commit of delivery outcomes failed", "outcomes", len(batch), "err", err)
		// Acks are answered with the error (the poller acks again); our own
		// verdicts wait and are committed when the store answers again.
		for _, p := range batch {
			if p.done != nil {
				p.done("", errUnavailable("the message store is unavailable; ack again"))
			} else {
				w.pending = append(w.pending, p)
			}
		}
		w.commitRetry = len(w.pending) > 0
		w.wake.Schedule(now.Add(storeRetry))
		return
	}
	for i, p := range batch {
		if comps[i] == persistence.Applied {
			w.d.Metrics.count(p.o)
			w.d.Publish(messages.StateChanged{ID: p.o.MessageID, State: persistence.StateAfter(p.o.Kind, p.o.Result),
				Frontend: w.fe.Name, At: now, Detail: p.o.Detail, Reason: p.o.Reason})
		}
		if p.done != nil {
			p.done(comps[i], nil)
		}
	}
	w.pump(c)
	w.maybeDrained()
}

// maybeDrained completes a drain once nothing is in flight or uncommitted.
func (w *Worker) maybeDrained() {
	if !w.draining || len(w.inflight) > 0 || len(w.pending) > 0 {
		return
	}
	for _, d := range w.drainDone {
		close(d)
	}
	w.drainDone = nil
}

// gone reports whether done is closed.
func gone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
