package sim

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"time"
)

// Kind names what an Action does.
type Kind string

// The actions of a fault schedule.
const (
	// KindPartition cuts every direction between the groups A and B.
	KindPartition Kind = "partition"
	// KindCut cuts the directions from every node of A to every node of B
	// (an asymmetric cut: B still reaches A).
	KindCut Kind = "cut"
	// KindHeal ends every link fault between A and B, both directions.
	KindHeal Kind = "heal"
	// KindLink sets the faults of the directions from A to B to Link.
	KindLink Kind = "link"
	// KindCrash stops node Node abruptly (nothing is drained).
	KindCrash Kind = "crash"
	// KindRestart starts a new node on the crashed node's store.
	KindRestart Kind = "restart"
	// KindSlow delays every call to Node by D (0 ends it).
	KindSlow Kind = "slow"
	// KindCrashAfterForward crashes Node after the next forward call it
	// commits, before the answer leaves; it restarts after D.
	KindCrashAfterForward Kind = "crash-after-forward"
	// KindRemovePeers restarts Node (gracefully) with the nodes of B no
	// longer among its static peers.
	KindRemovePeers Kind = "remove-peers"
	// KindHealAll ends every fault and restarts every crashed node.
	KindHealAll Kind = "heal-all"
	// KindCrashInstance and KindRestartInstance crash and restart
	// instance K of Node alone.
	KindCrashInstance   Kind = "crash-instance"
	KindRestartInstance Kind = "restart-instance"
	// KindCrashMaster crashes the instance of a multi-instance Node that
	// holds the ring master lock when the action runs; KindCrashSlave the
	// first running instance that does not. Restart brings them back.
	KindCrashMaster Kind = "crash-master"
	KindCrashSlave  Kind = "crash-slave"
	// KindFrontendFault sets the faults of Node's push frontends (its
	// webhook receivers and actor frontends) to Front.
	KindFrontendFault Kind = "frontend-fault"
	// KindStoreFault sets the faults of Node's store to Store.
	KindStoreFault Kind = "store-fault"
	// KindSkew sets the skew of Node's clock to D (a constant skew from
	// the other nodes; 0 ends it): the clock reads the run's time plus D
	// plus the jumps in force.
	KindSkew Kind = "skew"
	// KindJump moves Node's clock by D, forward or back, at once (a clock
	// stepped while the node runs); the skew in force stays.
	KindJump Kind = "jump"
	// KindAddPeers restarts Node (gracefully) with the nodes of B among
	// its static peers again (after KindRemovePeers).
	KindAddPeers Kind = "add-peers"
	// KindDrainRestart restarts Node in the middle of its next forward
	// call (the drain of its forward queue after a heal): abruptly once
	// the callee committed it, back after D; or, Graceful, a stop and
	// start while the call runs.
	KindDrainRestart Kind = "drain-restart"
	// KindCrashAfterCommit crashes Node (the instance that commits) right
	// after its next commit at Point, before it acts on it (CommitPoint);
	// it restarts after D.
	KindCrashAfterCommit Kind = "crash-after-commit"
	// KindPauseMaster pauses the ring master of a multi-instance Node
	// for D; its lock lapses at once, and it learns so Notice after the
	// pause (PauseMaster).
	KindPauseMaster Kind = "pause-master"
)

// Action is one step of a fault schedule. Nodes are 0-based indices, K
// an instance of Node (0-based).
type Action struct {
	Kind  Kind
	A, B  []int
	Link  Link
	Node  int
	K     int
	D     time.Duration
	Front FrontendFault
	Store StoreFault
	// Graceful: KindDrainRestart stops the node gracefully.
	Graceful bool
	// Point: the commit KindCrashAfterCommit crashes after.
	Point CommitPoint
	// Notice: how long after its pause a KindPauseMaster master learns
	// its lock lapsed.
	Notice time.Duration
}

// Event is an action at a time after the workload starts.
type Event struct {
	At time.Duration
	Action
}

// Schedule is a fault schedule, ordered by time.
type Schedule []Event

// Constructors of actions, for scenarios.

// Partition cuts a and b apart, both ways.
func Partition(a, b []int) Action { return Action{Kind: KindPartition, A: a, B: b} }

// Cut cuts the directions from a to b only.
func Cut(a, b []int) Action { return Action{Kind: KindCut, A: a, B: b} }

// Heal ends the link faults between a and b.
func Heal(a, b []int) Action { return Action{Kind: KindHeal, A: a, B: b} }

// SetLink sets the faults of the directions from a to b.
func SetLink(a, b []int, l Link) Action { return Action{Kind: KindLink, A: a, B: b, Link: l} }

// Crash stops node i abruptly.
func Crash(i int) Action { return Action{Kind: KindCrash, Node: i} }

// Restart starts node i again on its store.
func Restart(i int) Action { return Action{Kind: KindRestart, Node: i} }

// Slow delays every call to node i by d.
func Slow(i int, d time.Duration) Action { return Action{Kind: KindSlow, Node: i, D: d} }

// CrashAfterForward crashes node i between the commit of the next forward
// it receives and its answer, and restarts it after d.
func CrashAfterForward(i int, d time.Duration) Action {
	return Action{Kind: KindCrashAfterForward, Node: i, D: d}
}

// RemovePeers restarts node i without the nodes of peers in its --peers.
func RemovePeers(i int, peers ...int) Action { return Action{Kind: KindRemovePeers, Node: i, B: peers} }

// FrontendFaults makes node i's push frontends slow, failing or losing
// their answers (the zero FrontendFault ends it).
func FrontendFaults(i int, f FrontendFault) Action {
	return Action{Kind: KindFrontendFault, Node: i, Front: f}
}

// StoreFaults makes node i's store fail or slow its writes (the zero
// StoreFault ends it).
func StoreFaults(i int, f StoreFault) Action {
	return Action{Kind: KindStoreFault, Node: i, Store: f}
}

// Skew sets node i's clock's skew to d (0 ends it); jumps in force stay.
func Skew(i int, d time.Duration) Action { return Action{Kind: KindSkew, Node: i, D: d} }

// Jump moves node i's clock by d (negative: back) while it runs.
func Jump(i int, d time.Duration) Action { return Action{Kind: KindJump, Node: i, D: d} }

// AddPeers restarts node i with the nodes of peers in its --peers again.
func AddPeers(i int, peers ...int) Action { return Action{Kind: KindAddPeers, Node: i, B: peers} }

// DrainRestart restarts node i in the middle of its next forward call:
// abruptly after the callee committed it (the answer is lost), back after
// d; or gracefully, while the call runs.
func DrainRestart(i int, graceful bool, d time.Duration) Action {
	return Action{Kind: KindDrainRestart, Node: i, Graceful: graceful, D: d}
}

// CrashAfterCommit crashes node i (the instance that commits) right after
// its next commit at point p, before it acts on it, and restarts it after
// d.
func CrashAfterCommit(i int, p CommitPoint, d time.Duration) Action {
	return Action{Kind: KindCrashAfterCommit, Node: i, Point: p, D: d}
}

// HealAll ends every fault, gives every node its clock and its peers back
// and restarts every crashed node.
func HealAll() Action { return Action{Kind: KindHealAll} }

// CrashInstance stops instance k of node i abruptly.
func CrashInstance(i, k int) Action { return Action{Kind: KindCrashInstance, Node: i, K: k} }

// RestartInstance starts instance k of node i again.
func RestartInstance(i, k int) Action { return Action{Kind: KindRestartInstance, Node: i, K: k} }

// CrashMaster stops abruptly the instance of node i that is its ring
// master when the action runs.
func CrashMaster(i int) Action { return Action{Kind: KindCrashMaster, Node: i} }

// CrashSlave stops abruptly a running instance of node i that is not its
// ring master.
func CrashSlave(i int) Action { return Action{Kind: KindCrashSlave, Node: i} }

// At places an action in time.
func At(t time.Duration, a Action) Event { return Event{At: t, Action: a} }

func names(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = nodeName(id)
	}
	return strings.Join(s, ",")
}

func (l Link) String() string {
	var parts []string
	if l.Cut {
		parts = append(parts, "cut")
	}
	if l.Delay > 0 {
		parts = append(parts, "delay="+l.Delay.String())
	}
	if l.Drop > 0 {
		parts = append(parts, fmt.Sprintf("drop=%.2f", l.Drop))
	}
	if l.Duplicate > 0 {
		parts = append(parts, fmt.Sprintf("dup=%.2f", l.Duplicate))
	}
	if l.LoseAnswer > 0 {
		parts = append(parts, fmt.Sprintf("lose-answer=%.2f", l.LoseAnswer))
	}
	if l.Only != "" {
		parts = append(parts, "only="+l.Only)
	}
	if len(parts) == 0 {
		return "clean"
	}
	return strings.Join(parts, " ")
}

func (a Action) String() string {
	switch a.Kind {
	case KindPartition:
		return fmt.Sprintf("partition %s | %s", names(a.A), names(a.B))
	case KindCut:
		return fmt.Sprintf("cut %s -> %s", names(a.A), names(a.B))
	case KindHeal:
		return fmt.Sprintf("heal %s <-> %s", names(a.A), names(a.B))
	case KindLink:
		return fmt.Sprintf("link %s -> %s %s", names(a.A), names(a.B), a.Link)
	case KindCrash, KindRestart:
		return fmt.Sprintf("%s %s", a.Kind, nodeName(a.Node))
	case KindCrashInstance, KindRestartInstance:
		return fmt.Sprintf("%s %s", strings.TrimSuffix(string(a.Kind), "-instance"), instanceID(a.Node, a.K))
	case KindCrashMaster:
		return fmt.Sprintf("crash the ring master of %s", nodeName(a.Node))
	case KindCrashSlave:
		return fmt.Sprintf("crash a ring slave of %s", nodeName(a.Node))
	case KindSlow:
		return fmt.Sprintf("slow %s %v", nodeName(a.Node), a.D)
	case KindCrashAfterForward:
		return fmt.Sprintf("crash %s after its next forward commit, restart after %v", nodeName(a.Node), a.D)
	case KindCrashAfterCommit:
		return fmt.Sprintf("crash %s after its next %s commit, restart after %v", nodeName(a.Node), a.Point, a.D)
	case KindPauseMaster:
		return fmt.Sprintf("pause the ring master of %s for %v, its lock lapsing; it learns %v after", nodeName(a.Node), a.D, a.Notice)
	case KindRemovePeers:
		return fmt.Sprintf("restart %s without peers %s", nodeName(a.Node), names(a.B))
	case KindHealAll:
		return "heal all"
	case KindFrontendFault:
		return fmt.Sprintf("push frontends of %s %s", nodeName(a.Node), a.Front)
	case KindStoreFault:
		return fmt.Sprintf("store of %s %s", nodeName(a.Node), a.Store)
	case KindSkew:
		return fmt.Sprintf("clock of %s skewed %v", nodeName(a.Node), a.D)
	case KindJump:
		return fmt.Sprintf("clock of %s jumps %v", nodeName(a.Node), a.D)
	case KindAddPeers:
		return fmt.Sprintf("restart %s with peers %s again", nodeName(a.Node), names(a.B))
	case KindDrainRestart:
		how := fmt.Sprintf("crash it, restart after %v", a.D)
		if a.Graceful {
			how = "stop and start it"
		}
		return fmt.Sprintf("restart %s during its next forward (the drain): %s", nodeName(a.Node), how)
	}
	return string(a.Kind)
}

func (e Event) String() string {
	return fmt.Sprintf("t=%-7s %s", e.At.Round(time.Millisecond), e.Action)
}

// String prints the schedule one event a line.
func (s Schedule) String() string {
	if len(s) == 0 {
		return "  (no faults)\n"
	}
	var b strings.Builder
	for _, e := range s {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

func (s Schedule) sorted() Schedule {
	out := append(Schedule{}, s...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// RandomSchedule draws a fault schedule for nodes over d from rng: a
// sequence of overlapping episodes (partitions, asymmetric cuts, lossy,
// duplicating and answer-losing links, delays, crashes and restarts, slow
// nodes, crashes between a forward's commit and its answer, push frontend
// and store faults), each ending before d, then half as many more of the
// kinds added later (clock skews, clock jumps, a peer removed from a
// node's --peers and added back, a restart in the middle of a drain),
// then a third as many crashes right after a commit (CommitPoints): the
// first episodes of a seed are the ones it drew before those kinds came.
// The same rng state gives the same schedule.
func RandomSchedule(rng *rand.Rand, nodes int, d time.Duration) Schedule {
	return RandomSiteSchedule(rng, nodes, nil, d)
}

// RandomSiteSchedule is RandomSchedule for nodes some of which have
// several instances (instances as Options.Instances): when one has, the
// episodes also crash (and restart) the ring master or a slave of such a
// site, and make the ring calls between its instances lossy; its crashes
// after a commit leave out CommitDelivery (RingOptions serves pull
// frontends only), and after them come a sixth as many paused masters
// (PauseMaster). Without one it draws what RandomSchedule draws.
func RandomSiteSchedule(rng *rand.Rand, nodes int, instances []int, d time.Duration) Schedule {
	var s Schedule
	if nodes < 2 || d <= 0 {
		return s
	}
	var multi []int
	for i, k := range instances {
		if k > 1 && i < nodes {
			multi = append(multi, i)
		}
	}
	kinds := 10
	if len(multi) > 0 {
		kinds = 13
	}
	// On virtual time with production intervals (forward retries every
	// 5 s, health every 10 s) an episode lasts seconds to minutes.
	episodes := max(1, int(d/(24*time.Second)))
	span := func(min, max time.Duration) time.Duration {
		return (min + time.Duration(rng.Int63n(int64(max-min)+1))).Round(time.Millisecond)
	}
	for range episodes {
		start := time.Duration(rng.Int63n(int64(d * 8 / 10))).Round(time.Millisecond)
		length := span(6*time.Second, d/3+6*time.Second)
		end := min(start+length, d-time.Millisecond)
		perm := rng.Perm(nodes)
		k := 1 + rng.Intn(nodes-1)
		a, b := sortedInts(perm[:k]), sortedInts(perm[k:])
		one, other := perm[0], perm[1]
		switch rng.Intn(kinds) {
		case 0:
			s = append(s, At(start, Partition(a, b)), At(end, Heal(a, b)))
		case 1:
			s = append(s, At(start, Cut(a, b)), At(end, Heal(a, b)))
		case 2:
			l := Link{Drop: rng.Float64() * 0.5, Duplicate: rng.Float64() * 0.3}
			s = append(s, At(start, SetLink([]int{one}, []int{other}, l)), At(end, Heal([]int{one}, []int{other})))
		case 3:
			l := Link{LoseAnswer: 0.2 + rng.Float64()*0.6, Only: OpForward}
			if rng.Intn(2) == 0 {
				l.Only = ""
			}
			s = append(s, At(start, SetLink(a, b, l)), At(end, Heal(a, b)))
		case 4:
			l := Link{Delay: span(5*time.Millisecond, 120*time.Millisecond)}
			s = append(s, At(start, SetLink(a, b, l)), At(end, Heal(a, b)))
		case 5:
			s = append(s, At(start, Crash(one)), At(end, Restart(one)))
		case 6:
			s = append(s, At(start, Slow(one, span(100*time.Millisecond, 3*time.Second))), At(end, Slow(one, 0)))
		case 7:
			s = append(s, At(start, CrashAfterForward(one, span(3*time.Second, 36*time.Second))))
		case 8:
			f := FrontendFault{Slow: span(0, 3*time.Second), Fail: rng.Float64() * 0.5, LoseAnswer: rng.Float64() * 0.3}
			s = append(s, At(start, FrontendFaults(one, f)), At(end, FrontendFaults(one, FrontendFault{})))
		case 9:
			// A store fault: short (a full disk is noticed and freed, an
			// I/O error burst passes) so that the run still moves.
			f := StoreFault{IOError: rng.Float64() * 0.3, Slow: span(0, 200*time.Millisecond)}
			if rng.Intn(3) == 0 {
				f = StoreFault{Full: true}
			}
			stop := min(start+span(time.Second, 20*time.Second), d-time.Millisecond)
			s = append(s, At(start, StoreFaults(one, f)), At(stop, StoreFaults(one, StoreFault{})))
		case 10:
			site := multi[rng.Intn(len(multi))]
			s = append(s, At(start, CrashMaster(site)), At(end, Restart(site)))
		case 11:
			site := multi[rng.Intn(len(multi))]
			s = append(s, At(start, CrashSlave(site)), At(end, Restart(site)))
		case 12:
			site := multi[rng.Intn(len(multi))]
			l := Link{Drop: rng.Float64() * 0.4, Duplicate: rng.Float64() * 0.3, LoseAnswer: rng.Float64() * 0.3, Only: OpRing}
			s = append(s, At(start, SetLink([]int{site}, []int{site}, l)), At(end, Heal([]int{site}, []int{site})))
		}
	}
	for range max(1, episodes/2) {
		start := time.Duration(rng.Int63n(int64(d * 8 / 10))).Round(time.Millisecond)
		end := min(start+span(6*time.Second, d/3+6*time.Second), d-time.Millisecond)
		perm := rng.Perm(nodes)
		one, other := perm[0], perm[1]
		switch rng.Intn(4) {
		case 0:
			// Its clock runs ahead of or behind the others' for a while.
			skew := span(time.Second, 5*time.Minute)
			if rng.Intn(2) == 0 {
				skew = -skew
			}
			s = append(s, At(start, Skew(one, skew)), At(end, Skew(one, 0)))
		case 1:
			// Stepped forward (up to 10 min: more than a forward's wait
			// of 250 s) or back (up to 2 min: its due work waits that
			// much more), then stepped back.
			jump := span(time.Second, 10*time.Minute)
			if rng.Intn(2) == 0 {
				jump = -span(time.Second, 2*time.Minute)
			}
			s = append(s, At(start, Jump(one, jump)), At(end, Jump(one, -jump)))
		case 2:
			s = append(s, At(start, RemovePeers(one, other)), At(end, AddPeers(one, other)))
		case 3:
			// Cut off long enough for its queues to fill, then healed:
			// it restarts while they drain.
			rest := allNodes(nodes)
			rest = append(rest[:one], rest[one+1:]...)
			restart := DrainRestart(one, rng.Intn(2) == 0, span(time.Second, 10*time.Second))
			s = append(s, At(start, Partition([]int{one}, rest)), At(end, Heal([]int{one}, rest)), At(end, restart))
		}
	}
	// Crashes right after a commit, drawn after every other kind. A
	// site's runs (RingOptions) have no push frontends: no delivery
	// point.
	points := CommitPoints
	if len(multi) > 0 {
		points = slices.DeleteFunc(slices.Clone(points), func(p CommitPoint) bool { return p == CommitDelivery })
	}
	for range max(1, episodes/3) {
		start := time.Duration(rng.Int63n(int64(d * 8 / 10))).Round(time.Millisecond)
		one, p := rng.Intn(nodes), points[rng.Intn(len(points))]
		s = append(s, At(start, CrashAfterCommit(one, p, span(time.Second, 20*time.Second))))
	}
	// A site's ring master paused long enough for its lock to lapse (a
	// slave whose call to it times out, after up to a minute of its held
	// poll, may take the lock), that learns it lost the lock up to 3 s
	// after it goes on, unless the store tells it first.
	if len(multi) > 0 {
		for range max(1, episodes/6) {
			start := time.Duration(rng.Int63n(int64(d * 8 / 10))).Round(time.Millisecond)
			site := multi[rng.Intn(len(multi))]
			s = append(s, At(start, PauseMaster(site, span(5*time.Second, 2*time.Minute), span(0, 3*time.Second))))
		}
	}
	return s.sorted()
}

func sortedInts(x []int) []int {
	out := append([]int{}, x...)
	sort.Ints(out)
	return out
}
