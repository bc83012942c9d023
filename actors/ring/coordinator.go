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

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/transport"
)

// LockName is the name of the advisory lock whose holder is the master of
// role auto (one per site: the site's instances share one database).
const LockName = "ring-master"

// Config configures the coordinator of one instance.
type Config struct {
	// Self is this instance's member document: instance id, node (the
	// site's name), the address its slaves reach it at, cluster, region,
	// zone and services.
	Self messages.RingJoin
	// Role is master, slave or auto. The node resolves its role index
	// to master (ordinal 0) or slave before it starts the coordinator, and
	// auto to master on a store that does not elect.
	Role string
	// MasterAddr is the configured master's host:port; empty makes a slave read
	// the master's address from the store (the master publishes it).
	MasterAddr string
	// PublishInterval is the master's publishing period: it answers
	// every subscription at least this often, and drops a member that did
	// not apply an assignment within two of them.
	PublishInterval time.Duration
	// Reconnect is a slave's patience with an unreachable master.
	Reconnect Reconnect
	// MasterStopGrace is how long a slave waits for a master that said it
	// is stopping (a 503 from it: a graceful stop drains its deliveries
	// before it gives up the lock) without counting its failures towards
	// Reconnect.MaxAttempts: the master's shutdown timeout and a margin.
	// Zero means 40s.
	MasterStopGrace time.Duration
	Store           persistence.Store
	// Elector elects the master of role auto (and guards role master
	// against a second one); nil with a store that only one instance uses.
	Elector   persistence.Elector
	Transport transport.Ring
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
		errs = append(errs, field.Under("Reconnect", c.Reconnect.Validate()))
	}
	if c.Role == messages.RoleSlave && c.Transport == nil {
		errs = append(errs, errNoTransport)
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
	self *actor.PID
	sys  *actor.ActorSystem
	wake *clock.Wakeup

	// member is the role and slave state machine (the pure core).
	member *Member
	lead   persistence.Leadership

	// master
	master  *Master
	waiters map[*messages.RingPollRequest]waiter
	// refreshAt is the master's next republication to every subscription
	// (and reading of the directory): every publish interval, or at once
	// after a touch.
	refreshAt time.Time

	// held is the assignment this instance works from.
	held messages.RingAssignment
	// reassigned is the master core's count of moved ranges already
	// added to the metric.
	reassigned int

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
		addr  string
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
		rng := rand.New(rand.NewPCG(cfg.Seed, messages.TokenOf(cfg.Self.InstanceID)))
		return &Coordinator{
			cfg: cfg,
			log: cfg.Logger.With("component", "ring", "instance_id", cfg.Self.InstanceID),
			member: NewMember(MemberConfig{Role: cfg.Role, MasterAddr: cfg.MasterAddr, Elects: cfg.Elector != nil,
				CanCall: cfg.Transport != nil, Reconnect: cfg.Reconnect, MasterStopGrace: cfg.MasterStopGrace}, rng),
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
		co.feed(Start{})
	case *actor.Restarting:
		co.stop(false)
	case *actor.Stopping:
		co.stop(true)
	case wakeMsg:
		co.feed(Wake{})
	case *callResult:
		co.onResult(m)
	case leadLost:
		if m.lead == co.lead {
			co.feed(LeadLost{})
		}
	case *messages.RingJoinRequest:
		m.Reply <- co.join(m.Join)
		co.feed(Wake{})
	case *messages.RingPollRequest:
		co.poll(m)
		co.feed(Wake{})
	case *messages.RingPollGone:
		if w, ok := co.waiters[m.Request]; ok {
			delete(co.waiters, m.Request)
			co.master.PollClosed(co.cfg.Clock.Now(), w.id)
		}
	case *messages.RingLeaveRequest:
		m.Reply <- co.leave(m.Leave)
		co.feed(Wake{})
	case *messages.RingStatusRequest:
		m.Reply <- co.status()
	case *messages.RingTouch:
		co.touch()
	}
}

// feed steps the role machine with ev and carries out its effects; an
// effect that asks something is answered at once, in order.
func (co *Coordinator) feed(ev Event) {
	for _, e := range co.member.Step(co.cfg.Clock.Now(), ev) {
		co.do(e)
	}
}

// do carries out one effect of the role machine.
func (co *Coordinator) do(e Effect) {
	switch e := e.(type) {
	case TryLead:
		co.feed(LeadResult{Won: co.tryLead()})
	case BecomeMaster:
		co.becomeMaster()
	case BecameSlave:
		co.cfg.Metrics.setRole(messages.RoleSlave)
		co.log.Info("ring slave", "master", co.cfg.MasterAddr)
	case StepMaster:
		if next := co.stepMaster(co.cfg.Clock.Now()); !next.IsZero() {
			co.wake.Schedule(next)
		}
	case StandDown:
		co.answerWaiters()
		if co.lead != nil {
			ctx, cancel := co.storeCtx()
			_ = co.lead.Release(ctx)
			cancel()
			co.lead = nil
		}
		co.master = nil
		co.cfg.Shares.Clear()
	case ResolveMaster:
		co.feed(MasterAddr{Addr: co.resolveMaster()})
	case PingStore:
		co.feed(StorePing{OK: co.storeReachable()})
	case CallMaster:
		co.callMaster(e)
	case Schedule:
		co.wake.Schedule(e.At)
	case GiveUp:
		co.cfg.Shares.Clear()
		co.answerWaiters()
		co.cfg.Fatal(e.Err)
	case LeaveMaster:
		// Say goodbye, so that the master hands this instance's ranges
		// over at once instead of after its grace.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := co.cfg.Transport.RingLeave(ctx, e.Addr, messages.RingLeave{InstanceID: co.cfg.Self.InstanceID}); err != nil {
			co.log.Debug("ring leave failed (the master drops this instance after its grace)", "err", err)
		}
		cancel()
	case Log:
		co.log.Log(context.Background(), e.Level, e.Msg, e.Args...)
	}
}

func (co *Coordinator) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), co.cfg.StoreTimeout)
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

// becomeMaster leads from the stored assignment.
func (co *Coordinator) becomeMaster() {
	ctx, cancel := co.storeCtx()
	stored, err := co.cfg.Store.Ring(ctx)
	cancel()
	if err != nil {
		co.feed(MasterReady{Err: err})
		return
	}
	co.master = NewMaster(MasterConfig{Self: co.cfg.Self, PublishInterval: co.cfg.PublishInterval}, stored)
	co.cfg.Metrics.setRole(messages.RoleMaster)
	co.cfg.Shares.SetMaster(true)
	co.log.Info("ring master", "stored_epoch", stored.Epoch, "address", co.cfg.Self.Address)
	for _, svc := range messages.AllServices {
		if !slices.Contains(co.cfg.Self.Services, svc) {
			co.log.Warn("the ring master does not run a service: its work waits, since no slave may run a service its master lacks",
				"service", svc)
		}
	}
	co.feed(MasterReady{})
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
			co.feed(LeadLost{})
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
	if co.member.Role() == messages.RoleMaster {
		co.refreshAt = co.cfg.Clock.Now()
		co.feed(Wake{})
		return
	}
	addr, ok := co.member.Joined()
	if !ok {
		return
	}
	tr := co.cfg.Transport
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

// join admits a slave (as master).
func (co *Coordinator) join(j messages.RingJoin) messages.RingAnswer {
	if !co.member.Serving() {
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
	if !co.member.Serving() {
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
	if !co.member.Serving() {
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

// callMaster joins or polls the master off the mailbox; its end comes back
// as a callResult.
func (co *Coordinator) callMaster(c CallMaster) {
	tr, self, sys, calls := co.cfg.Transport, co.self, co.sys, co.calls
	send := func(r *callResult) {
		if calls.Err() == nil {
			sys.Root.Send(self, r)
		}
	}
	if c.Join {
		j := co.cfg.Self
		go func() {
			ctx, cancel := context.WithTimeout(calls, 30*time.Second)
			defer cancel()
			a, err := tr.RingJoin(ctx, c.Addr, j)
			send(&callResult{calls: calls, gen: c.Gen, join: true, addr: c.Addr, a: a, err: err})
		}()
		return
	}
	p := messages.RingPoll{InstanceID: co.cfg.Self.InstanceID, Epoch: co.held.Epoch, WaitMs: co.cfg.PublishInterval.Milliseconds()}
	go func() {
		a, err := tr.RingPoll(calls, c.Addr, p)
		send(&callResult{calls: calls, gen: c.Gen, addr: c.Addr, a: a, err: err})
	}()
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

// resolveMaster is the address the master published in the store ("" when
// none is, or it is this instance's own earlier run).
func (co *Coordinator) resolveMaster() string {
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

// onResult classifies how a call to the master ended for the role machine;
// an assignment of the call it waits for is applied first.
func (co *Coordinator) onResult(r *callResult) {
	if r.calls != co.calls || !co.member.Awaits(r.gen) {
		return
	}
	kind, err := CallOK, r.err
	var ce *transport.CallError
	switch {
	case r.err == nil:
		if r.join {
			co.log.Info("joined the ring", "master", r.a.Master, "address", r.addr, "epoch", r.a.Epoch)
		}
		co.apply(r.a)
		co.cfg.Refresh()
	case !errors.As(r.err, &ce):
		kind = CallFailed
	case ce.Code == messages.CodeRingUnknownMember:
		kind = CallUnknownMember
	case ce.Code == messages.CodeRingNotMaster:
		kind = CallNotMaster
	case ce.Status == http.StatusForbidden || ce.Status == http.StatusBadRequest:
		kind, err = CallRefused, fmt.Errorf("%s: %s", ce.Code, ce.Message)
	case ce.Status == http.StatusServiceUnavailable:
		kind = CallStopping
	default:
		kind = CallFailed
	}
	co.feed(CallDone{Gen: r.gen, Join: r.join, Kind: kind, Err: err})
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
	st := messages.RingStatus{InstanceID: co.cfg.Self.InstanceID, Role: co.member.Role(), Members: []messages.RingMember{}}
	a := co.held
	if co.member.Role() == messages.RoleMaster {
		a = co.master.Current()
		a.Coverage = co.master.Coverage()
	}
	st.Master, st.Epoch, st.Coverage = a.Master, a.Epoch, a.Coverage
	if a.Members != nil {
		st.Members = a.Members
	}
	return st
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
		co.feed(Stop{})
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
