package messages

import "time"

// Actor messages. Requests from outside the actor system (HTTP handlers, the
// embedding API) carry a buffered reply channel instead of using futures.

// Submission is a client's message to accept (POST /api/messages).
type Submission struct {
	ID                string `json:"id,omitempty"`
	SourceMSISDN      string `json:"source_msisdn"`
	DestinationMSISDN string `json:"destination_msisdn"`
	Body              string `json:"message_body"`
}

// Submit asks the intake to accept a submission. The reply comes after the
// commit.
type Submit struct {
	Submission Submission
	Reply      chan<- SubmitReply
}

// SubmitReply answers Submit. Created is false when the id was already
// stored (Message is then the stored one).
type SubmitReply struct {
	Message Message
	Created bool
	Err     error
}

// Resubmit asks the intake to re-route one failed or forward_failed message.
type Resubmit struct {
	ID    string
	Reply chan<- ResubmitReply
}

// ResubmitReply answers Resubmit with the message after it.
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

// Kick tells a frontend's delivery worker that new work was committed for it.
type Kick struct{ Frontend string }

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
// commit) what is in flight; Done is closed when they have.
type Drain struct{ Done chan<- struct{} }

// StateChanged is published on the actor system's event stream after every
// committed transition.
type StateChanged struct {
	ID       string
	State    State
	Frontend string
	At       time.Time
	Detail   string
	Reason   string
}
