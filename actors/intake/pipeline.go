package intake

import "github.com/switchboard-dev/switchboard/messages"

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
