package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// ApplyStatus implements persistence.Store (see decideBatch). A report
// overtakes a forward still leased.
func (s *Store) ApplyStatus(ctx context.Context, now time.Time, updates []persistence.StatusUpdate) ([]persistence.Completion, error) {
	if s.closed.Load() {
		return nil, s.fail("apply status", persistence.ErrClosed)
	}
	if err := validateStatuses(updates); err != nil {
		return nil, err
	}
	return s.decideBatch(ctx, now, batch{
		op: "apply status", n: len(updates),
		id: func(i int) string { return updates[i].ID },
		decide: func(i int, m *message, work []workRow, c *changes) persistence.Completion {
			u := updates[i]
			if m == nil {
				return persistence.NoWork
			}
			if done := persistence.StatusCompletion(m.State, m.DestSMSC, u); done != persistence.Applied {
				return done
			}
			detail := persistence.StatusDetail(u)
			forward, _ := rowsOf(work, persistence.WorkForward, u.From)
			c.finish(forward...)
			c.record(u.ID, persistence.WorkForward, u.From, u.Result, detail)
			if u.Result == persistence.ResultFailed {
				m.Reason = u.Reason
			}
			c.move(m, persistence.StateAfter(persistence.WorkDelivery, u.Result), detail)
			return persistence.Applied
		},
	})
}

func validateStatuses(updates []persistence.StatusUpdate) error {
	var errs []error
	for i, u := range updates {
		if u.ID == "" {
			errs = append(errs, fmt.Errorf("apply status: update %d: empty id", i))
		}
		if u.From == "" {
			errs = append(errs, fmt.Errorf("apply status: update %d (%q): empty from", i, u.ID))
		}
		if u.Result != persistence.ResultDelivered && u.Result != persistence.ResultFailed {
			errs = append(errs, fmt.Errorf("apply status: update %d (%q): result %q is neither delivered nor failed", i, u.ID, u.Result))
		}
	}
	return errors.Join(errs...)
}

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

// QueueForwards implements persistence.Store.
func (s *Store) QueueForwards(ctx context.Context, now time.Time, peer, detail string, limit int) ([]string, error) {
	var errs []error
	if peer == "" {
		errs = append(errs, errors.New("queue forwards: empty peer"))
	}
	if limit <= 0 {
		errs = append(errs, fmt.Errorf("queue forwards: limit %d must be positive", limit))
	}
	if err := errors.Join(errs...); err != nil {
		if s.closed.Load() {
			return nil, s.fail("queue forwards", persistence.ErrClosed)
		}
		return nil, err
	}
	now = norm(now)
	moved, err := s.sweep(ctx, "queue forwards", now, queueCandidatesSQL, []any{peer, now, limit},
		func(m *message, work []workRow, c *changes) bool {
			if m.State != messages.StatePending || !unleased(work, peer, now) {
				return false
			}
			c.move(m, messages.StateForwardQueued, detail)
			return true
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

// unleased reports whether work holds a forward row for peer without a
// lease live at now.
func unleased(work []workRow, peer string, now time.Time) bool {
	for _, w := range work {
		if w.kind == persistence.WorkForward && w.target == peer && !w.leased(now) {
			return true
		}
	}
	return false
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

// forwardTimeoutDetail is the history and ledger detail of FailForwards.
const forwardTimeoutDetail = "waited too long in forward_queued"

// FailForwards implements persistence.Store. A queued message without
// forward work gets its failed forward ledger entry for its dest_smsc.
func (s *Store) FailForwards(ctx context.Context, req persistence.ForwardExpiry) ([]messages.Message, error) {
	if req.Limit <= 0 {
		if s.closed.Load() {
			return nil, s.fail("fail forwards", persistence.ErrClosed)
		}
		return nil, fmt.Errorf("fail forwards: limit %d must be positive", req.Limit)
	}
	now, cutoff := norm(req.Now), norm(req.QueuedBefore)
	return s.sweep(ctx, "fail forwards", now, failForwardsCandidatesSQL, []any{cutoff, now, req.Limit},
		func(m *message, work []workRow, c *changes) bool {
			if m.State != messages.StateForwardQueued || m.QueuedAt == nil || !m.QueuedAt.Before(cutoff) ||
				leased(work, persistence.WorkForward, now) {
				return false
			}
			c.failWork(m, work, messages.StateForwardFailed, messages.ReasonForwardTimeout, forwardTimeoutDetail,
				workRow{kind: persistence.WorkForward, target: m.DestSMSC}, persistence.WorkForward)
			return true
		})
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
	var errs []error
	if r.Peer == "" {
		errs = append(errs, errors.New("put peer registry: empty peer"))
	}
	if slices.Contains(r.Frontends, "") {
		errs = append(errs, fmt.Errorf("put peer registry %q: empty frontend name", r.Peer))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue("DELETE FROM peer_registry WHERE peer = $1", r.Peer)
	b.Queue(`INSERT INTO peer_registry (peer, frontend, updated_at)
SELECT DISTINCT $1::text, f, $3::timestamptz FROM unnest($2::text[]) AS f`, r.Peer, r.Frontends, norm(r.UpdatedAt))
	return s.fail("put peer registry", s.inTx(ctx, b, nil))
}
