package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// message is a locked message as a write transaction reads and changes it.
type message struct {
	messages.Message
	reportTo string
}

// workRow is one locked outbox row of a message.
type workRow struct {
	id         int64
	kind       persistence.WorkKind
	target     string
	leaseUntil *time.Time
	leaseOwner *string
	leaseEpoch int64 // the uint64's bit pattern
}

// leased reports whether w holds a lease live at now.
func (w workRow) leased(now time.Time) bool { return w.leaseUntil != nil && w.leaseUntil.After(now) }

// rowsOf lists the ids of the rows of kind and target among rows, and
// their leases.
func rowsOf(rows []workRow, kind persistence.WorkKind, target string) ([]int64, []persistence.WorkLease) {
	var (
		ids    []int64
		leases []persistence.WorkLease
	)
	for _, w := range rows {
		if w.kind == kind && w.target == target {
			l := persistence.WorkLease{Epoch: uint64(w.leaseEpoch)}
			if w.leaseOwner != nil {
				l.Owner = *w.leaseOwner
			}
			ids = append(ids, w.id)
			leases = append(leases, l)
		}
	}
	return ids, leases
}

const (
	// lockWorkSQL locks the outbox rows of the messages, in id order. It
	// selects by message alone (the caller matches kind and target): a
	// condition on kind and target too would let the planner pick
	// outbox_claim, whose (kind, target) prefix can match a whole queue.
	lockWorkSQL = `
SELECT o.id, o.kind, o.target, o.message_id, o.lease_until, o.lease_owner, o.lease_epoch
FROM outbox o JOIN unnest($1::text[]) AS k(id) ON o.message_id = k.id
ORDER BY o.id
FOR UPDATE OF o`
)

// lockMessagesSQL locks messages (a list of distinct ids) in id order and
// reads them. FOR NO KEY UPDATE, not FOR UPDATE: it is what an UPDATE that
// keeps the key takes anyway.
var lockMessagesSQL = `
SELECT ` + columns("m") + `, m.report_to FROM messages m JOIN unnest($1::text[]) AS k(id) ON m.id = k.id
ORDER BY m.id
FOR NO KEY UPDATE OF m`

// locked is what one round of a write transaction locked and read.
type locked struct {
	msgs map[string]*message
	work map[string][]workRow // by message id, in row order
}

// queueMessages queues the lock of the messages ids into b; their rows
// land in l.msgs.
func (l *locked) queueMessages(b *pgx.Batch, ids []string) {
	l.msgs = make(map[string]*message, len(ids))
	b.Queue(lockMessagesSQL, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			m := &message{}
			var err error
			if m.Message, err = scanMessage(rows, &m.reportTo); err != nil {
				return err
			}
			l.msgs[m.ID] = m
		}
		return rows.Err()
	})
}

// queue queues into b the locks of the messages ids and of their outbox
// rows, in the global lock order: outbox rows first.
func (l *locked) queue(b *pgx.Batch, ids []string) {
	l.work = map[string][]workRow{}
	b.Queue(lockWorkSQL, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var w workRow
			var id string
			if err := rows.Scan(&w.id, &w.kind, &w.target, &id, &w.leaseUntil, &w.leaseOwner, &w.leaseEpoch); err != nil {
				return err
			}
			l.work[id] = append(l.work[id], w)
		}
		return rows.Err()
	})
	l.queueMessages(b, ids)
}

// applyChangesSQL writes changes decided in memory: messages moved (each
// at most once) with their history, ledger entries, outbox rows finished
// and rescheduled, and status work (replacing any the message had for that
// origin).
const applyChangesSQL = `
WITH moved AS (
	UPDATE messages m SET state = i.state, reason = i.reason, queued_at = i.queued_at,
		updated_at = $1, history_len = m.history_len + 1
	FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[]) AS i(id, state, reason, queued_at, detail)
	WHERE m.id = i.id
	RETURNING m.id, m.history_len, m.state, i.detail
),
transitions AS (
	INSERT INTO history (message_id, ordinal, state, at, detail)
	SELECT id, history_len, state, $1, detail FROM moved
),
recorded AS (
	INSERT INTO ledger (message_id, kind, target, result, at, detail)
	SELECT message_id, kind, target, result, $1, detail
	FROM unnest($7::text[], $8::text[], $9::text[], $10::text[], $11::text[]) AS l(message_id, kind, target, result, detail)
	ON CONFLICT (message_id, kind, target) DO NOTHING
),
finished AS (
	DELETE FROM outbox o USING unnest($12::bigint[]) AS f(id) WHERE o.id = f.id
),
rescheduled AS (
	UPDATE outbox o SET due_at = r.due_at, lease_owner = NULL, lease_until = NULL, lease_epoch = 0
	FROM unnest($13::bigint[], $14::timestamptz[]) AS r(id, due_at)
	WHERE o.id = r.id
),
reports AS (
	SELECT * FROM unnest($15::text[], $16::text[], $17::bigint[]) AS r(message_id, target, token)
),
replaced AS (
	DELETE FROM outbox o USING reports r
	WHERE o.message_id = r.message_id AND o.kind = 'status' AND o.target = r.target
),
reported AS (
	INSERT INTO outbox (kind, target, message_id, token, due_at, created_at)
	SELECT 'status', target, message_id, token, $1, $1 FROM reports
)
SELECT count(*) FROM moved`

// changes are the writes of one round, decided in memory and written by
// applyChangesSQL in one statement. A message moves at most once a round.
type changes struct {
	now time.Time
	// messages moved
	ids, states, reasons, details []string
	queuedAt                      []*time.Time
	// ledger entries
	lIDs, lKinds, lTargets, lResults, lDetails []string
	// outbox rows
	finished, retried []int64
	retryAt           []time.Time
	// status work
	reportIDs, reportTargets []string
	reportTokens             []int64
}

func newChanges(now time.Time) *changes { return &changes{now: now} }

// move puts m in state next with a history entry. forward_queued keeps
// queued_at (or sets it to now); every other state clears it. A message with
// an origin to report to that becomes delivered or failed gets its status
// work, due now, so the delivery_status leaves through the outbox.
func (c *changes) move(m *message, next messages.State, detail string) {
	m.State, m.UpdatedAt = next, c.now
	switch {
	case next != messages.StateForwardQueued:
		m.QueuedAt = nil
	case m.QueuedAt == nil:
		t := c.now
		m.QueuedAt = &t
	}
	c.ids = append(c.ids, m.ID)
	c.states = append(c.states, string(next))
	c.reasons = append(c.reasons, m.Reason)
	c.details = append(c.details, detail)
	c.queuedAt = append(c.queuedAt, m.QueuedAt)
	if m.reportTo != "" && (next == messages.StateDelivered || next == messages.StateFailed) {
		c.reportIDs = append(c.reportIDs, m.ID)
		c.reportTargets = append(c.reportTargets, m.reportTo)
		c.reportTokens = append(c.reportTokens, int64(m.Token))
	}
}

// record writes a ledger entry at the round's time.
func (c *changes) record(id string, kind persistence.WorkKind, target string, r persistence.Result, detail string) {
	c.lIDs = append(c.lIDs, id)
	c.lKinds = append(c.lKinds, string(kind))
	c.lTargets = append(c.lTargets, target)
	c.lResults = append(c.lResults, string(r))
	c.lDetails = append(c.lDetails, detail)
}

// finish removes outbox rows.
func (c *changes) finish(rowIDs ...int64) { c.finished = append(c.finished, rowIDs...) }

// reschedule makes outbox rows due at due, unleased.
func (c *changes) reschedule(due time.Time, rowIDs ...int64) {
	for _, id := range rowIDs {
		c.retried = append(c.retried, id)
		c.retryAt = append(c.retryAt, due)
	}
}

// failWork fails m in state with reason, removes its work of the given kinds
// with a failed ledger entry for each row, or, when it had no such row, one
// entry for fallback (skipped when its target is empty) so that a late
// outcome is still recognised.
func (c *changes) failWork(m *message, work []workRow, state messages.State, reason, detail string,
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

// apply writes the changes (nothing when there are none).
func (c *changes) apply(ctx context.Context, tx pgx.Tx) error {
	if len(c.ids)+len(c.lIDs)+len(c.finished)+len(c.retried) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, applyChangesSQL, c.now,
		c.ids, c.states, c.reasons, c.queuedAt, c.details,
		c.lIDs, c.lKinds, c.lTargets, c.lResults, c.lDetails,
		c.finished, c.retried, c.retryAt,
		c.reportIDs, c.reportTargets, c.reportTokens)
	return err
}

// sweep runs a sweep in one transaction: the candidates statement selects
// message ids (with BEGIN, in one round trip), then their outbox rows and
// they are locked, decide changes each that still qualifies (it reports
// whether it did: another transaction may have moved it since), and the
// changes are applied. It returns the changed messages in candidate order.
func (s *Store) sweep(ctx context.Context, op string, now time.Time, candidates string, args []any,
	decide func(m *message, work []workRow, c *changes) bool) ([]messages.Message, error) {
	if s.closed.Load() {
		return nil, s.fail(op, persistence.ErrClosed)
	}
	var ids []string
	first := &pgx.Batch{}
	first.Queue(candidates, args...).Query(func(rows pgx.Rows) error {
		var err error
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	out := []messages.Message{}
	err := s.inTx(ctx, first, func(tx pgx.Tx) error {
		if len(ids) == 0 {
			return nil
		}
		var l locked
		b := &pgx.Batch{}
		l.queue(b, ids)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		c := newChanges(now)
		for _, id := range ids {
			if m, ok := l.msgs[id]; ok && decide(m, l.work[id], c) {
				out = append(out, m.Message)
			}
		}
		return c.apply(ctx, tx)
	})
	if err != nil {
		return nil, s.fail(op, err)
	}
	return out, nil
}
