package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/transport"
)

// Config is what a peer actor needs.
type Config struct {
	// Node is our name.
	Node string
	// Peer is the peer's name; Instances its addresses (tried in turn).
	// Both are filled per peer; Validate does not require them.
	Peer      string
	Instances []messages.PeerInstance
	Transport transport.Peer
	Store     persistence.Store
	Book      *Book
	Clock     clock.Clock
	Logger    *slog.Logger
	Metrics   *Metrics
	// HealthInterval (--health-interval), RegistryInterval
	// (--registry-interval), Timeout (--http-timeout, one call).
	HealthInterval, RegistryInterval, Timeout time.Duration
	// LocalHealth returns our own health document. It may read the store:
	// it is called off the actor's mailbox. (Our registry is Node and the
	// book's Local.)
	LocalHealth func() messages.Health
	// Publish receives a StateChanged for every committed transition (the
	// peers actor parks a gone peer's pending messages).
	Publish func(messages.StateChanged)
	// Queue builds the peer's forward queue, spawned as the child "forward".
	Queue func(peer string) *actor.Props
	// Gone: discovery no longer lists the peer, which called us (the peers
	// actor spawns such an actor on contact, at the instances discovery
	// last listed): the actor exists for the delivery_status reports owed
	// to the peer, which nothing else sends. It checks the peer's health,
	// and its queue sends only reports (PeerLink.Gone) while the peer is
	// healthy; it neither writes the peer's entry of the book (the peer
	// reads removed) nor exchanges registries, and it stops at its first
	// failed check (the peer's next call brings it back). The peer
	// discovered again gets an actor of its own instead (the peers actor
	// stops this one).
	Gone bool
	// Forget, when set, is told the peer's name when its actor stops
	// (the peer left discovery, a gone peer's actor ended, the node
	// stops): nothing calls the peer until an actor of it starts again,
	// so the transport drops what it keeps for it (its connections).
	Forget func(peer string)
}

// Validate reports what is missing or wrong.
func (c Config) Validate() error {
	var errs []error
	if c.Node == "" || c.Transport == nil || c.Store == nil || c.Book == nil ||
		c.Clock == nil || c.Logger == nil || c.Metrics == nil || c.LocalHealth == nil || c.Publish == nil || c.Queue == nil {
		errs = append(errs, errors.New("peer: Node, Transport, Store, Book, Clock, Logger, Metrics, LocalHealth, Publish and Queue are required"))
	}
	if c.HealthInterval <= 0 || c.RegistryInterval <= 0 || c.Timeout <= 0 {
		errs = append(errs, errors.New("peer: HealthInterval, RegistryInterval and Timeout must be positive"))
	}
	return errors.Join(errs...)
}

// recheck bounds how soon a failed forward leads to the next check.
const recheck = time.Second

// Private messages.
type (
	healthTick   struct{}
	registryTick struct{}
	checked      struct {
		addr     string
		identity *messages.Identity
		// other is the node that answered instead of the peer.
		other   string
		health  messages.Health
		latency time.Duration
		err     error
	}
	exchanged struct {
		addr string
		reg  messages.Registry
		err  error
	}
)

// Actor is the actor of one peer: it checks the peer's health every
// HealthInterval (two-way), exchanges registries with it every
// RegistryInterval while it is healthy, and opens or closes its forward
// queue. Build it with New.
type Actor struct {
	cfg    Config
	log    *slog.Logger
	health Health
	// entry writes our peer's entry of the book (from Started on).
	entry     *Entry
	instances []messages.PeerInstance
	// known is the peer's latest instances, shared by the actor's
	// incarnations: a restart starts from what discovery last said, not
	// from the instances it was spawned with.
	known    *[]messages.PeerInstance
	current  int
	identity *messages.Identity
	checking bool
	self     *actor.PID
	sys      *actor.ActorSystem
	queue    *actor.PID
	wake     *clock.Wakeup
	stopReg  func() bool
	exchange bool
	gone     bool
	// goneFailed counts a gone peer's failed checks in a row (observe).
	goneFailed int
	// elsewhere is the node last found answering at the peer's address
	// instead of it, until a check passes (answeredBy).
	elsewhere string
}

// New returns the producer of a peer actor.
func New(cfg Config) actor.Producer {
	known := &cfg.Instances // written and read on the actor's own goroutine only
	return func() actor.Actor {
		return &Actor{cfg: cfg, instances: *known, known: known, gone: cfg.Gone,
			log: cfg.Logger.With("component", "peer", "peer", cfg.Peer)}
	}
}

// Receive implements actor.Actor.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.self, a.sys = c.Self(), c.ActorSystem()
		a.wake = clock.NewWakeup(a.cfg.Clock, func(uint64) { a.sys.Root.Send(a.self, healthTick{}) })
		if !a.gone {
			a.entry = a.cfg.Book.Entry(a.cfg.Peer)
			a.entry.Discovered(a.instances)
			a.entry.SetHealth(&a.health)
		}
		q, err := c.SpawnNamed(a.cfg.Queue(a.cfg.Peer), "forward")
		if err != nil {
			panic(fmt.Errorf("peer %s: spawn forward queue: %w", a.cfg.Peer, err))
		}
		a.queue = q
		a.check(c)
		a.scheduleRegistry()
	case *actor.Restarting, *actor.Stopping:
		a.stop()
	case *actor.Stopped:
		// After its queue, the other caller of the peer, has stopped.
		if a.cfg.Forget != nil {
			a.cfg.Forget(a.cfg.Peer)
		}
	case healthTick:
		a.check(c)
	case registryTick:
		a.scheduleRegistry()
		if a.health.Healthy() && !a.gone {
			a.exchangeRegistry()
		}
	case *checked:
		a.checked(c, m)
	case *exchanged:
		a.exchanged(c, m)
	case *messages.PeerUp:
		a.setInstances(m.Instances)
	case messages.PeerContactFailed:
		a.failed(c, fmt.Errorf("request failed: %w", m.Err))
	case *messages.PeerContact:
		if !a.health.Healthy() {
			a.check(c)
		}
	case *messages.PeerRegistryFrom:
		if !a.gone { // a peer gone from discovery claims nothing
			a.learn(m.Frontends)
		}
	case *messages.KickPeer:
		c.Send(a.queue, m)
	}
}

// answeredBy notes which node answered a check of the peer's address
// instead of the peer ("" when the peer did, or nothing answered). When
// another node newly does, the address has changed hands since discovery
// last asked it (reused, or given back to its owner): discovery is asked
// to poll now, not a poll interval later, so that the peer is found where
// it is and the node at its address is known as itself. Once per change,
// so that a lasting mix-up costs no more than the regular polls. Not in
// gone mode: discovery lists the peer nowhere, so there is nothing of it
// to look at again (and such an actor is spawned at each of its calls).
func (a *Actor) answeredBy(c actor.Context, other string) {
	if other == a.elsewhere || a.gone {
		return
	}
	a.elsewhere = other
	if p := c.Parent(); other != "" && p != nil { // the peers actor passes it on
		a.log.Info("another node answers at the peer's address: asking discovery to look again", "addr", a.addr(), "answered", other)
		c.Send(p, &messages.PeerRediscover{})
	}
}

// failed counts a request to the peer that failed (or was answered by
// another node) as a failed check, and checks again soon. A request the
// peer refused (a 404 from a version without the call) may mean it
// changed version, and one another node answered that the peer is
// elsewhere: its identity is read again.
func (a *Actor) failed(c actor.Context, err error) {
	a.identity = nil
	a.observe(c, a.cfg.Clock.Now(), err)
	a.wake.Schedule(a.cfg.Clock.Now().Add(min(recheck, a.cfg.HealthInterval)))
}

func (a *Actor) stop() {
	if a.wake != nil {
		a.wake.Cancel()
	}
	if a.stopReg != nil {
		a.stopReg()
	}
}

func (a *Actor) scheduleRegistry() {
	if a.stopReg != nil {
		a.stopReg()
	}
	self, root := a.self, a.sys.Root
	a.stopReg = a.cfg.Clock.AfterFunc(a.cfg.RegistryInterval, func() { root.Send(self, registryTick{}) })
}

func (a *Actor) addr() string {
	if len(a.instances) == 0 {
		return ""
	}
	return a.instances[a.current%len(a.instances)].Address
}

func (a *Actor) setInstances(in []messages.PeerInstance) {
	if slices.Equal(in, a.instances) {
		return
	}
	cur := a.addr()
	a.instances = append([]messages.PeerInstance(nil), in...)
	*a.known = a.instances
	a.current = 0
	for i, inst := range a.instances {
		if inst.Address == cur {
			a.current = i
		}
	}
	if a.addr() != cur {
		a.identity = nil
	}
	a.entry.Discovered(a.instances)
	a.log.Info("peer instances changed", "instances", len(in))
}

// check runs one health check (with an identity call first when the
// instance's capabilities are not known: at the start, on another
// instance, and after a failed check or request) in its own goroutine.
func (a *Actor) check(c actor.Context) {
	a.wake.Schedule(a.cfg.Clock.Now().Add(a.cfg.HealthInterval))
	if a.checking {
		return
	}
	addr := a.addr()
	if addr == "" {
		return
	}
	a.checking = true
	needIdentity := a.identity == nil
	tr, timeout, clk := a.cfg.Transport, a.cfg.Timeout, a.cfg.Clock
	local := a.cfg.LocalHealth
	self, root, peerName := a.self, a.sys.Root, a.cfg.Peer
	go func() {
		res := &checked{addr: addr}
		doc := local()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if needIdentity {
			id, err := tr.Identity(ctx, addr)
			switch {
			case err != nil:
				res.err = fmt.Errorf("identity: %w", err)
			case id.Node != peerName:
				res.err, res.other = fmt.Errorf("identity: %s answers as %q", addr, id.Node), id.Node
			case id.Validate() != nil:
				res.err = fmt.Errorf("identity: %w", id.Validate())
			default:
				res.identity = &id
			}
		}
		if res.err == nil {
			start := clk.Now()
			res.health, res.err = tr.Health(ctx, transport.Target{Node: peerName, Addr: addr}, doc)
			res.latency = clk.Now().Sub(start)
			switch {
			case res.err != nil:
			case res.health.Node != peerName:
				res.err, res.other = fmt.Errorf("health: %s answers as %q", addr, res.health.Node), res.health.Node
			case res.health.Status != messages.HealthOK:
				res.err = fmt.Errorf("health: peer reports %q", res.health.Status)
			}
		}
		root.Send(self, res)
	}()
}

func (a *Actor) checked(c actor.Context, r *checked) {
	a.checking = false
	now := a.cfg.Clock.Now()
	if r.addr != a.addr() {
		// Discovery moved the peer while the check ran: it says nothing
		// of the instance now called. Check that one.
		a.check(c)
		return
	}
	a.answeredBy(c, r.other)
	if r.identity != nil {
		a.identity = r.identity
	}
	if r.err == nil && a.identity == nil {
		// A check made without the identity call (it was known) passed
		// after a failed request made the actor forget the identity:
		// made healthy now, the peer's link would announce no capability
		// and the queue fail every message that needs one for good
		// (peer_unsupported). Check again, with the identity call.
		a.check(c)
		return
	}
	if r.err == nil {
		if !a.gone { // a gone peer's series were removed
			a.cfg.Metrics.latency.WithLabelValues(a.cfg.Peer).Observe(r.latency.Seconds())
			if r.latency > SlowCheck {
				a.log.Warn("slow health check: degraded link", "addr", r.addr, "latency", r.latency)
			}
		}
	} else {
		// The peer may come back as another version (a rollback): its
		// capabilities are read again at the next check.
		a.identity = nil
		if len(a.instances) > 1 {
			a.current = (a.current + 1) % len(a.instances)
		}
	}
	a.observe(c, now, r.err)
}

// observe feeds the state machine and tells the queue, book and metrics.
// A gone peer's actor stops once each of its instances failed a check in
// a row: a site whose first instance is down is reached at another.
func (a *Actor) observe(c actor.Context, now time.Time, err error) {
	if a.gone && err != nil {
		if a.goneFailed++; a.goneFailed < len(a.instances) {
			a.check(c) // checked moved to the next instance
			return
		}
		// Debug: a peer that calls us but cannot be reached back would
		// log this at each of its calls.
		a.log.Debug("peer gone from discovery does not answer: its reports wait for its next call", "err", err)
		c.Stop(c.Self())
		return
	}
	if err == nil {
		a.goneFailed = 0
	}
	t, changed := a.health.Observe(now, err)
	if a.entry != nil {
		a.entry.SetHealth(&a.health)
	}
	if changed {
		attrs := []any{"from", t.From, "to", t.To, "addr", a.addr()}
		if err != nil {
			attrs = append(attrs, "err", err)
		}
		if t.To == messages.PeerHealthy {
			a.log.Info("peer state changed", attrs...)
		} else {
			a.log.Warn("peer state changed", attrs...)
		}
		if t.To == messages.PeerHealthy && !a.gone {
			// Learn its frontends now rather than a registry interval later.
			a.exchangeRegistry()
		}
	}
	link := messages.PeerLink{Healthy: a.health.Healthy(), Addr: a.addr(), Gone: a.gone}
	if a.identity != nil {
		link.ForwardBatch = a.identity.Has(messages.CapForwardBatch)
		link.StatusBatch = a.identity.Has(messages.CapStatusBatch)
		link.MessageFields = a.identity.Has(messages.CapMessageFields)
		link.TraceContext = a.identity.Has(messages.CapTraceContext)
		link.MessageClass = a.identity.Has(messages.CapMessageClass)
	}
	c.Send(a.queue, link)
}

func (a *Actor) exchangeRegistry() {
	if a.exchange {
		return
	}
	a.exchange = true
	reg := messages.Registry{Node: a.cfg.Node, Frontends: a.cfg.Book.Local()}
	tr, addr, timeout := a.cfg.Transport, a.addr(), a.cfg.Timeout
	self, root, peerName := a.self, a.sys.Root, a.cfg.Peer
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r, err := tr.Registry(ctx, transport.Target{Node: peerName, Addr: addr}, reg)
		root.Send(self, &exchanged{addr: addr, reg: r, err: err})
	}()
}

// exchanged takes a registry exchange's answer. One from another node (it
// refused the call as misdirected, or, of an earlier version, answered it)
// means the peer is not at the address called: that is a failed check, as
// the next health check would find, so that the queue stops sending there
// now rather than a health interval later.
func (a *Actor) exchanged(c actor.Context, m *exchanged) {
	if a.gone {
		return // it exchanges nothing: the answer to an actor before it
	}
	a.exchange = false
	var other error
	by := m.reg.Node
	switch {
	case transport.Misdirected(m.err):
		other, by = fmt.Errorf("registry: %s is another node: %w", m.addr, m.err), "(misdirected)"
	case m.err != nil:
		a.log.Warn("registry exchange failed", "err", m.err)
		return
	case m.reg.Node != a.cfg.Peer:
		other = fmt.Errorf("registry: %s answers as %q", m.addr, m.reg.Node)
	}
	if other != nil {
		a.log.Warn("registry answered by another node", "addr", m.addr, "err", other)
		if m.addr == a.addr() { // else discovery moved the peer meanwhile
			a.answeredBy(c, by)
			a.failed(c, other)
		}
		return
	}
	a.learn(m.reg.Frontends)
}

// learn stores and publishes the peer's frontends when they changed, and
// takes them from the peers not discovered now that still claim them
// (claim). An actor in gone mode has no entry of the book to write: it
// learns nothing.
func (a *Actor) learn(frontends []string) {
	if a.entry == nil {
		return
	}
	defer a.claim()
	frontends = sortedUnique(frontends)
	if known, ok := a.cfg.Book.Frontends(a.cfg.Peer); ok && slices.Equal(known, frontends) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Timeout)
	defer cancel()
	now := a.cfg.Clock.Now()
	if err := a.cfg.Store.PutPeerRegistry(ctx, persistence.PeerRegistry{Peer: a.cfg.Peer, Frontends: frontends, UpdatedAt: now}); err != nil {
		a.log.Error("storing the peer's registry failed; it is used but not kept", "err", err)
	}
	for _, f := range a.entry.SetRegistry(frontends) {
		a.log.Warn("frontend served by several peers; a discovered healthy one gets its messages, the first by name among equals", "frontend", f)
	}
	a.log.Info("peer registry learned", "frontends", frontends)
}

// claim drops the claims of the peers not discovered now (gone from
// discovery, or known only from a stored registry) on our peer's frontends
// (Entry.Claim), in the book and in the store, so that a frontend moved
// from a decommissioned site stays with its new one across restarts.
func (a *Actor) claim() {
	took := a.entry.Claim()
	if len(took) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Timeout)
	defer cancel()
	now := a.cfg.Clock.Now()
	for _, t := range took {
		if err := a.cfg.Store.PutPeerRegistry(ctx, persistence.PeerRegistry{Peer: t.Peer, Frontends: t.Left, UpdatedAt: now}); err != nil {
			a.log.Error("storing the registry of a peer whose frontends were taken failed; it keeps them after a restart",
				"from", t.Peer, "err", err)
		}
		a.log.Info("frontends taken from a peer not discovered now", "from", t.Peer, "frontends", t.Taken)
	}
}

// Metrics are the peers' metrics. Their states are read from the book at
// each scrape (StateCollector).
type Metrics struct {
	latency *prometheus.HistogramVec
}

// NewMetrics registers the peer metrics on reg: the health check latency,
// and the peer states of book.
func NewMetrics(reg prometheus.Registerer, book *Book) (*Metrics, error) {
	m := &Metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_federation_health_check_seconds",
			Help:    "Latency of passed health checks, by peer (a check over 2 s is logged as a degraded link).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2, 5},
		}, []string{"peer"}),
	}
	for _, c := range []prometheus.Collector{m.latency, &stateCollector{book: book, desc: stateDesc}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var stateDesc = prometheus.NewDesc("switchboard_peer_state",
	"1 on each peer's current state (unknown, healthy, degraded, unhealthy, removed); an address that never answered is its own peer until its name is learned.",
	[]string{"peer", "state"}, nil)

// stateCollector reports every peer of the book (as List shows them) at
// each scrape: the book is the one record of peer states, so the metric,
// /api/peers and the UI never disagree.
type stateCollector struct {
	book *Book
	desc *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

// Collect implements prometheus.Collector.
func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range s.book.List() {
		for _, st := range messages.AllPeerStates {
			v := 0.0
			if st == p.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, v, p.Node, string(st))
		}
	}
}

// forget removes a gone peer's series.
func (m *Metrics) forget(peer string) {
	m.latency.DeletePartialMatch(prometheus.Labels{"peer": peer})
}
