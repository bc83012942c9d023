package auth

import (
	"math"
	"sync"
	"time"
)

// Limiter holds one token bucket per credential: a client credential with
// a submit rate r may submit r messages a second, in bursts of up to
// max(1, r) (one second's worth), so one misbehaving application cannot
// starve the others. It takes the time from its caller. Safe for
// concurrent use. A bucket is a few words per client credential with a
// rate that ever submitted: they are kept for the node's life.
type Limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	rate   float64
	tokens float64
	at     time.Time
}

// NewLimiter returns a Limiter without buckets.
func NewLimiter() *Limiter { return &Limiter{buckets: map[string]*bucket{}} }

// Allow takes one submit from name's bucket at now. rate <= 0 always
// allows. When the bucket is empty it returns false and how long until a
// submit is allowed again.
func (l *Limiter) Allow(name string, rate float64, now time.Time) (bool, time.Duration) {
	if rate <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(name, rate, now)
	// A bucket that is full to within rounding is full: the wait we
	// answer is rounded up, and the refill after it must count.
	if b.tokens >= 1-1e-9 {
		b.tokens = max(0, b.tokens-1)
		return true, 0
	}
	wait := time.Duration(math.Ceil((1 - b.tokens) / rate * float64(time.Second)))
	return false, max(wait, time.Millisecond)
}

// Take takes one submit from name's bucket at now however few it holds:
// an empty bucket goes into debt, which the submits after it wait out
// (Allow refuses them until the bucket has refilled past it). For a
// submit that must not be refused by the rate once the others it belongs
// with were let in (a later part of a long message); the caller bounds
// how many such submits there may be.
func (l *Limiter) Take(name string, rate float64, now time.Time) {
	if rate <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(name, rate, now).tokens--
}

// refill is name's bucket at rate, refilled up to now (l.mu held).
func (l *Limiter) refill(name string, rate float64, now time.Time) *bucket {
	b := l.buckets[name]
	if b == nil || b.rate != rate {
		// A new credential, or its rate changed: start full.
		b = &bucket{rate: rate, tokens: math.Max(1, rate), at: now}
		l.buckets[name] = b
	}
	if now.After(b.at) {
		b.tokens = math.Min(math.Max(1, rate), b.tokens+now.Sub(b.at).Seconds()*rate)
		b.at = now
	}
	return b
}

// Refund gives back the submit a call of Allow at rate took from name's
// bucket (the submit turned out malformed: it uses none of the rate), up
// to a full bucket.
func (l *Limiter) Refund(name string, rate float64) {
	if rate <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[name]; b != nil && b.rate == rate {
		b.tokens = math.Min(math.Max(1, rate), b.tokens+1)
	}
}
