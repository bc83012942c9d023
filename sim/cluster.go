package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/space"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// Options shape a sim run. The zero value of a field takes its default.
type Options struct {
	// Nodes in the full mesh (default 5).
	Nodes int
	// FrontendsPerNode: pull frontends each node serves (default 1).
	FrontendsPerNode int
	// Webhooks and Actors: webhook and in-process actor frontends each
	// node serves (default 0; RandomOptions: 1 each).
	Webhooks, Actors int
	// Duration of the workload and the faults, on the run's virtual clock
	// (default 5m).
	Duration time.Duration
	// Schedule is the fault schedule (nil: no faults); times count from
	// the start of the workload.
	Schedule Schedule
	// Clients submitting at once (default 2), each pausing Pause between
	// submits (default 250ms: 8 messages a second of virtual time).
	Clients int
	Pause   time.Duration
	// Origins are the nodes clients submit to, Targets the nodes whose
	// frontends the messages are for (both default to every node).
	Origins, Targets []int
	// QuiesceTimeout bounds the wait for quiescence after the faults end
	// (default 15m of virtual time); the check runs anyway when it passes.
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
	// Instances makes multi-instance sites: Instances[i] is the number of
	// instances of node i (missing or 0: 1). The instances of a site share
	// its name, one SQLite store (Config.Store) and an in-memory master
	// lock (Config.Elector); they run the ring coordinator (role auto)
	// over the sim network, and the ring invariants are checked.
	Instances []int
	// Scenario names the story, for the report's replay command (its
	// --faults): a scenario's name, StoryRandom (RandomOptions,
	// RingOptions), StoryNone (QuietOptions); "" leaves --faults out (the
	// command's default, random).
	Scenario string
}

// instances is the number of instances of node i.
func (o Options) instances(i int) int {
	if i < len(o.Instances) && o.Instances[i] > 1 {
		return o.Instances[i]
	}
	return 1
}

// multi reports whether some site has several instances.
func (o Options) multi() bool {
	for i := range o.Nodes {
		if o.instances(i) > 1 {
			return true
		}
	}
	return false
}

func (o Options) withDefaults() Options {
	if o.Nodes == 0 {
		o.Nodes = 5
	}
	if o.FrontendsPerNode == 0 {
		o.FrontendsPerNode = 1
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Minute
	}
	if o.Clients == 0 {
		o.Clients = 2
	}
	if o.Pause == 0 {
		o.Pause = 250 * time.Millisecond
	}
	if len(o.Origins) == 0 {
		o.Origins = allNodes(o.Nodes)
	}
	if len(o.Targets) == 0 {
		o.Targets = allNodes(o.Nodes)
	}
	if o.QuiesceTimeout == 0 {
		o.QuiesceTimeout = 15 * time.Minute
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
	if o.FrontendsPerNode < 1 || o.Webhooks < 0 || o.Actors < 0 || o.Nodes*(o.FrontendsPerNode+o.Webhooks+o.Actors) > 99 {
		errs = append(errs, fmt.Errorf("sim: 1-99 frontends in all, got %d pull, %d webhook, %d actor per node", o.FrontendsPerNode, o.Webhooks, o.Actors))
	}
	if len(o.Instances) > o.Nodes {
		errs = append(errs, fmt.Errorf("sim: %d instance counts for %d nodes", len(o.Instances), o.Nodes))
	}
	for i, k := range o.Instances {
		if k < 0 || k > 9 {
			errs = append(errs, fmt.Errorf("sim: node %d: 1-9 instances, got %d", i+1, k))
		}
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
func nodeAddr(i int) string { return instAddr(i, 0) }

// instAddr is the address of instance k of node i (n1:1, n1:2, ...).
func instAddr(i, k int) string { return fmt.Sprintf("%s:%d", nodeName(i), k+1) }

// instanceID is instance k of node i's --instance-id (n1-0, n1-1, ...).
func instanceID(i, k int) string { return fmt.Sprintf("%s-%d", nodeName(i), k) }

// lifeLock is a lock made of a channel of one. A member's lock is held
// across a graceful stop, which waits on the virtual clock (the HTTP
// server's shutdown polls its connections on a timer), and a goroutine
// blocked on a sync.Mutex is not durably blocked: a restart waiting for the
// lock then stopped the bubble's clock, and the stop it waited for never
// ended (seed 20 of the 5-node random runs hung so). A goroutine blocked on
// a channel is durably blocked, and the clock goes on.
type lifeLock chan struct{}

func (l lifeLock) Lock()   { l <- struct{}{} }
func (l lifeLock) Unlock() { <-l }

// member is one instance of a node (a site) across its incarnations.
type member struct {
	i    int      // the site
	k    int      // the instance within it
	name string   // on the network and in the report: the site's name when it has one instance, else the instance id
	life lifeLock // serializes crash, restart and reconfiguration
	cfg  switchboard.Config
	node *switchboard.Node // nil while down; guarded by Cluster.mu
	ep   *Endpoint
	// view and sess are the incarnation's store view and elector session
	// (multi-instance sites only).
	view *storeView
	sess *session
	// down is closed when the incarnation stops.
	down chan struct{}
	// crashes, for the report; gen counts the incarnations.
	crashes int
	gen     int
}

// shared is what the instances of a multi-instance site share.
type shared struct {
	multi bool // several instances (the ring checks apply)
	store persistence.Store
	el    *elector
	log   *claimLog
}

// frontend is one frontend of the workload.
type frontend struct {
	name   string
	node   int
	prefix string
	kind   string // KindPull, KindWebhook, KindActor
}

// Cluster is N real nodes in one process, federated over a Network.
type Cluster struct {
	seed int64
	opts Options
	net  *Network
	dir  string
	own  bool

	mu      sync.Mutex
	members []*member   // every instance
	sites   [][]*member // the instances of each node
	shared  []*shared   // per node: its store and claim log (a single instance's too)
	closed  bool
	rec     recorder
	ring    ringCheck
	fatals  []string

	fronts []frontend
	// frontFaults are the push frontends' faults per node, drawn from
	// frontRng; receivers are the webhook receivers' servers.
	frontFaults map[int]FrontendFault
	frontRng    *rand.Rand
	receivers   []*http.Server
	// storeFaults are the stores' faults per node; storeFailed counts
	// the writes that met one.
	storeFaults map[int]StoreFault
	storeFailed map[int]int
	// clocks are the nodes' clocks (Config.Clock), moved by skews and
	// jumps.
	clocks []*nodeClock
	// faults counts the faults of the kinds that need a count to show
	// they happened (guarded by mu).
	faults FaultCounts
	// commitArmed are the crashes armed for a node's next commit at a
	// point, with the delay of their restarts (guarded by mu).
	commitArmed map[commitArm]time.Duration

	bg sync.WaitGroup
	// driving counts the frontends' goroutines (also in bg): the history
	// is read once they have returned, so an ack under way when they are
	// stopped is recorded in it.
	driving sync.WaitGroup
	// doubled is set once the DoubleAck frontend has handed a message
	// over twice: the load goes on until it has (Run).
	doubled  atomic.Bool
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

// nodeConfig is instance k of node i's configuration: DefaultConfig's,
// production intervals included (health, registry, forward retries, ring
// publication, real backoffs and timeouts): the run is on virtual time, so
// they cost no wall time.
// Every node speaks mutual TLS with certificates of the run's CA, over
// the sim network (Listener, Dial, Intercept).
func (c *Cluster) nodeConfig(i, k int) switchboard.Config {
	cfg := switchboard.DefaultConfig()
	cfg.Name = nodeName(i)
	cfg.InstanceID = instanceID(i, k)
	cfg.Listen, cfg.MetricsListen = "", ""
	cfg.DataDir = filepath.Join(c.dir, nodeName(i))
	cfg.Logger = c.opts.Logger
	cfg.Clock = c.clocks[i]
	cfg.Federation = true
	cfg.TLSCert, cfg.TLSKey = certs.NodeFiles(c.certDir(), nodeName(i))
	cfg.TLSCA, _ = certs.CAFiles(c.certDir())
	cfg.Peers = c.peerAddrs(i, nil)
	if c.opts.instances(i) > 1 {
		// The ring: elected by the sim's lock; a slave waits out a
		// master's failover rather than give up.
		cfg.RingRole = messages.RoleAuto
		cfg.RingAddress = instAddr(i, k)
		cfg.RingReconnectMaxAttempts = 100
	}
	// The space check reads the host's file system, which the sim does
	// not model: the store wrapper makes full disks instead.
	cfg.MinFreeSpace = space.Reserve{}
	// The TLS files and credentials never change in a run: looking for
	// changes every second of virtual time would only cost file reads.
	cfg.WatchInterval = time.Minute
	// Crashes leave dead letters; a short throttle lets its goroutine end
	// soon after (every goroutine must end before the run's bubble does).
	cfg.DeadLetterThrottle = 10 * time.Millisecond
	if c.opts.Tune != nil {
		c.opts.Tune(i, &cfg)
	}
	return cfg
}

// peerAddrs is node i's --peers: every instance of every other node (each
// an address of one peer) but those of the nodes in without.
func (c *Cluster) peerAddrs(i int, without map[int]bool) []string {
	var out []string
	for j := range c.opts.Nodes {
		if j != i && !without[j] {
			for k := range c.opts.instances(j) {
				out = append(out, instAddr(j, k))
			}
		}
	}
	return out
}

// certDir holds the run's CA and the node certificates.
func (c *Cluster) certDir() string { return filepath.Join(c.dir, "certs") }

// New starts a cluster: every node, its pull frontends, and a route on
// every node to every frontend (waiting until the registries are known).
// Close stops it.
func New(seed int64, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Cluster{seed: seed, opts: opts, net: NewNetwork(seed, time.Minute), dir: opts.Dir, closing: make(chan struct{}),
		frontFaults: map[int]FrontendFault{}, storeFaults: map[int]StoreFault{}, storeFailed: map[int]int{}, frontRng: rand.New(rand.NewSource(seed * 31)),
		commitArmed: map[commitArm]time.Duration{}, faults: FaultCounts{AfterCommit: map[CommitPoint]int{}}}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "switchboard-sim-")
		if err != nil {
			return nil, err
		}
		c.dir, c.own = d, true
	}
	c.bgCtx, c.stopBG = context.WithCancel(context.Background())
	c.timeline = newTimeline()
	for range opts.Nodes {
		c.clocks = append(c.clocks, &nodeClock{})
	}
	// Made now: in the run's bubble the clock starts at 2000-01-01, and a
	// certificate must be valid then.
	var names []string
	for i := range opts.Nodes {
		names = append(names, nodeName(i))
		for k := range opts.Webhooks {
			names = append(names, hookHost(fmt.Sprintf("%s-w%d", nodeName(i), k)))
		}
	}
	if err := certs.InitCA(c.certDir(), names, time.Now()); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	for i := range opts.Nodes {
		n := opts.instances(i)
		// Every node's store is opened by the sim and given to its
		// incarnations (through the fault wrapper and a view that dies
		// with the incarnation); with one instance the elector is its own.
		var sh *shared
		{
			sc := sqlite.DefaultConfig()
			sc.Path, sc.Logger = filepath.Join(c.dir, nodeName(i), "switchboard.db"), opts.Logger
			// No fsync: a crash in the sim is a process's, the host's page
			// cache survives it (power loss is not modelled), and a real
			// fsync is wall time that the bubble's clock cannot hide. The
			// store wrapper makes slow fsyncs on the virtual clock.
			sc.Sync = func(*os.File) error { return nil }
			// A checkpoint every 200 ms of virtual time is 5 a second per
			// store even when idle, which under -race is most of a quiet
			// run's wall time; the WAL limit still bounds the log.
			sc.Checkpoint = 5 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			st, err := sqlite.Open(ctx, sc)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s: shared store: %w", nodeName(i), err)
			}
			sh = &shared{store: st, el: newElector(), log: newClaimLog(), multi: n > 1}
		}
		c.shared = append(c.shared, sh)
		var site []*member
		for k := range n {
			m := &member{i: i, k: k, name: nodeName(i), life: make(lifeLock, 1)}
			if n > 1 {
				m.name = instanceID(i, k)
			}
			m.cfg = c.nodeConfig(i, k)
			c.members = append(c.members, m)
			site = append(site, m)
			c.net.AddInstance(nodeName(i), m.name, instAddr(i, k))
		}
		c.sites = append(c.sites, site)
		add := func(kind, tag string, n int) {
			for k := range n {
				g := len(c.fronts)
				c.fronts = append(c.fronts, frontend{name: fmt.Sprintf("%s-%s%d", nodeName(i), tag, k), node: i, prefix: fmt.Sprintf("1%02d", g), kind: kind})
			}
		}
		add(KindPull, "f", opts.FrontendsPerNode)
		add(KindWebhook, "w", opts.Webhooks)
		add(KindActor, "a", opts.Actors)
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
		if n == nil {
			return nil, fmt.Errorf("register %s: %s is down", f.name, nodeName(f.node))
		}
		fe := messages.Frontend{Name: f.name, Mode: messages.ModePull}
		switch f.kind {
		case KindActor:
			continue // registered by every incarnation (start)
		case KindWebhook:
			if err := c.startReceiver(f); err != nil {
				return nil, err
			}
			fe = messages.Frontend{Name: f.name, Mode: messages.ModeWebhook, URL: hookURL(f.name)}
		}
		if _, err := n.PutFrontend(ctx, fe); err != nil {
			return nil, fmt.Errorf("register %s: %w", f.name, err)
		}
	}
	if err := c.routes(ctx); err != nil {
		return nil, err
	}
	for _, f := range c.fronts {
		if f.kind != KindPull {
			continue
		}
		c.driving.Add(1)
		c.bg.Go(func() {
			defer c.driving.Done()
			c.drive(f)
		})
	}
	c.bg.Go(func() { c.timeline.run(c) })
	if opts.multi() {
		c.bg.Go(func() { c.ring.run(c) })
	}
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
				n := c.nodeOf(m)
				if n == nil {
					return fmt.Errorf("route %s -> %s on %s: down", f.prefix, f.name, m.name)
				}
				_, err := n.PutRoute(ctx, messages.Route{Prefix: f.prefix, Frontend: f.name})
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

// node is a running incarnation of node i: its first instance that is up
// (nil while every instance is down). The instances of a site share their
// store, so any of them reads the site's messages.
func (c *Cluster) node(i int) *switchboard.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.sites[i] {
		if m.node != nil {
			return m.node
		}
	}
	return nil
}

// nodeOf is m's running incarnation (nil while it is down).
func (c *Cluster) nodeOf(m *member) *switchboard.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m.node
}

// siteDown reports whether some instance of node i is down.
func (c *Cluster) siteDown(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.sites[i] {
		if m.node == nil {
			return true
		}
	}
	return false
}

// start starts a new incarnation of m on its store (for an instance of a
// multi-instance site, a new view of the shared store and a new session
// of the site's elector).
func (c *Cluster) start(m *member) error {
	ep := c.net.Endpoint(m.name)
	m.gen++
	by := fmt.Sprintf("%s#%d", m.name, m.gen)
	ep.label = by
	cfg := m.cfg
	cfg.Listener, cfg.Dial, cfg.Intercept = ep.Listener(), ep.Dial, ep.Intercept
	var view *storeView
	var sess *session
	if sh := c.shared[m.i]; sh != nil {
		view = &storeView{Store: &faultStore{Store: sh.store, c: c, i: m.i}, log: sh.log}
		sess = &session{el: sh.el}
		cfg.Store, cfg.Elector = view, sess
	}
	dead := func() {
		ep.Kill()
		if view != nil {
			view.kill()
			sess.end()
		}
	}
	n, err := switchboard.New(cfg)
	if err != nil {
		dead()
		return fmt.Errorf("%s: %w", m.name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		dead()
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	if err := c.registerActors(ctx, m.i, n, by); err != nil {
		_ = n.Stop(ctx)
		dead()
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	down := make(chan struct{})
	c.mu.Lock()
	m.node, m.ep, m.view, m.sess, m.down = n, ep, view, sess, down
	closed := c.closed
	if !closed {
		c.bg.Add(1) // under mu: never after Close began waiting
	}
	c.mu.Unlock()
	ep.Attach()
	if view != nil {
		crash := func(points []CommitPoint) bool { return c.crashAfterCommit(m, n, ep, view, points) }
		view.crash.Store(&crash)
	}
	if !closed {
		go func() {
			defer c.bg.Done()
			c.watch(m, n, ep, down)
		}()
	}
	return nil
}

// watch restarts an incarnation that stopped itself (Node.Fatal: a ring
// slave refused or out of attempts, a master that lost its lock or was
// overtaken), as a process supervisor restarts a process that exited.
// An incarnation whose endpoint (ep) the sim killed is being crashed: the
// fatal error of its HTTPS server, whose listener closed, is the crash's,
// and the crash says when it comes back.
func (c *Cluster) watch(m *member, n *switchboard.Node, ep *Endpoint, down <-chan struct{}) {
	select {
	case err := <-n.Fatal():
		if ep.dead.Load() {
			return
		}
		c.mu.Lock()
		c.fatals = append(c.fatals, fmt.Sprintf("%s: %v", m.name, err))
		c.mu.Unlock()
		c.crashIncarnation(m, n)
		select {
		case <-time.After(100 * time.Millisecond):
		case <-c.closing:
			return
		}
		_ = c.restartMember(m)
	case <-down:
	case <-c.closing:
	}
}

// Crash stops every instance of node i abruptly: its calls stop at once,
// its actors are stopped without draining and its store is closed (the
// view of the shared store of a multi-instance site fails every call, and
// its master lock is lost); whatever was not committed is lost. It does
// nothing for an instance that is down.
func (c *Cluster) Crash(i int) {
	for _, m := range c.sites[i] {
		c.crashMember(m)
	}
}

// crashMember crashes one instance.
func (c *Cluster) crashMember(m *member) { c.crashIncarnation(m, nil) }

// crashIncarnation crashes m's incarnation n (nil: whichever runs).
func (c *Cluster) crashIncarnation(m *member, only *switchboard.Node) {
	m.life.Lock()
	defer m.life.Unlock()
	c.mu.Lock()
	n, ep, view, sess, down := m.node, m.ep, m.view, m.sess, m.down
	if n == nil || (only != nil && n != only) {
		c.mu.Unlock()
		return
	}
	m.node = nil
	c.mu.Unlock()
	ep.Kill()
	if view != nil {
		view.kill()
		sess.end()
	}
	close(down)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = n.Stop(ctx) // an abrupt stop reports what it did not finish
	m.crashes++
}

// instance is instance k of node i.
func (c *Cluster) instance(i, k int) *member {
	if k < 0 || k >= len(c.sites[i]) {
		return nil
	}
	return c.sites[i][k]
}

// master is the running instance of node i that holds its ring master
// lock (nil when none does).
func (c *Cluster) master(i int) *member {
	sh := c.shared[i]
	if sh == nil || !sh.multi {
		return nil
	}
	sh.el.mu.Lock()
	l := sh.el.holders[ring.LockName]
	sh.el.mu.Unlock()
	if l == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.sites[i] {
		if m.sess == l.s && m.node != nil {
			return m
		}
	}
	return nil
}

// slave is the first running instance of node i that is not its master.
func (c *Cluster) slave(i int) *member {
	master := c.master(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.sites[i] {
		if m != master && m.node != nil {
			return m
		}
	}
	return nil
}

// Restart starts every instance of node i that is down again on its
// store (nothing when it runs, or the cluster is closing).
func (c *Cluster) Restart(i int) error {
	var errs []error
	for _, m := range c.sites[i] {
		errs = append(errs, c.restartMember(m))
	}
	return errors.Join(errs...)
}

// restartMember starts instance m again when it is down.
func (c *Cluster) restartMember(m *member) error {
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

// Reconfigure stops every instance of node i gracefully, changes its
// configuration with f and starts it again.
func (c *Cluster) Reconfigure(i int, f func(*switchboard.Config)) error {
	var errs []error
	for _, m := range c.sites[i] {
		errs = append(errs, c.reconfigure(m, f))
	}
	return errors.Join(errs...)
}

func (c *Cluster) reconfigure(m *member, f func(*switchboard.Config)) error {
	m.life.Lock()
	defer m.life.Unlock()
	c.mu.Lock()
	n, closed := m.node, c.closed
	m.node = nil
	c.mu.Unlock()
	if closed {
		return nil
	}
	var stopErr error
	if n != nil {
		if err := c.stopGracefully(m, n); err != nil {
			// A graceful stop that ran out of time ends as the process
			// does: its teardown goes on to the end (Stop returns once
			// the store is closed), and the supervisor starts it again,
			// here with its new configuration. Not starting it left a
			// node without the peers it was to get back (seed 109).
			stopErr = fmt.Errorf("stop %s: %w", m.name, err)
		}
	}
	f(&m.cfg)
	return errors.Join(stopErr, c.start(m))
}

// stopGracefully stops m's incarnation n (already taken out of m.node).
func (c *Cluster) stopGracefully(m *member, n *switchboard.Node) error {
	m.ep.Detach()
	close(m.down)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := n.Stop(ctx)
	cancel()
	m.ep.Kill()
	if m.view != nil {
		m.view.kill()
		m.sess.end()
	}
	return err
}

// drive is one pull frontend: it polls its node (whichever incarnation
// runs; every instance of a multi-instance site in turn, as a load
// balancer in front of the site would: each offers the messages of its own
// ranges), hands every message to its subscriber (records it) and acks it
// to the instance that offered it.
func (c *Cluster) drive(f frontend) {
	ctx := c.bgCtx
	fname, home := f.name, nodeName(f.node)
	site := c.sites[f.node]
	for turn := 0; ctx.Err() == nil; turn++ {
		n := c.nodeOf(site[turn%len(site)])
		if n == nil {
			pause(ctx, 10*time.Millisecond/time.Duration(len(site)))
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		msgs, err := n.Poll(pctx, fname, 64, 2*time.Second, 30*time.Second)
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
			d := Delivery{ID: m.ID, Frontend: fname, Node: home, Ack: ack, Kind: KindPull}
			c.rec.delivery(d)
			if fname == c.opts.DoubleAck && ack == Acked {
				c.rec.delivery(d)
				c.doubled.Store(true)
			}
		}
	}
}

// untriggered names the faults that need traffic to happen and have not
// happened yet: crashes armed for a forward, a double delivery due. None:
// "".
func (c *Cluster) untriggered() string {
	var what []string
	if n := c.net.Armed() + c.armedCommits(); n > 0 {
		what = append(what, fmt.Sprintf("%d armed crash(es)", n))
	}
	if c.opts.DoubleAck != "" && !c.doubled.Load() {
		what = append(what, "the double delivery of "+c.opts.DoubleAck)
	}
	return strings.Join(what, " and ")
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
	for _, r := range c.receivers {
		_ = r.Close()
	}
	c.bg.Wait()
	for _, m := range c.members {
		m.life.Lock()
		c.mu.Lock()
		n := m.node
		m.node = nil
		c.mu.Unlock()
		if n != nil {
			// A pause whose end the closing cancelled ends now: the
			// graceful stop waits for the writes it holds.
			m.ep.paused.end()
			m.view.paused.end()
			_ = c.stopGracefully(m, n)
		}
		m.life.Unlock()
	}
	for _, sh := range c.shared {
		if sh != nil {
			_ = sh.store.Close() // the nodes do not close a store they were given
		}
	}
	if c.own {
		_ = os.RemoveAll(c.dir)
	}
}

// apply runs one action.
func (c *Cluster) apply(a Action) error {
	// A link from a node to itself is the link between the instances of a
	// multi-instance site (its ring calls).
	both := func(f func(from, to string)) {
		for _, x := range a.A {
			for _, y := range a.B {
				if x != y || len(c.sites[x]) > 1 {
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
	case KindCrashInstance:
		if m := c.instance(a.Node, a.K); m != nil {
			c.crashMember(m)
		}
	case KindRestartInstance:
		if m := c.instance(a.Node, a.K); m != nil {
			return c.restartMember(m)
		}
	case KindCrashMaster, KindCrashSlave:
		m := c.master(a.Node)
		if a.Kind == KindCrashSlave {
			m = c.slave(a.Node)
		}
		if m == nil {
			return fmt.Errorf("%s: no running instance to crash", a)
		}
		fmt.Fprintf(c.opts.Progress, "sim: %s: crashing %s\n", a, m.name)
		c.crashMember(m)
	case KindCrashAfterForward:
		i, d := a.Node, a.D
		c.net.ArmCrash(nodeName(i), func(inst string) {
			var m *member
			for _, x := range c.sites[i] {
				if x.name == inst {
					m = x
				}
			}
			if m == nil {
				return
			}
			c.crashMember(m)
			c.after(d, func() { _ = c.restartMember(m) })
		})
	case KindRemovePeers, KindAddPeers:
		waiting := c.forwardRows(a.Node, a.B)
		c.mu.Lock()
		if a.Kind == KindRemovePeers {
			c.faults.Removals++
		} else {
			c.faults.Readded = append(c.faults.Readded, waiting)
		}
		c.mu.Unlock()
		return c.Reconfigure(a.Node, func(cfg *switchboard.Config) {
			// The peers configured now, less or plus those of a.B.
			without := map[int]bool{}
			for j := range c.opts.Nodes {
				without[j] = !slices.Contains(cfg.Peers, nodeAddr(j))
			}
			for _, j := range a.B {
				without[j] = a.Kind == KindRemovePeers
			}
			cfg.Peers = c.peerAddrs(a.Node, without)
		})
	case KindSkew:
		c.clocks[a.Node].skew(a.D)
		if a.D != 0 {
			c.mu.Lock()
			c.faults.Skews++
			c.mu.Unlock()
		}
	case KindJump:
		c.clocks[a.Node].jump(a.D)
		c.mu.Lock()
		c.faults.Jumps++
		c.mu.Unlock()
	case KindPauseMaster:
		m, l := c.lapsing(a.Node)
		if m == nil || l == nil {
			return fmt.Errorf("%s: no running master to pause", a)
		}
		c.pauseMaster(m, l, a.D, a.Notice)
	case KindCrashAfterCommit:
		c.mu.Lock()
		c.commitArmed[commitArm{a.Node, a.Point}] = a.D
		c.mu.Unlock()
	case KindDrainRestart:
		i, graceful, d := a.Node, a.Graceful, a.D
		c.net.ArmDrainRestart(nodeName(i), !graceful, func() { c.after(0, func() { c.drainRestart(i, graceful, d) }) })
	case KindFrontendFault:
		c.mu.Lock()
		c.frontFaults[a.Node] = a.Front
		c.mu.Unlock()
	case KindStoreFault:
		c.mu.Lock()
		c.storeFaults[a.Node] = a.Store
		c.mu.Unlock()
	case KindHealAll:
		c.net.HealAll()
		for _, k := range c.clocks {
			k.reset()
		}
		c.mu.Lock()
		c.frontFaults = map[int]FrontendFault{}
		c.storeFaults = map[int]StoreFault{}
		c.commitArmed = map[commitArm]time.Duration{}
		c.mu.Unlock()
		var errs []error
		for i := range c.sites {
			errs = append(errs, c.Restart(i))
		}
		return errors.Join(errs...)
	default:
		return fmt.Errorf("sim: unknown action %q", a.Kind)
	}
	return nil
}

// after runs f after d of the run, in the background, unless the
// cluster closes first.
func (c *Cluster) after(d time.Duration, f func()) {
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
		f()
	}()
}

// forwardRows is node i's forward outbox rows for the nodes of peers
// (all peers when nil); -1 when it cannot tell (it is down).
func (c *Cluster) forwardRows(i int, peers []int) int64 {
	n := c.node(i)
	if n == nil {
		return -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := n.Store().Stats(ctx)
	if err != nil {
		return -1
	}
	var rows int64
	for p, v := range st.ForwardQueue {
		for j := range c.opts.Nodes {
			if p == nodeName(j) && (peers == nil || slices.Contains(peers, j)) {
				rows += v
			}
		}
	}
	return rows
}

// drainRestart restarts node i while it drains its forward queue (an
// armed KindDrainRestart fired on its forward call): gracefully, or
// abruptly and back after d. The forward work it still had (its forward
// outbox rows) is counted for the report.
func (c *Cluster) drainRestart(i int, graceful bool, d time.Duration) {
	queued := c.forwardRows(i, nil)
	c.mu.Lock()
	c.faults.DrainRestarts++
	c.faults.DrainQueued = append(c.faults.DrainQueued, queued)
	c.mu.Unlock()
	if graceful {
		_ = c.Reconfigure(i, func(*switchboard.Config) {})
		return
	}
	c.Crash(i)
	c.after(d, func() { _ = c.Restart(i) })
}

// busy is the work left on the running nodes: messages not yet final or
// forwarded without their outcome, and outbox rows; a down node counts.
func (c *Cluster) busy(ctx context.Context) (int64, error) {
	var left int64
	for i := range c.sites {
		n := c.node(i)
		if n == nil || c.siteDown(i) {
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
		time.Sleep(time.Second)
	}
}

// queues describes each node's final message counts.
func (c *Cluster) queues() []string {
	var out []string
	for i, site := range c.sites {
		name, crashes := nodeName(i), 0
		for _, x := range site {
			crashes += x.crashes
		}
		if len(site) > 1 {
			name = fmt.Sprintf("%s (%d instances)", name, len(site))
		}
		n := c.node(i)
		if n == nil {
			out = append(out, name+": down")
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := n.Store().Stats(ctx)
		cancel()
		if err != nil {
			out = append(out, fmt.Sprintf("%s: stats: %v", name, err))
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
		out = append(out, fmt.Sprintf("%s: %s outbox=%d forward_queue=[%s] crashes=%d", name,
			strings.Join(parts, " "), st.OutboxDepth, strings.Join(fq, " "), crashes))
	}
	return out
}

// waits are each node's waits before it fails a message (for the
// checker's failed_early), and the moves of its clock.
func (c *Cluster) waits() (map[string]Waits, map[string][]ClockMove) {
	waits, clocks := map[string]Waits{}, map[string][]ClockMove{}
	for i, site := range c.sites {
		site[0].life.Lock()
		cfg := site[0].cfg
		site[0].life.Unlock()
		waits[nodeName(i)] = Waits{Forward: time.Duration(cfg.ForwardMaxRetries) * cfg.ForwardRetryInterval, Validity: cfg.MessageValidity,
			Attempts: cfg.DeliveryMaxAttempts}
		_, clocks[nodeName(i)] = c.clocks[i].state()
	}
	return waits, clocks
}

// reported says, for each submitted message of a remote frontend,
// whether its origin's store applied its destination's report that it
// was delivered.
func (c *Cluster) reported(subs []Submit) map[string]bool {
	idx := map[string]int{}
	for i := range c.sites {
		idx[nodeName(i)] = i
	}
	out := map[string]bool{}
	for _, s := range subs {
		i, ok := idx[s.Node]
		if !ok || s.Target == s.Node || c.shared[i] == nil {
			continue
		}
		out[s.ID] = c.shared[i].log.reportedBy(s.ID, s.Target)
	}
	return out
}

// stored reads every submitted message's state and failure reason at its
// origin, and the message as its destination (its frontend's home node)
// holds it: State "" when the destination has none.
func (c *Cluster) stored(subs []Submit) (map[string]messages.State, map[string]string, map[string]Stored) {
	out, reasons, dests := map[string]messages.State{}, map[string]string{}, map[string]Stored{}
	idx := map[string]int{}
	for i := range c.sites {
		idx[nodeName(i)] = i
	}
	read := func(node, id string) (messages.Message, bool, error) {
		i, ok := idx[node]
		if !ok {
			return messages.Message{}, false, fmt.Errorf("no node %q", node)
		}
		n := c.node(i)
		if n == nil {
			return messages.Message{}, false, fmt.Errorf("%s is down", node)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := n.Message(ctx, id)
		if e := (*messages.Error)(nil); errors.As(err, &e) && e.Code == messages.CodeNotFound {
			return m, false, nil
		}
		return m, err == nil, err
	}
	for _, s := range subs {
		if s.Outcome == Rejected {
			continue
		}
		if m, found, err := read(s.Node, s.ID); found {
			out[s.ID], reasons[s.ID] = m.State, m.Reason
		} else if err == nil {
			out[s.ID] = ""
		}
		if s.Target == "" {
			continue
		}
		m, found, err := read(s.Target, s.ID)
		switch {
		case found:
			dests[s.ID] = Stored{State: m.State, Reason: m.Reason, Attempts: m.Attempts, Detail: m.LastDetail}
		case err == nil:
			dests[s.ID] = Stored{}
		}
	}
	return out, reasons, dests
}
