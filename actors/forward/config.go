package forward

import (
	"errors"
	"log/slog"
	"time"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/telemetry"
	"github.com/switchboard-dev/switchboard/transport"
)

// Config is what a forward queue actor needs.
type Config struct {
	// Node is our name; Peer the peer this queue sends to (filled per
	// peer; Validate does not require it).
	Node, Peer string
	// Owner names this instance on the leases it takes.
	Owner     string
	Store     persistence.Store
	Transport transport.Peer
	Clock     clock.Clock
	Policy    Policy
	// Timeout bounds one request to the peer (the transport's own bound
	// on each request should be the same); a call of several requests is
	// bounded by CallTimeout.
	Timeout time.Duration
	Logger  *slog.Logger
	Metrics *Metrics
	// Publish receives a StateChanged for every committed transition.
	Publish func(messages.StateChanged)
	// StoreTimeout bounds each store call (zero: persistence.CallTimeout).
	StoreTimeout time.Duration
	// Fence, when set, fences every claim by the site's ring: the queue
	// claims only work in this instance's forward ranges.
	Fence ring.Fence
	// Board, when set, is where the queue offers to take new forwards at
	// once (see package handover); only while the store is this
	// instance's alone (no Fence, or one without an idle poll): on a shared
	// store a forward is the ring owner's, so only claims take it.
	Board *handover.Board
	// Tracing makes the spans of the forwards and delivery_status reports
	// of traced messages (nil: none).
	Tracing *telemetry.Tracing
}

// Validate reports what is missing or wrong.
func (c Config) Validate() error {
	var errs []error
	if c.Node == "" || c.Owner == "" || c.Store == nil || c.Transport == nil ||
		c.Clock == nil || c.Logger == nil || c.Publish == nil || c.Metrics == nil {
		errs = append(errs, errors.New("forward: Node, Owner, Store, Transport, Clock, Logger, Publish and Metrics are required"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("forward: Timeout must be positive"))
	}
	errs = append(errs, c.Policy.Validate())
	return errors.Join(errs...)
}

// CallTimeout bounds one call of a queue to its peer (Transport.Forward
// or Status) whose requests are bounded by timeout each: a batch split
// into several requests (to fit the peer's bound on a request body) may
// take twice timeout in all. The requests the call had not finished by
// then are retried; those that completed are recorded. A message may
// leave in a call's last request, so the redelivery horizon counts this
// bound rather than timeout.
func CallTimeout(timeout time.Duration) time.Duration { return 2 * timeout }

// callTimeout is CallTimeout(Timeout).
func (c Config) callTimeout() time.Duration { return CallTimeout(c.Timeout) }

// lease is how long a queue's claims lease their work: it outlives the
// call it covers (callTimeout plus the commit after it); a crash in
// between lets another claim take the work after it.
func (c Config) lease() time.Duration { return c.callTimeout() + 10*time.Second }

// idlePoll is the fence's idle poll: 0 without a fence (the store is this
// instance's alone).
func (c Config) idlePoll() time.Duration {
	if c.Fence == nil {
		return 0
	}
	return c.Fence.IdlePoll()
}
