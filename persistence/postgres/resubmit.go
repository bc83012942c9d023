package postgres

import (
	"context"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// Resubmit implements persistence.Store in three round trips (see decide):
// persistence.Resubmit decides each reroute in input order.
func (s *Store) Resubmit(ctx context.Context, now time.Time, reroutes []persistence.Reroute) ([]persistence.ResubmitResult, error) {
	if err := s.precheck("resubmit", persistence.ValidateReroutes(reroutes)); err != nil {
		return nil, err
	}
	return persistence.Each(reroutes, func(x persistence.Reroute) string { return x.ID }, persistence.Resubmit, s.decider(ctx, "resubmit", now))
}
