package intake

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The pure half of the intake's group commits: the Pipeline that queues
// submits, peers' forwards and peers' reports and bounds the commits in
// flight, and the functions that turn a batch into what the store keeps
// (route) and the store's answer into replies (settle).

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

// Pipeline queues the intake's work for its group commits and bounds the
// commits in flight: while Depth are out, work queues and the next commit
// takes all of it (up to MaxBatch messages). With two or more out, one
// commit's transaction runs while the one before waits for its fsync. It
// is pure: the intake feeds it and runs the batches it gives out.
type Pipeline struct {
	Depth, MaxBatch int

	entries  []entry
	reports  []*statusReq
	inFlight int
}

// Submit queues a client's submission.
func (p *Pipeline) Submit(m *messages.Submit) { p.entries = append(p.entries, entry{sub: m}) }

// Forwards queues a peer's forwarded messages; false when there are none
// (then the request is answered at once, with no results).
func (p *Pipeline) Forwards(m *messages.AcceptForwards) bool {
	if len(m.Forwards) == 0 {
		return false
	}
	req := &forwardReq{m: m, results: make([]messages.ForwardResult, len(m.Forwards)), left: len(m.Forwards)}
	for i := range m.Forwards {
		p.entries = append(p.entries, entry{fwd: req, idx: i})
	}
	return true
}

// Statuses queues a peer's delivery_status reports.
func (p *Pipeline) Statuses(m *messages.ApplyStatuses) {
	p.reports = append(p.reports, &statusReq{m: m, updates: updatesOf(m)})
}

// Again queues, ahead of everything else, the entries a commit gave back
// (Batch.Again) to be routed again.
func (p *Pipeline) Again(entries []entry) {
	again := make([]entry, len(entries), len(entries)+len(p.entries))
	for i, e := range entries {
		e.rerouted = true
		again[i] = e
	}
	p.entries = append(again, p.entries...)
}

// Full reports whether a batch of MaxBatch messages is waiting.
func (p *Pipeline) Full() bool { return len(p.entries) >= p.MaxBatch }

// Take gives out the next batch when a commit may start: something is
// queued and fewer than Depth are in flight.
func (p *Pipeline) Take() (entries []entry, reports []*statusReq, ok bool) {
	if p.inFlight >= p.Depth || len(p.entries)+len(p.reports) == 0 {
		return nil, nil, false
	}
	n := min(len(p.entries), p.MaxBatch)
	entries, p.entries = p.entries[:n:n], p.entries[n:]
	reports, p.reports = p.reports, nil
	p.inFlight++
	return entries, reports, true
}

// Done says a commit given out by Take has ended.
func (p *Pipeline) Done() {
	if p.inFlight > 0 {
		p.inFlight--
	}
}

// Settled says no commit is out any more (the intake waited for them all).
func (p *Pipeline) Settled() { p.inFlight = 0 }

// Drop empties the queue and returns what was in it (to be answered: the
// intake is restarting).
func (p *Pipeline) Drop() ([]entry, []*statusReq) {
	entries, reports := p.entries, p.reports
	p.entries, p.reports = nil, nil
	return entries, reports
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

// router turns entries into what the store keeps, with the routing table
// and this node's name.
type router struct {
	table *Table
	node  string
	newID func() string
}

// receiptTo is the ReportTo of a submission whose ESME asked for a
// receipt ("" for none).
func receiptTo(systemID string, failedOnly bool) string {
	if systemID == "" {
		return ""
	}
	return persistence.ReceiptReportTo(systemID, failedOnly)
}

// newMessage builds what the store keeps for a submission routed to t.
func (r router) newMessage(s messages.Submission, t Target, now time.Time) persistence.NewMessage {
	nm := persistence.NewMessage{
		ID: s.ID, SourceMSISDN: s.SourceMSISDN, DestinationMSISDN: s.DestinationMSISDN,
		Body: s.Body, Options: s.Options, SourceSMSC: r.node, DestSMSC: r.node, Frontend: t.Frontend,
		SubmittedBy: s.SubmittedBy, Trace: s.Trace,
		State: messages.StatePending,
		// An SMPP client that asked for a delivery receipt gets it
		// through the outbox (receipt work) once the message is final.
		ReportTo: receiptTo(s.ReceiptTo, s.ReceiptFailedOnly),
		Detail:   "accepted for frontend " + t.Frontend,
		Work:     &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: t.Frontend, DueAt: firstAttempt(s.Options, now)},
	}
	if t.Peer != "" {
		nm.DestSMSC = t.Peer
		nm.Work = &persistence.WorkSpec{Kind: persistence.WorkForward, Target: t.Peer, DueAt: now}
		nm.Detail = fmt.Sprintf("accepted for frontend %s at peer %s", t.Frontend, t.Peer)
		if !t.Healthy {
			nm.State = messages.StateForwardQueued
			nm.Detail = fmt.Sprintf("queued for frontend %s at peer %s, which is not healthy", t.Frontend, t.Peer)
		}
	}
	return nm
}

// storedOnly is what the commit looks up for a client's submission with an
// id that may not be stored: the stored message if it is a retry.
func storedOnly(s messages.Submission) persistence.NewMessage {
	return persistence.NewMessage{
		ID: s.ID, SourceMSISDN: s.SourceMSISDN, DestinationMSISDN: s.DestinationMSISDN, Body: s.Body, Options: s.Options,
		SubmittedBy: s.SubmittedBy, ReportTo: receiptTo(s.ReceiptTo, s.ReceiptFailedOnly), StoredOnly: true,
	}
}

// storedOnlyForward is what the commit looks up for a peer's forward this
// node refuses (forwardTarget): the stored message if it is a retry.
func storedOnlyForward(f messages.Forward, from string) persistence.NewMessage {
	return persistence.NewMessage{
		ID: f.ID, SourceMSISDN: f.SourceMSISDN, DestinationMSISDN: f.DestinationMSISDN, Body: f.Body, Options: f.Options,
		ReportTo: from, StoredOnly: true,
	}
}

// forwardTarget checks a forwarded message against this node: it must be
// addressed to us, for a frontend we serve.
func (r router) forwardTarget(f messages.Forward) error {
	if f.DestSMSC != r.node {
		return messages.Errorf(messages.CodeNotOurFrontend, "dest_smsc is %q; this node is %q", f.DestSMSC, r.node)
	}
	if _, ok := r.table.Frontend(f.Frontend); !ok {
		return messages.Errorf(messages.CodeNotOurFrontend, "frontend %q is not served by %s", f.Frontend, r.node)
	}
	return nil
}

// entryMessage routes one entry into what the store keeps.
func (r router) entryMessage(e entry, now time.Time) (persistence.NewMessage, error) {
	if e.sub != nil {
		s := e.sub.Submission
		if e.sub.Refusal != nil {
			return persistence.NewMessage{}, e.sub.Refusal
		}
		// Resolve again: a directory change may have arrived after the submit.
		t, err := r.table.Resolve(s.DestinationMSISDN)
		if err != nil {
			return persistence.NewMessage{}, err
		}
		if s.ID == "" {
			s.ID = r.newID()
		}
		return r.newMessage(s, t, now), nil
	}
	f := e.fwd.m.Forwards[e.idx]
	if err := r.forwardTarget(f); err != nil {
		return persistence.NewMessage{}, err
	}
	return persistence.NewMessage{
		ID: f.ID, SourceMSISDN: f.SourceMSISDN, DestinationMSISDN: f.DestinationMSISDN,
		Body: f.Body, Options: f.Options, SourceSMSC: f.SourceSMSC, DestSMSC: r.node, Frontend: f.Frontend,
		// The gateway replaced the peer's traceparent with its receipt's.
		Trace:    f.Traceparent,
		State:    messages.StatePending,
		Detail:   fmt.Sprintf("forwarded by %s for frontend %s", e.fwd.m.From, f.Frontend),
		Work:     &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: f.Frontend, DueAt: firstAttempt(f.Options, now)},
		ReportTo: e.fwd.m.From,
	}, nil
}

// firstAttempt is when a message's first delivery may be made: now, or its
// scheduled delivery time (deliver_after) when that is later. A forward
// leaves at once: the delivering node waits for the time.
func firstAttempt(o messages.Options, now time.Time) time.Time {
	if o.DeliverAfter != nil && o.DeliverAfter.After(now) {
		return *o.DeliverAfter
	}
	return now
}

// isMiss reports whether err refuses a message for want of a route or a
// frontend: what another instance's directory change may have cured.
func isMiss(err error) bool {
	var me *messages.Error
	return errors.As(err, &me) && (me.Code == messages.CodeNoRoute || me.Code == messages.CodeNotOurFrontend)
}

// answer replies to one entry: the stored message, or err. A client's
// submission that reuses a stored id with other content is refused
// (id_conflict): answering with the stored message would drop the new
// content in silence.
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

// settle answers everyone in the batch from the store's answer (or its
// failure) and returns the state changes to publish and the work to kick.
func (b *Batch) settle(w persistence.Written, err error) (changes []messages.StateChanged, kicks []persistence.WorkSpec) {
	b.settled = true
	if err != nil {
		live := make([]entry, 0, len(b.from))
		for _, i := range b.from {
			live = append(live, b.entries[i])
		}
		failAll(live, b.reports, commitError(err))
		return nil, nil
	}
	kicked := map[persistence.WorkSpec]bool{}
	for k, acc := range w.Accepted {
		e := b.entries[b.from[k]]
		switch {
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
		key := persistence.WorkSpec{Kind: nm.Work.Kind, Target: nm.Work.Target}
		// Forwards of a peer that is not healthy wait, work handed over is
		// taken, work to publish goes through the bus; the rest is due for a
		// claim.
		if !kicked[key] && acc.Work == nil && acc.Relay == nil && (key.Kind == persistence.WorkDelivery || acc.Message.State == messages.StatePending) {
			kicked[key] = true
			kicks = append(kicks, key)
		}
	}
	i := 0
	for _, r := range b.reports {
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
	return changes, kicks
}

// commitError is what the submitters of a commit that failed are told: the
// store has no room (storage_full), or it is unavailable; either way
// nothing was stored and a retry with the same id is safe.
func commitError(err error) error {
	if errors.Is(err, persistence.ErrNoSpace) {
		return messages.Errorf(messages.CodeStorageFull, "the message store has no room left; retry later with the same id")
	}
	return messages.Errorf(messages.CodeUnavailable, "the message store is unavailable; retry with the same id")
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
