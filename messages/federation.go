package messages

import (
	"time"
	"unicode/utf8"
)

// The federation protocol's wire documents (docs/federation.md).
// Every request carries the header FederationHeader naming the caller.

// FederationHeader names the calling node on every federation request.
const FederationHeader = "X-Federation-Node"

// FederationToHeader names the node a federation request is for (every
// request but identity; docs/federation.md): a callee that is another node
// refuses it (CodeMisdirected), so that a call made to an address the peer
// no longer holds is not answered by whoever holds it now. A node of an
// earlier version neither sends nor checks it; a request without it is
// served as before.
const FederationToHeader = "X-Federation-To"

// ProtocolVersion is the federation protocol this binary speaks.
const ProtocolVersion = 1

// Capabilities a node may announce in its identity. A caller uses a batch
// form only when the callee announces it; the single forms always work.
const (
	// CapForwardBatch: POST /api/federation/forward_batch takes
	// ForwardBatch and answers ForwardBatchReply.
	CapForwardBatch = "forward_batch"
	// CapStatusBatch: POST /api/federation/delivery_status_batch takes
	// StatusBatch and answers StatusBatchReply.
	CapStatusBatch = "delivery_status_batch"
	// CapMessageFields: the node takes the optional message fields
	// (Options: data_coding, message_body_base64, validity_until,
	// deliver_after) in forwards and the attempts of a delivery_status. A
	// message that uses them is forwarded only to a peer announcing it;
	// attempts are reported only to one.
	CapMessageFields = "message_fields"
	// CapTraceContext: the node takes a W3C traceparent in forwards and
	// delivery_status reports and continues the message's trace with it.
	// A node sends one only to a peer announcing it (and only over the
	// authenticated federation API).
	CapTraceContext = "trace_context"
	// CapMessageClass: the node takes message_class (Options.MessageClass)
	// in forwards. A message with a class is forwarded only to a peer
	// announcing both it and CapMessageFields: a node before it would
	// ignore the field (federation documents are read tolerantly) and
	// deliver the message without its class, otherwise than asked. Inside
	// a site the same holds between instances: each announces its
	// capabilities to the ring (RingJoin.Capabilities), and a message
	// with a class is taken only while every member announces it
	// (Options.Needs).
	CapMessageClass = "message_class"
)

// Identity is the document of GET /api/federation/identity.
type Identity struct {
	Node            string   `json:"node"`
	InstanceID      string   `json:"instance_id"`
	ProtocolVersion int      `json:"protocol_version"`
	Capabilities    []string `json:"capabilities"`
}

// Has reports whether the identity announces capability c.
func (id Identity) Has(c string) bool {
	for _, x := range id.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// Validate reports what is wrong with an identity a peer sent.
func (id Identity) Validate() error {
	switch {
	case !ValidName(id.Node):
		return Errorf(CodeInvalidRequest, "identity: node %q is not a valid name", id.Node)
	case !ValidName(id.InstanceID):
		return Errorf(CodeInvalidRequest, "identity: instance_id %q is not a valid name", id.InstanceID)
	case id.ProtocolVersion != ProtocolVersion:
		return Errorf(CodeInvalidRequest, "identity: protocol_version %d, this node speaks %d", id.ProtocolVersion, ProtocolVersion)
	}
	return nil
}

// Health statuses a node reports about itself.
const (
	// HealthOK: the node accepts forwards.
	HealthOK = "ok"
	// HealthStopping: the node is shutting down; callers treat it as a
	// failed check and queue.
	HealthStopping = "stopping"
)

// Health is the body and the answer of POST /api/federation/health.
type Health struct {
	Node              string    `json:"node"`
	Time              time.Time `json:"time"`
	Status            string    `json:"status"`
	ForwardQueueDepth int64     `json:"forward_queue_depth"`
}

// Validate reports what is wrong with a health document.
func (h Health) Validate() error {
	switch {
	case !ValidName(h.Node):
		return Errorf(CodeInvalidRequest, "node %q is not a valid name", h.Node)
	case h.Time.IsZero():
		return Errorf(CodeInvalidRequest, "time is required")
	case h.Status != HealthOK && h.Status != HealthStopping:
		return Errorf(CodeInvalidRequest, "status %q: must be %q or %q", h.Status, HealthOK, HealthStopping)
	case h.ForwardQueueDepth < 0:
		return Errorf(CodeInvalidRequest, "forward_queue_depth must not be negative")
	}
	return nil
}

// MaxRegistryFrontends bounds one registry document.
const MaxRegistryFrontends = 10000

// Registry is the body and the answer of POST /api/federation/registry: the
// frontends a node serves.
type Registry struct {
	Node      string   `json:"node"`
	Frontends []string `json:"frontends"`
}

// Validate reports what is wrong with a registry document.
func (r Registry) Validate() error {
	if !ValidName(r.Node) {
		return Errorf(CodeInvalidRequest, "node %q is not a valid name", r.Node)
	}
	if r.Frontends == nil {
		return Errorf(CodeInvalidRequest, "frontends is required (an empty list is fine)")
	}
	if len(r.Frontends) > MaxRegistryFrontends {
		return Errorf(CodeInvalidRequest, "frontends: at most %d", MaxRegistryFrontends)
	}
	for _, f := range r.Frontends {
		if !ValidName(f) {
			return Errorf(CodeInvalidRequest, "frontend %q is not a valid name", f)
		}
	}
	return nil
}

// Forward is the body of POST /api/federation/forward: a message handed to
// the node that serves its frontend. The id is the origin's and stays the
// message's id everywhere.
type Forward struct {
	ID                string `json:"id"`
	SourceMSISDN      string `json:"source_msisdn"`
	DestinationMSISDN string `json:"destination_msisdn"`
	Body              string `json:"message_body,omitempty"`
	Options
	SourceSMSC string `json:"source_smsc"`
	DestSMSC   string `json:"dest_smsc"`
	Frontend   string `json:"frontend"`
	// Traceparent is the W3C trace context of the forward's span (only to
	// a peer announcing CapTraceContext; empty when the message's trace is
	// not sampled).
	Traceparent string `json:"traceparent,omitempty"`
}

// ForwardOf is the forward document of a stored message.
func ForwardOf(m Message) Forward {
	return Forward{
		ID: m.ID, SourceMSISDN: m.SourceMSISDN, DestinationMSISDN: m.DestinationMSISDN,
		Body: m.Body, Options: m.Options, SourceSMSC: m.SourceSMSC, DestSMSC: m.DestSMSC, Frontend: m.Frontend,
	}
}

// Validate reports the first problem of a forward as an invalid_request
// *Error naming the field. The message fields follow the client rules, but
// for a source a search cannot find (see Submission.validate).
func (f Forward) Validate() error {
	if f.ID == "" {
		return Errorf(CodeInvalidRequest, "id is required")
	}
	sub := Submission{ID: f.ID, SourceMSISDN: f.SourceMSISDN, DestinationMSISDN: f.DestinationMSISDN, Body: f.Body, Options: f.Options}
	if err := sub.validate(false); err != nil {
		return err
	}
	switch {
	case !ValidName(f.SourceSMSC):
		return Errorf(CodeInvalidRequest, "source_smsc %q is not a valid node name", f.SourceSMSC)
	case !ValidName(f.DestSMSC):
		return Errorf(CodeInvalidRequest, "dest_smsc %q is not a valid node name", f.DestSMSC)
	case !ValidName(f.Frontend):
		return Errorf(CodeInvalidRequest, "frontend %q is not a valid name", f.Frontend)
	}
	return nil
}

// ForwardReply is the 202 answer of POST /api/federation/forward.
// Duplicate is true when the id was already stored (nothing new was
// written). State is the message's state at the callee; when it is final
// (delivered or failed) the origin may record it at once, without waiting
// for a delivery_status that was perhaps sent before.
type ForwardReply struct {
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate"`
	State     State  `json:"state,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// MaxForwardBatch bounds one forward_batch request.
const MaxForwardBatch = 1000

// ForwardBatch is the body of POST /api/federation/forward_batch.
type ForwardBatch struct {
	Messages []Forward `json:"messages"`
}

// ForwardResult is one element of a ForwardBatchReply: the reply for the
// message at the same index, or the error that rejected it (a rejected
// message is stored nowhere; the others are stored in one transaction).
type ForwardResult struct {
	ForwardReply
	Error *Error `json:"error,omitempty"`
}

// ForwardBatchReply answers a ForwardBatch, in input order.
type ForwardBatchReply struct {
	Results []ForwardResult `json:"results"`
}

// Report statuses of a StatusReport.
const (
	ReportDelivered = "delivered"
	ReportFailed    = "failed"
)

// StatusReport is the body of POST /api/federation/delivery_status: the
// final fate of a forwarded message, sent by the node that delivered it
// (Node) back to the origin.
type StatusReport struct {
	ID     string    `json:"id"`
	Node   string    `json:"node"`
	Status string    `json:"status"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
	// Attempts is how many delivery attempts the reporting node made
	// (sent only to an origin announcing CapMessageFields); the origin
	// shows it as the message's attempts.
	Attempts int `json:"attempts,omitempty"`
	// Traceparent is the W3C trace context of the report's span (only to
	// an origin announcing CapTraceContext).
	Traceparent string `json:"traceparent,omitempty"`
}

// MaxReasonLen bounds a failure reason a peer sends.
const MaxReasonLen = 1024

// Validate reports what is wrong with a status report.
func (r StatusReport) Validate() error {
	switch {
	case !ValidID(r.ID):
		return Errorf(CodeInvalidRequest, "id %q is not a valid message id", r.ID)
	case !ValidName(r.Node):
		return Errorf(CodeInvalidRequest, "node %q is not a valid name", r.Node)
	case r.Status != ReportDelivered && r.Status != ReportFailed:
		return Errorf(CodeInvalidRequest, "status %q: must be %q or %q", r.Status, ReportDelivered, ReportFailed)
	case r.At.IsZero():
		return Errorf(CodeInvalidRequest, "at is required")
	case len(r.Reason) > MaxReasonLen || !utf8.ValidString(r.Reason):
		return Errorf(CodeInvalidRequest, "reason must be valid UTF-8 of at most %d bytes", MaxReasonLen)
	case r.Attempts < 0:
		return Errorf(CodeInvalidRequest, "attempts must not be negative")
	}
	return nil
}

// StatusReply answers a StatusReport: Outcome is "applied",
// "already_recorded" (reported before, or already final: harmless) or
// "no_work" (the origin has no such message sent to the reporting node).
type StatusReply struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
}

// MaxStatusBatch bounds one delivery_status_batch request.
const MaxStatusBatch = 1000

// StatusBatch is the body of POST /api/federation/delivery_status_batch.
type StatusBatch struct {
	Statuses []StatusReport `json:"statuses"`
}

// StatusBatchReply answers a StatusBatch, in input order.
type StatusBatchReply struct {
	Results []StatusReply `json:"results"`
}

// PeerState is this node's view of a peer's health.
type PeerState string

// Peer states (docs/api.md, "Peer states").
const (
	// PeerUnknown: the first check is in progress.
	PeerUnknown PeerState = "unknown"
	// PeerHealthy: the last check passed; only healthy peers get forwards.
	PeerHealthy PeerState = "healthy"
	// PeerDegraded: 1-2 consecutive failed checks.
	PeerDegraded PeerState = "degraded"
	// PeerUnhealthy: 3 or more consecutive failed checks.
	PeerUnhealthy PeerState = "unhealthy"
	// PeerRemoved: discovery no longer lists the peer; it is shown until
	// the messages queued for it are gone (forwarded after all, failed or
	// resubmitted).
	PeerRemoved PeerState = "removed"
)

// AllPeerStates lists the peer states in a fixed order (metrics labels).
var AllPeerStates = []PeerState{PeerUnknown, PeerHealthy, PeerDegraded, PeerUnhealthy, PeerRemoved}

// PeerInstance is one address of a peer (one instance of its site).
type PeerInstance struct {
	Address    string `json:"address"`
	InstanceID string `json:"instance_id"`
}

// PeerInfo is an element of GET /api/peers and of /api/status's peers.
type PeerInfo struct {
	Node                string         `json:"node"`
	Address             string         `json:"address"`
	State               PeerState      `json:"state"`
	ConsecutiveFailures int            `json:"consecutive_failures"`
	LastSuccess         *time.Time     `json:"last_success"`
	Frontends           []string       `json:"frontends"`
	ForwardQueueDepth   int64          `json:"forward_queue_depth"`
	Instances           []PeerInstance `json:"instances"`
	// LastError is the last failed check's error (empty after a success).
	LastError string `json:"last_error,omitempty"`
}
