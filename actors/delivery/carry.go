package delivery

import (
	"context"
	"time"

	"github.com/switchboard-dev/switchboard/actors/bus"
)

// carry is everything a worker hands its next incarnation as it restarts
// (a panic builds a new Worker from the producer): handOn fills it in the
// worker's life as the one incarnation ends, inherit takes it whole as the
// next starts. Whatever an incarnation must hand on is a field here (or
// of the part that holds it: Carry, linkCarry), not one more thing the
// worker moves by hand: a carry-over forgotten is lost at the restart.
type carry struct {
	// core is the dispatcher's: its deliveries under way, its verdicts not
	// recorded yet and its store rounds out (Carry).
	core Carry
	// link is the bus link's: the bus messages held for those, which the
	// next incarnation settles once their outcome is committed, and the
	// fetch out (busLink.handOn).
	link linkCarry[*bus.Msg]
	// fetch is that fetch's cancel and end: the restart does not cancel
	// it (busLink.inherit says why).
	fetch fetchOut
}

// fetchOut is the worker's side of the bus fetch it has out: cancel
// cancels it, and ended is closed once it returned (nil: none started).
type fetchOut struct {
	cancel context.CancelFunc
	ended  <-chan struct{}
}

// handOn ends this incarnation as its worker restarts: it leaves in the
// worker's life what the next incarnation takes on (carry, inherit), and
// naks the bus messages whose work no incarnation goes on with
// (busLink.handOn).
func (w *Worker) handOn(now time.Time) {
	roundBy := now.Add(w.d.StoreTimeout) // the round out's result cannot come after its store call's timeout
	link, nak := w.link.handOn(now, w.core.Outstanding, w.core.Out(), roundBy)
	w.life.carry = carry{core: w.core.Carry(roundBy), link: link, fetch: w.fetching}
	// The fetch goes on for the next incarnation: a message naked now and
	// handed back to it comes to that one.
	w.settle(nak)
}

// inherit takes on, as the worker starts, what its previous incarnation
// handed on (handOn; nothing on its first start).
func (w *Worker) inherit() {
	c := w.life.carry
	w.life.carry = carry{}
	w.core.Inherit(c.core)
	w.link.inherit(c.link)
	w.fetching = c.fetch
}
