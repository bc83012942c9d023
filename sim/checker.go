package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// SubmitOutcome is what a client knows about one submit.
type SubmitOutcome string

const (
	// Accepted: the submit returned success; the message must arrive.
	Accepted SubmitOutcome = "accepted"
	// Maybe: the submit failed in a way that does not say whether the
	// message was stored (a timeout, a crash mid-commit). Its delivery is
	// then not unexpected, and its absence not a loss.
	Maybe SubmitOutcome = "maybe"
	// Rejected: the node refused it before storing anything (no_route,
	// invalid_request, overloaded, node down).
	Rejected SubmitOutcome = "rejected"
)

// AckOutcome is what a frontend knows about its ack of one delivery.
type AckOutcome string

const (
	// Acked: the frontend handed the message over and the node confirmed
	// its ack (after the commit).
	Acked AckOutcome = "acked"
	// AckUnknown: the ack was sent but its answer did not come (the node
	// crashed or timed out): it may or may not be recorded.
	AckUnknown AckOutcome = "unknown"
	// Offered: the frontend was offered the message and did not ack it
	// (a redelivery after a lost lease is legitimate).
	Offered AckOutcome = "offered"
)

// Submit is one client submission.
type Submit struct {
	ID       string
	Node     string // the node the client submitted to (the origin)
	Frontend string // the frontend the destination's route names
	Target   string // the frontend's home node
	Outcome  SubmitOutcome
	Err      string
	// At is when the client called (the run's time, not a node's clock).
	At time.Time
}

// Delivery is one message seen by a frontend.
type Delivery struct {
	ID       string
	Frontend string
	Node     string // the frontend's home node
	Ack      AckOutcome
	// Push: a webhook or actor frontend, handed the message by incarnation
	// By of a node (Acked: it answered delivered and the node was still
	// waiting; AckUnknown: its answer was lost; Offered: it answered retry,
	// or the node stopped waiting before it answered).
	Push bool
	By   string
	// Kind is the frontend's kind (KindPull, KindWebhook, KindActor; ""
	// counts as pull), for the report.
	Kind string
}

// History is everything a run observed, the input of Check.
type History struct {
	Submits    []Submit
	Deliveries []Delivery
	// Origin is each submitted message's final state at its origin after
	// quiescence ("" when the origin has no such message), Reason its
	// failure reason there; ReadAt is when they were read (the run's time).
	Origin map[string]messages.State
	Reason map[string]string
	ReadAt time.Time
	// Waits are each node's waits before it fails a message.
	Waits map[string]Waits
	// Dest is each submitted message as its destination (the home node
	// of its route's frontend, the origin itself for a local frontend)
	// holds it after quiescence, State "" when it holds none; a message
	// whose destination was not read has no entry.
	Dest map[string]Stored
	// Clocks are the moves of each node's clock (skews and jumps), in
	// the order they were made; a node's offset from the run's time is 0
	// before its first.
	Clocks map[string][]ClockMove
	// Reported says, for each message of a remote frontend, whether its
	// origin's store applied its destination's report that it was
	// delivered (the only way such a message becomes delivered there); nil
	// when the run did not record reports (then not judged).
	Reported map[string]bool
}

// ClockMove is a node's clock set to read the run's time plus Offset, at
// At (the run's time).
type ClockMove struct {
	At     time.Time
	Offset time.Duration
}

// Stored is a message as a node's store holds it.
type Stored struct {
	State  messages.State
	Reason string
	// Attempts are the delivery attempts it spent there, Detail the
	// detail of its last transition.
	Attempts int
	Detail   string
}

// Waits are how long a node lets a message wait before it fails it.
type Waits struct {
	// Forward: --forward-max-retries x --forward-retry-interval in
	// forward_queued, then forward_failed (forward_timeout).
	Forward time.Duration
	// Validity: --message-validity from its submission, then failed
	// (expired).
	Validity time.Duration
	// Attempts: --delivery-max-attempts, then failed (max_attempts).
	Attempts int
}

// Result is the checker's verdict. Lost, Duplicated, Unexpected,
// Misrouted and Disagreeing are violations; each counts message ids.
type Result struct {
	Accepted, Delivered                                  int
	Lost, Duplicated, Unexpected, Misrouted, Disagreeing int
	// Redelivered counts messages a push frontend was handed again, with
	// any answer, by the incarnation that had its answer "delivered"
	// (appended to the contract line as redelivered=n).
	Redelivered int
	// Stuck counts messages not final (pending, retry, forwarded,
	// forward_queued) at their origin, or at their destination, after the
	// run: every message a node holds must have reached delivered, failed
	// or forward_failed once the faults are healed and the work is done
	// (appended as stuck=n).
	Stuck int
	// Failed counts the accepted messages that ended failed or
	// forward_failed at their origin (appended as failed=n; not a
	// violation by itself), Unjustified the messages whose failure, at
	// their origin or their destination, has no cause the run can have
	// given it (appended as unjustified=n): the sim's frontends never
	// refuse a message and its peers never refuse a forward for good, so
	// a message may only fail for its attempts spent (max_attempts, with
	// that many attempts at its destination), or by waiting too long
	// (forward_timeout, expired: failed_early judges the wait).
	Failed      int
	Unjustified int
	// FailedEarly counts messages that ended forward_failed
	// (forward_timeout) or failed (expired) before they could have waited
	// their node's wait, by the run's time and what their nodes' clocks
	// were moved forward (appended as failed_early=n).
	FailedEarly int
	// Details explain the violations, one line each, sorted.
	Details []string
}

// OK reports whether the run holds no violation.
func (r Result) OK() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.Unexpected == 0 && r.Misrouted == 0 && r.Disagreeing == 0 && r.Redelivered == 0 &&
		r.FailedEarly == 0 && r.Stuck == 0 && r.Unjustified == 0
}

// Line is the start of the report's last line (docs/sim.md, the report):
// the verdict's fields that came first; Report.Line appends the fault
// counts, then the fields added later (Tail).
func (r Result) Line(seed int64, nodes int) string {
	return fmt.Sprintf("sim: seed=%d nodes=%d accepted=%d delivered=%d lost=%d duplicated=%d unexpected=%d misrouted=%d disagreeing=%d redelivered=%d failed_early=%d",
		seed, nodes, r.Accepted, r.Delivered, r.Lost, r.Duplicated, r.Unexpected, r.Misrouted, r.Disagreeing, r.Redelivered, r.FailedEarly)
}

// Tail is the verdict's fields added to the line after the fault counts.
func (r Result) Tail() string {
	return fmt.Sprintf("stuck=%d unjustified=%d failed=%d", r.Stuck, r.Unjustified, r.Failed)
}

// Check judges a history. It is pure: the same history, the same result.
//
//   - lost: accepted, never acked by any frontend (nor possibly acked), and
//     not in a legitimate final failure state at its origin (failed,
//     forward_failed); or accepted, absent at its origin, and not
//     delivered (its acks unknown, its destination does not say it was).
//   - duplicated: handed to a pull frontend again, acked or not, after a
//     pull frontend's ack of it was confirmed (a frontend may be offered
//     an id again while its ack was not confirmed).
//   - redelivered: handed to a push frontend (webhook, actor) again, with
//     any answer, by the incarnation that had already had its "delivered"
//     answer (a new incarnation may hand it again: at least once across a
//     crash).
//   - unexpected: seen by a frontend but never submitted (or refused).
//   - misrouted: seen by a frontend other than its route's.
//   - disagreeing: acked by a frontend while its origin's final state is
//     not delivered (or the origin has no such message, even for a maybe
//     accepted submit) or its destination's is not, or delivered at its
//     origin or its destination while no frontend acked it; when its
//     hand-overs' acks are only unknown, the destination's store decides
//     whether it was delivered, and the origin must say the same. A
//     message of a remote frontend delivered at its origin must have
//     become so by its destination's report (History.Reported): an origin
//     that calls it delivered on its own (when the peer accepted the
//     forward, say) disagrees with its destination whatever the end.
//   - stuck: not final (pending, retry, forwarded, forward_queued) at its
//     origin or at its destination after the run, whatever its submit's
//     answer (a maybe accepted submit its origin stored counts) and its
//     acks.
//   - unjustified: failed or forward_failed, at its origin or at its
//     destination, for a reason no fault of the run gives: rejected (the
//     sim's frontends answer delivered or retry, never a refusal),
//     peer_rejected or peer_unsupported (its peers accept every forward
//     or refuse it for now), max_attempts with fewer attempts at its
//     destination than that node's --delivery-max-attempts, a reason
//     with the other failed state (forward_timeout is forward_failed's,
//     expired failed's), or none.
//   - failed_early: forward_failed for forward_timeout at its origin
//     although, from its submit to the reading of its state, the origin's
//     clock cannot have advanced by the origin's forward wait (the run's
//     time between them plus how far that clock was moved forward
//     between them); or failed as expired although neither the origin's
//     clock nor the destination's can have read its validity past the
//     origin's reading at the submit. A clock stepped forward may fail a
//     message early by its own reading; a node failing one by another
//     node's clock, or counting a wait wrong, cannot pass. Moves before
//     the submit do not count: they moved the start of the wait too.
//
// "Again" and "after" follow the order in which the deliveries were
// recorded.
func Check(h History) Result {
	var r Result
	sub := map[string]Submit{}
	for _, s := range h.Submits {
		prev, seen := sub[s.ID]
		if !seen || rank(s.Outcome) > rank(prev.Outcome) {
			sub[s.ID] = s
		}
	}
	acked := map[string]int{} // acks of any frontend
	// pulled counts the pull hand-overs of a message after a confirmed
	// pull ack of it, pushed the push hand-overs of a message by an
	// incarnation after its confirmed "delivered" answer.
	pulled, pullAcked := map[string]int{}, map[string]bool{}
	pushed, pushAcked := map[[2]string]int{}, map[[2]string]bool{}
	unknown := map[string]int{} // hand-overs whose ack's answer did not come
	offered := map[string]int{}
	unexpected := map[string]string{}
	misrouted := map[string]string{}
	for _, d := range h.Deliveries {
		s, ok := sub[d.ID]
		switch {
		case !ok || s.Outcome == Rejected:
			unexpected[d.ID] = fmt.Sprintf("unexpected: %s seen at %s/%s but never accepted", d.ID, d.Node, d.Frontend)
			continue
		case d.Frontend != s.Frontend:
			misrouted[d.ID] = fmt.Sprintf("misrouted: %s seen at %s/%s, its route names %s", d.ID, d.Node, d.Frontend, s.Frontend)
		}
		by := [2]string{d.ID, d.By}
		switch {
		case d.Push && pushAcked[by]:
			pushed[by]++
		case !d.Push && pullAcked[d.ID]:
			pulled[d.ID]++
		}
		switch d.Ack {
		case Acked:
			acked[d.ID]++
			if d.Push {
				pushAcked[by] = true
			} else {
				pullAcked[d.ID] = true
			}
		case AckUnknown:
			unknown[d.ID]++
		case Offered:
			offered[d.ID]++
		}
	}
	var details []string
	for _, line := range unexpected {
		details = append(details, line)
	}
	for _, line := range misrouted {
		details = append(details, line)
	}
	r.Unexpected, r.Misrouted = len(unexpected), len(misrouted)
	for id, s := range sub {
		if s.Outcome == Rejected {
			continue
		}
		if s.Outcome == Accepted {
			r.Accepted++
		}
		n := acked[id]
		origin := h.Origin[id]
		dest, atDest := h.Dest[id]
		// Delivered: a frontend's ack confirmed it, or, its acks unknown,
		// its destination's store says so.
		delivered := n > 0 || unknown[id] > 0 && atDest && dest.State == messages.StateDelivered
		if s.Outcome == Accepted && delivered {
			r.Delivered++
		}
		if pulled[id] > 0 {
			r.Duplicated++
			details = append(details, fmt.Sprintf("duplicated: %s handed to a pull frontend again %d time(s) after its ack was confirmed", id, pulled[id]))
		}
		failed := origin == messages.StateFailed || origin == messages.StateForwardFailed
		if s.Outcome == Accepted && failed {
			r.Failed++
		}
		if line := h.unjustified(s); line != "" {
			r.Unjustified++
			details = append(details, line)
		}
		switch {
		case s.Outcome == Accepted && !delivered && (origin == "" || unknown[id] == 0 && !failed):
			r.Lost++
			details = append(details, fmt.Sprintf("lost: %s accepted at %s for %s, never delivered, %s at its origin", id, s.Node, s.Frontend, shown(origin)))
		}
		if line := h.disagreement(s, n, unknown[id]); line != "" {
			r.Disagreeing++
			details = append(details, line)
		}
		seen := fmt.Sprintf("%s; hand-overs: %d acked, %d ack unknown, %d offered", outcomeText(s.Outcome), n, unknown[id], offered[id])
		switch {
		case origin != "" && !origin.Final():
			r.Stuck++
			details = append(details, fmt.Sprintf("stuck: %s %s at its origin %s after the run (%s%s)", id, origin, s.Node, seen, h.destText(s)))
		case atDest && dest.State != "" && !dest.State.Final():
			r.Stuck++
			details = append(details, fmt.Sprintf("stuck: %s %s at its destination %s after the run (%s at its origin %s; %s%s)",
				id, dest.State, s.Target, shown(origin), s.Node, seen, storedText(dest)))
		}
		if line := h.failedEarly(s, origin); line != "" {
			r.FailedEarly++
			details = append(details, line)
		}
	}
	redelivered := map[string]bool{}
	for k, n := range pushed {
		if n > 0 && !redelivered[k[0]] {
			redelivered[k[0]] = true
			r.Redelivered++
			details = append(details, fmt.Sprintf("redelivered: %s handed to its push frontend again %d time(s) by %s after it answered delivered", k[0], n, k[1]))
		}
	}
	sort.Strings(details)
	r.Details = details
	return r
}

// disagreement explains how the frontends (n acks confirmed, unknown
// acks whose answer did not come), s's origin and its destination
// disagree on whether s's message was delivered ("" when they agree).
func (h History) disagreement(s Submit, n, unknown int) string {
	origin := h.Origin[s.ID]
	dest, atDest := h.Dest[s.ID]
	delivered := messages.StateDelivered
	switch {
	case n > 0 && origin != delivered:
		return fmt.Sprintf("disagreeing: %s acked at %s but %s at its origin %s", s.ID, s.Frontend, shown(origin), s.Node)
	case n > 0 && atDest && dest.State != delivered:
		return fmt.Sprintf("disagreeing: %s acked at %s but %s at its destination %s", s.ID, s.Frontend, shown(dest.State), s.Target)
	case n == 0 && unknown == 0 && origin == delivered:
		return fmt.Sprintf("disagreeing: %s delivered at its origin %s but no frontend acked it", s.ID, s.Node)
	case n == 0 && unknown == 0 && atDest && dest.State == delivered:
		return fmt.Sprintf("disagreeing: %s delivered at its destination %s but no frontend acked it", s.ID, s.Target)
	case n == 0 && unknown > 0 && atDest && (dest.State == delivered) != (origin == delivered):
		return fmt.Sprintf("disagreeing: %s's ack at %s unknown: %s at its destination %s but %s at its origin %s",
			s.ID, s.Frontend, shown(dest.State), s.Target, shown(origin), s.Node)
	case origin == delivered && s.Target != s.Node && h.Reported != nil && !h.Reported[s.ID]:
		return fmt.Sprintf("disagreeing: %s delivered at its origin %s, which applied no report of its delivery from its destination %s",
			s.ID, s.Node, s.Target)
	}
	return ""
}

// unjustified explains why s's message failed, at its origin or at its
// destination, for no cause the run can have given it ("" when it did
// not fail, or each failure has one).
func (h History) unjustified(s Submit) string {
	origin := Stored{State: h.Origin[s.ID], Reason: h.Reason[s.ID]}
	if why := h.failureUnjustified(s, origin); why != "" {
		return fmt.Sprintf("unjustified: %s %s (%s) at its origin %s: %s%s", s.ID, origin.State, origin.Reason, s.Node, why, h.destText(s))
	}
	if dest, ok := h.Dest[s.ID]; ok && s.Target != s.Node {
		if why := h.failureUnjustified(s, dest); why != "" {
			return fmt.Sprintf("unjustified: %s %s (%s) at its destination %s: %s (%s at its origin %s)%s",
				s.ID, dest.State, dest.Reason, s.Target, why, shown(origin.State), s.Node, storedText(dest))
		}
	}
	return ""
}

// failureUnjustified says why m, s's message as a node holds it, has
// failed for no cause the run can have given it ("" when it has not
// failed, or has such a cause).
func (h History) failureUnjustified(s Submit, m Stored) string {
	if m.State != messages.StateFailed && m.State != messages.StateForwardFailed {
		return ""
	}
	reason, _, _ := strings.Cut(m.Reason, ":") // "rejected: HTTP 400 ..."
	switch reason {
	case messages.ReasonForwardTimeout, messages.ReasonExpired:
		if (reason == messages.ReasonForwardTimeout) != (m.State == messages.StateForwardFailed) {
			return "that reason is not one of that state"
		}
		return "" // failed_early judges the wait
	case messages.ReasonMaxAttempts:
		if m.State != messages.StateFailed {
			return "that reason is not one of that state"
		}
		dest, ok := h.Dest[s.ID]
		max := h.Waits[s.Target].Attempts
		switch {
		case !ok:
			return "its attempts at its destination are not known"
		case max < 1 || dest.Attempts < max:
			return fmt.Sprintf("%d attempts at its destination %s, whose --delivery-max-attempts is %d", dest.Attempts, s.Target, max)
		}
		return ""
	case messages.ReasonRejected:
		return "the sim's frontends never refuse a message"
	case messages.ReasonPeerRejected, messages.ReasonPeerUnsupported:
		return "the sim's peers never refuse a forward for good"
	}
	return "no fault of the run gives that reason"
}

// shown is a state for a detail line ("absent" for none).
func shown(s messages.State) string {
	if s == "" {
		return "absent"
	}
	return string(s)
}

// outcomeText is a submit's outcome for a detail line.
func outcomeText(o SubmitOutcome) string {
	if o == Maybe {
		return "maybe accepted"
	}
	return string(o)
}

// storedText is what a stored message shows of its life, for a detail
// line.
func storedText(m Stored) string {
	return fmt.Sprintf("; %d attempts, reason %q, last: %q", m.Attempts, m.Reason, m.Detail)
}

// destText is s's message at its destination, for a detail line ("" when
// it was not read).
func (h History) destText(s Submit) string {
	dest, ok := h.Dest[s.ID]
	if !ok {
		return ""
	}
	if s.Target == s.Node {
		return storedText(dest)
	}
	return fmt.Sprintf("; %s at its destination %s%s", shown(dest.State), s.Target, storedText(dest))
}

// failedEarly explains why s's message failed sooner than its nodes'
// clocks allow ("" when it did not, or the history has no times).
func (h History) failedEarly(s Submit, state messages.State) string {
	if h.ReadAt.IsZero() || s.At.IsZero() {
		return ""
	}
	passed := h.ReadAt.Sub(s.At)
	reason := h.Reason[s.ID]
	switch {
	case state == messages.StateForwardFailed && reason == messages.ReasonForwardTimeout:
		wait, ahead := h.Waits[s.Node].Forward, h.drift(s.Node, s.Node, s.At, h.ReadAt)
		if passed+ahead < wait {
			return fmt.Sprintf("failed_early: %s forward_failed (%s) at %s %v after its submit (clock moved forward %v), its wait is %v",
				s.ID, reason, s.Node, passed.Round(time.Millisecond), ahead, wait)
		}
	case state == messages.StateFailed && reason == messages.ReasonExpired:
		// The origin by its own clock, or the destination by its clock
		// against the origin's reading at the submit (or its own at the
		// receipt).
		own, wait := h.drift(s.Node, s.Node, s.At, h.ReadAt), h.Waits[s.Node].Validity
		other := max(h.drift(s.Target, s.Node, s.At, h.ReadAt), h.drift(s.Target, s.Target, s.At, h.ReadAt))
		if passed+own < wait && (s.Target == "" || passed+other < h.Waits[s.Target].Validity) {
			return fmt.Sprintf("failed_early: %s failed (%s) at %s %v after its submit (clocks moved forward %v), its validity is %v",
				s.ID, reason, s.Node, passed.Round(time.Millisecond), max(own, other), wait)
		}
	}
	return ""
}

// drift bounds how far node x's clock can have read ahead of node o's
// beyond the run's time between two readings made in [from, to], o's
// first: the largest offset of x at an instant less the smallest offset
// of o at that instant or before. For x == o it is how far the clock was
// moved forward between them (what a step back then a step forward let
// it gain included); 0 when it was not. Moves at from count both ways (a
// move at the submit's instant may have come before or after it).
func (h History) drift(x, o string, from, to time.Time) time.Duration {
	type move struct {
		ClockMove
		x bool // a move of x's clock (else of o's; both when x == o)
	}
	var moves []move
	offX, offO := time.Duration(0), time.Duration(0)
	for _, m := range h.Clocks[x] {
		if m.At.Before(from) {
			offX = m.Offset
		} else if !m.At.After(to) {
			moves = append(moves, move{m, true})
		}
	}
	if x == o {
		offO = offX
	} else {
		for _, m := range h.Clocks[o] {
			if m.At.Before(from) {
				offO = m.Offset
			} else if !m.At.After(to) {
				moves = append(moves, move{m, false})
			}
		}
	}
	sort.SliceStable(moves, func(i, j int) bool { return moves[i].At.Before(moves[j].At) })
	low := offO
	most := offX - low
	for _, m := range moves {
		switch {
		case x == o:
			offX, offO = m.Offset, m.Offset
		case m.x:
			offX = m.Offset
		default:
			offO = m.Offset
		}
		low = min(low, offO)
		most = max(most, offX-low)
	}
	return max(most, 0)
}

func rank(o SubmitOutcome) int {
	switch o {
	case Accepted:
		return 2
	case Maybe:
		return 1
	}
	return 0
}

// digest is a short hash of h's submits and deliveries in the order
// they were recorded, with their outcomes.
func (h History) digest() string {
	d := sha256.New()
	for _, s := range h.Submits {
		fmt.Fprintf(d, "s %s %s %s %s\n", s.ID, s.Node, s.Frontend, s.Outcome)
	}
	for _, x := range h.Deliveries {
		fmt.Fprintf(d, "d %s %s %v %s\n", x.ID, x.Frontend, x.Ack, x.By)
	}
	return hex.EncodeToString(d.Sum(nil))[:12]
}
