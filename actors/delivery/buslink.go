package delivery

import (
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
// incarnation of the worker: one that restarted while its fetch ran
// (cancelled by the restart), whose messages and end come to the next
// incarnation (same PID). Taken for its own, its end ended the fetch out,
// so a second fetch went out beside it (the bus asked for twice the
// room), and its messages were named beyond the room the fetch out was
// asked with (a push frontend's MaxInFlight overrun).
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

// tick returns the held messages to touch now, and takes those whose lease
// ended here without an outcome, to nak.
func (l *busLink[M]) tick(now time.Time) (touch []M, nak []settlement[M]) {
	touch, expired := l.holds.Due(now)
	for _, m := range expired {
		nak = append(nak, settlement[M]{msg: m, d: bus.Decision{Action: bus.Nak}})
	}
	return touch, nak
}

// wake is when tick or the next fetch is next needed (zero: not until
// something happens): a held message's touch or lease end, and, with the
// bus up, the end of the wait after a failed fetch.
func (l *busLink[M]) wake(up bool) time.Time {
	next := l.holds.Wake()
	if l.failed != "" && up {
		next = clock.Earliest(next, l.after)
	}
	return next
}
