package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/messages"
)

// Options shape a sim run. The zero value of a field takes its default.
type Options struct {
	// Nodes in the full mesh (default 5).
	Nodes int
	// FrontendsPerNode: pull frontends each node serves (default 1).
	FrontendsPerNode int
	// Duration of the workload and the faults (default 3s).
	Duration time.Duration
	// Schedule is the fault schedule (nil: no faults); times count from
	// the start of the workload.
	Schedule Schedule
	// Clients submitting at once (default 2), each pausing Pause between
	// submits (default 10ms).
	Clients int
	Pause   time.Duration
	// Origins are the nodes clients submit to, Targets the nodes whose
	// frontends the messages are for (both default to every node).
	Origins, Targets []int
	// QuiesceTimeout bounds the wait for quiescence after the faults end
	// (default 60s); the check runs anyway when it passes.
	QuiesceTimeout time.Duration
	// Logger receives the nodes' logs (nil discards them).
	Logger *slog.Logger
	// Dir holds the nodes' stores (default: a temporary directory,
	// removed at the end).
	Dir string
	// Tune changes node i's configuration after the sim's defaults.
	Tune func(i int, cfg *switchboard.Config)
	// DoubleAck names a frontend that is faulty: it hands every message
	// to its subscriber twice (the checker must catch it).
	DoubleAck string
	// Progress receives a line per phase (nil discards them).
	Progress io.Writer
}

func (o Options) withDefaults() Options {
	if o.Nodes == 0 {
		o.Nodes = 5
	}
	if o.FrontendsPerNode == 0 {
		o.FrontendsPerNode = 1
	}
	if o.Duration == 0 {
		o.Duration = 3 * time.Second
	}
	if o.Clients == 0 {
		o.Clients = 2
	}
	if o.Pause == 0 {
		o.Pause = 10 * time.Millisecond
	}
	if len(o.Origins) == 0 {
		o.Origins = allNodes(o.Nodes)
	}
	if len(o.Targets) == 0 {
		o.Targets = allNodes(o.Nodes)
	}
	if o.QuiesceTimeout == 0 {
		o.QuiesceTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	if o.Nodes < 1 || o.Nodes > 99 {
		errs = append(errs, fmt.Errorf("sim: nodes must be 1-99, got %d", o.Nodes))
	}
	if o.FrontendsPerNode < 1 || o.Nodes*o.FrontendsPerNode > 99 {
		errs = append(errs, fmt.Errorf("sim: 1-99 frontends in all, got %d per node", o.FrontendsPerNode))
	}
	for _, i := range append(append([]int{}, o.Origins...), o.Targets...) {
		if i < 0 || i >= o.Nodes {
			errs = append(errs, fmt.Errorf("sim: node index %d out of range", i))
		}
	}
	for _, e := range o.Schedule {
		for _, i := range append(append([]int{e.Node}, e.A...), e.B...) {
			if i < 0 || i >= o.Nodes {
				errs = append(errs, fmt.Errorf("sim: %s: node index %d out of range", e, i))
			}
		}
	}
	return errors.Join(errs...)
}

func allNodes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func nodeName(i int) string { return fmt.Sprintf("n%d", i+1) }
func nodeAddr(i int) string { return nodeName(i) + ":1" }

// member is one node of the cluster across its incarnations.
type member struct {
	i    int
	name string
	life sync.Mutex // serializes crash, restart and reconfiguration
	cfg  switchboard.Config
	node *switchboard.Node // nil while down; guarded by Cluster.mu
	ep   *Endpoint
	// crashes and restarts, for the report.
	crashes int
}

// frontend is one pull frontend of the workload.
type frontend struct {
	name   string
	node   int
	prefix string
}

// Cluster is N real nodes in one process, federated over a Network.
type Cluster struct {
	seed int64
	opts Options
	net  *Network
	dir  string
	own  bool

	mu      sync.Mutex
	members []*member
	closed  bool
	rec     recorder

	fronts []frontend

	bg       sync.WaitGroup
	closing  chan struct{}
	stopBG   context.CancelFunc
	bgCtx    context.Context
	timeline *timeline
}

// recorder collects the history; it is shared by the clients and the
// frontends.
type recorder struct {
	mu         sync.Mutex
	submits    []Submit
	deliveries []Delivery
}

func (r *recorder) submit(s Submit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.submits = append(r.submits, s)
}

func (r *recorder) delivery(d Delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries = append(r.deliveries, d)
}

// nodeConfig is node i's configuration: the contract's defaults with the
// intervals shrunk so that a long story runs in seconds.
func (c *Cluster) nodeConfig(i int) switchboard.Config {
	cfg := switchboard.DefaultConfig()
	cfg.Name = nodeName(i)
	cfg.InstanceID = nodeName(i) + "-0"
	cfg.Listen, cfg.MetricsListen = "", ""
	cfg.DataDir = filepath.Join(c.dir, nodeName(i))
	cfg.Logger = c.opts.Logger
	cfg.Federation = true
	for j := range c.opts.Nodes {
		if j != i {
			cfg.Peers = append(cfg.Peers, nodeAddr(j))
		}
	}
	// Health and registry exchanges grow with the square of the mesh:
	// beyond 5 nodes they slow down in proportion, so that a 20-node
	// mesh spends its CPU on messages rather than on heartbeats.
	scale := time.Duration(max(1, c.opts.Nodes/5))
	cfg.HealthInterval = 50 * time.Millisecond * scale
	cfg.RegistryInterval = 50 * time.Millisecond * scale
	cfg.ForwardRetryInterval = 50 * time.Millisecond
	cfg.ForwardMaxRetries = 600 // 30 s: longer than any fault of a run
	cfg.DNSPollInterval = 100 * time.Millisecond
	cfg.HTTPTimeout = time.Second
	cfg.DeliveryRetryMin = 20 * time.Millisecond
	cfg.DeliveryRetryMax = 100 * time.Millisecond
	cfg.DeliveryMaxAttempts = 1000
	cfg.MessageValidity = time.Hour
	cfg.WebhookTimeout = time.Second
	cfg.ShutdownTimeout = 5 * time.Second
	if c.opts.Tune != nil {
		c.opts.Tune(i, &cfg)
	}
	return cfg
}

// New starts a cluster: every node, its pull frontends, and a route on
// every node to every frontend (waiting until the registries are known).
// Close stops it.
func New(seed int64, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Cluster{seed: seed, opts: opts, net: NewNetwork(seed, time.Second), dir: opts.Dir, closing: make(chan struct{})}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "switchboard-sim-")
		if err != nil {
			return nil, err
		}
		c.dir, c.own = d, true
	}
	c.bgCtx, c.stopBG = context.WithCancel(context.Background())
	c.timeline = newTimeline()
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	for i := range opts.Nodes {
		m := &member{i: i, name: nodeName(i)}
		m.cfg = c.nodeConfig(i)
		c.members = append(c.members, m)
		c.net.Address(m.name, nodeAddr(i))
		for k := range opts.FrontendsPerNode {
			g := len(c.fronts)
			c.fronts = append(c.fronts, frontend{name: fmt.Sprintf("%s-f%d", m.name, k), node: i, prefix: fmt.Sprintf("1%02d", g)})
		}
	}
	for _, m := range c.members {
		if err := c.start(m); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, f := range c.fronts {
		n := c.node(f.node)
		if _, err := n.PutFrontend(ctx, messages.Frontend{Name: f.name, Mode: messages.ModePull}); err != nil {
			return nil, fmt.Errorf("register %s: %w", f.name, err)
		}
	}
	if err := c.routes(ctx); err != nil {
		return nil, err
	}
	for _, f := range c.fronts {
		c.bg.Go(func() { c.drive(f) })
	}
	c.bg.Go(func() { c.timeline.run(c) })
	ok = true
	return c, nil
}

// routes sets a route on every node to every frontend; a route to a
// peer's frontend is refused (unknown_frontend) until that peer's
// registry is known, so each is retried until ctx ends.
func (c *Cluster) routes(ctx context.Context) error {
	for _, m := range c.members {
		for _, f := range c.fronts {
			for {
				_, err := c.node(m.i).PutRoute(ctx, messages.Route{Prefix: f.prefix, Frontend: f.name})
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return fmt.Errorf("route %s -> %s on %s: %w", f.prefix, f.name, m.name, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	return nil
}

// node is node i's running incarnation (nil while it is down).
func (c *Cluster) node(i int) *switchboard.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i].node
}

// start starts a new incarnation of m on its store.
func (c *Cluster) start(m *member) error {
	ep := c.net.Endpoint(m.name)
	cfg := m.cfg
	cfg.Transport = ep
	n, err := switchboard.New(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", m.name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	c.mu.Lock()
	m.node, m.ep = n, ep
	c.mu.Unlock()
	c.net.Attach(m.name, n)
	return nil
}

// Crash stops node i abruptly: its calls stop at once, its actors are
// stopped without draining and its store is closed; whatever was not
// committed is lost. It does nothing when the node is down.
func (c *Cluster) Crash(i int) {
	m := c.members[i]
	m.life.Lock()
	defer m.life.Unlock()
	c.mu.Lock()
	n, ep := m.node, m.ep
	m.node = nil
	c.mu.Unlock()
	if n == nil {
		return
	}
	c.net.Attach(m.name, nil)
	ep.Kill()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = n.Stop(ctx) // an abrupt stop reports what it did not finish
	m.crashes++
}

// Restart starts node i again on its store (nothing when it runs, or the
// cluster is closing).
func (c *Cluster) Restart(i int) error {
	m := c.members[i]
	m.life.Lock()
	defer m.life.Unlock()
	c.mu.Lock()
	up, closed := m.node != nil, c.closed
	c.mu.Unlock()
	if up || closed {
		return nil
	}
	var err error
	for try := 0; try < 5; try++ {
		if err = c.start(m); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Reconfigure stops node i gracefully, changes its configuration with f
// and starts it again.
func (c *Cluster) Reconfigure(i int, f func(*switchboard.Config)) error {
	m := c.members[i]
	m.life.Lock()
	defer m.life.Unlock()
	c.mu.Lock()
	n, ep, closed := m.node, m.ep, c.closed
	m.node = nil
	c.mu.Unlock()
	if closed {
		return nil
	}
	if n != nil {
		c.net.Attach(m.name, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := n.Stop(ctx)
		cancel()
		ep.Kill()
		if err != nil {
			return fmt.Errorf("stop %s: %w", m.name, err)
		}
	}
	f(&m.cfg)
	return c.start(m)
}

// drive is one pull frontend: it polls its node (whichever incarnation
// runs), hands every message to its subscriber (records it) and acks it.
func (c *Cluster) drive(f frontend) {
	ctx := c.bgCtx
	fname, home := f.name, nodeName(f.node)
	for ctx.Err() == nil {
		n := c.node(f.node)
		if n == nil {
			pause(ctx, 10*time.Millisecond)
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		msgs, err := n.Poll(pctx, fname, 64, 50*time.Millisecond, time.Second)
		cancel()
		if err != nil || len(msgs) == 0 {
			if err != nil {
				pause(ctx, 10*time.Millisecond)
			}
			continue
		}
		results := make([]messages.DeliveryResult, len(msgs))
		for i, m := range msgs {
			results[i] = messages.DeliveryResult{ID: m.ID, Status: messages.Delivered, Attempt: m.Attempt}
		}
		actx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		outs, err := n.Ack(actx, fname, results)
		cancel()
		outcome := map[string]string{}
		for _, o := range outs {
			outcome[o.ID] = o.Outcome
		}
		for _, m := range msgs {
			ack := Offered
			switch {
			case err != nil:
				ack = AckUnknown
			case outcome[m.ID] == "applied" || outcome[m.ID] == "already_recorded":
				ack = Acked
			}
			d := Delivery{ID: m.ID, Frontend: fname, Node: home, Ack: ack}
			c.rec.delivery(d)
			if fname == c.opts.DoubleAck && ack == Acked {
				c.rec.delivery(d)
			}
		}
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Close stops every node gracefully and the frontends, and removes the
// temporary directory it made.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	close(c.closing)
	c.stopBG()
	c.bg.Wait()
	for _, m := range c.members {
		m.life.Lock()
		c.mu.Lock()
		n, ep := m.node, m.ep
		m.node = nil
		c.mu.Unlock()
		if n != nil {
			c.net.Attach(m.name, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = n.Stop(ctx)
			cancel()
			ep.Kill()
		}
		m.life.Unlock()
	}
	if c.own {
		_ = os.RemoveAll(c.dir)
	}
}

// apply runs one action.
func (c *Cluster) apply(a Action) error {
	both := func(f func(from, to string)) {
		for _, x := range a.A {
			for _, y := range a.B {
				if x != y {
					f(nodeName(x), nodeName(y))
				}
			}
		}
	}
	switch a.Kind {
	case KindPartition:
		both(func(x, y string) {
			c.net.UpdateLink(x, y, func(l *Link) { l.Cut = true })
			c.net.UpdateLink(y, x, func(l *Link) { l.Cut = true })
		})
	case KindCut:
		both(func(x, y string) { c.net.UpdateLink(x, y, func(l *Link) { l.Cut = true }) })
	case KindHeal:
		both(func(x, y string) {
			c.net.SetLink(x, y, Link{})
			c.net.SetLink(y, x, Link{})
		})
	case KindLink:
		both(func(x, y string) { c.net.SetLink(x, y, a.Link) })
	case KindCrash:
		c.Crash(a.Node)
	case KindRestart:
		return c.Restart(a.Node)
	case KindSlow:
		c.net.SetSlow(nodeName(a.Node), a.D)
	case KindCrashAfterForward:
		i, d := a.Node, a.D
		c.net.ArmCrash(nodeName(i), func() {
			c.Crash(i)
			c.mu.Lock()
			closed := c.closed
			if !closed {
				c.bg.Add(1) // under mu: never after Close began waiting
			}
			c.mu.Unlock()
			if closed {
				return
			}
			go func() {
				defer c.bg.Done()
				select {
				case <-time.After(d):
				case <-c.closing:
					return
				}
				_ = c.Restart(i)
			}()
		})
	case KindRemovePeers:
		drop := map[string]bool{}
		for _, j := range a.B {
			drop[nodeAddr(j)] = true
		}
		return c.Reconfigure(a.Node, func(cfg *switchboard.Config) {
			var keep []string
			for _, p := range cfg.Peers {
				if !drop[p] {
					keep = append(keep, p)
				}
			}
			cfg.Peers = keep
		})
	case KindHealAll:
		c.net.HealAll()
		var errs []error
		for i := range c.members {
			errs = append(errs, c.Restart(i))
		}
		return errors.Join(errs...)
	default:
		return fmt.Errorf("sim: unknown action %q", a.Kind)
	}
	return nil
}

// busy is the work left on the running nodes: messages not yet final or
// forwarded without their outcome, and outbox rows; a down node counts.
func (c *Cluster) busy(ctx context.Context) (int64, error) {
	var left int64
	for i := range c.members {
		n := c.node(i)
		if n == nil {
			return 1, nil
		}
		st, err := n.Store().Stats(ctx)
		if err != nil {
			return 0, err
		}
		left += st.ByState[messages.StatePending] + st.ByState[messages.StateRetry] +
			st.ByState[messages.StateForwarded] + st.ByState[messages.StateForwardQueued] + st.OutboxDepth
	}
	return left, nil
}

// quiesce waits until no work is left anywhere (three looks in a row),
// or timeout.
func (c *Cluster) quiesce(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	calm := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		left, err := c.busy(ctx)
		cancel()
		if err == nil && left == 0 {
			calm++
			if calm >= 3 {
				return true
			}
		} else {
			calm = 0
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// queues describes each node's final message counts.
func (c *Cluster) queues() []string {
	var out []string
	for i, m := range c.members {
		n := c.node(i)
		if n == nil {
			out = append(out, m.name+": down")
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := n.Store().Stats(ctx)
		cancel()
		if err != nil {
			out = append(out, fmt.Sprintf("%s: stats: %v", m.name, err))
			continue
		}
		var parts []string
		for _, s := range messages.AllStates {
			if v := st.ByState[s]; v > 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", s, v))
			}
		}
		var fq []string
		for p, v := range st.ForwardQueue {
			fq = append(fq, fmt.Sprintf("%s:%d", p, v))
		}
		sort.Strings(fq)
		out = append(out, fmt.Sprintf("%s: %s outbox=%d forward_queue=[%s] crashes=%d", m.name,
			strings.Join(parts, " "), st.OutboxDepth, strings.Join(fq, " "), m.crashes))
	}
	return out
}

// origins reads every submitted message's state at its origin.
func (c *Cluster) origins(subs []Submit) map[string]messages.State {
	out := map[string]messages.State{}
	idx := map[string]int{}
	for i, m := range c.members {
		idx[m.name] = i
	}
	for _, s := range subs {
		if s.Outcome == Rejected {
			continue
		}
		n := c.node(idx[s.Node])
		if n == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := n.Message(ctx, s.ID)
		cancel()
		if err == nil {
			out[s.ID] = m.State
		}
	}
	return out
}
