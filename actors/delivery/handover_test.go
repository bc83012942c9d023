package delivery

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// newSeat is a push worker's place on a board of its own.
func newSeat() *seat {
	s := seatOf(handover.NewBoard(), messages.Frontend{Name: "fe", Mode: messages.ModeWebhook}, &actor.PID{Id: "w"})
	return &s
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

// TestStepNeverClaimsRoomOffered replays a push worker's step (the board's
// debt, the dispatcher's round, the offer: seat.owe, Dispatcher.Next,
// seat.offer) around a claim of its free slots made while its offer
// stands (a retry fell due, a scheduled message, a lease ran out; with the
// bus, the backstop's claim), with the intake taking the offer up at
// every point between the step's board calls. Whatever the point, the
// frontend never has more than MaxInFlight deliveries under way once the
// claim and the grant have come. Before, the step read the debt, claimed
// the free slots and only then withdrew its offer: a grant between the two
// was counted by neither (a claim of 5 and a grant of 5: 10 of 5 under
// way); with the bus, the offer stood beside the backstop's claim.
func TestStepNeverClaimsRoomOffered(t *testing.T) {
	const max = 5
	type point int
	const (
		beforeDebt point = iota
		beforeRound
		beforeOffer
		afterOffer
	)
	for _, bus := range []bool{false, true} {
		for at := beforeDebt; at <= afterOffer; at++ {
			d, s := newPush(max), newSeat()
			now := t0
			if bus {
				d = newBusPush(max) // its backstop claimed nothing at t0
			} else {
				// A first claim comes back short: nothing more due before
				// t0+1s.
				s.owe(d, now)
				r, _ := d.Next(now)
				d.Done(now, r, nil, &persistence.Claim{NextDue: now.Add(time.Second)}, nil)
			}
			s.owe(d, now)
			if r, ok := d.Next(now); ok && r.Claim != nil {
				t.Fatalf("bus %v: claimed %+v with nothing due", bus, r)
			}
			s.offerNow(d)
			if s.offered.n != max {
				t.Fatalf("bus %v: offered %d, want the %d free slots", bus, s.offered.n, max)
			}
			// The retry falls due, or the backstop's time comes: the step
			// claims the free slots.
			now = now.Add(10 * time.Second)
			d.Tick(now, rng())
			granted := 0
			take := func(p point) {
				if p == at {
					granted, _, _ = s.board.Take(s.key, 99)
				}
			}
			take(beforeDebt)
			s.owe(d, now)
			take(beforeRound)
			r, _ := d.Next(now) // none when the grant came first: it fills the slots
			take(beforeOffer)
			s.offerNow(d)
			take(afterOffer)
			// The store has plenty due: the claim takes all it asks for; the
			// grant's rows come too.
			claimed := 0
			if r != nil && r.Claim != nil {
				claimed = r.Claim.Limit
				d.Done(now, r, nil, &persistence.Claim{Work: work("c", claimed, time.Hour)}, nil)
			}
			(&handover.Work{Key: s.key, Granted: granted}).Arrived(s.board, s.self)
			d.Handover(now, work("h", granted, time.Hour))
			if n := len(d.inflight); n != max {
				t.Errorf("bus %v, grant at point %d: %d under way, want %d (claimed %d, granted %d)",
					bus, at, n, max, claimed, granted)
			}
		}
	}
}

// TestClaimsRoomBeforeEveryClaimOfRoom: over random runs of a push
// dispatcher (with and without the bus), whenever a round claims free
// slots (not what the bus named), ClaimsRoom said so before it: the worker
// withdraws its offer only then.
func TestClaimsRoomBeforeEveryClaimOfRoom(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		bus := seed%2 == 1
		d := newPush(4)
		if bus {
			d = newBusPush(4)
		}
		now, n := t0, 0
		var out *Round
		for range 60 {
			now = now.Add(time.Duration(r.IntN(3000)) * time.Millisecond)
			switch r.IntN(7) {
			case 0:
				d.Kick()
			case 1:
				d.Tick(now, r)
			case 2:
				for id := range d.inflight {
					d.Verdict(now, id, 1, messages.DeliveryResult{ID: id, Status: messages.Delivered}, false, r)
					break
				}
			case 3:
				d.Owe(r.IntN(3))
			case 4:
				if bus {
					n++
					d.Named(fmt.Sprintf("n%d", n))
				}
			case 5:
				d.Hold(r.IntN(4) == 0)
			case 6:
				if out != nil {
					claimed := &persistence.Claim{NextDue: now.Add(time.Second)}
					if out.Claim != nil {
						n++
						claimed.Work = work(fmt.Sprintf("c%d-", n), r.IntN(out.Claim.Limit+1), time.Hour)
					}
					completions := make([]persistence.Completion, len(out.Outcomes))
					for i := range completions {
						completions[i] = persistence.Applied
					}
					d.Done(now, out, completions, claimed, nil)
					out = nil
				}
			}
			if out != nil {
				continue
			}
			said := d.ClaimsRoom(now)
			if rd, ok := d.Next(now); ok {
				out = rd
				if rd.Claim != nil && rd.Claim.IDs == nil && !said {
					t.Fatalf("seed %d (bus %v): Next claimed %d free slots where ClaimsRoom said no", seed, bus, rd.Claim.Limit)
				}
			}
		}
	}
}
