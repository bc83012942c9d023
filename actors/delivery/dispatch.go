package delivery

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Dispatcher is the pure state machine of one frontend's delivery worker:
// when to claim work and how much, who gets what a claim brings, which
// verdicts to record, what to answer. The worker feeds it polls, acks,
// verdicts, kicks, handed-over work and the time; runs the store round it
// asks for (Next: the verdicts to record and the next claim, one Write,
// one round at a time, off the actor's goroutine) and tells it how the
// round went (Done); and carries out the Effects. Not safe for concurrent
// use.
//
// A pull frontend's waiting polls are served from one claim for all of them
// that ask for the same lease (up to MaxClaim rows), oldest poll first; a
// push frontend claims its free slots (MaxInFlight). A claim that comes
// back short means the due work is exhausted until a kick, a new poll or
// the NextDue the store reported.
type Dispatcher struct {
	cfg DispatcherConfig

	waiters  Waiters[*messages.Poll]
	ready    []persistence.Work // pull: leased to us, not yet offered
	inflight map[string]flight  // push: deliveries under way, by message id
	// orphans are the deliveries a previous incarnation of the worker had
	// under way (Inherit), by message id, with their deadlines: their
	// verdicts come to this one, late, until then.
	orphans map[string]time.Time
	// earlier are the store rounds earlier incarnations of the worker had
	// out as they restarted (Inherit), with the time past which the
	// result of each can no longer come (its store call's timeout): a
	// drain or a retirement waits for them (drained).
	earlier map[*Round]time.Time
	// asked are the attempts of each message sent to an in-process
	// frontend's actor and not answered yet, oldest first (Asked,
	// ActorVerdict): an answer that does not name its attempt answers the
	// oldest, unless that one timed out and a later one is in flight.
	asked map[string][]int
	// deferred are the push frontend's deferrals in a row of one
	// attempt of each message, by message id (Verdict): the next one
	// backs off on from them (Policy.AfterDeferrals).
	deferred map[string]deferrals
	owed     int       // rows the handover board granted that have not come (Owe; pull: only while retiring)
	pending  []pending // verdicts to record
	round    *Round    // the store round in flight
	more     bool      // due work may be waiting in the store
	nextDue  time.Time // when the store said more becomes due
	retryAt  time.Time // after a failed round: not before
	draining bool
	// retireBy: the worker retires (Retire); it stops once drained, at
	// the latest then.
	retireBy time.Time
	held     bool     // push: the frontend cannot take deliveries now
	limit    int      // push: the most under way now, when under MaxInFlight (Limit)
	busUp    bool     // the bus is up: claim only what it names
	named    []string // message ids the bus handed out, to claim
	// lastLease is the lease the last poll asked for: a claim of named
	// messages made after the polls were answered leases for the next.
	lastLease time.Duration
	// handUntil is until when, after it answered a poll, a pull worker
	// with the bus up offers to take new work at hand for the next poll
	// (zero: it does not), and handRoom how much: that poll's max (see
	// pullRoom).
	handUntil time.Time
	handRoom  int
	// backstopAt is when the bus's backstop claims next.
	backstopAt time.Time
	// polledUntil is when the lease of the last of the messages a pull
	// worker answered its polls with ends (zero once past, Tick): a
	// retiring pull worker takes its consumers' acks until then
	// (holdsAcks).
	polledUntil time.Time
	// stops: the node stops (Drain): a retiring pull worker no longer
	// waits for acks.
	stops bool
}

// DispatcherConfig is what a Dispatcher needs.
type DispatcherConfig struct {
	Frontend string
	// Pull is true for a pull frontend (polls and acks), false for a push
	// one (webhook, in-process actor).
	Pull bool
	// Owner names this instance on leases.
	Owner  string
	Policy Policy
	// MaxInFlight bounds a push frontend's deliveries under way.
	MaxInFlight int
	// MaxClaim bounds one pull claim (the sum of the waiting polls' max).
	MaxClaim int
	// PushLease is how long pushed work stays leased; DeliveryTimeout is
	// how long a delivery may take before it counts as a retry.
	PushLease, DeliveryTimeout time.Duration
	// Bus is set when delivery work comes from the bus (--nats-url): while
	// it is up (SetBus) the dispatcher claims the rows of the messages the
	// bus hands out (Named), takes work handed over from the commits of
	// this instance, and claims from the store only work overdue by
	// BusOverdue (the backstop: a row whose bus message was lost, or whose
	// worker died after it was handed over), at most every BusBackstop;
	// while it is down it claims from the store as without a bus.
	Bus                     bool
	BusOverdue, BusBackstop time.Duration
	// BusShortPoll: while a poll that waits less than that waits (wait_ms
	// 0: the messages due now), a pull dispatcher with the bus up claims
	// from the store for the waiting polls too, as without a bus
	// (shortPoll). Zero: never.
	BusShortPoll time.Duration
}

type flight struct {
	work     persistence.Work
	deadline time.Time
	// sent is the attempt handed to the frontend (work's, unless a claim
	// since renewed the row: renew).
	sent int
	// held is an in-process frontend's Retry that did not name its
	// attempt and came while an earlier attempt timed out unanswered: it
	// is this attempt's, or that one's, late (ActorVerdict). It is this
	// attempt's verdict at its deadline, unless another answer comes for
	// it first.
	held *messages.DeliveryResult
}

// deferrals counts the deferrals in a row of attempt `attempt` of a
// message (Dispatcher.deferred). Once past until (its last retry due a
// RetryMax ago) and not deferred again, the message went elsewhere
// (another instance's claim, a final verdict there) and is forgotten
// (Tick): its next deferral here backs off from its attempt's backoff.
type deferrals struct {
	attempt, n int
	until      time.Time
}

// maxDeferrals caps a run's count: past RetryMin << 62 every backoff is
// RetryMax, and attempt+n must not overflow.
const maxDeferrals = 62

// pending is one verdict to record; ack is the ack waiting for it (nil for
// a push frontend's own verdict, which is retried until recorded).
type pending struct {
	o   persistence.Outcome
	ack *ackState
	idx int
	// late: a final verdict about an attempt no longer in flight (an
	// in-process frontend's answer after its timeout).
	late bool
	// alone: a round holding it was refused for its input
	// (persistence.ErrInvalid); it is recorded in a round of its own, so
	// that the one the store refuses is found and dropped, and the others
	// are recorded.
	alone bool
	// again: it was in the round an earlier incarnation of the worker had
	// out when it restarted (Carry), which may have recorded it: an
	// AlreadyRecorded is then that round's doing (earlierDone reported
	// it), not a late verdict refused.
	again bool
	// givenBack: it gives back work that reached a retiring worker
	// (giveBack).
	givenBack bool
}

// ackState is a pull frontend's ack waiting for its verdicts' commit.
type ackState struct {
	a        *messages.Ack
	outcomes []messages.AckOutcome
	left     int
	err      error
}

// Round is one store round: the verdicts to record and, when Claim is
// set, the next claim, in one Write.
type Round struct {
	Outcomes []persistence.Outcome
	Claim    *persistence.ClaimRequest
	pending  []pending
	// kicked: work may have become due while the round was out (its claim
	// may not have seen it), so a short claim does not end the search.
	kicked bool
	// at is when Next made it: a claim counted the polls waiting then.
	at time.Time
}

// Answer is a poll to answer.
type Answer struct {
	Poll  *messages.Poll
	Reply messages.PollReply
	// Until is when the lease of each of Reply.Messages ends (same index):
	// a message not acknowledged by then is no longer the poller's.
	Until []time.Time
}

// AckDone is an ack to answer.
type AckDone struct {
	Ack   *messages.Ack
	Reply messages.AckReply
}

// Settled is an outcome that a round committed, with what the store did
// with it.
type Settled struct {
	Outcome    persistence.Outcome
	Completion persistence.Completion
}

// Unclaimed is a message the bus named whose row a claim could not take:
// Later is when it becomes claimable (zero: it has no row; its work is
// done or gone).
type Unclaimed struct {
	ID    string
	Later time.Time
}

// Effects are what the worker must do after a call, in this order:
// record the Applied outcomes (metrics, state changes), answer the acks
// and the polls, start the deliveries.
type Effects struct {
	Applied []persistence.Outcome
	Acks    []AckDone
	Answers []Answer
	Start   []persistence.Work
	// With the bus: Settled are every outcome a round committed (its bus
	// message is settled after the commit), Unclaimed the named messages
	// whose rows could not be claimed, Claimed the work a claim of named
	// messages took.
	Settled   []Settled
	Unclaimed []Unclaimed
	Claimed   []persistence.Work
	// Refused are named messages not claimed, handed back to the bus (a
	// drain or a retirement: Drain): it hands them out again, to the
	// frontend's new worker or another instance.
	Refused []string
	// Dropped are push verdicts the store refused for their input
	// (persistence.ErrInvalid) in a round of their own: retried, they
	// would fail the same way for ever. The worker logs them; their
	// work is claimed again when its lease ends.
	Dropped []persistence.Outcome
	// LateRefused are late final verdicts (an in-process frontend's answer
	// after its attempt timed out) on messages already final: the failure
	// stands (a final state is never changed; reports, CDRs and retention
	// rest on it). The worker logs them at warn, so that an operator does
	// not resubmit blindly a message the frontend says it delivered.
	LateRefused []persistence.Outcome
	// Drained is set once a drain is complete: nothing in flight or to
	// record.
	Drained bool
	// Retired is set once a retiring worker (Retire) is to stop: drained,
	// or at its bound.
	Retired bool
	// GaveBack is set when the round recorded work a retiring worker gave
	// back (giveBack): the frontend's worker now, if any, is to be kicked
	// to claim it.
	GaveBack bool
}

func (e *Effects) add(o Effects) {
	e.Applied = append(e.Applied, o.Applied...)
	e.Acks = append(e.Acks, o.Acks...)
	e.Answers = append(e.Answers, o.Answers...)
	e.Start = append(e.Start, o.Start...)
	e.Settled = append(e.Settled, o.Settled...)
	e.Unclaimed = append(e.Unclaimed, o.Unclaimed...)
	e.Claimed = append(e.Claimed, o.Claimed...)
	e.Refused = append(e.Refused, o.Refused...)
	e.Dropped = append(e.Dropped, o.Dropped...)
	e.LateRefused = append(e.LateRefused, o.LateRefused...)
	e.Drained = e.Drained || o.Drained
	e.Retired = e.Retired || o.Retired
	e.GaveBack = e.GaveBack || o.GaveBack
}

// storeRetry is how soon a round is tried again after one failed.
const storeRetry = time.Second

// NewDispatcher returns a Dispatcher that assumes work may be due.
func NewDispatcher(cfg DispatcherConfig) *Dispatcher {
	return &Dispatcher{cfg: cfg, inflight: map[string]flight{}, orphans: map[string]time.Time{}, earlier: map[*Round]time.Time{},
		asked: map[string][]int{}, deferred: map[string]deferrals{}, more: true}
}

// Outstanding reports whether the dispatcher may still record an outcome
// of message id: its delivery is under way (inherited ones included) or
// its verdict waits to be recorded, or is in the round out. The bus link
// holds such a message's bus message on across a restart (busLink.handOn)
// and lets it go once it is not (busLink.release).
func (d *Dispatcher) Outstanding(id string) bool {
	if _, ok := d.inflight[id]; ok {
		return true
	}
	if _, ok := d.orphans[id]; ok {
		return true
	}
	has := func(p pending) bool { return p.o.MessageID == id }
	return slices.ContainsFunc(d.pending, has) || d.round != nil && slices.ContainsFunc(d.round.pending, has)
}

// Out is the store round out (nil: none).
func (d *Dispatcher) Out() *Round { return d.round }

// Carry is what a dispatcher hands the dispatcher of its worker's next
// incarnation as the worker restarts (Dispatcher.Carry, Inherit): all of
// its state whose outcome may still come or is still to be recorded. It
// is the dispatcher's part of the worker's carry (carry.go); state that
// must outlive a restart is a field here, taken by Carry and given back
// by Inherit, and nowhere else.
type Carry struct {
	// flights are the deliveries under way, by message id, with their
	// deadlines (those inherited included). Their verdicts come to the
	// next incarnation, late (Verdict records the final ones). Until each
	// one's verdict or deadline, a drain or a retirement waits for it
	// (drained): stopped at once, a retiring worker lost those verdicts,
	// and each message waited for its lease and was delivered again. Until
	// then each also takes a slot of MaxInFlight (underWay): the frontend
	// is still handling it. Not counted, the new incarnation claimed and
	// offered MaxInFlight on top of them.
	flights map[string]time.Time
	// verdicts are the push verdicts not recorded yet (a webhook's 200
	// whose delivered waits for the next round, an in-process frontend's
	// answer, a timeout, a claimed message the policy refused), with
	// Stop's answer to the acks: the next incarnation's first round
	// records them. Dropped, each message waited for its lease and was
	// delivered again, a webhook that had answered 200 included. A
	// verdict that makes that round panic again restarts the worker
	// again, and comes back again: the worker's restart budget bounds that
	// loop, after which the supervisor spawns a new worker (with a fresh
	// start: its verdicts are lost, and their messages wait for their
	// lease).
	//
	// The round out gives its final verdicts too, which it may have
	// recorded or not (it may be the round that panicked): a final outcome
	// recorded twice is AlreadyRecorded, whatever happened between, so
	// neither lost nor counted twice (whichever of the two rounds records
	// it reports it Applied; the earlier one's result comes to the next
	// incarnation, earlierDone). Not its retries: a retry recorded twice
	// is AlreadyRecorded only while its row was not claimed again, and
	// recorded after the next attempt's claim it would answer for that
	// attempt; lost, a retry's message only waits for its lease, which it
	// would not have had to: the frontend did not take it.
	verdicts []pending
	// rounds are the store rounds whose result may still come, each with
	// the time past which it can no longer: the round out (Out), whose
	// store call times out by roundBy (Carry's), and those earlier
	// incarnations had out and that have not reported yet. Their results
	// come to the next incarnation (Done, Earlier), with the outcomes they
	// commit (Applied; with the bus, Settled: the bus link holds their
	// messages on for them, busLink.handOn). Until each reports, or its
	// time passes (Tick), a drain or a retirement waits for it (drained):
	// stopped at once, a retiring worker naked the bus messages of its
	// outcomes while their commit was in flight (a second delivery kept
	// off only by the row's lease), and their Applied effects (metrics,
	// the state change published) went to a dead actor; a drain ended
	// before the outcomes were committed.
	rounds map[*Round]time.Time
	// deferred are the deferrals in a row of each message (Verdict):
	// lost, a restart set the backoff of a frontend that keeps answering
	// busy back to its first.
	deferred map[string]deferrals
}

// Carry is what the dispatcher hands its worker's next incarnation as the
// worker restarts (Inherit); the result of the round out, if any, cannot
// come after roundBy (its store call's timeout).
func (d *Dispatcher) Carry(roundBy time.Time) Carry {
	c := Carry{flights: maps.Clone(d.orphans), rounds: maps.Clone(d.earlier), deferred: maps.Clone(d.deferred)}
	for id, f := range d.inflight {
		c.flights[id] = f.deadline
	}
	if d.round != nil {
		c.rounds[d.round] = roundBy
	}
	for _, p := range d.pending {
		if p.ack == nil {
			c.verdicts = append(c.verdicts, p)
		}
	}
	if d.round == nil {
		return c
	}
	for _, p := range d.round.pending {
		if p.ack == nil && p.o.Result != persistence.ResultRetry {
			p.again = true
			c.verdicts = append(c.verdicts, p)
		}
	}
	return c
}

// Inherit gives the dispatcher of a restarted worker what its previous
// incarnation handed on (Carry): it takes on their deliveries under way
// and their rounds out, and its first round records their verdicts.
func (d *Dispatcher) Inherit(c Carry) {
	maps.Copy(d.orphans, c.flights)
	d.pending = append(d.pending, c.verdicts...)
	maps.Copy(d.earlier, c.rounds)
	maps.Copy(d.deferred, c.deferred)
}

// Kick says work may be due (a commit, a ring change).
func (d *Dispatcher) Kick() {
	d.more = true
	if d.round != nil {
		d.round.kicked = true
	}
}

// Owe says how many rows the handover board granted this worker that have
// not come yet (handover.Board.Owed): a push frontend's claims and the bus's
// fetch room leave them their slots, so that MaxInFlight bounds the
// deliveries under way however a handover and a claim race. Offer does not
// take them off: the board does, when the offer is put on it. A retiring
// worker (push or pull) waits for them before it stops (drained): stopped,
// their Work was lost with its mailbox, and each message waited for its
// lease, an attempt counted and none made.
func (d *Dispatcher) Owe(n int) { d.owed = max(n, 0) }

// Retiring reports whether the dispatcher retires (Retire).
func (d *Dispatcher) Retiring() bool { return !d.retireBy.IsZero() }

// pushRoom is a push frontend's free slots: MaxInFlight less the
// deliveries under way and the rows owed.
func (d *Dispatcher) pushRoom() int { return d.slotsLess(d.owed) }

// slotsLess is a push frontend's free slots less owed rows.
func (d *Dispatcher) slotsLess(owed int) int { return d.maxInFlight() - d.underWay() - owed }

// underWay is how many deliveries a push frontend has under way: this
// incarnation's, and those inherited (Inherit) whose verdict has not come
// and whose deadline has not passed. Each leaves the count once, when
// Verdict or Tick deletes it: a verdict after the deadline frees nothing.
func (d *Dispatcher) underWay() int { return len(d.inflight) + len(d.orphans) }

// maxInFlight is the most deliveries a push frontend has under way now:
// MaxInFlight, or the Limit under it.
func (d *Dispatcher) maxInFlight() int {
	if d.limit > 0 && d.limit < d.cfg.MaxInFlight {
		return d.limit
	}
	return d.cfg.MaxInFlight
}

// Hold stops (or resumes) claims for a push frontend that cannot take
// deliveries now (an in-process frontend not registered yet, an smpp
// frontend not bound or whose submit rate leaves no slot in time).
func (d *Dispatcher) Hold(held bool) { d.held = held }

// Limit bounds a push frontend's deliveries under way below MaxInFlight
// from now on (an smpp frontend: what its submit rate sends within the
// delivery timeout, smppout.Client.InFlight); 0 or less: MaxInFlight.
// Deliveries under way beyond a new limit go on; no more are claimed
// until they are under it.
func (d *Dispatcher) Limit(n int) { d.limit = n }

// Waiting reports whether polls wait.
func (d *Dispatcher) Waiting() bool { return d.waiters.Len() > 0 }

// Poll queues a pull frontend's long-poll; it is answered from work at
// hand, or by a later claim, or empty at its deadline.
func (d *Dispatcher) Poll(now time.Time, p *messages.Poll) Effects {
	if d.draining {
		return Effects{Answers: []Answer{{Poll: p, Reply: messages.PollReply{Err: errUnavailable("the node is stopping")}}}}
	}
	d.waiters.Add(p, now.Add(p.Wait))
	d.lastLease = leaseOf(p)
	d.Kick()
	return d.serve(now)
}

// Handover gives the dispatcher work already leased to it (a claim made
// elsewhere, or a commit that leased it): a pull frontend offers it to the
// waiting polls, a push frontend delivers it, unless it is delivering it
// already (renew). A retiring dispatcher gives it back (giveBack).
func (d *Dispatcher) Handover(now time.Time, work []persistence.Work) Effects {
	var e Effects
	if d.Retiring() {
		d.giveBack(now, d.renew(work))
		return e
	}
	for _, wk := range d.admit(now, d.renew(work)) {
		if d.cfg.Pull {
			d.ready = append(d.ready, wk)
			continue
		}
		d.inflight[wk.MessageID] = flight{work: wk, deadline: now.Add(d.cfg.DeliveryTimeout), sent: wk.Message.Attempts}
		e.Start = append(e.Start, wk)
	}
	if d.cfg.Pull {
		e.add(d.serve(now))
	}
	return e
}

// renew takes out of a push frontend's work the messages whose delivery
// is under way: claimed again because their lease ran out by this node's
// clock (stepped forward past it) before their deadline did. Handed over a
// second time, the frontend would get the message again, maybe after it
// answered the first; instead the delivery in flight answers for the new
// claim (its verdict is fenced with it) and keeps its deadline.
func (d *Dispatcher) renew(work []persistence.Work) []persistence.Work {
	if d.cfg.Pull {
		return work
	}
	out := work[:0:0]
	for _, wk := range work {
		if f, ok := d.inflight[wk.MessageID]; ok {
			f.work = wk
			d.inflight[wk.MessageID] = f
			continue
		}
		out = append(out, wk)
	}
	return out
}

// giveBack queues the outcomes that give back work that reached a retiring
// dispatcher (handed over by the intake, whose grant was made before the
// worker withdrew its offer; claimed by the round out as it retired; at
// hand for polls): each row unleased and due now, the attempt its lease
// counted given back (a deferral, persistence.Outcome.Deferred), for the
// frontend's new worker to claim (Effects.GaveBack), or for nobody if the
// frontend went away. The old worker takes no new work: delivered, it went
// with the old settings (the old URL, a rotated secret) after the change.
func (d *Dispatcher) giveBack(now time.Time, work []persistence.Work) {
	for _, wk := range work {
		o := persistence.Outcome{Kind: persistence.WorkDelivery, Target: d.cfg.Frontend, MessageID: wk.MessageID,
			Result: persistence.ResultRetry, RetryAt: now, Deferred: true, Attempt: wk.Message.Attempts,
			Detail: fmt.Sprintf("not attempted (attempt %d given back): frontend %s changed or deleted before its delivery; retry now", wk.Message.Attempts, d.cfg.Frontend)}
		d.pending = append(d.pending, pending{o: fenced(o, wk, d.cfg.Owner), givenBack: true})
	}
}

// admit keeps the work the policy lets be attempted; the rest (expired,
// out of attempts) gets its failure queued.
func (d *Dispatcher) admit(now time.Time, work []persistence.Work) []persistence.Work {
	var out []persistence.Work
	for _, wk := range work {
		if o, ok := d.cfg.Policy.Before(wk, now); !ok {
			d.pending = append(d.pending, pending{o: fenced(o, wk, d.cfg.Owner)})
			continue
		}
		out = append(out, wk)
	}
	return out
}

// serve answers waiting polls, oldest first, from the work at hand. Work
// whose lease has less than half of the poll's lease left is not offered
// (a poller could not count on it): it is dropped, and claimable again once
// its lease ends. That happens only to work claimed for a poll that left
// before the claim came back.
func (d *Dispatcher) serve(now time.Time) Effects {
	var e Effects
	for len(d.ready) > 0 && d.waiters.Len() > 0 {
		w, _ := d.waiters.Peek()
		d.waiters.Pop()
		if gone(w.Poll.Done) {
			continue
		}
		keep := leaseOf(w.Poll) / 2
		out := make([]messages.Outgoing, 0, min(max(w.Poll.Max, 1), len(d.ready)))
		var until []time.Time
		for len(d.ready) > 0 && len(out) < cap(out) {
			wk := d.ready[0]
			d.ready = d.ready[1:]
			if wk.LeaseUntil.Sub(now) >= keep {
				out = append(out, messages.OutgoingOf(wk.Message))
				until = append(until, wk.LeaseUntil)
				if wk.LeaseUntil.After(d.polledUntil) {
					d.polledUntil = wk.LeaseUntil
				}
			}
		}
		if len(out) == 0 {
			d.waiters.Add(w.Poll, w.Deadline) // nothing fit: it waits on
			continue
		}
		e.Answers = append(e.Answers, Answer{Poll: w.Poll, Reply: messages.PollReply{Messages: out}, Until: until})
		if d.cfg.Bus && now.Sub(w.Deadline.Add(-w.Poll.Wait)) < handFor {
			// Answered as it came (work is flowing): its consumer polls
			// again at once.
			d.handUntil, d.handRoom = now.Add(handFor), max(w.Poll.Max, 1)
		}
	}
	return e
}

// Asked says the worker sent attempt `attempt` of message id to the
// in-process frontend's actor (ActorVerdict matches the answer to it).
func (d *Dispatcher) Asked(id string, attempt int) {
	q := append(d.asked[id], attempt)
	if len(q) > d.cfg.Policy.MaxAttempts+1 {
		q = q[len(q)-d.cfg.Policy.MaxAttempts-1:] // more attempts than a message gets: the oldest will not be answered
	}
	d.asked[id] = q
}

// ActorVerdict records an in-process frontend's answer. It answers the
// attempt it names (DeliveryResult.Attempt), or else the oldest attempt
// of the message sent and not answered yet: a frontend answers each
// Delivery once, so a late answer to attempt 1 arriving while attempt 2 is
// in flight is attempt 1's (taken as attempt 2's, a late Retry failed a
// message that attempt 2 delivered). An answer to an attempt no longer in
// flight is late (Verdict).
//
// Unless the oldest timed out and a later attempt is in flight: the
// answer is then the oldest's, late (a slow frontend), or the one in
// flight's, the oldest never to be answered (the frontend's actor
// panicked on it, which drops it; taken as the oldest's, every later
// answer went to the attempt before its own, the Retry of the one in
// flight dropped as late and its Delivered recorded against the one
// that panicked). Nothing here tells which. The answer takes the oldest
// off the queue (one of the two is answered; the attempt in flight stays
// queued for the other) and is decided by what it says:
//   - Delivered or Failed is the attempt in flight's verdict: the message
//     is final either way (a later answer finds it so, as a late one).
//   - Retry (or an unknown status) is held on the attempt in flight
//     (flight.held). Another answer that comes for it while it is in
//     flight is its own, and the held one was the oldest's, late, and
//     dropped as a late Retry is. If none comes, the held one is its
//     verdict at its deadline (Tick), reason and RetryAfter kept: the
//     message retries when the timeout would have retried it. Its queue
//     entry stays (either attempt may still answer), so the next
//     attempt's answers are in the same doubt. Applied at once, a slow
//     frontend's late Retry took the place of the attempt in flight: the
//     message retried while that attempt went on, and failed
//     max_attempts on the last one, even if that one delivered.
//
// An answer that names its attempt is never in doubt.
func (d *Dispatcher) ActorVerdict(now time.Time, r messages.DeliveryResult, rng *rand.Rand) {
	q := d.asked[r.ID]
	attempt := r.Attempt
	f, inFlight := d.inflight[r.ID]
	doubt := false
	if attempt == 0 && len(q) > 0 {
		attempt = q[0]
		doubt = inFlight && attempt != f.sent && slices.Contains(q, f.sent)
	}
	if i := slices.Index(q, attempt); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	if len(q) == 0 {
		delete(d.asked, r.ID)
	} else {
		d.asked[r.ID] = q
	}
	switch {
	case !doubt:
		d.Verdict(now, r.ID, attempt, r, true, rng)
	case r.Status == messages.Delivered || r.Status == messages.Failed:
		d.Verdict(now, r.ID, f.sent, r, true, rng)
	default:
		f.held = &r
		d.inflight[r.ID] = f
	}
}

// Verdict records a push frontend's verdict on a delivery. attempt is the
// attempt it answers, 0 when the sender does not know it. A verdict on
// another attempt than the one in flight, or when none is (it timed out,
// or the worker restarted), is late: still recorded when it is final (the
// frontend has spoken; on a message already final it changes nothing,
// Effects.LateRefused), dropped when it is a retry (the timeout already
// scheduled one). A deferral's wait backs off on from the deferrals of
// the same attempt before it (deferred); any other verdict ends the run.
func (d *Dispatcher) Verdict(now time.Time, id string, attempt int, r messages.DeliveryResult, actor bool, rng *rand.Rand) {
	delete(d.orphans, id)
	f, inFlight := d.inflight[id]
	if inFlight && attempt > 0 && attempt != f.sent {
		inFlight = false // an earlier attempt's answer
	}
	if inFlight {
		delete(d.inflight, id)
		attempt = f.work.Message.Attempts
	}
	if !r.Status.Valid() {
		r = messages.DeliveryResult{ID: id, Status: messages.Retry, Reason: "frontend replied with unknown status " + string(r.Status)}
	}
	if !inFlight && (r.Status == messages.Retry || attempt == 0 && !actor) {
		return
	}
	run := d.deferred[id]
	if run.attempt != attempt {
		run = deferrals{attempt: attempt}
	}
	o := d.cfg.Policy.AfterDeferrals(d.cfg.Frontend, id, attempt, run.n, r, now, rng)
	if inFlight {
		o = fenced(o, f.work, d.cfg.Owner)
	}
	d.pending = append(d.pending, pending{o: o, late: !inFlight})
	if o.Deferred {
		run.n, run.until = min(run.n+1, maxDeferrals), o.RetryAt.Add(d.cfg.Policy.RetryMax)
		d.deferred[id] = run
	} else {
		delete(d.deferred, id) // the run ends: the message was attempted
	}
}

// fenced stamps an outcome of a delivery in flight (a push frontend's
// verdict, delivered ones included, or a timeout) with the claim it comes
// from: if our lease ran out and the ring's new owner of the token claimed
// the row since, the store refuses it (StaleEpoch) and the new owner's
// attempt, under the same Idempotency-Key, speaks for the message. Work
// claimed by id (the bus), handed over by the intake or claimed without a
// ring is leased under epoch 0, and fenced by its owner all the same: a
// late verdict whose row another instance claimed since is refused, not
// applied over that claim's attempt under way. A pull frontend's ack and a
// verdict arriving after its delivery left the flight are not fenced: the
// frontend has spoken.
func fenced(o persistence.Outcome, wk persistence.Work, owner string) persistence.Outcome {
	o.Epoch, o.Owner = wk.LeaseEpoch, owner
	return o
}

// Attempts are the attempt counts an ack's verdicts need (by message id,
// absent when the message does not exist), read before Ack.
type Attempts map[string]int

// NeedsAttempts reports whether the verdict needs the message's attempt
// count: a retry (for the backoff and the budget), or one that names its
// attempt (to tell a stale verdict).
func NeedsAttempts(r messages.DeliveryResult) bool {
	return r.Status == messages.Retry || (r.Status == messages.Failed && r.Attempt > 0)
}

// Ack queues a pull frontend's verdicts; the ack is answered when they are
// recorded. attempts holds the counts NeedsAttempts asks for; readErr, when
// set, is why some could not be read (those verdicts then answer no_work
// and the ack fails, so the frontend acks again). Each verdict is decided
// on its own, in order, an id repeated within one ack included: as if the
// verdicts came in acks one after the other (the store answers a repeat of
// a recorded verdict already_recorded). Answered with the first
// occurrence's outcome instead, a delivered after a stale retry of the
// same message was dropped as stale.
func (d *Dispatcher) Ack(now time.Time, a *messages.Ack, attempts Attempts, readErr error, rng *rand.Rand) Effects {
	st := &ackState{a: a, outcomes: make([]messages.AckOutcome, len(a.Results)), left: len(a.Results)}
	for i, r := range a.Results {
		st.outcomes[i].ID = r.ID
		attempt := 0
		if NeedsAttempts(r) {
			n, ok := attempts[r.ID]
			switch {
			case !ok:
				st.outcomes[i].Outcome = string(persistence.NoWork)
				st.err = readErr
				st.left--
				continue
			case r.Attempt > 0 && r.Attempt < n:
				st.outcomes[i].Outcome = messages.OutcomeStale
				st.left--
				continue
			}
			attempt = n
		}
		o := d.cfg.Policy.After(d.cfg.Frontend, r.ID, attempt, r, now, rng)
		o.Ack = true // a verdict on a message never offered changes nothing
		d.pending = append(d.pending, pending{o: o, ack: st, idx: i})
	}
	if st.left == 0 {
		return Effects{Acks: []AckDone{st.reply()}}
	}
	return Effects{}
}

// reply is the ack's answer once every verdict is settled.
func (st *ackState) reply() AckDone {
	return AckDone{Ack: st.a, Reply: messages.AckReply{Outcomes: st.outcomes, Err: st.err}}
}

// settle records one verdict's completion; it returns the ack's answer
// when that was its last.
func (st *ackState) settle(idx int, outcome string, err error) (AckDone, bool) {
	st.outcomes[idx].Outcome = outcome
	if err != nil {
		st.err = err
	}
	st.left--
	if st.left > 0 {
		return AckDone{}, false
	}
	return st.reply(), true
}

// Next returns the store round to run now, if any: every verdict waiting
// to be recorded, and the claim the waiting polls or free push slots call
// for. Only one round is out at a time; Done ends it.
func (d *Dispatcher) Next(now time.Time) (*Round, bool) {
	if d.round != nil || now.Before(d.retryAt) {
		return nil, false
	}
	// The wait after a failed round is over. Kept, a past retryAt would
	// stay in Wake while nothing can be claimed (a pull frontend with no
	// poll waiting): a wake-up due at once, again and again.
	d.retryAt = time.Time{}
	if i := slices.IndexFunc(d.pending, func(p pending) bool { return p.alone }); i >= 0 {
		// A round was refused for its input: its verdicts go one at a
		// time, without a claim, until the one refused is found.
		r := &Round{pending: []pending{d.pending[i]}, Outcomes: []persistence.Outcome{d.pending[i].o}}
		d.pending = slices.Delete(d.pending, i, i+1)
		d.round = r
		return r, true
	}
	r := &Round{pending: d.pending, at: now}
	d.pending = nil
	for _, p := range r.pending {
		r.Outcomes = append(r.Outcomes, p.o)
	}
	if len(r.Outcomes) > 0 {
		// Verdicts free slots and reschedule work: the claim that follows
		// them in the same Write takes what is due, and its NextDue
		// tells when a retry falls due.
		d.more = true
	}
	r.Claim = d.claim(now)
	if r.Claim == nil && len(r.Outcomes) == 0 {
		return nil, false
	}
	d.round = r
	return r, true
}

// ClaimsRoom says whether the round Next(now) would start may claim a
// push frontend's free slots: from the store, or the bus's backstop (not a
// claim of what the bus named: its room was asked of the bus). The worker
// then withdraws its handover offer as it reads what it is owed
// (handover.Board.Withdraw), so that no room is both claimed and offered:
// a grant between the two would be counted by neither. It may say yes
// when Next then claims nothing (no free slot); never no when it claims
// free slots. It asks claimFrom what Next asks it, so the two cannot
// drift apart.
func (d *Dispatcher) ClaimsRoom(now time.Time) bool {
	if d.cfg.Pull || d.held || d.round != nil || now.Before(d.retryAt) {
		return false
	}
	// Verdicts to record make Next look for more (d.more).
	src := d.claimFrom(now, d.more || len(d.pending) > 0)
	return src == fromStore || src == fromOverdue
}

// source is where the claim due now comes from.
type source int

const (
	noClaim     source = iota
	fromNamed          // the messages the bus handed out (claimNamed)
	fromOverdue        // the bus's backstop (claimOverdue)
	fromStore          // due work in the store, for free slots or polls
)

// claimFrom says where the claim due now would come from, more being
// whether work may be due at once (Dispatcher.more as Next sees it). It
// changes nothing: a claim from the store or the backstop may still find
// no room.
func (d *Dispatcher) claimFrom(now time.Time, more bool) source {
	due := more || (!d.nextDue.IsZero() && !d.nextDue.After(now))
	switch {
	case d.draining:
		return noClaim
	case d.cfg.Bus && d.busUp && len(d.named) > 0:
		return fromNamed
	case d.cfg.Bus && d.busUp && due && d.shortPoll():
		return fromStore
	case d.cfg.Bus && d.busUp:
		if now.Before(d.backstopAt) {
			return noClaim
		}
		return fromOverdue
	case due:
		return fromStore
	}
	return noClaim
}

// shortPoll reports whether a pull poll waits that waits less than
// BusShortPoll (wait_ms 0 above all: "the messages due now"). Such a poll
// is answered before the fetch started for it can be counted on to bring
// its work (a fetch, then a claim by id), and the work the fetch brings
// then finds no poll and goes back to the bus (Named), again at the next
// poll: served only by the bus, a consumer that polls without waiting
// never got the work that went through it, nor the backstop's, which
// claims only at its own ticks. So such polls are served from the store
// too, as without the bus. Nothing is taken twice: the row is leased, and
// its bus message, claimed by id, finds it leased or done, and is acked
// (bus.Claimed): naked until the lease ended, the copies of such polls'
// work filled the consumer's MaxAckPending and starved its long polls.
func (d *Dispatcher) shortPoll() bool {
	return d.cfg.Pull && slices.ContainsFunc(d.waiters.Items(), func(w Waiter[*messages.Poll]) bool {
		return w.Poll.Wait < d.cfg.BusShortPoll && !gone(w.Poll.Done)
	})
}

// claim is the claim due now, or nil.
func (d *Dispatcher) claim(now time.Time) *persistence.ClaimRequest {
	switch d.claimFrom(now, d.more) {
	case fromNamed:
		return d.claimNamed(now)
	case fromOverdue:
		return d.claimOverdue(now)
	case noClaim:
		return nil
	}
	req := &persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: d.cfg.Frontend, Owner: d.cfg.Owner, Now: now}
	if !d.cfg.Pull {
		if req.Limit = d.pushRoom(); req.Limit <= 0 || d.held {
			return nil // verdicts free slots
		}
		req.Lease = d.cfg.PushLease
		return req
	}
	if req.Limit, req.Lease = d.pollRoom(); req.Limit <= 0 {
		return nil
	}
	return req
}

// claimNamed is the claim of the messages the bus handed out.
func (d *Dispatcher) claimNamed(now time.Time) *persistence.ClaimRequest {
	req := &persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: d.cfg.Frontend, Owner: d.cfg.Owner, Now: now,
		IDs: d.named, Limit: len(d.named), Lease: d.cfg.PushLease}
	if d.cfg.Pull {
		if _, req.Lease = d.pollRoom(); req.Lease == 0 {
			req.Lease = d.nextLease()
		}
	}
	d.named = nil
	return req
}

// claimOverdue is the bus's backstop: a claim from the store of work due
// and unleased for BusOverdue (its bus message is late or lost), made as
// if it were BusOverdue ago, so that it takes nothing the bus is about to
// hand out. nil when there is no room (claimFrom says when it is time).
func (d *Dispatcher) claimOverdue(now time.Time) *persistence.ClaimRequest {
	// Its time has come whether or not there is room: without room it waits
	// for the next (else the wake-up at its time would come back at once).
	d.backstopAt = now.Add(d.cfg.BusBackstop)
	req := &persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: d.cfg.Frontend, Owner: d.cfg.Owner,
		Now: now.Add(-d.cfg.BusOverdue)}
	lease := d.cfg.PushLease
	if d.cfg.Pull {
		req.Limit, lease = d.pullRoom()
		req.Limit -= len(d.named)
	} else if !d.held {
		req.Limit = d.pushRoom()
	}
	if req.Limit <= 0 {
		return nil
	}
	req.Lease = lease + d.cfg.BusOverdue // it ends lease after now
	return req
}

// SetBus says whether the bus is up. While it is down the dispatcher
// claims from the store: work may be due there at once.
func (d *Dispatcher) SetBus(up bool) {
	if d.busUp && !up {
		d.more = true
	}
	d.busUp = up
}

// BusRoom is how many more messages to ask the bus for now: the free push
// slots (less the rows owed), or the pull room (pullRoom), less what is
// named or being claimed already. None without the bus up, while draining
// or held.
func (d *Dispatcher) BusRoom() int {
	n, _ := d.busRoom(d.owed)
	return n
}

// busRoom is BusRoom with owed rows owed (a push frontend's), and the
// lease of the work that fills it: the push lease, or the pull room's
// (pullRoom). Offer passes 0: the board takes the debt off itself. A push
// frontend's room leaves the backstop's claim out its slots: it claims
// them (a pull worker's is kept as it was: its room is the waiting polls,
// not a bound, and work beyond them waits at hand for the next).
func (d *Dispatcher) busRoom(owed int) (int, time.Duration) {
	room, lease := d.slotsLess(owed), d.cfg.PushLease
	if d.round != nil && d.round.Claim != nil && d.round.Claim.IDs == nil {
		room -= d.round.Claim.Limit
	}
	if d.cfg.Pull {
		room, lease = d.pullRoom()
		room = min(room, d.cfg.MaxClaim)
	}
	if !d.cfg.Bus || !d.busUp || d.draining || d.held {
		return 0, lease
	}
	return max(room-d.naming(), 0), lease
}

// Named gives the dispatcher messages the bus handed out, to claim by id;
// it returns those it cannot take now (a drain; for a pull frontend whose
// polls were answered meanwhile, what would take the work at hand past
// MaxClaim, and all of it once the window of room for the next poll has
// closed): the bus hands them out again. A pull frontend keeps the rest
// while that window is open: its consumers poll again at once, and the
// work at hand answers them. Handed back instead, a message would go round
// the bus while the same consumers wait for it (measured: a third of the
// messages, with the handover of new work filling the polls first). With
// the window closed its consumer may be polling at another instance now (a
// poll that left, a load balancer that spreads the polls): kept here, the
// work would wait for its lease to end; handed back, the bus hands it at
// once to a poll waiting elsewhere. If no poll comes, work kept goes back
// when its lease ends (see serve).
func (d *Dispatcher) Named(ids ...string) (refused []string) {
	if d.draining {
		return ids
	}
	if d.cfg.Pull && d.waiters.Len() == 0 {
		room := 0
		if !d.handUntil.IsZero() {
			room = max(d.cfg.MaxClaim-len(d.ready)-d.naming(), 0)
		}
		if len(ids) > room {
			ids, refused = ids[:room], ids[room:]
		}
	}
	d.named = append(d.named, ids...)
	return refused
}

// naming is how many messages the bus named that are not claimed yet:
// named, or in the claim out.
func (d *Dispatcher) naming() int {
	n := len(d.named)
	if d.round != nil && d.round.Claim != nil {
		n += len(d.round.Claim.IDs)
	}
	return n
}

// pullRoom is what a pull worker can take now: the waiting polls' room
// (pollRoom); with none waiting and the bus up, room for the next poll
// for handFor after it answered one within handFor of its coming (that
// poll's max, less the work at hand), leased for the last poll's lease.
//
// A consumer that was answered acks and polls again within milliseconds:
// the work committed meanwhile is handed over at hand for that poll,
// rather than all of it going round the bus (measured: 70% of the
// messages of postgres-site-nats, each a publish, a fetch, a claim by id
// and an ack). The window is short, and opened only by a poll that did
// not wait (work is flowing), so that work is not kept here for a
// consumer that polls elsewhere now: a poll waiting at another instance
// gets the work through the bus, and a consumer that spreads its long
// polls over the instances at a quiet time (each waits before its
// answer) opens no window. The bus's fetch and backstop take their share
// of the same room, so the work the bus holds (retries that fell due, work
// accepted where no consumer polls) is not starved by a stream of new
// work. If no poll comes, the work at hand waits for its lease to end and
// the backstop, as work at hand from the bus waits for its lease.
func (d *Dispatcher) pullRoom() (int, time.Duration) {
	if n, lease := d.pollRoom(); n > 0 || !d.cfg.Bus || d.handUntil.IsZero() {
		return n, lease
	}
	return min(d.handRoom, d.cfg.MaxClaim) - len(d.ready), d.nextLease()
}

// nextLease is the lease of work taken for a poll that has not come yet:
// the last poll's (the default before any poll). It was at least the
// default: a consumer polling with a shorter lease got such work leased
// for 30 s, and what it did not ack came back only then, not after the
// lease it asked for.
func (d *Dispatcher) nextLease() time.Duration {
	if d.lastLease > 0 {
		return d.lastLease
	}
	return defaultPollLease
}

// pollRoom is how many rows the waiting polls that ask for the oldest
// one's lease can take (up to MaxClaim, less the work at hand), and that
// lease: what one claim for them all takes.
func (d *Dispatcher) pollRoom() (int, time.Duration) {
	var (
		n     int
		lease time.Duration
	)
	for _, w := range d.waiters.Items() {
		if gone(w.Poll.Done) {
			continue
		}
		l := leaseOf(w.Poll)
		if lease == 0 {
			lease = l
		}
		if l == lease {
			n += max(w.Poll.Max, 1)
		}
	}
	return min(n-len(d.ready), d.cfg.MaxClaim), lease
}

// handFor is how long after it answered a poll a pull worker with the bus
// up offers to take new work at hand for the next poll (pullRoom): a few
// times the ack and the next poll of a consumer that is busy.
const handFor = 100 * time.Millisecond

// Offer is how many rows the dispatcher can take at once now, leased for
// how long: the waiting polls' room (pull) or the free slots (push; not
// less the rows owed, Owe: handover.Board.Offer takes them off, once,
// under its lock); none while work may wait in the store (new work must
// not overtake it), while a claim is out (it will serve them), while
// draining or held. The worker puts it on the handover board.
func (d *Dispatcher) Offer() (int, time.Duration) {
	if d.cfg.Bus && d.busUp {
		// New work overtakes nothing waiting in the store: that is in the
		// bus, whose messages share the room.
		return d.busRoom(0)
	}
	if d.draining || d.more || (d.round != nil && d.round.Claim != nil) {
		return 0, 0
	}
	if !d.cfg.Pull {
		if d.held {
			return 0, 0
		}
		return max(d.maxInFlight()-d.underWay(), 0), d.cfg.PushLease
	}
	n, lease := d.pollRoom()
	return max(n, 0), lease
}

// defaultPollLease is a pull lease when the poll names none.
const defaultPollLease = 30 * time.Second

func leaseOf(p *messages.Poll) time.Duration {
	if p.Lease <= 0 {
		return defaultPollLease
	}
	return p.Lease
}

// Done ends the round in flight. claimed is what its claim took (nil when
// it had none, or the ring fence gave this instance none of the ring: then
// nothing is claimed until a kick); err is the round's failure: its acks
// are answered with it (the frontend acks again), its push verdicts wait
// for the next round, and the next round waits storeRetry.
//
// A round refused for its input (persistence.ErrInvalid: the same Write
// fails the same way again) is no reason to wait: its push verdicts are
// recorded one per round from the next on, and a verdict refused alone is
// dropped (Effects.Dropped), else it would hold up every later verdict
// and claim of the frontend, and a drain, for ever.
//
// A round that is not the one out is an earlier incarnation's (Earlier);
// once it reported, it keeps no drain or retirement (Inherit).
func (d *Dispatcher) Done(now time.Time, r *Round, completions []persistence.Completion, claimed *persistence.Claim, err error) Effects {
	if d.Earlier(r) {
		delete(d.earlier, r)
		e := earlierDone(r, completions, err, d.cfg.Bus)
		e.Drained = d.drained()
		e.Retired = d.retired(now, e.Drained)
		return e
	}
	d.round = nil
	var e Effects
	if err != nil {
		switch {
		case r.Claim != nil && d.draining:
			e.Refused = append(e.Refused, r.Claim.IDs...)
		case r.Claim != nil:
			d.named = append(r.Claim.IDs, d.named...)
		}
		invalid := errors.Is(err, persistence.ErrInvalid)
		if !invalid {
			d.retryAt = now.Add(storeRetry)
		}
		alone := invalid && len(r.Outcomes) == 1 && r.Claim == nil
		for _, p := range r.pending {
			if p.ack == nil && alone {
				e.Dropped = append(e.Dropped, p.o)
			} else if p.ack == nil {
				p.alone = p.alone || invalid
				d.pending = append(d.pending, p)
			} else if a, done := p.ack.settle(p.idx, "", errUnavailable("the message store is unavailable; ack again")); done {
				e.Acks = append(e.Acks, a)
			}
		}
		e.Drained = d.drained()
		e.Retired = d.retired(now, e.Drained)
		return e
	}
	d.retryAt = time.Time{}
	for i, p := range r.pending {
		c := completions[i]
		if c == persistence.Applied {
			e.Applied = append(e.Applied, p.o)
			e.GaveBack = e.GaveBack || p.givenBack
		}
		if p.late && !p.again && c == persistence.AlreadyRecorded {
			e.LateRefused = append(e.LateRefused, p.o)
		}
		if p.o.Result != persistence.ResultRetry && c != persistence.StaleEpoch {
			delete(d.asked, p.o.MessageID) // its work is done: no attempt of it is answered now
		}
		if d.cfg.Bus {
			e.Settled = append(e.Settled, Settled{Outcome: p.o, Completion: c})
		}
		if p.ack != nil {
			if a, done := p.ack.settle(p.idx, string(c), nil); done {
				e.Acks = append(e.Acks, a)
			}
		}
	}
	switch {
	case r.Claim != nil && r.Claim.IDs != nil:
		e.add(d.claimedNamed(now, r.Claim.IDs, claimed))
	case r.Claim != nil:
		if claimed == nil || claimed.Refused {
			d.more, d.nextDue = r.kicked, time.Time{}
		} else {
			d.more, d.nextDue = r.kicked || len(claimed.Work) >= r.Claim.Limit, claimed.NextDue
			e.add(d.Handover(now, claimed.Work))
		}
	}
	e.Drained = d.drained()
	e.Retired = d.retired(now, e.Drained)
	return e
}

// Earlier reports whether r is not the round out (Next) but the round of
// an earlier incarnation of the worker: one that restarted while its
// round ran, whose result comes to the next incarnation (same PID).
func (d *Dispatcher) Earlier(r *Round) bool { return r != d.round }

// earlierDone is the end of an earlier incarnation's round (Earlier): the
// outcomes it committed are reported (Applied, LateRefused: they were
// recorded; with the bus, Settled: the next incarnation held their bus
// messages on for it, busLink.handOn), and nothing else is taken from it. Taken for the end of the
// round out, it ended that one: a second round went out beside it (two
// claims at once, a push frontend's MaxInFlight overrun), the work its
// claim took was handed out as claimed by this incarnation, and its acks,
// answered when the earlier one stopped (Stop), were answered again. The
// work it claimed waits for its lease, as all the work an incarnation
// leased does after a restart; its verdicts not recorded (a failed round)
// are lost as those still waiting were, and their work is delivered again
// with the same id once its lease ends.
func earlierDone(r *Round, completions []persistence.Completion, err error, bus bool) Effects {
	var e Effects
	if err != nil {
		return e
	}
	for i, p := range r.pending {
		if bus {
			e.Settled = append(e.Settled, Settled{Outcome: p.o, Completion: completions[i]})
		}
		switch c := completions[i]; {
		case c == persistence.Applied:
			e.Applied = append(e.Applied, p.o)
		case p.late && c == persistence.AlreadyRecorded:
			e.LateRefused = append(e.LateRefused, p.o)
		}
	}
	return e
}

// claimedNamed hands the work a claim of named messages took over, and
// tells which of them it could not take.
func (d *Dispatcher) claimedNamed(now time.Time, ids []string, claimed *persistence.Claim) Effects {
	var e Effects
	got := map[string]bool{}
	if claimed != nil {
		for _, w := range claimed.Work {
			got[w.MessageID] = true
		}
		e.Claimed = claimed.Work
	}
	for _, id := range ids {
		if !got[id] {
			u := Unclaimed{ID: id}
			if claimed != nil {
				u.Later = claimed.Later[id]
			}
			e.Unclaimed = append(e.Unclaimed, u)
		}
	}
	if claimed != nil {
		e.add(d.Handover(now, claimed.Work))
	}
	return e
}

// heldForClaim reports whether a waiting poll's deadline waits for the claim out:
// the claim was made with the poll waiting (its room counted), so Done's
// serve may answer it with the work the claim takes. Answered empty at its
// deadline instead, a poll with wait_ms 0 never got the messages its own
// claim took: they waited leased, an attempt counted, for a later poll or
// the lease's end. The next Tick after Done answers it empty.
func (d *Dispatcher) heldForClaim(w Waiter[*messages.Poll]) bool {
	return d.round != nil && d.round.Claim != nil && !w.Deadline.Add(-w.Poll.Wait).After(d.round.at)
}

// Tick is the time passing: polls at their deadline are answered empty
// (unless held for the claim out), push deliveries past theirs count as
// retries (with the Retry held on them, if any: ActorVerdict; inherited
// ones, Inherit, are forgotten: their work is claimed again when its
// lease ends), as are the rounds of earlier incarnations past the time
// their result could come (Inherit) and the runs of deferrals past theirs
// (deferrals), and work the store said would be due by now is looked
// for. A drain that this completes is Drained.
func (d *Dispatcher) Tick(now time.Time, rng *rand.Rand) Effects {
	var e Effects
	for _, p := range d.waiters.ExpireUnless(now, d.heldForClaim) {
		e.Answers = append(e.Answers, Answer{Poll: p, Reply: messages.PollReply{Messages: []messages.Outgoing{}}})
	}
	for id, f := range d.inflight {
		if f.deadline.After(now) {
			continue
		}
		r := messages.DeliveryResult{ID: id, Status: messages.Retry, Reason: "timeout"}
		if f.held != nil {
			r = *f.held // no other answer came for it (ActorVerdict)
		}
		d.Verdict(now, id, f.sent, r, false, rng)
	}
	maps.DeleteFunc(d.orphans, func(_ string, deadline time.Time) bool { return !deadline.After(now) })
	maps.DeleteFunc(d.earlier, func(_ *Round, by time.Time) bool { return !by.After(now) })
	maps.DeleteFunc(d.deferred, func(_ string, run deferrals) bool { return !run.until.After(now) })
	if !d.nextDue.IsZero() && !d.nextDue.After(now) {
		d.more, d.nextDue = true, time.Time{}
	}
	if !d.handUntil.IsZero() && !d.handUntil.After(now) {
		d.handUntil = time.Time{} // the offer of room for the next poll ends
	}
	if !d.polledUntil.IsZero() && !d.polledUntil.After(now) {
		d.polledUntil = time.Time{} // the last lease of what the polls got ended
	}
	e.Drained = d.drained()
	e.Retired = d.retired(now, e.Drained)
	return e
}

// Wake is when Tick is next needed (zero: not until something happens):
// a poll's deadline, a delivery's deadline, and, while no round is out
// (its end looks again anyway), the store's next due time while someone
// could take it and the retry of a failed round.
func (d *Dispatcher) Wake() time.Time {
	next := clock.Earliest(clock.Earliest(d.waiters.NextDeadlineUnless(d.heldForClaim), d.handUntil), d.retireBy)
	if d.Retiring() && !d.stops {
		next = clock.Earliest(next, d.polledUntil) // it stops taking acks
	}
	for _, f := range d.inflight {
		next = clock.Earliest(next, f.deadline)
	}
	for _, deadline := range d.orphans {
		next = clock.Earliest(next, deadline)
	}
	for _, by := range d.earlier {
		next = clock.Earliest(next, by)
	}
	if d.round != nil {
		return next
	}
	if !d.draining && (!d.cfg.Pull || d.waiters.Len() > 0) {
		next = clock.Earliest(next, d.nextDue)
	}
	if len(d.pending) > 0 || d.more {
		next = clock.Earliest(next, d.retryAt)
	}
	if d.cfg.Bus && d.busUp && !d.draining && !d.backstopAt.IsZero() && (!d.cfg.Pull || d.waiters.Len() > 0 || !d.handUntil.IsZero()) {
		next = clock.Earliest(next, d.backstopAt)
	}
	return next
}

// Drain stops taking new work: the waiting polls are answered empty, the
// messages the bus named and no claim took yet go back to it
// (Effects.Refused: claimed, a retiring worker delivered them with its old
// settings after the change, and a drain waited for them), and
// Effects.Drained comes once nothing is in flight or waiting to be
// recorded, nor in a round an earlier incarnation of the worker had out
// (Inherit).
//
// A retiring dispatcher that drains (the node stops) no longer waits for
// acks (holdsAcks): Effects.Retired comes with Drained.
func (d *Dispatcher) Drain() Effects {
	d.stops = true
	e := d.drain()
	e.Retired = d.Retiring() && e.Drained
	return e
}

// drain stops taking new work (Drain, Retire).
func (d *Dispatcher) drain() Effects {
	d.draining = true
	e := Effects{Answers: d.answerAll(), Refused: d.named}
	d.named = nil
	e.Drained = d.drained()
	return e
}

// Retire drains the dispatcher of a worker that is to stop (its
// frontend's settings changed, and a new worker took over; or it was
// deleted): it takes no new work (what reaches it, and a pull frontend's
// work at hand, is given back: giveBack), and Effects.Retired comes once
// what it has in flight is answered and recorded (its verdicts go nowhere
// once it stops: the message would wait for its lease and be delivered
// again) and the rows the handover board owes it have come (Owe), or at
// by, whatever it still has (a store that fails every round must not keep
// it for ever).
//
// A retiring pull worker also waits, within by, until the leases of the
// messages it answered polls with have ended (holdsAcks): its consumers
// ack them to it (the supervisor routes a pull frontend's acks to its
// retiring worker while the frontend has no pull worker, as after a
// change to a webhook). Stopped at once, such an ack was refused
// (not_pull_frontend) and the verdict lost: the message was delivered
// again once its lease ran out.
func (d *Dispatcher) Retire(now, by time.Time) Effects {
	d.retireBy = by
	d.giveBack(now, d.ready)
	d.ready = nil
	if !d.polledUntil.After(now) {
		d.polledUntil = time.Time{}
	}
	e := d.drain()
	e.Retired = d.retired(now, e.Drained)
	return e
}

// retired reports whether a retiring dispatcher is done: drained and
// holding no acks, or at its bound.
func (d *Dispatcher) retired(now time.Time, drained bool) bool {
	return !d.retireBy.IsZero() && (drained && !d.holdsAcks(now) || !now.Before(d.retireBy))
}

// holdsAcks reports whether a retiring pull worker waits for its
// consumers' acks at now: the lease of a message it answered a poll with
// has not ended, and the node does not stop.
func (d *Dispatcher) holdsAcks(now time.Time) bool {
	return d.cfg.Pull && !d.stops && now.Before(d.polledUntil)
}

// Stop ends the dispatcher (its worker stops or restarts): the waiting
// polls are answered empty and the acks waiting on verdicts not yet
// recorded fail (the frontend acks again). The push verdicts not yet
// recorded are forgotten: a worker that restarts takes them first
// (Carry).
func (d *Dispatcher) Stop() Effects {
	e := Effects{Answers: d.answerAll()}
	prs := d.pending
	if d.round != nil {
		prs = append(prs, d.round.pending...)
	}
	for _, p := range prs {
		if p.ack == nil {
			continue
		}
		if a, done := p.ack.settle(p.idx, "", errUnavailable("the delivery worker restarted")); done {
			e.Acks = append(e.Acks, a)
		}
	}
	d.pending, d.round = nil, nil
	return e
}

func (d *Dispatcher) answerAll() []Answer {
	var out []Answer
	for _, p := range d.waiters.All() {
		out = append(out, Answer{Poll: p, Reply: messages.PollReply{Messages: []messages.Outgoing{}}})
	}
	return out
}

// drained reports whether a drain is complete; a retiring dispatcher's
// once the rows the board owes it have come too (Owe).
func (d *Dispatcher) drained() bool {
	return d.draining && len(d.inflight) == 0 && len(d.orphans) == 0 && len(d.pending) == 0 && d.round == nil &&
		len(d.earlier) == 0 && (!d.Retiring() || d.owed == 0)
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
