package persistence

import (
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// Row is a message as a write transaction loaded it: what a decision reads
// and changes. Both stores load rows, let the functions of this package
// decide, and write the Changes they return; no store decides on its own.
type Row struct {
	messages.Message
	// ReportTo names the peer owed a delivery_status for this message ("").
	ReportTo string
	// HistoryLen counts the message's history entries (its first entry
	// included); the next entry's ordinal is HistoryLen+1.
	HistoryLen int
	// FinalizedAt is when the message came to rest in its state (see
	// Resting): its retention counts from it. Nil in every other state.
	FinalizedAt *time.Time
	// Second is the message's second history entry when this transaction
	// appended it, or folded a deferral into it (FoldsInto; its At is then
	// zero: kept): the store writes it into the row (see HeldByRow), not
	// as a history row. Nil otherwise (a loaded row does not carry it).
	Second *messages.HistoryEntry
	// Last is the message's last history entry as far as FoldsInto reads
	// it (Attempt, Deferrals): a store loads them for a message in retry
	// only, since a deferral leaves its message in retry and no other
	// entry folds: from the row's second_attempt and second_deferrals at
	// history_len 2 when the row holds that entry (second_state set),
	// else from its history row (a second entry written as a history row,
	// before the row held it, is older than those columns: it reads 0,
	// 0, whatever the row's columns say). The core keeps it as it appends
	// or folds.
	Last messages.HistoryEntry
}

// Resting reports whether a message in s has come to rest here: final
// (delivered, failed, forward_failed), or forwarded (this node's own work is
// done; only the peer's report is owed). Retention counts from then
// (Row.FinalizedAt).
func Resting(s messages.State) bool { return s.Final() || s == messages.StateForwarded }

// WorkRow is one outbox row of a message as a write transaction loaded it.
type WorkRow struct {
	ID     int64
	Kind   WorkKind
	Target string
	// LeaseOwner is "" and LeaseUntil zero when the row is not leased.
	LeaseOwner string
	LeaseUntil time.Time
	LeaseEpoch uint64
	// RetriedAttempt is the message's attempt whose retry made the row due
	// again (Reschedule), 0 when none did: a retry of that attempt again
	// is already recorded (CompletionOf).
	RetriedAttempt int
}

// Leased reports whether w holds a lease live at now.
func (w WorkRow) Leased(now time.Time) bool { return !w.LeaseUntil.IsZero() && w.LeaseUntil.After(now) }

// Lease is w's lease as CompletionOf reads it.
func (w WorkRow) Lease() WorkLease {
	return WorkLease{Owner: w.LeaseOwner, Epoch: w.LeaseEpoch, Retried: w.RetriedAttempt}
}

// LedgerKey names a ledger entry.
type LedgerKey struct {
	MessageID string
	Kind      WorkKind
	Target    string
}

// Loaded is what a write transaction read before deciding: the messages a
// batch names (absent ids are missing), their outbox rows in row order, and
// which of their ledger entries exist. Decisions change it as they go, so
// that a later item of a batch sees what an earlier one did.
type Loaded struct {
	Rows     map[string]*Row
	Work     map[string][]WorkRow
	Recorded map[LedgerKey]bool
}

// NewLoaded returns an empty Loaded for a store to fill.
func NewLoaded() *Loaded {
	return &Loaded{Rows: map[string]*Row{}, Work: map[string][]WorkRow{}, Recorded: map[LedgerKey]bool{}}
}

// Distinct lists the message ids of n items (id(i) is item i's) once each,
// in first-occurrence order: the messages a batch names.
func Distinct(n int, id func(i int) string) []string {
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	for i := range n {
		if k := id(i); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// Each decides the items of one call in input order, in one transaction:
// run loads the messages the items name (ids) and calls fn with what it
// loaded and the changes to fill, then writes them. decide is one of the
// core's decisions (Complete, Status, Resubmit); its results come back in
// input order.
func Each[T, R any](items []T, id func(T) string, decide func(*Loaded, *Changes, T) R,
	run func(ids []string, fn func(*Loaded, *Changes)) error) ([]R, error) {
	res := make([]R, len(items))
	if len(items) == 0 {
		return res, nil
	}
	ids := Distinct(len(items), func(i int) string { return id(items[i]) })
	err := run(ids, func(l *Loaded, c *Changes) {
		for i, it := range items {
			res[i] = decide(l, c, it)
		}
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// HistoryAdd is a history entry to append; its time (At) is the Changes'
// Now.
type HistoryAdd struct {
	MessageID string
	Ordinal   int
	messages.HistoryEntry
}

// WorkAdd is an outbox row to write. It replaces a row the message has of
// the same kind and target (a message has at most one).
type WorkAdd struct {
	MessageID string
	Token     uint64
	Spec      WorkSpec
	// Lease, when set, writes the row leased under epoch 0 (not
	// ring-fenced).
	Lease *Lease
	// Publish writes the row marked relayed: its writer publishes it to
	// the delivery bus (NewMessage.Publish).
	Publish bool
}

// Reschedule makes an outbox row due again at DueAt, unleased and not
// relayed: a retry's row goes back to the outbox for the bus's relay,
// which publishes it again once it is due (see bus.go), rather than a
// bus message waiting for it, naked, in its consumer. Attempt is the
// row's RetriedAttempt from then on.
type Reschedule struct {
	Row     int64
	DueAt   time.Time
	Attempt int
}

// Changes are the writes one transaction's decisions came to, in decision
// order, for the store to write: a store writes them in this order of kinds
// (ledger removals, ledger entries, finished rows, rescheduled rows, moved
// messages, history, new work, purged messages, counts), with a statement
// or a few per kind.
type Changes struct {
	// Now is the time of every change (updated_at, history, ledger, work).
	Now time.Time
	// Moved are the messages whose row changed, each once, in the order of
	// their first change, as they end: a store writes their state, reason,
	// queued_at, finalized_at, attempts and history_len, and updated_at =
	// Now; for those Restarted (a resubmit) also frontend, dest_smsc and
	// submitted_at.
	Moved     []*Row
	Restarted map[string]bool
	History   []HistoryAdd
	// Folded are history rows (entries later than the second) a deferral
	// was folded into (FoldsInto): a store updates their detail,
	// deferrals, last_at and resend; the rest of each row stays.
	Folded []HistoryAdd
	// Unledgered are messages whose every ledger entry goes (a resubmit);
	// it is written before Ledger.
	Unledgered []string
	Ledger     []LedgerEntry
	// Finished are outbox rows to delete.
	Finished    []int64
	Rescheduled []Reschedule
	Work        []WorkAdd
	// Purged are messages to delete with their history and ledger entries
	// (they have no outbox rows: see Purge).
	Purged []*Row
	// Refs are SMSC message ids to keep (a delivered outcome's; one of the
	// same frontend and id is replaced: an SMSC that reuses its ids names
	// the newest message), Receipts the stats of receipts to write on
	// theirs.
	Refs     []SMSCRef
	Receipts []ReceiptMark
	// Counts are the deltas of the maintained counters that these changes
	// make (see Counts); a store writes them in the same transaction.
	Counts Counts

	moved map[string]bool
	due   map[int64]int // row -> index in Rescheduled
}

// NewChanges starts the changes of a transaction at now (normalized).
func NewChanges(now time.Time) *Changes {
	return &Changes{Now: Normalize(now), moved: map[string]bool{}, due: map[int64]int{}, Restarted: map[string]bool{},
		Counts: Counts{}}
}

// Empty reports whether there is nothing to write.
func (c *Changes) Empty() bool {
	return len(c.Moved)+len(c.History)+len(c.Folded)+len(c.Unledgered)+len(c.Ledger)+len(c.Finished)+len(c.Rescheduled)+len(c.Work)+
		len(c.Purged)+len(c.Counts)+len(c.Refs)+len(c.Receipts) == 0
}

// touch marks m changed.
func (c *Changes) touch(m *Row) {
	m.UpdatedAt = c.Now
	if !c.moved[m.ID] {
		c.moved[m.ID] = true
		c.Moved = append(c.Moved, m)
	}
}

// appendHistory appends history entry e to m at Now: its second into the
// row (Row.Second), any later one as a history row (HeldByRow). A
// deferral that folds into m's last entry (FoldsInto) updates that entry
// instead.
func (c *Changes) appendHistory(m *Row, e messages.HistoryEntry) {
	e.At = c.Now
	c.touch(m)
	if FoldsInto(m.Last, e) {
		c.fold(m, Folded(m.Last, e, c.Now))
		return
	}
	m.HistoryLen++
	m.Last = e
	if HeldByRow(m.HistoryLen) {
		m.Second = &e
	} else {
		c.History = append(c.History, HistoryAdd{MessageID: m.ID, Ordinal: m.HistoryLen, HistoryEntry: e})
	}
}

// fold makes f m's last entry (ordinal HistoryLen), where that entry is to
// be written: in the row (Second; an entry loaded, not appended here,
// keeps its time: At zero), among the history rows this transaction
// appends or folds, or as a folded history row.
func (c *Changes) fold(m *Row, f messages.HistoryEntry) {
	m.Last = f
	if HeldByRow(m.HistoryLen) {
		m.Second = &f
		return
	}
	for _, list := range []*[]HistoryAdd{&c.History, &c.Folded} {
		for i, h := range *list {
			if h.MessageID == m.ID && h.Ordinal == m.HistoryLen {
				(*list)[i].HistoryEntry = f
				return
			}
		}
	}
	c.Folded = append(c.Folded, HistoryAdd{MessageID: m.ID, Ordinal: m.HistoryLen, HistoryEntry: f})
}

// Move puts m in state next with a history entry. forward_queued keeps
// queued_at (or sets it to now); every other state clears it. A message
// that comes to rest (Resting) has finalized_at set to now, any other has it
// cleared. A message with an origin to report to that becomes delivered or
// failed gets its status work, due now, so the delivery_status leaves
// through the outbox; one submitted over SMPP with a receipt asked for
// gets its receipt work when it becomes final (forward_failed too).
func (c *Changes) Move(l *Loaded, m *Row, next messages.State, detail string) {
	c.MoveWith(l, m, next, messages.HistoryEntry{Detail: detail})
}

// MoveWith is Move with history entry e (its State and At are next and
// Now): an entry that says more than its detail (Attempt, Deferrals).
func (c *Changes) MoveWith(l *Loaded, m *Row, next messages.State, e messages.HistoryEntry) {
	switch {
	case next != messages.StateForwardQueued:
		m.QueuedAt = nil
	case m.QueuedAt == nil:
		t := c.Now
		m.QueuedAt = &t
	}
	m.FinalizedAt = nil
	if Resting(next) {
		t := c.Now
		m.FinalizedAt = &t
	}
	c.Counts.State(m.State, -1)
	c.Counts.State(next, 1)
	m.State = next
	e.State = next
	c.appendHistory(m, e)
	if esme, failedOnly, ok := ReceiptTarget(m.ReportTo); ok {
		if next.Final() && !(failedOnly && next == messages.StateDelivered) {
			c.AddWork(l, m.ID, m.Token, WorkSpec{Kind: WorkReceipt, Target: esme, DueAt: c.Now})
		}
	} else if m.ReportTo != "" && (next == messages.StateDelivered || next == messages.StateFailed) {
		c.AddWork(l, m.ID, m.Token, WorkSpec{Kind: WorkStatus, Target: m.ReportTo, DueAt: c.Now})
	}
}

// Record writes a ledger entry at Now and notes it in l; an entry that
// exists is kept (the first final outcome wins).
func (c *Changes) Record(l *Loaded, k LedgerKey, r Result, detail string) {
	if l.Recorded[k] {
		return
	}
	l.Recorded[k] = true
	c.Ledger = append(c.Ledger, LedgerEntry{MessageID: k.MessageID, Kind: k.Kind, Target: k.Target, Result: r, At: c.Now, Detail: detail})
}

// Unledger removes every ledger entry of message id, those recorded earlier
// in this transaction included.
func (c *Changes) Unledger(l *Loaded, id string) {
	for k := range l.Recorded {
		if k.MessageID == id {
			delete(l.Recorded, k)
		}
	}
	kept := c.Ledger[:0]
	for _, e := range c.Ledger {
		if e.MessageID != id {
			kept = append(kept, e)
		}
	}
	c.Ledger = kept
	c.Unledgered = append(c.Unledgered, id)
}

// Finish removes outbox row `row` of message id (from l too: later
// decisions do not see it).
func (c *Changes) Finish(l *Loaded, id string, row int64) {
	if _, ok := c.due[row]; ok {
		kept := c.Rescheduled[:0]
		for _, r := range c.Rescheduled {
			if r.Row != row {
				kept = append(kept, r)
			}
		}
		c.Rescheduled = kept
		c.due = make(map[int64]int, len(kept))
		for i, r := range kept {
			c.due[r.Row] = i
		}
	}
	c.Finished = append(c.Finished, row)
	l.Work[id] = slices.DeleteFunc(l.Work[id], func(w WorkRow) bool {
		if w.ID == row {
			c.Counts.Work(w.Kind, w.Target, -1)
		}
		return w.ID == row
	})
}

// Reschedule makes outbox row `row` of message id due at due, unleased (in
// l too) and not relayed (see the type), the retry of attempt (its
// RetriedAttempt, in l too; 0 for none). A zero due means now.
func (c *Changes) Reschedule(l *Loaded, id string, row int64, due time.Time, attempt int) {
	if due.IsZero() {
		due = c.Now
	}
	r := Reschedule{Row: row, DueAt: Normalize(due), Attempt: attempt}
	if i, ok := c.due[row]; ok {
		c.Rescheduled[i] = r
	} else {
		c.due[row] = len(c.Rescheduled)
		c.Rescheduled = append(c.Rescheduled, r)
	}
	for i, w := range l.Work[id] {
		if w.ID == row {
			l.Work[id][i].LeaseOwner, l.Work[id][i].LeaseUntil, l.Work[id][i].LeaseEpoch = "", time.Time{}, 0
			l.Work[id][i].RetriedAttempt = attempt
		}
	}
}

// AddWork writes an outbox row for message id (token its token), replacing
// one already added for the same kind and target, or the row the message has
// of that kind and target (in l; the store replaces it). A zero DueAt means
// now.
func (c *Changes) AddWork(l *Loaded, id string, token uint64, spec WorkSpec) {
	if spec.DueAt.IsZero() {
		spec.DueAt = c.Now
	}
	spec.DueAt = Normalize(spec.DueAt)
	for i, w := range c.Work {
		if w.MessageID == id && w.Spec.Kind == spec.Kind && w.Spec.Target == spec.Target {
			c.Work[i].Spec = spec
			return
		}
	}
	c.Work = append(c.Work, WorkAdd{MessageID: id, Token: token, Spec: spec})
	for _, w := range l.Work[id] {
		if w.Kind == spec.Kind && w.Target == spec.Target {
			return // a replacement: the count stays
		}
	}
	c.Counts.Work(spec.Kind, spec.Target, 1)
}

// FailWork fails m in state with reason: its outbox rows of the given kinds
// go, with a failed ledger entry each; a message that had no such row gets
// one entry for fallback instead (none when fallback's target is empty), so
// that a late outcome of its work is still recognised.
func (c *Changes) FailWork(l *Loaded, m *Row, state messages.State, reason, detail string, fallback LedgerKey, kinds ...WorkKind) {
	removed := 0
	for _, w := range append([]WorkRow(nil), l.Work[m.ID]...) {
		for _, k := range kinds {
			if w.Kind == k {
				c.Finish(l, m.ID, w.ID)
				c.Record(l, LedgerKey{MessageID: m.ID, Kind: w.Kind, Target: w.Target}, ResultFailed, detail)
				removed++
			}
		}
	}
	if removed == 0 && fallback.Target != "" {
		fallback.MessageID = m.ID
		c.Record(l, fallback, ResultFailed, detail)
	}
	m.Reason = reason
	c.Move(l, m, state, detail)
}
