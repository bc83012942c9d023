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
	// Timeout bounds one request to the peer.
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

// lease is how long a queue's claims lease their work: it outlives the
// request it covers (Timeout plus the commit after it); a crash in between
// lets another claim take the work after it.
func (c Config) lease() time.Duration { return 2*c.Timeout + 10*time.Second }

// idlePoll is the fence's idle poll: 0 without a fence (the store is this
// instance's alone).
func (c Config) idlePoll() time.Duration {
	if c.Fence == nil {
		return 0
	}
	return c.Fence.IdlePoll()
}
