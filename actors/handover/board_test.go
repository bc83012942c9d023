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
