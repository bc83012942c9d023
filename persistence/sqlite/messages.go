package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// accept stores the new messages of a Write (Accept). The batch costs one
// SELECT of the frontends its local deliveries name, one INSERT ...
// RETURNING per 500 distinct ids (each message carries its first history
// entry: no history row is written), one SELECT for the ids already stored
// (and those of StoredOnly submissions, and those for a frontend the store
// does not have), and one multi-row INSERT for the outbox.
func accept(ctx context.Context, tx querier, now time.Time, batch []persistence.NewMessage) ([]persistence.Accepted, error) {
	var stored map[string]messages.Message
	var reportTo map[string]string   // of the stored ones
	var relayedRows map[string]int64 // outbox rows written relayed, by message id
	var unknown map[string]bool      // frontends named and not registered
	created := make(map[string]messages.Message, len(batch))
	plan := persistence.PlanAccept(batch)
	err := func() error {
		firsts := plan.Firsts
		var err error
		if unknown, err = unknownFrontends(ctx, tx, persistence.LocalFrontends(batch, firsts)); err != nil {
			return err
		}
		// uniq are the entries inserted: not those for a frontend the
		// store does not have (the intake's directory is always current
		// here, so only a caller's mistake names one; the rule is the
		// shared store's, where another instance may have deleted it).
		var uniq []int
		existing := plan.Lookups
		for _, i := range firsts {
			if fe, ok := persistence.LocalFrontend(batch[i]); ok && unknown[fe] {
				existing = append(existing, batch[i].ID) // a retry if stored
				continue
			}
			uniq = append(uniq, i)
		}
		rows := make([]persistence.Row, len(uniq))
		err = chunks(len(uniq), func(lo, hi int) error {
			args := make([]any, 0, 25*(hi-lo))
			for k := lo; k < hi; k++ {
				nm := batch[uniq[k]]
				r := persistence.NewRow(nm, now)
				rows[k] = r
				at := toDB(r.CreatedAt)
				args = append(args, r.ID, int64(r.Token), r.SourceMSISDN, r.DestinationMSISDN, r.Body, string(r.State),
					r.SourceSMSC, r.DestSMSC, r.Frontend, r.Attempts, at, at, at, nullTime(r.QueuedAt), r.ReportTo,
					r.HistoryLen, string(r.State), nm.Detail,
					string(r.DataCoding), r.Binary, nullTime(r.ValidityUntil), nullTime(r.DeliverAfter), r.SubmittedBy, r.Trace, r.MessageClass)
			}
			res, err := tx.QueryContext(ctx, `INSERT INTO messages (id, token, source_msisdn, destination_msisdn,
				body, state, source_smsc, dest_smsc, frontend, attempts, created_at, updated_at, submitted_at,
				queued_at, report_to, history_len, first_state, first_detail,
				data_coding, body_binary, validity_until, deliver_after, submitted_by, traceparent, message_class)
				VALUES `+tuples(hi-lo, 25)+` ON CONFLICT (id) DO NOTHING RETURNING id, seq`, args...)
			if err != nil {
				return err
			}
			return scanEach(res, func(r *sql.Rows) error {
				var id string
				var seq int64
				err := r.Scan(&id, &seq)
				created[id] = messages.Message{ID: id, Seq: seq}
				return err
			})
		})
		if err != nil {
			return err
		}
		var work []persistence.WorkAdd
		for k, i := range uniq {
			nm := batch[i]
			c, ok := created[nm.ID]
			if !ok {
				existing = append(existing, nm.ID)
				continue
			}
			m := rows[k].Message
			m.Seq = c.Seq
			created[nm.ID] = m
			if nm.Work != nil {
				work = append(work, persistence.NewWork(nm, now))
			}
		}
		if stored, err = loadMessages(ctx, tx, existing); err != nil {
			return err
		}
		if reportTo, err = loadReportTo(ctx, tx, existing); err != nil {
			return err
		}
		if relayedRows, err = insertWork(ctx, tx, toDB(now), work); err != nil {
			return err
		}
		return writeCounts(ctx, tx, persistence.AcceptedCounts(created, work))
	}()
	if err != nil {
		return nil, err
	}
	return persistence.AcceptResults(plan, batch, created, stored, reportTo, relayedRows, unknown)
}

// unknownFrontends is the set of names that no registered frontend has.
func unknownFrontends(ctx context.Context, q querier, names []string) (map[string]bool, error) {
	unknown := make(map[string]bool, len(names))
	for _, n := range names {
		unknown[n] = true
	}
	err := chunks(len(names), func(lo, hi int) error {
		rows, err := q.QueryContext(ctx, `SELECT name FROM frontends WHERE name IN (`+params(hi-lo)+`)`, anys(names[lo:hi])...)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			var name string
			err := r.Scan(&name)
			delete(unknown, name)
			return err
		})
	})
	return unknown, err
}

// loadReportTo reads the report_to of the messages with the given ids
// (those that exist).
func loadReportTo(ctx context.Context, q querier, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	err := chunks(len(ids), func(lo, hi int) error {
		rows, err := q.QueryContext(ctx, `SELECT id, report_to FROM messages WHERE id IN (`+params(hi-lo)+`)`, anys(ids[lo:hi])...)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			var id, to string
			err := r.Scan(&id, &to)
			out[id] = to
			return err
		})
	})
	return out, err
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

// GetMessage implements persistence.Store.
func (s *Store) GetMessage(ctx context.Context, id string) (messages.Message, error) {
	var m messages.Message
	err := s.read(ctx, "get message", func(tx *sql.Tx) error {
		byID, err := loadWithHistory(ctx, tx, []string{id})
		if err != nil {
			return err
		}
		var ok bool
		if m, ok = byID[id]; !ok {
			return fmt.Errorf("message %q: %w", id, persistence.ErrNotFound)
		}
		if n := len(m.History); n > 0 {
			m.LastDetail = m.History[n-1].Detail
		}
		refs, err := smscRefs(ctx, tx, id)
		if err != nil {
			return err
		}
		m.SetSMSC(refs)
		var due sql.NullInt64
		err = tx.QueryRowContext(ctx, messageDueSQL, id).Scan(&due)
		m.NextAttemptAt = timeOrNil(due)
		return err
	})
	if err != nil {
		return messages.Message{}, err
	}
	return m, nil
}

// loadWithHistory reads the messages with the given ids (those that
// exist), each with its history, oldest first: the entries the row holds
// and its history rows, put together by persistence.HistoryOf.
func loadWithHistory(ctx context.Context, q querier, ids []string) (map[string]messages.Message, error) {
	out := make(map[string]messages.Message, len(ids))
	held := make(map[string][2]messages.HistoryEntry, len(ids))
	rows := make(map[string][]messages.HistoryEntry)
	err := chunks(len(ids), func(lo, hi int) error {
		in, args := params(hi-lo), anys(ids[lo:hi])
		res, err := q.QueryContext(ctx, `SELECT `+messageColumns+`, first_state, first_detail, second_state, second_at, second_detail,
			second_attempt, second_deferrals, second_last_at, second_resend FROM messages WHERE id IN (`+in+`)`, args...)
		if err != nil {
			return err
		}
		if err := scanEach(res, func(r *sql.Rows) error {
			var first, second messages.HistoryEntry
			var secondAt, secondLast sql.NullInt64
			m, err := scanMessage(r, &first.State, &first.Detail, &second.State, &secondAt, &second.Detail,
				&second.Attempt, &second.Deferrals, &secondLast, &second.Resend)
			first.At, second.At, second.LastAt = m.CreatedAt, fromDB(secondAt.Int64), timeOrNil(secondLast)
			out[m.ID], held[m.ID] = m, [2]messages.HistoryEntry{first, second}
			return err
		}); err != nil {
			return err
		}
		res, err = q.QueryContext(ctx, `SELECT message_id, state, at, detail, attempt, deferrals, last_at, resend FROM history WHERE message_id IN (`+in+`)
			ORDER BY message_id, ordinal`, args...)
		if err != nil {
			return err
		}
		return scanEach(res, func(r *sql.Rows) error {
			var id string
			var h messages.HistoryEntry
			var at int64
			var last sql.NullInt64
			err := r.Scan(&id, &h.State, &at, &h.Detail, &h.Attempt, &h.Deferrals, &last, &h.Resend)
			h.At, h.LastAt = fromDB(at), timeOrNil(last)
			rows[id] = append(rows[id], h)
			return err
		})
	})
	for id, m := range out {
		m.History = persistence.HistoryOf(held[id][0], held[id][1], rows[id])
		out[id] = m
	}
	return out, err
}

// listQuery is the statement of ListMessages for q, and its arguments: one
// page (plus one row) below the cursor. Each kind of query names the index
// it walks, so that the plan does not depend on statistics:
//
//	a number              messages_destination or messages_source (the
//	                      number's entries end with seq: an exact number is
//	                      read newest first; a prefix is a range, sorted)
//	a client's own        messages_submitted_by (its entries end with seq),
//	                      also with a time range (a filter then: the
//	                      created_at index holds every client's messages)
//	a time range          messages_created, newest first (created_at, seq)
//	a state               messages_state_seq
//	none of these         the table in seq order
//
// Frontend and peer are filters on the rows that walk yields. Without a
// number, a client or a time range (q.Windowed), the walk may meet few or
// no matching rows, so it is bounded by the window w (seq >= w.Lo) and
// reads the table in seq order, a range of the rowid, with or without a
// state.
func listQuery(q persistence.ListQuery, w persistence.Window) (string, []any) {
	var (
		conds []string
		args  []any
	)
	where := func(cond string, vals ...any) {
		conds = append(conds, cond)
		args = append(args, vals...)
	}
	index := ""
	number := func(col string, m persistence.NumberMatch) {
		expr := "ltrim(" + col + ", '+')"
		switch {
		case m.Key == "":
			return
		case m.Prefix:
			// Every key starting with the prefix sorts below prefix+0xFF
			// (no UTF-8 byte is 0xFF; SQLite compares bytes).
			where(expr+" >= ? AND "+expr+" < ?", m.Key, m.Key+"\xff")
		default:
			where(expr+" = ?", m.Key)
		}
		if index == "" {
			index = " INDEXED BY messages_" + strings.TrimSuffix(col, "_msisdn")
		}
	}
	number("destination_msisdn", q.Destination)
	number("source_msisdn", q.Source)
	if q.SubmittedBy != "" {
		// The second term is the partial index's own condition.
		where("submitted_by = ? AND submitted_by <> ''", q.SubmittedBy)
		if index == "" {
			index = " INDEXED BY messages_submitted_by"
		}
	}
	if q.State != "" {
		where("state = ?", string(q.State))
		switch {
		case q.Windowed():
			// The window's rows in the table (by rowid): read through
			// messages_state_seq, a window of a common state costs a
			// table lookup per row, 2.5 times the table's own walk
			// (BenchmarkWindowedList).
			index = " NOT INDEXED"
		case index == "" && !q.ByTime():
			index = " INDEXED BY messages_state_seq"
		}
	}
	if !q.Since.IsZero() {
		where("created_at >= ?", toDB(q.Since))
	}
	if !q.Until.IsZero() {
		where("created_at < ?", toDB(q.Until))
	}
	if q.Frontend != "" {
		where("frontend = ?", q.Frontend)
	}
	if q.Peer != "" {
		where("(source_smsc = ? OR dest_smsc = ?)", q.Peer, q.Peer)
	}
	order := " ORDER BY seq DESC"
	switch {
	case q.ByTime():
		index, order = " INDEXED BY messages_created", " ORDER BY created_at DESC, seq DESC"
		if q.Before > 0 {
			// The first condition is the index's seek, the second the
			// exact cursor.
			where("created_at <= ? AND (created_at, seq) < (?, ?)", toDB(q.BeforeAt), toDB(q.BeforeAt), q.Before)
		}
	case q.Before > 0:
		where("seq < ?", q.Before)
	}
	if w.Lo > 0 {
		where("seq >= ?", w.Lo)
	}
	sql := "SELECT " + messageColumns + ", " + apiColumns + " FROM messages" + index
	if len(conds) > 0 {
		sql += " WHERE " + strings.Join(conds, " AND ")
	}
	return sql + order + " LIMIT +?", append(args, q.Limit+1)
}

// seqBoundsSQL reads the smallest and largest seq: two rowid lookups (an
// aggregate of both in one SELECT would scan the table).
const seqBoundsSQL = `SELECT coalesce((SELECT min(seq) FROM messages), 0), coalesce((SELECT max(seq) FROM messages), 0)`

// ListMessages implements persistence.Store. It reads one row more than the
// page to know whether another page follows, and for a Windowed query first
// the seq bounds its window is cut from, on the same snapshot.
func (s *Store) ListMessages(ctx context.Context, q persistence.ListQuery) (persistence.Page, error) {
	const op = "list messages"
	if err := s.precheck(op, q.Validate()); err != nil {
		return persistence.Page{}, err
	}
	var (
		list []messages.Message
		w    persistence.Window
	)
	err := s.read(ctx, op, func(tx *sql.Tx) error {
		if q.Windowed() {
			var b persistence.SeqBounds
			if err := tx.QueryRowContext(ctx, seqBoundsSQL).Scan(&b.Min, &b.Max); err != nil {
				return err
			}
			w = persistence.ListWindow(q, b)
		}
		query, args := listQuery(q, w)
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			m, err := scanAPIMessage(r)
			list = append(list, m)
			return err
		})
	})
	if err != nil {
		return persistence.Page{}, err
	}
	return persistence.PageOf(q, w, list), nil
}

// oldestDueSQL reads the earliest due time of the work claimable at ?1:
// for each kind and target of work (the counters name them), the first row
// of outbox_claim in due order that is due and not leased. A seek per
// target, skipping only the rows leased now (work in flight): the cost
// grows with the targets and the leases, not with the rows waiting.
const oldestDueSQL = `SELECT min((SELECT o.due_at FROM outbox o
		WHERE o.kind = c.of AND o.target = c.key AND o.due_at <= ?1
			AND (o.lease_until IS NULL OR o.lease_until <= ?1)
		ORDER BY o.due_at LIMIT 1))
	FROM counters c WHERE c.of <> 'state' AND c.n > 0`

// OldestDue implements persistence.Store.
func (s *Store) OldestDue(ctx context.Context, now time.Time) (time.Time, error) {
	var due sql.NullInt64
	err := s.read(ctx, "oldest due", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, oldestDueSQL, toDB(now)).Scan(&due)
	})
	if err != nil {
		return time.Time{}, err
	}
	return zeroIfNull(due), nil
}

// Stats implements persistence.Store: the maintained counters.
func (s *Store) Stats(ctx context.Context) (persistence.Stats, error) {
	var totals persistence.Counts
	err := s.read(ctx, "stats", func(tx *sql.Tx) error {
		var err error
		totals, err = readCounts(ctx, tx)
		return err
	})
	if err != nil {
		return persistence.Stats{}, err
	}
	return persistence.StatsOf(totals, s.fileBytes()), nil
}
