// Package clock is the time source of actor shells. Pure cores take `now` as an
// argument; shells read it from a Clock and schedule their wake-ups through
// it, so that the sim harness can drive a whole node's time from a seed.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and runs functions later.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d. The returned stop
	// function cancels a call that has not started and reports whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Real is the wall clock.
type Real struct{}

// Now returns the current time in UTC.
func (Real) Now() time.Time { return time.Now().UTC() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Wakeup keeps at most one pending wake-up for an actor: Schedule(at) arms a
// timer for the earliest requested time, and the callback receives the
// generation it was armed with so that a stale fire can be told apart from the
// current one. It is safe to use from the actor and from timer goroutines.
type Wakeup struct {
	clock Clock
	fire  func(gen uint64)

	mu   sync.Mutex
	at   time.Time
	stop func() bool
	gen  uint64
}

// NewWakeup returns a Wakeup that calls fire (typically a Send to the actor's
// own PID) when it is due.
func NewWakeup(c Clock, fire func(gen uint64)) *Wakeup {
	return &Wakeup{clock: c, fire: fire}
}

// Schedule asks for a wake-up at `at` (or at once when `at` is not in the
// future). An earlier pending wake-up is kept; a later one is replaced.
func (w *Wakeup) Schedule(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil && !w.at.After(at) {
		return
	}
	if w.stop != nil {
		w.stop()
	}
	w.gen++
	gen := w.gen
	w.at = at
	d := at.Sub(w.clock.Now())
	if d < 0 {
		d = 0
	}
	w.stop = w.clock.AfterFunc(d, func() {
		w.mu.Lock()
		current := w.gen == gen
		if current {
			w.stop = nil
		}
		w.mu.Unlock()
		if current {
			w.fire(gen)
		}
	})
}

// Cancel drops the pending wake-up, if any. Call it on Stopping and
// Restarting: timers are not tied to an actor's life.
func (w *Wakeup) Cancel() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
	w.gen++
}

// Earliest is the earlier of two wake-up times, a zero time meaning none.
func Earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
