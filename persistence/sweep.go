package persistence

import (
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// The history and ledger details of the sweeps.
const (
	ExpiredDetail        = "message validity expired"
	ForwardTimeoutDetail = "waited too long in forward_queued"
)

// A store finds the candidates of a sweep with a query of its own (an index
// range, at most Limit rows), loads them with their outbox rows, and asks
// the functions below about each, in candidate order: they check the
// candidate again (it may have moved since the query, in a store that other
// instances share) and, when it still qualifies, write its change into c
// and report true.

// Sweep asks decide about each candidate of ids that l loaded, in
// candidate order, and returns the messages it changed (in c).
func Sweep(l *Loaded, c *Changes, ids []string, decide func(l *Loaded, c *Changes, m *Row) bool) []messages.Message {
	out := []messages.Message{}
	for _, id := range ids {
		if m, ok := l.Rows[id]; ok && decide(l, c, m) {
			out = append(out, m.Message)
		}
	}
	return out
}

// Expire fails (reason expired) a message in pending or retry submitted
// before req.SubmittedBefore, or whose own validity_until is at or before
// req.Now, none of whose outbox rows holds a live lease: a worker may be
// handing it over right now, and its outcome will settle it.
// Its delivery and forward rows go with a failed ledger entry each; a
// message without such work gets one for (delivery, its frontend), so a
// late ack is still recognised. Status rows (reports owed to an origin) are
// not the message's own work and stay.
func Expire(l *Loaded, c *Changes, m *Row, req ExpireRequest) bool {
	passed := m.SubmittedAt.Before(Normalize(req.SubmittedBefore)) ||
		(m.ValidityUntil != nil && !m.ValidityUntil.After(Normalize(req.Now)))
	if (m.State != messages.StatePending && m.State != messages.StateRetry) || !passed || leased(l.Work[m.ID], "", req.Now) {
		return false
	}
	c.FailWork(l, m, messages.StateFailed, messages.ReasonExpired, ExpiredDetail,
		LedgerKey{Kind: WorkDelivery, Target: m.Frontend}, WorkDelivery, WorkForward)
	return true
}

// FailForward moves a message forward_queued since before req.QueuedBefore
// whose forward work holds no live lease to forward_failed (reason
// forward_timeout), its forward rows removed with a failed ledger entry
// each, or one for (forward, its dest_smsc) when it had none.
func FailForward(l *Loaded, c *Changes, m *Row, req ForwardExpiry) bool {
	if m.State != messages.StateForwardQueued || m.QueuedAt == nil || !m.QueuedAt.Before(Normalize(req.QueuedBefore)) ||
		leased(l.Work[m.ID], WorkForward, req.Now) {
		return false
	}
	c.FailWork(l, m, messages.StateForwardFailed, messages.ReasonForwardTimeout, ForwardTimeoutDetail,
		LedgerKey{Kind: WorkForward, Target: m.DestSMSC}, WorkForward)
	return true
}

// QueueForward moves a pending message whose forward work for peer is not
// leased at now to forward_queued (queued_at now), with detail.
func QueueForward(l *Loaded, c *Changes, m *Row, now time.Time, peer, detail string) bool {
	if m.State != messages.StatePending {
		return false
	}
	for _, w := range l.Work[m.ID] {
		if w.Kind == WorkForward && w.Target == peer && !w.Leased(now) {
			c.Move(l, m, messages.StateForwardQueued, detail)
			return true
		}
	}
	return false
}

// leased reports whether a row of kind (any kind when empty) holds a lease
// live at now.
func leased(work []WorkRow, kind WorkKind, now time.Time) bool {
	for _, w := range work {
		if (kind == "" || w.Kind == kind) && w.Leased(now) {
			return true
		}
	}
	return false
}

// PurgeRequest asks for final messages past their retention to be purged.
type PurgeRequest struct {
	Now time.Time
	// Before maps each state whose messages may be purged (those for which
	// Resting holds) to its cutoff: a message in that state that came to
	// rest before the cutoff goes. A state absent is kept.
	Before map[messages.State]time.Time
	// Limit bounds one call (> 0); callers loop until fewer come back.
	Limit int
	// Seen holds, for a purge by ids, each message's history as the caller
	// read it (Purgeable), by its length: a message that changed since (a
	// resting message changes only by a history entry: a receipt, a late
	// report, a resubmit) is kept. Its call record was written from that
	// read, and an entry recorded meanwhile would be missing from it; the
	// next pass writes it again.
	Seen map[string]int
}

// Purged is one message Purge deleted.
type Purged struct {
	ID    string
	State messages.State
}

// Purge deletes a message that came to rest (Resting) before its state's
// cutoff in req and has no outbox row left: a report owed to its origin
// (status work), or any other work, keeps it, whatever its age; so does
// a change since req.Seen says it was read. Its history and ledger
// entries go with it.
func Purge(l *Loaded, c *Changes, m *Row, req PurgeRequest) bool {
	cut, ok := req.Before[m.State]
	if !ok || !Resting(m.State) || m.FinalizedAt == nil || !m.FinalizedAt.Before(Normalize(cut)) || len(l.Work[m.ID]) > 0 {
		return false
	}
	if n, ok := req.Seen[m.ID]; ok && m.HistoryLen != n {
		return false
	}
	c.Purged = append(c.Purged, m)
	c.Counts.State(m.State, -1)
	delete(l.Rows, m.ID)
	return true
}
