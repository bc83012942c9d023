package delivery

import (
	"maps"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/clock"
)

// busLink is a worker's side of the delivery bus (bus.go) as a pure state
// machine: the messages it holds while their work is under way, and its
// fetch (at most one out; after a failed one, none for busFetchRetry). It
// decides which held messages are settled and how, which are touched, and
// when to fetch; the shell runs the fetch and settles and touches what it
// names. M is the message type (the shell's *bus.Msg). Not safe for
// concurrent use.
type busLink[M any] struct {
	// pull: the worker's frontend is a pull frontend.
	pull  bool
	holds bus.Holds[M]
	// out is the fetch out (nil: none).
	out *busFetch
	// after is when the next fetch may start (after a failed one); failed
	// is that failure's text ("" when the last fetch worked).
	after  time.Time
	failed string
	// inherited are the held messages the worker's previous incarnation
	// handed on (handOn) whose outcome may still be recorded by this one
	// or come from the round that one had out: by message id, that round
	// and how long its result may still come (release).
	inherited map[string]inheritance
}

// inheritance is what an inherited hold waits for besides this
// incarnation's dispatcher: the round an earlier incarnation had out that
// has its outcome (nil: none), until its result can no longer come.
type inheritance struct {
	round *Round
	until time.Time
}

// linkCarry is what a bus link hands its worker's next incarnation
// (handOn, inherit): the messages held for it, and the fetch out. It is
// the bus link's part of the worker's carry (carry.go).
type linkCarry[M any] struct {
	holds     bus.Holds[M]
	inherited map[string]inheritance
	out       *busFetch
}

// settlement is a held message to settle, and how.
type settlement[M any] struct {
	msg M
	d   bus.Decision
}

func newBusLink[M any](pull bool) busLink[M] {
	return busLink[M]{pull: pull, holds: bus.Holds[M]{Touch: busTouch}}
}

// busFetch is one fetch a bus link started: n messages asked for, waited
// for up to wait. Its messages and its end name it, so that the link tells
// the fetch it has out from one it did not start (earlier).
type busFetch struct {
	n    int
	wait time.Duration
}

// fetch starts a fetch when there is room (the dispatcher's BusRoom), none
// is out and the wait after a failed one is over: it says how many
// messages to ask for and how long to wait for them (a pull worker's polls
// wait on it, so its wait is short). nil: no fetch now.
func (l *busLink[M]) fetch(now time.Time, room int) *busFetch {
	if l.out != nil || now.Before(l.after) || room <= 0 {
		return nil
	}
	l.out = &busFetch{n: room, wait: busFetchWait}
	if l.pull {
		l.out.wait = busFetchWaitPull
	}
	return l.out
}

// earlier reports whether f is not the fetch out but one of an earlier
// incarnation of the worker whose messages and end come to the next
// incarnation (same PID). Taken for its own, its end ended the fetch out,
// so a second fetch went out beside it (the bus asked for twice the
// room), and its messages were named beyond the room the fetch out was
// asked with (a push frontend's MaxInFlight overrun). A restart hands its
// fetch out on (handOn, inherit) rather than cancelling it, so none is
// expected: this stays as the guard of that room.
func (l *busLink[M]) earlier(f *busFetch) bool { return f != l.out }

// fetchNote is what the end of a fetch gives to log.
type fetchNote int

const (
	fetchQuiet   fetchNote = iota // nothing new
	fetchBack                     // fetching works again after a failure
	fetchFailed                   // a failure other than the last, with the bus up
	fetchEarlier                  // the end of an earlier incarnation's fetch (earlier)
)

// fetched ends fetch f (err is its failure): after a failure the next
// waits busFetchRetry. A failure is noted once while it repeats, and not
// while the bus is down (its own state says so). The end of an earlier
// incarnation's fetch (its restart cancelled it) changes nothing: the
// fetch out goes on.
func (l *busLink[M]) fetched(f *busFetch, now time.Time, err error, up bool) fetchNote {
	if l.earlier(f) {
		return fetchEarlier
	}
	l.out = nil
	if err == nil {
		back := l.failed != ""
		l.failed = ""
		if back {
			return fetchBack
		}
		return fetchQuiet
	}
	l.after = now.Add(busFetchRetry)
	note := fetchQuiet
	if up && err.Error() != l.failed {
		note = fetchFailed
	}
	l.failed = err.Error()
	return note
}

// take holds a message fetch f got from the bus and names its work (named
// is Dispatcher.Named). A message held already (handed out again while its
// work is under way here) replaces the old handle: its work is already
// ours. It returns the held messages whose work named refused, to nak, and
// whether to cancel the fetch out: the room it was asked with is gone.
//
// A message of an earlier incarnation's fetch (earlier) is not named: no
// room was asked for it. It goes back to the bus at once (nak), which
// hands it out again (to the fetch out, or another instance's), unless
// its id is held (handed out again since: that handle settles it).
func (l *busLink[M]) take(f *busFetch, id string, m M, now time.Time, named func(...string) []string) (nak []settlement[M], cancel bool) {
	if l.earlier(f) {
		if l.holds.Held(id) {
			return nil, false
		}
		return []settlement[M]{{msg: m, d: bus.Decision{Action: bus.Nak}}}, false
	}
	if !l.holds.Add(id, m, now) {
		l.holds.Take(id)
		l.holds.Add(id, m, now)
		return nil, false
	}
	for _, r := range named(id) {
		if held, ok := l.holds.Take(r); ok {
			nak = append(nak, settlement[M]{msg: held, d: bus.Decision{Action: bus.Nak}})
		}
		cancel = true
	}
	return nak, cancel
}

// settle takes the held messages the dispatcher's effects decide, with
// their settlement, committed outcomes first; the named messages the
// dispatcher handed back are naked. A retry's commit wrote its
// row back unrelayed: the relay publishes it again when it is due, whether
// the bus held it (its message is acked) or not (it was handed over, or
// claimed from the store). A pull frontend may ack through another
// instance: the work a claim of named messages took keeps its message
// until the lease ends; past it the message goes back, and its next holder
// learns from the store (tick).
func (l *busLink[M]) settle(e Effects, now time.Time) []settlement[M] {
	var out []settlement[M]
	for _, s := range e.Settled {
		if m, ok := l.holds.Take(s.Outcome.MessageID); ok {
			out = append(out, settlement[M]{msg: m, d: bus.Settled(s.Outcome, s.Completion)})
		}
	}
	for _, u := range e.Unclaimed {
		if m, ok := l.holds.Take(u.ID); ok {
			out = append(out, settlement[M]{msg: m, d: bus.Claimed(false, u.Later, now)})
		}
	}
	for _, id := range e.Refused {
		if m, ok := l.holds.Take(id); ok {
			out = append(out, settlement[M]{msg: m, d: bus.Decision{Action: bus.Nak}})
		}
	}
	if l.pull {
		for _, wk := range e.Claimed {
			l.holds.Lease(wk.MessageID, wk.LeaseUntil)
		}
	}
	return out
}

// handOn ends this incarnation's hold of the bus messages as its worker
// restarts: it returns what its next incarnation holds on (inherit) and
// the messages to nak now.
//
// Naked at once are the messages whose work no incarnation will go on
// with: named and not claimed, or in the claim out (its work, if it took
// any, waits for its lease: an earlier incarnation's claim is not
// delivered). Left held, each came back only after the
// consumer's AckWait (30 s), with nobody touching it. Naked, the bus hands
// it out at once; its next holder (this worker's next incarnation, or
// another instance's) claims its row by id, and the row's lease keeps it
// off until it ends.
//
// Held on are those whose outcome may still be recorded: a delivery under
// way or a verdict to record (outstanding: its verdict comes to the next
// incarnation, which records it, Dispatcher.Carry), a verdict
// of the round out (round, whose result comes to the next incarnation,
// earlier: until its store call's timeout, roundBy, after which it cannot
// come), and a pull frontend's work handed to a poll (its lease is known:
// its consumer may still ack it, here or elsewhere, and it goes back at
// the lease's end as before). The next incarnation settles each once its
// outcome is committed, as this one would have. Naked instead, the message
// would be handed out while its verdict is in flight: its next holder's
// claim would find the row leased and nak it until the lease's end, where
// a verdict still not recorded (a slow store) lets a second delivery
// through, as would a next holder whose clock runs ahead of ours past the
// lease; held and touched, the bus hands it to nobody, and only the
// backstop, BusOverdue past the lease, would claim the row. A retry naked
// before its commit would also chase its row: the commit writes it back
// unrelayed for the relay to publish again when due, and the naked copy
// would be a second message for that row.
func (l *busLink[M]) handOn(now time.Time, outstanding func(string) bool, round *Round, roundBy time.Time) (linkCarry[M], []settlement[M]) {
	inRound := map[string]bool{}
	if round != nil {
		for _, o := range round.Outcomes {
			inRound[o.MessageID] = true
		}
	}
	carry := linkCarry[M]{inherited: map[string]inheritance{}}
	let := l.holds.Release(func(id string, until time.Time) bool {
		in, waits := l.inherited[id]
		switch {
		case !until.IsZero():
			return true // a pull frontend's lease: it goes back at its end (tick)
		case inRound[id]:
			carry.inherited[id] = inheritance{round: round, until: roundBy}
		case outstanding(id):
			carry.inherited[id] = inheritance{}
		case waits && in.round != nil && in.until.After(now):
			carry.inherited[id] = in // an earlier round still has it
		default:
			return false
		}
		return true
	})
	carry.holds, l.holds = l.holds, bus.Holds[M]{Touch: l.holds.Touch}
	carry.out, l.out = l.out, nil
	l.inherited = nil
	return carry, back(let, now)
}

// inherit takes on what the previous incarnation's link handed on
// (handOn), its fetch out included: the restart does not cancel it, and
// what it gets is this incarnation's, as if this one had asked (its room
// was asked with what is under way, which this one inherits). Cancelled,
// the fetch would hand what the server had sent it to this incarnation
// as an earlier one's, to nak and fetch again (with nats.go's Fetch it
// dropped them, and they came back only after the consumer's AckWait).
func (l *busLink[M]) inherit(c linkCarry[M]) {
	if c.inherited == nil {
		return
	}
	l.holds, l.inherited, l.out = c.holds, c.inherited, c.out
}

// release naks the inherited holds (handOn) whose outcome can no longer
// come: this incarnation's dispatcher has nothing under way or to record
// for it (outstanding: it let the message go without an outcome, a
// delivery past its deadline or a late retry it does not record) and the
// earlier round that had it reported (earlierDone) or can no longer. Its
// work waits for its lease, whoever the bus hands the message to next: a
// push lease (2 x SendTimeout + 5 s) ends SendTimeout + 4 s after the
// delivery's deadline (SendTimeout + 1 s, by which its call has returned),
// time for a verdict that came late to be recorded first.
func (l *busLink[M]) release(now time.Time, outstanding func(string) bool) []settlement[M] {
	if len(l.inherited) == 0 {
		return nil
	}
	var let []bus.Let[M]
	for _, id := range slices.Sorted(maps.Keys(l.inherited)) {
		in := l.inherited[id]
		if in.round != nil && !in.until.After(now) {
			in = inheritance{} // its round's result can no longer come
			l.inherited[id] = in
		}
		switch {
		case !l.holds.Held(id):
			delete(l.inherited, id) // settled
		case outstanding(id) || in.round != nil:
		default:
			m, _ := l.holds.Take(id)
			let = append(let, bus.Let[M]{ID: id, Msg: m})
			delete(l.inherited, id)
		}
	}
	return back(let, now)
}

// earlierDone says the round r of an earlier incarnation reported: the
// messages whose outcome it committed were settled with its effects
// (Dispatcher.Done); those it did not are no longer waited for.
func (l *busLink[M]) earlierDone(r *Round) {
	for id, in := range l.inherited {
		if in.round == r {
			l.inherited[id] = inheritance{}
		}
	}
}

// letGo ends the hold of every message as the worker stops (its frontend
// changed or went away, or the node stops): nothing here records an
// outcome any more, so each goes back to the bus now, for another worker
// or instance, rather than after the consumer's AckWait; a pull
// frontend's work handed to a poll goes back as its lease ends (bus.Back),
// when its next holder may claim it. The lease of whatever was under way
// keeps the next holder off until it ends.
func (l *busLink[M]) letGo(now time.Time) []settlement[M] {
	l.inherited = nil
	return back(l.holds.Release(func(string, time.Time) bool { return false }), now)
}

// back is the settlement of messages let go without an outcome.
func back[M any](let []bus.Let[M], now time.Time) []settlement[M] {
	var out []settlement[M]
	for _, x := range let {
		out = append(out, settlement[M]{msg: x.Msg, d: bus.Back(x.Until, now)})
	}
	return out
}

// tick returns the held messages to touch now, and takes those whose lease
// ended here without an outcome, to nak.
func (l *busLink[M]) tick(now time.Time) (touch []M, nak []settlement[M]) {
	touch, expired := l.holds.Due(now)
	for _, m := range expired {
		nak = append(nak, settlement[M]{msg: m, d: bus.Back(time.Time{}, now)})
	}
	return touch, nak
}

// wake is when tick, release or the next fetch is next needed (zero: not
// until something happens): a held message's touch or lease end, the time
// past which an earlier incarnation's round can no longer settle an
// inherited hold (release clears those passed), and, with the bus up, the
// end of the wait after a failed fetch.
func (l *busLink[M]) wake(up bool) time.Time {
	next := l.holds.Wake()
	for _, in := range l.inherited {
		if in.round != nil {
			next = clock.Earliest(next, in.until)
		}
	}
	if l.failed != "" && up {
		next = clock.Earliest(next, l.after)
	}
	return next
}
