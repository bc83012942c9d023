package messages

import "time"

// Actor messages. Requests from outside the actor system (HTTP handlers, the
// embedding API) carry a buffered reply channel instead of using futures.

// Submission is a client's message to accept (POST /api/messages). Body
// is the text of a text message; a binary message has Options.Binary
// instead (data_coding binary), never both.
type Submission struct {
	ID                string `json:"id,omitempty"`
	SourceMSISDN      string `json:"source_msisdn"`
	DestinationMSISDN string `json:"destination_msisdn"`
	Body              string `json:"message_body,omitempty"`
	Options
	// SubmittedBy is the credential that submits it (set by the gateway
	// from the caller, never read from the body): a client credential
	// reads only its own messages, and an id it chose is its own.
	SubmittedBy string `json:"-"`
	// Trace is the W3C traceparent of the submit's span when its trace is
	// sampled (set by the gateway, never read from the body).
	Trace string `json:"-"`
	// ReceiptTo is the system_id of the SMPP client (ESME) that submitted
	// it asking for a delivery receipt (registered_delivery); its final
	// state is reported back to that client (docs/smpp.md). Set by the
	// SMPP listener only.
	ReceiptTo string `json:"-"`
	// ReceiptFailedOnly asks for the receipt of a failure only
	// (registered_delivery 0x02).
	ReceiptFailedOnly bool `json:"-"`
}

// Submit asks the intake to accept a submission. The reply comes after the
// commit.
type Submit struct {
	Submission Submission
	// Refusal, when set, is why the submission may not be stored (its
	// times, no room): it is answered with the stored message if its id
	// (set) is stored already, a retry, else with Refusal.
	Refusal error
	Reply   chan<- SubmitReply
}

// SubmitReply answers Submit. Created is false when the id was already
// stored (Message is then the stored one).
type SubmitReply struct {
	Message Message
	Created bool
	Err     error
}

// AcceptForwards asks the intake to accept messages peer From forwarded to
// us. They join the same group commit as submits; the reply comes after it.
type AcceptForwards struct {
	From     string
	Forwards []Forward
	Reply    chan<- AcceptForwardsReply
}

// AcceptForwardsReply answers AcceptForwards: one result per forward, in
// order, or Err when none was stored.
type AcceptForwardsReply struct {
	Results []ForwardResult
	Err     error
}

// ApplyStatuses asks the intake to record delivery_status reports of peer
// From about messages we forwarded to it.
type ApplyStatuses struct {
	From    string
	Reports []StatusReport
	Reply   chan<- ApplyStatusesReply
}

// ApplyStatusesReply answers ApplyStatuses, one result per report in order.
type ApplyStatusesReply struct {
	Results []StatusReply
	Err     error
}

// Resubmit asks the intake to re-route one failed or forward_failed message.
type Resubmit struct {
	ID    string
	Reply chan<- ResubmitReply
}

// ResubmitReply answers Resubmit with the message after it. A resubmit
// made whose message could not be read back is answered an Err wrapping
// ErrNotReadBack, and a Message of only the id, frontend, destination
// SMSC and state it set.
type ResubmitReply struct {
	Message Message
	Err     error
}

// ResubmitBulk re-routes every message in State (failed or forward_failed).
type ResubmitBulk struct {
	State State
	Reply chan<- BulkReply
}

// BulkReply answers ResubmitBulk: how many were resubmitted, and how many
// were left because no route serves them now.
type BulkReply struct {
	Resubmitted int   `json:"resubmitted"`
	Skipped     int   `json:"skipped"`
	Err         error `json:"-"`
}

// PutRoute, DeleteRoute, PutFrontend and DeleteFrontend change the routing
// directory; the reply is nil or an *Error.
type (
	PutRoute struct {
		Route Route
		Reply chan<- error
	}
	DeleteRoute struct {
		Prefix string
		Reply  chan<- error
	}
	PutFrontend struct {
		Frontend Frontend
		Reply    chan<- error
	}
	DeleteFrontend struct {
		Name  string
		Reply chan<- error
	}
)

// FrontendUp tells the frontend supervisor that a frontend exists (new or
// changed); FrontendDown that it is gone.
type (
	FrontendUp   struct{ Frontend Frontend }
	FrontendDown struct{ Name string }
)

// ReloadDirectory tells the intake to read routes and frontends from the
// store again (another instance of the site may have changed them).
type ReloadDirectory struct{}

// Kick tells a frontend's delivery worker that new work was committed for
// it. An empty Frontend kicks every worker.
type Kick struct{ Frontend string }

// PeerUp: discovery found peer Node (new) at these instances, or its
// instances changed.
type PeerUp struct {
	Node      string
	Instances []PeerInstance
}

// PeerGone: discovery no longer lists peer Node.
type PeerGone struct{ Node string }

// PeerResync asks discovery to send PeerUp for every current peer again:
// the peers actor sends it when it restarted and lost its children.
type PeerResync struct{}

// PeerRediscover asks discovery for a full poll now: a peer actor found
// another node answering at its peer's address (an address reused, or
// handed back to its owner), so what discovery last listed is stale and a
// poll interval is too long to wait. The peers actor passes it on.
type PeerRediscover struct{}

// PeerAddresses: discovery's listed addresses that have never answered an
// identity call, after each of its rounds (and at its start). The peers
// actor shows each as a peer named by its address until its name is
// learned, so that an address that was down from the start is seen (and
// alerted on) like any peer.
type PeerAddresses struct{ Unidentified []AddressCheck }

// AddressCheck is one unidentified address: Checked when the round asked
// it, Err that call's failure.
type AddressCheck struct {
	Address string
	Checked bool
	Err     string
}

// PeerLink tells a peer's forward queue how the peer can be reached now;
// the peer actor sends it after every health check and change of instance.
type PeerLink struct {
	// Healthy opens the queue; anything else closes it (and parks the
	// peer's pending messages in forward_queued).
	Healthy bool
	// Addr is the instance to call.
	Addr string
	// ForwardBatch and StatusBatch: the peer announced the batch forms.
	ForwardBatch, StatusBatch bool
	// MessageFields: the peer announced CapMessageFields (the optional
	// message fields and the attempts of a delivery_status).
	MessageFields bool
	// TraceContext: the peer announced CapTraceContext (a traceparent in
	// forwards and delivery_status reports).
	TraceContext bool
	// MessageClass: the peer announced CapMessageClass (message_class in
	// forwards).
	MessageClass bool
	// Gone: discovery no longer lists the peer, which still answers at an
	// address it had: only the delivery_status reports owed to it go; its
	// forwards wait in forward_queued (and count down to forward_failed)
	// as for a peer that is not healthy.
	Gone bool
}

// PeerContactFailed: a request to the peer did not complete. The forward
// queue tells its peer actor, which counts it as a failed check and checks
// the peer again soon.
type PeerContactFailed struct{ Err error }

// PeerContact: the peer called us (an authenticated federation call). A
// peer actor that does not consider it healthy checks it at once.
type PeerContact struct{ Peer string }

// PeerRegistryFrom: the peer sent us its registry.
type PeerRegistryFrom struct {
	Peer      string
	Frontends []string
}

// KickPeer tells a peer's forward queue that new forward work was committed
// for it (and, with Status, delivery_status reports owed to it). An empty
// Peer kicks every peer's queue.
type KickPeer struct {
	Peer   string
	Status bool
}

// Poll is a pull frontend's long-poll: up to Max messages, waiting up to
// Wait, each leased for Lease.
type Poll struct {
	Frontend string
	Max      int
	Wait     time.Duration
	Lease    time.Duration
	// Done is closed when the poller has gone (its request ended); a
	// waiting poll whose Done is closed is dropped, not given leases.
	Done  <-chan struct{}
	Reply chan<- PollReply
}

// PollReply answers Poll.
type PollReply struct {
	Messages []Outgoing
	Err      error
}

// Ack carries a pull frontend's verdicts.
type Ack struct {
	Frontend string
	Results  []DeliveryResult
	Reply    chan<- AckReply
}

// AckReply answers Ack after the verdicts are committed.
type AckReply struct {
	Outcomes []AckOutcome
	Err      error
}

// Drain asks delivery workers to stop taking new work and finish (and
// commit) what is in flight; Done is closed when they have. The sender
// closes Abandon (when set) once it stops waiting, so that nothing waits
// on workers stopped before they drained.
type Drain struct {
	Done    chan<- struct{}
	Abandon <-chan struct{}
}

// StateChanged is published on the actor system's event stream after every
// committed transition.
type StateChanged struct {
	ID       string
	State    State
	Frontend string
	At       time.Time
	Detail   string
	Reason   string
	// Accepted marks the first transition of a message this node accepted
	// (a client's submission or a peer's forward), not a resubmit.
	Accepted bool
}
