package sqlite

import (
	"context"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// Resubmit implements persistence.Store: one transaction loads the messages
// and persistence.Resubmit decides each reroute in input order.
func (s *Store) Resubmit(ctx context.Context, now time.Time, reroutes []persistence.Reroute) ([]persistence.ResubmitResult, error) {
	const op = "resubmit"
	if err := s.precheck(op, persistence.ValidateReroutes(reroutes)); err != nil {
		return nil, err
	}
	return persistence.Each(reroutes, func(x persistence.Reroute) string { return x.ID }, persistence.Resubmit, s.decider(ctx, op, now))
}
