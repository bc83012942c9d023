// Package switchboard runs a Switchboard node: a store-and-forward message
// controller built as an actor system. cmd/node is a thin shell around it;
// programs that embed Switchboard use it directly:
//
//	cfg := switchboard.DefaultConfig()
//	cfg.Name, cfg.DataDir, cfg.Listen = "dc1", dir, "127.0.0.1:8443"
//	node, err := switchboard.New(cfg)
//	...
//	if err := node.Start(ctx); err != nil { ... }
//	defer node.Stop(context.Background())
//
// The node's actor tree:
//
//	node guardian (one-for-one, restart budget; exhausted -> Fatal)
//	├── frontends   one delivery worker per local frontend
//	├── inprocess   watches in-process frontends' actors; unregisters one that ends
//	├── intake      routing and group-committed acceptance
//	├── janitor     expiry of messages nobody claimed; forwards that waited too long
//	├── retention   purges messages past their retention (call records first)
//	├── peers       one actor per peer (health, registry), each with its forward queue
//	├── discovery   static peers or DNS SRV (only with federation)
//	├── ring        the site's ring: master or slave; its partitions fence every claim
//	└── ...         actors an embedder spawns with Node.Spawn
//
// See docs/embedding.md for spawning supervised actors, in-process frontends
// and state-change subscriptions.
package switchboard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/actors/delivery"
	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/actors/intake"
	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/actors/retention"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/actors/smppout"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/postgres"
	"github.com/switchboard-dev/switchboard/persistence/space"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
	"github.com/switchboard-dev/switchboard/smsc"
	"github.com/switchboard-dev/switchboard/supervision"
	"github.com/switchboard-dev/switchboard/supervision/ratelog"
	"github.com/switchboard-dev/switchboard/supervision/redact"
	"github.com/switchboard-dev/switchboard/telemetry"
	"github.com/switchboard-dev/switchboard/transport"
)

// Node is one running Switchboard node.
type Node struct {
	cfg      Config
	log      *slog.Logger
	clock    clock.Clock
	registry *prometheus.Registry
	// metrics registers the node's collectors on registry and keeps them,
	// so that a node on an embedder's Config.Registry takes them off it
	// when it stops (metrics.go).
	metrics *ownedMetrics

	store    persistence.Store
	ownStore bool
	// readSlots bound the API's reads of messages and of the audit trail
	// in flight on a Postgres store the node opened (gateway.slot): half
	// its pool, so that reads a lock holds up (LOCK TABLE, a long DDL)
	// cannot take every connection from the node's own work and its
	// readiness check. Nil: no bound (the embedded store, an embedder's).
	readSlots chan struct{}
	// serving is store once Start has succeeded, until Stop begins: the
	// gateway's reads (and Node.Store) load it, so that a read before
	// Start or after Stop answers unavailable instead of using a store
	// not opened (or closed), and a read racing Start sees it whole.
	serving atomic.Pointer[persistence.Store]
	// instanceStop ends the keeping of the instance lock, which releases
	// it and closes instanceDone (both nil without an elector; see
	// instance.go).
	instanceStop context.CancelFunc
	instanceDone chan struct{}

	stats *statsCache

	system       *actor.ActorSystem
	guardian     *supervision.Guardian
	supOpts      supervision.Options
	stopRestarts func()
	intake       *actor.PID
	frontends    *actor.PID
	actors       *delivery.Actors
	// smpp are the smpp frontends' clients (their binds to SMSCs).
	smpp *smppout.Clients
	// workersDown are the frontends whose delivery worker is down (its
	// restart budget used up) until its next one starts.
	workersDown delivery.Down
	// workers is frontends for the parts outside the actor tree that kick
	// the workers and start before them: the smpp clients' binds and the
	// bus's changes.
	workers later
	// board is where the workers offer to take new work at once, and the
	// intake hands it over (package handover).
	board *handover.Board
	// records is the call record file (nil without --cdr-file).
	records *retention.Records
	// space refuses new work while the store is short of room (space.go);
	// spaceWatch is set when the free space of the data directory is
	// read (the embedded store), spaceRead when it was last read.
	space      *space.Gate
	spaceWatch bool
	spaceRead  atomic.Int64

	// the delivery bus (see bus.go; nil without --nats-url)
	// bus is the delivery bus (nil without --nats-url): an atomic, since
	// an embedder's BusState may read it while Start or Stop sets it.
	bus   atomic.Pointer[bus.Bus]
	relay *bus.Relayer

	// the ring (see ring.go)
	ring        atomic.Pointer[actor.PID]
	shares      *ring.Shares
	roster      *ring.Roster
	ringMetrics *ring.Metrics

	// federation (see federation.go)
	book      *peer.Book
	peers     *actor.PID
	discovery *actor.PID
	// discoveryPID is discovery once spawned (after the peers actor,
	// which asks it for every peer again when it restarted).
	discoveryPID atomic.Pointer[actor.PID]
	transport    transport.Peer
	peerClient   *httpapi.PeerClient // ours to close; nil with Config.Transport
	warnMu       sync.Mutex
	warnStopped  bool
	stopWarning  func() bool // the pending hourly warning
	statusKick   atomic.Bool

	// creds are the credentials in force (access.go); watch checks them
	// and the TLS files every WatchInterval (reload.go).
	creds       *credentials
	watch       watcher
	watchLogMu  sync.Mutex
	watchLogged map[string]time.Time

	// tls is the node's certificate, key and CA, reloadable (tlsreload.go).
	tls *certs.Reloader
	// dirLock is the embedded store's lock, taken by lockDataDir before
	// anything is written in the data directory and handed to the store
	// by openStore (nil from then on).
	dirLock *sqlite.Lock

	// telemetry pushes metrics and spans over OTLP (telemetry.go);
	// tracing is nil when no span is made.
	telemetry *telemetry.Telemetry
	tracing   *telemetry.Tracing

	// gw is the node as its listeners see it, and the embedding API's
	// calls of the same names (backend.go).
	gw         *gateway
	api        *httpapi.Server
	https      *http.Server
	metricsSrv *http.Server
	// httpsLn and metricsLn are bound by bind before the store opens and
	// served by startHTTP (nil once served); httpsTLS is httpsLn's
	// configuration.
	httpsLn, metricsLn net.Listener
	httpsTLS           *tls.Config
	addr               string
	maddr              string
	// givenLn is Config.Listener from Start on, until bind takes it: the
	// node owns it then, and a Start that fails before bind closes it as
	// one that fails after does.
	givenLn net.Listener
	// the SMPP listener (smpp.go): smppLn is bound by bind and served by
	// startSMPP (nil once served); saddr is its address.
	smppLn    net.Listener
	smppIn    *smsc.Server
	saddr     string
	serveErrs chan error

	// failures logs each message that ends failed or forward_failed, at a
	// bounded rate (see publish).
	failures *ratelog.Log
	// subPanics logs the panics of Subscribe callbacks, at a bounded rate
	// (a callback that panics on every event would flood the log).
	subPanics *ratelog.Log
	// notAccepted logs the connections the HTTP listeners could not
	// accept, at a bounded rate (httpErrors).
	notAccepted *ratelog.Log
	// events and timeline are the UI's live chart (timeline.go).
	events          eventCounts
	timeline        timeline
	timelineMu      sync.Mutex
	timelineStopped bool
	stopTimeline    func() bool

	ready atomic.Bool
	// gathering is set once Start has set everything up, and stays set: the
	// OTLP push gathers the registry only from then on (telemetry.go).
	gathering atomic.Bool
	// supervised is set once Start has set supOpts, and stays set: Props
	// reads supOpts only then (embed.go).
	supervised atomic.Bool
	inflight   atomic.Int64 // submits waiting for the intake (admission control)
	stopping   chan struct{}

	// mu guards the lifecycle below, never held while Start or Stop
	// waits: a Stop during Start cancels it (cancelStart) and waits for
	// it to return (startDone) within its own ctx.
	mu          sync.Mutex
	started     bool
	stopped     bool
	running     bool                    // Start succeeded: Stop tears the node down
	cancelStart context.CancelCauseFunc // ends the ctx of the Start under way
	startDone   chan struct{}           // closed when Start has returned
	stopDone    chan struct{}           // closed when the first Stop is done

	fatal     chan error
	fatalOnce sync.Once

	// subscribers of state changes (Subscribe), copied on write
	subMu  sync.Mutex
	subSeq uint64
	subs   atomic.Pointer[map[uint64]func(messages.StateChanged)]
}

// The rate of the "message failed" log lines: a burst of failures (a
// frontend rejecting everything, a peer gone for good) logs its first 20 a
// minute one by one and then a count, instead of a line per message.
const (
	failureLogBurst  = 20
	failureLogWindow = time.Minute
)

// The node's own children of the guardian.
const (
	actorFrontends = "frontends"
	actorInProcess = "inprocess"
	actorIntake    = "intake"
	actorJanitor   = "janitor"
	actorRetention = "retention"
)

func isNodeActor(name string) bool {
	switch name {
	case actorFrontends, actorInProcess, actorIntake, actorJanitor, actorRetention, actorPeers, actorDiscovery, actorRing:
		return true
	}
	return false
}

// checkActorName refuses a name Spawn and StopActor cannot take: one of
// the node's own actors, or a name holding "/". protoactor names a child
// "<parent>/<child>" in one flat registry, so "frontends/gw#1" is the
// name the delivery supervisor gives gw's worker: spawned first, it left
// that worker unable to start, and the node failed. Any "/" is refused,
// not only under the node's names: "gw/link" would take the place of a
// child of the embedder's own "gw" the same way.
func checkActorName(name string) error {
	if isNodeActor(name) {
		return fmt.Errorf("switchboard: %q is the name of one of the node's own actors", name)
	}
	if first, _, ok := strings.Cut(name, "/"); ok {
		if isNodeActor(first) {
			return fmt.Errorf("switchboard: %q is under the name of one of the node's own actors (%q): a name holds no \"/\"", name, first)
		}
		return fmt.Errorf("switchboard: %q holds a \"/\": it would be the name of a child of actor %q", name, first)
	}
	return nil
}

// New validates cfg and prepares a node; nothing runs until Start.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:      cfg,
		log:      cfg.Logger,
		clock:    cfg.Clock,
		registry: cfg.Registry,
		actors:   &delivery.Actors{},
		board:    handover.NewBoard(),
		stopping: make(chan struct{}),
		fatal:    make(chan error, 1),
	}
	n.gw = &gateway{n}
	n.subs.Store(&map[uint64]func(messages.StateChanged){})
	if n.log == nil {
		n.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Redact == RedactOn {
		n.log = slog.New(redact.NewHandler(n.log.Handler()))
	}
	n.log = n.log.With("node", cfg.Name)
	if n.clock == nil {
		n.clock = clock.Real{}
	}
	var err error
	if n.failures, err = ratelog.New(ratelog.Config{Logger: n.log, Level: slog.LevelWarn,
		Msg: "message failed", Summary: "message failures not logged one by one",
		Burst: failureLogBurst, Window: failureLogWindow, Now: n.clock.Now, AfterFunc: n.clock.AfterFunc}); err != nil {
		return nil, err
	}
	if n.subPanics, err = ratelog.New(ratelog.Config{Logger: n.log.With("component", "subscribe"), Level: slog.LevelError,
		Msg: "state change subscriber panicked", Summary: "subscriber panics not logged one by one",
		Burst: failureLogBurst, Window: failureLogWindow, Now: n.clock.Now, AfterFunc: n.clock.AfterFunc}); err != nil {
		return nil, err
	}
	if n.notAccepted, err = ratelog.New(ratelog.Config{Logger: n.log.With("component", "http"), Level: slog.LevelWarn,
		Msg: "http connection not accepted", Summary: "http connections not accepted not logged one by one",
		Burst: 10, Window: time.Minute, Now: n.clock.Now, AfterFunc: n.clock.AfterFunc}); err != nil {
		return nil, err
	}
	if n.registry == nil {
		n.registry = prometheus.NewRegistry()
		n.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	n.metrics = &ownedMetrics{Registerer: n.registry, release: cfg.Registry != nil}
	return n, nil
}

// ErrStopped is Start's error on a node that Stop was called on: a node is
// started once, and a stopped one (Stop before Start included) is never
// started again; build a new one with New.
var ErrStopped = errors.New("switchboard: node stopped: a node is started once, build a new one with New")

// Start opens the store, starts the actors and the listeners. It returns once
// the node serves. A node is started at most once, and never after Stop
// (ErrStopped).
//
// A Stop called while Start runs ends Start's ctx (the steps that wait,
// such as connecting to Postgres, give up) and Start returns an error
// that wraps ErrStopped, once it has undone what it did.
func (n *Node) Start(ctx context.Context) (err error) {
	n.mu.Lock()
	if n.stopped {
		never := !n.started
		n.mu.Unlock()
		if never && n.cfg.Listener != nil {
			n.cfg.Listener.Close() // ours from Start on, as for any failed Start
		}
		return ErrStopped
	}
	if n.started {
		n.mu.Unlock()
		return errors.New("switchboard: node already started")
	}
	n.started = true
	n.givenLn = n.cfg.Listener
	ctx, cancel := context.WithCancelCause(ctx)
	n.cancelStart, n.startDone = cancel, make(chan struct{})
	n.mu.Unlock()
	defer func() {
		cancel(nil)
		close(n.startDone)
	}()
	err = n.start(ctx)
	n.mu.Lock()
	if err == nil && n.stopped {
		err = ErrStopped // Stop came once the last step was done
	}
	if err == nil {
		n.running = true
		n.serving.Store(&n.store)
		n.ready.Store(true)
	}
	n.mu.Unlock()
	if err != nil {
		if errors.Is(context.Cause(ctx), ErrStopped) && !errors.Is(err, ErrStopped) {
			err = fmt.Errorf("%w: stopped while starting: %w", ErrStopped, err)
		}
		n.teardown(context.Background())
	}
	return err
}

// start is Start's work: it ends with the node ready to serve, and Start
// opens it to callers (ready) unless a Stop came meanwhile.
func (n *Node) start(ctx context.Context) error {
	// The data directory's lock first: a process refused it (another
	// node runs on the directory) changes nothing there, the self-signed
	// certificate that bind makes included.
	if err := n.lockDataDir(); err != nil {
		return err
	}
	// Then the listeners: a port that is taken (or a certificate that
	// does not load) stops the start before the store is opened and
	// migrated.
	if err := n.bind(); err != nil {
		return err
	}
	if err := n.openStore(ctx); err != nil {
		return err
	}
	if err := n.claimInstance(ctx); err != nil {
		return err
	}
	if err := n.checkClock(ctx); err != nil {
		return err
	}
	if err := n.prepareStore(ctx); err != nil {
		return err
	}
	n.creds = &credentials{n: n}
	if err := n.creds.load(ctx, "start"); err != nil {
		return err
	}
	if err := n.startSpace(); err != nil {
		return err
	}
	if err := n.startTelemetry(ctx); err != nil {
		return err
	}
	if err := n.startActors(ctx); err != nil {
		return err
	}
	if n.sharedStore() {
		if err := n.seedRoster(ctx); err != nil { // before the first submit can come
			return err
		}
	}
	if err := n.startHTTP(); err != nil {
		return err
	}
	if err := n.startSMPP(); err != nil {
		return err
	}
	if err := n.startRing(); err != nil {
		return err
	}
	n.startTimeline()
	n.startWatch()
	n.gathering.Store(true)
	return nil
}

// lockDataDir takes the embedded store's lock (sqlite.TakeLock, which
// makes the data directory when missing), which openStore hands to the
// store. A node on Postgres or Config.Store has no such lock.
func (n *Node) lockDataDir() error {
	if n.cfg.Store != nil || n.cfg.Postgres != "" {
		return nil
	}
	if n.cfg.TLSCert == "" {
		// 0700 rather than the store's 0750: it holds the self-signed
		// certificate's key (certs.EnsureSelfSigned makes it so too).
		if err := os.MkdirAll(n.cfg.DataDir, 0o700); err != nil {
			return field.Wrap("DataDir", err)
		}
	}
	l, err := sqlite.TakeLock(n.storePath())
	if err != nil {
		return field.Wrap("DataDir", err)
	}
	n.dirLock = l
	return nil
}

// storePath is the embedded store's database file.
func (n *Node) storePath() string { return filepath.Join(n.cfg.DataDir, "switchboard.db") }

func (n *Node) openStore(ctx context.Context) error {
	// The gate before the store: the node's own store tells it of every
	// write that finds no room (noSpace), from its first call.
	n.space = space.NewGate(n.cfg.MinFreeSpace)
	if n.cfg.Store != nil {
		n.store = n.cfg.Store
	} else if n.cfg.Postgres != "" {
		pc := postgres.DefaultConfig()
		pc.DSN, pc.Logger, pc.OnNoSpace = n.cfg.Postgres, n.log, n.noSpace
		// The instance first: the server keeps 63 bytes of the name.
		pc.ApplicationName = "switchboard " + n.cfg.InstanceID + " of " + n.cfg.Name
		s, err := postgres.Open(ctx, pc)
		if err != nil {
			return field.Wrap("Postgres", err)
		}
		n.store, n.ownStore = s, true
		n.readSlots = make(chan struct{}, max(1, s.PoolSize()/2))
	} else {
		sc := sqlite.DefaultConfig()
		sc.Path, sc.Logger, sc.OnNoSpace, sc.Lock = n.storePath(), n.log, n.noSpace, n.dirLock
		n.dirLock = nil // the store's now, whether it opens or not
		// A failed fsync stops the store: what is on disk is not known
		// until a restart reads it back, so the node stops too.
		sc.OnFatal = func(err error) { n.onFatal("store", err) }
		s, err := sqlite.Open(ctx, sc)
		if err != nil {
			return field.Wrap("DataDir", err)
		}
		n.store, n.ownStore = s, true
	}
	// The peer book (federation.go) is made with the stats that fill its
	// queue depths, and before prepareStore sets our registry in it.
	n.book = peer.NewBook()
	n.stats = newStatsCache(n.store, n.clock, time.Second, siteLabels(n.cfg.Name), n.peerNames, func(st persistence.Stats) {
		if n.book != nil {
			n.book.SetQueueDepths(st.ForwardQueue)
		}
	})
	return n.metrics.Register(n.stats)
}

// flagsActor is the audit trail's actor of the changes --route and
// --frontend make at start (the entry's remote is the flag).
const flagsActor = "flags"

// prepareStore takes back this instance's leases from its previous run and
// applies the routes and webhooks given as flags.
//
// The flags are the configuration and win: each route or frontend they
// name is written as they say. None is overwritten in silence: one the
// store held otherwise (changed through the API since, or by an earlier
// version of the flags) is logged at warn with the stored and the flag's
// value, and one the store lacked at info; each write is in the audit
// trail as the API's (route.put, frontend.put), its actor flagsActor. Entries the flags do not name
// are left as they are. A frontend whose delivery bus consumer would be a
// stored one's (bus.OwnConsumer) fails the start before any is written,
// as PUT /api/frontends refuses it (two flags of one consumer are
// refused by Config.Validate).
func (n *Node) prepareStore(ctx context.Context) error {
	released, err := n.store.ReleaseLeases(ctx, n.cfg.InstanceID)
	if err != nil {
		return fmt.Errorf("release leases of the previous run: %w", err)
	}
	if released > 0 {
		n.log.Info("took back leases of the previous run", "instance_id", n.cfg.InstanceID, "leases", released)
	}
	now := n.clock.Now()
	fes, err := n.store.Frontends(ctx)
	if err != nil {
		return fmt.Errorf("read frontends: %w", err)
	}
	stored := map[string]messages.Frontend{}
	storedNames := make([]string, 0, len(fes))
	for _, f := range fes {
		stored[f.Name] = f
		storedNames = append(storedNames, f.Name)
	}
	for _, w := range n.cfg.Webhooks {
		if err := bus.OwnConsumer(w.Name, storedNames); err != nil {
			return field.Errorf("Webhooks", "%w", err)
		}
	}
	for _, w := range n.cfg.Webhooks {
		fe, err := w.Frontend()
		if err != nil {
			return field.Errorf("Webhooks", "%s: %w", w.Name, err)
		}
		f, ok := stored[w.Name]
		switch {
		case ok && f.Mode == fe.Mode && f.URL == fe.URL && (fe.Secret == "" || fe.Secret == f.Secret):
			continue
		case ok:
			n.log.Warn("--frontend overwrites the stored frontend (the flags win; a change made through the API is lost)",
				"name", w.Name, "flag_url", messages.RedactURL(fe.URL), "stored_mode", f.Mode, "stored_url", messages.RedactURL(f.URL))
		default:
			n.log.Info("frontend registered from --frontend", "name", w.Name, "url", messages.RedactURL(fe.URL))
		}
		// A secret set through the API stays when the flag names none (an
		// smpp URL's password is one).
		if fe.Secret == "" {
			fe.Secret = f.Secret
		}
		fe.CreatedAt, fe.UpdatedAt = now, now
		if err := n.store.PutFrontend(ctx, fe); err != nil {
			return field.Errorf("Webhooks", "%s: %w", w.Name, err)
		}
		n.audit(ctx, messages.AuditEntry{At: now, Actor: flagsActor, Remote: "--frontend", Action: messages.AuditFrontendPut,
			Target: fe.Name, Detail: httpapi.FrontendAuditDetail(fe)})
		stored[w.Name] = fe
	}
	names := make([]string, 0, len(stored))
	for name := range stored {
		names = append(names, name)
	}
	sort.Strings(names)
	// The registry peers learn from us is right from the first exchange,
	// before the intake has loaded the directory (an empty one would make
	// a peer refuse our destinations until the next exchange).
	n.book.SetLocal(names)
	routes, err := n.store.Routes(ctx)
	if err != nil {
		return fmt.Errorf("read routes: %w", err)
	}
	routed := map[string]string{}
	for _, r := range routes {
		routed[r.Prefix] = r.Frontend
	}
	for _, r := range n.cfg.Routes {
		fe, ok := routed[r.Prefix]
		switch {
		case ok && fe == r.Frontend:
			continue
		case ok:
			n.log.Warn("--route overwrites the stored route (the flags win; a change made through the API is lost)",
				"prefix", r.Prefix, "flag_frontend", r.Frontend, "stored_frontend", fe)
		default:
			n.log.Info("route created from --route", "prefix", r.Prefix, "frontend", r.Frontend)
		}
		if _, ok := stored[r.Frontend]; !ok {
			n.log.Warn("route names a frontend that is not registered yet; its destinations get no_route until it registers",
				"prefix", r.Prefix, "frontend", r.Frontend)
		}
		route := messages.Route{Prefix: r.Prefix, Frontend: r.Frontend, UpdatedAt: now}
		if err := n.store.PutRoute(ctx, route); err != nil {
			return field.Errorf("Routes", "%s=%s: %w", r.Prefix, r.Frontend, err)
		}
		n.audit(ctx, messages.AuditEntry{At: now, Actor: flagsActor, Remote: "--route", Action: messages.AuditRoutePut,
			Target: r.Prefix, Detail: httpapi.RouteAuditDetail(route)})
	}
	return nil
}

// commitDepth is how many of the intake's group commits may be out at once
// on a store of this kind (intake.Config.CommitDepth): 2 on Postgres, whose
// transactions run side by side on the server (one commits while the next
// runs); 1 on the embedded store. Measured against 3 on Postgres (cmd/bench
// postgres-site, 4 alternating pairs): a third commit out only made the
// batches smaller on a server that is busy anyway; 2 moved 8-60% more
// through one instance and 8-41% more through a site of three.
func commitDepth(kind string) int {
	if kind == "postgres" {
		return 2
	}
	return 1
}

func (n *Node) startActors(startCtx context.Context) error {
	alog := n.log.With("lib", "protoactor")
	opts := []actor.ConfigOption{actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return alog })}
	if n.cfg.DeadLetterThrottle > 0 {
		opts = append(opts, actor.WithDeadLetterThrottleInterval(n.cfg.DeadLetterThrottle))
	}
	n.system = actor.NewActorSystem(opts...)
	supMetrics, err := supervision.NewMetrics(n.metrics)
	if err != nil {
		return err
	}
	delMetrics, err := delivery.NewMetrics(n.metrics, &n.workersDown)
	if err != nil {
		return err
	}
	n.stopRestarts = supervision.WatchRestarts(n.system, supMetrics, n.log.With("component", "supervision"))
	n.supOpts = supervision.Options{Logger: n.log, Metrics: supMetrics, Budget: supervision.DefaultBudget()}
	n.supervised.Store(true)
	n.guardian, err = supervision.SpawnGuardian(n.system, supervision.GuardianOptions{
		Logger: n.log, Metrics: supMetrics, Budget: supervision.DefaultBudget(), OnFatal: n.onFatal,
	})
	if err != nil {
		return err
	}
	if err := n.newShares(); err != nil {
		return err
	}
	if err := n.startBus(); err != nil {
		return err
	}
	if err := n.newSMPPClients(); err != nil {
		return err
	}
	deps := &delivery.Deps{
		SMPP:  n.smpp,
		Down:  &n.workersDown,
		Bus:   n.bus.Load(),
		Fence: n.shares, Leader: n.shares,
		Owner: n.cfg.InstanceID, Store: n.store, Clock: n.clock, Logger: n.log, Metrics: delMetrics,
		Policy: delivery.Policy{
			RetryMin: n.cfg.DeliveryRetryMin, RetryMax: n.cfg.DeliveryRetryMax,
			MaxAttempts: n.cfg.DeliveryMaxAttempts, Validity: n.cfg.MessageValidity,
		},
		Publish:     n.publish,
		Actors:      n.actors,
		Board:       n.board,
		Tracing:     n.tracing,
		SendTimeout: n.cfg.WebhookTimeout,
		Seed:        uint64(n.clock.Now().UnixNano()),
		Props:       func(kind string, p actor.Producer) *actor.Props { return supervision.Props(kind, p, n.supOpts) },
		// Messages queued for a peer while federation was on still fail in
		// time if it is turned off.
		ForwardMaxWait: n.forwardPolicy().MaxWait(),
		ForwardSweep:   n.cfg.ForwardRetryInterval,
	}
	if deps.HTTPClient, err = n.webhookClient(); err != nil {
		return err
	}
	sup, err := delivery.NewSupervisor(deps)
	if err != nil {
		return err
	}
	if n.frontends, err = n.guardian.Spawn(actorFrontends, "frontends", sup); err != nil {
		return err
	}
	n.workers.set(n.system, n.frontends)
	// After the workers, whom it kicks; so it stops before them, and after
	// the embedder's actors, whose ends during the stop it still sees.
	inproc, err := n.guardian.Spawn(actorInProcess, "inprocess", delivery.NewWatcher(n.actors, n.actorEnded))
	if err != nil {
		return err
	}
	n.actors.OnChange(func() { n.system.Root.Send(inproc, &delivery.Rewatch{}) })
	// Peers before the intake, so that a stop (in reverse order) ends
	// intake first and the forward queues last.
	ctx, cancel := context.WithTimeout(startCtx, 30*time.Second)
	defer cancel()
	if err := n.loadBook(ctx); err != nil {
		return err
	}
	if err := n.parkPendingForwards(ctx); err != nil {
		return err
	}
	if err := n.startFederation(); err != nil {
		return err
	}
	n.intake, err = n.guardian.Spawn(actorIntake, "intake", intake.NewIntake(intake.Config{
		Node: n.cfg.Name, Store: n.store, Clock: n.clock, Logger: n.log,
		Frontends: n.frontends, Peers: n.peers, Remote: n.remote(), Local: n.book,
		Publish: n.publish, Shared: n.sharedStore(), Owner: n.cfg.InstanceID, Board: n.board,
		CommitDepth: commitDepth(n.store.Kind()), Tracing: n.tracing,
		NewID: func() string { return uuid.Must(uuid.NewV7()).String() },
		Relay: n.intakeRelay(),
		// A peer's forward the site does not take now is answered
		// unavailable (not site_capability_missing, which a peer of an
		// earlier version would take for a permanent refusal): the peer
		// retries it, and it is taken once the site is upgraded.
		Site: func(o messages.Options) error { return n.siteRefusal(o, messages.CodeUnavailable) },
	}))
	if err != nil {
		return err
	}
	jan, err := delivery.NewJanitor(deps)
	if err != nil {
		return err
	}
	if _, err = n.guardian.Spawn(actorJanitor, "janitor", jan); err != nil {
		return err
	}
	if err := n.startRetention(); err != nil {
		return err
	}
	return n.startDiscovery()
}

// startRetention starts the cleaner (it purges on the ring's master only).
func (n *Node) startRetention() error {
	m, err := retention.NewMetrics(n.metrics)
	if err != nil {
		return err
	}
	if n.cfg.CDRFile != "" {
		if n.records, err = retention.OpenRecords(n.cfg.CDRFile, n.cfg.CDRRotateBytes); err != nil {
			return field.Wrap("CDRFile", err)
		}
	}
	policy := retention.Policy{Retention: n.cfg.Retention, RetentionFailed: n.cfg.RetentionFailed, AuditRetention: n.cfg.AuditRetention}
	if n.cfg.RetentionFailed > 0 {
		policy.ForwardedAfter = n.cfg.MessageValidity + n.cfg.RetentionFailed
	}
	p, err := retention.NewCleaner(retention.Config{
		Node: n.cfg.Name, Store: n.store, Clock: n.clock, Logger: n.log, Policy: policy, Records: n.records,
		Metrics: m, Leader: n.shares, Seed: uint64(n.clock.Now().UnixNano()), Short: n.shortOfSpace,
	})
	if err != nil {
		return err
	}
	_, err = n.guardian.Spawn(actorRetention, "retention", p)
	return err
}

// webhookClient is the keep-alive client of webhook deliveries; it trusts
// the system roots plus --tls-ca.
func (n *Node) webhookClient() (*http.Client, error) {
	tc, err := certs.ClientConfig("", "", n.cfg.TLSCA, false)
	if err != nil {
		return nil, field.Wrap("TLSCA", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	if n.cfg.Dial != nil {
		tr.DialContext, tr.Proxy = n.cfg.Dial, nil
	}
	tr.MaxIdleConnsPerHost = 64 // one per in-flight delivery and then some
	return &http.Client{Transport: tr}, nil
}

// bind opens the listeners (and loads the HTTPS certificate, making the
// self-signed one when none is given); startHTTP serves them.
func (n *Node) bind() error {
	if n.cfg.Listen != "" || n.givenLn != nil {
		ln := n.givenLn
		n.givenLn = nil // closed from here with httpsLn, or below
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", n.cfg.Listen); err != nil {
				return field.Wrap("Listen", err)
			}
		}
		tc, err := n.serverTLS()
		if err != nil {
			ln.Close()
			return err
		}
		n.addr, n.httpsLn = ln.Addr().String(), tls.NewListener(ln, tc)
		n.httpsTLS = tc
		if err := n.metrics.Register(newCertExpiry(n)); err != nil {
			return err
		}
	}
	if n.cfg.MetricsListen != "" {
		ln, err := net.Listen("tcp", n.cfg.MetricsListen)
		if err != nil {
			return field.Wrap("MetricsListen", err)
		}
		n.maddr, n.metricsLn = ln.Addr().String(), ln
	}
	return n.bindSMPP()
}

func (n *Node) startHTTP() error {
	var err error
	hc := httpapi.Config{Backend: n.gw, Ring: n.gw, Credentials: n.creds, Now: n.clock.Now, Logger: n.log,
		RequireClientCert: n.cfg.TLSCA != "", Tracing: n.tracing}
	if n.tls != nil && n.cfg.TLSCA != "" {
		// A peer cut off by a reloaded CA bundle is refused on the
		// connections it opened before too.
		hc.ClientCAs = n.tls.Pool
	}
	n.api, err = httpapi.New(hc)
	if err != nil {
		return err
	}
	n.serveErrs = make(chan error, 2)
	if ln := n.httpsLn; ln != nil {
		n.httpsLn = nil // served: the server closes it
		unasked := &newConns{}
		var h http.Handler = n.api
		if n.cfg.Intercept != nil {
			h = n.cfg.Intercept(h)
		}
		n.https = &http.Server{
			Handler:           h,
			TLSConfig:         n.httpsTLS,
			ReadHeaderTimeout: 10 * time.Second,
			MaxHeaderBytes:    maxHeaderBytes,
			IdleTimeout:       2 * time.Minute,
			// HTTP/1.1 only: on these loads keep-alive HTTP/1.1 serves about
			// twice the requests of HTTP/2 per connection (docs/performance.md).
			TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
			ErrorLog:     n.httpErrors("https"),
			// Carries the stop to the reading of request bodies: the
			// stop does not wait for a body that may never come.
			BaseContext: n.api.BaseContext,
			ConnState:   unasked.track,
		}
		n.https.RegisterOnShutdown(unasked.close)
		go n.serve("https", func() error { return n.https.Serve(ln) })
	}
	if ln := n.metricsLn; ln != nil {
		n.metricsLn = nil
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(n.registry, promhttp.HandlerOpts{}))
		n.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: metricsWait, WriteTimeout: metricsWait, IdleTimeout: metricsIdle, MaxHeaderBytes: maxHeaderBytes,
			ErrorLog: n.httpErrors("metrics")}
		go n.serve("metrics", func() error { return n.metricsSrv.Serve(ln) })
	}
	return nil
}

// The metrics listener's bounds (tests shorten them): metricsWait on a
// request, its body's reading and its answer's writing (a scrape of the
// whole registry takes milliseconds; Prometheus gives up after 10 s by
// default), metricsIdle on a connection kept alive between scrapes (past
// the usual 15 s to 1 min interval). It bounded the headers alone: a
// connection left idle, or a body that never came, was held for ever.
var (
	metricsWait = 30 * time.Second
	metricsIdle = 2 * time.Minute
)

// maxHeaderBytes bounds a request's headers on both listeners (431
// beyond): a token, a traceparent and a federation call's headers take
// under a kilobyte. net/http's default, 1 MiB, let a client without a
// token make the node hold a megabyte and more for each connection it
// kept sending headers on, for the 10 s of ReadHeaderTimeout.
const maxHeaderBytes = 64 << 10

// serverTLS is the HTTPS listener's TLS configuration: --tls-cert and
// --tls-key, or a self-signed development certificate in the data dir,
// as the node's TLS material holds them at each handshake (tlsreload.go).
func (n *Node) serverTLS() (*tls.Config, error) {
	r, err := n.tlsMaterial()
	if err != nil {
		return nil, err
	}
	return r.ServerConfig(), nil
}

// newConns are the HTTPS connections on which no request has begun
// (http.StateNew: in their TLS handshake, or nothing sent yet: a
// load balancer's or a scanner's connection, a client's preconnect). The
// server's Shutdown takes such a connection for idle, and closes it, only
// once it is 5 s old, so one of them held every stop for up to 5 s, past
// a --shutdown-timeout below that. The stop closes them at once
// (RegisterOnShutdown, once the listener is closed): nothing was asked on
// them, or a request whose headers were just read is refused (its body
// is no longer read: httpapi's Stopping came first) and nothing was done
// for it.
type newConns struct{ m sync.Map }

// track is the server's ConnState hook.
func (c *newConns) track(conn net.Conn, st http.ConnState) {
	if st == http.StateNew {
		c.m.Store(conn, struct{}{})
	} else if st != http.StateIdle { // idle comes after active, which took it out
		c.m.Delete(conn)
	}
}

// close closes the connections on which no request has begun.
func (c *newConns) close() {
	c.m.Range(func(conn, _ any) bool {
		_ = conn.(net.Conn).Close()
		return true
	})
}

// httpErrors is the ErrorLog of the HTTP server of listener (https or
// metrics). A connection net/http could not accept (the process out of
// file descriptors, which it tries again after a pause of up to 1 s) is
// logged "http connection not accepted" at warn, at most 10 a minute, as
// the SMPP listener's are: the HTTPS listener's were at debug, unseen, and
// the metrics listener's at info once a second for as long as it lasted.
// The rest (handshakes that failed: scanners, probes) stays at debug.
func (n *Node) httpErrors(listener string) *log.Logger {
	return log.New(httpErrorLog{listener: listener, notAccepted: n.notAccepted,
		debug: n.log.With("component", listener)}, "", 0)
}

type httpErrorLog struct {
	listener    string
	notAccepted *ratelog.Log
	debug       *slog.Logger
}

func (h httpErrorLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	if err, ok := strings.CutPrefix(line, "http: Accept error: "); ok {
		h.notAccepted.Write("listener", h.listener, "err", err)
	} else {
		h.debug.Debug(line)
	}
	return len(p), nil
}

// serve runs a listener; its unexpected end is fatal for the node.
func (n *Node) serve(name string, run func() error) {
	if err := run(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		n.onFatal(name, err)
	}
}

// ErrConfig is (under errors.Is) the error of a node whose configuration
// cannot work, found only once it runs (Validate finds every other): an
// auto ring instance that found another master and has no way to call it
// (no TLSCA). Fatal delivers it; no restart helps until the configuration
// changes, and the command exits 2 for it, as for a refused flag.
var ErrConfig = errors.New("switchboard: the configuration cannot work")

// configError is an error of the configuration: errors.Is(err, ErrConfig).
type configError struct{ error }

func (e configError) Unwrap() error      { return e.error }
func (configError) Is(target error) bool { return target == ErrConfig }

func (n *Node) onFatal(child string, reason error) {
	n.ready.Store(false)
	n.fatalOnce.Do(func() {
		err := fmt.Errorf("%s: %w", child, reason)
		n.log.Error("node cannot go on", "part", child, "err", reason)
		n.fatal <- err
	})
}

// Stop stops accepting, lets in-flight requests and commits finish (within
// ctx and at most Config.ShutdownTimeout), stops the actors leaves first and
// closes the store. It may be called once; later calls return nil. A node
// is not started after Stop (Stop before Start included): Start returns
// ErrStopped.
//
// A Stop while Start runs cancels that Start, which undoes what it did,
// and returns once it has (nil), or when ctx ends first (its error; the
// Start goes on undoing on its own goroutine).
func (n *Node) Stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ShutdownTimeout)
	defer cancel()
	n.mu.Lock()
	if n.stopped {
		// Stopped already: by a Stop, or by its Start's failure. Either
		// may still be undoing: a failed Start tears down before it
		// returns, and a Stop that ran out of time left the cancelled
		// Start undoing. Return once both are done (a nil channel: no
		// Start, or no Stop, to wait for).
		startDone, stopDone := n.startDone, n.stopDone
		n.mu.Unlock()
		for _, done := range []chan struct{}{startDone, stopDone} {
			if done != nil && !await(ctx, done) {
				return fmt.Errorf("switchboard: stop: waiting for the stop under way: %w", context.Cause(ctx))
			}
		}
		return nil
	}
	n.stopped = true // a later Start refuses: the owner stopped it
	n.stopDone = make(chan struct{})
	defer close(n.stopDone)
	started, startDone := n.started, n.startDone
	if started {
		n.cancelStart(ErrStopped)
	}
	n.mu.Unlock()
	if !started {
		return nil
	}
	if !await(ctx, startDone) {
		return fmt.Errorf("switchboard: stop: the start under way did not end in time: %w", context.Cause(ctx))
	}
	n.mu.Lock()
	running := n.running
	n.mu.Unlock()
	if !running { // the Start failed, or gave up for this Stop: it undid what it did
		return nil
	}
	return n.teardown(ctx)
}

// await waits for done within ctx, and reports whether it is closed. A
// done already closed wins over a ctx already ended: an abrupt stop (a
// ctx cancelled before Stop) of a node that started long ago still
// tears it down.
func await(ctx context.Context, done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
	}
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// teardown undoes whatever Start did, in reverse. It runs once: in Start
// when it fails, in Stop when it succeeded.
func (n *Node) teardown(ctx context.Context) error {
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.ready.Store(false)
	n.serving.Store(nil)
	close(n.stopping) // long-polls answer at once
	if n.smpp != nil {
		// A client that closes from now on (its worker stopped) gives the
		// store what is left of ctx for the receipts it answered.
		n.smpp.Stopping(ctx)
	}
	var errs []error
	if n.https != nil {
		// No new connections; requests under way (submits waiting for their
		// commit) finish, but for those still reading their body: a client
		// that stopped sending (a peer cut off mid-forward) would hold the
		// stop for the body's 30 s, past --shutdown-timeout's default, and
		// leave the drain of the delivery workers no time.
		n.api.Stopping()
		if err := n.https.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("https shutdown: %w", err))
		}
	}
	if err := n.stopSMPP(ctx); err != nil {
		errs = append(errs, err)
	}
	if n.frontends != nil {
		// A supervisor already gone (its budget exhausted: the node
		// failed) drains nothing and never answers: not waited for.
		gone := n.guardian.Ended(n.frontends)
		done, abandon := make(chan struct{}), make(chan struct{})
		n.system.Root.Send(n.frontends, &messages.Drain{Done: done, Abandon: abandon})
		select {
		case <-done:
		case <-gone:
			n.log.Warn("delivery workers not drained: their supervisor is gone")
		case <-ctx.Done():
			errs = append(errs, errors.New("delivery workers did not drain in time"))
		}
		close(abandon)
	}
	n.stopWarnings()
	if n.guardian != nil {
		if err := n.guardian.StopAll(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop actors: %w", err))
		}
	}
	if n.stopRestarts != nil {
		n.stopRestarts()
	}
	if n.smpp != nil {
		n.smpp.Close() // those the stopped workers left (none, as a rule): each unbinds
	}
	n.stopBus()
	if n.peerClient != nil {
		n.peerClient.Close()
	}
	if n.system != nil {
		n.system.Shutdown()
	}
	if n.metricsSrv != nil {
		if err := n.metricsSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("metrics shutdown: %w", err))
		}
	}
	// Listeners bound but never served (a start that failed after bind),
	// and Config.Listener when the start failed before bind took it.
	for _, ln := range []net.Listener{n.givenLn, n.httpsLn, n.metricsLn} {
		if ln != nil {
			ln.Close()
		}
	}
	n.endTimeline()
	n.watch.stop()
	n.failures.Close()
	n.subPanics.Close()
	n.notAccepted.Close()
	if n.api != nil {
		n.api.Close()
	}
	n.releaseInstance()
	// The last push, after the actors' last spans and with the metrics as
	// the stop left them. Not bound by ctx, which a drain that ran out of
	// time has already used up: Shutdown bounds it (ShutdownFlush).
	if err := n.telemetry.Shutdown(context.WithoutCancel(ctx)); err != nil {
		n.log.Warn("last otlp push failed", "err", err)
	}
	if n.records != nil {
		if err := n.records.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close call records: %w", err))
		}
	}
	if n.ownStore && n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
	}
	_ = n.dirLock.Close()  // a start that failed before openStore
	n.metrics.unregister() // after the last push, which read them
	return errors.Join(errs...)
}

// Fatal delivers an error when the node cannot go on (an actor exhausted its
// restart budget, a listener died); the owner should Stop it and exit
// non-zero.
func (n *Node) Fatal() <-chan error { return n.fatal }

// Addr is the HTTPS listener's address once started ("" when none).
func (n *Node) Addr() string { return n.addr }

// MetricsAddr is the metrics listener's address once started ("" when none).
func (n *Node) MetricsAddr() string { return n.maddr }

// Handler is the HTTPS API as an http.Handler (nil before Start), for
// embedders that serve it themselves.
func (n *Node) Handler() http.Handler {
	if !n.gathering.Load() || n.api == nil { // gathering: Start has set n.api
		return nil
	}
	return n.api
}

// Registry is the registry the node's metrics are on.
func (n *Node) Registry() *prometheus.Registry { return n.registry }

// Store is the node's store (nil before Start and once Stop began). Writes
// must go through the node's API, never directly.
func (n *Node) Store() persistence.Store {
	if s := n.serving.Load(); s != nil {
		return *s
	}
	return nil
}

// newSMPPClients makes the registry of the smpp frontends' clients: each
// client's bind kicks its worker, its submit rate is this instance's
// share of the frontend's, the share of the ring's delivery work it holds,
// and it waits --webhook-timeout for its dial, its bind and each
// submit_sm_resp (docs/smpp.md).
func (n *Node) newSMPPClients() error {
	m, err := smppout.NewMetrics(n.metrics)
	if err != nil {
		return err
	}
	n.smpp = smppout.NewClients(smppout.Config{
		Store: n.store, Clock: n.clock, Logger: n.log, Metrics: m, Seed: uint64(n.clock.Now().UnixNano()),
		ResponseTimeout: n.cfg.WebhookTimeout, ReceiptWait: n.cfg.SMPPReceiptWait, Fence: n.shares,
		Reconnect: ring.Reconnect{MaxAttempts: 1, Min: n.cfg.SMPPReconnectMin, Max: n.cfg.SMPPReconnectMax, Jitter: 0.5},
		Workers:   &n.workers,
	})
	return nil
}

// later is the address of an actor that parts of the node outside the
// actor tree signal, and that is spawned after them (the smpp clients'
// binds and the bus's changes kick the delivery workers' supervisor): its
// PID is read at each send, and what is sent while it is not set is
// dropped (the actor reads the state at its start).
type later struct {
	sys *actor.ActorSystem
	pid atomic.Pointer[actor.PID]
}

// set makes pid of sys the address.
func (l *later) set(sys *actor.ActorSystem, pid *actor.PID) {
	l.sys = sys
	l.pid.Store(pid)
}

// Send sends msg to the actor, once it is set.
func (l *later) Send(msg any) {
	if pid := l.pid.Load(); pid != nil {
		l.sys.Root.Send(pid, msg)
	}
}
