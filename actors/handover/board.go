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
//
// Rows granted and not yet received are owed to the worker: they count
// against its next offer and its claims (Owed), so that a worker whose
// offer changes while a grant is on its way (a delivery ended, a slot
// freed) is not granted the same room twice. The worker settles a grant
// when its Work comes (Work.Granted); the intake refunds one that never
// will (its commit failed, or stored none of the rows), which offers the
// room it took again: the worker's room did not change, so the worker
// would not offer it again itself.
//
// What is owed is kept per worker: a worker that replaced another for the
// same key (its frontend changed) does not wipe out its predecessor's debt,
// which the retiring predecessor waits for (its Work is on its way to it)
// before it stops.
//
// A worker's offer is its room before what it is owed: the board takes the
// debt off, once, under its lock (Offer). Room is never both claimed and
// offered: a worker about to claim its room from the store withdraws its
// offer and reads what it is owed in one call (Withdraw), sizes its claim
// to leave the debt its room, and offers again what the claim left. (Read
// then withdrawn in two calls, a grant could fall between them and be
// counted neither by the claim nor by the debt.)
package handover

import (
	"slices"
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
	owed   map[Key][]owing
}

// owing is what the board granted from a key's offers to one worker and
// the worker has not received yet (n > 0).
type owing struct {
	to *actor.PID
	n  int
}

// offer is a worker's offer: n is what the board can still grant of it
// (the worker's room less what it is owed and what was taken since; at
// most 0 once taken up or owed, kept so that a refund can offer the room
// again).
type offer struct {
	n     int
	lease time.Duration
	to    *actor.PID
}

// NewBoard returns an empty board.
func NewBoard() *Board { return &Board{offers: map[Key]offer{}, owed: map[Key][]owing{}} }

// Offer says that the worker at to can take n rows of k's work now, leased
// for lease, less what it is owed; n <= 0 withdraws its offer (not another
// worker's, nor what another is owed: a worker that replaced it for the
// same target may have offered since). It replaces the last offer for k.
// A worker that replaced another (its first offer) is owed nothing of what
// the other was granted, and the other stays owed it: it is retiring, and
// waits for its Work before it stops.
func (b *Board) Offer(k Key, n int, lease time.Duration, to *actor.PID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n <= 0 {
		b.withdraw(k, to)
		return
	}
	b.offers[k] = offer{n: n - b.owedTo(k, to), lease: lease, to: to}
}

// Take takes up to n rows of k's offer: how many were granted, leased for
// how long, to whom.
func (b *Board) Take(k Key, n int) (granted int, lease time.Duration, to *actor.PID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.offers[k]
	if !ok || n <= 0 || o.n <= 0 {
		return 0, 0, nil
	}
	granted = min(n, o.n)
	o.n -= granted
	b.offers[k] = o
	b.owe(k, o.to, granted)
	return granted, o.lease, o.to
}

// owe adds n to what k's worker to is owed.
func (b *Board) owe(k Key, to *actor.PID, n int) {
	ows := b.owed[k]
	for i := range ows {
		if same(ows[i].to, to) {
			ows[i].n += n
			return
		}
	}
	b.owed[k] = append(ows, owing{to: to, n: n})
}

// Owed is how many rows of k's work the board granted to the worker at to
// that it has not received yet.
func (b *Board) Owed(k Key, to *actor.PID) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.owedTo(k, to)
}

// owedTo is Owed under the board's lock.
func (b *Board) owedTo(k Key, to *actor.PID) int {
	for _, ow := range b.owed[k] {
		if same(ow.to, to) {
			return ow.n
		}
	}
	return 0
}

// Withdraw withdraws the offer of the worker at to for k (not another
// worker's) and says how many rows of k's work the board granted it that
// it has not received yet, under one lock: a grant comes either before,
// and is in what it is owed, or after, and finds no offer. A worker about
// to claim its room calls it, so that no room is both claimed and granted
// (the claim leaves what it is owed its room; Owed then Offer(0) would let
// a grant fall between them, counted by neither); it offers what is left
// after the claim again.
func (b *Board) Withdraw(k Key, to *actor.PID) (owed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.withdraw(k, to)
	return b.owedTo(k, to)
}

// Revoke withdraws k's offer, whichever worker made it: what it offered
// to take can no longer be taken (an in-process frontend's actor was
// unregistered), and the worker will only learn it when it handles its
// next message, after grants the intake may make meanwhile. What is owed
// stays owed.
func (b *Board) Revoke(k Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.offers, k)
}

// Forget drops what the worker at to offered for k and what it is owed: a
// worker starting (a new one, or one restarted) says so, and one that
// stops for good. A worker spawned under the name of one that stopped has
// its PID, and the Work sent to the stopped one is gone with its mailbox:
// what it was owed would never be settled, and the new worker's room would
// stay that much smaller for good; a worker that stops for good and has no
// successor under its name (a peer's forward queue) would stay owed it.
func (b *Board) Forget(k Key, to *actor.PID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.withdraw(k, to)
	b.settle(k, to, b.owedTo(k, to))
}

// withdraw deletes k's offer if it is to's.
func (b *Board) withdraw(k Key, to *actor.PID) {
	if o, ok := b.offers[k]; ok && same(o.to, to) {
		delete(b.offers, k)
	}
}

// Settle ends n rows of what the board granted from k's offers to the
// worker at to: they came (the worker, on Work; its next offer says what
// room it has left).
func (b *Board) Settle(k Key, to *actor.PID, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settle(k, to, n)
}

// Refund ends n rows of what the board granted from k's offers to the
// worker at to that never will come (the intake's commit failed, or
// stored none of them) and offers their room to the worker again: its
// room did not change, so it would not say so itself. A worker that
// withdrew its offer since, or was replaced, gets nothing offered.
func (b *Board) Refund(k Key, to *actor.PID, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = b.settle(k, to, n)
	if o, ok := b.offers[k]; ok && n > 0 && same(o.to, to) {
		o.n += n
		b.offers[k] = o
	}
}

// settle ends up to n rows of what is owed to the worker at to for k and
// says how many it ended.
func (b *Board) settle(k Key, to *actor.PID, n int) int {
	ows := b.owed[k]
	i := slices.IndexFunc(ows, func(ow owing) bool { return same(ow.to, to) })
	if i < 0 || n <= 0 {
		return 0
	}
	n = min(n, ows[i].n)
	if ows[i].n -= n; ows[i].n > 0 {
		return n
	}
	if ows = slices.Delete(ows, i, i+1); len(ows) == 0 {
		delete(b.owed, k)
	} else {
		b.owed[k] = ows
	}
	return n
}

// same says whether a and b are the same worker (PID.Equal panics on a nil
// receiver).
func same(a, b *actor.PID) bool { return a != nil && b != nil && a.Equal(b) }

// Work hands leased rows over to the worker that offered to take them.
// Granted is how many rows of Key's work the board granted for it (Work
// may hold fewer: a row the commit did not store); the worker settles
// that many (Arrived).
type Work struct {
	Work    []persistence.Work
	Key     Key
	Granted int
}

// Arrived settles the grant that w carries, for the worker at to.
func (w *Work) Arrived(b *Board, to *actor.PID) {
	if b != nil {
		b.Settle(w.Key, to, w.Granted)
	}
}
