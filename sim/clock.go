package sim

import (
	"sync"
	"sync/atomic"
	"time"
)

// nodeClock is a node's Config.Clock: the bubble's time moved by the
// node's offset, which the schedule changes (a constant skew from the
// other nodes, a jump forward or back as a clock stepped by hand or by
// NTP). The offset is the skew in force plus the jumps in force, kept
// apart so that episodes compose: a skew's end leaves a jump in force,
// and a jump's end (the step back) leaves a skew. Every incarnation and
// instance of the node reads it. Timers run
// on the bubble's time: a jump moves what the node reads, not the
// durations it waits (as a wall clock step does not move a monotonic
// timer). Only what the node asks its Clock for moves: Go's own uses of
// time (TLS certificate checks, HTTP timeouts) keep the bubble's.
type nodeClock struct {
	offset atomic.Int64 // nanoseconds

	mu sync.Mutex
	// skewed and jumped are the skew in force and the sum of the jumps
	// in force; offset is their sum.
	skewed, jumped time.Duration
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

// skew sets the skew to d (0 ends it); the jumps in force stay.
func (k *nodeClock) skew(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.skewed = d
	k.moved()
}

// jump steps the clock by d, forward or back; the skew stays.
func (k *nodeClock) jump(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.jumped += d
	k.moved()
}

// reset gives the clock the run's time back: no skew, no jump.
func (k *nodeClock) reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.skewed, k.jumped = 0, 0
	k.moved()
}

// moved sets the offset to the skew plus the jumps and records it (k.mu
// held).
func (k *nodeClock) moved() {
	offset := k.skewed + k.jumped
	k.offset.Store(int64(offset))
	k.moves = append(k.moves, ClockMove{At: time.Now(), Offset: offset})
}

// state is the offset now and its moves so far.
func (k *nodeClock) state() (offset time.Duration, moves []ClockMove) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return time.Duration(k.offset.Load()), append([]ClockMove(nil), k.moves...)
}
