package bus

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Relayer is the relay's shell: one goroutine that takes unrelayed
// delivery rows from the store (RelayWork marks them as it takes them, so
// each instance's relay gets rows no other relay has), publishes them,
// gives back those the stream did not take, and reports the lag. The
// intake kicks it after each commit of unrelayed delivery work; it also
// sweeps every RelaySweep for work other instances left behind, and looks
// when the earliest unrelayed work not yet due falls due (scheduled work
// and retries: the store gives the relay only work that is due, so that
// no consumer holds work early, naked, in its ack-pending). It waits
// while the bus is down (the rows wait in the outbox, and are relayed
// when it returns).
//
// The hot path skips the take: while Ready, the intake writes its new
// delivery work marked relayed (persistence.NewMessage.Publish) and hands
// the rows to Publish after the commit; the relay publishes them first,
// before any round, and gives back (Unrelay) those the stream did not
// take.
type Relayer struct {
	bus   *Bus
	store persistence.Store
	clock clock.Clock
	core  Relay
	rng   *rand.Rand
	// publishes follows the publishes' failures (the run goroutine's): it
	// logs them and degrades the bus after Config.DegradeAfter in a row.
	publishes Publishes

	// lagAt is when the lag was last read (at most every lagEvery).
	lagAt time.Time
	// again is set by Again: the next round first marks the site's relayed
	// delivery rows not relayed, from the row after againAfter (where an
	// interrupted marking goes on).
	again      atomic.Bool
	againAfter int64

	// mu guards queued (rows committed marked relayed, to publish) and
	// stopped (set once the relay gave back what was queued as it
	// stopped: what comes later is given back at once).
	mu      sync.Mutex
	queued  []persistence.Relay
	stopped bool

	// kick makes a round due (unrelayed work was committed); queue only
	// wakes the loop for the queued rows: they need no round.
	kick  chan struct{}
	queue chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// StartRelay starts the relay of b's work from store.
func StartRelay(b *Bus, store persistence.Store, clk clock.Clock, seed uint64) *Relayer {
	r := &Relayer{
		bus: b, store: store, clock: clk, rng: rand.New(rand.NewPCG(seed, 0x72656c6179)),
		core:      Relay{Batch: b.cfg.RelayBatch, Sweep: b.cfg.RelaySweep, RetryMin: 100 * time.Millisecond, RetryMax: 5 * time.Second},
		publishes: Publishes{DegradeAfter: b.cfg.DegradeAfter},
		kick:      make(chan struct{}, 1), queue: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	r.core.Kick()    // work written before the start (or while the bus was off) waits
	b.relay.Store(r) // the bus's changes kick it
	go r.run()
	return r
}

// queueCap is how many rows Publish holds before Ready says no: beyond
// it, new work is written unrelayed and taken by rounds.
func (r *Relayer) queueCap() int { return 4 * r.core.Batch }

// Ready reports whether new delivery work may be written to publish
// (NewMessage.Publish) and handed to Publish: the bus is up and the
// queue has room.
func (r *Relayer) Ready() bool {
	if !r.bus.Up() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queued) < r.queueCap()
}

// Publish queues rows committed marked relayed, for the relay to publish
// next (no round: they are taken already). Safe for concurrent use; after
// Stop the rows are given back at once.
func (r *Relayer) Publish(rows []persistence.Relay) {
	if len(rows) == 0 {
		return
	}
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		r.giveBackRows(rows)
		return
	}
	r.queued = append(r.queued, rows...)
	r.mu.Unlock()
	select {
	case r.queue <- struct{}{}:
	default:
	}
}

// Again says the bus lost what it held (its stream was made anew): the
// next round marks every delivery row of the site that is marked relayed
// not relayed (persistence.Store.RelayAgain), and the rounds publish them
// again. Work a worker holds meanwhile is found leased or done by the
// claim of its next bus message, as any copy is.
func (r *Relayer) Again() {
	r.again.Store(true)
	r.Kick()
}

// Kick says delivery work was committed.
func (r *Relayer) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Stop ends the relay and waits for it.
func (r *Relayer) Stop() {
	r.bus.relay.CompareAndSwap(r, nil)
	r.once.Do(func() { close(r.stop) })
	<-r.done
}

func (r *Relayer) run() {
	defer close(r.done)
	defer r.giveBackQueued()
	roundTurn := false // a due round goes between two batches of the queue
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		now := r.clock.Now()
		var wait time.Duration
		switch {
		case roundTurn && r.bus.connected() && r.core.Due(now):
			roundTurn = false
			r.round(now)
			continue
		case r.publishQueued():
			roundTurn = true
			continue
		case !r.bus.connected():
			// The bus's return kicks us; the lag goes on growing meanwhile.
			// (Degraded, it is connected: the rounds go on, and the first
			// publish that succeeds ends it.)
			wait = r.core.Sweep
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			r.lag(ctx)
			cancel()
		case r.core.Due(now):
			r.round(now)
			continue
		default:
			wait = r.core.Wake().Sub(now)
		}
		timer := make(chan struct{})
		cancel := r.clock.AfterFunc(max(wait, time.Millisecond), func() { close(timer) })
		select {
		case <-r.stop:
			cancel()
			return
		case <-r.kick:
			r.core.Kick()
		case <-r.queue:
		case <-timer:
		}
		cancel()
	}
}

// publishQueued publishes the rows handed to Publish, a batch at a time,
// and gives back those the stream did not take (all of them while the bus
// is down); false when none were queued.
func (r *Relayer) publishQueued() bool {
	r.mu.Lock()
	n := min(len(r.queued), r.core.Batch)
	rows := r.queued[:n:n]
	r.queued = r.queued[n:]
	if len(r.queued) == 0 {
		r.queued = nil
	}
	r.mu.Unlock()
	if n == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*r.bus.cfg.PublishTimeout)
	defer cancel()
	// What failed was given back (or, if that failed too, is the
	// backstop's); send logged it.
	_, _ = r.send(ctx, rows, true)
	return true
}

// send publishes rows and gives back those the stream did not take (all of
// them while the bus is down), for a later round: a publish whose answer
// was lost is published again with the same Nats-Msg-Id, and the stream's
// duplicate window drops it. It returns how many rows it gave back and the
// publish's error, else the give-back's. A publish the stream took none of
// with the bus connected counts toward degrading the bus (Publishes), one
// it took any of ends that; a failure is logged when loud (the rounds log
// their own) and its error is not the one logged last.
func (r *Relayer) send(ctx context.Context, rows []persistence.Relay, loud bool) (refused int, err error) {
	ok, err := r.bus.Publish(ctx, rows)
	r.judge(len(ok), err, loud)
	if len(ok) < len(rows) {
		back := missing(rows, ok)
		if gerr := r.giveBack(ctx, back); gerr != nil && err == nil {
			err = gerr
		}
		return len(back), err
	}
	return 0, err
}

// judge records how a publish went: the stream took took rows, err is
// its error; loud logs a failure (the rounds log their own).
func (r *Relayer) judge(took int, err error, loud bool) {
	switch {
	case took > 0:
		logged, was := r.publishes.Succeeded()
		if logged {
			r.bus.log.Info("publishing delivery work to the bus works again")
		}
		if was {
			r.bus.setDegraded(false, "")
		}
	case err != nil && !errors.Is(err, errDown):
		log, degraded := r.publishes.Failed(err.Error(), loud)
		if log {
			r.bus.log.Warn("publishing delivery work to the bus failed; the rows go back to the outbox for the relay's rounds",
				"err", err)
		}
		if degraded {
			r.bus.setDegraded(true, err.Error())
		}
	}
}

// giveBack marks rows unrelayed again, for a round, and wakes the workers:
// while the bus is down they claim from the store. If giving back fails
// too (or we die first), the rows stay marked and the workers' backstop
// delivers them from the store.
func (r *Relayer) giveBack(ctx context.Context, rows []int64) error {
	err := r.store.Unrelay(ctx, rows)
	if err != nil {
		r.bus.log.Warn("giving back delivery work the bus did not take failed; the backstop delivers it from the store",
			"rows", len(rows), "err", err)
	}
	r.Kick() // a round takes them (safe from any goroutine)
	r.bus.kickWorkers()
	return err
}

// giveBackQueued gives back the rows still queued when the relay stops.
func (r *Relayer) giveBackQueued() {
	r.mu.Lock()
	rows := r.queued
	r.queued, r.stopped = nil, true
	r.mu.Unlock()
	r.giveBackRows(rows)
}

// giveBackRows gives back rows the relay will not publish.
func (r *Relayer) giveBackRows(rows []persistence.Relay) {
	if len(rows) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*r.bus.cfg.PublishTimeout)
	defer cancel()
	_ = r.giveBack(ctx, missing(rows, nil))
}

// round publishes one batch: take (marking relayed), publish, give back
// what the stream did not take; the next round's take starts past the
// rows given back (Relay.Took).
func (r *Relayer) round(now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*r.bus.cfg.PublishTimeout)
	defer cancel()
	var rows []persistence.Relay
	err := r.markAgain(ctx)
	if err == nil {
		rows, err = r.store.RelayWork(ctx, persistence.RelayRequest{Now: now, Limit: r.core.Batch, After: r.core.From()})
		if err == nil {
			var refused int
			var last persistence.RelayKey
			if len(rows) > 0 {
				last = rows[len(rows)-1].Key()
				refused, err = r.send(ctx, rows, false)
			}
			r.core.Took(len(rows), last, refused)
		}
	}
	if err != nil {
		wait := r.core.Failed(r.clock.Now(), r.rng)
		if r.core.Failures() == 1 {
			r.bus.log.Warn("relaying delivery work to the bus failed; the work waits in the outbox", "err", err, "retry_in", wait)
		}
		return
	}
	if n := r.core.Done(now, len(rows)); n > 0 {
		r.bus.log.Info("relaying delivery work to the bus works again", "failed_rounds", n)
	}
	if now = r.clock.Now(); now.Sub(r.lagAt) >= lagEvery {
		r.lagAt = now
		r.lag(ctx)
	}
}

// againPage is how many rows one RelayAgain statement marks.
const againPage = 1000

// markAgain does what Again asked for, a page at a time; after an error
// the next round goes on from the last page marked.
func (r *Relayer) markAgain(ctx context.Context) error {
	if !r.again.Swap(false) {
		return nil
	}
	for {
		last, err := r.store.RelayAgain(ctx, r.againAfter, againPage)
		if err != nil {
			r.again.Store(true)
			return err
		}
		if last == 0 {
			r.againAfter = 0
			return nil
		}
		r.againAfter = last
	}
}

// missing are the rows of rs not in ok.
func missing(rs []persistence.Relay, ok []int64) []int64 {
	took := make(map[int64]bool, len(ok))
	for _, id := range ok {
		took[id] = true
	}
	var out []int64
	for _, r := range rs {
		if !took[r.Row] {
			out = append(out, r.Row)
		}
	}
	return out
}

// lagEvery is how often a busy relay reads its lag (a query of its own).
const lagEvery = time.Second

// lag reads the earliest due time of the unrelayed rows: past, how long
// the oldest of them has waited (the metric); ahead, when the next falls
// due, for the next round (scheduled work and retries are published when
// they fall due, not at the sweep after).
func (r *Relayer) lag(ctx context.Context) {
	oldest, err := r.store.OldestUnrelayed(ctx)
	if err != nil {
		return
	}
	now := r.clock.Now()
	if oldest.After(now) {
		r.core.Expect(oldest)
	} else {
		r.core.Expect(time.Time{})
	}
	if oldest.IsZero() {
		r.bus.SetLag(0)
		return
	}
	r.bus.SetLag(max(now.Sub(oldest), 0))
}
