package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// Report is the outcome of one run.
type Report struct {
	Seed     int64
	Nodes    int
	Schedule Schedule
	Result   Result
	Net      NetStats
	// Quiesced is false when work was still left at the quiescence
	// deadline (the check ran anyway; the run fails).
	Quiesced bool
	// Elapsed is the run's time on its virtual clock, Wall its wall time
	// (set by RunIn, which measures it outside the bubble), Submitted the
	// submits tried.
	Elapsed   time.Duration
	Wall      time.Duration
	Submitted int
	Queues    []string
	Peers     []string
	// Errors are actions of the schedule that failed (a restart that did
	// not come up, ...).
	Errors []string
	// Instances and Scenario are the run's options of those names (for
	// the replay command).
	Instances []int
	Scenario  string
	// Duration, Clients and FrontendsPerNode are the run's options of
	// those names (for the replay command).
	Duration                  time.Duration
	Clients, FrontendsPerNode int
	// HandedOver counts the hand-overs to frontends by kind (pull,
	// webhook, actor), answered or not.
	HandedOver map[string]int
	// StoreFaulted counts the store writes that met a fault.
	StoreFaulted int
	// Digest is the history's digest, in the order it was observed
	// (submits, then deliveries): two runs with the same digest saw the
	// same outcomes in the same order.
	Digest string
	// Ring is the verdict of the ring checks (Sites 0: no multi-instance
	// site).
	Ring RingResult
	// Faults counts the clock skews and jumps, peer removals and
	// restarts during a drain that happened.
	Faults FaultCounts
}

// FaultCounts counts faults that happened, for the kinds whose action
// alone does not show it (a drain restart waits for a forward; a skew
// matters only if the node reads its clock).
type FaultCounts struct {
	// Skews: a node's clock set off the run's time (not counting the
	// ends of skews); Jumps: a node's clock stepped while it ran.
	Skews, Jumps int
	// Removals: a node restarted with a peer taken out of its --peers;
	// Readded is the node's forward outbox rows for the peers it got
	// back, at each restart that gave them back (what waited for them).
	Removals int
	Readded  []int64
	// DrainRestarts: a node restarted during a forward call after a heal;
	// DrainQueued is its forward outbox rows at that moment, each.
	DrainRestarts int
	DrainQueued   []int64
	// AfterCommit: a node crashed right after a commit, by the commit's
	// point (KindCrashAfterCommit).
	AfterCommit map[CommitPoint]int
	// Lapses: a ring master paused, its lock lapsed (KindPauseMaster);
	// Overtaken: of those, the ones whose lock another instance held
	// when they went on, still believing they led (two instances
	// believed they were the master).
	Lapses, Overtaken int
}

// Line is the report's last line: the checker's verdict (Result.Line),
// the counts of the faults (skews, jumps, removals, drain_restarts), the
// verdict's later fields (Result.Tail), quiesced (1, or 0 when work was
// left at the quiescence deadline) and the crashes after a commit
// (commit_crashes).
func (r Report) Line() string {
	quiesced := 0
	if r.Quiesced {
		quiesced = 1
	}
	crashes := 0
	for _, n := range r.Faults.AfterCommit {
		crashes += n
	}
	return fmt.Sprintf("%s skews=%d jumps=%d removals=%d drain_restarts=%d %s quiesced=%d commit_crashes=%d", r.Result.Line(r.Seed, r.Nodes),
		r.Faults.Skews, r.Faults.Jumps, r.Faults.Removals, r.Faults.DrainRestarts, r.Result.Tail(), quiesced, crashes)
}

// OK reports whether the run holds no violation: the checker's and, with
// multi-instance sites, the ring's; and whether it quiesced (a run whose
// work was left undone at the deadline ended nowhere its checks can
// judge).
func (r Report) OK() bool { return r.Result.OK() && r.Ring.OK() && r.Quiesced }

// Replay is the command that replays the run's story.
func (r Report) Replay() string {
	cmd := fmt.Sprintf("go run%s ./cmd/sim --seed %d --nodes %d", replayTags, r.Seed, r.Nodes)
	if r.Scenario != "" {
		cmd += " --faults " + r.Scenario
	}
	// A scenario sets its own duration; random and none take --duration.
	if _, named := Scenarios[r.Scenario]; !named && r.Duration > 0 {
		cmd += " --duration " + r.Duration.String()
	}
	if r.Clients > 0 && r.Clients != 2 {
		cmd += fmt.Sprintf(" --clients %d", r.Clients)
	}
	if r.FrontendsPerNode > 1 {
		cmd += fmt.Sprintf(" --frontends %d", r.FrontendsPerNode)
	}
	// --instances when the run's sites are not its story's own (cmd/sim
	// lets --instances override a scenario's).
	run, own := Options{Instances: r.Instances}, Options{}
	if sc, ok := Scenarios[r.Scenario]; ok {
		own = sc.Options(r.Seed, r.Nodes)
	}
	differ := false
	for i := range r.Nodes {
		differ = differ || run.instances(i) != own.instances(i)
	}
	if differ {
		ks := []string{"1"}
		if len(r.Instances) > 0 {
			ks = nil
		}
		for _, k := range r.Instances {
			ks = append(ks, fmt.Sprint(max(k, 1)))
		}
		cmd += " --instances " + strings.Join(ks, ",")
	}
	return cmd
}

// maxDetails bounds the violations of one kind a report prints.
const maxDetails = 30

// String is the report of cmd/sim; its last line is the sim: line.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fault schedule (seed %d, replay with: %s):\n%s", r.Seed, r.Replay(), r.Schedule)
	fmt.Fprintf(&b, "network: calls=%d refused=%d dropped=%d duplicated=%d answers_lost=%d crashed_after_commit=%d\n",
		r.Net.Calls, r.Net.Refused, r.Net.Dropped, r.Net.Duplicated, r.Net.AnswersLost, r.Net.CrashedAfterCommit)
	fmt.Fprintf(&b, "peer states (transitions seen, state at the end):\n")
	for _, p := range r.Peers {
		fmt.Fprintf(&b, "  %s\n", p)
	}
	fmt.Fprintf(&b, "queues after quiescence (quiesced=%v):\n", r.Quiesced)
	for _, q := range r.Queues {
		fmt.Fprintf(&b, "  %s\n", q)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "schedule error: %s\n", e)
	}
	fmt.Fprintf(&b, "handed over: pull=%d webhook=%d actor=%d; store writes that met a fault: %d\n",
		r.HandedOver[KindPull], r.HandedOver[KindWebhook], r.HandedOver[KindActor], r.StoreFaulted)
	fmt.Fprintf(&b, "clocks: %d skews, %d jumps; peers removed: %d (forward rows waiting for them when added back: %v); restarts during a drain: %d (forward rows then: %v)\n",
		r.Faults.Skews, r.Faults.Jumps, r.Faults.Removals, r.Faults.Readded, r.Faults.DrainRestarts, r.Faults.DrainQueued)
	fmt.Fprintf(&b, "crashes right after a commit: %s; ring masters paused with their lock lapsed: %d (%d went on while another led)\n",
		afterCommitText(r.Faults.AfterCommit), r.Faults.Lapses, r.Faults.Overtaken)
	fmt.Fprintf(&b, "submitted=%d virtual=%v wall=%v history=%s\n", r.Submitted, r.Elapsed.Round(time.Millisecond), r.Wall.Round(time.Millisecond), r.Digest)
	if r.Ring.Sites > 0 {
		fmt.Fprintf(&b, "ring: sites=%d checks=%d (%d with the ring split among instances; %d more skipped while the epoch moved) claims=%d\n",
			r.Ring.Sites, r.Ring.Checks, r.Ring.Split, r.Ring.Skipped, r.Ring.Claims)
		for _, f := range r.Ring.Fatals {
			fmt.Fprintf(&b, "  stopped itself and restarted: %s\n", f)
		}
		writeDetails(&b, "ring violations", r.Ring.Details)
	}
	writeDetails(&b, "violations", r.Result.Details)
	if r.Ring.Sites > 0 {
		b.WriteString(r.Ring.Line())
		b.WriteString("\n")
	}
	b.WriteString(r.Line())
	b.WriteString("\n")
	return b.String()
}

// writeDetails lists the violations under title (nothing when there are
// none), up to maxDetails of each kind (a line's first word: lost,
// disagreeing, ...; the kinds come together, the lines being sorted), so
// that many of one kind do not hide the others.
func writeDetails(b *strings.Builder, title string, details []string) {
	if len(details) == 0 {
		return
	}
	fmt.Fprintf(b, "%s (%d):\n", title, len(details))
	kind, n := "", 0
	more := func() {
		if n > maxDetails {
			fmt.Fprintf(b, "  ... %d more %s\n", n-maxDetails, kind)
		}
	}
	for _, d := range details {
		k, _, _ := strings.Cut(d, " ")
		if k = strings.TrimSuffix(k, ":"); k != kind {
			more()
			kind, n = k, 0
		}
		if n++; n <= maxDetails {
			fmt.Fprintf(b, "  %s\n", d)
		}
	}
	more()
}

// triggerGrace bounds how long the load outlasts its duration for the
// faults that need traffic (a crash armed for the next forward, a double
// delivery).
const triggerGrace = 5 * time.Minute

// Run starts a cluster, runs the workload under the schedule for the
// duration, heals everything, waits for quiescence and checks the
// history. An error means the run could not be made (a node did not
// start); violations are in the report.
func Run(seed int64, opts Options) (Report, error) {
	begin := time.Now()
	opts = opts.withDefaults()
	rep := Report{Seed: seed, Nodes: opts.Nodes, Schedule: opts.Schedule.sorted(), Instances: opts.Instances, Scenario: opts.Scenario,
		Duration: opts.Duration, Clients: opts.Clients, FrontendsPerNode: opts.FrontendsPerNode}
	fmt.Fprintf(opts.Progress, "sim: starting %d nodes\n", opts.Nodes)
	c, err := New(seed, opts)
	if err != nil {
		return rep, err
	}
	defer c.Close()
	fmt.Fprintf(opts.Progress, "sim: mesh up after %v; load and faults for %v\n", time.Since(begin).Round(time.Millisecond), opts.Duration)

	// What happens at time 0 happens before the first submit.
	var errs []string
	var errMu sync.Mutex
	rest := rep.Schedule
	for len(rest) > 0 && rest[0].At <= 0 {
		fmt.Fprintf(opts.Progress, "sim: %s\n", rest[0])
		if err := c.apply(rest[0].Action); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", rest[0], err))
		}
		rest = rest[1:]
	}
	start := time.Now()
	stopLoad := make(chan struct{})
	var load sync.WaitGroup
	for k := range opts.Clients {
		load.Go(func() { c.client(k, stopLoad) })
	}
	var sched sync.WaitGroup
	sched.Go(func() {
		for _, e := range rest {
			if d := time.Until(start.Add(e.At)); d > 0 {
				time.Sleep(d)
			}
			fmt.Fprintf(opts.Progress, "sim: %s\n", e)
			if err := c.apply(e.Action); err != nil {
				errMu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %v", e, err))
				errMu.Unlock()
			}
		}
	})
	time.Sleep(time.Until(start.Add(opts.Duration)))
	sched.Wait()
	// A crash armed for the next forward, or a double delivery, needs
	// traffic to happen: on a slow (loaded) machine the load goes on until
	// it has, within triggerGrace.
	if what := c.untriggered(); what != "" {
		fmt.Fprintf(opts.Progress, "sim: load goes on until %s (at most %v)\n", what, triggerGrace)
		for end := time.Now().Add(triggerGrace); c.untriggered() != "" && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	close(stopLoad)
	load.Wait()
	fmt.Fprintf(opts.Progress, "sim: load ends; heal all and wait for quiescence\n")
	if err := c.apply(HealAll()); err != nil {
		errs = append(errs, fmt.Sprintf("heal all: %v", err))
	}
	rep.Quiesced = c.quiesce(opts.QuiesceTimeout)
	// The frontends stop before the history is read: no delivery after
	// the origins' states, and an ack under way (its commit may already
	// have made the message delivered) is recorded before the check.
	c.stopBG()
	c.driving.Wait()
	c.timeline.stop()
	c.rec.mu.Lock()
	h := History{Submits: append([]Submit{}, c.rec.submits...), Deliveries: append([]Delivery{}, c.rec.deliveries...)}
	c.rec.mu.Unlock()
	h.Waits, h.Clocks = c.waits()
	h.ReadAt = time.Now()
	h.Origin, h.Reason, h.Dest = c.stored(h.Submits)
	h.Reported = c.reported(h.Submits)
	rep.Result = Check(h)
	rep.Digest = h.digest()
	c.mu.Lock()
	for _, n := range c.storeFailed {
		rep.StoreFaulted += n
	}
	rep.Faults = c.faults
	c.mu.Unlock()
	rep.HandedOver = map[string]int{}
	for _, d := range h.Deliveries {
		rep.HandedOver[d.Kind]++
	}
	rep.Submitted = len(h.Submits)
	rep.Net = c.net.Stats()
	rep.Queues = c.queues()
	rep.Peers = c.timeline.summary()
	rep.Errors = errs
	rep.Ring = c.ringResult()
	rep.Elapsed = time.Since(begin)
	return rep, nil
}

// client submits until stop: each message from a random origin to a
// random target frontend, with a client-chosen id.
func (c *Cluster) client(k int, stop <-chan struct{}) {
	rng := rand.New(rand.NewSource(c.seed*7919 + int64(k)))
	var fronts []frontend
	for _, f := range c.fronts {
		for _, t := range c.opts.Targets {
			if f.node == t {
				fronts = append(fronts, f)
			}
		}
	}
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		origin := c.opts.Origins[rng.Intn(len(c.opts.Origins))]
		f := fronts[rng.Intn(len(fronts))]
		s := Submit{ID: fmt.Sprintf("s%d-c%d-%d", c.seed, k, seq), Node: nodeName(origin), Frontend: f.name, Target: nodeName(f.node), At: time.Now()}
		dest := fmt.Sprintf("%s%04d", f.prefix, rng.Intn(10000))
		n := c.node(origin)
		if site := c.sites[origin]; len(site) > 1 {
			// A load balancer in front of the site: a random instance,
			// the next one up when it is down.
			first := rng.Intn(len(site))
			n = nil
			for j := range site {
				if n = c.nodeOf(site[(first+j)%len(site)]); n != nil {
					break
				}
			}
		}
		if n == nil {
			s.Outcome, s.Err = Rejected, "node down"
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, _, err := n.Submit(ctx, messages.Submission{ID: s.ID, SourceMSISDN: "15550000", DestinationMSISDN: dest, Body: "sim " + s.ID})
			cancel()
			s.Outcome = classify(err)
			if err != nil {
				s.Err = err.Error()
			}
		}
		c.rec.submit(s)
		select {
		case <-stop:
			return
		case <-time.After(c.opts.Pause):
		}
	}
}

// classify says what a submit's error means for its message.
func classify(err error) SubmitOutcome {
	if err == nil {
		return Accepted
	}
	var e *messages.Error
	if errors.As(err, &e) {
		switch e.Code {
		case messages.CodeNoRoute, messages.CodeInvalidRequest, messages.CodeOverloaded:
			return Rejected
		}
	}
	return Maybe
}

// timeline samples every node's view of its peers and counts the changes.
type timeline struct {
	mu    sync.Mutex
	last  map[[2]string]messages.PeerState
	moves map[[2]string]int
	done  chan struct{}
	once  sync.Once
}

func newTimeline() *timeline {
	return &timeline{last: map[[2]string]messages.PeerState{}, moves: map[[2]string]int{}, done: make(chan struct{})}
}

func (t *timeline) stop() { t.once.Do(func() { close(t.done) }) }

func (t *timeline) run(c *Cluster) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-c.bgCtx.Done():
			return
		case <-tick.C:
		}
		for _, m := range c.members {
			n := c.nodeOf(m)
			if n == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			peers, err := n.Peers(ctx)
			cancel()
			if err != nil {
				continue
			}
			t.mu.Lock()
			for _, p := range peers {
				k := [2]string{m.name, p.Node}
				if prev, ok := t.last[k]; ok && prev != p.State {
					t.moves[k]++
				}
				t.last[k] = p.State
			}
			t.mu.Unlock()
		}
	}
}

func (t *timeline) summary() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	by := map[string][]string{}
	for k, s := range t.last {
		by[k[0]] = append(by[k[0]], fmt.Sprintf("%s:%s(%d)", k[1], s, t.moves[k]))
	}
	var out []string
	for node, views := range by {
		sort.Strings(views)
		out = append(out, node+" sees "+strings.Join(views, " "))
	}
	sort.Strings(out)
	return out
}
