package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-dev/switchboard/persistence"
)

// conn is the pool or a transaction.
type conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// part is one part of a Write: queue puts the statements of its first round
// trip into b (the first part's travel with BEGIN), run does the rest once
// that round trip has come back.
type part struct {
	queue func(b *pgx.Batch)
	run   func(ctx context.Context, q conn) error
}

// decidePart decides the outcomes and statuses of a Write: its first round
// trip locks and loads their messages (see queueLoad), the second writes
// what the core decided.
func decidePart(now time.Time, ids []string, decide func(*persistence.Loaded, *persistence.Changes)) part {
	l := persistence.NewLoaded()
	return part{
		queue: func(b *pgx.Batch) { queueLoad(b, l, ids) },
		run: func(ctx context.Context, q conn) error {
			c := persistence.NewChanges(now)
			decide(l, c)
			return writeChanges(ctx, q, c)
		},
	}
}

// Write implements persistence.Store: its parts in one transaction, in the
// order persistence.Write names, each part's first statements in one round
// trip (the first part's with BEGIN), then commit. A Write of new messages
// alone needs no transaction of its own: its statement is one, in one round
// trip (and one more to read ids already stored). That statement commits
// on its own, so when a later round trip fails, the messages it created
// are stored: Write reports them in a persistence.PartialAccept.
func (s *Store) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	var out persistence.Written
	if err := s.precheck("write", w.Validate()); err != nil {
		return out, err
	}
	if w.Empty() {
		return out, nil
	}
	now = norm(now)
	if len(w.Outcomes)+len(w.Statuses)+len(w.Claims) == 0 {
		return s.acceptAlone(ctx, now, w.Accept)
	}
	// A stale load of the decisions' messages runs the transaction again
	// (fresh), each attempt with parts and results of its own.
	err := fresh(func() error {
		out = persistence.Written{}
		var parts []part
		if ids, decide := w.Decisions(&out); decide != nil {
			parts = append(parts, decidePart(now, ids, decide))
		}
		if len(w.Accept) > 0 {
			parts = append(parts, s.acceptPart(now, w.Accept, &out.Accepted))
		}
		out.Claims = make([]persistence.Claim, len(w.Claims))
		for i, req := range w.Claims {
			parts = append(parts, s.claimPart(req, &out.Claims[i]))
		}
		first := &pgx.Batch{}
		parts[0].queue(first)
		return s.inTx(ctx, first, func(tx pgx.Tx) error {
			for i, p := range parts {
				if i > 0 {
					b := &pgx.Batch{}
					p.queue(b)
					if err := tx.SendBatch(ctx, b).Close(); err != nil {
						return err
					}
				}
				if err := p.run(ctx, tx); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return persistence.Written{}, s.fail("write", err)
	}
	return out, nil
}

// acceptAlone writes a Write of new messages alone, without a transaction
// of its own (see Write).
func (s *Store) acceptAlone(ctx context.Context, now time.Time, batch []persistence.NewMessage) (persistence.Written, error) {
	var out persistence.Written
	p := s.acceptPart(now, batch, &out.Accepted)
	first := &pgx.Batch{}
	p.queue(first)
	if err := s.pool.SendBatch(ctx, first).Close(); err != nil {
		return persistence.Written{}, s.fail("write", err)
	}
	if err := p.run(ctx, s.pool); err != nil {
		return persistence.Written{}, persistence.Partial(out.Accepted, s.fail("write", err))
	}
	return out, nil
}
