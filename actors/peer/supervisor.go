package peer

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
)

// Supervisor is the "peers" actor: the parent of one peer actor per
// discovered peer. It turns discovery's PeerUp and PeerGone into children
// and routes peer-addressed messages to them. Build it with NewSupervisor.
type Supervisor struct {
	cfg      Config
	props    func(kind string, p actor.Producer) *actor.Props
	children map[string]*actor.PID
}

// NewSupervisor returns the producer of the peers actor. cfg is the
// template of every peer actor (Peer and Instances are filled per peer);
// props builds a supervised child's props.
func NewSupervisor(cfg Config, props func(kind string, p actor.Producer) *actor.Props) (actor.Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if props == nil {
		return nil, errors.New("peer: props is required")
	}
	return func() actor.Actor {
		return &Supervisor{cfg: cfg, props: props, children: map[string]*actor.PID{}}
	}, nil
}

// Receive implements actor.Actor.
func (s *Supervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Restarting:
		// The children are stopped with us and respawned as discovery
		// announces them again (it re-sends the whole set after a restart
		// of ours through the node's discovery sink).
		s.children = map[string]*actor.PID{}
	case *messages.PeerUp:
		if pid, ok := s.children[m.Node]; ok {
			c.Send(pid, m)
			return
		}
		cfg := s.cfg
		cfg.Peer, cfg.Instances = m.Node, m.Instances
		pid, err := c.SpawnNamed(s.props("peer", New(cfg)), m.Node)
		if err != nil {
			s.cfg.Logger.Error("spawning peer actor failed", "component", "peer", "peer", m.Node, "err", err)
			return
		}
		s.children[m.Node] = pid
	case *messages.PeerGone:
		pid, ok := s.children[m.Node]
		if !ok {
			return
		}
		delete(s.children, m.Node)
		c.Stop(pid)
		s.cfg.Book.Gone(m.Node)
		s.cfg.Metrics.forget(m.Node)
		s.cfg.Logger.Info("peer removed; its queued messages keep waiting until forward_failed",
			"component", "peer", "peer", m.Node)
	case *messages.KickPeer:
		if m.Peer == "" { // every peer
			for _, pid := range s.children {
				c.Send(pid, m)
			}
			return
		}
		s.route(c, m.Peer, m)
	case *messages.PeerContact:
		s.route(c, m.Peer, m)
	case *messages.PeerRegistryFrom:
		s.route(c, m.Peer, m)
	}
}

func (s *Supervisor) route(c actor.Context, peer string, m any) {
	if pid, ok := s.children[peer]; ok {
		c.Send(pid, m)
	}
}
