package delivery

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/actors/smppout"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// Deps is what the delivery actors share.
type Deps struct {
	// Owner names this instance on the leases it takes.
	Owner   string
	Store   persistence.Store
	Clock   clock.Clock
	Policy  Policy
	Logger  *slog.Logger
	Metrics *Metrics
	// Publish receives a StateChanged for every committed transition.
	Publish func(messages.StateChanged)
	// HTTPClient makes webhook calls (keep-alive; per call timeout is
	// SendTimeout).
	HTTPClient *http.Client
	// Actors holds the in-process frontends' PIDs.
	Actors *Actors
	// Tracing makes the delivery attempts' spans of traced messages (nil:
	// none).
	Tracing *telemetry.Tracing
	// SendTimeout bounds one webhook call or one in-process frontend's reply.
	SendTimeout time.Duration
	// MaxInFlight bounds concurrent deliveries per push frontend (zero:
	// DefaultMaxInFlight).
	MaxInFlight int
	// StoreTimeout bounds each store call (zero: persistence.CallTimeout).
	StoreTimeout time.Duration
	// Seed seeds the workers' jitter; workers derive their own streams.
	Seed uint64
	// ForwardMaxWait, when positive, makes the janitor move messages
	// forward_queued longer than it to forward_failed, every ForwardSweep
	// (--forward-max-retries x --forward-retry-interval, checked every
	// --forward-retry-interval).
	ForwardMaxWait, ForwardSweep time.Duration
	// Props builds a supervised child's props (supervision.Props).
	Props func(kind string, p actor.Producer) *actor.Props
	// Fence, when set, fences every claim by the site's ring: workers
	// claim only work in this instance's delivery ranges, and their own
	// verdicts carry the epoch of the claim they come from.
	Fence ring.Fence
	// Board, when set, is where the workers offer to take new work at once
	// (see package handover): pull workers for their waiting polls, and,
	// when the store is this instance's alone (no Fence, or one without an
	// idle poll), push workers for their free slots. On a shared store a
	// push delivery is the ring owner's, so only claims take it.
	Board *handover.Board
	// Bus, when set, is the delivery bus (--nats-url): while it is up the
	// workers take their work from their frontends' consumers (claiming
	// each row the bus names), and settle each bus message once the
	// outcome of its work is committed; while it is down they claim from
	// the store as without it.
	Bus *bus.Bus
	// SMPP holds the smpp frontends' clients (required for smpp frontends
	// to deliver).
	SMPP *smppout.Clients
	// Down, when set, is where the supervisor tells which frontends'
	// workers are down (their restart budget used up) until when.
	Down *Down
	// Leader, when set, tells whether the janitor's site-wide sweeps
	// (expiry, forwards that waited too long) run on this instance now:
	// on the ring's master only (*ring.Shares), so a site sweeps once.
	Leader ring.Leader

	// signed are the times webhook calls were signed with, shared by the
	// workers (withDefaults makes it).
	signed *signTimes
}

// Validate reports what is missing.
func (d *Deps) Validate() error {
	var errs []error
	if d.Owner == "" || d.Store == nil || d.Clock == nil || d.Logger == nil || d.Publish == nil ||
		d.HTTPClient == nil || d.Actors == nil || d.Props == nil {
		errs = append(errs, errors.New("delivery: Owner, Store, Clock, Logger, Publish, HTTPClient, Actors and Props are required"))
	}
	if d.SendTimeout <= 0 {
		errs = append(errs, errors.New("delivery: SendTimeout must be positive"))
	}
	errs = append(errs, d.Policy.Validate())
	return errors.Join(errs...)
}

// DefaultMaxInFlight is how many deliveries a push frontend has under way
// at once: 32, enough to hide a webhook's latency, few enough not to flood
// it.
const DefaultMaxInFlight = 32

func (d *Deps) withDefaults() *Deps {
	c := *d
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = persistence.CallTimeout
	}
	if c.signed == nil {
		c.signed = &signTimes{}
	}
	return &c
}

func (d *Deps) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d.StoreTimeout)
}

// pushLease is how long pushed work stays leased: long enough to outlive
// the call and the commit of its verdict, short enough that a crashed
// instance's work comes back soon (a restart of the same one takes it back
// at once anyway).
func (d *Deps) pushLease() time.Duration { return 2*d.SendTimeout + 5*time.Second }

// retireDrain bounds how long a retiring worker (planUp) drains: the push
// lease. By then what it had in flight is claimable again anyway (its
// lease ran out), so a verdict it still waits for (a store that fails
// every round) would no longer keep the message from a second delivery.
func (d *Deps) retireDrain() time.Duration { return d.pushLease() }

// dispatcherConfig is the configuration of the dispatcher of fe's worker.
func (d *Deps) dispatcherConfig(fe messages.Frontend) DispatcherConfig {
	inFlight := d.MaxInFlight
	if fe.Mode == messages.ModeSMPP {
		// No more claimed than the SMSC's window takes: a claimed message
		// waiting for a slot would wait on its lease. Its submit rate
		// lowers that at each step (the worker's Dispatcher.Limit, from
		// smppout.Client.InFlight), and holds claims while it leaves no
		// slot in time (Client.PacedUntil).
		if o, err := messages.ParseSMPPURL(fe.URL); err == nil {
			inFlight = o.Window
		}
	}
	return DispatcherConfig{
		Frontend: fe.Name, Pull: fe.Mode == messages.ModePull, Owner: d.Owner, Policy: d.Policy,
		MaxInFlight: inFlight, MaxClaim: maxClaim,
		PushLease: d.pushLease(), DeliveryTimeout: d.SendTimeout + time.Second,
		Bus: d.Bus != nil, BusOverdue: busOverdue, BusBackstop: busBackstop, BusShortPoll: busShortPoll,
	}
}

// maxClaim bounds one claim for a pull frontend's waiting polls (1000
// rows: one transaction stays in the milliseconds).
const maxClaim = 1000

// rng returns a jitter source for one worker.
func (d *Deps) rng(name string) *rand.Rand {
	return rand.New(rand.NewPCG(d.Seed, messages.TokenOf(name)))
}
