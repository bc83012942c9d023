package ring

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Reconnect is how a slave retries reaching its master (join and poll
// failures): exponential backoff with jitter, giving up after MaxAttempts
// failures in a row (then an auto instance stands for master).
type Reconnect struct {
	// MaxAttempts is how many failures in a row are tolerated
	// (--ring-reconnect-max-attempts).
	MaxAttempts int
	// Min is the delay after the first failure, Max the cap of the
	// doubling (--ring-reconnect-backoff-min, --ring-reconnect-backoff-max).
	Min, Max time.Duration
	// Jitter in [0, 1] is the largest share taken off a delay at random,
	// so that slaves that lost the master together do not retry together
	// (--ring-reconnect-jitter).
	Jitter float64
}

// Validate reports every problem of r.
func (r Reconnect) Validate() error {
	var errs []error
	if r.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("--ring-reconnect-max-attempts: must be at least 1, got %d", r.MaxAttempts))
	}
	if r.Min <= 0 {
		errs = append(errs, fmt.Errorf("--ring-reconnect-backoff-min: must be positive, got %v", r.Min))
	}
	if r.Max < r.Min {
		errs = append(errs, fmt.Errorf("--ring-reconnect-backoff-max: must be at least --ring-reconnect-backoff-min (%v), got %v", r.Min, r.Max))
	}
	if !(r.Jitter >= 0 && r.Jitter <= 1) {
		errs = append(errs, fmt.Errorf("--ring-reconnect-jitter: must be in [0, 1], got %v", r.Jitter))
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
