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
	LastDetail string `json:"last_detail,omitempty"`
	// SubmittedBy names the credential that submitted it on this node
	// (empty on a node without credentials, and for a message a peer
	// forwarded).
	SubmittedBy string `json:"submitted_by,omitempty"`
	// TraceID is the id of the message's trace (see Trace); empty when
	// its trace was not sampled.
	TraceID string `json:"trace_id,omitempty"`
	// SMSC, for a message an smpp frontend delivered, holds the message
	// id its SMSC gave each submit_sm (one per part of a long text), with
	// the stat of the latest receipt for it, in the order the SMSC gave
	// them. Read by GetMessage only; set with SetSMSC.
	SMSC []SMSCRef `json:"smsc,omitempty"`
	// SMSCMessageID is the latest of SMSC's ids (a long text's last
	// part's): CONTRACT.md's smsc_message_id. Set with SetSMSC.
	SMSCMessageID string         `json:"smsc_message_id,omitempty"`
	History       []HistoryEntry `json:"history,omitempty"`
	// Trace is the W3C traceparent of the span the message's later spans
	// are children of (its submit, or its receipt from a peer), kept with
	// it so that a retry hours later continues the same trace; empty when
	// the trace was not sampled. Set it with SetTrace.
	Trace string `json:"-"`

	// Seq orders messages by acceptance within one store (list cursors).
	Seq int64 `json:"-"`
	// Token is the 64-bit hash of ID that places the message on the ring.
	Token uint64 `json:"-"`
}

// SetSMSC sets SMSC to refs (in the order the SMSC gave them) and
// SMSCMessageID to the latest of them.
func (m *Message) SetSMSC(refs []SMSCRef) {
	m.SMSC, m.SMSCMessageID = refs, ""
	if n := len(refs); n > 0 {
		m.SMSCMessageID = refs[n-1].MessageID
	}
}

// SetTrace sets Trace to tp and TraceID to its trace id.
func (m *Message) SetTrace(tp string) {
	m.Trace, m.TraceID = tp, TraceIDOf(tp)
}

// TraceIDOf is the trace id of a W3C traceparent
// (version-traceid-spanid-flags), or "" when tp is too short to hold one.
func TraceIDOf(tp string) string {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' {
		return ""
	}
	return tp[3:35]
}

// SMSCRef is an SMSC's message id for (a part of) a message, and the stat
// of its latest delivery receipt ("DELIVRD", "UNDELIV", ...; "" before
// one came).
type SMSCRef struct {
	MessageID string `json:"message_id"`
	Receipt   string `json:"receipt,omitempty"`
}

// HistoryEntry is one transition of a message. Detail is for people;
// Attempt and Deferrals say the same for programs.
type HistoryEntry struct {
	State  State     `json:"state"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"`
	// Attempt is the delivery attempt the entry records the outcome of
	// (the one its detail names: "attempt 2 failed", "delivered to X
	// (attempt 2)", "not attempted (attempt 2 given back)"). 0 when it
	// speaks for none (accepted, forwarded, expired, ...), and in entries
	// written before it was kept: those say it in their detail only.
	Attempt int `json:"attempt,omitempty"`
	// Deferrals counts the deferrals the entry records (the frontend was
	// busy: the message was not attempted and Attempt was given back): a
	// deferral that follows a deferral of the same attempt is folded into
	// its entry rather than adding one (see LastAt). 0 when the entry is
	// no deferral (and in entries written before it was kept).
	Deferrals int `json:"deferrals,omitempty"`
	// LastAt is when the last of an entry's Deferrals was recorded, when
	// it has more than one: At is the first's, and Detail the last's, with
	// "; deferred <n> times, the last at <LastAt>" after it.
	LastAt *time.Time `json:"last_at,omitempty"`
	// Resend says the claim of Attempt whose outcome the entry records
	// followed an attempt that left no verdict, so that it may have sent
	// the message a second time (an smpp frontend's resend mark, which
	// its detail gives as "resent: attempt n left no recorded verdict
	// ..."; a deferral's, whose claim sent nothing, as "attempt n left
	// no recorded verdict ..."). False otherwise, and in entries written
	// before it was kept: those say it in their detail only.
	Resend bool `json:"resend,omitempty"`
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
