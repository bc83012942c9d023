package handover

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/persistence"
)

func TestBoard(t *testing.T) {
	b := NewBoard()
	k := Key{Kind: persistence.WorkDelivery, Target: "fe"}
	if n, _, _ := b.Take(k, 5); n != 0 {
		t.Fatalf("took %d with no offer", n)
	}
	pid := &actor.PID{Id: "w"}
	b.Offer(k, 3, time.Minute, pid)
	if n, lease, to := b.Take(k, 2); n != 2 || lease != time.Minute || to != pid {
		t.Fatalf("Take = %d %v %v", n, lease, to)
	}
	if n, _, _ := b.Take(k, 2); n != 1 {
		t.Fatalf("took %d of the 1 left", n)
	}
	if n, _, _ := b.Take(k, 1); n != 0 {
		t.Fatalf("took %d of an offer used up", n)
	}
	b.Offer(k, 4, time.Second, pid)
	b.Offer(k, 0, time.Second, &actor.PID{Id: "old"})
	if n, _, _ := b.Take(k, 1); n != 1 {
		t.Fatalf("another worker withdrew the offer: took %d", n)
	}
	b.Offer(k, 0, time.Second, pid)
	if n, _, _ := b.Take(k, 1); n != 0 {
		t.Fatalf("took %d of a withdrawn offer", n)
	}
}

// TestBoardOwesWhatItGranted: rows granted and not yet received count
// against the worker's next offer until settled, so a worker whose offer
// changes while a grant is on its way is not granted the same room twice.
func TestBoardOwesWhatItGranted(t *testing.T) {
	b := NewBoard()
	k := Key{Kind: persistence.WorkDelivery, Target: "fe"}
	w := &actor.PID{Id: "w"}
	if n := b.Owed(k, w); n != 0 {
		t.Fatalf("owed %d before any grant", n)
	}
	b.Offer(k, 5, time.Minute, w)
	if n, _, _ := b.Take(k, 3); n != 3 {
		t.Fatalf("took %d of 5", n)
	}
	if n := b.Owed(k, w); n != 3 {
		t.Fatalf("owed %d after a grant of 3", n)
	}
	// The worker offers its 5 slots again (a delivery ended) before the 3
	// come: only 2 are free.
	b.Offer(k, 5, time.Minute, w)
	if n, _, _ := b.Take(k, 5); n != 2 {
		t.Fatalf("took %d, want the 2 not owed", n)
	}
	b.Offer(k, 4, time.Minute, w) // all owed: nothing to grant
	if n, _, _ := b.Take(k, 1); n != 0 {
		t.Fatalf("took %d from an offer that is all owed", n)
	}
	// The first grant arrives with its Work; the intake refunds the second
	// (its commit failed): of the 4 slots, the 3 rows that came fill 3,
	// so 1 is free again before the worker offers anew.
	(&Work{Key: k, Granted: 3}).Arrived(b, w)
	b.Refund(k, w, 2)
	if n := b.Owed(k, w); n != 0 {
		t.Fatalf("owed %d after both grants were settled", n)
	}
	if n, _, _ := b.Take(k, 9); n != 1 {
		t.Fatalf("took %d after the refund, want the 1 slot free", n)
	}
	(&Work{Key: k, Granted: 1}).Arrived(b, w)
	b.Offer(k, 4, time.Minute, w)
	if n, _, _ := b.Take(k, 9); n != 4 {
		t.Fatalf("took %d of a fresh offer of 4", n)
	}
	// A worker that replaced w for the same key (its frontend changed) is
	// owed nothing of w's grants; w stays owed them (it retires, and waits
	// for its Work before it stops: dropped, the new worker's offer told
	// it nothing was on its way, and it stopped before the Work came, lost
	// with its mailbox), and w's late settling does not touch w2's.
	w2 := &actor.PID{Id: "w2"}
	b.Offer(k, 3, time.Minute, w2)
	if n := b.Owed(k, w); n != 4 {
		t.Fatalf("the replaced worker is owed %d after its successor's offer, want its 4", n)
	}
	if n := b.Owed(k, w2); n != 0 {
		t.Fatalf("the new worker is owed %d of the old one's grants", n)
	}
	if n, _, _ := b.Take(k, 2); n != 2 {
		t.Fatalf("the new worker's offer gave %d, want 2", n)
	}
	b.Settle(k, w, 4)
	if n := b.Owed(k, w); n != 0 {
		t.Fatalf("the replaced worker is owed %d after it settled", n)
	}
	if n := b.Owed(k, w2); n != 2 {
		t.Fatalf("owed %d to the new worker after the old one settled, want 2", n)
	}
	b.Forget(k, w) // w stopped for good
	if n := b.Owed(k, w2); n != 2 {
		t.Fatalf("owed %d to the new worker after the old one was forgotten, want 2", n)
	}
	(&Work{Key: k, Granted: 2}).Arrived(nil, w2) // no board: nothing to settle
}

// TestBoardWithdrawalByAReplacedWorker: a worker that stops after another
// replaced it withdraws nothing of the new worker's: not its offer, nor
// what the new worker is owed.
func TestBoardWithdrawalByAReplacedWorker(t *testing.T) {
	b := NewBoard()
	k := Key{Kind: persistence.WorkDelivery, Target: "fe"}
	old, cur := &actor.PID{Id: "old"}, &actor.PID{Id: "new"}
	b.Offer(k, 5, time.Minute, cur)
	if n, _, _ := b.Take(k, 3); n != 3 {
		t.Fatalf("took %d of 5", n)
	}
	b.Offer(k, 0, time.Minute, old)
	if n := b.Owed(k, cur); n != 3 {
		t.Fatalf("owed %d to the new worker after the old one withdrew, want 3", n)
	}
	b.Offer(k, 5, time.Minute, cur)
	if n, _, _ := b.Take(k, 5); n != 2 {
		t.Fatalf("took %d, want the 2 not owed", n)
	}
}

// TestBoardRefundOffersTheRoomAgain: a grant that never comes (the
// intake's commit failed or stored none of its rows) is offered again,
// since the worker's room did not change and it would not offer it again
// itself; not to a worker that withdrew or was replaced meanwhile, and
// never more than was owed.
func TestBoardRefundOffersTheRoomAgain(t *testing.T) {
	b := NewBoard()
	k := Key{Kind: persistence.WorkDelivery, Target: "fe"}
	w := &actor.PID{Id: "w"}
	b.Offer(k, 5, time.Minute, w)
	if n, _, _ := b.Take(k, 5); n != 5 {
		t.Fatalf("took %d of 5", n)
	}
	b.Refund(k, w, 3)
	if n := b.Owed(k, w); n != 2 {
		t.Fatalf("owed %d after a refund of 3 of 5", n)
	}
	if n, lease, to := b.Take(k, 9); n != 3 || lease != time.Minute || to != w {
		t.Fatalf("Take after the refund = %d %v %v, want the 3 refunded", n, lease, to)
	}
	b.Refund(k, w, 99) // more than owed: only what was owed (5)
	if n, _, _ := b.Take(k, 99); n != 5 {
		t.Fatalf("took %d after refunding everything, want the offer's 5", n)
	}

	// A worker that withdrew (it has no room now) is offered nothing.
	b.Offer(k, 0, time.Minute, w)
	b.Refund(k, w, 5)
	if n, _, _ := b.Take(k, 9); n != 0 {
		t.Fatalf("took %d from a worker that withdrew", n)
	}

	// A replaced worker's refund gives the new worker nothing extra.
	old, cur := &actor.PID{Id: "old"}, &actor.PID{Id: "new"}
	b.Offer(k, 4, time.Minute, old)
	if n, _, _ := b.Take(k, 2); n != 2 {
		t.Fatalf("took %d of the old worker's 4", n)
	}
	b.Offer(k, 5, time.Minute, cur)
	b.Refund(k, old, 2)
	if n, _, to := b.Take(k, 99); n != 5 || to != cur {
		t.Fatalf("took %d (to %v) after the replaced worker's refund, want the new worker's 5", n, to)
	}
}

// TestBoardWithdrawSaysWhatIsOwed: a worker about to claim its room
// withdraws its offer and learns what it is owed at once, so a grant is
// either in the debt or not made; a refund afterwards offers nothing (the
// worker offers what the claim left itself). Another worker's offer is not
// withdrawn, and a replaced worker is owed nothing.
func TestBoardWithdrawSaysWhatIsOwed(t *testing.T) {
	b := NewBoard()
	k := Key{Kind: persistence.WorkDelivery, Target: "fe"}
	w := &actor.PID{Id: "w"}
	if n := b.Withdraw(k, w); n != 0 {
		t.Fatalf("owed %d with no offer nor grant", n)
	}
	b.Offer(k, 5, time.Minute, w)
	if n, _, _ := b.Take(k, 2); n != 2 {
		t.Fatalf("took %d of 5", n)
	}
	if n := b.Withdraw(k, w); n != 2 {
		t.Fatalf("Withdraw says %d owed, want 2", n)
	}
	if n, _, _ := b.Take(k, 9); n != 0 {
		t.Fatalf("took %d of a withdrawn offer", n)
	}
	b.Refund(k, w, 2)
	if n, _, _ := b.Take(k, 9); n != 0 {
		t.Fatalf("took %d after a refund to a worker that withdrew", n)
	}
	if n := b.Owed(k, w); n != 0 {
		t.Fatalf("owed %d after the refund", n)
	}

	old, cur := &actor.PID{Id: "old"}, &actor.PID{Id: "new"}
	b.Offer(k, 3, time.Minute, cur)
	if n := b.Withdraw(k, old); n != 0 {
		t.Fatalf("a replaced worker is owed %d", n)
	}
	if n, _, to := b.Take(k, 9); n != 3 || to != cur {
		t.Fatalf("took %d (to %v) after a replaced worker withdrew, want the new worker's 3", n, to)
	}
}

// TestBoardForgetsAWorkerStartedUnderTheSamePID: a worker started under
// the PID of one that stopped (whose Work went with its mailbox) is owed
// nothing and has no offer standing until it offers.
func TestBoardForgetsAWorkerStartedUnderTheSamePID(t *testing.T) {
	b := NewBoard()
	k := Key{Kind: persistence.WorkForward, Target: "dc2"}
	w := &actor.PID{Id: "peers/dc2/forward"}
	b.Offer(k, 8, time.Minute, w)
	if n, _, _ := b.Take(k, 3); n != 3 {
		t.Fatalf("took %d of 8", n)
	}
	// The queue stops; its successor has the same PID.
	again := &actor.PID{Id: "peers/dc2/forward"}
	b.Forget(k, again)
	if n := b.Owed(k, again); n != 0 {
		t.Fatalf("the new queue is owed %d of its predecessor's grants", n)
	}
	if n, _, _ := b.Take(k, 9); n != 0 {
		t.Fatalf("took %d from the stopped queue's offer", n)
	}
	b.Offer(k, 8, time.Minute, again)
	if n, _, _ := b.Take(k, 9); n != 8 {
		t.Fatalf("took %d of the new queue's 8", n)
	}
	// Another worker's standing is not touched.
	other := &actor.PID{Id: "other"}
	b.Forget(k, other)
	if n := b.Owed(k, again); n != 8 {
		t.Fatalf("forgetting another worker dropped this one's debt: %d", n)
	}
}

// TestBoardRevokeWithdrawsWhicheverWorkerOffered: Revoke takes k's offer
// off without the worker's PID, and leaves what is owed owed.
func TestBoardRevokeWithdrawsWhicheverWorkerOffered(t *testing.T) {
	b := NewBoard()
	k := Key{Kind: persistence.WorkDelivery, Target: "fe"}
	other := Key{Kind: persistence.WorkDelivery, Target: "other"}
	pid := &actor.PID{Id: "w"}
	b.Offer(k, 3, time.Minute, pid)
	b.Offer(other, 3, time.Minute, pid)
	if n, _, _ := b.Take(k, 1); n != 1 {
		t.Fatalf("took %d", n)
	}
	b.Revoke(k)
	if n, _, _ := b.Take(k, 1); n != 0 {
		t.Fatalf("took %d of a revoked offer", n)
	}
	if n, _, _ := b.Take(other, 1); n != 1 {
		t.Fatalf("another key's offer: took %d", n)
	}
	if owed := b.Owed(k, pid); owed != 1 {
		t.Fatalf("owed %d after Revoke, want the 1 granted before", owed)
	}
}
