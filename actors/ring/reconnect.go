package ring

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/persistence/lock"
)

// Reconnect is how a slave retries reaching its master (join and poll
// failures): exponential backoff with jitter, giving up after MaxAttempts
// failures in a row (then an auto instance stands for master). The node
// paces the tries of its instance lock with it too (a lock.Policy).
type Reconnect struct {
	// MaxAttempts is how many failures in a row are tolerated.
	MaxAttempts int
	// Min is the delay after the first failure, Max the cap of the
	// doubling.
	Min, Max time.Duration
	// Jitter in [0, 1] is the largest share taken off a delay at random,
	// so that slaves that lost the master together do not retry together.
	Jitter float64
}

var _ lock.Policy = Reconnect{}

// DefaultReconnect is a slave's reconnect policy towards its master.
func DefaultReconnect() Reconnect {
	return Reconnect{
		// 10 failures in a row: with the backoff below about a minute of
		// trying, longer than a master's failover takes.
		MaxAttempts: 10,
		// 2s, doubling to 6s: a master that restarts is back within
		// seconds, and a site's slaves do not hammer one that is not.
		Min: 2 * time.Second,
		Max: 6 * time.Second,
		// Up to half of each wait taken off, so slaves do not call in step.
		Jitter: 0.5,
	}
}

// Validate reports every problem of r, each a *field.Error naming its
// field.
func (r Reconnect) Validate() error {
	var errs []error
	if r.MaxAttempts < 1 {
		errs = append(errs, field.Errorf("MaxAttempts", "must be at least 1, got %d", r.MaxAttempts))
	}
	if r.Min <= 0 {
		errs = append(errs, field.Errorf("Min", "must be positive, got %v", r.Min))
	}
	if r.Max < r.Min {
		errs = append(errs, field.Errorf("Max", "must be at least %s (%v), got %v", field.Ref("Min"), r.Min, r.Max))
	}
	if !(r.Jitter >= 0 && r.Jitter <= 1) {
		errs = append(errs, field.Errorf("Jitter", "must be in [0, 1], got %v", r.Jitter))
	}
	return errors.Join(errs...)
}

// Delay is the wait before retry number attempt (1 for the retry after the
// first failure): base = min(Max, Min·2^(attempt-1)), and the delay is
// base·(1 − Jitter·u) with u drawn uniformly from [0, 1) by rng, so it lies
// in [base·(1−Jitter), base] (the low end within float64 rounding), and is
// never below 1ns. attempt below 1
// counts as 1. r must be valid.
func (r Reconnect) Delay(attempt int, rng *rand.Rand) time.Duration {
	base := r.Min
	for i := 1; i < attempt && base < r.Max; i++ {
		if base > r.Max/2 {
			base = r.Max
			break
		}
		base *= 2
	}
	base = min(base, r.Max)
	d := time.Duration(float64(base) * (1 - r.Jitter*rng.Float64()))
	return min(max(d, 1), base)
}

// GiveUp reports whether failures in a row are too many to keep trying.
func (r Reconnect) GiveUp(failures int) bool { return failures >= r.MaxAttempts }
