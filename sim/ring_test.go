package sim

import (
	"strconv"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// TestRingSeeds runs the ring-failover story (a site of three instances
// and a single-instance site, the master then a slave killed and
// restarted, random faults) over seeds: one by default (under -race a
// run costs tens of seconds); SIM_RING_SEEDS=50 runs the
// sweep of issue 5, SIM_SEED_FIRST moves the range. Every run must pass
// the checker and the ring's checks, and must have checked the ring.
func TestRingSeeds(t *testing.T) {
	seeds := envInt(t, "SIM_RING_SEEDS", 1)
	first := envInt(t, "SIM_SEED_FIRST", 1)
	sc := Scenarios["ring-failover"]
	for s := first; s < first+seeds; s++ {
		seed := int64(s)
		t.Run("seed="+strconv.Itoa(s), func(t *testing.T) {
			rep := run(t, seed, sc.Options(seed, 2))
			if rep.Ring.Sites != 1 || rep.Ring.Split == 0 || rep.Ring.Claims == 0 {
				t.Fatalf("seed %d: the ring was not checked: %+v", seed, rep.Ring)
			}
		})
	}
}

// TestClaimLogFlagsADoubleClaim: the claim check flags a row claimed by a
// second owner under the first's live lease (a refused outcome, stale,
// ends none), and not one claimed after the first's outcome or lease
// release, or after its lease ended.
func TestClaimLogFlagsADoubleClaim(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	claim := func(l *claimLog, owner string, ms int) {
		req := persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: "f", Owner: owner, Now: at(ms)}
		l.claimed(req, []persistence.Work{{ID: 7, Kind: persistence.WorkDelivery, Target: "f", MessageID: "m",
			LeaseOwner: owner, LeaseUntil: at(ms + 1000), LeaseEpoch: 3}}, int64(ms), int64(ms+1))
	}
	l := newClaimLog()
	claim(l, "a", 0)
	claim(l, "b", 500)
	if _, d := l.check("n1"); len(d) != 1 {
		t.Fatalf("double claim not flagged: %v", d)
	}

	l = newClaimLog()
	claim(l, "a", 0)
	l.completed([]persistence.Outcome{{Kind: persistence.WorkDelivery, Target: "f", MessageID: "m", Result: persistence.ResultRetry}},
		[]persistence.Completion{persistence.Applied}, 200, 201)
	claim(l, "b", 500)
	if _, d := l.check("n1"); len(d) != 0 {
		t.Fatalf("claim after an outcome flagged: %v", d)
	}

	l = newClaimLog()
	claim(l, "a", 0)
	l.completed([]persistence.Outcome{{Kind: persistence.WorkDelivery, Target: "f", MessageID: "m", Epoch: 3, Owner: "a"}},
		[]persistence.Completion{persistence.StaleEpoch}, 200, 201)
	claim(l, "b", 500)
	if _, d := l.check("n1"); len(d) != 1 {
		t.Fatalf("a stale outcome ended the lease: %v", d)
	}

	// A pull ack naming an older attempt is refused too (stale): it
	// ended no lease.
	l = newClaimLog()
	claim(l, "a", 0)
	l.completed([]persistence.Outcome{{Kind: persistence.WorkDelivery, Target: "f", MessageID: "m", Result: persistence.ResultRetry, Named: 1, Ack: true}},
		[]persistence.Completion{persistence.Stale}, 200, 201)
	claim(l, "b", 500)
	if _, d := l.check("n1"); len(d) != 1 {
		t.Fatalf("a stale ack ended the lease: %v", d)
	}

	l = newClaimLog()
	claim(l, "a", 0)
	l.released("a", 300, 301)
	claim(l, "b", 500)
	if _, d := l.check("n1"); len(d) != 0 {
		t.Fatalf("claim after a release flagged: %v", d)
	}

	// A restarted owner's release and another's claim can run at once
	// (on virtual time, at one instant: their calls overlap): the release
	// may have committed first, so the pair is not flagged.
	l = newClaimLog()
	claim(l, "a", 0)
	l.claimed(persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: "f", Owner: "b", Now: at(500)},
		[]persistence.Work{{ID: 7, Kind: persistence.WorkDelivery, Target: "f", MessageID: "m",
			LeaseOwner: "b", LeaseUntil: at(1500), LeaseEpoch: 3}}, 500, 503)
	l.released("a", 501, 502)
	if _, d := l.check("n1"); len(d) != 0 {
		t.Fatalf("claim overlapping a release flagged: %v", d)
	}

	l = newClaimLog()
	claim(l, "a", 0)
	claim(l, "b", 1000)
	if n, d := l.check("n1"); len(d) != 0 || n != 2 {
		t.Fatalf("claim after the lease ended: %d claims, %v", n, d)
	}
}

// TestElectorLosesTheLockWithTheSession: a crashed incarnation's lock is
// free at once and its Lost closes.
func TestElectorLosesTheLockWithTheSession(t *testing.T) {
	el := newElector()
	a, b := &session{el: el}, &session{el: el}
	ctx := t.Context()
	la, err := a.TryLead(ctx, "ring-master")
	if err != nil || la == nil {
		t.Fatalf("first TryLead: %v %v", la, err)
	}
	if lb, err := b.TryLead(ctx, "ring-master"); lb != nil || err != nil {
		t.Fatalf("second TryLead took a held lock: %v %v", lb, err)
	}
	a.end()
	select {
	case <-la.Lost():
	default:
		t.Fatal("Lost did not close when the session ended")
	}
	if lb, err := b.TryLead(ctx, "ring-master"); lb == nil || err != nil {
		t.Fatalf("the lock was not free after the holder crashed: %v %v", lb, err)
	}
	if _, err := a.TryLead(ctx, "ring-master"); err == nil {
		t.Fatal("a dead session took a lock")
	}
}
