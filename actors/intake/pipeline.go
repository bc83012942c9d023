package intake

import (
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// Pipeline queues the intake's work for its group commits and bounds the
// commits in flight: while Depth are out, work queues and the next commit
// takes all of it (up to MaxBatch messages). With two or more out, one
// commit's transaction runs while the one before waits for its fsync. It
// is pure: the intake feeds it, sends itself the flushes it asks for, and
// runs the batches it gives out (Next).
type Pipeline struct {
	Depth, MaxBatch int
	// Shared is true when other instances of the site change the directory
	// in the same store (Config.Shared): a submission is routed by its
	// commit only, and a batch with a miss reads the directory again.
	Shared bool

	entries  []entry
	reports  []*statusReq
	inFlight int
	// flushQueued is true while a flush is on its way to the intake.
	flushQueued bool
}

// Submit queues a client's submission (validated by Node.Submit, the only
// sender of Submit); false when it is answered at once instead: refused,
// never stored, because table has no route for it. On a shared store the
// commit resolves it, after reading the directory again if needed; one
// with an id goes to the commit all the same: it may be a retry of one
// stored while it had a route.
func (p *Pipeline) Submit(m *messages.Submit, table *Table) bool {
	if m.Refusal == nil && m.Submission.ID == "" && !p.Shared {
		if _, err := table.Resolve(m.Submission.DestinationMSISDN); err != nil {
			m.Reply <- messages.SubmitReply{Err: err}
			return false
		}
	}
	p.entries = append(p.entries, entry{sub: m})
	return true
}

// Forwards queues a peer's forwarded messages; false when there are none:
// then the request is answered at once, with no results.
func (p *Pipeline) Forwards(m *messages.AcceptForwards) bool {
	if len(m.Forwards) == 0 {
		m.Reply <- messages.AcceptForwardsReply{Results: []messages.ForwardResult{}}
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

// Queued says work was queued and what the intake does now: start a
// commit at once when a full batch waits, or else send itself a flush
// unless one is on its way. The flush comes behind the work already in
// the intake's mailbox, so one commit takes a whole mailbox drain.
func (p *Pipeline) Queued() (start, flush bool) {
	if p.Full() {
		return true, false
	}
	if p.flushQueued {
		return false, false
	}
	p.flushQueued = true
	return false, true
}

// Flushed says the flush arrived: work queued from now on asks for
// another.
func (p *Pipeline) Flushed() { p.flushQueued = false }

// Again queues, ahead of everything else, the entries a commit gave back
// (Batch.Again) to be routed again, and returns how many they are: when
// any, the intake reads the directory again before they are routed.
func (p *Pipeline) Again(entries []entry) int {
	if len(entries) == 0 {
		return 0
	}
	again := make([]entry, len(entries), len(entries)+len(p.entries))
	for i, e := range entries {
		e.rerouted = true
		again[i] = e
	}
	p.entries = append(again, p.entries...)
	return len(entries)
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

// Next gives out the next batch to commit, routed by rt (Take and
// router.batch): reread, called at most once a batch and only on a shared
// store, reads the directory again for a batch that has a miss. A batch
// left with nothing to store, everything in it answered at once, ends
// there, and the next is taken.
func (p *Pipeline) Next(now time.Time, rt router, reread func() *Table) (*Batch, bool) {
	if !p.Shared {
		reread = nil
	}
	for {
		entries, reports, ok := p.Take()
		if !ok {
			return nil, false
		}
		if b := rt.batch(now, entries, reports, reread); len(b.Stored)+len(b.Updates) > 0 {
			return b, true
		}
		p.Done()
	}
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
