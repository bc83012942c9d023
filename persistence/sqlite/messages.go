package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Accept implements persistence.Store. The batch costs one INSERT ...
// RETURNING per 500 distinct ids, one SELECT for the ids already stored,
// and one multi-row INSERT each for history and outbox.
func (s *Store) Accept(ctx context.Context, now time.Time, batch []persistence.NewMessage) ([]persistence.Accepted, error) {
	const op = "accept"
	if err := s.check(op); err != nil {
		return nil, err
	}
	for i, nm := range batch {
		if err := validNew(nm); err != nil {
			return nil, fmt.Errorf("sqlite: %s: message %d: %w", op, i, err)
		}
	}
	out := make([]persistence.Accepted, len(batch))
	if len(batch) == 0 {
		return out, nil
	}
	at := toDB(now)

	// The first occurrence of an id is the one created; repeats get its result.
	first := make(map[string]int, len(batch))
	uniq := make([]int, 0, len(batch))
	for i, nm := range batch {
		if _, ok := first[nm.ID]; !ok {
			first[nm.ID] = i
			uniq = append(uniq, i)
		}
	}

	seqs := make(map[string]int64, len(uniq)) // created now: id -> seq
	var stored map[string]messages.Message    // stored before this call
	err := s.write(ctx, op, func(tx querier) error {
		err := chunks(len(uniq), func(lo, hi int) error {
			args := make([]any, 0, 15*(hi-lo))
			for _, i := range uniq[lo:hi] {
				nm := batch[i]
				args = append(args, nm.ID, int64(messages.TokenOf(nm.ID)), nm.SourceMSISDN, nm.DestinationMSISDN,
					nm.Body, string(nm.State), nm.SourceSMSC, nm.DestSMSC, nm.Frontend, 0, at, at, at,
					queuedAt(nm.State, sql.NullInt64{}, at), nm.ReportTo)
			}
			rows, err := tx.QueryContext(ctx, `INSERT INTO messages (id, token, source_msisdn, destination_msisdn,
				body, state, source_smsc, dest_smsc, frontend, attempts, created_at, updated_at, submitted_at,
				queued_at, report_to)
				VALUES `+tuples(hi-lo, 15)+` ON CONFLICT (id) DO NOTHING RETURNING id, seq`, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				var seq int64
				if err := rows.Scan(&id, &seq); err != nil {
					return err
				}
				seqs[id] = seq
			}
			return rows.Err()
		})
		if err != nil {
			return err
		}

		var existing []string
		var hist []historyEntry
		var work []newWork
		for _, i := range uniq {
			nm := batch[i]
			if _, ok := seqs[nm.ID]; !ok {
				existing = append(existing, nm.ID)
				continue
			}
			hist = append(hist, historyEntry{messageID: nm.ID, state: nm.State, at: at, detail: nm.Detail})
			if nm.Work != nil {
				work = append(work, newWork{messageID: nm.ID, spec: *nm.Work})
			}
		}
		if stored, err = loadMessages(ctx, tx, existing); err != nil {
			return err
		}
		if len(stored) != len(existing) {
			return fmt.Errorf("%d of %d existing messages vanished", len(existing)-len(stored), len(existing))
		}
		// Every created message's first entry is ordinal 1: no read needed.
		args := make([]any, 0, 5*len(hist))
		for _, h := range hist {
			args = append(args, h.messageID, 1, string(h.state), h.at, h.detail)
		}
		if err := insertRows(ctx, tx, `INSERT INTO history (message_id, ordinal, state, at, detail)`, 5, args); err != nil {
			return err
		}
		return insertWork(ctx, tx, at, work)
	})
	if err != nil {
		return nil, err
	}

	t := fromDB(at)
	for i, nm := range batch {
		switch seq, ok := seqs[nm.ID]; {
		case i != first[nm.ID]:
			out[i] = persistence.Accepted{Message: out[first[nm.ID]].Message}
		case ok:
			out[i] = persistence.Accepted{Created: true, Message: messages.Message{
				ID: nm.ID, SourceMSISDN: nm.SourceMSISDN, DestinationMSISDN: nm.DestinationMSISDN,
				Body: nm.Body, State: nm.State, SourceSMSC: nm.SourceSMSC, DestSMSC: nm.DestSMSC,
				Frontend: nm.Frontend, CreatedAt: t, UpdatedAt: t, SubmittedAt: t,
				QueuedAt: timeOrNil(queuedAt(nm.State, sql.NullInt64{}, at)), Seq: seq, Token: messages.TokenOf(nm.ID),
			}}
		default:
			out[i] = persistence.Accepted{Message: stored[nm.ID]}
		}
	}
	return out, nil
}

func validNew(nm persistence.NewMessage) error {
	switch {
	case nm.ID == "":
		return errors.New("empty id")
	case !nm.State.Valid():
		return fmt.Errorf("id %q: unknown state %q", nm.ID, nm.State)
	}
	if msg := validWork(nm.Work); msg != "" {
		return fmt.Errorf("id %q: %s", nm.ID, msg)
	}
	return nil
}

// GetMessage implements persistence.Store.
func (s *Store) GetMessage(ctx context.Context, id string) (messages.Message, error) {
	var m messages.Message
	err := s.read(ctx, "get message", func(tx *sql.Tx) error {
		var err error
		m, err = scanMessage(tx.QueryRowContext(ctx, `SELECT `+messageColumns+` FROM messages WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("message %q: %w", id, persistence.ErrNotFound)
		}
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT state, at, detail FROM history WHERE message_id = ? ORDER BY ordinal`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		m.History = []messages.HistoryEntry{}
		for rows.Next() {
			var h messages.HistoryEntry
			var state string
			var at int64
			if err := rows.Scan(&state, &at, &h.Detail); err != nil {
				return err
			}
			h.State, h.At = messages.State(state), fromDB(at)
			m.History = append(m.History, h)
		}
		return rows.Err()
	})
	if err != nil {
		return messages.Message{}, err
	}
	return m, nil
}

// The statements of ListMessages: one page (plus one row) below a cursor.
const (
	listSQL        = `SELECT ` + messageColumns + ` FROM messages WHERE seq < ? ORDER BY seq DESC LIMIT ?`
	listByStateSQL = `SELECT ` + messageColumns + ` FROM messages WHERE state = ? AND seq < ? ORDER BY seq DESC LIMIT ?`
)

// ListMessages implements persistence.Store. It reads one row more than the
// page to know whether another page follows.
func (s *Store) ListMessages(ctx context.Context, q persistence.ListQuery) (persistence.Page, error) {
	const op = "list messages"
	if err := s.check(op); err != nil {
		return persistence.Page{}, err
	}
	if q.Limit <= 0 {
		return persistence.Page{}, fmt.Errorf("sqlite: %s: limit %d must be positive", op, q.Limit)
	}
	before := q.Before
	if before <= 0 {
		before = math.MaxInt64
	}
	var (
		rows *sql.Rows
		err  error
	)
	if q.State == "" {
		rows, err = s.rdb.QueryContext(ctx, listSQL, before, q.Limit+1)
	} else {
		rows, err = s.rdb.QueryContext(ctx, listByStateSQL, string(q.State), before, q.Limit+1)
	}
	if err != nil {
		return persistence.Page{}, s.fail(ctx, op, err)
	}
	defer rows.Close()
	var page persistence.Page
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return persistence.Page{}, s.fail(ctx, op, err)
		}
		page.Messages = append(page.Messages, m)
	}
	if err := rows.Err(); err != nil {
		return persistence.Page{}, s.fail(ctx, op, err)
	}
	if len(page.Messages) > q.Limit {
		page.Messages = page.Messages[:q.Limit]
		page.Next = page.Messages[q.Limit-1].Seq
	}
	return page, nil
}

// forwardQueueSQL counts forward rows by peer from the claim index.
const forwardQueueSQL = `SELECT target, COUNT(*) FROM outbox WHERE kind = ? GROUP BY target`

// Stats implements persistence.Store with four aggregate queries on one
// snapshot; the counts come from indexes, not from rows in memory.
func (s *Store) Stats(ctx context.Context) (persistence.Stats, error) {
	st := persistence.NewStats()
	err := s.read(ctx, "stats", func(tx *sql.Tx) error {
		if err := countsInto(ctx, tx, st.ByState, `SELECT state, COUNT(*) FROM messages GROUP BY state`); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox`).Scan(&st.OutboxDepth); err != nil {
			return err
		}
		var oldest sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT MIN(created_at) FROM outbox`).Scan(&oldest); err != nil {
			return err
		}
		st.OldestOutbox = zeroIfNull(oldest)
		return countsInto(ctx, tx, st.ForwardQueue, forwardQueueSQL, string(persistence.WorkForward))
	})
	if err != nil {
		return persistence.Stats{}, err
	}
	st.DLQDepth = st.ByState[messages.StateFailed]
	return st, nil
}

// countsInto runs a query of (key, count) rows into counts.
func countsInto[K ~string](ctx context.Context, tx *sql.Tx, counts map[K]int64, query string, args ...any) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	return scanEach(rows, func(r *sql.Rows) error {
		var k K
		var n int64
		err := r.Scan(&k, &n)
		counts[k] = n
		return err
	})
}
