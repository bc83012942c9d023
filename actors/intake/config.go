package intake

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// Config is what the intake actor needs.
type Config struct {
	// Node is this node's name: the source_smsc and dest_smsc of local work.
	Node  string
	Store persistence.Store
	Clock clock.Clock
	// Logger gets component=intake added.
	Logger *slog.Logger
	// Frontends is the frontend supervisor, told about directory changes
	// and kicked after commits.
	Frontends *actor.PID
	// Peers is the peers actor, kicked after commits of forward work (nil
	// without federation).
	Peers *actor.PID
	// Remote finds the peer serving a frontend this node does not serve
	// (the peer book; nil without federation).
	Remote Remote
	// Local, when set, is told the names of the local frontends whenever
	// they change (the peer book: our registry for peers).
	Local Local
	// Publish receives a StateChanged for every committed transition.
	Publish func(messages.StateChanged)
	// NewID generates ids for submissions without one.
	NewID func() string
	// MaxBatch bounds one group commit (zero: DefaultMaxBatch).
	MaxBatch int
	// StoreTimeout bounds each store call (zero: persistence.CallTimeout).
	StoreTimeout time.Duration
	// CommitDepth is how many group commits may be out at once (default
	// 1). More pays on a store whose transactions run side by side
	// (Postgres: one commit's round trip and fsync overlap the next); on
	// the embedded store, whose one writer runs them in turn and syncs
	// off its goroutine, 1 is faster: while a commit is out, the next
	// batch grows, and measured (cmd/bench, alternating runs) depth 3
	// there moved ~17% fewer submits a second in smaller commits.
	CommitDepth int
	// Owner names this instance on the leases it writes for work it hands
	// over; Board, when set, is where the workers offer to take new work at
	// once (package handover): a commit writes that work leased to them and
	// hands it over once durable, instead of kicking them to claim it.
	Owner string
	// Tracing makes the group commits' spans (nil: none).
	Tracing *telemetry.Tracing
	Board   *handover.Board
	// Relay, when set, is the delivery bus's relay (*bus.Relayer, with
	// --nats-url). While it is Ready, the new delivery work of a commit
	// that no worker took at once is written to publish and handed to it
	// after the commit (no relay round takes it from the store again);
	// delivery work written unrelayed (the bus down, a resubmit) kicks
	// it.
	Relay Relay
	// Shared is true when other instances of the site change the directory
	// in the same store: a batch holding a message without a route (or a
	// forward for a frontend not known here) reads the directory again
	// before refusing it, so a frontend registered through another
	// instance a moment ago is found. One read per commit at most.
	Shared bool
	// Site, when set, says why this instance's site does not take a
	// peer's forward with these options now (the forward is answered that
	// error, unless its id is stored: a retry), or nil; a resubmit of a
	// message with them is refused with it too (a bulk's skips it). A
	// client's submit is checked by the gateway before it comes here.
	Site func(messages.Options) error
}

// DefaultMaxBatch is the most submissions one group commit takes: 512,
// large enough to absorb a burst, small enough that one transaction stays
// in the milliseconds.
const DefaultMaxBatch = 512

// withDefaults fills in the settings left zero (or negative): MaxBatch,
// StoreTimeout and CommitDepth.
func (c Config) withDefaults() Config {
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = persistence.CallTimeout
	}
	if c.CommitDepth <= 0 {
		c.CommitDepth = 1
	}
	return c
}

// Relay is the delivery bus's relay, as the intake uses it
// (*bus.Relayer).
type Relay interface {
	// Ready reports whether new delivery work may be written to publish
	// (persistence.NewMessage.Publish).
	Ready() bool
	// Publish takes the rows a commit wrote to publish.
	Publish(rows []persistence.Relay)
	// Kick says unrelayed delivery work was committed.
	Kick()
}

// Remote is the intake's view of the frontends served by peers: the
// node's peer book (peer.Book).
type Remote interface {
	// Owner returns the peer that serves frontend and whether it is
	// healthy now; ok is false when no peer does.
	Owner(frontend string) (peer string, healthy, ok bool)
}

// Local keeps the names of the frontends this node serves, which its
// peers learn from it: the node's peer book (peer.Book).
type Local interface {
	// SetLocal replaces the names (sorted).
	SetLocal(names []string)
}
