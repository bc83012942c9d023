// Package handover is how the intake hands new work over in memory to a
// worker that is ready for it: the worker offers on a Board how much it can
// take now; the intake, when it commits new messages, takes the offers up,
// writes the work already leased to the worker (persistence.NewMessage's
// Lease) and, once the commit is durable, sends it the leased rows (Work).
// The work is then not claimed again in a transaction of its own; the store
// stays its durable record and recovery path (a lease that runs out makes
// it claimable, as after any claim).
//
// An offer is a hint: the worker may no longer want what it offered by the
// time the work comes (a poll left, a slot filled), and takes it anyway (it
// is leased to it). The intake never hands over more than was offered.
package handover

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/persistence"
)

// Key names the work a worker offers to take: its kind and target.
type Key struct {
	Kind   persistence.WorkKind
	Target string
}

// Board holds the workers' offers. Safe for concurrent use.
type Board struct {
	mu     sync.Mutex
	offers map[Key]offer
}

type offer struct {
	n     int
	lease time.Duration
	to    *actor.PID
}

// NewBoard returns an empty board.
func NewBoard() *Board { return &Board{offers: map[Key]offer{}} }

// Offer says that the worker at to can take n rows of k's work now, leased
// for lease; n <= 0 withdraws its offer (not another worker's: a worker
// that replaced it for the same target may have offered since). It
// replaces the last offer for k.
func (b *Board) Offer(k Key, n int, lease time.Duration, to *actor.PID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n <= 0 {
		if o, ok := b.offers[k]; ok && o.to.Equal(to) {
			delete(b.offers, k)
		}
		return
	}
	b.offers[k] = offer{n: n, lease: lease, to: to}
}

// Take takes up to n rows of k's offer: how many were granted, leased for
// how long, to whom.
func (b *Board) Take(k Key, n int) (granted int, lease time.Duration, to *actor.PID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.offers[k]
	if !ok || n <= 0 {
		return 0, 0, nil
	}
	granted = min(n, o.n)
	if o.n -= granted; o.n == 0 {
		delete(b.offers, k)
	} else {
		b.offers[k] = o
	}
	return granted, o.lease, o.to
}

// Work hands leased rows over to the worker that offered to take them.
type Work struct {
	Work []persistence.Work
}
