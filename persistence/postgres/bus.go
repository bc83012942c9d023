package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/persistence"
)

// relaySQL takes up to $2 delivery rows not yet relayed and due at $1,
// earliest due first (then oldest), after ($3, $4) in that order, from
// outbox_relay, and marks them relayed. Rows another transaction holds are
// skipped, never waited for.
const relaySQL = `
UPDATE outbox o SET relayed = true
FROM (SELECT id FROM outbox WHERE kind = 'delivery' AND NOT relayed AND due_at <= $1 AND (due_at, id) > ($3, $4)
	ORDER BY due_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) c
WHERE o.id = c.id
RETURNING o.id, o.message_id, o.target, o.created_at, o.due_at`

// RelayWork implements persistence.Store.
func (s *Store) RelayWork(ctx context.Context, req persistence.RelayRequest) ([]persistence.Relay, error) {
	const op = "relay work"
	if err := s.precheck(op, persistence.ValidateRelay(req)); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, relaySQL, req.Now, req.Limit, req.After.DueAt, req.After.Row)
	if err != nil {
		return nil, s.fail(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (persistence.Relay, error) {
		var w persistence.Relay
		err := r.Scan(&w.Row, &w.MessageID, &w.Target, &w.CreatedAt, &w.DueAt)
		w.CreatedAt, w.DueAt = w.CreatedAt.UTC(), w.DueAt.UTC()
		return w, err
	})
	if err != nil {
		return nil, s.fail(op, err)
	}
	persistence.SortRelays(out)
	return out, nil
}

// Unrelay implements persistence.Store. The rows are locked in id order
// (see the package doc): a worker's transaction may hold some of them.
func (s *Store) Unrelay(ctx context.Context, rows []int64) error {
	const op = "unrelay"
	if err := s.precheck(op, persistence.ValidateRows(rows)); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE outbox SET relayed = false
WHERE id IN (SELECT id FROM outbox WHERE id = ANY($1) ORDER BY id FOR UPDATE)`, rows)
	return s.fail(op, err)
}

// relayAgainSQL marks up to $2 relayed delivery rows above $1 not relayed,
// in id order (rows a worker's transaction holds are skipped), and reads
// the last.
const relayAgainSQL = `
WITH again AS (
	UPDATE outbox o SET relayed = false
	FROM (SELECT id FROM outbox WHERE kind = 'delivery' AND relayed AND id > $1
		ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) c
	WHERE o.id = c.id
	RETURNING o.id)
SELECT coalesce(max(id), 0) FROM again`

// RelayAgain implements persistence.Store.
func (s *Store) RelayAgain(ctx context.Context, after int64, limit int) (int64, error) {
	const op = "relay again"
	if err := s.precheck(op, persistence.ValidateRelayAgain(after, limit)); err != nil {
		return 0, err
	}
	var last int64
	if err := s.pool.QueryRow(ctx, relayAgainSQL, after, limit).Scan(&last); err != nil {
		return 0, s.fail(op, err)
	}
	return last, nil
}

// OldestUnrelayed implements persistence.Store: the first row of
// outbox_relay.
func (s *Store) OldestUnrelayed(ctx context.Context) (time.Time, error) {
	const op = "oldest unrelayed"
	if err := s.precheck(op, nil); err != nil {
		return time.Time{}, err
	}
	var at time.Time
	err := s.pool.QueryRow(ctx, `SELECT due_at FROM outbox WHERE kind = 'delivery' AND NOT relayed ORDER BY due_at LIMIT 1`).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, s.fail(op, err)
	}
	return at.UTC(), nil
}
