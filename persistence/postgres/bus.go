package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/persistence"
)

// relaySQL leases to the relay ($3 = until) up to $2 delivery rows not yet
// relayed whose relay lease ended at $1, oldest first, from outbox_relay.
// Rows another relay is taking are skipped, never waited for.
const relaySQL = `
UPDATE outbox o SET relay_until = $3
FROM (SELECT id FROM outbox
	WHERE kind = 'delivery' AND NOT relayed AND (relay_until IS NULL OR relay_until <= $1)
	ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) c
WHERE o.id = c.id
RETURNING o.id, o.message_id, o.target, o.created_at`

// markRelayedSQL marks rows ($1) relayed, locking them in id order (see the
// package doc): a worker's transaction may hold some of them.
const markRelayedSQL = `UPDATE outbox SET relayed = true, relay_until = NULL
WHERE id IN (SELECT id FROM outbox WHERE id = ANY($1) ORDER BY id FOR UPDATE)`

// RelayWork implements persistence.Store.
func (s *Store) RelayWork(ctx context.Context, req persistence.RelayRequest) ([]persistence.Relay, error) {
	const op = "relay work"
	if err := s.precheck(op, req.Validate()); err != nil {
		return nil, err
	}
	var out []persistence.Relay
	take := func(q conn) error {
		rows, err := q.Query(ctx, relaySQL, norm(req.Now), req.Limit, norm(req.Now.Add(req.Lease)))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (persistence.Relay, error) {
			var w persistence.Relay
			err := r.Scan(&w.Row, &w.MessageID, &w.Target, &w.CreatedAt)
			w.CreatedAt = w.CreatedAt.UTC()
			return w, err
		})
		return err
	}
	var err error
	if len(req.Relayed) == 0 {
		err = take(s.pool)
	} else {
		b := &pgx.Batch{}
		b.Queue(markRelayedSQL, req.Relayed)
		err = s.inTx(ctx, b, func(tx pgx.Tx) error { return take(tx) })
	}
	if err != nil {
		return nil, s.fail(op, err)
	}
	persistence.SortRelays(out)
	return out, nil
}

// MarkRelayed implements persistence.Store.
func (s *Store) MarkRelayed(ctx context.Context, rows []int64) error {
	const op = "mark relayed"
	if err := s.precheck(op, persistence.ValidateRows(rows)); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, markRelayedSQL, rows)
	return s.fail(op, err)
}

// OldestUnrelayed implements persistence.Store: the first row of
// outbox_relay (ids grow with creation).
func (s *Store) OldestUnrelayed(ctx context.Context) (time.Time, error) {
	const op = "oldest unrelayed"
	if err := s.precheck(op, nil); err != nil {
		return time.Time{}, err
	}
	var at time.Time
	err := s.pool.QueryRow(ctx, `SELECT created_at FROM outbox WHERE kind = 'delivery' AND NOT relayed ORDER BY id LIMIT 1`).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, s.fail(op, err)
	}
	return at.UTC(), nil
}
