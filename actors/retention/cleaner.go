package retention

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/persistence"
)

// DefaultCountCap bounds the count of eligible messages a pass starts
// with: 10,000,000; beyond it switchboard_retention_eligible reads the cap
// (the backlog is at least that large, which is what its alert needs).
const DefaultCountCap = 10_000_000

// Config is what the cleaner needs.
type Config struct {
	// Node is this node's name, in the call records.
	Node   string
	Store  persistence.Store
	Clock  clock.Clock
	Logger *slog.Logger
	Policy Policy
	// Pacer sizes the batches (DefaultPacer when zero).
	Pacer Pacer
	// Records, when set, gets each message's record before it is purged.
	Records *Records
	Metrics *Metrics
	// Leader tells whether this instance purges now: the ring's master
	// (*ring.Shares); nil: always.
	Leader ring.Leader
	// Seed seeds the pauses' jitter.
	Seed uint64
	// StoreTimeout bounds one batch's store calls (zero:
	// persistence.CallTimeout).
	StoreTimeout time.Duration
	// CountCap bounds the count of eligible messages at the start of a
	// pass (zero: DefaultCountCap).
	CountCap int
	// Short, when set, tells whether the node is short of space (it
	// refuses new work for want of it). While it is, the store's compact
	// gives back all it can (Store.Compact's short), step after step, and
	// passes come at least every ShortInterval: the space the cleaner
	// frees reaches the file system within seconds, not a step of 8 MiB
	// an interval (a minute at the day-long defaults).
	Short func() bool
}

// ShortInterval is the longest pause between passes while the node is
// short of space (Config.Short).
const ShortInterval = time.Second

// shortSteps bounds the compact steps of one upkeep while the node is
// short of space: 64 of at most 8 MiB each on the embedded store, a
// few milliseconds of its writer each; the next upkeep, ShortInterval
// later, goes on.
const shortSteps = 64

// Validate reports what is missing.
func (c Config) Validate() error {
	if c.Store == nil || c.Clock == nil || c.Logger == nil || c.Metrics == nil {
		return errors.New("retention: Store, Clock, Logger and Metrics are required")
	}
	return nil
}

// errorEvery is how often a failing cleaner logs: the first failure at
// once, then at most one line in this long, with how many were not logged.
const errorEvery = time.Minute

// Cleaner is the cleaner's actor: the shell of a Pacer and a Policy.
type Cleaner struct {
	cfg    Config
	log    *slog.Logger
	pacer  Pacer
	rng    *rand.Rand
	wake   *clock.Wakeup
	inPass bool
	// passAt is when the pass under way started: the next one starts an
	// interval after it, so that passes come every interval however long
	// each took (a pass that takes longer is followed at once).
	passAt time.Time
	// compactedAt is when the store's compact last ran.
	compactedAt time.Time
	// eligible is what the pass counted, less what it purged since.
	eligible int64
	// failures not logged since lastLogged.
	unlogged   int
	lastLogged time.Time
}

type wakeMsg struct{}

// NewCleaner returns the producer of the cleaner.
func NewCleaner(cfg Config) (actor.Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Pacer.Max == 0 {
		cfg.Pacer = DefaultPacer()
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = persistence.CallTimeout
	}
	if cfg.CountCap <= 0 {
		cfg.CountCap = DefaultCountCap
	}
	return func() actor.Actor {
		return &Cleaner{cfg: cfg, log: cfg.Logger.With("component", "retention"), pacer: cfg.Pacer,
			rng: rand.New(rand.NewPCG(cfg.Seed, 0x7265746e))}
	}, nil
}

// Receive implements actor.Actor.
func (c *Cleaner) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		self, sys := ctx.Self(), ctx.ActorSystem()
		c.wake = clock.NewWakeup(c.cfg.Clock, func(uint64) { sys.Root.Send(self, wakeMsg{}) })
		c.wake.Schedule(c.cfg.Clock.Now())
	case *actor.Restarting, *actor.Stopping:
		c.wake.Cancel()
	case wakeMsg:
		c.woke()
	}
}

// woke runs what is due: the next batch of the pass under way, or a new
// pass. It asks Leader each time, before every batch and not only at a
// pass's start: an instance that is no longer the master must stop at
// once, since the new master purges (and writes call records) meanwhile,
// and a backlog's pass can go on for hours.
func (c *Cleaner) woke() {
	now := c.cfg.Clock.Now()
	if c.cfg.Leader != nil && !c.cfg.Leader.Master() {
		c.inPass = false
		c.eligible = 0
		c.cfg.Metrics.eligible.Set(0)
		c.wake.Schedule(now.Add(min(c.cfg.Policy.Interval(), time.Second))) // this instance may lead soon
		return
	}
	if c.inPass {
		c.batch()
	} else {
		c.pass()
	}
}

// pass starts a pass: count what is eligible, then the first batch.
func (c *Cleaner) pass() {
	now := c.cfg.Clock.Now()
	interval := c.interval()
	req, ok := c.cfg.Policy.Request(now, c.cfg.CountCap)
	if !ok {
		// Everything is kept forever: nothing to purge, but the store's
		// upkeep goes on (Postgres folds its counters' deltas).
		c.upkeep()
		c.wake.Schedule(now.Add(interval))
		return
	}
	sctx, cancel := context.WithTimeout(context.Background(), c.cfg.StoreTimeout)
	n, err := c.cfg.Store.CountPurgeable(sctx, req)
	cancel()
	if err != nil {
		c.failed("count", err)
		c.wake.Schedule(now.Add(c.cfg.Pacer.Backoff))
		return
	}
	c.eligible = n
	c.cfg.Metrics.eligible.Set(float64(n))
	if n == 0 {
		c.upkeep()
		c.wake.Schedule(now.Add(interval))
		return
	}
	c.pacer.Pass(n, interval)
	c.inPass, c.passAt = true, now
	c.batch()
}

// batch purges one batch and schedules what comes next.
func (c *Cleaner) batch() {
	start := c.cfg.Clock.Now()
	asked := c.pacer.Batch()
	req, _ := c.cfg.Policy.Request(start, asked)
	found, purged, err := c.purge(req)
	took := c.cfg.Clock.Now().Sub(start)
	for _, p := range purged {
		c.cfg.Metrics.purged.WithLabelValues(string(p.State)).Inc()
	}
	c.eligible = max(0, c.eligible-int64(len(purged)))
	c.cfg.Metrics.eligible.Set(float64(c.eligible))
	if err != nil {
		c.failed("purge", err)
	}
	pause, more := c.pacer.Done(asked, found, took, err != nil, c.rng)
	now := c.cfg.Clock.Now()
	if more {
		// A pass through a large backlog lasts hours: the store's compact
		// (Postgres folds its counters' deltas, which every count sums)
		// runs an interval apart within it too, not only at its end.
		if !now.Before(later(c.compactedAt, c.passAt).Add(c.interval())) {
			c.compact()
		}
		c.wake.Schedule(now.Add(pause))
		return
	}
	// The pass is over: its batch came back short, or failed. A failure
	// that lasts (call records that cannot be written) must not hold the
	// cleaner in one pass: each new pass counts again (the eligible gauge
	// grows with the backlog, which its alert needs), asks Leader, and
	// runs the upkeep (Postgres folds its counters' deltas). The next pass
	// comes an interval after this one started, and after a failure not
	// before the pacer's backoff: a pass counts up to CountCap rows, too
	// much to repeat every backoff while the failure lasts. Short of space
	// the interval is ShortInterval, except after a failure: a full disk
	// is when call records cannot be written, and a count every backoff
	// would free nothing.
	c.inPass = false
	c.upkeep()
	next := c.interval()
	if err != nil {
		next = c.cfg.Policy.Interval()
	}
	c.wake.Schedule(later(c.passAt.Add(next), now.Add(pause)))
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// purge runs one batch: with call records, the batch is read whole, its
// records written and synced, then purged by id; without, purged at once.
// found is how many candidates the batch had (it tells the pacer whether
// more are left), purged what went.
func (c *Cleaner) purge(req persistence.PurgeRequest) (found int, purged []persistence.Purged, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.StoreTimeout)
	defer cancel()
	if c.cfg.Records == nil {
		purged, err = c.cfg.Store.Purge(ctx, req, nil)
		return len(purged), purged, err
	}
	msgs, err := c.cfg.Store.Purgeable(ctx, req)
	if err != nil || len(msgs) == 0 {
		return 0, nil, err
	}
	recs := make([]Record, len(msgs))
	ids := make([]string, len(msgs))
	req.Seen = make(map[string]int, len(msgs))
	for i, m := range msgs {
		recs[i], ids[i] = RecordOf(c.cfg.Node, m, req.Now), m.ID
		req.Seen[m.ID] = len(m.History) // a message changed since its record was read is kept
	}
	// A batch split across a rotation may fail after its first records
	// are synced: those messages go, the others wait for the next pass.
	n, err := c.cfg.Records.Append(recs, req.Now)
	if n == 0 {
		return len(msgs), nil, err
	}
	purged, perr := c.cfg.Store.Purge(ctx, req, ids[:n])
	return len(msgs), purged, errors.Join(err, perr)
}

// upkeep ends a pass: the audit trail's own purge, then compact.
func (c *Cleaner) upkeep() {
	c.purgeAudit()
	c.compact()
}

// auditBatch bounds one purge of the audit trail, and auditBatches the
// purges of one pass: the trail grows by the changes people make, a few
// thousand a day at most, so this catches up with any backlog in a few
// passes without holding the store.
const (
	auditBatch   = 1000
	auditBatches = 10
)

// purgeAudit deletes the audit entries older than the policy's
// AuditRetention (none when it is 0).
func (c *Cleaner) purgeAudit() {
	keep := c.cfg.Policy.AuditRetention
	if keep <= 0 {
		return
	}
	before := c.cfg.Clock.Now().Add(-keep)
	var total int64
	for range auditBatches {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.StoreTimeout)
		n, err := c.cfg.Store.PurgeAudit(ctx, before, auditBatch)
		cancel()
		if err != nil {
			c.failed("purge audit", err)
			break
		}
		total += n
		if n < auditBatch {
			break
		}
	}
	if total > 0 {
		c.log.Info("audit entries purged", "entries", total, "older_than", before)
	}
}

// compact gives space back after a pass (and within a long one): one
// step, or, while the node is short of space, steps until nothing more
// comes back (at most shortSteps).
func (c *Cleaner) compact() {
	c.compactedAt = c.cfg.Clock.Now()
	short := c.short()
	var total int64
	for range shortSteps {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.StoreTimeout)
		freed, err := c.cfg.Store.Compact(ctx, short)
		cancel()
		if err != nil {
			c.failed("compact", err)
			break
		}
		if total += freed; !short || freed == 0 {
			break
		}
	}
	if total > 0 {
		c.log.Debug("space given back", "bytes", total, "short_of_space", short)
	}
}

// short tells whether the node is short of space (Config.Short).
func (c *Cleaner) short() bool { return c.cfg.Short != nil && c.cfg.Short() }

// interval is the pause between passes: the policy's, at most
// ShortInterval while the node is short of space.
func (c *Cleaner) interval() time.Duration {
	if c.short() {
		return min(c.cfg.Policy.Interval(), ShortInterval)
	}
	return c.cfg.Policy.Interval()
}

// failed logs a failure of op, the first at once and then at most one line
// a minute (with the count of those not logged).
func (c *Cleaner) failed(op string, err error) {
	now := c.cfg.Clock.Now()
	if !c.lastLogged.IsZero() && now.Sub(c.lastLogged) < errorEvery {
		c.unlogged++
		return
	}
	c.log.Warn("retention cleaner failed; it tries again", "op", op, "err", err, "failures_not_logged", c.unlogged)
	c.lastLogged, c.unlogged = now, 0
}
