package discovery

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
)

// Rediscover asks for a full poll now (at most one a second). The node
// sends it when a node it does not know calls (usually a peer that has
// just started), and the peers actor when a peer's address answers as
// another node (as *messages.PeerRediscover). Value or pointer.
type Rediscover = messages.PeerRediscover

// Resync asks the actor to send *PeerUp for every current peer again, for
// a sink that restarted and lost what it was told (the peers actor sends
// it as *messages.PeerResync). Value or pointer.
type Resync = messages.PeerResync

// GetSnapshot asks for the actor's current view. Reply must have room for
// one value (buffered): the actor never blocks on it.
type GetSnapshot struct {
	Reply chan<- Snapshot
}

// Snapshot is discovery's view, for /api/peers and troubleshooting. It is
// a copy: plain data, safe to keep.
type Snapshot struct {
	// Node is our own name.
	Node string
	// Static and SRV are the configured sources.
	Static []string
	SRV    string
	// Addresses are the addresses listed by the last good poll.
	Addresses []string
	// Peers is the peer set, by node name.
	Peers []Peer
	// Refused are the addresses that answered and are not used.
	Refused []Refusal
	// Unreachable are listed addresses whose last identity call failed,
	// by address (a known peer among them is still a peer).
	Unreachable []Unreachable
	// DNSError is the last lookup's error, or that of its targets that
	// kept their last addresses; empty when it fully succeeded.
	DNSError string
	// Polls counts the full polls completed since the actor started;
	// LastPoll is when the last one completed.
	Polls    uint64
	LastPoll time.Time
}

// Unreachable is an address whose identity call failed.
type Unreachable struct {
	Address string
	Error   string
}

// Private messages. Each carries the session of the actor instance that
// caused it: one sent by the instance before a restart is ignored.
type (
	tick      struct{ session uint64 }
	roundDone struct {
		session uint64
		full    bool
		// asked are the addresses the round asked: for a full round the
		// listing, or the last good one when listErr is set.
		asked   []string
		listErr error
		// targetErr is the failure of some SRV targets' lookups (they
		// kept their last addresses) in a listing that worked.
		targetErr error
		learned   map[string]messages.Identity
		failed    map[string]error
	}
)

// sessions numbers actor instances (a restart makes a new one).
var sessions atomic.Uint64

// memory is what survives a restart of the actor: the peer set the sink
// has been told about, so that the restarted actor reports only changes
// (including peers that went while it restarted) and keeps the identities
// of peers that are down.
type memory struct {
	mu sync.Mutex
	// owner is the PID of the actor the memory belongs to; a new actor
	// spawned from the same producer starts empty.
	owner *actor.PID
	set   *PeerSet
}

func (m *memory) load(owner *actor.PID, node string) *PeerSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owner != owner || m.set == nil {
		m.owner, m.set = owner, NewPeerSet(node)
	}
	return m.set.Clone()
}

func (m *memory) save(s *PeerSet) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.set = s.Clone()
}

// Actor is the discovery actor: it lists addresses (static and SRV),
// asks each who it is, and sends the changes of the peer set to the sink.
// Build it with New.
type Actor struct {
	cfg Config
	res *resolver
	log *slog.Logger
	mem *memory

	set     *PeerSet
	session uint64
	self    *actor.PID
	sys     *actor.ActorSystem
	wake    *clock.Wakeup
	ctx     context.Context
	cancel  context.CancelFunc
	// rounds tracks the goroutines of rounds under way.
	rounds sync.WaitGroup

	running  bool // a round is under way
	again    bool // a full poll was asked for meanwhile
	nextFull time.Time
	lastFull time.Time // start of the last full poll
	dnsErr   string
	// dnsTargetsOnly: dnsErr is the failure of some targets only.
	dnsTargetsOnly bool
	unreachable    map[string]string
	polls          uint64
	lastPoll       time.Time
}

// New validates cfg and returns the producer of the discovery actor. Use
// one producer per spawn.
func New(cfg Config) (actor.Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	server := ""
	if cfg.DNSServer != "" {
		server, _ = ParseDNSServer(cfg.DNSServer) // validated
	}
	res := &resolver{server: server, resolvConf: resolvConf, apiPort: cfg.APIPort, timeout: cfg.DNSTimeout}
	cfg.Static = slices.Clone(cfg.Static)
	mem := &memory{}
	log := cfg.Logger.With("component", "discovery")
	return func() actor.Actor {
		return &Actor{cfg: cfg, res: res, log: log, mem: mem}
	}, nil
}

// Receive implements actor.Actor.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *actor.Restarting, *actor.Stopping:
		a.stop()
	case tick:
		if m.session == a.session {
			a.onTick()
		}
	case *roundDone:
		if m.session == a.session {
			a.onRound(c, m)
		}
	case Rediscover, *Rediscover:
		a.requestFull()
	case Resync, *Resync:
		for _, p := range a.set.Peers() {
			c.Send(a.cfg.Sink, &PeerUp{Node: p.Node, Instances: p.Instances})
		}
	case *GetSnapshot:
		a.reply(m.Reply)
	case GetSnapshot:
		a.reply(m.Reply)
	}
}

func (a *Actor) start(c actor.Context) {
	a.self, a.sys = c.Self(), c.ActorSystem()
	a.session = sessions.Add(1)
	a.set = a.mem.load(a.self, a.cfg.Node)
	a.unreachable = map[string]string{}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	self, sys, session := a.self, a.sys, a.session
	a.wake = clock.NewWakeup(a.cfg.Clock, func(uint64) { sys.Root.Send(self, tick{session}) })
	a.log.Info("discovery started", "srv", a.cfg.SRV, "static", a.cfg.Static, "poll_interval", a.cfg.PollInterval)
	// Every configured address is visible from the start, before the first
	// round has asked it anything (after a restart: those still unknown).
	pending := normalize(a.cfg.Static)
	if len(a.set.Listed()) > 0 {
		pending = a.set.Unidentified()
	}
	unknown := &messages.PeerAddresses{}
	for _, addr := range pending {
		unknown.Unidentified = append(unknown.Unidentified, messages.AddressCheck{Address: addr})
	}
	c.Send(a.cfg.Sink, unknown)
	a.startRound(true)
}

// stop releases what outlives the actor instance: its timer and its
// calls under way (cancelled, and waited for, so that no goroutine of ours
// outlives the actor).
func (a *Actor) stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.wake.Cancel()
	a.rounds.Wait()
	a.cancel = nil
}

func (a *Actor) onTick() {
	if a.running {
		return // the round's end schedules the next
	}
	now := a.cfg.Clock.Now()
	switch {
	case !now.Before(a.nextFull):
		a.startRound(true)
	case len(a.set.Unidentified()) > 0:
		a.startRound(false)
	default:
		a.schedule(now)
	}
}

// requestFull starts a full poll now, or as soon as rediscoverGap allows.
func (a *Actor) requestFull() {
	if a.running {
		a.again = true
		return
	}
	if at := a.lastFull.Add(rediscoverGap); a.cfg.Clock.Now().Before(at) {
		a.nextFull = clock.Earliest(a.nextFull, at)
		a.wake.Schedule(a.nextFull)
		return
	}
	a.startRound(true)
}

// schedule arms the wake-up for the next full poll, or sooner for the
// retry of addresses that never answered.
func (a *Actor) schedule(now time.Time) {
	at := a.nextFull
	if len(a.set.Unidentified()) > 0 {
		at = clock.Earliest(at, now.Add(min(a.cfg.PollInterval, unidentifiedRetry)))
	}
	a.wake.Schedule(at)
}

// startRound starts a round in its own goroutine. A full round lists the
// addresses and asks every one; a retry round asks only the listed
// addresses that never answered.
func (a *Actor) startRound(full bool) {
	now := a.cfg.Clock.Now()
	a.running = true
	var targets, fallback []string
	if full {
		a.lastFull, a.nextFull = now, now.Add(a.cfg.PollInterval)
		// Without a listing, the last good one; the static peers are in it
		// even when DNS failed from the start.
		fallback = normalize(append(slices.Clone(a.cfg.Static), a.set.Listed()...))
	} else {
		targets = a.set.Unidentified()
	}
	ctx, self, sys, session := a.ctx, a.self, a.sys, a.session
	a.rounds.Add(1)
	go func() {
		defer a.rounds.Done()
		r := &roundDone{session: session, full: full, asked: targets}
		if full {
			if r.asked, r.targetErr, r.listErr = a.list(ctx); r.listErr != nil {
				r.asked = fallback
			}
		}
		r.learned, r.failed = a.identify(ctx, r.asked)
		sys.Root.Send(self, r)
	}()
}

// list returns the static addresses and those of the SRV name, and the
// failure of the SRV targets that kept their last addresses (see
// resolver.lookup). It runs in a round's goroutine.
func (a *Actor) list(ctx context.Context) (addrs []string, targetErr, err error) {
	addrs = slices.Clone(a.cfg.Static)
	if a.cfg.SRV != "" {
		ctx, cancel := context.WithTimeout(ctx, max(a.cfg.PollInterval, a.cfg.DNSTimeout))
		defer cancel()
		srv, targetErr, err := a.res.lookup(ctx, a.cfg.SRV)
		if err != nil {
			return nil, nil, err
		}
		return normalize(append(addrs, srv...)), targetErr, nil
	}
	return normalize(addrs), nil, nil
}

// identify asks every address who it is, concurrently. It runs in a
// round's goroutine.
func (a *Actor) identify(ctx context.Context, addrs []string) (map[string]messages.Identity, map[string]error) {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		learned = map[string]messages.Identity{}
		failed  = map[string]error{}
	)
	for _, addr := range addrs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, a.cfg.IdentityTimeout)
			defer cancel()
			id, err := a.cfg.Transport.Identity(ctx, addr)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[addr] = err
			} else {
				learned[addr] = id
			}
		})
	}
	wg.Wait()
	return learned, failed
}

func (a *Actor) onRound(c actor.Context, r *roundDone) {
	a.running = false
	now := a.cfg.Clock.Now()
	if r.full {
		a.polls++
		a.lastPoll = now
		a.noteDNS(r.listErr, r.targetErr, r.asked)
	}
	before := map[string]bool{}
	for _, p := range a.set.Peers() {
		before[p.Node] = true
	}
	var out Outcome
	if r.full {
		out = a.set.Apply(r.asked, r.learned)
	} else {
		out = a.set.Retry(r.learned)
	}
	a.mem.save(a.set)
	a.noteUnreachable(r)

	for _, e := range out.Effects {
		switch e := e.(type) {
		case *PeerUp:
			msg := "peer discovered"
			if before[e.Node] {
				msg = "peer instances changed"
			}
			a.log.Info(msg, "peer", e.Node, "instances", instanceAttr(e.Instances))
		case *PeerGone:
			a.log.Info("peer gone: no listed address reports it", "peer", e.Node)
		}
		c.Send(a.cfg.Sink, e)
	}
	// The addresses still unknown, with what this round learned of them.
	unknown := &messages.PeerAddresses{}
	for _, addr := range a.set.Unidentified() {
		ch := messages.AddressCheck{Address: addr}
		if err, asked := r.failed[addr]; asked {
			ch.Checked, ch.Err = true, err.Error()
		}
		unknown.Unidentified = append(unknown.Unidentified, ch)
	}
	c.Send(a.cfg.Sink, unknown)
	for _, rf := range out.Refused {
		level := slog.LevelWarn
		if rf.Reason == RefusedOwnNode {
			level = slog.LevelInfo // every node finds itself in a shared SRV name
		}
		// reported_node: the logger names this node as "node" already.
		a.log.Log(context.Background(), level, "address refused", "address", rf.Address, "reason", rf.Reason,
			"reported_node", rf.Node, "instance_id", rf.InstanceID, "kept", rf.Kept, "detail", rf.Detail)
	}

	if a.again {
		a.again = false
		a.requestFull()
		return
	}
	a.schedule(now)
}

// noteDNS logs a lookup's failure (err: the last list is kept), its
// targets' (targetErr: those targets kept their last addresses) or its
// recovery, once per change.
func (a *Actor) noteDNS(err, targetErr error, kept []string) {
	if err == nil && targetErr == nil {
		if a.dnsErr != "" {
			a.log.Info("dns lookup recovered", "srv", a.cfg.SRV)
		}
		a.dnsErr, a.dnsTargetsOnly = "", false
		return
	}
	targetsOnly := err == nil
	if targetsOnly {
		err = targetErr
	}
	if msg := err.Error(); msg != a.dnsErr || targetsOnly != a.dnsTargetsOnly {
		if targetsOnly {
			a.log.Warn("dns lookup of a target failed; keeping its last addresses", "srv", a.cfg.SRV,
				"err", err, "addresses", len(kept))
		} else {
			a.log.Warn("dns lookup failed; keeping the last address list", "srv", a.cfg.SRV,
				"err", err, "addresses", len(kept))
		}
		a.dnsErr, a.dnsTargetsOnly = msg, targetsOnly
	}
}

// noteUnreachable records the addresses whose identity call failed. An
// address that never answered is logged once at warn (nothing else reports
// it: it is no peer yet); a known peer's failures are the peer actor's to
// report.
func (a *Actor) noteUnreachable(r *roundDone) {
	unidentified := map[string]bool{}
	for _, u := range a.set.Unidentified() {
		unidentified[u] = true
	}
	for addr, err := range r.failed {
		if _, was := a.unreachable[addr]; !was {
			if unidentified[addr] {
				a.log.Warn("address does not answer identity calls; retrying", "address", addr, "err", err)
			} else {
				a.log.Debug("identity call failed; keeping the address's last identity", "address", addr, "err", err)
			}
		}
		a.unreachable[addr] = err.Error()
	}
	for addr := range r.learned {
		delete(a.unreachable, addr)
	}
	listed := map[string]bool{}
	for _, l := range a.set.Listed() {
		listed[l] = true
	}
	for addr := range a.unreachable {
		if !listed[addr] {
			delete(a.unreachable, addr)
		}
	}
}

func (a *Actor) reply(ch chan<- Snapshot) {
	s := Snapshot{
		Node: a.cfg.Node, Static: slices.Clone(a.cfg.Static), SRV: a.cfg.SRV,
		Addresses: a.set.Listed(), Peers: a.set.Peers(), Refused: a.set.Refusals(),
		DNSError: a.dnsErr, Polls: a.polls, LastPoll: a.lastPoll,
	}
	for _, addr := range a.set.Listed() {
		if e, ok := a.unreachable[addr]; ok {
			s.Unreachable = append(s.Unreachable, Unreachable{Address: addr, Error: e})
		}
	}
	select {
	case ch <- s:
	default:
		a.log.Warn("snapshot request dropped: its reply channel is full or unbuffered")
	}
}

func instanceAttr(is []messages.PeerInstance) []string {
	out := make([]string, len(is))
	for i, in := range is {
		out[i] = in.Address + "=" + in.InstanceID
	}
	return out
}
