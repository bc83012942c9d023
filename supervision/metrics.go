package supervision

import (
	"errors"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
)

// unknownKind labels a restart of an actor that was not built by Props (so its
// kind is not known), e.g. a library's own actor.
const unknownKind = "unknown"

// receiveBuckets span 10 µs (an in-memory state change) to 10 s (a receive
// stuck behind a slow fsync or a peer call that should have been async), in
// 1-5 steps so that the boundaries read well on a dashboard.
var receiveBuckets = []float64{
	10e-6, 50e-6,
	100e-6, 500e-6,
	1e-3, 5e-3,
	10e-3, 50e-3,
	100e-3, 500e-3,
	1, 5,
	10,
}

// Metrics are the actor metrics of docs/metrics.md, labelled by actor kind (a
// low-cardinality name such as "peer" or "intake", never a per-instance name).
// One Metrics serves any number of actor systems; it is safe for concurrent use.
//
// It also keeps the registries the metrics need: the live mailboxes per kind
// (for switchboard_actor_mailbox_depth) and the kind of every live actor built
// by Props (so that WatchRestarts can attribute a restart to a kind).
type Metrics struct {
	messages *prometheus.CounterVec
	receive  *prometheus.HistogramVec
	restarts *prometheus.CounterVec
	depth    *prometheus.Desc

	mu sync.Mutex
	// kinds holds every kind Props was called with, so that a kind with no live
	// actor reports depth 0 instead of vanishing from the scrape.
	kinds     map[string]struct{}
	mailboxes map[*mailboxTracker]struct{}
	actors    map[actorKey]string
}

// actorKey identifies an actor across actor systems: every local system has
// the address "nonhost", so a PID alone is ambiguous when several nodes run in
// one process (the sim harness).
type actorKey struct {
	system string
	id     string
}

// NewMetrics registers the actor metrics on reg:
//
//	switchboard_actor_messages_total{kind}    counter: messages received (lifecycle messages included)
//	switchboard_actor_receive_seconds{kind}   histogram: time spent in Receive
//	switchboard_actor_mailbox_depth{kind}     gauge: user messages waiting, summed over live actors
//	switchboard_actor_restarts_total{kind}    counter: restarts applied by a supervisor
//
// On error nothing stays registered.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("supervision: nil prometheus.Registerer")
	}
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_actor_messages_total",
			Help: "Messages received by actors, lifecycle messages included, by actor kind.",
		}, []string{"kind"}),
		receive: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_actor_receive_seconds",
			Help:    "Time actors spent handling one message, by actor kind.",
			Buckets: receiveBuckets,
		}, []string{"kind"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_actor_restarts_total",
			Help: "Actor restarts applied by a supervisor after a panic, by actor kind.",
		}, []string{"kind"}),
		depth: prometheus.NewDesc("switchboard_actor_mailbox_depth",
			"User messages waiting in the mailboxes of live actors, summed by actor kind.",
			[]string{"kind"}, nil),
		kinds:     make(map[string]struct{}),
		mailboxes: make(map[*mailboxTracker]struct{}),
		actors:    make(map[actorKey]string),
	}
	collectors := []prometheus.Collector{m.messages, m.receive, m.restarts, depthCollector{m}}
	for i, c := range collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range collectors[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("supervision: register actor metrics: %w", err)
		}
	}
	return m, nil
}

// addKind makes kind's series exist from the start (rate() and absent() then
// behave), and remembers it for the depth gauge.
func (m *Metrics) addKind(kind string) {
	m.messages.WithLabelValues(kind)
	m.receive.WithLabelValues(kind)
	m.restarts.WithLabelValues(kind)
	m.mu.Lock()
	m.kinds[kind] = struct{}{}
	m.mu.Unlock()
}

func (m *Metrics) actorStarted(system *actor.ActorSystem, pid *actor.PID, kind string) {
	m.mu.Lock()
	m.actors[actorKey{system.ID, pid.Id}] = kind
	m.mu.Unlock()
}

func (m *Metrics) actorStopped(system *actor.ActorSystem, pid *actor.PID) {
	m.mu.Lock()
	delete(m.actors, actorKey{system.ID, pid.Id})
	m.mu.Unlock()
}

// kindOf returns the kind of a live actor built by Props, or "unknown".
func (m *Metrics) kindOf(system *actor.ActorSystem, pid *actor.PID) string {
	if m == nil || pid == nil {
		return unknownKind
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if kind, ok := m.actors[actorKey{system.ID, pid.Id}]; ok {
		return kind
	}
	return unknownKind
}

func (m *Metrics) countRestart(kind string) {
	if m != nil {
		m.restarts.WithLabelValues(kind).Inc()
	}
}

// mailboxProducer returns an unbounded mailbox that Metrics tracks while its
// actor lives.
//
// Why not count posts and receives in a MailboxMiddleware: the mailbox does not
// call MessageReceived for a message whose Receive panicked, and a stopped
// actor's queue is simply dropped, so such a counter drifts upward with every
// panic and every stop. The mailbox's own UserMessageCount is decremented
// before the message is invoked, so reading it at scrape time is exact.
func (m *Metrics) mailboxProducer(kind string) actor.MailboxProducer {
	return func() actor.Mailbox {
		t := &mailboxTracker{metrics: m, kind: kind}
		t.mailbox = actor.Unbounded(t)()
		return t.mailbox
	}
}

// mailboxTracker is the MailboxMiddleware of one mailbox: it adds the mailbox
// to the live set when the mailbox starts and removes it when its actor
// receives *actor.Stop.
type mailboxTracker struct {
	metrics *Metrics
	kind    string
	mailbox actor.Mailbox
	state   trackerState // guarded by metrics.mu
}

type trackerState int

const (
	trackerNew trackerState = iota
	trackerLive
	trackerGone
)

var _ actor.MailboxMiddleware = (*mailboxTracker)(nil)

// MailboxStarted is called by the spawner only once the PID is registered, so
// a spawn that fails (name taken) never enters the live set.
func (t *mailboxTracker) MailboxStarted() {
	m := t.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	// The actor runs on another goroutine as soon as Started is posted, which
	// is before MailboxStarted: it may already have stopped itself.
	if t.state == trackerNew {
		t.state = trackerLive
		m.mailboxes[t] = struct{}{}
	}
}

func (t *mailboxTracker) MessagePosted(any) {}

// MessageReceived sees system messages too. *actor.Stop is the point of no
// return for the queue: the stopping actor never processes its user messages
// (Stop drops them; Poison drains them BEFORE Stop is sent). Restarts keep the
// same mailbox and are not seen here.
func (t *mailboxTracker) MessageReceived(msg any) {
	if _, ok := msg.(*actor.Stop); !ok {
		return
	}
	m := t.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mailboxes, t)
	t.state = trackerGone
}

func (t *mailboxTracker) MailboxEmpty() {}

// depthCollector computes switchboard_actor_mailbox_depth at scrape time.
type depthCollector struct {
	m *Metrics
}

func (c depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.depth
}

func (c depthCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	depth := make(map[string]int, len(m.kinds))
	for kind := range m.kinds {
		depth[kind] = 0
	}
	for t := range m.mailboxes {
		// The count is incremented after the push, so a concurrent pop can
		// make it -1 for an instant.
		depth[t.kind] += max(t.mailbox.UserMessageCount(), 0)
	}
	m.mu.Unlock()
	for kind, n := range depth {
		ch <- prometheus.MustNewConstMetric(m.depth, prometheus.GaugeValue, float64(n), kind)
	}
}
