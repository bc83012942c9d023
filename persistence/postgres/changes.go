package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The store's half of the decision core (persistence.Changes): lock and
// load the rows a batch names, let the core decide, write what it decided.
// Nothing here decides.

const (
	// lockWorkSQL locks the outbox rows of the messages, in id order. It
	// selects by message alone (the caller matches kind and target): a
	// condition on kind and target too would let the planner pick
	// outbox_claim, whose (kind, target) prefix can match a whole queue.
	lockWorkSQL = `
SELECT o.id, o.kind, o.target, o.message_id, o.lease_until, o.lease_owner, o.lease_epoch, o.retried_attempt
FROM outbox o JOIN unnest($1::text[]) AS k(id) ON o.message_id = k.id
ORDER BY o.id
FOR UPDATE OF o`

	// workCountSQL counts the outbox rows of the messages, read once they
	// are locked (see queueLoad): a row committed after lockWorkSQL read
	// them (by a transaction that held the message meanwhile, or by the
	// Accept that created it) is counted here and was not locked there.
	workCountSQL = `
SELECT o.message_id, count(*) FROM outbox o JOIN unnest($1::text[]) AS k(id) ON o.message_id = k.id
GROUP BY o.message_id`

	// ledgerKeysSQL reads the ledger keys of the messages (their rows are
	// locked: nobody else writes their ledger meanwhile).
	ledgerKeysSQL = `
SELECT l.message_id, l.kind, l.target FROM ledger l JOIN unnest($1::text[]) AS k(id) ON l.message_id = k.id`
)

// lockMessages locks messages m (a list of distinct ids, $1) in id order
// and reads cols of them, from extra joined too. FOR NO KEY UPDATE, not
// FOR UPDATE: it is what an UPDATE that keeps the key takes anyway.
func lockMessages(cols, extra string) string {
	return `
SELECT ` + cols + `
FROM messages m JOIN unnest($1::text[]) AS k(id) ON m.id = k.id` + extra + `
ORDER BY m.id
FOR NO KEY UPDATE OF m`
}

// lockMessagesSQL locks messages and reads them as a decision needs them
// (scanRow), with the attempt and deferrals of each one's last history
// entry (persistence.Row.Last): 0, 0 unless the message is in retry; the
// row's own when it holds that entry (lastHeld), else its history row's
// (lastEntry: one index lookup, for a message in retry only).
var lockMessagesSQL = lockMessages(columns("m")+`, m.report_to, m.history_len, m.finalized_at,
	CASE WHEN m.state <> 'retry' THEN 0 WHEN `+lastHeld+` THEN m.second_attempt ELSE coalesce(h.attempt, 0) END,
	CASE WHEN m.state <> 'retry' THEN 0 WHEN `+lastHeld+` THEN m.second_deferrals ELSE coalesce(h.deferrals, 0) END`,
	lastEntry)

// lastHeld holds when a message m's last history entry is the second,
// held by its row (persistence.HeldByRow; the first is never a retry's):
// at history_len 2 with second_state set. A row written before the row
// held that entry (an empty second_state) has it as a history row, as
// apiColumns reads its detail.
const lastHeld = `m.history_len = 2 AND m.second_state <> ''`

// lastEntry joins h, the last history entry of a message m in retry whose
// last entry is a history row (not lastHeld).
const lastEntry = `
LEFT JOIN LATERAL (SELECT h.attempt, h.deferrals FROM history h
	WHERE m.state = 'retry' AND NOT (` + lastHeld + `) AND h.message_id = m.id AND h.ordinal = m.history_len) h ON true`

// errStale is a load (queueLoad) that found, once it held its messages,
// outbox rows of theirs that it had not locked. Its transaction is rolled
// back and runs again (fresh).
var errStale = errors.New("outbox rows written while their messages were being locked")

// fresh runs attempt, a transaction that loads with queueLoad, again until
// its load is not stale (errStale). A stale load means that another
// transaction committed meanwhile, so this ends.
func fresh(attempt func() error) error {
	for {
		if err := attempt(); !errors.Is(err, errStale) {
			return err
		}
	}
}

// queueLoad queues into b the locks and reads of the messages ids, in the
// global lock order (outbox rows first, then the messages; see the package
// doc), and their ledger keys; the results land in l.
//
// The outbox rows are read when the statement that locks them starts: a
// transaction that holds a message meanwhile can replace its rows, and the
// rows it writes are not among those locked, whose list would then be stale
// once the message is ours (a decision would miss those rows, and count a
// replacement of one as a new row). Nobody adds a row to a message without
// holding it (or creating it, Accept), and nobody else removes a row this
// load locked, so once the message is locked its rows are counted again:
// when there are more than were locked, the load fails with errStale, and
// the caller runs its transaction again (fresh). Locking the new rows instead, while
// holding the message, could wait for a transaction that holds one of them
// and waits for the message (a claim, another load).
func queueLoad(b *pgx.Batch, l *persistence.Loaded, ids []string) {
	b.Queue(lockWorkSQL, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				w     persistence.WorkRow
				id    string
				until *time.Time
				owner *string
				epoch int64
			)
			if err := rows.Scan(&w.ID, &w.Kind, &w.Target, &id, &until, &owner, &epoch, &w.RetriedAttempt); err != nil {
				return err
			}
			w.LeaseUntil, w.LeaseEpoch = utcOrZero(until), uint64(epoch)
			if owner != nil {
				w.LeaseOwner = *owner
			}
			l.Work[id] = append(l.Work[id], w)
		}
		return rows.Err()
	})
	b.Queue(lockMessagesSQL, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			m := &persistence.Row{}
			var err error
			if m.Message, err = scanMessage(rows, &m.ReportTo, &m.HistoryLen, &m.FinalizedAt, &m.Last.Attempt, &m.Last.Deferrals); err != nil {
				return err
			}
			m.FinalizedAt = utcOrNil(m.FinalizedAt)
			l.Rows[m.ID] = m
		}
		return rows.Err()
	})
	b.Queue(workCountSQL, ids).Query(func(rows pgx.Rows) error {
		stale := false
		for rows.Next() {
			var (
				id string
				n  int
			)
			if err := rows.Scan(&id, &n); err != nil {
				return err
			}
			if _, ok := l.Rows[id]; ok && n != len(l.Work[id]) {
				stale = true
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if stale {
			return errStale
		}
		return nil
	})
	b.Queue(ledgerKeysSQL, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k persistence.LedgerKey
			if err := rows.Scan(&k.MessageID, &k.Kind, &k.Target); err != nil {
				return err
			}
			l.Recorded[k] = true
		}
		return rows.Err()
	})
}

// The statements that write persistence.Changes, one per kind of change,
// each taking its rows as arrays.
const (
	unledgerSQL = `DELETE FROM ledger l USING unnest($1::text[]) AS u(id) WHERE l.message_id = u.id`
	ledgerSQL   = `
INSERT INTO ledger (message_id, kind, target, result, at, detail)
SELECT message_id, kind, target, result, $1, detail
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) AS l(message_id, kind, target, result, detail)
ON CONFLICT (message_id, kind, target) DO NOTHING`
	finishSQL     = `DELETE FROM outbox o USING unnest($1::bigint[]) AS f(id) WHERE o.id = f.id`
	rescheduleSQL = `
UPDATE outbox o SET due_at = r.due_at, retried_attempt = r.attempt, lease_owner = NULL, lease_until = NULL,
	lease_epoch = 0, relayed = false
FROM unnest($1::bigint[], $2::timestamptz[], $3::int[]) AS r(id, due_at, attempt) WHERE o.id = r.id`
	// moveSQL writes moved messages; the second history entry's columns
	// are NULL unless the move appended it (persistence.HeldByRow) or
	// folded a deferral into it (its time NULL then: kept).
	moveSQL = `
UPDATE messages m SET state = i.state, reason = i.reason, queued_at = i.queued_at, attempts = i.attempts,
	frontend = i.frontend, dest_smsc = i.dest_smsc, submitted_at = i.submitted_at, history_len = i.history_len,
	finalized_at = i.finalized_at, second_state = coalesce(i.second_state, m.second_state),
	second_at = coalesce(i.second_at, m.second_at), second_detail = coalesce(i.second_detail, m.second_detail),
	second_attempt = coalesce(i.second_attempt, m.second_attempt),
	second_deferrals = coalesce(i.second_deferrals, m.second_deferrals),
	second_last_at = CASE WHEN i.second_state IS NULL THEN m.second_last_at ELSE i.second_last_at END,
	second_resend = coalesce(i.second_resend, m.second_resend), updated_at = $1
FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::int[], $7::text[], $8::text[],
	$9::timestamptz[], $10::int[], $11::timestamptz[], $12::text[], $13::timestamptz[], $14::text[], $15::int[], $16::int[],
	$17::timestamptz[], $18::boolean[])
	AS i(id, state, reason, queued_at, attempts, frontend, dest_smsc, submitted_at, history_len, finalized_at,
		second_state, second_at, second_detail, second_attempt, second_deferrals, second_last_at, second_resend)
WHERE m.id = i.id`
	historySQL = `
INSERT INTO history (message_id, ordinal, state, at, detail, attempt, deferrals, last_at, resend)
SELECT message_id, ordinal, state, $1, detail, attempt, deferrals, last_at, resend
FROM unnest($2::text[], $3::int[], $4::text[], $5::text[], $6::int[], $7::int[], $8::timestamptz[], $9::boolean[])
	AS h(message_id, ordinal, state, detail, attempt, deferrals, last_at, resend)`
	// historyFoldSQL updates the history rows deferrals were folded into
	// (persistence.Changes.Folded).
	historyFoldSQL = `
UPDATE history h SET detail = f.detail, deferrals = f.deferrals, last_at = f.last_at, resend = f.resend
FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::timestamptz[], $6::boolean[])
	AS f(message_id, ordinal, detail, deferrals, last_at, resend)
WHERE h.message_id = f.message_id AND h.ordinal = f.ordinal`
	// workSQL writes new outbox rows, each replacing the row its message
	// has of the same kind and target. The replaced rows are deleted by
	// replaceWorkSQL, the statement before it.
	replaceWorkSQL = `
DELETE FROM outbox o USING unnest($1::text[], $2::text[], $3::text[]) AS w(message_id, kind, target)
WHERE o.message_id = w.message_id AND o.kind = w.kind AND o.target = w.target`
	workSQL = `
INSERT INTO outbox (kind, target, message_id, token, due_at, created_at)
SELECT kind, target, message_id, token, due_at, $1
FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::timestamptz[]) WITH ORDINALITY
	AS w(kind, target, message_id, token, due_at, ord)
ORDER BY ord`
)

// queueChanges queues into b the statements that write c, in the order
// persistence.Changes names; one round trip sends them all.
func queueChanges(b *pgx.Batch, c *persistence.Changes) {
	if len(c.Unledgered) > 0 {
		b.Queue(unledgerSQL, c.Unledgered)
	}
	if n := len(c.Ledger); n > 0 {
		ids, kinds, targets, results, details := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		for i, e := range c.Ledger {
			ids[i], kinds[i], targets[i], results[i], details[i] = e.MessageID, string(e.Kind), e.Target, string(e.Result), e.Detail
		}
		b.Queue(ledgerSQL, c.Now, ids, kinds, targets, results, details)
	}
	if len(c.Finished) > 0 {
		b.Queue(finishSQL, c.Finished)
	}
	if n := len(c.Rescheduled); n > 0 {
		ids, dues, attempts := make([]int64, n), make([]time.Time, n), make([]int32, n)
		for i, r := range c.Rescheduled {
			ids[i], dues[i], attempts[i] = r.Row, r.DueAt, int32(r.Attempt)
		}
		b.Queue(rescheduleSQL, ids, dues, attempts)
	}
	if n := len(c.Moved); n > 0 {
		var (
			ids, states, reasons, frontends, dests = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			queued, finalized                      = make([]*time.Time, n), make([]*time.Time, n)
			secondAts, secondLasts                 = make([]*time.Time, n), make([]*time.Time, n)
			secondStates, secondDetails            = make([]*string, n), make([]*string, n)
			secondAttempts, secondDeferrals        = make([]*int32, n), make([]*int32, n)
			secondResends                          = make([]*bool, n)
			submitted                              = make([]time.Time, n)
			attempts, lens                         = make([]int32, n), make([]int32, n)
		)
		for i, m := range c.Moved {
			ids[i], states[i], reasons[i], frontends[i], dests[i] = m.ID, string(m.State), m.Reason, m.Frontend, m.DestSMSC
			queued[i], submitted[i], attempts[i], lens[i] = m.QueuedAt, m.SubmittedAt, int32(m.Attempts), int32(m.HistoryLen)
			finalized[i] = m.FinalizedAt
			if e := m.Second; e != nil {
				st := string(e.State)
				a, d := int32(e.Attempt), int32(e.Deferrals)
				secondStates[i], secondDetails[i], secondLasts[i] = &st, &e.Detail, e.LastAt
				secondAttempts[i], secondDeferrals[i], secondResends[i] = &a, &d, &e.Resend
				if !e.At.IsZero() { // zero: a folded entry's, kept
					secondAts[i] = &e.At
				}
			}
		}
		b.Queue(moveSQL, c.Now, ids, states, reasons, queued, attempts, frontends, dests, submitted, lens, finalized,
			secondStates, secondAts, secondDetails, secondAttempts, secondDeferrals, secondLasts, secondResends)
	}
	if n := len(c.History); n > 0 {
		ids, states, details := make([]string, n), make([]string, n), make([]string, n)
		ordinals, attempts, deferrals := make([]int32, n), make([]int32, n), make([]int32, n)
		lasts, resends := make([]*time.Time, n), make([]bool, n)
		for i, h := range c.History {
			ids[i], ordinals[i], states[i], details[i] = h.MessageID, int32(h.Ordinal), string(h.State), h.Detail
			attempts[i], deferrals[i], lasts[i], resends[i] = int32(h.Attempt), int32(h.Deferrals), h.LastAt, h.Resend
		}
		b.Queue(historySQL, c.Now, ids, ordinals, states, details, attempts, deferrals, lasts, resends)
	}
	if n := len(c.Folded); n > 0 {
		ids, details, lasts := make([]string, n), make([]string, n), make([]*time.Time, n)
		ordinals, deferrals, resends := make([]int32, n), make([]int32, n), make([]bool, n)
		for i, h := range c.Folded {
			ids[i], ordinals[i], details[i], deferrals[i], lasts[i] = h.MessageID, int32(h.Ordinal), h.Detail, int32(h.Deferrals), h.LastAt
			resends[i] = h.Resend
		}
		b.Queue(historyFoldSQL, ids, ordinals, details, deferrals, lasts, resends)
	}
	queueRefs(b, c)
	if n := len(c.Work); n > 0 {
		kinds, targets, ids := make([]string, n), make([]string, n), make([]string, n)
		tokens, dues := make([]int64, n), make([]time.Time, n)
		for i, w := range c.Work {
			kinds[i], targets[i], ids[i], tokens[i], dues[i] = string(w.Spec.Kind), w.Spec.Target, w.MessageID, int64(w.Token), w.Spec.DueAt
		}
		b.Queue(replaceWorkSQL, ids, kinds, targets)
		b.Queue(workSQL, c.Now, kinds, targets, ids, tokens, dues)
	}
	if len(c.Purged) > 0 {
		ids := make([]string, len(c.Purged))
		for i, m := range c.Purged {
			ids[i] = m.ID
		}
		queuePurge(b, ids)
	}
	queueCounts(b, c.Counts)
}

// writeChanges writes c in one round trip (nothing when it is empty).
func writeChanges(ctx context.Context, tx conn, c *persistence.Changes) error {
	if c.Empty() {
		return nil
	}
	b := &pgx.Batch{}
	queueChanges(b, c)
	return tx.SendBatch(ctx, b).Close()
}

// decider is decide for op at now, as persistence.Each runs it.
func (s *Store) decider(ctx context.Context, op string, now time.Time) func([]string, func(*persistence.Loaded, *persistence.Changes)) error {
	return func(ids []string, fn func(*persistence.Loaded, *persistence.Changes)) error {
		return s.decide(ctx, op, now, ids, fn)
	}
}

// decide runs one transaction of a batch about the messages ids in three
// round trips: begin, lock and load them; write what fn decided with the
// core; commit. fn runs once, on a load that is not stale (fresh).
func (s *Store) decide(ctx context.Context, op string, now time.Time, ids []string,
	fn func(l *persistence.Loaded, c *persistence.Changes)) error {
	err := fresh(func() error {
		l := persistence.NewLoaded()
		first := &pgx.Batch{}
		queueLoad(first, l, ids)
		return s.inTx(ctx, first, func(tx pgx.Tx) error {
			c := persistence.NewChanges(now)
			fn(l, c)
			return writeChanges(ctx, tx, c)
		})
	})
	return s.fail(op, err)
}

// sweep runs a sweep in one transaction: the candidates statement selects
// message ids (with BEGIN, in one round trip), then their outbox rows and
// they are locked, decide changes each that still qualifies (it reports
// whether it did: another transaction may have moved it since), and the
// changes are written; a stale load runs it all again (fresh). It returns
// the changed messages in candidate order.
func (s *Store) sweep(ctx context.Context, op string, now time.Time, candidates string, args []any,
	decide func(l *persistence.Loaded, c *persistence.Changes, m *persistence.Row) bool) ([]messages.Message, error) {
	if s.closed.Load() {
		return nil, s.fail(op, persistence.ErrClosed)
	}
	var out []messages.Message
	err := fresh(func() error {
		var ids []string
		first := &pgx.Batch{}
		first.Queue(candidates, args...).Query(func(rows pgx.Rows) error {
			var err error
			ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		out = []messages.Message{}
		return s.inTx(ctx, first, func(tx pgx.Tx) error {
			if len(ids) == 0 {
				return nil
			}
			l := persistence.NewLoaded()
			b := &pgx.Batch{}
			queueLoad(b, l, ids)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			c := persistence.NewChanges(now)
			out = persistence.Sweep(l, c, ids, decide)
			return writeChanges(ctx, tx, c)
		})
	})
	if err != nil {
		return nil, s.fail(op, err)
	}
	return out, nil
}
