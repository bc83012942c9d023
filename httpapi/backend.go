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

	// Ready reports why the node cannot serve (nil when it can).
	Ready(ctx context.Context) error
}

// Status is the document of GET /api/status.
type Status struct {
	Node              string              `json:"node"`
	InstanceID        string              `json:"instance_id"`
	Version           string              `json:"version"`
	Store             string              `json:"store"`
	Counts            map[string]int64    `json:"counts"`
	ForwardQueueDepth int64               `json:"forward_queue_depth"`
	OutboxDepth       int64               `json:"outbox_depth"`
	DLQDepth          int64               `json:"dlq_depth"`
	OutboxOldest      *time.Time          `json:"outbox_oldest,omitempty"`
	Peers             []any               `json:"peers"`
	Frontends         []messages.Frontend `json:"frontends"`
}
