package peer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/supervision"
)

// Supervisor is the "peers" actor: the parent of one peer actor per
// discovered peer. It turns discovery's PeerUp and PeerGone into children,
// keeps the health of the addresses that never answered (PeerAddresses),
// and routes peer-addressed messages to them. A peer gone from discovery
// that calls us gets an actor again, in gone mode (Config.Gone), for the
// delivery_status reports owed to it: its queue is their only sender.
// Build it with NewSupervisor.
//
// Each peer actor has a name of its own, "<peer>#<n>", never one an actor
// before it had (see Names in the package doc), and one actor of a peer
// runs at a time: the next is spawned once the last has stopped
// (stopping), so that the last one's end (Config.Forget) never follows
// the next one's start.
type Supervisor struct {
	cfg   Config
	props func(kind string, p actor.Producer) *actor.Props
	// discovery is where a restart asks for every peer again (unset
	// until discovery is spawned, after this actor).
	discovery *atomic.Pointer[actor.PID]
	children  map[string]*actor.PID
	// back are the peers announced again (PeerUp) while the actor of
	// their last going was still stopping (stopping), by peer: each is
	// spawned when that one has stopped.
	back map[string]*messages.PeerUp
	// stopping are the actors this one told to stop that have not
	// terminated yet, by peer.
	stopping map[string]*actor.PID
	// spawned numbers the peer actors (their names), shared by the
	// supervisor's incarnations: a goroutine of an actor stopped by a
	// restart may still send to it.
	spawned *atomic.Uint64
	// addresses are the health of the listed addresses that never
	// answered (discovery's PeerAddresses), by address.
	addresses map[string]*Health
	// restarted: this incarnation replaces one that panicked.
	restarted bool
	// parking are the gone peers whose pending messages a page is moving
	// to forward_queued (on a goroutine of its own), by peer.
	parking map[string]*goneParking
	// last are the instances discovery last listed for each peer it
	// announced, kept once it goes: where a gone peer that calls us is
	// called back. gone are the children in gone mode.
	last map[string][]messages.PeerInstance
	gone map[string]bool
}

// goneParking is a gone peer's parking (Parking: the peers actor has no
// tick) and its page under way: its token and its cancel (the supervisor
// stops).
type goneParking struct {
	Parking
	token  uint64
	cancel context.CancelFunc
}

// NewSupervisor returns the producer of the peers actor. cfg is the
// template of every peer actor (Peer and Instances are filled per peer);
// props builds a supervised child's props; discovery holds the discovery
// actor's PID once it is spawned (after this actor, which it tells about
// peers): when the actor restarted, it is sent a *messages.PeerResync to
// announce every peer again. It is read at each restart, so that it may
// be set after the start.
func NewSupervisor(cfg Config, props func(kind string, p actor.Producer) *actor.Props,
	discovery *atomic.Pointer[actor.PID]) (actor.Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if props == nil || discovery == nil {
		return nil, errors.New("peer: props and discovery are required")
	}
	var built atomic.Int64
	spawned := new(atomic.Uint64)
	return func() actor.Actor {
		return &Supervisor{cfg: cfg, props: props, discovery: discovery, children: map[string]*actor.PID{},
			addresses: map[string]*Health{}, parking: map[string]*goneParking{}, back: map[string]*messages.PeerUp{},
			stopping: map[string]*actor.PID{}, spawned: spawned,
			last: map[string][]messages.PeerInstance{}, gone: map[string]bool{}, restarted: built.Add(1) > 1}
	}, nil
}

// Receive implements actor.Actor.
func (s *Supervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Restarting:
		// The children are stopped with us; after the restart discovery
		// announces every peer again (resync) and they are respawned.
		s.children, s.back, s.gone = map[string]*actor.PID{}, map[string]*messages.PeerUp{}, map[string]bool{}
		s.stopping = map[string]*actor.PID{}
		s.stopParking()
	case *actor.Stopping:
		s.stopParking()
	case *actor.Started:
		if pid := s.discovery.Load(); s.restarted && pid != nil {
			c.Send(pid, &messages.PeerResync{})
		}
	case *messages.PeerUp:
		s.last[m.Node] = m.Instances
		if pid, ok := s.children[m.Node]; ok && s.gone[m.Node] {
			// Discovered again: an actor of its own replaces its gone-mode
			// one (which may be stopping itself), once that has stopped.
			delete(s.children, m.Node)
			delete(s.gone, m.Node)
			s.stop(c, m.Node, pid)
			s.back[m.Node] = m
			return
		}
		if pid, ok := s.children[m.Node]; ok {
			c.Send(pid, m)
			return
		}
		s.spawn(c, m)
	case *actor.Terminated:
		name := peerOf(c.Self(), m.Who)
		if pid, ok := s.stopping[name]; ok && pid.Equal(m.Who) {
			delete(s.stopping, name)
		}
		if pid, ok := s.children[name]; ok && s.gone[name] && pid.Equal(m.Who) {
			// A gone peer's actor stopped itself: the peer did not
			// answer. Its next call brings one back.
			delete(s.children, name)
			delete(s.gone, name)
		}
		// A peer back while the actor of its going was stopping is
		// spawned now that it has.
		if up, ok := s.back[name]; ok && s.stopping[name] == nil {
			delete(s.back, name)
			s.spawn(c, up)
		}
	case *messages.PeerGone:
		delete(s.back, m.Node) // gone again before its actor could start
		pid, ok := s.children[m.Node]
		if !ok {
			return
		}
		delete(s.children, m.Node)
		s.stop(c, m.Node, pid)
		s.cfg.Book.Gone(m.Node)
		s.cfg.Metrics.forget(m.Node)
		s.park(c, m.Node)
		s.cfg.Logger.Info("peer removed: it reads removed while its queued messages keep waiting until forward_failed",
			"component", "peer", "peer", m.Node)
	case *messages.PeerAddresses:
		s.addressesChecked(m)
	case *goneParked:
		s.parked(c, m)
	case *supervision.Panicked:
		m.Rethrow(s.cfg.Logger.With("component", "peer"), "parking a gone peer's messages")
	case *messages.PeerRediscover:
		if pid := s.discovery.Load(); pid != nil {
			c.Send(pid, m)
		}
	case *messages.KickPeer:
		if m.Peer == "" { // every peer
			for _, pid := range s.children {
				c.Send(pid, m)
			}
			return
		}
		s.route(c, m.Peer, m)
	case *messages.PeerContact:
		if _, ok := s.children[m.Peer]; !ok {
			s.restore(c, m.Peer)
			return
		}
		s.route(c, m.Peer, m)
	case *messages.PeerRegistryFrom:
		s.route(c, m.Peer, m)
	}
}

// addressesChecked keeps the book's entries of the addresses that never
// answered: each counts its failed identity calls from the first one, like
// a peer's health checks (degraded, then unhealthy: the alert fires for an
// address that was down from the start), and goes once its name is known
// or it is no longer listed.
func (s *Supervisor) addressesChecked(m *messages.PeerAddresses) {
	now := s.cfg.Clock.Now()
	listed := map[string]bool{}
	for _, a := range m.Unidentified {
		listed[a.Address] = true
		h := s.addresses[a.Address]
		if h == nil {
			h = &Health{}
			s.addresses[a.Address] = h
		}
		if a.Checked {
			if t, changed := h.Observe(now, errors.New(a.Err)); changed {
				s.cfg.Logger.Warn("peer address state changed: it has never answered", "component", "peer",
					"address", a.Address, "from", t.From, "to", t.To, "err", a.Err)
			}
		}
		s.cfg.Book.SetAddress(a.Address, h)
	}
	for addr := range s.addresses {
		if !listed[addr] {
			delete(s.addresses, addr)
			s.cfg.Book.ForgetAddress(addr)
		}
	}
}

// goneParked is the result of a gone peer's parking page, sent back by
// its goroutine.
type goneParked struct {
	peer  string
	token uint64
	more  bool
	err   error
}

// park moves a gone peer's pending messages to forward_queued, a page at
// a time, each on a goroutine of its own so that peer routing is served
// meanwhile: its queue is stopped, so they would otherwise wait unseen
// instead of counting down to forward_failed. One page of a peer runs at
// a time; a peer that comes and goes again while one runs has another
// page after it (Parking).
func (s *Supervisor) park(c actor.Context, peerName string) {
	p, ok := s.parking[peerName]
	if !ok {
		p = &goneParking{Parking: Parking{NoTick: true}}
		s.parking[peerName] = p
	}
	s.page(c, peerName, p, p.Start())
}

// page runs the page of a gone peer's parking asked for (ask), at once:
// unlike the forward queue, the supervisor asks itself nothing through
// its mailbox. A parking that asks for nothing more is forgotten.
func (s *Supervisor) page(c actor.Context, peerName string, p *goneParking, ask bool) {
	if !ask || !p.Page() {
		if p.Idle() {
			delete(s.parking, peerName)
		}
		return
	}
	var ctx context.Context
	ctx, p.cancel = context.WithTimeout(context.Background(), s.cfg.Timeout)
	p.token = PageToken()
	token, self, root := p.token, c.Self(), c.ActorSystem().Root
	go func() {
		defer supervision.CarryPanic(root, self, nil)
		more, err := Park(ctx, s.cfg.Store, s.cfg.Clock.Now(), peerName, "peer "+peerName+" is gone from discovery", s.cfg.Publish)
		root.Send(self, &goneParked{peer: peerName, token: token, more: more, err: err})
	}()
}

// parked takes a page's result: the next page when it moved a full one,
// or when the peer went again meanwhile (even after a failed page: each
// going parks, as each did when the pages ran here), unless the peer is
// back.
func (s *Supervisor) parked(c actor.Context, m *goneParked) {
	p, ok := s.parking[m.peer]
	if !ok || p.token != m.token {
		return // a page of the supervisor before its restart
	}
	p.cancel()
	if m.err != nil {
		s.cfg.Logger.Error("queueing a gone peer's pending messages failed; they are queued at the next start",
			"component", "peer", "peer", m.peer, "err", m.err)
	}
	s.page(c, m.peer, p, p.Paged(m.more, m.err))
}

// stopParking ends the pages under way (the supervisor stops or restarts).
func (s *Supervisor) stopParking() {
	for _, p := range s.parking {
		p.cancel()
	}
	s.parking = map[string]*goneParking{}
}

// spawn starts the actor of peer up.Node, or, when the actor of its last
// going is still stopping, once it has (Terminated).
func (s *Supervisor) spawn(c actor.Context, up *messages.PeerUp) {
	if s.stopping[up.Node] != nil {
		s.back[up.Node] = up
		return
	}
	cfg := s.cfg
	cfg.Peer, cfg.Instances = up.Node, up.Instances
	pid, err := c.SpawnNamed(s.props("peer", New(cfg)), s.name(up.Node))
	if err != nil {
		s.cfg.Logger.Error("spawning peer actor failed", "component", "peer", "peer", up.Node, "err", err)
		return
	}
	s.children[up.Node] = pid
	if p, ok := s.parking[up.Node]; ok {
		p.End() // back: its own queue handles its messages
	}
}

// restore spawns a gone-mode actor (Config.Gone) for a peer gone from
// discovery that called us, at the instances discovery last listed for
// it: the delivery_status reports owed to it would otherwise never leave
// (its queue is their only sender), its copies staying forwarded for ever.
// A peer never discovered since our start has no known instance: its
// reports wait until discovery lists it again.
func (s *Supervisor) restore(c actor.Context, peerName string) {
	inst := s.last[peerName]
	if len(inst) == 0 || s.back[peerName] != nil {
		return
	}
	if s.stopping[peerName] != nil {
		return // the actor of its going is still stopping: its next call tries again
	}
	cfg := s.cfg
	cfg.Peer, cfg.Instances, cfg.Gone = peerName, inst, true
	pid, err := c.SpawnNamed(s.props("peer", New(cfg)), s.name(peerName))
	if err != nil {
		s.cfg.Logger.Error("spawning a gone peer's actor failed", "component", "peer", "peer", peerName, "err", err)
		return
	}
	s.children[peerName] = pid
	s.gone[peerName] = true
	s.cfg.Logger.Info("peer gone from discovery called: the reports owed to it go to its last instances while it answers",
		"component", "peer", "peer", peerName)
}

// name is the name of the next actor of peer: "<peer>#<n>", never the
// name of an actor before it (Supervisor).
func (s *Supervisor) name(peer string) string {
	return fmt.Sprintf("%s#%d", peer, s.spawned.Add(1))
}

// peerOf is the peer whose actor, a child of parent, is pid (its name
// without "#<n>").
func peerOf(parent, pid *actor.PID) string {
	name := strings.TrimPrefix(pid.Id, parent.Id+"/")
	if i := strings.LastIndexByte(name, '#'); i >= 0 {
		name = name[:i]
	}
	return name
}

// stop stops peer's actor pid; the peer's next actor waits until it has
// stopped (stopping).
func (s *Supervisor) stop(c actor.Context, peer string, pid *actor.PID) {
	c.Stop(pid)
	s.stopping[peer] = pid
}

func (s *Supervisor) route(c actor.Context, peer string, m any) {
	if pid, ok := s.children[peer]; ok {
		c.Send(pid, m)
	}
}
