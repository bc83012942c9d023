package sim

import (
	"math/rand"
	"sort"
	"time"

	"github.com/switchboard-dev/switchboard"
)

// Scenario is a named fault story: it shapes the options of a run (nodes,
// workload, schedule). cmd/sim runs one with --faults <name>.
type Scenario struct {
	Name string
	// Doc says what the story checks.
	Doc string
	// Options returns the run's options; nodes is a request (a scenario
	// may need a minimum).
	Options func(seed int64, nodes int) Options
}

// ms is the unit of the stories: they were written for shrunk intervals
// on real time; on virtual time with production intervals (forward
// retries every 5 s, health every 10 s) each of their milliseconds lasts
// 20 ms (a 0.7 s window is 14 s: three forward retries).
var ms = 20 * time.Millisecond

// Scenarios are the named stories, by name.
var Scenarios = map[string]Scenario{}

func register(s Scenario) {
	opts := s.Options
	s.Options = func(seed int64, nodes int) Options {
		o := opts(seed, nodes)
		o.Scenario = s.Name
		return o
	}
	Scenarios[s.Name] = s
}

// ScenarioNames lists the scenario names, sorted.
func ScenarioNames() []string {
	var out []string
	for n := range Scenarios {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// The stories that are not scenarios (Options.Scenario): cmd/sim's
// --faults random and --faults none.
const (
	StoryRandom = "random"
	StoryNone   = "none"
)

// RandomOptions is the random fault story of a seed: nodes, duration and
// a schedule drawn by RandomSchedule from the seed.
func RandomOptions(seed int64, nodes int, d time.Duration) Options {
	return Options{Nodes: nodes, Duration: d, Webhooks: 1, Actors: 1, Schedule: RandomSchedule(rand.New(rand.NewSource(seed)), nodes, d),
		Scenario: StoryRandom}
}

// QuietOptions is the story without faults: nodes (instances as
// Options.Instances) under load for d, pull frontends only.
func QuietOptions(nodes int, instances []int, d time.Duration) Options {
	return Options{Nodes: nodes, Instances: instances, Duration: d, Scenario: StoryNone}
}

func half(nodes int) (a, b []int) {
	for i := range nodes {
		if i < nodes/2 {
			a = append(a, i)
		} else {
			b = append(b, i)
		}
	}
	return a, b
}

// RingOptions is the random fault story of a seed with multi-instance
// sites: instances as Options.Instances, the schedule drawn by
// RandomSiteSchedule from the seed.
func RingOptions(seed int64, nodes int, instances []int, d time.Duration) Options {
	return Options{Nodes: nodes, Instances: instances, Duration: d,
		Schedule: RandomSiteSchedule(rand.New(rand.NewSource(seed)), nodes, instances, d), Scenario: StoryRandom}
}

func init() {
	register(Scenario{
		Name: "ring-failover",
		Doc: "a site of three instances (one shared store, ring coordinator elected by the sim's lock) and a single-instance site, " +
			"traffic both ways: the ring master is killed, then a slave, each restarted, over random faults drawn from the seed; " +
			"no token may be owned twice under the current epoch, no row claimed twice under live leases",
		Options: func(seed int64, nodes int) Options {
			nodes = max(nodes, 2)
			d := 2400 * ms
			instances := []int{3}
			o := RingOptions(seed, nodes, instances, d)
			o.Schedule = append(o.Schedule,
				At(500*ms, CrashMaster(0)),
				At(1000*ms, Restart(0)),
				At(1300*ms, CrashSlave(0)),
				At(1800*ms, Restart(0)),
			).sorted()
			return o
		},
	})
	register(Scenario{
		Name: "partition",
		Doc:  "a symmetric partition of the mesh in two halves during load, then heal: queued forwards drain, nothing is delivered locally instead",
		Options: func(_ int64, nodes int) Options {
			nodes = max(nodes, 2)
			a, b := half(nodes)
			return Options{Nodes: nodes, Duration: 2000 * ms, Schedule: Schedule{
				At(300*ms, Partition(a, b)),
				At(1400*ms, Heal(a, b)),
			}}
		},
	})
	register(Scenario{
		Name: "asymmetric",
		Doc: "n2 hears n1 but n1 cannot hear n2: n1's calls reach n2 and run there but their answers never come back, " +
			"and n2's calls to n1 are refused; then heal",
		Options: func(_ int64, nodes int) Options {
			nodes = max(nodes, 3)
			return Options{Nodes: nodes, Duration: 2000 * ms, Schedule: Schedule{
				At(300*ms, SetLink([]int{0}, []int{1}, Link{LoseAnswer: 1})),
				At(300*ms, Cut([]int{1}, []int{0})),
				At(1400*ms, Heal([]int{0}, []int{1})),
			}}
		},
	})
	register(Scenario{
		Name: "answer-lost",
		Doc: "every forward answer is lost for 14 s, then half of them for 14 s (the forward ran and committed at the receiver): " +
			"the origin retries, the receiver must not deliver twice",
		Options: func(_ int64, nodes int) Options {
			nodes = max(nodes, 3)
			all := allNodes(nodes)
			// All answers first: however slowly a loaded machine runs the
			// traffic, the first forward of the window loses its answer
			// (with only half, a run with few forwards may lose none).
			return Options{Nodes: nodes, Duration: 2000 * ms, Schedule: Schedule{
				At(200*ms, SetLink(all, all, Link{LoseAnswer: 1, Only: OpForward})),
				At(900*ms, SetLink(all, all, Link{LoseAnswer: 0.5, Only: OpForward})),
				At(1600*ms, Heal(all, all)),
			}}
		},
	})
	register(Scenario{
		Name: "duplicate",
		Doc:  "most calls reach their callee twice, half of the copies racing the original: forwards and delivery statuses must stay idempotent",
		Options: func(_ int64, nodes int) Options {
			nodes = max(nodes, 3)
			all := allNodes(nodes)
			return Options{Nodes: nodes, Duration: 1500 * ms, Schedule: Schedule{
				At(100*ms, SetLink(all, all, Link{Duplicate: 0.7})),
				At(1300*ms, Heal(all, all)),
			}}
		},
	})
	register(Scenario{
		Name: "crash-receiver",
		Doc:  "the receiving node crashes between the commit of a forward and its answer, twice, and restarts on its store",
		Options: func(_ int64, nodes int) Options {
			nodes = max(nodes, 3)
			return Options{Nodes: nodes, Duration: 2000 * ms, Origins: []int{0}, Targets: []int{1}, Schedule: Schedule{
				At(300*ms, CrashAfterForward(1, 300*ms)),
				At(1100*ms, CrashAfterForward(1, 200*ms)),
			}}
		},
	})
	register(Scenario{
		Name: "crash-origin",
		Doc:  "the origin is cut from its peers and fills its forward queues, crashes with the queue full, restarts, then the cut heals: every queued message is delivered once",
		Options: func(_ int64, nodes int) Options {
			nodes = max(nodes, 3)
			others := allNodes(nodes)[1:]
			return Options{Nodes: nodes, Duration: 2000 * ms, Origins: []int{0}, Targets: others, Schedule: Schedule{
				At(100*ms, Partition([]int{0}, others)),
				At(1200*ms, Crash(0)),
				At(1400*ms, Restart(0)),
				At(1700*ms, Heal([]int{0}, others)),
			}}
		},
	})
	register(Scenario{
		Name: "peer-removed",
		Doc: "static peers: n1 is cut from n3 while messages for n3 wait in n1's queue, then n1 restarts without n3 in --peers; " +
			"the waiting messages end forward_failed (a legitimate final state), none is delivered elsewhere",
		Options: func(_ int64, nodes int) Options {
			nodes = max(nodes, 3)
			return Options{Nodes: nodes, Duration: 2000 * ms, Origins: []int{0}, Targets: []int{1, 2},
				Tune: func(_ int, cfg *switchboard.Config) {
					cfg.ForwardMaxRetries = 10 // 50 s of waiting (retries every 5 s), so the story ends soon
				},
				Schedule: Schedule{
					At(0, Partition([]int{0}, []int{2})),
					At(1000*ms, RemovePeers(0, 2)),
				}}
		},
	})
	register(Scenario{
		Name: "clock-skew",
		Doc: "the nodes' clocks disagree: n1 runs 3 min ahead, n2 2 min behind, n3's clock steps 6 min forward (more than a forward's wait) " +
			"while n1 and n3 are cut apart, n1's steps 90 s back; nothing is lost, delivered twice or failed sooner than its own node's clock allows",
		Options: func(_ int64, nodes int) Options {
			nodes = max(nodes, 3)
			return Options{Nodes: nodes, Duration: 2000 * ms, Schedule: Schedule{
				At(0, Skew(0, 3*time.Minute)),
				At(0, Skew(1, -2*time.Minute)),
				At(300*ms, Partition([]int{0}, []int{2})),
				At(600*ms, Jump(2, 6*time.Minute)),
				At(1000*ms, Jump(0, -90*time.Second)),
				At(1200*ms, Heal([]int{0}, []int{2})),
				At(1400*ms, Jump(2, -6*time.Minute)),
			}}
		},
	})
	register(Scenario{
		Name: "peer-flap",
		Doc: "n1, then n3, restart without n2 in --peers and later with it again, under load for n2's frontends: " +
			"what waits for n2 meanwhile queues (its registry is kept) and drains once it is back, nothing goes elsewhere",
		Options: func(_ int64, nodes int) Options {
			nodes = max(nodes, 3)
			return Options{Nodes: nodes, Duration: 2000 * ms, Targets: []int{1}, Schedule: Schedule{
				At(300*ms, RemovePeers(0, 1)),
				At(500*ms, RemovePeers(2, 1)),
				At(1200*ms, AddPeers(0, 1)),
				At(1500*ms, AddPeers(2, 1)),
			}}
		},
	})
	register(Scenario{
		Name: "drain-restart",
		Doc: "n1 is cut off while its clients submit for the other nodes' frontends, the cut heals, and n1 restarts during its first forward " +
			"(the drain of its queue): abruptly once the peer committed it, then, after a second cut, gracefully; every queued message is delivered once",
		Options: func(_ int64, nodes int) Options {
			nodes = max(nodes, 3)
			others := allNodes(nodes)[1:]
			return Options{Nodes: nodes, Duration: 2000 * ms, Origins: []int{0}, Targets: others, Schedule: Schedule{
				At(100*ms, Partition([]int{0}, others)),
				At(800*ms, Heal([]int{0}, others)),
				At(800*ms, DrainRestart(0, false, 150*ms)),
				At(1100*ms, Partition([]int{0}, others)),
				At(1700*ms, Heal([]int{0}, others)),
				At(1700*ms, DrainRestart(0, true, 0)),
			}}
		},
	})
	register(Scenario{
		Name: "peer-removed-forwarded",
		Doc: "n3 cannot call n1 (so its delivery_status reports cannot come back) while n1 forwards to n3, " +
			"then n1 restarts without n3 in --peers and the cut heals: n3's reports must still reach n1 (bug 1 of docs/sim.md)",
		Options: func(_ int64, nodes int) Options {
			nodes = max(nodes, 3)
			return Options{Nodes: nodes, Duration: 1500 * ms, Origins: []int{0}, Targets: []int{2},
				Tune: func(_ int, cfg *switchboard.Config) {
					cfg.ForwardMaxRetries = 10 // what still waits for n3 ends forward_failed soon (50 s of virtual time)
				},
				Schedule: Schedule{
					At(0, Cut([]int{2}, []int{0})),
					At(1000*ms, RemovePeers(0, 2)),
				}}
		},
	})
}
