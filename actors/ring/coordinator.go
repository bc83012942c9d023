package ring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/lock"
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
	// auto to master on a store that does not elect. With an Elector, an
	// auto instance whose Self.Services lack one of messages.AllServices
	// never stands for master: it follows as a slave (see memberRole).
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
	// is stopping (an answer of kind transport.Unavailable, a 503: a
	// graceful stop drains its deliveries before it gives up the lock)
	// without counting its failures towards Reconnect.MaxAttempts: the
	// master's shutdown timeout and a margin (zero:
	// DefaultMasterStopGrace).
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
	// Roster, when set, learns the members of every assignment applied
	// (their capabilities: Roster).
	Roster *Roster
	// Stopping, when set, says whether the node is stopping: a master
	// then publishes no new assignment. Its slaves' polls end because
	// its listener closed, not because they are gone, and an assignment
	// dropping them would be what the next master starts from (their
	// capabilities forgotten: Roster).
	Stopping func() bool
	// Frontends is the delivery workers' supervisor: when this
	// instance's delivery partition changed it is sent a messages.Kick
	// for every worker, which claims from its new ranges (nil: none).
	Frontends *actor.PID
	// Peers is the peers actor: when this instance's forward partition
	// changed it is sent a messages.KickPeer for every peer's forwards and
	// one for their status reports (nil without federation).
	Peers *actor.PID
	// Directory is the intake, sent a messages.ReloadDirectory to read the
	// site's directory (routes, frontends) again on every publication this
	// instance receives or (as master) makes, at least every publish
	// interval: other instances change it. Nil when the store is this
	// instance's alone: then only its own intake changes the directory.
	Directory *actor.PID
	// Fatal reports that this instance cannot go on (a refusal by the
	// master, a master unreachable after every attempt, a lost master
	// lock); the node stops and the process exits non-zero.
	Fatal func(error)
	// StoreTimeout bounds each store call (zero: DefaultStoreTimeout).
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
	if c.Store == nil || c.Clock == nil || c.Logger == nil || c.Metrics == nil || c.Shares == nil || c.Fatal == nil {
		errs = append(errs, errors.New("ring: Store, Clock, Logger, Metrics, Shares and Fatal are required"))
	}
	return errors.Join(errs...)
}

// Coordinator is the ring actor of one instance: the master (its Master
// core, the subscriptions of its slaves, publication to the store) and,
// on every instance, the partitions this instance works. Build it with
// New.
//
// Store and transport calls run off the mailbox (off): each comes back as
// a message, and the shell acts on it only when it is still of interest —
// of this incarnation, of the generation Member awaits, of the master core
// that published — so status requests, subscriptions, joins and stops are
// handled while a call is slow. Two calls stay on the actor's goroutine:
// the goodbye to the master and the release of the lock as it stops, its
// last acts (nothing else is handled after them, and a restart must find
// the lock free).
type Coordinator struct {
	cfg  Config
	log  *slog.Logger
	self *actor.PID
	sys  *actor.ActorSystem
	wake *clock.Wakeup

	// member is the role and slave state machine (the pure core).
	member *Member
	// keeper takes, watches and releases the master lock (nil without an
	// elector); lead is the holding of it while this instance leads.
	keeper *lock.Keeper
	lead   *lock.Hold

	// master
	master  *Master
	waiters map[*messages.RingPollRequest]waiter
	// publishing: a publication of master is under way (one at a time);
	// started and finished count the publications begun and ended.
	publishing        bool
	started, finished uint64
	// joins wait for the publication that includes their joiner.
	joins []pendingJoin
	// early are the requests that came while Member decided whether this
	// instance leads (Deciding), in order.
	early []any
	// refreshAt is the master's next republication to every subscription
	// (and reading of the directory): every publish interval, or at once
	// after a touch.
	refreshAt time.Time

	// held is the assignment this instance works from.
	held messages.RingAssignment
	// reassigned is the part of the current master core's count of moved
	// ranges already added to the metric (0 for a new core).
	reassigned int

	// calls is the context of every call run off the mailbox and of the
	// lock's watcher; cancelled when the actor stops (or restarts), so
	// nothing outlives it or sends to it once it is gone, and what an
	// earlier incarnation started is told apart.
	calls       context.Context
	cancelCalls context.CancelFunc
}

type waiter struct {
	id       string
	deadline time.Time
}

// pendingJoin is a join admitted by the master core, answered once the
// publication started after it has ended (need: its number).
type pendingJoin struct {
	req  *messages.RingJoinRequest
	need uint64
}

// Private messages.
type (
	wakeMsg struct{}
	// offDone is the end of an effect run off the mailbox by the
	// incarnation whose calls context is calls, for Member's generation
	// gen (0: the master's publication); v is what it returned.
	offDone struct {
		calls context.Context
		gen   uint64
		v     any
	}
	leadLost struct{ lead *lock.Hold }
)

// What the effects run off the mailbox return (besides the Member events
// that need nothing of the shell: MasterAddr, StorePing).
type (
	leadTried struct {
		lead *lock.Hold
		err  error // the store did not answer (nil with lead, or when the lock is held)
	}
	ringRead struct {
		stored persistence.RingState
		err    error
	}
	called struct {
		join bool
		addr string
		a    messages.RingAssignment
		err  error
	}
	published struct {
		master *Master
		a      messages.RingAssignment
		err    error
		// overtaken: the compare-and-set failed under this instance's
		// lock, which the store confirmed, and the store holds another
		// master's assignment under epoch stored.
		overtaken bool
		stored    uint64
	}
)

// DefaultStoreTimeout bounds each of the coordinator's store calls: 10 s,
// a third of the default publish interval (30 s), so that a call stuck on
// the store ends, and is tried again, within one publication.
const DefaultStoreTimeout = 10 * time.Second

// DefaultMasterStopGrace is how long a slave waits for a master that said
// it is stopping: 40 s, the node's default shutdown timeout (30 s) and a
// margin of 10 s for the lock's release.
const DefaultMasterStopGrace = 40 * time.Second

// New returns the coordinator's producer.
func New(cfg Config) (actor.Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	if cfg.MasterStopGrace <= 0 {
		cfg.MasterStopGrace = DefaultMasterStopGrace
	}
	log := cfg.Logger.With("component", "ring", "instance_id", cfg.Self.InstanceID)
	var keeper *lock.Keeper
	if cfg.Elector != nil {
		var err error
		keeper, err = lock.New(lock.Config{Elector: cfg.Elector, Name: LockName, Clock: cfg.Clock,
			Timeout: cfg.StoreTimeout, Logger: log})
		if err != nil {
			return nil, err
		}
	}
	role, missing := memberRole(cfg.Role, cfg.Elector != nil, cfg.Self.Services)
	if missing != nil {
		log.Info("this instance does not stand for ring master and follows as a slave: a master must run every service, and it lacks some",
			"role", cfg.Role, "services", cfg.Self.Services, "missing", missing)
	}
	return func() actor.Actor {
		rng := rand.New(rand.NewPCG(cfg.Seed, messages.TokenOf(cfg.Self.InstanceID)))
		return &Coordinator{
			cfg:    cfg,
			log:    log,
			keeper: keeper,
			member: NewMember(MemberConfig{Role: role, MasterAddr: cfg.MasterAddr, Elects: cfg.Elector != nil,
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
	case *offDone:
		if m.calls == co.calls {
			co.done(m.gen, m.v)
		}
	case leadLost:
		if m.lead == co.lead {
			co.feed(LeadLost{})
		}
	case *messages.RingStatusRequest:
		m.Reply <- co.status()
	case *messages.RingJoinRequest, *messages.RingPollRequest, *messages.RingPollGone, *messages.RingLeaveRequest, *messages.RingTouch:
		if co.member.Deciding() {
			// Whether this instance leads is being decided: the request
			// waits for the answer, in order.
			co.early = append(co.early, m)
			return
		}
		co.request(m)
	}
	for len(co.early) > 0 && !co.member.Deciding() {
		m := co.early[0]
		co.early = co.early[1:]
		co.request(m)
	}
}

// request handles a request of the ring API or of this node.
func (co *Coordinator) request(m any) {
	switch m := m.(type) {
	case *messages.RingJoinRequest:
		co.join(m)
		co.feed(Wake{})
	case *messages.RingPollRequest:
		co.poll(m)
		co.feed(Wake{})
	case *messages.RingPollGone:
		if w, ok := co.waiters[m.Request]; ok {
			delete(co.waiters, m.Request)
			co.master.PollClosed(co.cfg.Clock.Now(), w.id)
			co.feed(Wake{}) // its grace runs from now: look again then
		}
	case *messages.RingLeaveRequest:
		m.Reply <- co.leave(m.Leave)
		co.feed(Wake{})
	case *messages.RingTouch:
		co.touch()
	}
}

// feed steps the role machine with ev and carries out its effects.
func (co *Coordinator) feed(ev Event) {
	for _, e := range co.member.Step(co.cfg.Clock.Now(), ev) {
		co.do(e)
	}
}

// do carries out one effect of the role machine: an effect that asks
// something runs off the mailbox, and its answer comes back through done.
func (co *Coordinator) do(e Effect) {
	switch e := e.(type) {
	case TryLead:
		co.tryLead(e.Gen)
	case BecomeMaster:
		st := co.cfg.Store
		co.off(e.Gen, co.cfg.StoreTimeout, func(ctx context.Context) any {
			stored, err := st.Ring(ctx)
			return ringRead{stored: stored, err: err}
		})
	case BecameSlave:
		co.cfg.Metrics.setRole(messages.RoleSlave)
		co.log.Info("ring slave", "master", co.cfg.MasterAddr)
	case StepMaster:
		if next := co.stepMaster(co.cfg.Clock.Now()); !next.IsZero() {
			co.wake.Schedule(next)
		}
	case StandDown:
		co.answerWaiters()
		co.cfg.Metrics.setRole("") // no role until the next (BecameSlave, or the lock taken again)
		if lead := co.lead; lead != nil {
			go lead.Release() // lost already, or published over: nothing waits for it
			co.lead = nil
		}
		co.master = nil
		co.cfg.Shares.Clear()
	case ResolveMaster:
		st, self, log := co.cfg.Store, co.cfg.Self.InstanceID, co.log
		co.off(e.Gen, co.cfg.StoreTimeout, func(ctx context.Context) any {
			return MasterAddr{Gen: e.Gen, Addr: resolveMaster(ctx, st, self, log)}
		})
	case PingStore:
		st, log := co.cfg.Store, co.log
		co.off(e.Gen, 2*time.Second, func(ctx context.Context) any {
			err := st.Ping(ctx)
			if err != nil {
				log.Warn("the store does not answer; not confirming the ring assignment until it does", "err", err)
			}
			return StorePing{Gen: e.Gen, OK: err == nil}
		})
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
		// over at once instead of after its grace. Only a final stop asks
		// for it: the actor's last act, on its goroutine, so that it is
		// said before the node goes on stopping.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := co.cfg.Transport.RingLeave(ctx, e.Addr, messages.RingLeave{InstanceID: co.cfg.Self.InstanceID}); err != nil {
			co.log.Debug("ring leave failed (the master drops this instance after its grace)", "err", err)
		}
		cancel()
	case Log:
		co.log.Log(context.Background(), e.Level, e.Msg, e.Args...)
	}
}

// off runs f off the mailbox, with a context bounded by timeout (none when
// zero) that ends with this incarnation; what f returns comes back as an
// *offDone for generation gen, unless the actor stopped first.
func (co *Coordinator) off(gen uint64, timeout time.Duration, f func(ctx context.Context) any) {
	self, sys, calls := co.self, co.sys, co.calls
	go func() {
		ctx, cancel := calls, context.CancelFunc(func() {})
		if timeout > 0 {
			ctx, cancel = context.WithTimeout(calls, timeout)
		}
		v := f(ctx)
		cancel()
		if calls.Err() == nil {
			sys.Root.Send(self, &offDone{calls: calls, gen: gen, v: v})
		}
	}()
}

// done takes the end of an effect run off the mailbox: a result Member no
// longer awaits (of an older generation, or it stopped or gave up) is
// dropped, a lock it brings released.
func (co *Coordinator) done(gen uint64, v any) {
	switch v := v.(type) {
	case Event: // MasterAddr, StorePing: Member checks the generation itself
		co.feed(v)
	case leadTried:
		if !co.member.Awaits(gen) {
			if v.lead != nil {
				go v.lead.Release()
			}
			return
		}
		co.lead = v.lead
		co.feed(LeadResult{Gen: gen, Won: v.lead != nil, Err: v.err})
	case ringRead:
		if !co.member.Awaits(gen) {
			return
		}
		if v.err == nil {
			co.becomeMaster(v.stored)
		}
		co.feed(MasterReady{Gen: gen, Err: v.err})
	case called:
		if !co.member.Awaits(gen) {
			return
		}
		if v.err == nil {
			if v.join {
				co.log.Info("joined the ring", "master", v.a.Master, "address", v.addr, "epoch", v.a.Epoch)
			}
			co.apply(v.a)
			co.refresh()
		}
		co.feed(CallDone{Gen: gen, Join: v.join, Kind: transport.KindOf(v.err), Err: v.err})
	case published:
		co.onPublished(v)
	}
}

// tryLead takes the master lock if it is free (one try of the keeper), off
// the mailbox. A lock taken is watched until this incarnation ends: its
// loss comes back as leadLost; at the end it is released (again, when stop
// did: Release is idempotent), so that a lock whose answer came too late
// is not held.
func (co *Coordinator) tryLead(gen uint64) {
	k, log, self, sys, quit := co.keeper, co.log, co.self, co.sys, co.calls
	co.off(gen, co.cfg.StoreTimeout, func(ctx context.Context) any {
		lead, err := k.Take(ctx, nil)
		if err != nil {
			if errors.Is(err, lock.ErrHeld) {
				return leadTried{}
			}
			cause := errors.Unwrap(err)
			if cause == nil {
				cause = err
			}
			log.Warn("taking the ring master lock failed", "err", cause)
			return leadTried{err: cause}
		}
		go func() {
			if lead.Wait(quit) {
				sys.Root.Send(self, leadLost{lead: lead})
			}
		}()
		return leadTried{lead: lead}
	})
}

// becomeMaster leads from the stored assignment.
func (co *Coordinator) becomeMaster(stored persistence.RingState) {
	co.master = NewMaster(MasterConfig{Self: co.cfg.Self, PublishInterval: co.cfg.PublishInterval}, stored)
	co.reassigned = 0 // the new core counts from zero
	co.publishing = false
	co.cfg.Metrics.setRole(messages.RoleMaster)
	co.cfg.Shares.SetMaster(true)
	co.log.Info("ring master", "stored_epoch", stored.Epoch, "address", co.cfg.Self.Address)
	for _, svc := range messages.AllServices {
		if !slices.Contains(co.cfg.Self.Services, svc) {
			co.log.Warn("the ring master does not run a service: its work waits, since no slave may run a service its master lacks",
				"service", svc)
		}
	}
}

// stepMaster starts the publication of a new assignment when membership
// changed (and none is under way), answers the subscriptions that wait
// for it or whose time is up and the joins whose publication ended, and
// returns when to look again.
func (co *Coordinator) stepMaster(now time.Time) time.Time {
	var next time.Time // a publication under way: its end steps again
	if !co.publishing && (co.cfg.Stopping == nil || !co.cfg.Stopping()) {
		if a, ok := co.master.Next(now); ok {
			co.publish(a, now)
		} else {
			next = co.master.NextCheck(now)
		}
	}
	cur := co.master.Current()
	cur.Coverage = co.master.Coverage()
	co.cfg.Metrics.held(cur, cur.Coverage)
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
	co.answerJoins(false)
	if co.refreshAt.IsZero() || republish {
		// The master reads the directory on its own cadence too.
		co.refreshAt = now.Add(co.cfg.PublishInterval)
		if republish {
			co.refresh()
		}
	}
	return clock.Earliest(next, co.refreshAt)
}

// publish stores a off the mailbox, with a compare-and-set on the epoch
// before it (Next numbers it right after the stored or last published
// one) and, with an elector, under the master lock, which the store
// confirms in the same transaction; its end comes back to onPublished.
func (co *Coordinator) publish(a messages.RingAssignment, now time.Time) {
	co.publishing = true
	co.started++
	var lead persistence.Leadership
	if co.lead != nil {
		lead = co.lead.Leadership()
	}
	state := State(a, now)
	if co.cfg.Roster != nil {
		state.Absent = co.cfg.Roster.Missing(a.Members, now)
	}
	st, self, master, timeout := co.cfg.Store, co.cfg.Self.InstanceID, co.master, co.cfg.StoreTimeout
	co.off(0, 0, func(calls context.Context) any {
		ctx, cancel := context.WithTimeout(calls, timeout)
		err := st.PublishRing(ctx, lead, a.Epoch-1, state)
		cancel()
		p := published{master: master, a: a, err: err}
		if !errors.Is(err, persistence.ErrStaleEpoch) {
			return p
		}
		ctx, cancel = context.WithTimeout(calls, timeout)
		stored, rerr := st.Ring(ctx)
		cancel()
		switch {
		case rerr == nil && stored.Epoch == a.Epoch && stored.Master == self:
			// An earlier try may have committed with only its answer lost.
			// It may have stored another assignment than a under the same
			// epoch (the membership changed before this retry): the store
			// fences claims with what it holds, so that is what is current
			// now, and the next step publishes the difference.
			p.a, p.err = FromState(stored, a.Cluster, a.Region), nil
		case lead == nil:
			// Nothing says that this instance may publish over the
			// other's: it stands down.
		case rerr != nil:
			// The lock is held: try again, and read again.
			p.err = fmt.Errorf("reading the stored ring assignment after a stale compare-and-set: %w", rerr)
		default:
			// The store confirmed the lock in the transaction that found
			// the epoch moved on: an old master's publication, which
			// confirmed its lock before this instance took it, committed
			// after this instance read the store. This instance leads,
			// and publishes over it.
			p.overtaken, p.stored = true, stored.Epoch
		}
		return p
	})
}

// onPublished takes the end of a publication: the assignment is current and
// this instance works from it. A lock the store found lost makes this
// instance stand down, and so does a newer assignment published by another
// master unless the store confirmed this instance's lock (then this one
// publishes over it). A publication of a master core that is gone (stood
// down, or a new one since) is of no interest.
func (co *Coordinator) onPublished(p published) {
	if co.master == nil || p.master != co.master || !co.member.Serving() {
		return
	}
	co.publishing = false
	if p.overtaken {
		// Not counted as ended: the joins that wait for it wait for the
		// publication that replaces it, started now.
		co.log.Warn("another master's ring assignment was stored over this one's view while this instance holds the master lock; publishing over it",
			"stored_epoch", p.stored, "epoch", p.a.Epoch)
		co.master.Rebase(p.stored)
		co.feed(Wake{})
		return
	}
	co.finished = co.started
	now := co.cfg.Clock.Now()
	switch {
	case errors.Is(p.err, persistence.ErrLeadershipLost):
		co.log.Error("the store found the ring master lock lost; this one stands down", "epoch", p.a.Epoch)
		co.feed(LeadLost{})
		return
	case errors.Is(p.err, persistence.ErrStaleEpoch):
		co.log.Error("another master published a newer ring assignment; this one stands down", "epoch", p.a.Epoch-1)
		co.feed(LeadLost{})
		return
	case p.err != nil:
		co.log.Log(context.Background(), persistence.FailureLevel(p.err), "publishing the ring assignment failed; trying again", "epoch", p.a.Epoch, "err", p.err)
		co.answerJoins(true) // with the assignment there is
		co.wake.Schedule(now.Add(time.Second))
		return
	}
	co.master.Published(now, p.a)
	co.cfg.Metrics.reassigned.Add(float64(co.master.Reassignments() - co.reassigned))
	co.reassigned = co.master.Reassignments()
	co.log.Info("ring assignment published", "epoch", p.a.Epoch, "members", len(p.a.Members))
	co.apply(co.master.Current())
	co.master.Applied(p.a.Epoch)
	co.feed(Wake{})
}

// answerJoins answers the joins whose publication ended, or for which
// none was needed (their document changed nothing); all of them when
// publishing failed.
func (co *Coordinator) answerJoins(all bool) {
	if len(co.joins) == 0 {
		return
	}
	cur := co.master.Current()
	cur.Coverage = co.master.Coverage()
	kept := co.joins[:0]
	for _, j := range co.joins {
		if all || co.finished >= j.need || (!co.publishing && co.started < j.need) {
			j.req.Reply <- messages.RingAnswer{Assignment: cur}
			continue
		}
		kept = append(kept, j)
	}
	clear(co.joins[len(kept):])
	co.joins = kept
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

// join admits a slave (as master); it is answered once the assignment
// that includes it is published (answerJoins).
func (co *Coordinator) join(req *messages.RingJoinRequest) {
	if !co.member.Serving() {
		req.Reply <- messages.RingAnswer{Err: co.notMaster()}
		return
	}
	j := req.Join
	if err := co.master.Join(co.cfg.Clock.Now(), j); err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			co.log.Warn("ring join refused", "instance", j.InstanceID, "code", r.Code, "reason", r.Message)
			err = messages.Errorf(r.Code, "%s", r.Message)
		}
		req.Reply <- messages.RingAnswer{Err: err}
		return
	}
	co.log.Info("ring member joined", "member", j.InstanceID, "address", j.Address, "zone", j.Zone, "services", j.Services)
	co.joins = append(co.joins, pendingJoin{req: req, need: co.started + 1})
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
// as called.
func (co *Coordinator) callMaster(c CallMaster) {
	tr := co.cfg.Transport
	if c.Join {
		j := co.cfg.Self
		co.off(c.Gen, 30*time.Second, func(ctx context.Context) any {
			a, err := tr.RingJoin(ctx, c.Addr, j)
			return called{join: true, addr: c.Addr, a: a, err: err}
		})
		return
	}
	p := messages.RingPoll{InstanceID: co.cfg.Self.InstanceID, Epoch: co.held.Epoch, WaitMs: co.cfg.PublishInterval.Milliseconds()}
	co.off(c.Gen, 0, func(ctx context.Context) any {
		a, err := tr.RingPoll(ctx, c.Addr, p)
		return called{addr: c.Addr, a: a, err: err}
	})
}

// resolveMaster is the address the master published in the store ("" when
// none is, or it is this instance's own earlier run).
func resolveMaster(ctx context.Context, st persistence.Store, self string, log *slog.Logger) string {
	stored, err := st.Ring(ctx)
	if err != nil {
		log.Warn("reading the ring master's address failed", "err", err)
		return ""
	}
	if stored.Master == self {
		return "" // our own earlier run: whoever leads now has not published yet
	}
	return stored.MasterAddress
}

// apply makes a the assignment this instance works from.
func (co *Coordinator) apply(a messages.RingAssignment) {
	if a.Epoch < co.held.Epoch {
		co.log.Warn("ignoring an older ring assignment", "epoch", a.Epoch, "held", co.held.Epoch)
		return
	}
	co.held = a
	changed := co.cfg.Shares.Apply(a, co.cfg.Self.InstanceID, co.cfg.Self.Services)
	if co.cfg.Roster != nil {
		co.cfg.Roster.Apply(a.Members, co.cfg.Clock.Now())
	}
	co.cfg.Metrics.held(a, a.Coverage)
	if len(changed) > 0 {
		co.log.Info("ring partitions changed", "epoch", a.Epoch, "services", changed)
		co.kick(changed)
	}
}

// kick wakes the workers of the services whose partition changed: they
// claim from the ranges this instance holds now.
func (co *Coordinator) kick(services []string) {
	for _, s := range services {
		switch s {
		case messages.ServiceDelivery:
			if co.cfg.Frontends != nil {
				co.sys.Root.Send(co.cfg.Frontends, &messages.Kick{})
			}
		case messages.ServiceForward:
			if co.cfg.Peers != nil {
				co.sys.Root.Send(co.cfg.Peers, &messages.KickPeer{})
				co.sys.Root.Send(co.cfg.Peers, &messages.KickPeer{Status: true})
			}
		}
	}
}

// refresh has the intake read the site's directory again.
func (co *Coordinator) refresh() {
	if co.cfg.Directory != nil {
		co.sys.Root.Send(co.cfg.Directory, &messages.ReloadDirectory{})
	}
}

func (co *Coordinator) status() messages.RingStatus {
	st := messages.RingStatus{InstanceID: co.cfg.Self.InstanceID, Role: co.member.Role(), Members: []messages.RingMember{}}
	a := co.held
	if co.member.Role() == messages.RoleMaster {
		a = co.master.Current()
		a.Coverage = co.master.Coverage()
		st.Subscribed = co.master.Subscribed()
	}
	st.Master, st.Epoch, st.Coverage = a.Master, a.Epoch, a.Coverage
	if a.Members != nil {
		st.Members = a.Members
	}
	return st
}

// answerWaiters ends the subscriptions and the joins that wait: this
// instance stops leading.
func (co *Coordinator) answerWaiters() {
	stopping := messages.RingAnswer{Err: messages.Errorf(messages.CodeUnavailable, "the ring master is stopping")}
	for req := range co.waiters {
		req.Reply <- stopping
		delete(co.waiters, req)
	}
	for _, j := range co.joins {
		j.req.Reply <- stopping
	}
	co.joins = nil
	for _, m := range co.early {
		switch m := m.(type) {
		case *messages.RingJoinRequest:
			m.Reply <- stopping
		case *messages.RingPollRequest:
			m.Reply <- stopping
		case *messages.RingLeaveRequest:
			m.Reply <- stopping.Err
		}
	}
	co.early = nil
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
		_ = co.lead.Release() // on the actor's goroutine: a restart must find it free
		co.lead = nil
	}
}
