package delivery

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// newSeat is a push worker's place on a board of its own.
func newSeat() *seat {
	return &seat{board: handover.NewBoard(), key: handover.Key{Kind: persistence.WorkDelivery, Target: "fe"},
		self: &actor.PID{Id: "w"}, push: true}
}

// offerNow is the end of the worker's step: the dispatcher's offer put on
// the board.
func (s *seat) offerNow(d *Dispatcher) {
	n, lease := d.Offer()
	s.offer(offered{n: n, lease: lease})
}

// TestBusOfferIsRoomBeforeTheDebt: with the bus up, a push worker offers
// the board its free slots before what the board owes it; the board takes
// the debt off once. Before, the dispatcher's offer (its bus room) had the
// debt off already and the board took it off again: with 2 of 5 slots
// owed, a changed offer granted 1 row, not 3.
func TestBusOfferIsRoomBeforeTheDebt(t *testing.T) {
	d, s := newBusPush(5), newSeat()
	d.Handover(t0, work("a", 1, time.Minute))
	s.owe(d, t0)
	s.offerNow(d) // 4 free
	if n, _, _ := s.board.Take(s.key, 2); n != 2 {
		t.Fatalf("took %d of the 4 offered", n)
	}
	// The delivery ends before the 2 come: 5 slots, 2 of them owed.
	d.Verdict(t0, "a0", 1, messages.DeliveryResult{ID: "a0", Status: messages.Delivered}, false, rng())
	s.owe(d, t0)
	if n := d.BusRoom(); n != 3 {
		t.Fatalf("bus room %d with 2 of 5 owed, want 3", n)
	}
	s.offerNow(d)
	if n, _, _ := s.board.Take(s.key, 99); n != 3 {
		t.Fatalf("the board granted %d more with 2 of 5 slots owed, want 3", n)
	}
}
