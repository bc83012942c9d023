package httpapi

import (
	"context"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Backend is what the gateway calls: the node. Errors a client can act on
// are *messages.Error; anything else is answered 500.
type Backend interface {
	// Submit validates the submission (an invalid_request *messages.Error)
	// and accepts it.
	Submit(ctx context.Context, s messages.Submission) (m messages.Message, created bool, err error)
	Message(ctx context.Context, id string) (messages.Message, error)
	Messages(ctx context.Context, q persistence.ListQuery) (persistence.Page, error)
	Resubmit(ctx context.Context, id string) (messages.Message, error)
	ResubmitBulk(ctx context.Context, state messages.State) (messages.BulkReply, error)
	Status(ctx context.Context) (Status, error)

	Routes(ctx context.Context) ([]messages.Route, error)
	PutRoute(ctx context.Context, r messages.Route) (messages.Route, error)
	DeleteRoute(ctx context.Context, prefix string) error

	Frontends(ctx context.Context) ([]messages.Frontend, error)
	PutFrontend(ctx context.Context, f messages.Frontend) (messages.Frontend, error)
	DeleteFrontend(ctx context.Context, name string) error
	Poll(ctx context.Context, frontend string, max int, wait, lease time.Duration) ([]messages.Outgoing, error)
	Ack(ctx context.Context, frontend string, results []messages.DeliveryResult) ([]messages.AckOutcome, error)

	// Timeline is the node's own last hour (GET /api/stats/timeline).
	Timeline(ctx context.Context) (Timeline, error)

	// Audit records a change a caller made (it was made: the record
	// follows it) in the audit trail and as a log line; a record the
	// store cannot keep is logged as an error, never lost in silence.
	Audit(ctx context.Context, e messages.AuditEntry)
	// AuditTrail is a page of the trail (GET /api/audit).
	AuditTrail(ctx context.Context, q persistence.AuditQuery) (persistence.AuditPage, error)

	// Ready reports why the node cannot serve (nil when it can).
	Ready(ctx context.Context) error
	// Storage tells whether the store has room for new work: "ok", or
	// "full" and why (submits and forwards then get 507 storage_full;
	// everything else goes on, so the node stays ready).
	Storage() (state, why string)
	// Bus tells the delivery bus's state: "off" (no --nats-url), "up", or
	// "down" and why (the node stays ready: submits go to the outbox).
	Bus() (state, why string)

	// Peers lists every known peer (GET /api/peers), ordered by node.
	Peers(ctx context.Context) ([]messages.PeerInfo, error)

	// The federation API. The gateway has authenticated the caller's
	// transport (mutual TLS, header = certificate name) and checked that the
	// body's node (where there is one) equals from, the X-Federation-Node
	// header. The backend refuses with federation_disabled when federation
	// is off and unknown_peer when from is a node it has never known (not
	// discovered now, and no registry learned from it before); an accepted
	// call from a peer it does not consider healthy triggers a health check
	// of that peer at once (wake on contact).

	// FederationCaller admits the caller from before the gateway reads its
	// call's body: federation_disabled, unknown_peer (or unavailable while
	// the node starts or stops) as above, so that a caller federation does
	// not serve makes the node decode nothing. The calls below check again.
	FederationCaller(from string) error
	// Identity is this node's identity document (served even when
	// federation is off, so an operator can see who answers).
	Identity() messages.Identity
	// FederationHealth answers a health exchange with our own document.
	FederationHealth(ctx context.Context, from string, h messages.Health) (messages.Health, error)
	// FederationRegistry stores the caller's registry and answers ours.
	FederationRegistry(ctx context.Context, from string, r messages.Registry) (messages.Registry, error)
	// FederationForward accepts forwarded messages (validated by the
	// gateway) in one commit and answers after it, in input order. A message
	// refused alone (e.g. a frontend we do not serve) has its result's Error
	// set; an error return refuses them all.
	FederationForward(ctx context.Context, from string, fs []messages.Forward) ([]messages.ForwardResult, error)
	// FederationStatus records delivery_status reports (validated by the
	// gateway), in input order.
	FederationStatus(ctx context.Context, from string, rs []messages.StatusReport) ([]messages.StatusReply, error)
}

// Status is the document of GET /api/status.
type Status struct {
	Node       string `json:"node"`
	InstanceID string `json:"instance_id"`
	Version    string `json:"version"`
	Store      string `json:"store"`
	// Federation is --federation: whether the node has peers at all.
	Federation        bool             `json:"federation"`
	Counts            map[string]int64 `json:"counts"`
	ForwardQueueDepth int64            `json:"forward_queue_depth"`
	OutboxDepth       int64            `json:"outbox_depth"`
	DLQDepth          int64            `json:"dlq_depth"`
	// OutboxOldest is since when the oldest outbox work that is due and
	// not leased has waited (its due time, on the node's clock): what
	// switchboard_outbox_oldest_age_seconds counts from; nil when none
	// waits.
	OutboxOldest *time.Time `json:"outbox_oldest,omitempty"`
	// Now is the node's clock as it answered: what OutboxOldest's age,
	// and a message's next attempt, are measured against (the web UI's
	// "oldest waits" and "next: in ..." do, not against the browser's
	// clock, which may be off).
	Now       time.Time           `json:"now"`
	Peers     []messages.PeerInfo `json:"peers"`
	Frontends []messages.Frontend `json:"frontends"`
	// Delivery is where the instance's delivery work comes from now:
	// "store" or "bus"; Bus is the bus's state (nil without --nats-url).
	Delivery string     `json:"delivery"`
	Bus      *BusStatus `json:"bus,omitempty"`
	// TraceURL is --trace-url: the link of a message's trace_id, with
	// {trace_id} replaced (absent when not set).
	TraceURL string `json:"trace_url,omitempty"`
}

// BusStatus is the delivery bus in GET /api/status.
type BusStatus struct {
	State  string `json:"state"`
	Stream string `json:"stream"`
	Reason string `json:"reason,omitempty"`
}

// Timeline is the document of GET /api/stats/timeline: the node's own
// counters over the last hour, a point each IntervalSeconds, oldest first
// (the web UI's live chart).
type Timeline struct {
	IntervalSeconds int             `json:"interval_seconds"`
	Points          []TimelinePoint `json:"points"`
}

// TimelinePoint is one interval: messages accepted, delivered and failed
// (failed or forward_failed) per second over it, and the depths at its
// end (omitted when the store could not be read).
type TimelinePoint struct {
	At                time.Time `json:"at"`
	Accepted          float64   `json:"accepted_per_second"`
	Delivered         float64   `json:"delivered_per_second"`
	Failed            float64   `json:"failed_per_second"`
	OutboxDepth       *int64    `json:"outbox_depth,omitempty"`
	ForwardQueueDepth *int64    `json:"forward_queue_depth,omitempty"`
}
