package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// Statements must keep their plan whatever values are bound to them: SQLite
// prepares a statement again, on every run, once its plan depended on a
// bound value that then changes. Two shapes did that here, and re-preparing
// cost over half of the store's CPU under many small claims:
//   - LIMIT ?n: the planner reads the bound limit. LIMIT +?n is the same
//     limit to the query and an expression to the planner.
//   - a partial index whose condition compares a column with a literal
//     (WHERE kind = 'delivery'): every "kind = ?n" is compared with it by
//     value. Such conditions are written +kind = 'delivery' (migration
//     0012), and the queries meant to use the index say the same.
// TestStatementsKeepTheirPlans checks both.

// rowsPerStatement bounds the rows of one multi-row statement (and the
// values of one IN list). SQLite allows 32766 bound parameters; 256 rows of
// the widest insert (22 columns) use 5632. Larger statements stop paying
// off: compiling them costs more than the round trips they save.
const rowsPerStatement = 256

// tuples is "(?,?),(?,?)": rows tuples of cols parameters.
func tuples(rows, cols int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + ")"
	return strings.TrimSuffix(strings.Repeat(one+",", rows), ",")
}

// params is "?,?,?": an IN list of n parameters.
func params(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// chunks calls fn for consecutive [lo, hi) ranges that cover [0, n), each
// of a power-of-two size up to rowsPerStatement (37 rows: 32, 4, 1). A
// statement's text depends on its row count, and the writer keeps its
// statements prepared (stmtCache): with sizes from a set of nine, every
// shape is soon prepared, where sizes 1 to 500 would each be compiled anew.
func chunks(n int, fn func(lo, hi int) error) error {
	for lo := 0; lo < n; {
		size := rowsPerStatement
		for size > n-lo {
			size /= 2
		}
		if err := fn(lo, lo+size); err != nil {
			return err
		}
		lo += size
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
	source_smsc, dest_smsc, frontend, attempts, reason, created_at, updated_at, submitted_at, queued_at,
	data_coding, body_binary, validity_until, deliver_after, submitted_by, traceparent, message_class`

// apiColumns are read after messageColumns for the API's list
// (ListMessages): when the message's work is next due (NextAttemptAt), one
// index lookup, and its last history entry's detail (LastDetail: held by
// the row when it is the first or second, else one index lookup; see
// persistence.HeldByRow).
const apiColumns = `(SELECT min(o.due_at) FROM outbox o WHERE o.message_id = messages.id AND o.kind <> 'status'),
	CASE WHEN messages.history_len = 2 AND messages.second_state <> '' THEN messages.second_detail
	ELSE COALESCE((SELECT h.detail FROM history h WHERE h.message_id = messages.id AND h.ordinal = messages.history_len), messages.first_detail) END`

// messageDueSQL is GetMessage's NextAttemptAt (its LastDetail is its last
// history entry's).
const messageDueSQL = `SELECT min(due_at) FROM outbox WHERE message_id = ? AND kind <> 'status'`

// scanAPIMessage reads messageColumns, apiColumns and then extra.
func scanAPIMessage(sc interface{ Scan(...any) error }, extra ...any) (messages.Message, error) {
	var due sql.NullInt64
	var last string
	m, err := scanMessage(sc, append([]any{&due, &last}, extra...)...)
	m.NextAttemptAt, m.LastDetail = timeOrNil(due), last
	return m, err
}

// scanMessage reads messageColumns and then extra, in that order.
func scanMessage(sc interface{ Scan(...any) error }, extra ...any) (messages.Message, error) {
	var (
		m                           messages.Message
		token                       int64
		state                       string
		created, updated, submitted int64
		queued, validity, deliver   sql.NullInt64
	)
	err := sc.Scan(append([]any{&m.Seq, &m.ID, &token, &m.SourceMSISDN, &m.DestinationMSISDN, &m.Body, &state,
		&m.SourceSMSC, &m.DestSMSC, &m.Frontend, &m.Attempts, &m.Reason, &created, &updated, &submitted, &queued,
		&m.DataCoding, &m.Binary, &validity, &deliver, &m.SubmittedBy, &m.Trace, &m.MessageClass}, extra...)...)
	if err != nil {
		return messages.Message{}, err
	}
	m.Token = uint64(token)
	m.State = messages.State(state)
	m.CreatedAt, m.UpdatedAt, m.SubmittedAt = fromDB(created), fromDB(updated), fromDB(submitted)
	m.QueuedAt, m.ValidityUntil, m.DeliverAfter = timeOrNil(queued), timeOrNil(validity), timeOrNil(deliver)
	m.SetTrace(m.Trace)
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

// nullTime is a nullable time as stored.
func nullTime(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: toDB(*t), Valid: true}
}

// nonZero is &t, nil when t is zero (a time a write keeps).
func nonZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
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
