package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The store's half of the decision core (persistence.Changes): load the
// rows a batch names, let the core decide, write what it decided. Nothing
// here decides.

// rowColumns are scanned by scanRow: messageColumns, then report_to,
// history_len, finalized_at and lastColumns.
const rowColumns = messageColumns + `, report_to, history_len, finalized_at, ` + lastColumns

// lastColumns are the attempt and deferrals of a message's last history
// entry, for persistence.Row.Last: 0, 0 unless the message is in retry;
// the row's own when it holds that entry (lastHeld), else its history
// row's, h (lastEntry).
const lastColumns = `CASE WHEN messages.state <> 'retry' THEN 0 WHEN ` + lastHeld + ` THEN messages.second_attempt
	ELSE coalesce(h.attempt, 0) END,
	CASE WHEN messages.state <> 'retry' THEN 0 WHEN ` + lastHeld + ` THEN messages.second_deferrals
	ELSE coalesce(h.deferrals, 0) END`

// lastHeld holds when a message's last history entry is the second, held
// by its row (persistence.HeldByRow; the first is never a retry's): at
// history_len 2 with second_state set. A row written before the row held
// that entry (an empty second_state) has it as a history row, as apiColumns
// reads its detail.
const lastHeld = `messages.history_len = 2 AND messages.second_state <> ''`

// lastEntry joins messages to h, the last history entry of a message in
// retry whose last entry is a history row (not lastHeld): one index
// lookup, which reads both of lastColumns' values
// (as Postgres's lastEntry does; two correlated subqueries looked the row
// up once each). Its ordinal is NULL for any other message, so that SQLite
// skips the lookup (a condition beside the key would be tested only after
// it). h gives only the history columns it names, none of them a messages
// column (history's state is not among them), so the statement's message
// columns need not name their table.
const lastEntry = ` LEFT JOIN (SELECT message_id, ordinal, attempt, deferrals FROM history) h
	ON h.message_id = messages.id
	AND h.ordinal = CASE WHEN messages.state = 'retry' AND NOT (` + lastHeld + `) THEN messages.history_len END`

// loadSQL reads cols (decisionColumns or rowColumns) of the messages of n
// ids.
func loadSQL(cols string, n int) string {
	return `SELECT ` + cols + ` FROM messages` + lastEntry + ` WHERE messages.id IN (` + params(n) + `)`
}

func scanRow(sc interface{ Scan(...any) error }) (*persistence.Row, error) {
	r := &persistence.Row{}
	var finalized sql.NullInt64
	m, err := scanMessage(sc, &r.ReportTo, &r.HistoryLen, &finalized, &r.Last.Attempt, &r.Last.Deferrals)
	r.Message, r.FinalizedAt = m, timeOrNil(finalized)
	return r, err
}

// decisionColumns are what a decision reads and a write of its changes
// writes (scanDecision reads them): not the message's numbers, body or
// times of its own, which no decision looks at.
const decisionColumns = `id, token, state, dest_smsc, frontend, attempts, reason, submitted_at, queued_at, report_to,
	history_len, finalized_at, ` + lastColumns

func scanDecision(sc interface{ Scan(...any) error }) (*persistence.Row, error) {
	r := &persistence.Row{}
	var token, submitted int64
	var queued, finalized sql.NullInt64
	err := sc.Scan(&r.ID, &token, &r.State, &r.DestSMSC, &r.Frontend, &r.Attempts, &r.Reason, &submitted, &queued,
		&r.ReportTo, &r.HistoryLen, &finalized, &r.Last.Attempt, &r.Last.Deferrals)
	r.Token, r.SubmittedAt, r.QueuedAt, r.FinalizedAt = uint64(token), fromDB(submitted), timeOrNil(queued), timeOrNil(finalized)
	return r, err
}

// load reads into l the messages with the given ids (those that exist),
// their outbox rows and their ledger keys. full reads the whole message
// (a sweep returns what it changed), else what decisions need.
func load(ctx context.Context, q querier, l *persistence.Loaded, ids []string, full bool) error {
	return chunks(len(ids), func(lo, hi int) error {
		in, args := params(hi-lo), anys(ids[lo:hi])
		cols, scan := decisionColumns, scanDecision
		if full {
			cols, scan = rowColumns, scanRow
		}
		rows, err := q.QueryContext(ctx, loadSQL(cols, hi-lo), args...)
		if err != nil {
			return err
		}
		err = scanEach(rows, func(r *sql.Rows) error {
			m, err := scan(r)
			l.Rows[m.ID] = m
			return err
		})
		if err != nil {
			return err
		}
		rows, err = q.QueryContext(ctx, `SELECT id, kind, target, message_id, lease_until, lease_owner, lease_epoch, retried_attempt
			FROM outbox WHERE message_id IN (`+in+`) ORDER BY id`, args...)
		if err != nil {
			return err
		}
		err = scanEach(rows, func(r *sql.Rows) error {
			var (
				w     persistence.WorkRow
				id    string
				until sql.NullInt64
				owner sql.NullString
				epoch int64
			)
			err := r.Scan(&w.ID, &w.Kind, &w.Target, &id, &until, &owner, &epoch, &w.RetriedAttempt)
			w.LeaseUntil, w.LeaseOwner, w.LeaseEpoch = zeroIfNull(until), owner.String, uint64(epoch)
			l.Work[id] = append(l.Work[id], w)
			return err
		})
		if err != nil {
			return err
		}
		rows, err = q.QueryContext(ctx, `SELECT message_id, kind, target FROM ledger WHERE message_id IN (`+in+`)`, args...)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			var k persistence.LedgerKey
			err := r.Scan(&k.MessageID, &k.Kind, &k.Target)
			l.Recorded[k] = true
			return err
		})
	})
}

// moveSQL writes n moved messages (id, state, reason, queued_at,
// history_len, finalized_at, attempts, then the second history entry's
// state, time, detail, attempt, deferrals, last_at and resend, NULL unless the
// move appended it or folded a deferral into it, its time NULL too then:
// kept), all updated at the first parameter (SQLite numbers ? in the order
// of the text).
func moveSQL(n int) string {
	return `UPDATE messages SET ` + moveColumns + `, updated_at = ? FROM (VALUES ` + tuples(n, 14) + `) AS v WHERE messages.id = v.column1`
}

// moveColumns are the columns moveSQL and restartSQL set from v.
const moveColumns = `state = v.column2, reason = v.column3, queued_at = v.column4, history_len = v.column5,
	finalized_at = v.column6, attempts = v.column7, second_state = coalesce(v.column8, second_state),
	second_at = coalesce(v.column9, second_at), second_detail = coalesce(v.column10, second_detail),
	second_attempt = coalesce(v.column11, second_attempt), second_deferrals = coalesce(v.column12, second_deferrals),
	second_last_at = CASE WHEN v.column8 IS NULL THEN second_last_at ELSE v.column13 END,
	second_resend = coalesce(v.column14, second_resend)`

// restartSQL writes n restarted messages: moveSQL's columns, then
// frontend, dest_smsc and submitted_at.
func restartSQL(n int) string {
	return `UPDATE messages SET ` + moveColumns + `, frontend = v.column15, dest_smsc = v.column16,
		submitted_at = v.column17, updated_at = ? FROM (VALUES ` + tuples(n, 17) + `) AS v WHERE messages.id = v.column1`
}

// foldSQL updates n history rows a deferral was folded into
// (persistence.Changes.Folded: message_id, ordinal, detail, deferrals,
// last_at, resend).
func foldSQL(n int) string {
	return `UPDATE history SET detail = v.column3, deferrals = v.column4, last_at = v.column5, resend = v.column6
		FROM (VALUES ` + tuples(n, 6) + `) AS v WHERE history.message_id = v.column1 AND history.ordinal = v.column2`
}

// rescheduleSQL makes n outbox rows (id, due_at, retried_attempt) due
// again, unleased and not relayed (persistence.Reschedule).
func rescheduleSQL(n int) string {
	return `UPDATE outbox SET due_at = v.column2, retried_attempt = v.column3, lease_owner = NULL, lease_until = NULL,
		lease_epoch = 0, relayed = 0 FROM (VALUES ` + tuples(n, 3) + `) AS v WHERE outbox.id = v.column1`
}

// writeChanges writes what the core decided, one statement (per chunk)
// for each kind of change, in the order persistence.Changes names.
func writeChanges(ctx context.Context, tx querier, c *persistence.Changes) error {
	if c.Empty() {
		return nil
	}
	at := toDB(c.Now)
	if err := chunks(len(c.Unledgered), func(lo, hi int) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM ledger WHERE message_id IN (`+params(hi-lo)+`)`, anys(c.Unledgered[lo:hi])...)
		return err
	}); err != nil {
		return err
	}
	if err := insertLedger(ctx, tx, c.Ledger); err != nil {
		return err
	}
	if err := chunks(len(c.Finished), func(lo, hi int) error {
		args := make([]any, 0, hi-lo)
		for _, id := range c.Finished[lo:hi] {
			args = append(args, id)
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE id IN (`+params(hi-lo)+`)`, args...)
		return err
	}); err != nil {
		return err
	}
	if err := chunks(len(c.Rescheduled), func(lo, hi int) error {
		args := make([]any, 0, 3*(hi-lo))
		for _, r := range c.Rescheduled[lo:hi] {
			args = append(args, r.Row, toDB(r.DueAt), r.Attempt)
		}
		_, err := tx.ExecContext(ctx, rescheduleSQL(hi-lo), args...)
		return err
	}); err != nil {
		return err
	}
	var moved, restarted []*persistence.Row
	for _, m := range c.Moved {
		if c.Restarted[m.ID] {
			restarted = append(restarted, m)
		} else {
			moved = append(moved, m)
		}
	}
	for _, set := range []struct {
		rows    []*persistence.Row
		sql     func(int) string
		restart bool
	}{{moved, moveSQL, false}, {restarted, restartSQL, true}} {
		if err := chunks(len(set.rows), func(lo, hi int) error {
			args := make([]any, 1, 17*(hi-lo)+1)
			args[0] = at
			for _, m := range set.rows[lo:hi] {
				args = append(args, m.ID, string(m.State), m.Reason, nullTime(m.QueuedAt), m.HistoryLen, nullTime(m.FinalizedAt), m.Attempts)
				if e := m.Second; e != nil {
					args = append(args, string(e.State), nullTime(nonZero(e.At)), e.Detail, e.Attempt, e.Deferrals, nullTime(e.LastAt), e.Resend)
				} else {
					args = append(args, nil, nil, nil, nil, nil, nil, nil)
				}
				if set.restart {
					args = append(args, m.Frontend, m.DestSMSC, toDB(m.SubmittedAt))
				}
			}
			_, err := tx.ExecContext(ctx, set.sql(hi-lo), args...)
			return err
		}); err != nil {
			return err
		}
	}
	hist := make([]any, 0, 9*len(c.History))
	for _, h := range c.History {
		hist = append(hist, h.MessageID, h.Ordinal, string(h.State), at, h.Detail, h.Attempt, h.Deferrals, nullTime(h.LastAt), h.Resend)
	}
	if err := insertRows(ctx, tx, `INSERT INTO history (message_id, ordinal, state, at, detail, attempt, deferrals, last_at, resend)`, 9, hist); err != nil {
		return err
	}
	if err := chunks(len(c.Folded), func(lo, hi int) error {
		args := make([]any, 0, 6*(hi-lo))
		for _, h := range c.Folded[lo:hi] {
			args = append(args, h.MessageID, h.Ordinal, h.Detail, h.Deferrals, nullTime(h.LastAt), h.Resend)
		}
		_, err := tx.ExecContext(ctx, foldSQL(hi-lo), args...)
		return err
	}); err != nil {
		return err
	}
	if err := writeRefs(ctx, tx, c); err != nil {
		return err
	}
	if _, err := insertWork(ctx, tx, at, c.Work); err != nil {
		return err
	}
	if err := deletePurged(ctx, tx, c.Purged); err != nil {
		return err
	}
	return writeCounts(ctx, tx, c.Counts)
}

// insertWork writes outbox rows created at `at`. A row the message has of
// the same kind and target is replaced by the new one (a new id, so that
// ids keep creation order). It returns the ids of the rows written relayed
// (leased, or to publish: WorkAdd.Relayed), by message id.
func insertWork(ctx context.Context, q querier, at int64, work []persistence.WorkAdd) (map[string]int64, error) {
	const cols = 9
	args := make([]any, 0, cols*len(work))
	relayed := 0
	for _, w := range work {
		var owner sql.NullString
		var until sql.NullInt64
		if w.Lease != nil {
			owner, until = sql.NullString{String: w.Lease.Owner, Valid: true}, sql.NullInt64{Int64: toDB(w.Lease.Until), Valid: true}
		}
		if w.Relayed() {
			relayed++
		}
		args = append(args, string(w.Spec.Kind), w.Spec.Target, w.MessageID, int64(w.Token), toDB(w.Spec.DueAt), at, owner, until, w.Relayed())
	}
	const head = `REPLACE INTO outbox (kind, target, message_id, token, due_at, created_at, lease_owner, lease_until, relayed)`
	if relayed == 0 {
		return nil, insertRows(ctx, q, head, cols, args)
	}
	ids := make(map[string]int64, relayed)
	err := chunks(len(work), func(lo, hi int) error {
		rows, err := q.QueryContext(ctx, head+" VALUES "+tuples(hi-lo, cols)+" RETURNING id, message_id, relayed", args[cols*lo:cols*hi]...)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			var id int64
			var m string
			var isRelayed bool
			err := r.Scan(&id, &m, &isRelayed)
			if isRelayed {
				ids[m] = id
			}
			return err
		})
	})
	return ids, err
}

// insertLedger writes ledger entries; an entry that exists is kept (the
// first final outcome wins).
func insertLedger(ctx context.Context, q querier, entries []persistence.LedgerEntry) error {
	args := make([]any, 0, 6*len(entries))
	for _, e := range entries {
		args = append(args, e.MessageID, string(e.Kind), e.Target, string(e.Result), toDB(e.At), e.Detail)
	}
	return chunks(len(entries), func(lo, hi int) error {
		_, err := q.ExecContext(ctx, `INSERT INTO ledger (message_id, kind, target, result, at, detail) VALUES `+
			tuples(hi-lo, 6)+` ON CONFLICT (message_id, kind, target) DO NOTHING`, args[lo*6:hi*6]...)
		return err
	})
}

// decider is decide for op at now, as persistence.Each runs it.
func (s *Store) decider(ctx context.Context, op string, now time.Time) func([]string, func(*persistence.Loaded, *persistence.Changes)) error {
	return func(ids []string, fn func(*persistence.Loaded, *persistence.Changes)) error {
		return s.decide(ctx, op, now, ids, fn)
	}
}

// decide runs one write transaction of a batch about the messages ids:
// load them, let fn decide with the core, write the changes.
func (s *Store) decide(ctx context.Context, op string, now time.Time, ids []string,
	fn func(l *persistence.Loaded, c *persistence.Changes)) error {
	return s.write(ctx, op, func(tx querier) error {
		l := persistence.NewLoaded()
		if err := load(ctx, tx, l, ids, false); err != nil {
			return err
		}
		c := persistence.NewChanges(now)
		fn(l, c)
		return writeChanges(ctx, tx, c)
	})
}

// candidates finds the messages a sweep decides on and loads them into l
// (with what decisions read: their outbox rows and ledger keys); it returns
// their ids, at most the sweep's limit, in the order to decide them.
type candidates func(ctx context.Context, tx querier, l *persistence.Loaded) ([]string, error)

// query is the candidates one statement selects, loaded whole (the
// expiry sweeps return them to callers that publish them).
func query(text string, args ...any) candidates {
	return func(ctx context.Context, tx querier, l *persistence.Loaded) ([]string, error) {
		ids, err := queryIDs(ctx, tx, text, args...)
		if err != nil || len(ids) == 0 {
			return ids, err
		}
		return ids, load(ctx, tx, l, ids, true)
	}
}

// queryIDs runs a statement that selects message ids (or any one string
// a row).
func queryIDs(ctx context.Context, tx querier, text string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, text, args...)
	if err != nil {
		return nil, err
	}
	var ids []string
	err = scanEach(rows, func(r *sql.Rows) error {
		var id string
		err := r.Scan(&id)
		ids = append(ids, id)
		return err
	})
	return ids, err
}

// writeFunc is how a sweep reaches the writer: Store.write, or
// Store.writeBehind for upkeep.
type writeFunc func(ctx context.Context, op string, fn func(tx querier) error) error

// sweep finds and loads its candidates and lets decide change each (it
// reports whether it did), then writes the changes through write. It
// returns the changed messages in candidate order.
func (s *Store) sweep(ctx context.Context, op string, write writeFunc, now time.Time, find candidates,
	decide func(l *persistence.Loaded, c *persistence.Changes, m *persistence.Row) bool) ([]messages.Message, error) {
	out := []messages.Message{}
	err := write(ctx, op, func(tx querier) error {
		l := persistence.NewLoaded()
		ids, err := find(ctx, tx, l)
		if err != nil || len(ids) == 0 {
			return err
		}
		c := persistence.NewChanges(now)
		out = persistence.Sweep(l, c, ids, decide)
		return writeChanges(ctx, tx, c)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
