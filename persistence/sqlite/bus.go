package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// relaySQL takes up to ?2 delivery rows not yet relayed and due at ?1,
// earliest due first (then oldest: the rowid ends outbox_relay's key),
// after (?3, ?4) in that order, from outbox_relay, and marks them relayed.
const relaySQL = `UPDATE outbox SET relayed = 1
	WHERE id IN (SELECT id FROM outbox INDEXED BY outbox_relay
		WHERE relayed = 0 AND +kind = 'delivery' AND due_at <= ?1 AND (due_at, id) > (?3, ?4)
		ORDER BY due_at, id LIMIT +?2)
	RETURNING id, message_id, target, created_at, due_at`

// RelayWork implements persistence.Store.
func (s *Store) RelayWork(ctx context.Context, req persistence.RelayRequest) ([]persistence.Relay, error) {
	const op = "relay work"
	if err := s.precheck(op, persistence.ValidateRelay(req)); err != nil {
		return nil, err
	}
	var out []persistence.Relay
	err := s.write(ctx, op, func(tx querier) error {
		out = nil // a retried transaction starts over
		rows, err := tx.QueryContext(ctx, relaySQL, toDB(req.Now), req.Limit, toDB(req.After.DueAt), req.After.Row)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			var (
				w       persistence.Relay
				at, due int64
			)
			if err := r.Scan(&w.Row, &w.MessageID, &w.Target, &at, &due); err != nil {
				return err
			}
			w.CreatedAt, w.DueAt = fromDB(at), fromDB(due)
			out = append(out, w)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	persistence.SortRelays(out)
	return out, nil
}

// Unrelay implements persistence.Store.
func (s *Store) Unrelay(ctx context.Context, rows []int64) error {
	const op = "unrelay"
	if err := s.precheck(op, persistence.ValidateRows(rows)); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	ids := make([]any, len(rows))
	for i, r := range rows {
		ids[i] = r
	}
	return s.write(ctx, op, func(tx querier) error {
		return chunks(len(ids), func(lo, hi int) error {
			_, err := tx.ExecContext(ctx, `UPDATE outbox SET relayed = 0 WHERE id IN (`+params(hi-lo)+`)`, ids[lo:hi]...)
			return err
		})
	})
}

// RelayAgain implements persistence.Store (the writer holds no row of
// another transaction: none is skipped).
func (s *Store) RelayAgain(ctx context.Context, after int64, limit int) (int64, error) {
	const op = "relay again"
	if err := s.precheck(op, persistence.ValidateRelayAgain(after, limit)); err != nil {
		return 0, err
	}
	var last int64
	err := s.write(ctx, op, func(tx querier) error {
		last = 0 // a retried transaction starts over
		rows, err := tx.QueryContext(ctx, `UPDATE outbox SET relayed = 0
			WHERE id IN (SELECT id FROM outbox WHERE id > ?1 AND relayed = 1 AND kind = 'delivery' ORDER BY id LIMIT +?2)
			RETURNING id`, after, limit)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			var id int64
			err := r.Scan(&id)
			last = max(last, id)
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	return last, nil
}

// oldestUnrelayedSQL reads the due time of the first row of outbox_relay.
const oldestUnrelayedSQL = `SELECT due_at FROM outbox INDEXED BY outbox_relay
	WHERE relayed = 0 AND +kind = 'delivery' ORDER BY due_at LIMIT 1`

// OldestUnrelayed implements persistence.Store: the first row of
// outbox_relay.
func (s *Store) OldestUnrelayed(ctx context.Context) (time.Time, error) {
	var at time.Time
	err := s.read(ctx, "oldest unrelayed", func(tx *sql.Tx) error {
		var us int64
		err := tx.QueryRowContext(ctx, oldestUnrelayedSQL).Scan(&us)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		at = fromDB(us)
		return err
	})
	return at, err
}
