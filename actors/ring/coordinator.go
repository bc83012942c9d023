package ring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/clock"
	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// LockName is the name of the advisory lock whose holder is the master of
// role auto (one per site: the site's instances share one database).
const LockName = "ring-master"

// Config configures the coordinator of one instance.
type Config struct {
	// Self is this instance's member document: instance id, node (the
	// site's --name), the address its slaves reach it at, cluster, region,
	// zone and services.
	Self messages.RingJoin
	// Role is master, slave or auto. The node resolves --ring-role index
	// to master (ordinal 0) or slave before it starts the coordinator, and
	// auto to master on a store that does not elect.
	Role string
	// MasterAddr is --ring-master as host:port; empty makes a slave read
	// the master's address from the store (the master publishes it).
	MasterAddr string
	// PublishInterval is --ring-publish-interval (30s): the master answers
	// every subscription at least this often, and drops a member that did
	// not apply an assignment within two of them.
	PublishInterval time.Duration
	// Reconnect is a slave's patience with an unreachable master.
	Reconnect Reconnect
	// MasterStopGrace is how long a slave waits for a master that said it
	// is stopping (a 503 from it: a graceful stop drains its deliveries
	// before it gives up the lock) without counting its failures towards
	// Reconnect.MaxAttempts: the master's --shutdown-timeout and a margin.
	// Zero means 40s.
	MasterStopGrace time.Duration
	Store           persistence.Store
	// Elector elects the master of role auto (and guards role master
	// against a second one); nil with a store that only one instance uses.
	Elector   persistence.Elector
	Transport Transport
	Clock     clock.Clock
	Seed      uint64
	Logger    *slog.Logger
	Metrics   *Metrics
	Shares    *Shares
	// Kick wakes the workers of the services whose partition changed.
	Kick func(services []string)
	// Refresh reads the site's directory (routes, frontends) again; it is
	// called on every publication this instance receives or (as master)
	// makes, at least every publish interval.
	Refresh func()
	// Fatal reports that this instance cannot go on (a refusal by the
	// master, a master unreachable after every attempt, a lost master
	// lock); the node stops and the process exits non-zero.
	Fatal func(error)
	// StoreTimeout bounds each store call (default 10s).
	StoreTimeout time.Duration
}

// Validate reports what is missing or wrong.
func (c Config) Validate() error {
	var errs []error
	if c.Self.InstanceID == "" || c.Self.Node == "" || len(c.Self.Services) == 0 {
		errs = append(errs, errors.New("ring: Self needs an instance id, a node and services"))
	}
	switch c.Role {
	case messages.RoleMaster, messages.RoleSlave, messages.RoleAuto:
	default:
		errs = append(errs, fmt.Errorf("ring: role %q must be master, slave or auto", c.Role))
	}
	if c.PublishInterval <= 0 {
		errs = append(errs, errors.New("ring: PublishInterval must be positive"))
	}
	if c.Role != messages.RoleMaster {
		errs = append(errs, c.Reconnect.Validate())
	}
	if c.Role == messages.RoleSlave && c.Transport == nil {
		errs = append(errs, errors.New("ring: a slave needs a Transport (--tls-ca, or --insecure-skip-verify for development)"))
	}
	if c.Role == messages.RoleAuto && c.Elector == nil {
		errs = append(errs, errors.New("ring: role auto needs a store that elects (Postgres)"))
	}
	if c.Store == nil || c.Clock == nil || c.Logger == nil || c.Metrics == nil || c.Shares == nil ||
		c.Kick == nil || c.Refresh == nil || c.Fatal == nil {
		errs = append(errs, errors.New("ring: Store, Clock, Logger, Metrics, Shares, Kick, Refresh and Fatal are required"))
	}
	return errors.Join(errs...)
}

// Coordinator is the ring actor of one instance: the master (its Master
// core, the subscriptions of its slaves, publication to the store) and,
// on every instance, the partitions this instance works. Build it with
// New.
type Coordinator struct {
	cfg  Config
	log  *slog.Logger
	rng  *rand.Rand
	self *actor.PID
	sys  *actor.ActorSystem
	wake *clock.Wakeup

	role string // master or slave (now)
	lead persistence.Leadership

	// master
	master  *Master
	waiters map[*messages.RingPollRequest]waiter
	// refreshAt is the master's next republication to every subscription
	// (and reading of the directory): every publish interval, or at once
	// after a touch.
	refreshAt time.Time

	// slave
	held       messages.RingAssignment
	masterAddr string
	joined     bool
	failures   int
	gen        uint64 // of the call in flight; results of older calls are dropped
	calling    bool
	retryAt    time.Time
	stopping   bool
	// movedOn: the instance at --ring-master said it is not the master;
	// the address the master published in the store is followed instead.
	movedOn bool
	// reassigned is the master core's count of moved ranges already
	// added to the metric.
	reassigned int
	// waitLead: role master waits for the lock (held by a session that
	// has not ended yet); failures counts the tries.
	waitLead bool
	// masterStopping is when the master said it is stopping (zero: it
	// did not, or answered since): for MasterStopGrace from then the
	// slave's failures do not count towards giving up.
	masterStopping time.Time

	// calls is the context of the calls to the master and of the lock's
	// watcher; cancelled when the actor stops, so nothing outlives it or
	// sends to it once it is gone.
	calls       context.Context
	cancelCalls context.CancelFunc
}

type waiter struct {
	id       string
	deadline time.Time
}

// Private messages.
type (
	wakeMsg    struct{}
	callResult struct {
		calls context.Context // of the incarnation that made the call
		gen   uint64
		join  bool
		a     messages.RingAssignment
		err   error
	}
	leadLost struct{ lead persistence.Leadership }
)

// New returns the coordinator's producer.
func New(cfg Config) (actor.Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 10 * time.Second
	}
	if cfg.MasterStopGrace <= 0 {
		cfg.MasterStopGrace = 40 * time.Second
	}
	return func() actor.Actor {
		return &Coordinator{
			cfg:     cfg,
			log:     cfg.Logger.With("component", "ring", "instance_id", cfg.Self.InstanceID),
			rng:     rand.New(rand.NewPCG(cfg.Seed, messages.TokenOf(cfg.Self.InstanceID))),
			waiters: map[*messages.RingPollRequest]waiter{},
		}
	}, nil
}

// Receive implements actor.Actor.
func (co *Coordinator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		co.self, co.sys = c.Self(), c.ActorSystem()
		co.calls, co.cancelCalls = context.WithCancel(context.Background())
		co.wake = clock.NewWakeup(co.cfg.Clock, func(uint64) { co.sys.Root.Send(co.self, wakeMsg{}) })
		co.start()
	case *actor.Restarting:
		co.stop(false)
	case *actor.Stopping:
		co.stop(true)
	case wakeMsg:
		co.step()
	case *callResult:
		co.onResult(m)
	case leadLost:
		if m.lead == co.lead && !co.stopping {
			co.standDown()
		}
	case *messages.RingJoinRequest:
		m.Reply <- co.join(m.Join)
		co.step()
	case *messages.RingPollRequest:
		co.poll(m)
		co.step()
	case *messages.RingPollGone:
		if w, ok := co.waiters[m.Request]; ok {
			delete(co.waiters, m.Request)
			co.master.PollClosed(co.cfg.Clock.Now(), w.id)
		}
	case *messages.RingLeaveRequest:
		m.Reply <- co.leave(m.Leave)
		co.step()
	case *messages.RingStatusRequest:
		m.Reply <- co.status()
	case *messages.RingTouch:
		co.touch()
	}
}

func (co *Coordinator) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), co.cfg.StoreTimeout)
}

// start takes the role: master (taking the lock when the store elects),
// slave, or for auto whichever the lock decides.
func (co *Coordinator) start() {
	switch co.cfg.Role {
	case messages.RoleMaster:
		if co.cfg.Elector != nil && !co.tryLead() {
			// A master that restarts fast may find its old session still
			// holding the lock: wait for it like a slave for its master.
			co.waitLead = true
			co.log.Warn("the ring master lock is held by another session; waiting for it")
			co.failed(co.cfg.Clock.Now(), errors.New("--ring-role master: another session holds the ring master lock of this site"))
			co.step()
			return
		}
		co.becomeMaster()
	case messages.RoleAuto:
		if co.tryLead() {
			co.becomeMaster()
			return
		}
		co.becomeSlave()
	default:
		co.becomeSlave()
	}
}

// tryLead takes the master lock if it is free.
func (co *Coordinator) tryLead() bool {
	ctx, cancel := co.storeCtx()
	defer cancel()
	lead, err := co.cfg.Elector.TryLead(ctx, LockName)
	if err != nil {
		co.log.Warn("taking the ring master lock failed", "err", err)
		return false
	}
	if lead == nil {
		return false
	}
	co.lead = lead
	self, sys, quit := co.self, co.sys, co.calls.Done()
	go func() {
		select {
		case <-lead.Lost():
			select {
			case <-quit: // released by stop
			default:
				sys.Root.Send(self, leadLost{lead: lead})
			}
		case <-quit:
		}
	}()
	return true
}

func (co *Coordinator) becomeMaster() {
	ctx, cancel := co.storeCtx()
	stored, err := co.cfg.Store.Ring(ctx)
	cancel()
	if err != nil {
		co.fatal(fmt.Errorf("reading the stored ring assignment: %w", err))
		return
	}
	co.role = messages.RoleMaster
	co.gen++ // a slave's call still in flight is of no interest now
	co.calling = false
	co.master = NewMaster(MasterConfig{Self: co.cfg.Self, PublishInterval: co.cfg.PublishInterval}, stored)
	co.cfg.Metrics.setRole(co.role)
	co.cfg.Shares.SetMaster(true)
	co.log.Info("ring master", "stored_epoch", stored.Epoch, "address", co.cfg.Self.Address)
	for _, svc := range messages.AllServices {
		if !slices.Contains(co.cfg.Self.Services, svc) {
			co.log.Warn("the ring master does not run a service: its work waits, since no slave may run a service its master lacks",
				"service", svc)
		}
	}
	co.step()
}

func (co *Coordinator) becomeSlave() {
	if co.cfg.Transport == nil {
		co.fatal(errors.New("this instance is a ring slave and has no way to reach its master: give --tls-ca (or --insecure-skip-verify, for development)"))
		return
	}
	co.role = messages.RoleSlave
	co.cfg.Metrics.setRole(co.role)
	co.log.Info("ring slave", "master", co.cfg.MasterAddr)
	co.step()
}

// step does what is due now and arms the next wake-up.
func (co *Coordinator) step() {
	now := co.cfg.Clock.Now()
	if co.waitLead && !co.stopping {
		switch {
		case now.Before(co.retryAt):
			co.wake.Schedule(co.retryAt)
		case co.tryLead():
			co.waitLead, co.failures = false, 0
			co.becomeMaster()
		default:
			co.failed(now, errors.New("--ring-role master: another session holds the ring master lock of this site"))
			if co.waitLead {
				co.wake.Schedule(co.retryAt)
			}
		}
		return
	}
	if co.stopping || co.role == "" {
		return
	}
	var next time.Time
	if co.role == messages.RoleMaster {
		next = co.stepMaster(now)
	} else {
		next = co.stepSlave(now)
	}
	if !next.IsZero() {
		co.wake.Schedule(next)
	}
}

// stepMaster publishes a new assignment when membership changed, answers
// the subscriptions that wait for it or whose time is up, and returns when
// to look again.
func (co *Coordinator) stepMaster(now time.Time) time.Time {
	if a, ok := co.master.Next(now); ok {
		prev := a.Epoch - 1 // Next numbers it right after the stored (or last published) epoch
		ctx, cancel := co.storeCtx()
		err := co.cfg.Store.PublishRing(ctx, prev, State(a, now))
		cancel()
		if errors.Is(err, persistence.ErrStaleEpoch) && co.publishedByUs(a) {
			err = nil // an earlier try committed and only its answer was lost
		}
		switch {
		case errors.Is(err, persistence.ErrStaleEpoch):
			co.log.Error("another master published a newer ring assignment; this one stands down", "epoch", prev)
			co.standDown()
			return time.Time{}
		case err != nil:
			co.log.Error("publishing the ring assignment failed; trying again", "epoch", a.Epoch, "err", err)
			return now.Add(time.Second)
		}
		co.master.Published(now, a)
		co.cfg.Metrics.reassigned.Add(float64(co.master.Reassignments() - co.reassigned))
		co.reassigned = co.master.Reassignments()
		co.log.Info("ring assignment published", "epoch", a.Epoch, "members", len(a.Members))
		co.apply(co.master.Current())
		co.master.Applied(a.Epoch)
	}
	cur := co.master.Current()
	cur.Coverage = co.master.Coverage()
	co.cfg.Metrics.held(cur, cur.Coverage)
	next := co.master.NextCheck(now)
	republish := !co.refreshAt.IsZero() && co.refreshAt.Compare(now) <= 0
	for req, w := range co.waiters {
		if cur.Epoch > 0 && (republish || w.deadline.Compare(now) <= 0 || req.Poll.Epoch < cur.Epoch) {
			req.Reply <- messages.RingAnswer{Assignment: cur}
			delete(co.waiters, req)
			co.master.PollClosed(now, w.id)
			continue
		}
		next = clock.Earliest(next, w.deadline)
	}
	if co.refreshAt.IsZero() || republish {
		// The master reads the directory on its own cadence too.
		co.refreshAt = now.Add(co.cfg.PublishInterval)
		if republish {
			co.cfg.Refresh()
		}
	}
	return clock.Earliest(next, co.refreshAt)
}

// touch spreads a change of the directory made here: the master
// republishes at once; a slave tells its master, which does.
func (co *Coordinator) touch() {
	switch {
	case co.role == messages.RoleMaster:
		co.refreshAt = co.cfg.Clock.Now()
		co.step()
	case co.joined && co.masterAddr != "":
		addr, tr := co.masterAddr, co.cfg.Transport
		p := messages.RingPoll{InstanceID: co.cfg.Self.InstanceID, Epoch: co.held.Epoch, Touch: true}
		log, calls := co.log, co.calls
		go func() {
			ctx, cancel := context.WithTimeout(calls, 10*time.Second)
			defer cancel()
			if _, err := tr.RingPoll(ctx, addr, p); err != nil {
				log.Warn("telling the master of a directory change failed; the others see it at the next publication", "err", err)
			}
		}()
	}
}

// join admits a slave (as master).
func (co *Coordinator) join(j messages.RingJoin) messages.RingAnswer {
	if co.role != messages.RoleMaster || co.stopping {
		return messages.RingAnswer{Err: co.notMaster()}
	}
	now := co.cfg.Clock.Now()
	if err := co.master.Join(now, j); err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			co.log.Warn("ring join refused", "instance", j.InstanceID, "code", r.Code, "reason", r.Message)
			return messages.RingAnswer{Err: messages.Errorf(r.Code, "%s", r.Message)}
		}
		return messages.RingAnswer{Err: err}
	}
	co.log.Info("ring member joined", "member", j.InstanceID, "address", j.Address, "zone", j.Zone, "services", j.Services)
	co.stepMaster(now) // publish the assignment that includes it before answering
	cur := co.master.Current()
	cur.Coverage = co.master.Coverage()
	return messages.RingAnswer{Assignment: cur}
}

// poll opens a slave's subscription (as master).
func (co *Coordinator) poll(req *messages.RingPollRequest) {
	if co.role != messages.RoleMaster || co.stopping {
		req.Reply <- messages.RingAnswer{Err: co.notMaster()}
		return
	}
	now := co.cfg.Clock.Now()
	if !co.master.PollOpened(now, req.Poll.InstanceID, req.Poll.Epoch) {
		req.Reply <- messages.RingAnswer{Err: messages.Errorf(messages.CodeRingUnknownMember,
			"instance %q is not a member of the ring (it was dropped or the master changed): join again", req.Poll.InstanceID)}
		return
	}
	if req.Poll.Touch {
		co.master.PollClosed(now, req.Poll.InstanceID)
		cur := co.master.Current()
		cur.Coverage = co.master.Coverage()
		req.Reply <- messages.RingAnswer{Assignment: cur}
		co.refreshAt = now // everyone, this master included, reads the directory again
		return
	}
	wait := min(time.Duration(req.Poll.WaitMs)*time.Millisecond, co.cfg.PublishInterval)
	co.waiters[req] = waiter{id: req.Poll.InstanceID, deadline: now.Add(wait)}
}

func (co *Coordinator) leave(l messages.RingLeave) error {
	if co.role != messages.RoleMaster || co.stopping {
		return co.notMaster()
	}
	co.master.Leave(co.cfg.Clock.Now(), l.InstanceID)
	co.log.Info("ring member left", "member", l.InstanceID)
	return nil
}

func (co *Coordinator) notMaster() error {
	return messages.Errorf(messages.CodeRingNotMaster, "instance %q is not the ring master of site %q (its master is %q)",
		co.cfg.Self.InstanceID, co.cfg.Self.Node, co.held.Master)
}

// stepSlave starts the next call to the master when none is in flight and
// its retry time has come.
func (co *Coordinator) stepSlave(now time.Time) time.Time {
	if co.calling {
		return time.Time{}
	}
	if now.Before(co.retryAt) {
		return co.retryAt
	}
	if co.masterAddr == "" {
		co.masterAddr = co.resolveMaster()
		if co.masterAddr == "" {
			co.failed(now, errors.New("no ring master has published its address yet"))
			return co.retryAt
		}
	}
	co.calling = true
	co.gen++
	gen, addr, tr := co.gen, co.masterAddr, co.cfg.Transport
	self, sys, calls := co.self, co.sys, co.calls
	send := func(r *callResult) {
		if calls.Err() == nil {
			sys.Root.Send(self, r)
		}
	}
	if !co.joined {
		j := co.cfg.Self
		go func() {
			ctx, cancel := context.WithTimeout(calls, 30*time.Second)
			defer cancel()
			a, err := tr.RingJoin(ctx, addr, j)
			send(&callResult{calls: calls, gen: gen, join: true, a: a, err: err})
		}()
		return time.Time{}
	}
	if !co.storeReachable() {
		// A poll confirms the epoch we hold; holding ranges we cannot
		// work (every claim fails) would freeze them. Without polls the
		// master drops us after its grace and gives them to others; we
		// join again once the store answers.
		co.calling = false
		co.retryAt = now.Add(time.Second)
		return co.retryAt
	}
	p := messages.RingPoll{InstanceID: co.cfg.Self.InstanceID, Epoch: co.held.Epoch, WaitMs: co.cfg.PublishInterval.Milliseconds()}
	go func() {
		a, err := tr.RingPoll(calls, addr, p)
		send(&callResult{calls: calls, gen: gen, a: a, err: err})
	}()
	return time.Time{}
}

// storeReachable pings the store, briefly.
func (co *Coordinator) storeReachable() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := co.cfg.Store.Ping(ctx); err != nil {
		co.log.Warn("the store does not answer; not confirming the ring assignment until it does", "err", err)
		return false
	}
	return true
}

// publishedByUs reports whether the store holds a as published by this
// instance (a publish that committed although its answer was lost).
func (co *Coordinator) publishedByUs(a messages.RingAssignment) bool {
	ctx, cancel := co.storeCtx()
	defer cancel()
	st, err := co.cfg.Store.Ring(ctx)
	return err == nil && st.Epoch == a.Epoch && st.Master == co.cfg.Self.InstanceID
}

// standDown ends this instance's mastership: its lock is lost, or another
// master published over it. With role auto it goes on as a slave of
// whoever leads now (its partitions cleared until that master's
// assignment); an explicit master stops.
func (co *Coordinator) standDown() {
	if co.cfg.Role != messages.RoleAuto || co.cfg.Transport == nil {
		co.fatal(errors.New("this instance is no longer the ring master (its lock was lost or another master published); stopping so that another instance can lead"))
		return
	}
	co.log.Warn("no longer the ring master (lock lost or another master published); going on as a slave")
	co.answerWaiters()
	if co.lead != nil {
		ctx, cancel := co.storeCtx()
		_ = co.lead.Release(ctx)
		cancel()
		co.lead = nil
	}
	co.master = nil
	co.cfg.Shares.Clear()
	co.joined, co.masterAddr, co.failures, co.retryAt, co.masterStopping = false, "", 0, time.Time{}, time.Time{}
	co.becomeSlave()
}

// resolveMaster is --ring-master, else (or once the instance there said
// it is not the master) the address the master published in the store.
func (co *Coordinator) resolveMaster() string {
	if co.cfg.MasterAddr != "" && !co.movedOn {
		return co.cfg.MasterAddr
	}
	ctx, cancel := co.storeCtx()
	defer cancel()
	st, err := co.cfg.Store.Ring(ctx)
	if err != nil {
		co.log.Warn("reading the ring master's address failed", "err", err)
		return ""
	}
	if st.Master == co.cfg.Self.InstanceID {
		return "" // our own earlier run: whoever leads now has not published yet
	}
	return st.MasterAddress
}

func (co *Coordinator) onResult(r *callResult) {
	if r.calls != co.calls || r.gen != co.gen || co.role != messages.RoleSlave || co.stopping {
		return
	}
	co.calling = false
	now := co.cfg.Clock.Now()
	if r.err == nil {
		if r.join {
			co.joined = true
			co.log.Info("joined the ring", "master", r.a.Master, "address", co.masterAddr, "epoch", r.a.Epoch)
		}
		co.failures, co.masterStopping = 0, time.Time{}
		co.apply(r.a)
		co.cfg.Refresh()
		co.step()
		return
	}
	var ce *peer.CallError
	if errors.As(r.err, &ce) {
		switch {
		case ce.Code == messages.CodeRingUnknownMember:
			co.joined = false // dropped, or a new master: join again at once
			co.step()
			return
		case ce.Code == messages.CodeRingNotMaster:
			co.joined = false
			co.masterAddr = ""
			co.movedOn = true // the master moved: follow the store from now on
		case ce.Status == http.StatusForbidden || ce.Status == http.StatusBadRequest:
			co.fatal(fmt.Errorf("the ring master at %s refused this instance: %s: %s", co.masterAddr, ce.Code, ce.Message))
			return
		case ce.Status == http.StatusServiceUnavailable && co.masterStopping.IsZero():
			// The master is there but not serving: it is stopping (its
			// subscriptions end first), and its graceful stop may take
			// its whole --shutdown-timeout before it lets the lock go.
			co.masterStopping = now
			co.log.Info("the ring master is stopping; waiting for it (or, with role auto, for its lock) without counting the failures",
				"master", co.masterAddr, "for", co.cfg.MasterStopGrace)
		}
	}
	co.failed(now, r.err)
	co.step()
}

// failed counts a failed call to the master: the slave keeps working the
// partitions it holds (the store fences them if a newer assignment was
// published), tries to lead itself when the role is auto, and gives up
// after the configured attempts.
func (co *Coordinator) failed(now time.Time, err error) {
	if co.masterStopping.IsZero() || now.Sub(co.masterStopping) >= co.cfg.MasterStopGrace {
		co.failures++
	}
	if !co.waitLead && co.cfg.Role == messages.RoleAuto && co.tryLead() {
		co.log.Info("took the ring master lock: this instance is the master now", "after", err)
		co.failures = 0
		co.joined = false
		co.becomeMaster()
		return
	}
	if co.cfg.MasterAddr == "" || co.movedOn {
		co.masterAddr = "" // the master may have changed: read it again
	}
	if co.cfg.Reconnect.GiveUp(co.failures) {
		if co.waitLead {
			co.fatal(fmt.Errorf("the ring master lock is still held after %d attempts (--ring-reconnect-max-attempts): %w", co.failures, err))
			return
		}
		co.fatal(fmt.Errorf("the ring master is unreachable after %d attempts (--ring-reconnect-max-attempts): %w", co.failures, err))
		return
	}
	d := co.cfg.Reconnect.Delay(max(co.failures, 1), co.rng)
	co.retryAt = now.Add(d)
	if co.waitLead {
		return
	}
	co.log.Warn("ring master unreachable; trying again", "attempt", co.failures, "of", co.cfg.Reconnect.MaxAttempts, "in", d, "err", err)
}

// apply makes a the assignment this instance works from.
func (co *Coordinator) apply(a messages.RingAssignment) {
	if a.Epoch < co.held.Epoch {
		co.log.Warn("ignoring an older ring assignment", "epoch", a.Epoch, "held", co.held.Epoch)
		return
	}
	co.held = a
	changed := co.cfg.Shares.Apply(a, co.cfg.Self.InstanceID, co.cfg.Self.Services)
	co.cfg.Metrics.held(a, a.Coverage)
	if len(changed) > 0 {
		co.log.Info("ring partitions changed", "epoch", a.Epoch, "services", changed)
		co.cfg.Kick(changed)
	}
}

func (co *Coordinator) status() messages.RingStatus {
	st := messages.RingStatus{InstanceID: co.cfg.Self.InstanceID, Role: co.role, Members: []messages.RingMember{}}
	a := co.held
	if co.role == messages.RoleMaster {
		a = co.master.Current()
		a.Coverage = co.master.Coverage()
	}
	st.Master, st.Epoch, st.Coverage = a.Master, a.Epoch, a.Coverage
	if a.Members != nil {
		st.Members = a.Members
	}
	return st
}

func (co *Coordinator) fatal(err error) {
	if co.stopping {
		return
	}
	co.stopping = true
	co.cfg.Shares.Clear()
	co.answerWaiters()
	co.cfg.Fatal(err)
}

func (co *Coordinator) answerWaiters() {
	for req := range co.waiters {
		req.Reply <- messages.RingAnswer{Err: messages.Errorf(messages.CodeUnavailable, "the ring master is stopping")}
		delete(co.waiters, req)
	}
}

// stop ends the actor's life: waiting subscriptions are answered (the
// slaves poll again, and find the next master), a slave says goodbye, the
// master lock is given up.
func (co *Coordinator) stop(final bool) {
	if co.wake != nil {
		co.wake.Cancel()
	}
	if co.cancelCalls != nil {
		co.cancelCalls()
	}
	co.answerWaiters()
	if final {
		co.stopping = true
		co.leaveMaster()
	}
	co.cfg.Shares.Clear()
	if co.lead != nil {
		ctx, cancel := co.storeCtx()
		if err := co.lead.Release(ctx); err != nil {
			co.log.Warn("releasing the ring master lock failed (it ends with the session)", "err", err)
		}
		cancel()
		co.lead = nil
	}
}

// leaveMaster says goodbye to the master, so that it hands this
// instance's ranges over at once instead of after its grace.
func (co *Coordinator) leaveMaster() {
	if co.role == messages.RoleSlave && co.joined && co.masterAddr != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := co.cfg.Transport.RingLeave(ctx, co.masterAddr, messages.RingLeave{InstanceID: co.cfg.Self.InstanceID}); err != nil {
			co.log.Debug("ring leave failed (the master drops this instance after its grace)", "err", err)
		}
		cancel()
	}
}
