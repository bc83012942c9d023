package sqlite

import (
	"context"
	"database/sql"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// msgRow is a message as a write transaction reads and changes it.
type msgRow struct {
	messages.Message
	reportTo string
}

// rowColumns are scanned by scanRow: messageColumns, then report_to.
const rowColumns = messageColumns + `, report_to`

func scanRow(sc interface{ Scan(...any) error }) (*msgRow, error) {
	r := &msgRow{}
	m, err := scanMessage(sc, &r.reportTo)
	r.Message = m
	return r, err
}

// collectRows scans every row of rows, in order.
func collectRows(rows *sql.Rows) ([]*msgRow, error) {
	var out []*msgRow
	err := scanEach(rows, func(r *sql.Rows) error {
		m, err := scanRow(r)
		out = append(out, m)
		return err
	})
	return out, err
}

// loadRows reads the messages with the given ids (those that exist).
func loadRows(ctx context.Context, q querier, ids []string) (map[string]*msgRow, error) {
	out := make(map[string]*msgRow, len(ids))
	err := chunks(len(ids), func(lo, hi int) error {
		rows, err := q.QueryContext(ctx, `SELECT `+rowColumns+` FROM messages WHERE id IN (`+params(hi-lo)+`)`, anys(ids[lo:hi])...)
		if err != nil {
			return err
		}
		list, err := collectRows(rows)
		for _, m := range list {
			out[m.ID] = m
		}
		return err
	})
	return out, err
}

// workRow is one outbox row of a message.
type workRow struct {
	id         int64
	kind       persistence.WorkKind
	target     string
	leaseUntil sql.NullInt64
	leaseOwner sql.NullString
	leaseEpoch int64 // the uint64's bit pattern
}

// lease is w's lease as persistence.CompletionOf reads it.
func (w workRow) lease() persistence.WorkLease {
	return persistence.WorkLease{Owner: w.leaseOwner.String, Epoch: uint64(w.leaseEpoch)}
}

// leased reports whether w holds a lease live at now.
func (w workRow) leased(now int64) bool { return w.leaseUntil.Valid && w.leaseUntil.Int64 > now }

// loadWork reads the outbox rows of the messages with the given ids, by
// message id, in row order.
func loadWork(ctx context.Context, q querier, ids []string) (map[string][]workRow, error) {
	out := map[string][]workRow{}
	err := chunks(len(ids), func(lo, hi int) error {
		rows, err := q.QueryContext(ctx, `SELECT id, kind, target, message_id, lease_until, lease_owner, lease_epoch FROM outbox
			WHERE message_id IN (`+params(hi-lo)+`) ORDER BY id`, anys(ids[lo:hi])...)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			var w workRow
			var kind, id string
			err := r.Scan(&w.id, &kind, &w.target, &id, &w.leaseUntil, &w.leaseOwner, &w.leaseEpoch)
			w.kind = persistence.WorkKind(kind)
			out[id] = append(out[id], w)
			return err
		})
	})
	return out, err
}

// changes are the writes of one transaction, decided in memory in input
// order (so that later decisions see earlier ones) and then written with
// one statement per table.
type changes struct {
	at      int64
	moved   []*msgRow // messages whose row changed, in order
	isMoved map[string]bool
	hist    []historyEntry
	ledger  []persistence.LedgerEntry
	deleted []any           // outbox row ids
	due     map[int64]int64 // outbox row id -> new due_at
	work    []newWork
}

func newChanges(at int64) *changes {
	return &changes{at: at, isMoved: map[string]bool{}, due: map[int64]int64{}}
}

// move puts m in state next with a history entry. forward_queued keeps
// queued_at (or sets it to now); every other state clears it. A message with
// an origin to report to that becomes delivered or failed gets its status
// work, due now, so the delivery_status leaves through the outbox.
func (c *changes) move(m *msgRow, next messages.State, detail string) {
	var old sql.NullInt64
	if m.QueuedAt != nil {
		old = sql.NullInt64{Int64: toDB(*m.QueuedAt), Valid: true}
	}
	m.State, m.UpdatedAt, m.QueuedAt = next, fromDB(c.at), timeOrNil(queuedAt(next, old, c.at))
	if !c.isMoved[m.ID] {
		c.isMoved[m.ID] = true
		c.moved = append(c.moved, m)
	}
	c.hist = append(c.hist, historyEntry{messageID: m.ID, state: next, at: c.at, detail: detail})
	if m.reportTo != "" && (next == messages.StateDelivered || next == messages.StateFailed) {
		c.work = append(c.work, newWork{messageID: m.ID,
			spec: persistence.WorkSpec{Kind: persistence.WorkStatus, Target: m.reportTo, DueAt: fromDB(c.at)}})
	}
}

// record writes a ledger entry at the transaction's time.
func (c *changes) record(id string, kind persistence.WorkKind, target string, r persistence.Result, detail string) {
	c.ledger = append(c.ledger, persistence.LedgerEntry{MessageID: id, Kind: kind, Target: target, Result: r, At: fromDB(c.at), Detail: detail})
}

// finish removes an outbox row.
func (c *changes) finish(rowID int64) {
	delete(c.due, rowID)
	c.deleted = append(c.deleted, rowID)
}

// reschedule makes an outbox row due at due, unleased.
func (c *changes) reschedule(rowID, due int64) { c.due[rowID] = due }

// failWork fails m in state with reason, removes its work of the given kinds
// with a failed ledger entry for each row, or, when it had no such row, one
// entry for fallback (skipped when its target is empty) so that a late
// outcome is still recognised.
func (c *changes) failWork(m *msgRow, work []workRow, state messages.State, reason, detail string,
	fallback workRow, kinds ...persistence.WorkKind) {
	removed := 0
	for _, w := range work {
		for _, k := range kinds {
			if w.kind == k {
				c.finish(w.id)
				c.record(m.ID, w.kind, w.target, persistence.ResultFailed, detail)
				removed++
			}
		}
	}
	if removed == 0 && fallback.target != "" {
		c.record(m.ID, fallback.kind, fallback.target, persistence.ResultFailed, detail)
	}
	m.Reason = reason
	c.move(m, state, detail)
}

// settleSQL sets n messages' (id, state, reason, queued_at), all updated
// at the first parameter.
func settleSQL(n int) string {
	return `UPDATE messages SET state = v.column2, reason = v.column3, queued_at = v.column4, updated_at = ?
		FROM (VALUES ` + tuples(n, 4) + `) AS v WHERE messages.id = v.column1`
}

// rescheduleSQL makes n outbox rows (id, due_at) due again, unleased.
func rescheduleSQL(n int) string {
	return `UPDATE outbox SET due_at = v.column2, lease_owner = NULL, lease_until = NULL, lease_epoch = 0
		FROM (VALUES ` + tuples(n, 2) + `) AS v WHERE outbox.id = v.column1`
}

// write applies the changes.
func (c *changes) write(ctx context.Context, tx querier) error {
	if err := insertLedger(ctx, tx, c.ledger); err != nil {
		return err
	}
	if err := chunks(len(c.deleted), func(lo, hi int) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE id IN (`+params(hi-lo)+`)`, c.deleted[lo:hi]...)
		return err
	}); err != nil {
		return err
	}
	dueArgs := make([]any, 0, 2*len(c.due))
	for id, due := range c.due {
		dueArgs = append(dueArgs, id, due)
	}
	if err := chunks(len(c.due), func(lo, hi int) error {
		_, err := tx.ExecContext(ctx, rescheduleSQL(hi-lo), dueArgs[2*lo:2*hi]...)
		return err
	}); err != nil {
		return err
	}
	msgArgs := make([]any, 0, 4*len(c.moved))
	for _, m := range c.moved {
		var queued sql.NullInt64
		if m.QueuedAt != nil {
			queued = sql.NullInt64{Int64: toDB(*m.QueuedAt), Valid: true}
		}
		msgArgs = append(msgArgs, m.ID, string(m.State), m.Reason, queued)
	}
	if err := chunks(len(c.moved), func(lo, hi int) error {
		_, err := tx.ExecContext(ctx, settleSQL(hi-lo), append([]any{c.at}, msgArgs[4*lo:4*hi]...)...)
		return err
	}); err != nil {
		return err
	}
	if err := appendHistory(ctx, tx, c.hist); err != nil {
		return err
	}
	return insertWork(ctx, tx, c.at, c.work)
}

// sweep finds candidates with one statement (it selects rowColumns, at
// most limit rows), reads their outbox rows and lets decide change each
// (decide reports whether it did), then writes the changes. It returns the
// changed messages in candidate order.
func (s *Store) sweep(ctx context.Context, op string, now int64, candidates string, args []any,
	decide func(m *msgRow, work []workRow, c *changes) bool) ([]messages.Message, error) {
	if err := s.check(op); err != nil {
		return nil, err
	}
	var out []messages.Message
	err := s.write(ctx, op, func(tx querier) error {
		rows, err := tx.QueryContext(ctx, candidates, args...)
		if err != nil {
			return err
		}
		list, err := collectRows(rows)
		if err != nil || len(list) == 0 {
			return err
		}
		ids := make([]string, len(list))
		for i, m := range list {
			ids[i] = m.ID
		}
		work, err := loadWork(ctx, tx, ids)
		if err != nil {
			return err
		}
		c := newChanges(now)
		for _, m := range list {
			if decide(m, work[m.ID], c) {
				out = append(out, m.Message)
			}
		}
		return c.write(ctx, tx)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
