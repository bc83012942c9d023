package switchboard

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/discovery"
	"github.com/switchboard-dev/switchboard/actors/forward"
	"github.com/switchboard-dev/switchboard/actors/intake"
	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/supervision"
	"github.com/switchboard-dev/switchboard/transport"
)

// The federation children of the guardian.
const (
	actorPeers     = "peers"
	actorDiscovery = "discovery"
)

// capabilities are what this version takes: announced to peers in its
// identity, and to the other instances of its site in its ring join
// (siteRefusal).
var capabilities = []string{messages.CapForwardBatch, messages.CapStatusBatch, messages.CapMessageFields, messages.CapTraceContext, messages.CapMessageClass}

// loadBook fills the peer book with the registries learned before a
// restart, so that messages for a peer that is down since our start still
// queue for it instead of getting no_route.
func (n *Node) loadBook(ctx context.Context) error {
	if !n.cfg.Federation {
		return nil
	}
	regs, err := n.store.PeerRegistries(ctx)
	if err != nil {
		return fmt.Errorf("read peer registries: %w", err)
	}
	for _, r := range regs {
		n.book.SetRegistry(r.Peer, r.Frontends)
	}
	return nil
}

// parkPendingForwards moves messages still pending with forward work (a
// crash mid-forward, or a peer gone from discovery) to forward_queued at
// start, so that they count down to forward_failed instead of waiting
// unseen; the forward queue of a peer that turns healthy sends them.
func (n *Node) parkPendingForwards(ctx context.Context) error {
	peers, err := n.store.ForwardTargets(ctx)
	if err != nil {
		return fmt.Errorf("read forward targets: %w", err)
	}
	for _, peerName := range peers {
		for more := true; more; {
			more, err = peer.Park(ctx, n.store, n.clock.Now(), peerName,
				"queued at start until peer "+peerName+" is found healthy", n.publish)
			if err != nil {
				return fmt.Errorf("queue pending forwards for %s: %w", peerName, err)
			}
		}
	}
	return nil
}

// remote is the intake's view of frontends served by peers (nil without
// federation: then no message ever leaves this node).
func (n *Node) remote() intake.Remote {
	if !n.cfg.Federation {
		return nil
	}
	return n.book
}

// startFederation spawns the peers actor and discovery.
func (n *Node) startFederation() error {
	if !n.cfg.Federation {
		return nil
	}
	if n.cfg.InsecureSkipVerify && n.cfg.TLSCA == "" {
		n.warnInsecure()
	}
	tr, err := n.newTransport()
	if err != nil {
		return err
	}
	n.transport = tr
	fwdMetrics, err := forward.NewMetrics(n.metrics)
	if err != nil {
		return err
	}
	peerMetrics, err := peer.NewMetrics(n.metrics, n.book)
	if err != nil {
		return err
	}
	props := func(kind string, p actor.Producer) *actor.Props { return supervision.Props(kind, p, n.supOpts) }
	qcfg := forward.Config{
		Node: n.cfg.Name, Owner: n.cfg.InstanceID, Store: n.store, Transport: tr, Clock: n.clock, Fence: n.shares,
		Policy: n.forwardPolicy(), Timeout: n.cfg.HTTPTimeout, Logger: n.log, Metrics: fwdMetrics, Publish: n.publish,
		Board: n.board, Tracing: n.tracing,
	}
	pcfg := peer.Config{
		Node: n.cfg.Name, Transport: tr, Store: n.store, Book: n.book, Clock: n.clock, Logger: n.log,
		Metrics: peerMetrics, HealthInterval: n.cfg.HealthInterval, RegistryInterval: n.cfg.RegistryInterval,
		Timeout: n.cfg.HTTPTimeout, LocalHealth: n.localHealth, Publish: n.publish,
		Queue: func(name string) *actor.Props {
			c := qcfg
			c.Peer = name
			return props("forward", forward.New(c))
		},
	}
	if n.peerClient != nil {
		pcfg.Forget = n.peerClient.Forget // its pool for the peer goes with the peer's actor
	}
	if err := qcfg.Validate(); err != nil {
		return err
	}
	sup, err := peer.NewSupervisor(pcfg, props, &n.discoveryPID)
	if err != nil {
		return err
	}
	n.peers, err = n.guardian.Spawn(actorPeers, "peers", sup)
	return err
}

// newTransport is the HTTPS peer client, or Config.Transport when an
// embedder (the sim harness) supplies its own network.
func (n *Node) newTransport() (transport.Peer, error) {
	if n.cfg.Transport != nil {
		return n.cfg.Transport, nil
	}
	pc := httpapi.DefaultPeerClientConfig()
	pc.Node, pc.Timeout, pc.Logger, pc.Dial = n.cfg.Name, n.cfg.HTTPTimeout, n.log, n.cfg.Dial
	pc.RingToken = n.creds.ringToken
	if n.cfg.TLSCA != "" {
		// The listener's material: a certificate reloaded is presented to
		// peers too, and a CA bundle reloaded verifies them.
		r, err := n.tlsMaterial()
		if err != nil {
			return nil, err
		}
		pc.TLS = r
	} else {
		pc.InsecureSkipVerify = true
	}
	client, err := httpapi.NewPeerClient(pc)
	if err != nil {
		return nil, err
	}
	n.peerClient = client
	return client, nil
}

// startDiscovery spawns discovery, which tells the peers actor about
// peers as they appear and disappear.
func (n *Node) startDiscovery() error {
	if !n.cfg.Federation {
		return nil
	}
	dc := discovery.DefaultConfig()
	dc.Node, dc.Static, dc.SRV, dc.DNSServer = n.cfg.Name, n.cfg.Peers, n.cfg.DNSSRV, n.cfg.DNSServer
	dc.APIPort, dc.PollInterval, dc.IdentityTimeout = n.cfg.APIPort, n.cfg.DNSPollInterval, n.cfg.HTTPTimeout
	dc.Transport, dc.Clock, dc.Logger, dc.Sink = n.transport, n.clock, n.log, n.peers
	p, err := discovery.New(dc)
	if err != nil {
		return err
	}
	n.discovery, err = n.guardian.Spawn(actorDiscovery, "discovery", p)
	if err != nil {
		return err
	}
	n.discoveryPID.Store(n.discovery)
	return nil
}

// warnInsecure logs that peers are not verified, at start and every hour.
func (n *Node) warnInsecure() {
	n.warnMu.Lock()
	defer n.warnMu.Unlock()
	if n.warnStopped {
		return
	}
	n.log.Warn("federation without peer verification (--insecure-skip-verify): for development only")
	n.stopWarning = n.clock.AfterFunc(time.Hour, n.warnInsecure)
}

// stopWarnings ends the hourly warning.
func (n *Node) stopWarnings() {
	n.warnMu.Lock()
	defer n.warnMu.Unlock()
	n.warnStopped = true
	if n.stopWarning != nil {
		n.stopWarning()
	}
}

// statusKickDelay coalesces the kicks of final outcomes into one per
// interval: a delivered message whose origin is a peer owes it a
// delivery_status, and the queue to that peer should send it now rather
// than at its next tick.
const statusKickDelay = 20 * time.Millisecond

// kickStatus asks every forward queue to look for status reports, at most
// once per statusKickDelay.
func (n *Node) kickStatus() {
	if n.peers == nil || n.statusKick.Swap(true) {
		return
	}
	n.clock.AfterFunc(statusKickDelay, func() {
		n.statusKick.Store(false)
		if n.ready.Load() {
			n.system.Root.Send(n.peers, &messages.KickPeer{Status: true})
		}
	})
}

// forwardPolicy is the forward queues' policy from the flags.
func (n *Node) forwardPolicy() forward.Policy {
	p := forward.DefaultPolicy()
	p.RetryInterval, p.MaxRetries = n.cfg.ForwardRetryInterval, n.cfg.ForwardMaxRetries
	return p
}

// localHealth is our health document for peers. It may read the store
// (the stats cache), so peer actors call it off their mailbox.
func (n *Node) localHealth() messages.Health {
	h := messages.Health{Node: n.cfg.Name, Time: n.clock.Now(), Status: messages.HealthOK}
	if n.isStopping() {
		h.Status = messages.HealthStopping
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.HTTPTimeout)
	defer cancel()
	if st, err := n.stats.get(ctx); err == nil {
		h.ForwardQueueDepth = forwardDepth(st)
	}
	return h
}

// localRegistry is our registry document: the local frontends' names.
func (n *Node) localRegistry() messages.Registry {
	return messages.Registry{Node: n.cfg.Name, Frontends: n.book.Local()}
}

func forwardDepth(st persistence.Stats) int64 {
	var sum int64
	for _, v := range st.ForwardQueue {
		sum += v
	}
	return sum
}

// peerNames lists the peers the forward queue gauge reports (every peer
// of the book, so a drained queue shows 0 rather than vanishing).
func (n *Node) peerNames() []string {
	if n.book == nil {
		return nil
	}
	var names []string
	for _, p := range n.book.List() {
		names = append(names, p.Node)
	}
	sort.Strings(names)
	return names
}
