package sim

import (
	"math/rand"
	"strings"
	"testing"
	"time"
)

// TestRandomScheduleReplays: the schedule is a function of the seed alone,
// so --seed N replays it; different seeds give different stories.
func TestRandomScheduleReplays(t *testing.T) {
	draw := func(seed int64) string {
		return RandomSchedule(rand.New(rand.NewSource(seed)), 5, 3*time.Second).String()
	}
	if a, b := draw(42), draw(42); a != b {
		t.Fatalf("seed 42 drew two schedules:\n%s\n%s", a, b)
	}
	if draw(42) == draw(43) {
		t.Fatal("seeds 42 and 43 drew the same schedule")
	}
	for seed := int64(1); seed <= 50; seed++ {
		s := RandomSchedule(rand.New(rand.NewSource(seed)), 5, 3*time.Second)
		if len(s) == 0 {
			t.Fatalf("seed %d: empty schedule", seed)
		}
		for i, e := range s {
			if e.At < 0 || e.At >= 3*time.Second || (i > 0 && e.At < s[i-1].At) {
				t.Fatalf("seed %d: event %d out of order or range:\n%s", seed, i, s)
			}
			if strings.Contains(e.String(), "%!") {
				t.Fatalf("seed %d: bad format %q", seed, e)
			}
		}
	}
}

// TestRandomScheduleDrawsTheLaterKinds: random schedules skew and step
// clocks, remove peers and add them back, and restart nodes during a
// drain; each skew, step and removal is undone in its episode.
func TestRandomScheduleDrawsTheLaterKinds(t *testing.T) {
	seen := map[Kind]int{}
	for seed := int64(1); seed <= 50; seed++ {
		s := RandomSchedule(rand.New(rand.NewSource(seed)), 5, 5*time.Minute)
		offset := map[int]time.Duration{}
		removed := map[[2]int]int{}
		for _, e := range s {
			seen[e.Kind]++
			switch e.Kind {
			case KindJump:
				offset[e.Node] += e.D
			case KindRemovePeers, KindAddPeers:
				for _, p := range e.B {
					if e.Kind == KindRemovePeers {
						removed[[2]int{e.Node, p}]++
					} else {
						removed[[2]int{e.Node, p}]--
					}
				}
			case KindDrainRestart:
				if e.D <= 0 && !e.Graceful {
					t.Fatalf("seed %d: %s restarts at once", seed, e)
				}
			}
		}
		for n, d := range offset {
			if d != 0 {
				t.Fatalf("seed %d: the clock of %s ends %v off:\n%s", seed, nodeName(n), d, s)
			}
		}
		for k, n := range removed {
			if n != 0 {
				t.Fatalf("seed %d: %s removed from %s and not added back:\n%s", seed, nodeName(k[1]), nodeName(k[0]), s)
			}
		}
	}
	for _, k := range []Kind{KindSkew, KindJump, KindRemovePeers, KindAddPeers, KindDrainRestart} {
		if seen[k] == 0 {
			t.Errorf("50 seeds drew no %s", k)
		}
	}
}

// TestReplayKeepsInstances: the replay command names --instances when the
// run's instances are not its story's own (cmd/sim --faults <scenario>
// --instances 3 overrides the scenario's), and only then.
func TestReplayKeepsInstances(t *testing.T) {
	tests := []struct {
		rep  Report
		want string // "" : no --instances
	}{
		{Report{Seed: 7, Nodes: 3, Scenario: "partition", Instances: []int{3}}, " --instances 3"},
		{Report{Seed: 7, Nodes: 3, Scenario: "partition", Instances: []int{1, 2}}, " --instances 1,2"},
		{Report{Seed: 7, Nodes: 3, Scenario: "partition"}, ""},
		{Report{Seed: 7, Nodes: 2, Scenario: "ring-failover", Instances: []int{3}}, ""},
		{Report{Seed: 7, Nodes: 2, Scenario: "ring-failover", Instances: []int{3, 1}}, ""},
		{Report{Seed: 7, Nodes: 2, Scenario: "ring-failover", Instances: []int{1}}, " --instances 1"},
		{Report{Seed: 7, Nodes: 2, Duration: time.Minute, Instances: []int{3}}, " --instances 3"},
		{Report{Seed: 7, Nodes: 2, Duration: time.Minute, Instances: []int{1, 1}}, ""},
	}
	for _, tt := range tests {
		got := tt.rep.Replay()
		i := strings.Index(got, " --instances")
		switch {
		case tt.want == "" && i >= 0:
			t.Errorf("%s with instances %v: replay %q names --instances, the story's own", tt.rep.Scenario, tt.rep.Instances, got)
		case tt.want != "" && (i < 0 || !strings.HasPrefix(got[i:], tt.want)):
			t.Errorf("%s with instances %v: replay %q, want %q in it", tt.rep.Scenario, tt.rep.Instances, got, tt.want)
		}
	}
}

// TestClockEpisodesCompose: the random schedules' clock episodes overlap
// (a node's clock skewed while a jump of it is in force, or the other way
// round); at every step a node's clock must read the run's time plus the
// skew in force plus the jumps in force, and every clock must read the
// run's time again once every episode has ended.
func TestClockEpisodesCompose(t *testing.T) {
	const nodes = 5
	overlapped := 0
	for seed := int64(1); seed <= 300; seed++ {
		clocks := make([]nodeClock, nodes)
		skew, jump := make([]time.Duration, nodes), make([]time.Duration, nodes)
		for _, e := range RandomOptions(seed, nodes, 5*time.Minute).Schedule {
			switch e.Kind {
			case KindSkew:
				clocks[e.Node].skew(e.D)
				if skew[e.Node] = e.D; jump[e.Node] != 0 {
					overlapped++
				}
			case KindJump:
				clocks[e.Node].jump(e.D)
				if jump[e.Node] += e.D; skew[e.Node] != 0 {
					overlapped++
				}
			default:
				continue
			}
			if got, _ := clocks[e.Node].state(); got != skew[e.Node]+jump[e.Node] {
				t.Fatalf("seed %d, after %s: the clock is %v off the run's time, want the skew %v plus the jumps %v",
					seed, e, got, skew[e.Node], jump[e.Node])
			}
		}
		for i := range clocks {
			if got, _ := clocks[i].state(); got != 0 {
				t.Fatalf("seed %d: every clock episode ended, %s's clock is still %v off the run's time", seed, nodeName(i), got)
			}
		}
	}
	if overlapped == 0 {
		t.Fatal("no skew and jump of one clock overlapped in 300 seeds: the test tested nothing")
	}
}
