package intake

import (
	"errors"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The pure half of the intake's group commits: what one commit holds (its
// entries and the peers' reports), and the functions that turn the store's
// answer into replies (settle). The Pipeline (pipeline.go) queues the work
// and gives out the batches; the router (route.go) turns entries into what
// the store keeps.

// entry is one message of a group commit: a client's submit, or one
// message of a peer's forward request.
type entry struct {
	sub *messages.Submit
	fwd *forwardReq
	idx int
	// refusal is why a client's submission may not be stored (its
	// Submit's Refusal, or its route), or a peer's forward (forwardTarget):
	// it went to the commit StoredOnly and is the answer when its id is not
	// stored.
	refusal error
	// rerouted marks an entry a commit gave back for a frontend the store
	// no longer has (Batch.Again): routed again by a directory read since,
	// it is answered, not given back, if that happens once more.
	rerouted bool
}

// forwardReq collects the results of one AcceptForwards; it is answered
// once: with the results when its last message is settled, or with the
// error of the first commit that failed. Its messages may be split over
// two commits (Pipeline.Take cuts at MaxBatch), which settle it from their
// own goroutines, at once when several commits are out; its Reply channel
// takes one answer, so a second would block a commit's goroutine for good
// once the gateway stopped waiting (the peer's timeout ended the request),
// and with it the intake's pipeline.
type forwardReq struct {
	m        *messages.AcceptForwards
	mu       sync.Mutex
	results  []messages.ForwardResult
	left     int
	answered bool
}

// settle records message i's result; the last one answers the request.
func (f *forwardReq) settle(i int, r messages.ForwardResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.answered {
		return
	}
	f.results[i] = r
	if f.left--; f.left == 0 {
		f.answered = true
		f.m.Reply <- messages.AcceptForwardsReply{Results: f.results}
	}
}

// fail answers the request with err, unless it was answered (the origin
// sends the whole request again; what was stored answers as duplicates).
func (f *forwardReq) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.answered {
		return
	}
	f.answered = true
	f.m.Reply <- messages.AcceptForwardsReply{Err: err}
}

// statusReq is one ApplyStatuses of a group commit: a peer's reports on
// messages we forwarded to it.
type statusReq struct {
	m       *messages.ApplyStatuses
	updates []persistence.StatusUpdate
}

// updatesOf turns a peer's reports into status updates.
func updatesOf(m *messages.ApplyStatuses) []persistence.StatusUpdate {
	updates := make([]persistence.StatusUpdate, len(m.Reports))
	for i, r := range m.Reports {
		res := persistence.ResultDelivered
		if r.Status == messages.ReportFailed {
			res = persistence.ResultFailed
		}
		updates[i] = persistence.StatusUpdate{ID: r.ID, From: m.From, Result: res, Reason: r.Reason, At: r.At, Attempts: r.Attempts}
	}
	return updates
}

// failAll answers every entry and report not answered yet with err.
func failAll(batch []entry, reports []*statusReq, err error) {
	for _, e := range batch {
		switch {
		case e.sub != nil:
			e.sub.Reply <- messages.SubmitReply{Err: err}
		case e.fwd != nil:
			e.fwd.fail(err)
		}
	}
	for _, r := range reports {
		r.m.Reply <- messages.ApplyStatusesReply{Err: err}
	}
}

// answer replies to one entry: the stored message, or err. A client's
// submission or a peer's forward that reuses a stored id with other
// content is refused (id_conflict): answering with the stored message
// would drop the new content in silence (and give the origin the stored
// message's state for one never delivered).
func answer(e entry, acc persistence.Accepted, err error) {
	if e.sub != nil {
		switch {
		case err != nil:
			e.sub.Reply <- messages.SubmitReply{Err: err}
		case acc.Absent:
			e.sub.Reply <- messages.SubmitReply{Err: e.refusal}
		case acc.Conflict == persistence.ConflictOwner:
			e.sub.Reply <- messages.SubmitReply{Err: messages.Errorf(messages.CodeIDConflict,
				"id %q is already used by a message another credential submitted; choose a new id", acc.Message.ID)}
		case acc.Conflict != "":
			e.sub.Reply <- messages.SubmitReply{Err: messages.Errorf(messages.CodeIDConflict,
				"id %q is already used by a message with another %s; choose a new id for new content (the same content again returns the stored message)",
				acc.Message.ID, acc.Conflict)}
		default:
			e.sub.Reply <- messages.SubmitReply{Message: acc.Message, Created: acc.Created}
		}
		return
	}
	id := e.fwd.m.Forwards[e.idx].ID
	r := messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: id}}
	switch {
	case acc.Absent:
		err = e.refusal
		fallthrough
	case err != nil:
		var me *messages.Error
		if !errors.As(err, &me) {
			me = messages.Errorf(messages.CodeInternal, "%v", err)
		}
		r.Error = me
	case !acc.Created && acc.ReportTo != e.fwd.m.From:
		// Ids are global; one stored from another origin (or submitted
		// here) is another message. The origin is the peer that forwarded
		// it, authenticated then (ReportTo), not what a body claims.
		r.Error = messages.Errorf(messages.CodeInvalidState,
			"id %q is already used here by a message not forwarded by %s", id, e.fwd.m.From)
	case acc.Conflict != "":
		// The origin's retry carries the same content; other content
		// under the id is another message, which the stored one's state
		// must not answer for.
		r.Error = messages.Errorf(messages.CodeIDConflict,
			"id %q is already used here by a message %s forwarded with another %s", id, e.fwd.m.From, acc.Conflict)
	default:
		r.Duplicate, r.State = !acc.Created, acc.Message.State
		if acc.Message.State == messages.StateFailed {
			r.Reason = acc.Message.Reason
		}
	}
	e.fwd.settle(e.idx, r)
}

// Batch is one group commit under way: the entries it stores (stored[k]
// came from entries[from[k]]) and the peers' reports folded into it.
type Batch struct {
	Now     time.Time
	Stored  []persistence.NewMessage
	Updates []persistence.StatusUpdate
	// Again are, once settled, the entries not answered because the store
	// has not the frontend they were routed to (FrontendGone): the
	// directory they were routed by is stale. The intake reads it again
	// and queues them for its next commit (Pipeline.Again).
	Again   []entry
	entries []entry
	from    []int
	reports []*statusReq
	settled bool // settle began: its answers are on their way
	// grants are, per work key handed over (see hand), the rows the board
	// granted and the worker they go to, until handed over or released.
	grants map[handover.Key]grant
	board  *handover.Board
}

// grant is what the board granted a batch of one key's work.
type grant struct {
	to *actor.PID
	n  int
}

// hand takes up the workers' offers on board for the batch's new work that
// is due now (pending messages: a queued forward waits for its peer, a
// scheduled delivery for its time): as
// much of each key's work as was offered is written leased to owner, for
// the lease the worker asked for.
func (b *Batch) hand(board *handover.Board, owner string) {
	byKey := map[handover.Key][]int{}
	var keys []handover.Key
	for k, nm := range b.Stored {
		if nm.Work == nil || nm.State != messages.StatePending || nm.Work.DueAt.After(b.Now) {
			continue
		}
		key := handover.Key{Kind: nm.Work.Kind, Target: nm.Work.Target}
		if _, ok := byKey[key]; !ok {
			keys = append(keys, key)
		}
		byKey[key] = append(byKey[key], k)
	}
	for _, key := range keys {
		idx := byKey[key]
		n, lease, to := board.Take(key, len(idx))
		if n == 0 {
			continue
		}
		if b.grants == nil {
			b.grants, b.board = map[handover.Key]grant{}, board
		}
		b.grants[key] = grant{to: to, n: n}
		for _, k := range idx[:n] {
			b.Stored[k].Lease = &persistence.Lease{Owner: owner, Until: b.Now.Add(lease)}
		}
	}
}

// publish marks the new delivery work that is due and that no worker took
// at once to be published to the bus by this instance after the commit
// (persistence.NewMessage.Publish): the bus is up and its relay ready.
// Work due later (deliver_after) is written unrelayed: the relay publishes
// it when it falls due. Published now, it would wait in its frontend's
// consumer, naked until its time, holding one of the consumer's
// MaxAckPending: enough scheduled messages would stop the consumer.
func (b *Batch) publish() {
	for k := range b.Stored {
		nm := &b.Stored[k]
		if nm.Work != nil && nm.Work.Kind == persistence.WorkDelivery && nm.Lease == nil && !nm.Work.DueAt.After(b.Now) {
			nm.Publish = true
		}
	}
}

// published is the work the commit wrote to publish.
func (b *Batch) published(w persistence.Written) []persistence.Relay {
	var out []persistence.Relay
	for _, acc := range w.Accepted {
		if acc.Relay != nil {
			out = append(out, *acc.Relay)
		}
	}
	return out
}

// handOver sends each worker the work the commit wrote leased to it, with
// the grant it settles; a grant of which the commit stored nothing is
// refunded here.
func (b *Batch) handOver(w persistence.Written, send func(to *actor.PID, work *handover.Work)) {
	var rows map[handover.Key][]persistence.Work
	for _, acc := range w.Accepted {
		if acc.Work == nil {
			continue
		}
		if rows == nil {
			rows = map[handover.Key][]persistence.Work{}
		}
		k := handover.Key{Kind: acc.Work.Kind, Target: acc.Work.Target}
		rows[k] = append(rows[k], *acc.Work)
	}
	for k, g := range b.grants {
		delete(b.grants, k)
		if len(rows[k]) == 0 {
			b.board.Refund(k, g.to, g.n)
			continue
		}
		send(g.to, &handover.Work{Work: rows[k], Key: k, Granted: g.n})
	}
}

// release refunds the grants not handed over: the commit failed, or the
// intake gave the batch up.
func (b *Batch) release() {
	for k, g := range b.grants {
		delete(b.grants, k)
		b.board.Refund(k, g.to, g.n)
	}
}

// Write is what the batch asks of the store: the reports and the new
// messages in one transaction.
func (b *Batch) Write() persistence.Write {
	return persistence.Write{Statuses: b.Updates, Accept: b.Stored}
}

// abandon answers everyone in the batch with err unless settle has begun
// (a commit's goroutine panicked: its senders retry at once rather than at
// their deadline; if the panic came after the commit, a retry with the same
// id finds the stored message).
func (b *Batch) abandon(err error) {
	b.release()
	if b.settled {
		return
	}
	b.settled = true
	live := make([]entry, 0, len(b.from))
	for _, i := range b.from {
		live = append(live, b.entries[i])
	}
	failAll(live, b.reports, err)
}

// stored is what the store's answer to a commit says it stored: all of w
// when it succeeded; when it failed after storing some new messages (a
// persistence.PartialAccept), what it reports, its other entries Unread;
// ok is false when it stored nothing.
func stored(w persistence.Written, err error) (_ persistence.Written, ok bool) {
	var partial *persistence.PartialAccept
	switch {
	case err == nil:
		return w, true
	case errors.As(err, &partial):
		return persistence.Written{Accepted: partial.Accepted}, true
	}
	return persistence.Written{}, false
}

// settle answers everyone in the batch from the store's answer (or its
// failure) and returns the state changes to publish and the work to kick.
// Of a commit that stored some messages and could not read the others
// back (see stored), the created ones are answered and published as any
// commit's; the others, and any reports, get the failure.
func (b *Batch) settle(w persistence.Written, err error) (changes []messages.StateChanged, kicks []persistence.WorkSpec) {
	b.settled = true
	w, ok := stored(w, err)
	if !ok {
		live := make([]entry, 0, len(b.from))
		for _, i := range b.from {
			live = append(live, b.entries[i])
		}
		failAll(live, b.reports, commitError(err))
		return nil, nil
	}
	var kl kickList
	for k, acc := range w.Accepted {
		e := b.entries[b.from[k]]
		switch {
		case acc.Unread:
			answer(e, acc, commitError(err))
			continue
		case acc.FrontendGone && !e.rerouted:
			b.Again = append(b.Again, e)
			continue
		case acc.FrontendGone:
			answer(e, acc, messages.Errorf(messages.CodeUnavailable,
				"frontend %q was deleted while the message was being stored; retry", b.Stored[k].Work.Target))
			continue
		}
		answer(e, acc, nil)
		if !acc.Created {
			continue
		}
		nm := b.Stored[k]
		changes = append(changes, messages.StateChanged{ID: acc.Message.ID, State: acc.Message.State,
			Frontend: acc.Message.Frontend, At: b.Now, Detail: nm.Detail, Accepted: true})
		// Work handed over is taken, work to publish goes through the bus;
		// the rest is due for a claim (kickList.add).
		if acc.Work == nil && acc.Relay == nil {
			kl.add(*nm.Work, acc.Message.State)
		}
	}
	i := 0
	for _, r := range b.reports {
		if err != nil {
			// A partial result holds no reports (a store gives one only
			// for a Write of new messages alone).
			r.m.Reply <- messages.ApplyStatusesReply{Err: commitError(err)}
			continue
		}
		out := make([]messages.StatusReply, len(r.updates))
		for j, u := range r.updates {
			comp := w.Reported[i]
			i++
			out[j] = messages.StatusReply{ID: u.ID, Outcome: string(comp)}
			if comp != persistence.Applied {
				continue
			}
			state := messages.StateDelivered
			if u.Result == persistence.ResultFailed {
				state = messages.StateFailed
			}
			changes = append(changes, messages.StateChanged{ID: u.ID, State: state, At: b.Now,
				Detail: "reported by " + r.m.From, Reason: u.Reason})
		}
		r.m.Reply <- messages.ApplyStatusesReply{Results: out}
	}
	return changes, kl.work
}

// againQueue is where commits' goroutines leave the entries they give
// back (Batch.Again) for the intake.
type againQueue struct {
	mu      sync.Mutex
	entries []entry
}

func (q *againQueue) add(entries []entry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.entries = append(q.entries, entries...)
}

func (q *againQueue) take() []entry {
	q.mu.Lock()
	defer q.mu.Unlock()
	entries := q.entries
	q.entries = nil
	return entries
}
