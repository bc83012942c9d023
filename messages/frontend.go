package messages

import "time"

// Outgoing is a message as a frontend receives it: an element of a poll
// response, the body of a webhook POST, and the payload of an in-process
// Delivery. Attempt counts deliveries of this id to this frontend (1 first).
type Outgoing struct {
	ID                string `json:"id"`
	SourceMSISDN      string `json:"source_msisdn"`
	DestinationMSISDN string `json:"destination_msisdn"`
	Body              string `json:"message_body,omitempty"`
	Options
	SourceSMSC string `json:"source_smsc"`
	Attempt    int    `json:"attempt"`
	// Trace is the message's W3C traceparent (a webhook gets its
	// attempt's span in the traceparent header); not in the body.
	Trace string `json:"-"`
}

// OutgoingOf is the frontend's view of m.
func OutgoingOf(m Message) Outgoing {
	return Outgoing{
		ID: m.ID, SourceMSISDN: m.SourceMSISDN, DestinationMSISDN: m.DestinationMSISDN,
		Body: m.Body, Options: m.Options, SourceSMSC: m.SourceSMSC, Attempt: m.Attempts, Trace: m.Trace,
	}
}

// OutcomeStale is the AckOutcome of a verdict about an old attempt.
const OutcomeStale = "stale"

// DeliveryStatus is a frontend's verdict on one message.
type DeliveryStatus string

// Frontend verdicts.
const (
	// Delivered: the subscriber has it.
	Delivered DeliveryStatus = "delivered"
	// Failed: it can never be delivered (the message is dead-lettered).
	Failed DeliveryStatus = "failed"
	// Retry: not now; the node retries with backoff.
	Retry DeliveryStatus = "retry"
)

// Valid reports whether s is a known verdict.
func (s DeliveryStatus) Valid() bool { return s == Delivered || s == Failed || s == Retry }

// DeliveryResult is a frontend's verdict on one message: an element of a
// pull frontend's ack, and the reply of an in-process frontend actor to a
// Delivery.
type DeliveryResult struct {
	ID     string         `json:"id"`
	Status DeliveryStatus `json:"status"`
	Reason string         `json:"reason,omitempty"`
	// Attempt, when set (pull acks; an in-process frontend should echo the
	// Delivery's Message.Attempt), is the attempt the verdict is about, as
	// the poll or the Delivery offered it. An in-process answer about an
	// attempt no longer in flight is late (docs/embedding.md). A retry or failed verdict about an earlier attempt
	// than the message's latest comes from a lease that ran out while the
	// message was offered again: it is stale and ignored. A delivered
	// verdict is always taken.
	Attempt int `json:"attempt,omitempty"`
	// SMSCMessageIDs, in an smpp frontend's delivered verdict, are the
	// message ids its SMSC gave the message's submit_sm (one per part),
	// kept for the SMSC's receipts. Not in JSON.
	SMSCMessageIDs []string `json:"-"`
	// Note, when set, is added to the history detail of the verdict's
	// outcome (an smpp frontend marks a resend with it). Not in JSON.
	Note string `json:"-"`
	// Resend, with Note, says the attempt's claim followed an attempt
	// that left no verdict (an smpp frontend's resend mark), kept as its
	// history entry's HistoryEntry.Resend. Not in JSON.
	Resend bool `json:"-"`
	// RetryAfter, in a Retry verdict, is how long the frontend asked the
	// node to wait (a webhook's 429 or 503 Retry-After): the next attempt
	// comes no sooner than that, within the delivery policy's longest
	// wait (--delivery-retry-max). Not in JSON.
	RetryAfter time.Duration `json:"-"`
	// Deferred, in a Retry verdict, says the message was not attempted:
	// the frontend is busy and asks to be tried later (its SMSC answered
	// ESME_RTHROTTLED, or the pause that answer began outlasts the
	// message's time; a webhook answered 429), or the node's own pacing of
	// it kept the message (an smpp frontend's submit rate left no slot in
	// its time), and nothing of the message reached it. The retry comes at RetryAfter (within the same bounds)
	// and uses no attempt: the attempt its claim counted is given back, so
	// that max_attempts counts only real attempts. Deferrals are bounded
	// by the message's validity alone (it then fails with reason
	// expired). Not in JSON.
	Deferred bool `json:"-"`
}

// AckOutcome tells a pull frontend what its ack of one message did:
// "applied", "already_recorded" (acked before: harmless), "no_work" (this
// frontend has no such message), "not_offered" (the message was never
// offered to this frontend: nothing changed) or "stale" (a retry or failed
// verdict about an attempt that is no longer the latest; ignored).
type AckOutcome struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
}

// Delivery is sent to an in-process frontend actor, which must Respond with
// a *DeliveryResult for the same ID (within the webhook timeout, else the
// attempt counts as a retry). A redelivery after a crash carries the same ID.
type Delivery struct {
	Message Outgoing
	// Deadline is when the node stops waiting for the reply and counts the
	// attempt as a retry.
	Deadline time.Time
}
