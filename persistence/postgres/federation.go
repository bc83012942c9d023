package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// queueCandidatesSQL finds, in acceptance order, pending messages with
// unleased forward work for a peer. It walks the pending messages
// (messages_state_seq), not the peer's outbox rows: those include every
// message already queued for the peer, however many, while pending messages
// are the few not yet tried.
const queueCandidatesSQL = `
SELECT m.id FROM messages m
WHERE m.state = 'pending' AND EXISTS (SELECT 1 FROM outbox o
	WHERE o.message_id = m.id AND o.kind = 'forward' AND o.target = $1
		AND (o.lease_until IS NULL OR o.lease_until <= $2))
ORDER BY m.seq
LIMIT $3`

// QueueForwards implements persistence.Store (persistence.QueueForward
// decides).
func (s *Store) QueueForwards(ctx context.Context, now time.Time, peer, detail string, limit int) ([]string, error) {
	if err := s.precheck("queue forwards", persistence.ValidateQueue(peer, limit)); err != nil {
		return nil, err
	}
	moved, err := s.sweep(ctx, "queue forwards", now, queueCandidatesSQL, []any{peer, norm(now), limit},
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

// failForwardsCandidatesSQL finds, oldest first, forward_queued messages
// queued before a cutoff whose forward work is not leased. It reads the
// partial index messages_state_queued, so it costs O(limit) whatever the
// queue.
const failForwardsCandidatesSQL = `
SELECT m.id FROM messages m
WHERE m.state = 'forward_queued' AND m.queued_at < $1
	AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.kind = 'forward' AND o.lease_until > $2)
ORDER BY m.queued_at, m.id
LIMIT $3`

// FailForwards implements persistence.Store (persistence.FailForward
// decides).
func (s *Store) FailForwards(ctx context.Context, req persistence.ForwardExpiry) ([]messages.Message, error) {
	if err := s.precheck("fail forwards", req.Validate()); err != nil {
		return nil, err
	}
	return s.sweep(ctx, "fail forwards", req.Now, failForwardsCandidatesSQL, []any{norm(req.QueuedBefore), norm(req.Now), req.Limit},
		func(l *persistence.Loaded, c *persistence.Changes, m *persistence.Row) bool {
			return persistence.FailForward(l, c, m, req)
		})
}

// forwardTargetsSQL walks the distinct targets of forward work with one
// seek of outbox_claim per target (a loose index scan), so it costs
// O(peers), not O(queued forwards).
const forwardTargetsSQL = `
WITH RECURSIVE t(target) AS (
	SELECT (SELECT min(target) FROM outbox WHERE kind = 'forward')
	UNION ALL
	SELECT (SELECT min(o.target) FROM outbox o WHERE o.kind = 'forward' AND o.target > t.target) FROM t WHERE t.target IS NOT NULL
) SELECT target FROM t WHERE target IS NOT NULL`

// ForwardTargets implements persistence.Store.
func (s *Store) ForwardTargets(ctx context.Context) ([]string, error) {
	if s.closed.Load() {
		return nil, s.fail("forward targets", persistence.ErrClosed)
	}
	rows, err := s.pool.Query(ctx, forwardTargetsSQL)
	if err != nil {
		return nil, s.fail("forward targets", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.fail("forward targets", err)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// PeerRegistries implements persistence.Store: peers and their frontends
// sort bytewise.
func (s *Store) PeerRegistries(ctx context.Context) ([]persistence.PeerRegistry, error) {
	if s.closed.Load() {
		return nil, s.fail("peer registries", persistence.ErrClosed)
	}
	rows, err := s.pool.Query(ctx, "SELECT peer, frontend, updated_at FROM peer_registry ORDER BY peer, frontend")
	if err != nil {
		return nil, s.fail("peer registries", err)
	}
	var out []persistence.PeerRegistry
	var peer, frontend string
	var updated time.Time
	_, err = pgx.ForEachRow(rows, []any{&peer, &frontend, &updated}, func() error {
		if n := len(out); n == 0 || out[n-1].Peer != peer {
			out = append(out, persistence.PeerRegistry{Peer: peer, UpdatedAt: updated.UTC()})
		}
		out[len(out)-1].Frontends = append(out[len(out)-1].Frontends, frontend)
		return nil
	})
	if err != nil {
		return nil, s.fail("peer registries", err)
	}
	return out, nil
}

// PutPeerRegistry implements persistence.Store in one round trip (and the
// commit). A registry without frontends is stored as nothing: the peer is
// then absent from PeerRegistries, as if it had never sent one.
func (s *Store) PutPeerRegistry(ctx context.Context, r persistence.PeerRegistry) error {
	if s.closed.Load() {
		return s.fail("put peer registry", persistence.ErrClosed)
	}
	frontends, err := persistence.ValidateRegistry(r)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	b := &pgx.Batch{}
	b.Queue("DELETE FROM peer_registry WHERE peer = $1", r.Peer)
	b.Queue(`INSERT INTO peer_registry (peer, frontend, updated_at)
SELECT $1::text, f, $3::timestamptz FROM unnest($2::text[]) AS f`, r.Peer, frontends, norm(r.UpdatedAt))
	return s.fail("put peer registry", s.inTx(ctx, b, nil))
}
