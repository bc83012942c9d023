package switchboard

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/transport"
)

// actorRing is the ring coordinator's name under the guardian.
const actorRing = "ring"

// ringIdlePoll is how often an idle worker of a multi-instance site looks
// for work that another instance committed in its ranges: the instance
// that accepted a message cannot kick the owner's worker. A fifth of a
// second keeps an idle site's first delivery quick at five cheap indexed
// queries a second per worker.
const ringIdlePoll = 200 * time.Millisecond

// ringSettings are the ring settings among c's fields; ringFields names
// the fields their errors are about.
func (c Config) ringSettings() ring.Settings {
	return ring.Settings{
		Role: c.RingRole, InstanceID: c.InstanceID, Master: c.RingMaster,
		Cluster: c.Cluster, Region: c.Region, Zone: c.Zone,
		Services: c.RingServices, PublishInterval: c.RingPublishInterval, Reconnect: c.reconnect(),
		Shared: c.Postgres != "" || c.Store != nil,
	}
}

// validateRing checks the ring settings (the ring package's checks, and
// RingAddress as every other address), and that a slave by its settings
// can call its master.
func (c Config) validateRing() []error {
	var errs []error
	settings := c.ringSettings()
	for _, err := range settings.Check() {
		errs = append(errs, field.Rename(err, ringFields))
	}
	if settings.Shared && settings.StartRole(false) == messages.RoleSlave && !c.callsPeers() {
		errs = append(errs, field.Errorf("TLSCA", "%w (%s %s): give it the site's CA bundle (or %s, for development only)",
			ring.ErrNoTransport, field.Ref("RingRole"), c.RingRole, field.Ref("InsecureSkipVerify")))
	}
	if c.RingAddress != "" {
		if err := checkHostPort(c.RingAddress, false); err != nil {
			errs = append(errs, field.Errorf("RingAddress", "%v", err))
		}
	}
	return errs
}

// callsPeers reports whether the node can call other nodes (its peers, a
// ring master): with a CA bundle to verify them, with verification
// switched off, or through Config.Transport.
func (c Config) callsPeers() bool {
	return c.Transport != nil || c.TLSCA != "" || c.InsecureSkipVerify
}

func (c Config) reconnect() ring.Reconnect {
	return ring.Reconnect{MaxAttempts: c.RingReconnectMaxAttempts, Min: c.RingReconnectBackoffMin,
		Max: c.RingReconnectBackoffMax, Jitter: c.RingReconnectJitter}
}

// ringFields names the node's field that the ring's settings, its
// configuration and its Reconnect take each of their fields from, for the
// ring's errors. A slave's Transport is made from TLSCA; a store is shared
// with Postgres.
var ringFields = field.Map(map[string]string{
	"MaxAttempts": "RingReconnectMaxAttempts", "Min": "RingReconnectBackoffMin",
	"Max": "RingReconnectBackoffMax", "Jitter": "RingReconnectJitter",
	"Reconnect.MaxAttempts": "RingReconnectMaxAttempts", "Reconnect.Min": "RingReconnectBackoffMin",
	"Reconnect.Max": "RingReconnectBackoffMax", "Reconnect.Jitter": "RingReconnectJitter",
	"Role": "RingRole", "MasterAddr": "RingMaster", "Master": "RingMaster", "PublishInterval": "RingPublishInterval",
	"Services": "RingServices", "Transport": "TLSCA", "Shared": "Postgres",
})

// ringAddress is where the site's other instances reach this one.
func (n *Node) ringAddress() string {
	if n.cfg.RingAddress != "" {
		return n.cfg.RingAddress
	}
	listen := n.addr
	if listen == "" {
		listen = n.cfg.Listen
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return listen
	}
	if ip := os.Getenv("POD_IP"); ip != "" {
		return net.JoinHostPort(ip, port)
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	return net.JoinHostPort(h, port)
}

// sharedStore reports whether other instances of the site may use our
// store: Postgres, or an embedder's own store (the sim's sites share one).
func (n *Node) sharedStore() bool {
	return n.cfg.Postgres != "" || n.cfg.Store != nil
}

// newShares builds the fence the workers claim through; the coordinator
// fills it.
func (n *Node) newShares() error {
	m, err := ring.NewMetrics(n.metrics)
	if err != nil {
		return err
	}
	n.ringMetrics = m
	var idle time.Duration
	if n.sharedStore() {
		idle = ringIdlePoll
	}
	n.shares = ring.NewShares(idle, m.Refused)
	n.roster = ring.NewRoster(n.cfg.rosterHold())
	return nil
}

// rosterHold is how long the roster keeps a member missing from the
// assignment (ring.Roster): as long as such a member may be alive and
// come back with its ranges. A slave keeps calling its master for
// RingReconnectMaxAttempts waits of at most RingReconnectBackoffMax, and
// waits for a master that said it stops for ShutdownTimeout and 10 s
// (MasterStopGrace); a member is dropped within two publications of its
// last poll.
func (c Config) rosterHold() time.Duration {
	return time.Duration(c.RingReconnectMaxAttempts)*c.RingReconnectBackoffMax + c.ShutdownTimeout + 10*time.Second +
		2*c.RingPublishInterval
}

// seedRoster has the roster start from the assignment stored in the
// site's store (its members as the last master published them), so that
// a member of an earlier version that is alive but has not joined this
// instance's master yet (a new master lists only itself at first) still
// counts. A store no ring published to has none; one that cannot be read
// leaves the roster unknown until the first assignment. The read is
// bounded by ctx (Start's: a start cancelled is not held here) and
// ring.DefaultStoreTimeout; only ctx's end is an error.
func (n *Node) seedRoster(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, ring.DefaultStoreTimeout)
	defer cancel()
	st, err := n.store.Ring(rctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n.log.Warn("reading the stored ring assignment failed; submits that need a capability wait for the first assignment", "err", err)
		return nil
	}
	n.roster.Seed(st, n.cfg.InstanceID, n.clock.Now())
	return nil
}

// startRing spawns the coordinator (after the HTTPS listener, whose
// address it advertises).
func (n *Node) startRing() error {
	elector := n.elector()
	settings := n.cfg.ringSettings()
	role := settings.StartRole(elector != nil)
	master, _ := settings.MasterHostPort() // checked by Validate
	cfg := ring.Config{
		Self: messages.RingJoin{
			InstanceID: n.cfg.InstanceID, Node: n.cfg.Name, Address: n.ringAddress(),
			Cluster: n.cfg.Cluster, Region: n.cfg.Region, Zone: n.cfg.Zone, Services: n.cfg.RingServices,
			Capabilities: capabilities,
		},
		Role: role, MasterAddr: master, PublishInterval: n.cfg.RingPublishInterval, Reconnect: n.cfg.reconnect(),
		MasterStopGrace: n.cfg.ShutdownTimeout + 10*time.Second,
		Store:           n.store, Elector: elector, Clock: n.clock, Seed: uint64(n.clock.Now().UnixNano()),
		Logger: n.log, Metrics: n.ringMetrics, Shares: n.shares, Roster: n.roster, Stopping: n.isStopping, Frontends: n.frontends, Peers: n.peers,
		Fatal: func(err error) {
			err = field.Rename(err, ringFields)
			if errors.Is(err, ring.ErrNoTransport) {
				// An auto instance that found a master: it cannot be its
				// slave without a way to call it (callsPeers).
				err = configError{err}
			}
			n.onFatal("ring", err)
		},
	}
	if n.sharedStore() {
		// On a store of its own an instance changes the directory only
		// through its own intake: there is nothing to read again.
		cfg.Directory = n.intake
	}
	if role != messages.RoleMaster {
		tr, err := n.ringTransport()
		if err != nil {
			return err
		}
		cfg.Transport = tr
	}
	prod, err := ring.New(cfg)
	if err != nil {
		return field.Rename(err, ringFields)
	}
	pid, err := n.guardian.Spawn(actorRing, "ring", prod)
	if err != nil {
		return err
	}
	n.ring.Store(pid)
	return nil
}

// ringTransport is the transport of a slave's calls: the federation's
// when it carries ring calls, else a peer client of its own.
func (n *Node) ringTransport() (transport.Ring, error) {
	if n.transport == nil {
		if !n.cfg.callsPeers() {
			// An auto instance that never becomes a slave needs none; one
			// that does stops with this (an explicit slave is refused by
			// Validate).
			return nil, nil
		}
		tr, err := n.newTransport()
		if err != nil {
			return nil, err
		}
		n.transport = tr
	}
	tr, ok := n.transport.(transport.Ring)
	if !ok {
		return nil, errors.New("ring: the configured transport does not carry ring calls")
	}
	return tr, nil
}

// siteRefusal is why this instance does not take a message with options o
// now (an error of code), or nil. A message that needs a capability
// (messages.Options.Needs) is taken only while every member of the site's
// ring announces it (ring.Roster: the members of the assignment held, and
// for a while those missing from it): an instance of an earlier version
// on the same store could claim the message and deliver it without the
// field (a flash SMS as an ordinary one). On a store of its own no other
// instance takes the work: always nil. On a shared store whose ring this
// instance knows nothing of yet (the stored assignment could not be
// read, and none was applied), refused too.
func (n *Node) siteRefusal(o messages.Options, code string) error {
	needs := o.Needs()
	if len(needs) == 0 || !n.sharedStore() {
		return nil
	}
	for _, c := range needs {
		lacking, known := n.roster.Lacking(c, n.clock.Now())
		switch {
		case !known:
			return messages.Errorf(code, "%s: this instance (%s) does not know its site's ring members yet, so not whether they all take %s; retry shortly",
				c, n.cfg.InstanceID, c)
		case slices.Contains(lacking, n.cfg.InstanceID):
			// This instance announces it: the assignment it holds came
			// from a master of an earlier version, which carries nobody's.
			return messages.Errorf(code, "%s: the ring's master runs an earlier version, whose assignments carry no member's capabilities, "+
				"so not whether every instance of site %s takes %s; retry once the master is upgraded", c, n.cfg.Name, c)
		case len(lacking) > 0:
			return messages.Errorf(code, "%s: instance(s) %s of site %s do not announce capability %s (an earlier version: a rolling upgrade under way?) "+
				"and could deliver the message without it; retry once they are upgraded or gone",
				c, strings.Join(lacking, ", "), n.cfg.Name, c)
		}
	}
	return nil
}

// touchRing spreads a change of the directory made here to the site.
func (n *Node) touchRing() {
	if pid := n.ring.Load(); pid != nil {
		n.system.Root.Send(pid, &messages.RingTouch{})
	}
}

// RingPartitions is what this instance works now: one partition per
// service, with its epoch and token ranges (empty before the first
// assignment, after a stand-down, and once stopped). The sim harness
// checks from it that no token is owned twice under a valid epoch.
func (n *Node) RingPartitions() []ring.Partition {
	if n.shares == nil {
		return nil
	}
	return n.shares.Partitions()
}

// isStopping reports whether the node's stop has begun.
func (n *Node) isStopping() bool {
	select {
	case <-n.stopping:
		return true
	default:
		return false
	}
}
