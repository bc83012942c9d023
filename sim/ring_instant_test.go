package sim

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// stealingStore is a store whose ClaimWork hands out row 7 (message m,
// delivery to f) to every owner that asks, whatever lease another owner
// holds on it: the double claim the ring's claim check is there to catch.
// Its other methods are the embedded interface's (nil: never called).
type stealingStore struct {
	persistence.Store
}

func (stealingStore) ClaimWork(_ context.Context, req persistence.ClaimRequest) (persistence.Claim, error) {
	return persistence.Claim{Work: []persistence.Work{{ID: 7, Kind: persistence.WorkDelivery, Target: "f", MessageID: "m",
		LeaseOwner: req.Owner, LeaseUntil: req.Now.Add(30 * time.Second), LeaseEpoch: 3}}}, nil
}

func (stealingStore) CompleteWork(_ context.Context, _ time.Time, os []persistence.Outcome) ([]persistence.Completion, error) {
	cs := make([]persistence.Completion, len(os))
	for i := range os {
		cs[i] = persistence.Applied
	}
	return cs, nil
}

// TestClaimCheckOrdersCallsOfOneInstant: on virtual time every call
// between two advances of the bubble's clock happens at one instant.
// Instance b claims a row under a's live lease, then a records its
// outcome, all at one instant: the outcome came after the second claim,
// so it ended nothing, and the pair is a double claim. The check took
// calls of one instant as unordered (an end anywhere in the window, both
// ends included, cleared the pair), so it missed every double claim
// whose calls and end shared an instant: with a store whose claim
// ignored other owners' leases (ring-failover seeds 928 and 929), the
// frontends saw messages twice (duplicated=1, duplicated=2) while the
// ring's line said double_claims=0.
func TestClaimCheckOrdersCallsOfOneInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := pushCluster(StoreFault{})
		log := c.shared[0].log
		view := func() *storeView { return &storeView{Store: &faultStore{Store: stealingStore{}, c: c, i: 0}, log: log} }
		a, b := view(), view()
		now := time.Now()
		claim := func(v *storeView, owner string) {
			if _, err := v.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: "f", Owner: owner, Now: now, Limit: 1}); err != nil {
				t.Fatal(err)
			}
		}
		claim(a, "n1-0")
		claim(b, "n1-1")
		if _, err := a.CompleteWork(ctx, now, []persistence.Outcome{{Kind: persistence.WorkDelivery, Target: "f", MessageID: "m",
			Result: persistence.ResultDelivered, Owner: "n1-0", Epoch: 3}}); err != nil {
			t.Fatal(err)
		}
		if !time.Now().Equal(now) {
			t.Fatalf("the clock moved: the calls were not at one instant")
		}
		if _, d := log.check("n1"); len(d) != 1 {
			t.Fatalf("double claim at one instant not flagged: %v", d)
		}

		// The outcome before the second claim ended a's lease: no double
		// claim, at one instant as well.
		c = pushCluster(StoreFault{})
		log = c.shared[0].log
		a, b = view(), view()
		claim(a, "n1-0")
		if _, err := a.CompleteWork(ctx, now, []persistence.Outcome{{Kind: persistence.WorkDelivery, Target: "f", MessageID: "m",
			Result: persistence.ResultDelivered, Owner: "n1-0", Epoch: 3}}); err != nil {
			t.Fatal(err)
		}
		claim(b, "n1-1")
		if _, d := log.check("n1"); len(d) != 0 {
			t.Fatalf("claim after the outcome, at one instant, flagged: %v", d)
		}
	})
}
