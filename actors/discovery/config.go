package discovery

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/transport"
)

// Timing that is not configurable.
const (
	// unidentifiedRetry is how often an address that never answered its
	// identity call is asked again (at most PollInterval): a peer that was
	// down when we started is found seconds after it comes up, not at the
	// next poll.
	unidentifiedRetry = 2 * time.Second
	// rediscoverGap is the least time between the start of a full poll and
	// one asked for by Rediscover: a node that keeps calling while unknown
	// cannot make us poll DNS and every peer back to back.
	rediscoverGap = time.Second
)

// Config is what the discovery actor needs. Start from DefaultConfig.
type Config struct {
	// Node is our own name: an address reporting it is refused.
	Node string
	// Static are peer addresses "host:port" (as ParsePeers returns them).
	Static []string
	// SRV is the SRV name to resolve, e.g. "_smsc._tcp.example.com".
	// Empty: Static only. When both are set, both are listed (the node
	// gives one or the other).
	SRV string
	// DNSServer is the server to ask, "host[:port]". Empty: the
	// nameservers of /etc/resolv.conf, in turn.
	DNSServer string
	// APIPort is the port of an SRV target whose record says 0.
	APIPort int
	// PollInterval is how often addresses are listed again and every
	// listed address is asked who it is. It also bounds one whole DNS
	// lookup (at least DNSTimeout).
	PollInterval time.Duration
	// IdentityTimeout bounds one identity call.
	IdentityTimeout time.Duration
	// DNSTimeout bounds one exchange with one DNS server: a server that
	// has not answered by then is lost or overloaded, and the next one is
	// asked.
	DNSTimeout time.Duration
	// Transport makes the identity calls.
	Transport transport.Peer
	// Clock schedules the polls (default clock.Real).
	Clock clock.Clock
	// Logger receives the logs; component=discovery is added.
	Logger *slog.Logger
	// Sink receives *PeerUp and *PeerGone (the peers supervisor).
	Sink *actor.PID
}

// DefaultConfig returns the defaults; Node, Transport, Logger, Sink and a
// source (Static or SRV) are the caller's.
func DefaultConfig() Config {
	return Config{
		APIPort: DefaultAPIPort,
		// 30s: a new site shows up within half a minute, and DNS is asked
		// twice a minute.
		PollInterval: 30 * time.Second,
		// 5s, like every outbound peer call (the node gives its own).
		IdentityTimeout: 5 * time.Second,
		// 2s, the usual resolver timeout.
		DNSTimeout: 2 * time.Second,
		Clock:      clock.Real{},
	}
}

// Validate reports every problem of c. A config with neither Static nor
// SRV is valid: the node has no peers until one is configured.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("discovery: "+format, args...))
	}
	if !messages.ValidName(c.Node) {
		bad("node %q is not a valid name", c.Node)
	}
	for _, s := range c.Static {
		if _, err := parseHostPort(s, 0); err != nil {
			bad("static peer: %v", err)
		}
	}
	if c.SRV != "" {
		if err := SRVNameError(c.SRV); err != nil {
			bad("SRV name: %v", err)
		}
	}
	if c.DNSServer != "" {
		if _, err := ParseDNSServer(c.DNSServer); err != nil {
			bad("DNS server: %v", err)
		}
	}
	if c.APIPort < 1 || c.APIPort > 65535 {
		bad("API port %d must be 1-65535", c.APIPort)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"poll interval", c.PollInterval}, {"identity timeout", c.IdentityTimeout}, {"DNS timeout", c.DNSTimeout}} {
		if d.v <= 0 {
			bad("%s %v must be positive", d.name, d.v)
		}
	}
	if c.Transport == nil {
		bad("Transport is required")
	}
	if c.Clock == nil {
		bad("Clock is required")
	}
	if c.Logger == nil {
		bad("Logger is required")
	}
	if c.Sink == nil {
		bad("Sink is required")
	}
	return errors.Join(errs...)
}
