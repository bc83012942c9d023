package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// ApplyStatus implements persistence.Store (see decideBatch).
func (s *Store) ApplyStatus(ctx context.Context, now time.Time, updates []persistence.StatusUpdate) ([]persistence.Completion, error) {
	return s.decideBatch(ctx, now, batch{
		op: "apply status", what: "update", n: len(updates),
		valid: func(i int) error { return validStatus(updates[i]) },
		id:    func(i int) string { return updates[i].ID },
		decide: func(i int, m *msgRow, work []workRow, c *changes) persistence.Completion {
			u := updates[i]
			if m == nil {
				return persistence.NoWork
			}
			if done := persistence.StatusCompletion(m.State, m.DestSMSC, u); done != persistence.Applied {
				return done
			}
			detail := persistence.StatusDetail(u)
			if j := findWork(work, persistence.WorkForward, u.From); j >= 0 {
				c.finish(work[j].id)
			}
			c.record(u.ID, persistence.WorkForward, u.From, u.Result, detail)
			if u.Result == persistence.ResultFailed {
				m.Reason = u.Reason
			}
			c.move(m, persistence.StateAfter(persistence.WorkDelivery, u.Result), detail)
			return persistence.Applied
		},
	})
}

func validStatus(u persistence.StatusUpdate) error {
	var errs []error
	if u.ID == "" {
		errs = append(errs, errors.New("empty id"))
	}
	if u.From == "" {
		errs = append(errs, errors.New("empty from"))
	}
	if u.Result != persistence.ResultDelivered && u.Result != persistence.ResultFailed {
		errs = append(errs, fmt.Errorf("result %q is neither delivered nor failed", u.Result))
	}
	return errors.Join(errs...)
}

// failableSQL selects, oldest first, up to ?5 messages in state ?1 queued
// before ?2 without work of kind ?3 leased at ?4. It reads the partial
// index messages_state_queued, so it costs O(limit), whatever the queue.
const failableSQL = `SELECT ` + rowColumns + ` FROM messages m
	WHERE m.state = ?1 AND m.queued_at < ?2
	AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.kind = ?3 AND o.lease_until > ?4)
	ORDER BY m.queued_at, m.seq LIMIT ?5`

// forwardTimeoutDetail is the history and ledger detail of FailForwards.
const forwardTimeoutDetail = "waited too long in forward_queued"

// FailForwards implements persistence.Store. A queued message without
// forward work gets its failed forward ledger entry for its dest_smsc.
func (s *Store) FailForwards(ctx context.Context, req persistence.ForwardExpiry) ([]messages.Message, error) {
	const op = "fail forwards"
	if req.Limit <= 0 {
		if err := s.check(op); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("sqlite: %s: limit %d must be positive", op, req.Limit)
	}
	now := toDB(req.Now)
	return s.sweep(ctx, op, now, failableSQL,
		[]any{string(messages.StateForwardQueued), toDB(req.QueuedBefore), string(persistence.WorkForward), now, req.Limit},
		func(m *msgRow, work []workRow, c *changes) bool {
			c.failWork(m, work, messages.StateForwardFailed, messages.ReasonForwardTimeout, forwardTimeoutDetail,
				workRow{kind: persistence.WorkForward, target: m.DestSMSC}, persistence.WorkForward)
			return true
		})
}

// queueableSQL selects, in acceptance order, up to ?5 messages in state ?1
// with work of kind ?2 for target ?3 not leased at ?4. It walks the pending
// messages (messages_state_seq), not the peer's outbox rows: those include
// every message already queued for the peer, however many, while pending
// messages are the few not yet tried.
const queueableSQL = `SELECT ` + rowColumns + ` FROM messages m
	WHERE m.state = ?1 AND EXISTS (SELECT 1 FROM outbox o
		WHERE o.message_id = m.id AND o.kind = ?2 AND o.target = ?3 AND (o.lease_until IS NULL OR o.lease_until <= ?4))
	ORDER BY m.seq LIMIT ?5`

// QueueForwards implements persistence.Store.
func (s *Store) QueueForwards(ctx context.Context, now time.Time, peer, detail string, limit int) ([]string, error) {
	const op = "queue forwards"
	if err := validQueue(peer, limit); err != nil {
		if err := s.check(op); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	at := toDB(now)
	moved, err := s.sweep(ctx, op, at, queueableSQL,
		[]any{string(messages.StatePending), string(persistence.WorkForward), peer, at, limit},
		func(m *msgRow, _ []workRow, c *changes) bool {
			c.move(m, messages.StateForwardQueued, detail)
			return true
		})
	if err != nil {
		return nil, err
	}
	return messageIDs(moved), nil
}

func validQueue(peer string, limit int) error {
	var errs []error
	if peer == "" {
		errs = append(errs, errors.New("empty peer"))
	}
	if limit <= 0 {
		errs = append(errs, fmt.Errorf("limit %d must be positive", limit))
	}
	return errors.Join(errs...)
}

// messageIDs lists the ids of msgs, in order.
func messageIDs(msgs []messages.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
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
	frontends, err := validRegistry(r)
	if err != nil {
		return fmt.Errorf("sqlite: %s %q: %w", op, r.Peer, err)
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

// validRegistry returns r's frontends sorted, each once.
func validRegistry(r persistence.PeerRegistry) ([]string, error) {
	var errs []error
	if r.Peer == "" {
		errs = append(errs, errors.New("empty peer"))
	}
	if slices.Contains(r.Frontends, "") {
		errs = append(errs, errors.New("empty frontend name"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slices.Compact(slices.Sorted(slices.Values(r.Frontends))), nil
}
