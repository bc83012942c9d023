package messages

import "time"

// Message is the stored record of one message, as the API shows it. Times are
// UTC. History is filled only where a caller asked for it (a single message).
type Message struct {
	ID                string `json:"id"`
	SourceMSISDN      string `json:"source_msisdn"`
	DestinationMSISDN string `json:"destination_msisdn"`
	// Body is the text of a text message; a binary message has
	// Options.Binary instead.
	Body string `json:"message_body,omitempty"`
	Options
	State      State     `json:"state"`
	SourceSMSC string    `json:"source_smsc"`
	DestSMSC   string    `json:"dest_smsc"`
	Frontend   string    `json:"frontend"`
	Attempts   int       `json:"attempts"`
	Reason     string    `json:"reason,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// SubmittedAt is when the message was accepted or last resubmitted; its
	// validity (--message-validity) counts from here.
	SubmittedAt time.Time `json:"submitted_at"`
	// QueuedAt is when the message entered forward_queued; nil in every
	// other state. Its wait for forward_failed counts from here.
	QueuedAt *time.Time `json:"queued_at,omitempty"`
	// NextAttemptAt is when its delivery (or forward) work is due next:
	// the next retry, a scheduled delivery; nil without such work. Read
	// by GetMessage and ListMessages only.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// LastDetail is the detail of its last transition: why it waits
	// ("attempt 2 failed: HTTP 503; retry in 40s") or failed. Read by
	// GetMessage and ListMessages only.
	LastDetail string         `json:"last_detail,omitempty"`
	History    []HistoryEntry `json:"history,omitempty"`

	// Seq orders messages by acceptance within one store (list cursors).
	Seq int64 `json:"-"`
	// Token is the 64-bit hash of ID that places the message on the ring.
	Token uint64 `json:"-"`
}

// HistoryEntry is one transition of a message.
type HistoryEntry struct {
	State  State     `json:"state"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"`
}

// Failure reasons recorded on failed messages.
const (
	ReasonMaxAttempts = "max_attempts" // --delivery-max-attempts used up
	ReasonExpired     = "expired"      // --message-validity passed
	ReasonRejected    = "rejected"     // the frontend refused it permanently
	// ReasonForwardTimeout: forward_queued for --forward-max-retries x
	// --forward-retry-interval without reaching its peer.
	ReasonForwardTimeout = "forward_timeout"
	// ReasonPeerRejected: the peer refused the forward for good (4xx).
	ReasonPeerRejected = "peer_rejected"
	// ReasonPeerUnsupported: the message uses optional fields (data coding,
	// binary body, validity, scheduled delivery) and its peer does not
	// announce the capability to carry them: it is not forwarded rather
	// than delivered otherwise than asked. Upgrade the peer, resubmit.
	ReasonPeerUnsupported = "peer_unsupported"
)
