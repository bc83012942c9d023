package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// failableSQL selects, oldest first, up to ?5 messages in state ?1 queued
// before ?2 without work of kind ?3 leased at ?4. It reads the partial
// index messages_state_queued, so it costs O(limit), whatever the queue.
const failableSQL = `SELECT m.id FROM messages m
	WHERE m.state = ?1 AND m.queued_at < ?2
	AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.kind = ?3 AND o.lease_until > ?4)
	ORDER BY m.queued_at, m.seq LIMIT +?5`

// FailForwards implements persistence.Store (persistence.FailForward
// decides).
func (s *Store) FailForwards(ctx context.Context, req persistence.ForwardExpiry) ([]messages.Message, error) {
	const op = "fail forwards"
	if err := s.precheck(op, req.Validate()); err != nil {
		return nil, err
	}
	now := toDB(req.Now)
	return s.sweep(ctx, op, s.write, req.Now, query(failableSQL,
		string(messages.StateForwardQueued), toDB(req.QueuedBefore), string(persistence.WorkForward), now, req.Limit),
		func(l *persistence.Loaded, c *persistence.Changes, m *persistence.Row) bool {
			return persistence.FailForward(l, c, m, req)
		})
}

// queueableSQL selects, in acceptance order, up to ?5 messages in state ?1
// with work of kind ?2 for target ?3 not leased at ?4. It walks the pending
// messages (messages_state_seq), not the peer's outbox rows: those include
// every message already queued for the peer, however many, while pending
// messages are the few not yet tried.
const queueableSQL = `SELECT m.id FROM messages m
	WHERE m.state = ?1 AND EXISTS (SELECT 1 FROM outbox o
		WHERE o.message_id = m.id AND o.kind = ?2 AND o.target = ?3 AND (o.lease_until IS NULL OR o.lease_until <= ?4))
	ORDER BY m.seq LIMIT +?5`

// QueueForwards implements persistence.Store (persistence.QueueForward
// decides).
func (s *Store) QueueForwards(ctx context.Context, now time.Time, peer, detail string, limit int) ([]string, error) {
	const op = "queue forwards"
	if err := s.precheck(op, persistence.ValidateQueue(peer, limit)); err != nil {
		return nil, err
	}
	at := toDB(now)
	moved, err := s.sweep(ctx, op, s.write, now, query(queueableSQL,
		string(messages.StatePending), string(persistence.WorkForward), peer, at, limit),
		func(l *persistence.Loaded, c *persistence.Changes, m *persistence.Row) bool {
			return persistence.QueueForward(l, c, m, now, peer, detail)
		})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(moved))
	for i, m := range moved {
		ids[i] = m.ID
	}
	return ids, nil
}

// forwardTargetsSQL walks the distinct targets of forward work with one
// seek of outbox_claim per target (a loose index scan), so it costs
// O(peers), not O(queued forwards).
const forwardTargetsSQL = `WITH RECURSIVE t(target) AS (
	SELECT (SELECT min(target) FROM outbox WHERE kind = 'forward')
	UNION ALL
	SELECT (SELECT min(o.target) FROM outbox o WHERE o.kind = 'forward' AND o.target > t.target) FROM t WHERE t.target IS NOT NULL
) SELECT target FROM t WHERE target IS NOT NULL`

// ForwardTargets implements persistence.Store.
func (s *Store) ForwardTargets(ctx context.Context) ([]string, error) {
	out := []string{}
	err := s.read(ctx, "forward targets", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, forwardTargetsSQL)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			var t string
			err := r.Scan(&t)
			out = append(out, t)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PeerRegistries implements persistence.Store: peers and their frontends
// sort bytewise.
func (s *Store) PeerRegistries(ctx context.Context) ([]persistence.PeerRegistry, error) {
	const op = "peer registries"
	var out []persistence.PeerRegistry
	err := s.read(ctx, op, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT peer, frontend, updated_at FROM peer_registry ORDER BY peer, frontend`)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			var peer, frontend string
			var updated int64
			if err := r.Scan(&peer, &frontend, &updated); err != nil {
				return err
			}
			if n := len(out); n == 0 || out[n-1].Peer != peer {
				out = append(out, persistence.PeerRegistry{Peer: peer, UpdatedAt: fromDB(updated)})
			}
			out[len(out)-1].Frontends = append(out[len(out)-1].Frontends, frontend)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PutPeerRegistry implements persistence.Store. A registry without
// frontends is stored as nothing: the peer is then absent from
// PeerRegistries, as if it had never sent one.
func (s *Store) PutPeerRegistry(ctx context.Context, r persistence.PeerRegistry) error {
	const op = "put peer registry"
	if err := s.check(op); err != nil {
		return err
	}
	frontends, err := persistence.ValidateRegistry(r)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return s.write(ctx, op, func(tx querier) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM peer_registry WHERE peer = ?`, r.Peer); err != nil {
			return err
		}
		args := make([]any, 0, 3*len(frontends))
		for _, f := range frontends {
			args = append(args, r.Peer, f, toDB(r.UpdatedAt))
		}
		return insertRows(ctx, tx, `INSERT INTO peer_registry (peer, frontend, updated_at)`, 3, args)
	})
}
