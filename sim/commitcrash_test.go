package sim

import (
	"math/rand"
	"testing"
	"time"
)

// TestCrashAfterEveryCommitPoint arms a crash after each commit point,
// on both nodes: each fires once (the load goes on until they have), and
// the run, its crashes and restarts included, keeps every invariant.
func TestCrashAfterEveryCommitPoint(t *testing.T) {
	var s Schedule
	for _, p := range CommitPoints {
		for i := range 2 {
			s = append(s, At(time.Second, CrashAfterCommit(i, p, 2*time.Second)))
		}
	}
	rep := run(t, 720, Options{Nodes: 2, Webhooks: 1, Actors: 1, Duration: 20 * time.Second, Schedule: s})
	for _, p := range CommitPoints {
		if n := rep.Faults.AfterCommit[p]; n != 2 {
			t.Errorf("%d crashes after a %s commit, want one on each node:\n%s", n, p, rep)
		}
	}
}

// TestRandomScheduleCrashesAfterCommits: random schedules arm crashes
// after every commit point, but after a push frontend's delivery on a
// multi-instance site's runs (pull frontends only).
func TestRandomScheduleCrashesAfterCommits(t *testing.T) {
	seen, site := map[CommitPoint]int{}, map[CommitPoint]int{}
	for seed := int64(1); seed <= 50; seed++ {
		for _, e := range RandomSchedule(rand.New(rand.NewSource(seed)), 5, 5*time.Minute) {
			if e.Kind == KindCrashAfterCommit {
				seen[e.Point]++
			}
		}
		for _, e := range RingOptions(seed, 2, []int{3}, 5*time.Minute).Schedule {
			if e.Kind == KindCrashAfterCommit {
				site[e.Point]++
			}
		}
	}
	for _, p := range CommitPoints {
		if seen[p] == 0 {
			t.Errorf("50 seeds drew no crash after a %s commit", p)
		}
		if p != CommitDelivery && site[p] == 0 {
			t.Errorf("50 seeds with a site drew no crash after a %s commit", p)
		}
	}
	if site[CommitDelivery] > 0 {
		t.Errorf("a site's schedule drew %d crashes after a push delivery's commit: its runs have no push frontends", site[CommitDelivery])
	}
}

// TestCrashAfterCommitStaysDown: a node crashed right after a commit is
// down until its restart, d later. The crash kills the incarnation's
// endpoint first; its HTTPS server, its listener closed, stops the node
// with a fatal error, which the sim took for a node that stopped itself
// and restarted 100 ms later: the crash lasted 100 ms instead of d (in
// ring-failover runs, "stopped itself and restarted: n2: https: use of
// closed network connection" after "crash n2 after its next ack commit,
// restart after 15.104s"), and the run's story was not its schedule's.
func TestCrashAfterCommitStaysDown(t *testing.T) {
	s := Schedule{At(time.Second, CrashAfterCommit(1, CommitHandover, time.Minute))}
	rep := run(t, 721, Options{Nodes: 2, Duration: 5 * time.Second, Schedule: s})
	if rep.Faults.AfterCommit[CommitHandover] != 1 {
		t.Fatalf("the crash after a handover commit did not fire:\n%s", rep)
	}
	if len(rep.Ring.Fatals) > 0 {
		t.Fatalf("the crashed node was restarted as one that stopped itself: %q", rep.Ring.Fatals)
	}
}
