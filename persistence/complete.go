package persistence

import (
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// WorkLease is an outbox row's lease as CompleteWork reads it (Owner is
// empty when the row is not leased), with the attempt whose retry made it
// due again (WorkRow.RetriedAttempt).
type WorkLease struct {
	Owner   string
	Epoch   uint64
	Retried int
}

// retriedAttempt is the attempt of m that a retry outcome o speaks for, as
// its row keeps it (WorkRow.RetriedAttempt): m's attempt count for
// delivery work, whose claims count the attempts; 0 (none) for other
// outcomes and kinds, and for a deferral (givesBack), which was no
// attempt: kept, the number it gave back would make the real attempt
// claimed next under the same number look already recorded.
func retriedAttempt(o Outcome, m *Row) int {
	if o.Kind != WorkDelivery || o.Result != ResultRetry || o.Deferred {
		return 0
	}
	return m.Attempts
}

// givesBack reports whether o is a deferral (Outcome.Deferred): a delivery
// retry that was no attempt, which gives back the attempt its claim
// counted.
func givesBack(o Outcome) bool {
	return o.Deferred && o.Kind == WorkDelivery && o.Result == ResultRetry
}

// offered reports whether m was offered to the pull frontend whose
// verdict o is (Outcome.Ack): it counts an attempt, or o is a deferral
// and m is in retry with none, which only a deferral that gave back
// attempt 1 leaves (a retry of a real attempt keeps it): the same
// deferral sent again, which the deferral's own rule answers.
func offered(o Outcome, m *Row) bool {
	return m.Attempts > 0 || (givesBack(o) && m.State == messages.StateRetry)
}

// staleAck reports whether o, a pull frontend's verdict (Outcome.Ack),
// is a retry or failed verdict on delivery work naming an attempt older
// than m's count (Outcome.Named): m was offered again since (the lease
// of the attempt it names ran out and another poll, here or at another
// instance, claimed the next), and applied it would take the newer
// holder's lease away (a retry: m offered once more while it is being
// delivered) or dead-letter the message it is delivering (failed). A
// delivered verdict is always taken, and a deferral has its own rule
// (givesBack); a verdict naming no attempt stands, as the frontend's
// verdicts do.
func staleAck(o Outcome, m *Row) bool {
	return o.Kind == WorkDelivery && o.Result != ResultDelivered && !o.Deferred &&
		o.Named > 0 && o.Named < m.Attempts
}

// CompletionOf decides what CompleteWork does with o, for a message m
// (nil when it does not exist), whose work o names has a ledger entry
// (recorded), and whose outbox rows of o's kind and target hold leases.
// Applied means: apply it now.
//
// A recorded outcome comes first, then missing work (no row of o's kind
// and target: that work is not o's target's, whatever else the message
// had), then a final message (status and receipt work are written for
// messages that are final already: only its ledger entry ends it), then a
// pull frontend's verdict on a message never offered (Outcome.Ack), then
// its retry or failed verdict naming an older attempt than the message's
// latest (Stale, see staleAck: decided here, in the transaction that
// would record it, since a claim may count another attempt between the
// ack's read of the count and this), then a deferral's claim given back
// already, then the fence, then a retry recorded already. Missing work
// before a final message: an ack at frontend A about frontend B's message
// answered already_recorded once B's was final, no_work before, telling A
// about B's message.
//
// An outcome that names its claim's Owner is fenced: it applies only
// while every row is still leased to that Owner under its Epoch, whether
// or not the lease has run out since, so that a claim made since speaks
// for the row (StaleEpoch otherwise). Epoch 0 is fenced too: work handed
// over leased by the intake, claimed by id for the bus, or claimed without
// a ring is leased under epoch 0, and another instance may claim it under
// the ring's epoch once its lease ran out; the first holder's late verdict
// (a retry would unlease the new claim while its attempt is under way, a
// failure would dead-letter a message the new holder delivers) is refused.
// An outcome without an owner (a pull frontend's ack, a late verdict
// whose delivery had left the flight) is unfenced: the frontend's word
// stands whoever leased the row. The fence does not tell two claims of
// the same owner under the same epoch apart; only a deferral's attempt
// does (below): the delivery worker answers a claim of its own made while
// the attempt is under way with that attempt (delivery.Dispatcher).
//
// A retry of delivery work whose rows a retry of the same attempt made due
// again (WorkRow.RetriedAttempt: a pull frontend's client that sent its
// ack again, the first answer lost) is AlreadyRecorded: applied again, it
// pushed the next attempt back and added history. The row's attempt tells,
// not the message's state: a message in retry whose row is unleased may
// also be in an attempt claimed since whose lease a restart took back
// (ReleaseLeases), and that attempt's retry applies.
//
// A deferral (Outcome.Deferred) applies only while its rows are leased:
// the claim whose attempt it gives back is still theirs. An unleased row
// had its claim given back already (the same deferral again: applied
// twice, it gave back an attempt that was made) or taken back (a retry
// recorded, ReleaseLeases): AlreadyRecorded, before the fence. A deferral
// that names its claim's Owner (a push frontend's) is fenced as above: a
// row leased to another owner or under another epoch was claimed again
// since, and that claim's attempt, under way, is not the deferral's to
// give back: StaleEpoch. So is one whose attempt (Outcome.Attempt) is not the
// message's count: its owner's lease ran out and the owner claimed the
// row again since, counting another attempt, which is under way (the
// owner alone does not tell that claim from the deferral's). One without
// an owner (a pull frontend's ack) stands whoever leased the row, as the
// frontend's other verdicts do.
func CompletionOf(o Outcome, m *Row, recorded bool, rows []WorkLease) Completion {
	switch {
	case m == nil:
		return NoWork
	case recorded:
		return AlreadyRecorded
	case len(rows) == 0:
		return NoWork
	case o.Kind != WorkStatus && o.Kind != WorkReceipt && m.State.Final():
		return AlreadyRecorded
	case o.Ack && !offered(o, m):
		return NotOffered
	case o.Ack && staleAck(o, m):
		return Stale
	}
	switch {
	case givesBack(o) && slices.ContainsFunc(rows, func(r WorkLease) bool { return r.Owner == "" }):
		return AlreadyRecorded
	case o.Owner != "" && slices.ContainsFunc(rows, func(r WorkLease) bool { return r.Owner != o.Owner || r.Epoch != o.Epoch }):
		return StaleEpoch
	case givesBack(o) && o.Owner != "" && o.Attempt > 0 && o.Attempt != m.Attempts:
		return StaleEpoch
	}
	if a := retriedAttempt(o, m); a > 0 && !slices.ContainsFunc(rows, func(r WorkLease) bool { return r.Retried != a }) {
		return AlreadyRecorded
	}
	return Applied
}

// Complete decides one outcome of CompleteWork on what l holds and writes
// it into c.
//
// Its Reason and Detail are stored as CleanText makes them.
//
// Per kind (see StateAfter): a final result (delivered, failed) writes the
// ledger entry and removes the work's row; a retry makes the row due again
// at RetryAt (now when zero), unleased, and keeps on it the attempt it
// speaks for (WorkRow.RetriedAttempt); a deferral (Outcome.Deferred)
// gives back the attempt its claim counted, so that the next claim counts
// the same attempt again. The message then moves to the
// kind's state for the result, with history (EntryOf), except that status work
// changes no state and a forward retry of a message already forward_queued
// is no transition (no history, queued_at kept). A failure sets the
// message's reason; other outcomes keep it.
func Complete(l *Loaded, c *Changes, o Outcome) Completion {
	o.Reason, o.Detail = CleanText(o.Reason), CleanText(o.Detail)
	m := l.Rows[o.MessageID]
	var (
		rows   []int64
		leases []WorkLease
	)
	for _, w := range l.Work[o.MessageID] {
		if w.Kind == o.Kind && w.Target == o.Target {
			rows = append(rows, w.ID)
			leases = append(leases, w.Lease())
		}
	}
	key := LedgerKey{MessageID: o.MessageID, Kind: o.Kind, Target: o.Target}
	if got := CompletionOf(o, m, l.Recorded[key], leases); got != Applied {
		return got
	}
	for _, row := range rows {
		if o.Result == ResultRetry {
			c.Reschedule(l, o.MessageID, row, o.RetryAt, retriedAttempt(o, m))
		} else {
			c.Finish(l, o.MessageID, row)
		}
	}
	if o.Result != ResultRetry {
		c.Record(l, key, o.Result, o.Detail)
	}
	if len(o.SMSCMessageIDs) > 0 {
		c.Refs = append(c.Refs, refsOf(o)...)
	}
	next := StateAfter(o.Kind, o.Result)
	if next == "" || (o.Kind == WorkForward && next == m.State) {
		return Applied
	}
	if o.Result == ResultFailed {
		m.Reason = o.Reason
	}
	if givesBack(o) && m.Attempts > 0 {
		m.Attempts-- // written with the move (Changes.Moved)
	}
	c.MoveWith(l, m, next, EntryOf(o))
	return Applied
}

// EntryOf is the history entry of an applied outcome o (its State and At
// are the move's): its Detail, and for delivery work the attempt it speaks
// for (Outcome.Attempt), whether its claim was a resend (Outcome.Resend)
// and whether it was a deferral (givesBack: Deferrals 1).
func EntryOf(o Outcome) messages.HistoryEntry {
	e := messages.HistoryEntry{Detail: o.Detail}
	if o.Kind == WorkDelivery {
		e.Attempt, e.Resend = o.Attempt, o.Resend
	}
	if givesBack(o) {
		e.Deferrals = 1
	}
	return e
}

// StatusCompletion is what ApplyStatus does with u for a message in state
// whose dest_smsc is destSMSC (a missing message is NoWork). Only the
// message's dest_smsc reports on it, a final delivery state is kept, and a
// message is reported on only while it is ours to forward or forwarded.
func StatusCompletion(state messages.State, destSMSC string, u StatusUpdate) Completion {
	switch {
	case destSMSC != u.From:
		return NoWork
	case state == messages.StateDelivered || state == messages.StateFailed:
		return AlreadyRecorded
	case state == messages.StatePending, state == messages.StateForwardQueued,
		state == messages.StateForwarded, state == messages.StateForwardFailed:
		return Applied
	}
	return NoWork
}

// StatusDetail is the history and ledger detail of an applied update.
func StatusDetail(u StatusUpdate) string {
	if u.At.IsZero() {
		return "reported by " + u.From
	}
	return "reported by " + u.From + " at " + Normalize(u.At).Format(time.RFC3339Nano)
}

// Status decides one update of ApplyStatus on what l holds and writes it
// into c. An applied report moves the message to delivered or failed (a
// failure sets its reason, a report with attempts sets the message's) with
// history, writes the forward ledger entry
// (id, forward, From) with the report's result unless one exists, and
// removes the forward's outbox row: a report can overtake the forward's
// own completion, even one still leased.
func Status(l *Loaded, c *Changes, u StatusUpdate) Completion {
	m := l.Rows[u.ID]
	if m == nil {
		return NoWork
	}
	u.Reason = CleanText(u.Reason)
	if done := StatusCompletion(m.State, m.DestSMSC, u); done != Applied {
		return done
	}
	detail := StatusDetail(u)
	for _, w := range append([]WorkRow(nil), l.Work[u.ID]...) {
		if w.Kind == WorkForward && w.Target == u.From {
			c.Finish(l, u.ID, w.ID)
		}
	}
	c.Record(l, LedgerKey{MessageID: u.ID, Kind: WorkForward, Target: u.From}, u.Result, detail)
	if u.Result == ResultFailed {
		m.Reason = u.Reason
	}
	if u.Attempts > 0 {
		m.Attempts = u.Attempts
	}
	c.Move(l, m, StateAfter(WorkDelivery, u.Result), detail)
	return Applied
}
