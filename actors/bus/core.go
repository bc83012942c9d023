package bus

import (
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// Action is what to do with a bus message.
type Action int

// Actions on a bus message.
const (
	// Keep holds the message: its work is under way here.
	Keep Action = iota
	// Ack removes it from the stream: its work is done (recorded, or
	// gone).
	Ack
	// Nak hands it out again after Decision.Delay.
	Nak
	// Term removes it for good: its work failed for good (recorded as the
	// dead letter first).
	Term
)

func (a Action) String() string {
	switch a {
	case Ack:
		return "acked"
	case Nak:
		return "naked"
	case Term:
		return "termed"
	}
	return "kept"
}

// Decision is what to do with one bus message, and after how long for a
// Nak.
type Decision struct {
	Action Action
	Delay  time.Duration
}

// Claimed decides what a bus message becomes once its row was claimed by
// id: claimed (the worker delivers it: Keep), not claimable before later,
// or without a row (its work is done or gone: Ack; the ledger is the
// barrier, so a redelivery of recorded work is acked without a second
// delivery).
//
// A row that becomes claimable within nakAhead (the end of a lease that
// its holder let go, the due time of a relay whose clock runs ahead) has
// its message naked until then, for its next holder. One that does not is
// leased for longer (a claim from the store: a pull poll that does not
// wait, the backstop; a holder that crashed or restarted mid-claim) or
// due later (a retry written back since the message was published): its
// message is acked. Naked until then, it held one of the consumer's
// MaxAckPending the whole time, and copies of the work that polls without
// waiting take from the store filled them all, leaving the frontend's
// long polls nothing from the bus. The row stays the record: its holder
// records an outcome (a retry is written back unrelayed, for the relay to
// publish again when due), and should its lease end without one the row
// is claimed from the store again (by a poll that does not wait, or by
// the backstop once it is overdue).
func Claimed(claimed bool, later time.Time, now time.Time) Decision {
	switch {
	case claimed:
		return Decision{Action: Keep}
	case later.IsZero(), later.Sub(now) > nakAhead:
		return Decision{Action: Ack}
	}
	return Decision{Action: Nak, Delay: max(later.Sub(now), 0) + nakSlack}
}

// nakAhead is the longest a bus message is naked until its row becomes
// claimable (Claimed): a second covers a handover at a lease's end (Back
// naks at once) with the site's clocks a little apart, and a naked copy
// holds one of the consumer's MaxAckPending for a second at most.
const nakAhead = time.Second

// nakSlack is added to a Nak until a store time: the consumer that gets the
// message again finds the row claimable, also when its clock is a little
// behind the one that wrote the time.
const nakSlack = 50 * time.Millisecond

// Settled decides what a bus message becomes once an outcome of its work
// was committed: a delivery recorded (or found recorded, or gone) is acked;
// a retry is acked too, because its commit wrote the row back unrelayed
// (persistence.Reschedule) and the relay publishes it again when it is
// due — a message naked until then would hold one of the consumer's
// MaxAckPending for the whole backoff, and enough of them would stop the
// frontend's consumer; a failure — the policy's dead letter, recorded in
// the store first — is termed. Only a committed outcome settles a
// message: the store is written before the bus is told.
func Settled(o persistence.Outcome, c persistence.Completion) Decision {
	if c != persistence.Applied {
		// Recorded before (a redelivery), or no work left: nothing to do.
		// A stale outcome (a verdict or deferral of a claim by id, leased
		// under epoch 0 and fenced by its owner, whose row another
		// instance claimed since its lease ended) leaves the row to its
		// newer holder: handed out again, the message finds
		// that holder's lease (Claimed: naked until it ends within a
		// second, acked otherwise, the row the record). So does a pull
		// frontend's verdict naming an older attempt than the one offered
		// since.
		if c == persistence.StaleEpoch || c == persistence.Stale {
			return Decision{Action: Nak}
		}
		return Decision{Action: Ack}
	}
	if o.Result == persistence.ResultFailed {
		return Decision{Action: Term}
	}
	return Decision{Action: Ack}
}

// Back decides what a held message becomes when its worker lets it go
// without an outcome (the worker stops, or the work's lease ended here):
// Nak, so that the bus hands it out again at once rather than after the
// consumer's AckWait; delayed until the end of its work's lease when that
// is known and still ahead (until; zero: unknown), because its next holder
// could not claim the row before: the lease, not the bus, keeps a second
// delivery off while the work may still be under way.
func Back(until, now time.Time) Decision {
	if until.After(now) {
		return Decision{Action: Nak, Delay: until.Sub(now) + nakSlack}
	}
	return Decision{Action: Nak}
}

// Holds are the bus messages a worker holds while their work is under
// way, by message id. It tells when each must be touched (InProgress, so
// that a slow webhook or a pull frontend's lease does not have it handed
// out again) and when a held message whose lease ended without an outcome
// here must go back (a pull frontend acked it through another instance, or
// not at all: the next holder finds out from the store). Not safe for
// concurrent use; M is the message type (the shell's).
type Holds[M any] struct {
	// Touch is how often a held message is touched: well within the
	// consumer's AckWait.
	Touch time.Duration
	m     map[string]*hold[M]
}

type hold[M any] struct {
	msg     M
	touched time.Time
	// until is the end of the work's lease; zero while unknown (not yet
	// claimed, or pushed: its delivery's own deadline settles it).
	until time.Time
}

// Add holds msg for id; false when id is held already (a redelivery of a
// message this worker still holds: the caller acts on the new one).
func (h *Holds[M]) Add(id string, msg M, now time.Time) bool {
	if h.m == nil {
		h.m = map[string]*hold[M]{}
	}
	if _, ok := h.m[id]; ok {
		return false
	}
	h.m[id] = &hold[M]{msg: msg, touched: now}
	return true
}

// Lease records when the work of a held message stops being this worker's
// (a pull frontend's lease): past it the message goes back.
func (h *Holds[M]) Lease(id string, until time.Time) {
	if x, ok := h.m[id]; ok {
		x.until = until
	}
}

// Take stops holding id and returns its message.
func (h *Holds[M]) Take(id string) (M, bool) {
	x, ok := h.m[id]
	if !ok {
		var zero M
		return zero, false
	}
	delete(h.m, id)
	return x.msg, true
}

// Let is a held message a worker lets go (Release), with the end of its
// work's lease here (zero: unknown, see Lease).
type Let[M any] struct {
	ID    string
	Msg   M
	Until time.Time
}

// Release stops holding every message keep says no to, and returns them
// in message id order; keep is told the end of each one's lease (zero:
// unknown).
func (h *Holds[M]) Release(keep func(id string, until time.Time) bool) []Let[M] {
	var out []Let[M]
	for _, id := range slices.Sorted(maps.Keys(h.m)) {
		if x := h.m[id]; !keep(id, x.until) {
			out = append(out, Let[M]{ID: id, Msg: x.msg, Until: x.until})
			delete(h.m, id)
		}
	}
	return out
}

// Leased reports whether id is held with the end of its lease known
// (Lease): past it the message goes back by itself (Due).
func (h *Holds[M]) Leased(id string) bool {
	x, ok := h.m[id]
	return ok && !x.until.IsZero()
}

// Held reports whether id is held.
func (h *Holds[M]) Held(id string) bool {
	_, ok := h.m[id]
	return ok
}

// Len is how many messages are held.
func (h *Holds[M]) Len() int { return len(h.m) }

// Due returns the held messages to touch now, and takes those whose lease
// ended (to Nak at once), both in message id order.
func (h *Holds[M]) Due(now time.Time) (touch, expired []M) {
	for _, id := range slices.Sorted(maps.Keys(h.m)) {
		x := h.m[id]
		switch {
		case !x.until.IsZero() && !x.until.After(now):
			expired = append(expired, x.msg)
			delete(h.m, id)
		case now.Sub(x.touched) >= h.Touch:
			x.touched = now
			touch = append(touch, x.msg)
		}
	}
	return touch, expired
}

// Wake is when Due is next needed (zero when nothing is held).
func (h *Holds[M]) Wake() time.Time {
	var next time.Time
	for _, x := range h.m {
		t := x.touched.Add(h.Touch)
		if !x.until.IsZero() && x.until.Before(t) {
			t = x.until
		}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// Relay is the pure core of the relay: when to take the next batch of
// unrelayed work from the store, and how long to back off after the bus
// or the store failed. The store gives the relay only work that is due;
// work due later (scheduled, or a retry) is taken by the first round once
// it is: the sweep's, or the one at the time Expect was told.
type Relay struct {
	// Batch is the most rows one round publishes.
	Batch int
	// Sweep is how often the relay looks for work without being kicked:
	// work that other instances committed, or left behind when they died.
	Sweep time.Duration
	// RetryMin and RetryMax bound the backoff after a failed round
	// (doubling, jittered into [w/2, w]).
	RetryMin, RetryMax time.Duration

	more     bool
	failures int
	next     time.Time
	// due is when the earliest unrelayed work not yet due falls due (zero:
	// none known), when it comes before the next sweep.
	due time.Time
	// after is where the next take starts (zero: at the first row due).
	after persistence.RelayKey
}

// From is where the next round's take starts (RelayRequest.After).
func (r *Relay) From() persistence.RelayKey { return r.after }

// Took says what a round's take returned: n rows, the last of them last,
// of which the stream did not take refused (they were given back). A round
// that gave rows back has the next take start past them: rows the stream
// refuses (one frontend's, say) would otherwise come first again in every
// round, and a batch of them would hold up every row behind. A take that
// reached the end of the rows due (less than a batch) has the next start
// from the first again, where the rows given back wait their turn.
func (r *Relay) Took(n int, last persistence.RelayKey, refused int) {
	switch {
	case refused > 0:
		r.after = last
	case n < r.Batch:
		r.after = persistence.RelayKey{}
	}
}

// Expect says the earliest unrelayed work falls due at at (zero: none is
// waiting for its time): a round is due then, also before the next sweep,
// so that scheduled work and retries reach the bus when they fall due.
func (r *Relay) Expect(at time.Time) { r.due = at }

// Kick says new work was committed here: look at once.
func (r *Relay) Kick() { r.more = true }

// Due reports whether a round should start now.
func (r *Relay) Due(now time.Time) bool {
	if r.failures > 0 {
		return !now.Before(r.next)
	}
	return r.more || !now.Before(r.next) || (!r.due.IsZero() && !now.Before(r.due))
}

// Done ends a round whose take read the store at now and that published n
// rows (a full batch means more may be waiting); it returns how many
// failures came before (0 on a plain round), so that the shell can log the
// bus's return once. Work Expect named as due by now was the take's.
func (r *Relay) Done(now time.Time, n int) (recovered int) {
	recovered, r.failures = r.failures, 0
	r.more = n >= r.Batch
	r.next = now.Add(r.Sweep)
	if !r.due.After(now) {
		r.due = time.Time{}
	}
	return recovered
}

// Failed ends a round that failed; it returns the wait before the next.
func (r *Relay) Failed(now time.Time, rng *rand.Rand) time.Duration {
	r.failures++
	w := r.RetryMax
	if shift := r.failures - 1; shift < 30 {
		if d := r.RetryMin << shift; d > 0 && d < r.RetryMax {
			w = d
		}
	}
	w = w/2 + time.Duration(rng.Int64N(int64(w/2)+1))
	r.next = now.Add(w)
	return w
}

// Failures is how many rounds in a row failed.
func (r *Relay) Failures() int { return r.failures }

// Wake is when Due next turns true without a kick.
func (r *Relay) Wake() time.Time {
	if r.failures == 0 && !r.due.IsZero() && r.due.Before(r.next) {
		return r.due
	}
	return r.next
}

// Publishes follows the relay's publishes (the intake's rows and the
// rounds'), to log their failures once per change and to call the bus
// degraded after DegradeAfter in a row: a publish the stream took none of
// fails, one it took any of succeeds. Not safe for concurrent use.
type Publishes struct {
	DegradeAfter int

	failures int
	// logged is the error logged last since the last success ("": none).
	logged string
}

// Failed records a publish that failed with error text why; loud says
// whether its caller logs failures (the rounds log their own). It reports
// whether to log it (loud, and an error other than the one logged last
// since a success) and whether the bus is degraded (DegradeAfter failures
// in a row, or more).
func (p *Publishes) Failed(why string, loud bool) (log, degraded bool) {
	p.failures++
	if loud && why != p.logged {
		p.logged, log = why, true
	}
	return log, p.failures >= p.DegradeAfter
}

// Succeeded records a publish the stream took. It reports whether a
// failure was logged since the last success (to log the return once) and
// whether the failures before it had the bus degraded.
func (p *Publishes) Succeeded() (logged, wasDegraded bool) {
	logged, wasDegraded = p.logged != "", p.failures >= p.DegradeAfter
	p.failures, p.logged = 0, ""
	return logged, wasDegraded
}
