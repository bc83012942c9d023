package sim

import (
	"sync"
	"sync/atomic"
	"time"
)

// nodeClock is a node's Config.Clock: the bubble's time moved by the
// node's offset, which the schedule changes (a constant skew from the
// other nodes, a jump forward or back as a clock stepped by hand or by
// NTP). Every incarnation and instance of the node reads it. Timers run
// on the bubble's time: a jump moves what the node reads, not the
// durations it waits (as a wall clock step does not move a monotonic
// timer). Only what the node asks its Clock for moves: Go's own uses of
// time (TLS certificate checks, HTTP timeouts) keep the bubble's.
type nodeClock struct {
	offset atomic.Int64 // nanoseconds

	mu sync.Mutex
	// moves are the offset's changes, each with the bubble's time it was
	// made at: between two instants of the bubble the node's clock
	// advanced their distance plus how far these moved it forward in
	// between (the checker's failed_early bound).
	moves []ClockMove
}

// Now is the bubble's time plus the node's offset, in UTC.
func (k *nodeClock) Now() time.Time {
	return time.Now().UTC().Add(time.Duration(k.offset.Load()))
}

// AfterFunc runs f after d of the bubble's time.
func (k *nodeClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// set moves the offset to d; it reports the change.
func (k *nodeClock) set(d time.Duration) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	change := d - time.Duration(k.offset.Swap(int64(d)))
	k.moved(d)
	return change
}

// shift moves the offset by d.
func (k *nodeClock) shift(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.moved(time.Duration(k.offset.Add(int64(d))))
}

// moved records the offset's new value (k.mu held).
func (k *nodeClock) moved(offset time.Duration) {
	k.moves = append(k.moves, ClockMove{At: time.Now(), Offset: offset})
}

// state is the offset now and its moves so far.
func (k *nodeClock) state() (offset time.Duration, moves []ClockMove) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return time.Duration(k.offset.Load()), append([]ClockMove(nil), k.moves...)
}
