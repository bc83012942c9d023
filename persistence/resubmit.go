package persistence

// Resubmit decides one reroute of Resubmit. A failed or forward_failed
// message goes back to work: state, frontend and dest_smsc as given,
// attempts 0, reason cleared, queued_at cleared (set to now when the state
// is forward_queued), submitted_at now, history appended; every ledger
// entry of the message goes (its work starts afresh: a forward that a peer
// accepted before it failed there is sent again, and a later final outcome
// is reported to the origin again), so do its delivery and forward rows
// (they belong to the route it failed on) and its status rows (a report
// owed of the outcome the resubmit undoes: sent later, it would tell the
// origin the fate of a message pending again; the next final outcome
// writes its own), and the new work is written. Any other state is left
// as it is.
func Resubmit(l *Loaded, c *Changes, r Reroute) ResubmitResult {
	m := l.Rows[r.ID]
	if m == nil {
		return ResubmitResult{ID: r.ID}
	}
	if !m.State.Resubmittable() {
		return ResubmitResult{ID: r.ID, Found: true, State: m.State}
	}
	c.Unledger(l, r.ID)
	for _, w := range append([]WorkRow(nil), l.Work[r.ID]...) {
		if w.Kind == WorkDelivery || w.Kind == WorkForward || w.Kind == WorkStatus {
			c.Finish(l, r.ID, w.ID)
		}
	}
	m.Frontend, m.DestSMSC, m.Attempts, m.Reason = r.Frontend, r.DestSMSC, 0, ""
	m.SubmittedAt, m.QueuedAt = c.Now, nil
	c.Restarted[m.ID] = true
	c.Move(l, m, r.State, r.Detail)
	if r.Work != nil {
		c.AddWork(l, r.ID, m.Token, *r.Work)
	}
	return ResubmitResult{ID: r.ID, Applied: true, Found: true, State: r.State}
}
