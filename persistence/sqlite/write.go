package sqlite

import (
	"context"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// Write implements persistence.Store: its parts in one transaction, in the
// order persistence.Write names (the decisions on outcomes and statuses with
// one load and one write of their changes, then the new messages, then the
// claims).
func (s *Store) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	const op = "write"
	var out persistence.Written
	if err := s.precheck(op, w.Validate()); err != nil {
		return out, err
	}
	if w.Empty() {
		return out, nil
	}
	ids, decide := w.Decisions(&out)
	err := s.write(ctx, op, func(tx querier) error {
		if decide != nil {
			l := persistence.NewLoaded()
			if err := load(ctx, tx, l, ids, false); err != nil {
				return err
			}
			c := persistence.NewChanges(now)
			decide(l, c)
			if err := writeChanges(ctx, tx, c); err != nil {
				return err
			}
		}
		if len(w.Accept) > 0 {
			var err error
			if out.Accepted, err = accept(ctx, tx, now, w.Accept); err != nil {
				return err
			}
		}
		out.Claims = make([]persistence.Claim, len(w.Claims))
		for i, req := range w.Claims {
			var err error
			if out.Claims[i], err = claim(ctx, tx, req); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return persistence.Written{}, err
	}
	return out, nil
}
