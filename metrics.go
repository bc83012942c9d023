package switchboard

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// statsCache serves the store's counts to /api/status and to scrapes, at
// most one read per ttl, so that a busy dashboard cannot load the store.
type statsCache struct {
	store persistence.Store
	// clock is the node's: the outbox's age is measured on it.
	clock clock.Clock
	ttl   time.Duration
	// peers lists the peers whose forward queue depth is reported even
	// when empty.
	peers func() []string
	// fresh, when set, is told each count read from the store (the peer
	// book keeps the forward queue depths from it).
	fresh func(persistence.Stats)

	mu   sync.Mutex
	at   time.Time
	last persistence.Stats
	// due is the store's OldestDue when last read: since when the oldest
	// work due and not being done has waited (zero: none waits).
	due time.Time

	messages *prometheus.Desc
	outbox   *prometheus.Desc
	dlq      *prometheus.Desc
	oldest   *prometheus.Desc
	fwdQueue *prometheus.Desc
	bytes    *prometheus.Desc
}

// siteLabels are the constant labels of the site-wide gauges, those every
// instance of a site reports with the whole site's value (the store's
// counts, the bus's): node, the node's name (--name), which the instances
// of a site share. A site's value is their max by node over its instances,
// never their sum (docs/metrics.md).
func siteLabels(node string) prometheus.Labels {
	return prometheus.Labels{"node": node}
}

func newStatsCache(s persistence.Store, clk clock.Clock, ttl time.Duration, site prometheus.Labels, peers func() []string, fresh func(persistence.Stats)) *statsCache {
	return &statsCache{
		store: s,
		clock: clk,
		ttl:   ttl,
		peers: peers,
		fresh: fresh,
		fwdQueue: prometheus.NewDesc("switchboard_forward_queue_depth",
			"Forward work waiting for each peer (queued or about to be sent), in the whole store.", []string{"peer"}, site),
		messages: prometheus.NewDesc("switchboard_messages", "Messages in the whole store by state.", []string{"state"}, site),
		outbox:   prometheus.NewDesc("switchboard_outbox_depth", "Outbox rows (deliveries, forwards and status reports) not yet done, in the whole store.", nil, site),
		dlq:      prometheus.NewDesc("switchboard_dlq_depth", "Dead-lettered messages (state failed) waiting for an operator, in the whole store.", nil, site),
		oldest: prometheus.NewDesc("switchboard_outbox_oldest_age_seconds",
			"How long the oldest outbox work that is due and not being done (not leased) has waited since it fell due, in the whole store; 0 when none waits.", nil, site),
		bytes: prometheus.NewDesc("switchboard_store_bytes",
			"Size of the store on disk: the embedded database and its write-ahead log, or the node's Postgres schema with its indexes.", nil, site),
	}
}

// get returns counts no older than ttl.
func (c *statsCache) get(ctx context.Context) (persistence.Stats, error) {
	st, _, err := c.read(ctx)
	return st, err
}

// read returns counts and the oldest due time no older than ttl. The ttl
// is wall-clock: the cache is about load on the store, not about message
// time; what is due is read at the node's time.
func (c *statsCache) read(ctx context.Context) (persistence.Stats, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.ttl {
		return c.last, c.due, nil
	}
	st, err := c.store.Stats(ctx)
	if err != nil {
		return st, time.Time{}, err
	}
	due, err := c.store.OldestDue(ctx, c.clock.Now())
	if err != nil {
		return st, time.Time{}, err
	}
	c.at, c.last, c.due = time.Now(), st, due
	if c.fresh != nil {
		c.fresh(st)
	}
	return st, due, nil
}

// Describe implements prometheus.Collector.
func (c *statsCache) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.messages
	ch <- c.outbox
	ch <- c.dlq
	ch <- c.oldest
	ch <- c.fwdQueue
	ch <- c.bytes
}

// Collect implements prometheus.Collector. When the store does not answer
// the gauges are left out of the scrape (their absence is the alert).
func (c *statsCache) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, due, err := c.read(ctx)
	if err != nil {
		return
	}
	for _, s := range messages.AllStates {
		ch <- prometheus.MustNewConstMetric(c.messages, prometheus.GaugeValue, float64(st.ByState[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.outbox, prometheus.GaugeValue, float64(st.OutboxDepth))
	ch <- prometheus.MustNewConstMetric(c.dlq, prometheus.GaugeValue, float64(st.DLQDepth))
	age := 0.0
	if !due.IsZero() {
		age = max(c.clock.Now().Sub(due).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(st.StoreBytes))
	depth := map[string]int64{}
	for _, p := range c.peers() {
		depth[p] = 0
	}
	for p, v := range st.ForwardQueue {
		depth[p] = v
	}
	for p, v := range depth {
		ch <- prometheus.MustNewConstMetric(c.fwdQueue, prometheus.GaugeValue, float64(v), p)
	}
}

// ownedMetrics is the registerer every collector of a node goes through.
// It keeps what it registered, so that a node on an embedder's
// Config.Registry (release) takes its collectors off it when it stops or
// its Start fails: the registry can then carry the next node (a restart
// in the same process), which would otherwise fail its Start with a
// duplicate registration. A registry the node made itself keeps them:
// Node.Registry still reads the final values after Stop.
type ownedMetrics struct {
	prometheus.Registerer
	release bool

	mu  sync.Mutex
	own []prometheus.Collector
}

// Register registers c and keeps it.
func (o *ownedMetrics) Register(c prometheus.Collector) error {
	if err := o.Registerer.Register(c); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.own = append(o.own, c)
	return nil
}

// MustRegister is Register, panicking on an error.
func (o *ownedMetrics) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := o.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister unregisters c and forgets it.
func (o *ownedMetrics) Unregister(c prometheus.Collector) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i := slices.Index(o.own, c); i >= 0 {
		o.own = slices.Delete(o.own, i, i+1)
	}
	return o.Registerer.Unregister(c)
}

// unregister takes every collector kept off an embedder's registry.
func (o *ownedMetrics) unregister() {
	if !o.release {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.own {
		o.Registerer.Unregister(c)
	}
	o.own = nil
}
