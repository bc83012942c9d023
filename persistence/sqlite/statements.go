package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// rowsPerStatement bounds the rows of one multi-row statement (and the
// values of one IN list). SQLite allows 32766 bound parameters; 500 rows of
// the widest insert (15 columns) use 7500. Larger statements stop paying off:
// compiling them costs more than the round trips they save.
const rowsPerStatement = 500

// tuples is "(?,?),(?,?)": rows tuples of cols parameters.
func tuples(rows, cols int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + ")"
	return strings.TrimSuffix(strings.Repeat(one+",", rows), ",")
}

// params is "?,?,?": an IN list of n parameters.
func params(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// chunks calls fn for consecutive [lo, hi) ranges of at most rowsPerStatement
// that cover [0, n).
func chunks(n int, fn func(lo, hi int) error) error {
	for lo := 0; lo < n; lo += rowsPerStatement {
		if err := fn(lo, min(lo+rowsPerStatement, n)); err != nil {
			return err
		}
	}
	return nil
}

// insertRows runs head+" VALUES (...),(...)" over args, cols values a row,
// in chunks.
func insertRows(ctx context.Context, q querier, head string, cols int, args []any) error {
	return chunks(len(args)/cols, func(lo, hi int) error {
		_, err := q.ExecContext(ctx, head+" VALUES "+tuples(hi-lo, cols), args[lo*cols:hi*cols]...)
		return err
	})
}

// anys converts ids for an IN list.
func anys(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// messageColumns are scanned by scanMessage, in this order.
const messageColumns = `seq, id, token, source_msisdn, destination_msisdn, body, state,
	source_smsc, dest_smsc, frontend, attempts, reason, created_at, updated_at, submitted_at, queued_at`

// scanMessage reads messageColumns and then extra, in that order.
func scanMessage(sc interface{ Scan(...any) error }, extra ...any) (messages.Message, error) {
	var (
		m                           messages.Message
		token                       int64
		state                       string
		created, updated, submitted int64
		queued                      sql.NullInt64
	)
	err := sc.Scan(append([]any{&m.Seq, &m.ID, &token, &m.SourceMSISDN, &m.DestinationMSISDN, &m.Body, &state,
		&m.SourceSMSC, &m.DestSMSC, &m.Frontend, &m.Attempts, &m.Reason, &created, &updated, &submitted, &queued}, extra...)...)
	if err != nil {
		return messages.Message{}, err
	}
	m.Token = uint64(token)
	m.State = messages.State(state)
	m.CreatedAt, m.UpdatedAt, m.SubmittedAt = fromDB(created), fromDB(updated), fromDB(submitted)
	m.QueuedAt = timeOrNil(queued)
	return m, nil
}

// collectMessages scans every row of rows into out, keyed by id.
func collectMessages(rows *sql.Rows, out map[string]messages.Message) error {
	defer rows.Close()
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return err
		}
		out[m.ID] = m
	}
	return rows.Err()
}

// loadMessages reads the messages with the given ids (those that exist).
func loadMessages(ctx context.Context, q querier, ids []string) (map[string]messages.Message, error) {
	out := make(map[string]messages.Message, len(ids))
	err := chunks(len(ids), func(lo, hi int) error {
		rows, err := q.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages WHERE id IN (`+params(hi-lo)+`)`, anys(ids[lo:hi])...)
		if err != nil {
			return err
		}
		return collectMessages(rows, out)
	})
	return out, err
}

// historyEntry is a transition to append to a message's history.
type historyEntry struct {
	messageID string
	state     messages.State
	at        int64
	detail    string
}

// appendHistory inserts entries after each message's last stored entry,
// in the order given.
func appendHistory(ctx context.Context, q querier, entries []historyEntry) error {
	if len(entries) == 0 {
		return nil
	}
	last := map[string]int64{}
	var ids []string
	for _, e := range entries {
		if _, ok := last[e.messageID]; !ok {
			last[e.messageID] = 0
			ids = append(ids, e.messageID)
		}
	}
	err := chunks(len(ids), func(lo, hi int) error {
		rows, err := q.QueryContext(ctx, `SELECT message_id, MAX(ordinal) FROM history
			WHERE message_id IN (`+params(hi-lo)+`) GROUP BY message_id`, anys(ids[lo:hi])...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var n int64
			if err := rows.Scan(&id, &n); err != nil {
				return err
			}
			last[id] = n
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	args := make([]any, 0, 5*len(entries))
	for _, e := range entries {
		last[e.messageID]++
		args = append(args, e.messageID, last[e.messageID], string(e.state), e.at, e.detail)
	}
	return insertRows(ctx, q, `INSERT INTO history (message_id, ordinal, state, at, detail)`, 5, args)
}

// newWork is an outbox row to write.
type newWork struct {
	messageID string
	spec      persistence.WorkSpec
}

// insertWork writes outbox rows created at now. Work that already exists
// for the same message, kind and target is replaced by the new row's due
// time, unleased: a message has one row per kind and target.
func insertWork(ctx context.Context, q querier, now int64, work []newWork) error {
	args := make([]any, 0, 6*len(work))
	for _, w := range work {
		args = append(args, string(w.spec.Kind), w.spec.Target, w.messageID,
			int64(messages.TokenOf(w.messageID)), toDB(w.spec.DueAt), now)
	}
	return chunks(len(work), func(lo, hi int) error {
		_, err := q.ExecContext(ctx, `INSERT INTO outbox (kind, target, message_id, token, due_at, created_at)
			VALUES `+tuples(hi-lo, 6)+` ON CONFLICT (message_id, kind, target) DO UPDATE SET
			due_at = excluded.due_at, created_at = excluded.created_at, lease_owner = NULL, lease_until = NULL, lease_epoch = 0`,
			args[6*lo:6*hi]...)
		return err
	})
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

// validWork reports what is wrong with a work spec.
func validWork(w *persistence.WorkSpec) string {
	switch {
	case w == nil:
		return ""
	case !w.Kind.Valid():
		return "unknown work kind " + string(w.Kind)
	case w.Target == "":
		return "work without target"
	}
	return ""
}

// queuedAt is the queued_at a message in state gets at now: kept (or now
// when it had none) in forward_queued, NULL in every other state.
func queuedAt(state messages.State, old sql.NullInt64, now int64) sql.NullInt64 {
	switch {
	case state != messages.StateForwardQueued:
		return sql.NullInt64{}
	case old.Valid:
		return old
	}
	return sql.NullInt64{Int64: now, Valid: true}
}

// timeOrNil is a nullable stored time as Message.QueuedAt holds it.
func timeOrNil(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromDB(v.Int64)
	return &t
}

// zeroIfNull is a nullable stored time.
func zeroIfNull(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromDB(v.Int64)
}
