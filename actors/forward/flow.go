package forward

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/transport"
)

// Flow is the pure state machine of one peer's forward queue: its two
// lanes (forwards, and the delivery_status reports owed to the peer), the
// results of requests waiting to be recorded, and the store round that
// records them and claims the next batches, one Write at a time. The queue
// feeds it kicks, the link and requests' results; runs the round Next asks
// for off the actor's goroutine; and sends the batches Done returns. Not
// safe for concurrent use.
type Flow struct {
	peer, owner string
	policy      Policy
	lanes       map[persistence.WorkKind]*Lane
	// outcomes and updates wait to be recorded; msgs holds what their
	// state changes are published with.
	outcomes []persistence.Outcome
	updates  []persistence.StatusUpdate
	msgs     map[string]messages.Message
	round    *FlowRound
	// handed are forwards handed over by the intake, waiting for room in
	// the forward lane.
	handed []persistence.Work
	// batch is each lane's batch now (Batch).
	batch map[persistence.WorkKind]int
}

// kinds is the order lanes are served in.
var kinds = []persistence.WorkKind{persistence.WorkStatus, persistence.WorkForward}

// FlowRound is one store round: results to record and claims to make, in
// one Write. Claims[i] is for lane Kinds[i], Slots[i] requests' worth.
type FlowRound struct {
	Outcomes []persistence.Outcome
	Updates  []persistence.StatusUpdate
	Claims   []persistence.ClaimRequest
	Kinds    []persistence.WorkKind
	Slots    []int
	kicks    []int // each lane's Kicks() when the claim began
	batches  []int // each lane's Batch when the claim began
	msgs     map[string]messages.Message
}

// Batch is a request to send: work of one kind, claimed for the peer.
type Batch struct {
	Kind persistence.WorkKind
	Work []persistence.Work
	// cut is the lane's Batch when the request was cut (resize).
	cut int
}

// NewFlow returns the flow of peer's queue, both lanes closed.
func NewFlow(peer, owner string, policy Policy) *Flow {
	return &Flow{peer: peer, owner: owner, policy: policy, msgs: map[string]messages.Message{},
		lanes: map[persistence.WorkKind]*Lane{
			persistence.WorkForward: NewLane(policy.InFlight),
			persistence.WorkStatus:  NewLane(policy.InFlight),
		},
		batch: map[persistence.WorkKind]int{persistence.WorkForward: policy.Batch, persistence.WorkStatus: policy.Batch}}
}

// Lane is the lane of kind.
func (f *Flow) Lane(k persistence.WorkKind) *Lane { return f.lanes[k] }

// Batch is the most work of kind one request carries now: the policy's
// Batch, halved (down to 1) by a request of that kind that timed out and
// doubled back (up to Batch) by each that succeeded, so that a peer or
// a link too slow for a full batch within the timeout still gets the work
// a smaller batch at a time instead of the same batch timing out for ever.
func (f *Flow) Batch(k persistence.WorkKind) int { return f.batch[k] }

// resize adapts the batch of kind k to the result of request b: half its
// size at most after a timeout (requests of the same size in flight
// together, timing out together, halve it once), twice as large after a
// success of a request cut at the batch as it is now. A success of one cut
// at another batch says nothing new: one cut before a halving was in
// flight with the request that timed out (it would undo the halving, and
// the next full batch would time out again), one cut before a doubling is
// smaller than the batch already is. A busy peer or a broken link says
// nothing of the size.
func (f *Flow) resize(k persistence.WorkKind, b Batch, err error) {
	switch {
	case err == nil && b.cut == f.batch[k]:
		f.batch[k] = min(f.policy.Batch, 2*f.batch[k])
	case errors.Is(err, context.DeadlineExceeded):
		f.batch[k] = min(f.batch[k], max(1, len(b.Work)/2))
	}
}

// SetHealthy opens the lanes (the peer is healthy) or closes them. A
// closed lane opens whether a failed request closed it or the peer was not
// healthy; an open lane stays as it is.
func (f *Flow) SetHealthy(healthy bool) {
	for _, k := range kinds {
		if l := f.lanes[k]; !healthy || !l.Open() {
			l.SetOpen(healthy)
		}
	}
}

// SetLink opens and closes the lanes as the peer actor's link says
// (SetHealthy), but keeps the forward lane closed for a peer gone from
// discovery: only the reports owed to it go.
func (f *Flow) SetLink(link messages.PeerLink) {
	f.SetHealthy(link.Healthy)
	if link.Gone {
		f.lanes[persistence.WorkForward].SetOpen(false)
	}
}

// Tick kicks every lane: work may be due that nothing kicked (a retry
// come due, or work another instance of the site committed).
func (f *Flow) Tick() {
	for _, k := range kinds {
		f.lanes[k].Kick()
	}
}

// Next returns the round to run now, if any: every result waiting to be
// recorded, and a claim for each lane with room (one claim of Batch rows
// for each request it may start). Only one round is out at a time.
func (f *Flow) Next(now time.Time, lease time.Duration) (*FlowRound, bool) {
	if f.round != nil {
		return nil, false
	}
	r := &FlowRound{Outcomes: f.outcomes, Updates: f.updates, msgs: f.msgs}
	f.outcomes, f.updates, f.msgs = nil, nil, map[string]messages.Message{}
	for _, k := range kinds {
		if n := f.lanes[k].Claims(); n > 0 {
			r.Claims = append(r.Claims, persistence.ClaimRequest{Kind: k, Target: f.peer, Owner: f.owner,
				Limit: n * f.batch[k], Now: now, Lease: lease})
			r.Kinds = append(r.Kinds, k)
			r.Slots = append(r.Slots, n)
			r.kicks = append(r.kicks, f.lanes[k].Kicks())
			r.batches = append(r.batches, f.batch[k])
		}
	}
	if len(r.Claims)+len(r.Outcomes)+len(r.Updates) == 0 {
		return nil, false
	}
	f.round = r
	return r, true
}

// Done ends the round in flight. claims[i] is what r.Claims[i] took (nil
// when the ring gave this instance none of the ring, or refused it: the lane
// claims nothing until kicked). It returns the batches to send and the
// state changes the recorded results made. A round that failed records
// nothing: the leases of its work run out and the work is claimed again
// (forwards are idempotent at the peer, reports at the origin); its claims
// took nothing.
func (f *Flow) Done(now time.Time, r *FlowRound, w persistence.Written, claims []*persistence.Claim, err error) ([]Batch, []messages.StateChanged) {
	f.round = nil
	if err != nil {
		// The claim did not happen, but asking again at once would spin
		// while the store keeps failing (a full disk answers at once):
		// the lanes wait for the next kick (the queue's tick every retry
		// interval, or new work).
		for _, k := range r.Kinds {
			f.lanes[k].Wait()
		}
		return nil, nil
	}
	changes := r.Changes(now, f.peer, w)
	var sends []Batch
	for i, k := range r.Kinds {
		lane := f.lanes[k]
		var work []persistence.Work
		if claims[i] != nil {
			work = claims[i].Work
		}
		for s := 0; s < r.Slots[i]; s++ {
			n := min(len(work), r.batches[i])
			if !lane.Claimed(n, r.batches[i], r.kicks[i]) {
				break
			}
			send := f.sendable(now, work[:n:n])
			work = work[n:]
			if len(send) == 0 {
				lane.Done(true) // nothing to send: the slot is free again
				continue
			}
			sends = append(sends, Batch{Kind: k, Work: send, cut: r.batches[i]})
		}
	}
	return sends, changes
}

// sendable returns the claimed work to send: unexpired forwards, and
// reports of messages final here. A status row of a message that is not
// final (a row left from before a resubmit, or one the message's resubmit
// raced) reports nothing yet: a report tells the origin a final outcome,
// and the message has none now. It waits a retry interval (recorded with
// the next round); the message's next final outcome replaces it.
func (f *Flow) sendable(now time.Time, work []persistence.Work) []persistence.Work {
	work = f.unexpired(now, work)
	final := func(w persistence.Work) bool { return w.Kind != persistence.WorkStatus || w.Message.State.Final() }
	if !slices.ContainsFunc(work, func(w persistence.Work) bool { return !final(w) }) {
		return work
	}
	var send []persistence.Work
	for _, w := range work {
		if final(w) {
			send = append(send, w)
			continue
		}
		f.msgs[w.MessageID] = w.Message
		f.outcomes = append(f.outcomes, f.fenced(persistence.Outcome{Kind: persistence.WorkStatus, Target: f.peer,
			MessageID: w.MessageID, Result: persistence.ResultRetry, RetryAt: now.Add(f.policy.RetryInterval),
			Detail: fmt.Sprintf("not final here (%s): nothing to report yet", w.Message.State)}, w))
	}
	return send
}

// unexpired returns the claimed work to send: a forward of a message
// forward_queued longer than the policy's MaxWait is not sent again but
// failed (forward_timeout, recorded with the next round), as the janitor's
// sweep would fail it. The sweep comes up to a retry interval late and
// skips work leased to a request, so without this a forward could leave
// after the wait that the redelivery horizon (how long a peer keeps what
// it received) counts on, and be delivered twice.
func (f *Flow) unexpired(now time.Time, work []persistence.Work) []persistence.Work {
	wait := f.policy.MaxWait()
	if wait <= 0 {
		return work
	}
	cutoff := persistence.Normalize(now.Add(-wait))
	expired := func(w persistence.Work) bool {
		m := w.Message
		return w.Kind == persistence.WorkForward && m.State == messages.StateForwardQueued && m.QueuedAt != nil && m.QueuedAt.Before(cutoff)
	}
	if !slices.ContainsFunc(work, expired) {
		return work
	}
	var send []persistence.Work
	for _, w := range work {
		if !expired(w) {
			send = append(send, w)
			continue
		}
		m := w.Message
		f.msgs[w.MessageID] = m
		f.outcomes = append(f.outcomes, f.fenced(persistence.Outcome{Kind: persistence.WorkForward, Target: f.peer,
			MessageID: w.MessageID, Result: persistence.ResultFailed, Reason: messages.ReasonForwardTimeout,
			Detail: persistence.ForwardTimeoutDetail}, w))
	}
	return send
}

// Offer is how many forwards the queue can send at once now (room in the
// open forward lane, Batch a request, less what was handed over and waits
// for room), for the handover board: none while work may wait in the store
// (new work must not overtake it) or a claim is out.
func (f *Flow) Offer() int {
	l := f.lanes[persistence.WorkForward]
	if !l.Open() || !l.Drained() || (f.round != nil && len(f.round.Claims) > 0) {
		return 0
	}
	return max(max(f.policy.InFlight-l.InFlight(), 0)*f.batch[persistence.WorkForward]-len(f.handed), 0)
}

// Handover takes forwards already leased to this queue (handed over by the
// intake's commit); they go out with HandedOut.
func (f *Flow) Handover(work []persistence.Work) { f.handed = append(f.handed, work...) }

// HandedOut returns the batches of handed-over forwards to send now: while
// the forward lane has room, Batch(forward) at a time, so that what came
// in several small commits while requests were out leaves in one request.
// A lane that closed meanwhile sends them anyway (they are leased to this
// queue; its request fails like the others and records their retry).
func (f *Flow) HandedOut() []Batch {
	var out []Batch
	l := f.lanes[persistence.WorkForward]
	for len(f.handed) > 0 && (l.InFlight() < f.policy.InFlight || !l.Open()) {
		n := min(len(f.handed), f.batch[persistence.WorkForward])
		l.Took()
		out = append(out, Batch{Kind: persistence.WorkForward, Work: f.handed[:n:n], cut: f.batch[persistence.WorkForward]})
		f.handed = f.handed[n:]
	}
	return out
}

// Sent takes a request's result (the call's: forward or status holds the
// peer's answers, all of them when err is nil, else those of the requests
// that completed, see forwardAnswered): the lane learns whether the link
// works (closed reports whether this request closed it: one failed check
// per broken link), the lane's Batch whether it was too large, and the
// outcomes and status updates to record are queued: those of the answers,
// and for the rest of the work a retry. A peer that sheds load or has no
// room (busy: transport.Busy, a 429 or a 507) is up: the link stays open,
// and its work waits a retry interval, or the answer's Retry-After when
// that is longer.
func (f *Flow) Sent(now time.Time, b Batch, forward []messages.ForwardResult, status []messages.StatusReply, err error) (closed bool) {
	busy := transport.KindOf(err) == transport.Busy
	closed = f.lanes[b.Kind].Done(err == nil || busy)
	f.resize(b.Kind, b, err)
	var rest []persistence.Work
	for i, w := range b.Work {
		f.msgs[w.MessageID] = w.Message
		switch {
		case b.Kind == persistence.WorkForward && forwardAnswered(forward, i, err):
			v := f.policy.Judge(now, f.peer, w, forward[i])
			if v.Status != nil {
				f.updates = append(f.updates, *v.Status)
			} else {
				f.outcomes = append(f.outcomes, f.fenced(*v.Outcome, w))
			}
		case b.Kind == persistence.WorkStatus && statusAnswered(status, i, err):
			// Every answer is final for the report: applied, recorded
			// before, or unknown to the origin (nothing more we can tell it).
			f.outcomes = append(f.outcomes, f.fenced(persistence.Outcome{Kind: persistence.WorkStatus, Target: f.peer,
				MessageID: w.MessageID, Result: persistence.ResultDelivered, Detail: "reported to " + f.peer}, w))
		default:
			rest = append(rest, w)
		}
	}
	if len(rest) == 0 {
		return closed
	}
	for _, o := range f.Unsent(now, rest, err) {
		if busy {
			o.RetryAt = now.Add(max(f.policy.RetryInterval, transport.RetryAfterOf(err)))
			o.Detail = fmt.Sprintf("%s is busy: %v", f.peer, err)
		}
		f.outcomes = append(f.outcomes, o)
	}
	return closed
}

// forwardAnswered reports whether a forward call that ended with err
// answered its item i: every item when it succeeded; when it failed,
// those of the requests that completed, whose results carry their ID
// (the others' is empty, or rs is nil: transport.Peer).
func forwardAnswered(rs []messages.ForwardResult, i int, err error) bool {
	return err == nil || (i < len(rs) && rs[i].ID != "")
}

// statusAnswered is forwardAnswered for a delivery_status call.
func statusAnswered(rs []messages.StatusReply, i int, err error) bool {
	return err == nil || (i < len(rs) && rs[i].ID != "")
}

// Unsent is what records work claimed and not sent, or sent without an
// answer (why): due again at once, unleased (Policy.Unsent), each
// outcome fenced by its claim. It reads only what the flow was made with,
// so the goroutines of a queue that stopped call it too (Leftover).
func (f *Flow) Unsent(now time.Time, work []persistence.Work, why error) []persistence.Outcome {
	out := make([]persistence.Outcome, len(work))
	for i, w := range work {
		out[i] = f.fenced(f.policy.Unsent(now, f.peer, w, why), w)
	}
	return out
}

// GiveBack is the round that records work as Unsent (why), with the
// messages its changes are published with (Changes); no claim. Like
// Unsent, it reads only what the flow was made with.
func (f *Flow) GiveBack(now time.Time, work []persistence.Work, why error) *FlowRound {
	r := &FlowRound{Outcomes: f.Unsent(now, work, why), msgs: make(map[string]messages.Message, len(work))}
	for _, w := range work {
		r.msgs[w.MessageID] = w.Message
	}
	return r
}

// Leftover empties the flow of a queue that stops, into a round without
// claims: the results waiting to be recorded, and the handed-over
// forwards it has not sent, as Unsent (why). Recorded, they leave nothing
// leased to a queue that is gone: without them its work would wait for
// its leases to end (2x --http-timeout + 10 s) before its next queue
// could claim it.
func (f *Flow) Leftover(now time.Time, why error) *FlowRound {
	r := f.GiveBack(now, f.handed, why)
	r.Outcomes = append(f.outcomes, r.Outcomes...)
	r.Updates = f.updates
	maps.Copy(r.msgs, f.msgs)
	f.outcomes, f.updates, f.handed, f.msgs = nil, nil, nil, map[string]messages.Message{}
	return r
}

// Add appends o's results (and its messages) to r's.
func (r *FlowRound) Add(o *FlowRound) {
	r.Outcomes = append(r.Outcomes, o.Outcomes...)
	r.Updates = append(r.Updates, o.Updates...)
	maps.Copy(r.msgs, o.msgs)
}

// Changes are the state changes r's results made, as its Write answered
// (w), for the queue to publish: an outcome applied that moved its
// message (a retry that leaves it where it was is none), and a peer's
// report applied.
func (r *FlowRound) Changes(now time.Time, peer string, w persistence.Written) []messages.StateChanged {
	var changes []messages.StateChanged
	for i, o := range r.Outcomes {
		state := persistence.StateAfter(o.Kind, o.Result)
		m := r.msgs[o.MessageID]
		if w.Completions[i] != persistence.Applied || state == "" || (state == m.State && o.Result == persistence.ResultRetry) {
			continue
		}
		changes = append(changes, messages.StateChanged{ID: o.MessageID, State: state, Frontend: m.Frontend,
			At: now, Detail: o.Detail, Reason: o.Reason})
	}
	for i, u := range r.Updates {
		if w.Reported[i] != persistence.Applied {
			continue
		}
		state := messages.StateDelivered
		if u.Result == persistence.ResultFailed {
			state = messages.StateFailed
		}
		changes = append(changes, messages.StateChanged{ID: u.ID, State: state, Frontend: r.msgs[u.ID].Frontend,
			At: now, Detail: "reported by " + peer, Reason: u.Reason})
	}
	return changes
}

// fenced stamps an outcome with the claim it comes from, its lease epoch
// and this queue's owner: if the ring moved the token and its new owner
// claimed the row since, this answer is not ours to record any more. Work
// leased under epoch 0 (handed over by the intake, or claimed without the
// ring) is fenced by its owner too: another instance that claimed it once
// the lease ran out speaks for it.
func (f *Flow) fenced(o persistence.Outcome, w persistence.Work) persistence.Outcome {
	o.Epoch, o.Owner = w.LeaseEpoch, f.owner
	return o
}
