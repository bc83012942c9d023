package persistence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// Sentinel errors callers branch on. Drivers translate their own errors into
// these (wrapped with %w), never leak driver types.
var (
	// ErrNotFound: the message, route or frontend does not exist.
	ErrNotFound = errors.New("not found")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrNoSpace: a write failed because the store has no room left (a
	// full disk or volume, a file system mounted read-only). Nothing of it
	// was written; it may work once space is back.
	ErrNoSpace = errors.New("no space left for the store")
	// ErrFrontendInUse: DeleteFrontend of a frontend that a route names;
	// nothing was written.
	ErrFrontendInUse = errors.New("frontend named by a route")
	// ErrUnknownFrontend: PutRoute of a route to a local frontend
	// (Route.Local) that is not stored; nothing was written.
	ErrUnknownFrontend = errors.New("no such frontend")
	// ErrInvalid: the store refused the call for its input (a validator's
	// verdict, see validate.go) before it touched anything. It is the
	// caller's mistake, never the store's state: retrying the same call
	// fails the same way.
	ErrInvalid = errors.New("invalid input")
)

// Invalid marks a validator's verdict as ErrInvalid (nil stays nil); its
// text is the verdict's own.
func Invalid(verdict error) error {
	if verdict == nil {
		return nil
	}
	return invalidError{verdict}
}

type invalidError struct{ verdict error }

func (e invalidError) Error() string   { return e.verdict.Error() }
func (e invalidError) Unwrap() []error { return []error{ErrInvalid, e.verdict} }

// WorkKind is the kind of an outbox row.
type WorkKind string

// Kinds of work in the outbox.
const (
	// WorkDelivery hands a message to a local frontend; Target is the frontend.
	WorkDelivery WorkKind = "delivery"
	// WorkForward sends a message to a peer; Target is the peer's name.
	WorkForward WorkKind = "forward"
	// WorkStatus reports a delivery_status back to the origin; Target is the peer.
	WorkStatus WorkKind = "status"
	// WorkReceipt reports a message's final state to the SMPP client (ESME)
	// that submitted it, as a delivery receipt; Target is its system_id.
	WorkReceipt WorkKind = "receipt"
)

// Valid reports whether k is a known kind.
func (k WorkKind) Valid() bool {
	return k == WorkDelivery || k == WorkForward || k == WorkStatus || k == WorkReceipt
}

// The ReportTo of a message submitted over SMPP with a delivery receipt
// asked for is one of these prefixes and the ESME's system_id: "smpp:"
// for a receipt of every final state, "smpp-failed:" for one of a failure
// only (registered_delivery 0x02). A peer's name cannot hold a ':', so
// the two never meet.
const (
	ReceiptPrefix       = "smpp:"
	ReceiptFailedPrefix = "smpp-failed:"
)

// ReceiptReportTo is the ReportTo of a message whose ESME systemID asked
// for a delivery receipt (of a failure only when failedOnly).
func ReceiptReportTo(systemID string, failedOnly bool) string {
	if failedOnly {
		return ReceiptFailedPrefix + systemID
	}
	return ReceiptPrefix + systemID
}

// ReceiptTarget is the system_id a ReportTo owes a delivery receipt to,
// and whether of a failure only (ok false when it names a peer, or
// nobody).
func ReceiptTarget(reportTo string) (systemID string, failedOnly, ok bool) {
	for _, p := range []string{ReceiptPrefix, ReceiptFailedPrefix} {
		if id, found := strings.CutPrefix(reportTo, p); found && id != "" {
			return id, p == ReceiptFailedPrefix, true
		}
	}
	return "", false, false
}

// WorkSpec is the work a state change causes, written with it.
type WorkSpec struct {
	Kind   WorkKind
	Target string
	// DueAt is when the work may first be claimed (usually now).
	DueAt time.Time
}

// NewMessage is a message to accept. ID must be set (the caller generates one
// when the client gave none). Token, Seq and the times are set by the store.
type NewMessage struct {
	ID                string
	SourceMSISDN      string
	DestinationMSISDN string
	Body              string
	// Options are the message's optional fields, stored as given.
	messages.Options
	SourceSMSC string
	DestSMSC   string
	Frontend   string
	// SubmittedBy names the credential of a client's submission (empty
	// without credentials, and for a peer's forward). A client's id is
	// its own: the same id from another credential is a Conflict.
	SubmittedBy string
	// Trace is the message's W3C traceparent (messages.Message.Trace),
	// stored as given; empty when its trace is not sampled.
	Trace string
	// State is the first state: pending, or forward_queued for a peer that
	// is not healthy (queued_at is then set to now).
	State messages.State
	// Detail is the history detail of the first transition.
	Detail string
	// Work, when non-nil, is written to the outbox in the same transaction.
	Work *WorkSpec
	// Lease, when set (with Work), writes the work already leased: a
	// worker that is ready takes it at once from the accepting commit
	// (handed over in memory) instead of claiming it in a transaction of
	// its own. The lease is not ring-fenced (epoch 0), but its outcomes
	// name its owner and are fenced by it (Outcome.Owner); for delivery
	// work the message's attempts count it, as a claim's would (1).
	Lease *Lease
	// Publish, when set (with delivery work and no Lease), writes the work
	// already marked relayed: the committing instance publishes it to the
	// delivery bus itself once the commit returns (Accepted.Relay names
	// the row), instead of a relay taking it from the store in a statement
	// of its own. Work due after the commit's now is written unrelayed
	// all the same (no Accepted.Relay): the relay publishes it when due.
	// If that publish fails the instance gives the row back (Unrelay) for
	// a relay's round; if the instance dies first, the bus's
	// backstop claims the row from the store (see bus.go).
	Publish bool
	// ReportTo, when set, names the peer that forwarded this message to us
	// (its origin); when empty, or a receipt's (ReceiptReportTo), the
	// message is a client's submission. Neither may reuse a stored id with
	// other content (Accepted.Conflict). A final outcome of its delivery
	// work (delivered or failed, also by ExpireMessages) then writes status
	// work {WorkStatus, ReportTo, due now} in the same transaction, so the
	// delivery_status reaches the origin through the outbox. A receipt's
	// ReportTo writes receipt work {WorkReceipt, system_id, due now}
	// instead, when the message becomes delivered, failed or
	// forward_failed (every state it rests in for good).
	ReportTo string
	// StoredOnly marks a client's submission that may not be stored (it
	// failed a check at acceptance: no route, its times, no room) but may
	// be a retry of one that was: Accept writes nothing for it and answers
	// it as a repeat of a stored id (the stored message, or a Conflict), or
	// with Absent when its id is not stored. Its first check is made in the
	// commit, so a retry costs no read of its own. It has content (and
	// SubmittedBy, ReportTo) only: no State, Work, Lease or Publish.
	StoredOnly bool
}

// Lease is who holds work written leased, and until when.
type Lease struct {
	Owner string
	Until time.Time
}

// Accepted is the result of accepting one NewMessage.
type Accepted struct {
	// Message is the stored message: the new one, or the one already stored
	// under the same id (then Created is false and nothing was written).
	Message messages.Message
	Created bool
	// ReportTo is the stored message's ReportTo (the NewMessage's when
	// Created): for a message a peer forwarded, that peer, the caller
	// authenticated when it was stored. A forward of a stored id is a
	// retry only from it.
	ReportTo string
	// Absent is true for a StoredOnly submission whose id is not stored:
	// nothing was written, and Message is zero.
	Absent bool
	// FrontendGone is true for a message for local delivery (delivery
	// work) whose id is not stored and whose frontend the store does not
	// have (LocalFrontend): nothing was written, and Message is zero. The
	// caller routed it by a stale directory (another instance of a site
	// deleted the frontend): it reads the directory again and routes the
	// message anew. An id already stored is a retry whatever its frontend.
	FrontendGone bool
	// Conflict, for a client's submission or a peer's forward whose id was
	// already stored with other content, names the first field that
	// differs (messages.ContentDiff); nothing was written for it. A
	// forward of a stored id with the same content is its origin's retry
	// (whatever its trace context), never a conflict.
	Conflict string
	// Work is the outbox row written leased for a created message whose
	// NewMessage asked for a Lease, as a claim would return it; nil
	// otherwise.
	Work *Work
	// Relay is the outbox row written for a created message whose
	// NewMessage asked to Publish it, for the committing instance to
	// publish; nil otherwise.
	Relay *Relay
	// Unread, only in a PartialAccept, is true for an entry whose fate the
	// store does not know: its id was taken and the read of the stored
	// message failed, or the store failed while it inserted the message
	// again. Message is zero.
	Unread bool
}

// Work is one claimed outbox row, with its message.
type Work struct {
	ID         int64
	Kind       WorkKind
	Target     string
	MessageID  string
	Token      uint64
	DueAt      time.Time
	LeaseOwner string
	LeaseUntil time.Time
	// LeaseEpoch is the ring epoch the row was claimed under (0 when the
	// claim was not ring-fenced). Outcomes of the work carry it, with the
	// lease's owner (Outcome.Epoch, Outcome.Owner).
	LeaseEpoch uint64
	CreatedAt  time.Time
	// Message is the message as it stands after the claim. For delivery work
	// its Attempts already counts this claim (the first claim gives 1).
	Message messages.Message
}

// ClaimRequest asks for due work of one kind and target.
type ClaimRequest struct {
	Kind   WorkKind
	Target string
	// Owner names the claiming instance (lease_owner). Leases are taken back
	// by owner at restart.
	Owner string
	// Limit is the most rows to claim (> 0).
	Limit int
	// Now is the claim time: rows with due_at <= Now whose lease is absent or
	// ended (lease_until <= Now) are claimable.
	Now time.Time
	// Lease is how long the claimed rows stay leased (> 0).
	Lease time.Duration
	// Ring, when set, fences the claim by the ring (see RingClaim); nil
	// claims over the whole ring, unfenced.
	Ring *RingClaim
	// IDs, when set, claims only the rows of these messages (the delivery
	// bus names the work it hands out); such a claim is not ring-fenced,
	// reports no NextDue, and tells in Claim.Later when the rows it could
	// not take become claimable.
	IDs []string
}

// Claim is the result of ClaimWork.
type Claim struct {
	// Work is ordered by due time, then row id.
	Work []Work
	// NextDue is the earliest time at which a row of this kind and target that
	// was not claimed now becomes claimable (its due_at, or its lease end when
	// leased); zero when there is none. Workers sleep until then.
	NextDue time.Time
	// Refused is set when a ring-fenced claim named a stale epoch or
	// ranges its owner does not hold (ClaimWork returns ErrStaleEpoch):
	// nothing was claimed.
	Refused bool
	// Later, for a claim of IDs, holds each named message whose row of
	// this kind and target exists but was not claimable now, with the time
	// it becomes so (ClaimableAt). A named message in neither Work nor
	// Later has no such row: its work is done (or was never there).
	Later map[string]time.Time
}

// Result is the outcome of a piece of work.
type Result string

// Results of work.
const (
	// ResultDelivered: the frontend has the message. Final.
	ResultDelivered Result = "delivered"
	// ResultFailed: the message is dead-lettered (state failed). Final.
	ResultFailed Result = "failed"
	// ResultRetry: try again at RetryAt (state retry).
	ResultRetry Result = "retry"
)

// StateAfter is the state a message moves to when an outcome of work of
// kind is applied; "" when the outcome leaves the state alone.
//
// Delivery work follows the local frontend diagram (retry, delivered,
// failed). Forward work follows the peer diagram: accepted by the peer is
// forwarded (its delivery happens there), given up is forward_failed, try
// again is forward_queued. Status work reports on a message that is already
// final here, so it changes no state.
func StateAfter(kind WorkKind, r Result) messages.State {
	switch kind {
	case WorkDelivery:
		switch r {
		case ResultDelivered:
			return messages.StateDelivered
		case ResultFailed:
			return messages.StateFailed
		case ResultRetry:
			return messages.StateRetry
		}
	case WorkForward:
		switch r {
		case ResultDelivered:
			return messages.StateForwarded
		case ResultFailed:
			return messages.StateForwardFailed
		case ResultRetry:
			return messages.StateForwardQueued
		}
	}
	return ""
}

// Outcome records the result of work on one message.
//
// Per kind:
//   - delivery: Delivered/Failed are final (ledger, state, outbox row
//     removed; status work for ReportTo); Retry sets state retry, once per
//     attempt (the message's Attempts: a repeat is AlreadyRecorded); a
//     Deferred retry also gives back the attempt its claim counted.
//   - forward: Delivered means the peer accepted it: state forwarded (not
//     final: the peer's delivery_status ends it, see ApplyStatus), ledger
//     written, row removed, queued_at cleared. Failed: forward_failed with
//     Reason, ledger, row removed. Retry: state forward_queued (queued_at is
//     set if it was not, kept if it was; history is appended only when the
//     state changes), the row due at RetryAt, unleased.
//   - receipt: as status (the ESME has its delivery receipt, or it was
//     given up); no state change.
//   - status: Delivered means the origin has the report: ledger written, row
//     removed, no state change (the message is final already, which is not
//     a reason to skip it). Failed: the same (the origin refused it for good,
//     e.g. it does not know the id). Retry: the row due at RetryAt, unleased.
type Outcome struct {
	Kind      WorkKind
	Target    string
	MessageID string
	Result    Result
	// RetryAt is when a ResultRetry becomes due again.
	RetryAt time.Time
	// Reason is stored on failed messages (messages.Reason*) or a frontend's text.
	Reason string
	// Detail is the history detail of the transition.
	Detail string
	// Epoch and Owner, when Owner is set, fence the outcome: it applies
	// only while the outbox row is still leased to Owner under Epoch (the
	// claim it came from: Epoch is the lease's, 0 for work handed over by
	// the intake, claimed by id or claimed without a ring). A row claimed
	// again since (another owner, or another epoch) gives StaleEpoch and
	// nothing changes: the newer claim speaks for the row. An outcome
	// without an Owner is unfenced (a pull frontend's ack: the frontend's
	// own verdict stands whoever offered the message). See CompletionOf.
	Epoch uint64
	Owner string
	// SMSCMessageIDs, with a delivered delivery of an smpp frontend, are
	// the ids its SMSC gave the message's submit_sm (one per part), kept
	// for its receipts (see SMSCRef).
	SMSCMessageIDs []string
	// Deferred marks a delivery retry that was no attempt (the frontend
	// was busy: messages.DeliveryResult.Deferred): it gives back the
	// attempt its claim counted (the message's Attempts go down by one,
	// so that the next claim counts the same attempt again). It applies
	// only while the work's rows are leased, its claim not given back
	// already; with Owner set (a push frontend's deferral), only while
	// they are leased to Owner under Epoch, not to a claim made since (see
	// CompletionOf).
	Deferred bool
	// Attempt is the delivery attempt the outcome speaks for (the one its
	// Detail names), kept with its history entry
	// (messages.HistoryEntry.Attempt); 0 for none (a message found expired
	// before an attempt). Delivery work only.
	Attempt int
	// Resend marks an outcome whose claim followed an attempt that left
	// no verdict (messages.DeliveryResult.Resend), kept with its history
	// entry (messages.HistoryEntry.Resend). Delivery work only.
	Resend bool
	// Ack marks a pull frontend's verdict (delivery work): it applies only
	// to a message that was offered to the frontend, that is leased to it
	// at least once since it was accepted or resubmitted (attempts > 0; a
	// deferral of a message whose deferral gave back attempt 1 was offered
	// too, see CompletionOf). Otherwise it is NotOffered and nothing
	// changes. A late verdict on a
	// lease that ran out, the message not yet offered again, applies.
	Ack bool
	// Named, with Ack, is the attempt the pull frontend's verdict names
	// (messages.DeliveryResult.Attempt; 0 when it names none). A retry or
	// failed verdict naming an attempt older than the message's count
	// when it is recorded is Stale and changes nothing (see CompletionOf):
	// the message was offered again since, and that attempt's holder
	// speaks for it.
	Named int
}

// Completion tells what CompleteWork did with one Outcome.
type Completion string

// Completions of an outcome.
const (
	// Applied: the outcome was recorded now.
	Applied Completion = "applied"
	// AlreadyRecorded: the ledger already held a final outcome for this work
	// (or the message is already final, or a delivery retry of the same
	// attempt was recorded); nothing changed.
	AlreadyRecorded Completion = "already_recorded"
	// NoWork: the message or its outbox row does not exist; nothing changed.
	NoWork Completion = "no_work"
	// StaleEpoch: a fenced outcome (one naming its claim's owner), whose
	// row was claimed again since (see Outcome.Epoch, Outcome.Deferred);
	// nothing changed.
	StaleEpoch Completion = "stale_epoch"
	// NotOffered: a pull frontend's verdict (Outcome.Ack) on a message
	// never offered to it; nothing changed.
	NotOffered Completion = "not_offered"
	// Stale: a pull frontend's retry or failed verdict (Outcome.Ack)
	// naming an attempt older than the message's latest (Outcome.Named):
	// offered again since, the message is that attempt's; nothing changed.
	// The ack answers it messages.OutcomeStale.
	Stale Completion = "stale"
)

// Reroute resubmits one failed or forward_failed message to new work.
type Reroute struct {
	ID       string
	Frontend string
	DestSMSC string
	// State is the state it restarts in (pending for local work).
	State  messages.State
	Detail string
	Work   *WorkSpec
}

// ResubmitResult tells what Resubmit did with one Reroute.
type ResubmitResult struct {
	ID string
	// Applied is true when the message was resubmitted.
	Applied bool
	// Found is false when no message has this id.
	Found bool
	// State is the message's state after the call.
	State messages.State
}

// LedgerEntry is the recorded final outcome of work on one message. The
// ledger is keyed by (MessageID, Kind, Target).
type LedgerEntry struct {
	MessageID string
	Kind      WorkKind
	Target    string
	Result    Result
	At        time.Time
	Detail    string
}

// ListQuery selects a page of messages, newest first: by acceptance order
// (seq), or, for a time range without a number (ByTime), by acceptance
// time (created_at, then seq). Every filter set must match.
type ListQuery struct {
	// State filters by state when non-empty.
	State messages.State
	// Limit is the page size (> 0).
	Limit int
	// Before is the cursor: only messages with Seq < Before (0 = from
	// newest); for a ByTime query, with BeforeAt, only messages before
	// (BeforeAt, Before) in (created_at, seq) order.
	Before   int64
	BeforeAt time.Time
	// Destination and Source match the number without its leading '+'
	// (messages.NumberKey), exactly or as a prefix.
	Destination, Source NumberMatch
	// Since and Until bound the acceptance time: Since <= created_at <
	// Until (zero: unbounded).
	Since, Until time.Time
	// Frontend matches the message's frontend; Peer its source_smsc or
	// dest_smsc (what it came from or went to).
	Frontend, Peer string
	// SubmittedBy, when set, keeps only the messages that credential
	// submitted (a client credential's view).
	SubmittedBy string
	// Budget is how many seqs a page of a Windowed query examines at most
	// (0: ListBudget). Tests set it small; the API never sets it.
	Budget int64
}

// NumberMatch is a number filter: Key (a messages.NumberKey) exactly, or
// every number starting with it.
type NumberMatch struct {
	Key    string
	Prefix bool
}

// ByTime reports whether q lists by acceptance time: a time range without
// a number filter and not a client's own. A number's index is read in seq
// order; so is a client's own (messages_submitted_by, whose entries end
// with seq: walking the created_at index instead would read every
// client's messages of the range to find one client's); a time range
// alone walks the created_at index.
func (q ListQuery) ByTime() bool {
	return (!q.Since.IsZero() || !q.Until.IsZero()) && q.Destination.Key == "" && q.Source.Key == "" && q.SubmittedBy == ""
}

// ListBudget is how many seqs one page of a Windowed query examines at
// most (ListQuery.Budget overrides it). Such a query has no index that
// holds only its rows: it walks every message (or every message of a
// state) in seq order and filters each, so a frontend or a peer with few
// messages would otherwise cost a read of the whole table per page
// (seconds on 10M messages, on the read connection). A window of 20,000
// is read in 3-4 ms on SQLite (BenchmarkWindowedList in
// persistence/sqlite: 35 ms for a table of 200,000); a page that finds
// fewer matches than its limit in it is answered short, with a cursor to
// the rest. A smaller window costs a sparse listing more pages.
const ListBudget = 20_000

// Windowed reports whether a page of q walks the messages in seq order and
// filters each row: a frontend or peer filter (with or without a state)
// without a number, a client's own or a time range, whose indexes are
// selective or whose range is the caller's. Such a page examines a window
// of seqs (ListWindow). Frontends and peers are too few to be worth an
// index each message would pay for.
func (q ListQuery) Windowed() bool {
	return (q.Frontend != "" || q.Peer != "") && q.Destination.Key == "" && q.Source.Key == "" &&
		q.SubmittedBy == "" && q.Since.IsZero() && q.Until.IsZero()
}

// SeqBounds are the smallest and largest seq stored (0 and 0 when no
// message is).
type SeqBounds struct {
	Min, Max int64
}

// Window is what a page may examine: the seqs from Lo (0: unbounded)
// below the query's cursor. Older is true when messages below Lo may
// exist: the page then ends at Lo even when it is not full.
type Window struct {
	Lo    int64
	Older bool
}

// ListWindow is the window of one page of q, given the store's seq bounds:
// the Budget seqs below the cursor (below Max+1 for the first page). A
// window that reaches below Min is no bound. Seqs freed by purged
// messages are in the window too: they only make it examine fewer rows.
// A query that is not Windowed has no bound.
func ListWindow(q ListQuery, b SeqBounds) Window {
	if !q.Windowed() {
		return Window{}
	}
	budget := q.Budget
	if budget <= 0 {
		budget = ListBudget
	}
	hi := q.Before
	if hi == 0 {
		hi = b.Max + 1
	}
	if lo := hi - budget; lo > b.Min {
		return Window{Lo: lo, Older: true}
	}
	return Window{}
}

// Page is one page of messages; Next (and NextAt for a ByTime query) is
// the cursor of the following page (0 when this page is the last). A
// page of a Windowed query may hold fewer messages than its limit, even
// none, and still have a Next: the listing is complete when Next is 0.
type Page struct {
	Messages []messages.Message
	Next     int64
	NextAt   time.Time
}

// PageOf cuts rows (the query's Limit+1 rows at most, in its order, all
// in the window w) to a page and sets its cursor when more follow: after
// the last row when the page is full, else at the window's start when
// messages below it may exist.
func PageOf(q ListQuery, w Window, rows []messages.Message) Page {
	p := Page{Messages: rows}
	switch {
	case len(rows) > q.Limit:
		p.Messages = rows[:q.Limit]
		last := p.Messages[q.Limit-1]
		p.Next = last.Seq
		if q.ByTime() {
			p.NextAt = last.CreatedAt
		}
	case w.Older:
		p.Next = w.Lo
	}
	return p
}

// Route maps a destination prefix to a frontend (defined in messages).
type Route = messages.Route

// FrontendMode is how a frontend receives messages (defined in messages).
type FrontendMode = messages.FrontendMode

// Frontend modes.
const (
	ModePull    = messages.ModePull
	ModeWebhook = messages.ModeWebhook
	ModeActor   = messages.ModeActor
)

// Frontend is a local frontend's registration (defined in messages).
type Frontend = messages.Frontend

// Stats are the counts behind /api/status and the gauges.
type Stats struct {
	// ByState has an entry for every state in messages.AllStates.
	ByState map[messages.State]int64
	// OutboxDepth counts outbox rows of every kind.
	OutboxDepth int64
	// DLQDepth counts dead-lettered messages (state failed).
	DLQDepth int64
	// ForwardQueue counts forward outbox rows by target peer (peers with
	// none are absent); its sum is the node's forward queue depth.
	ForwardQueue map[string]int64
	// StoreBytes is the store's size on disk: the database and its
	// write-ahead log (embedded), or the relations of the node's schema,
	// indexes included (Postgres).
	StoreBytes int64
}

// NewStats returns Stats with a zero count for every state, as Store.Stats
// must (a state without messages is still reported).
func NewStats() Stats {
	st := Stats{ByState: make(map[messages.State]int64, len(messages.AllStates)), ForwardQueue: map[string]int64{}}
	for _, state := range messages.AllStates {
		st.ByState[state] = 0
	}
	return st
}

// StatusUpdate is a peer's delivery_status for a message we forwarded to it.
type StatusUpdate struct {
	ID string
	// From is the reporting peer; it must be the message's dest_smsc.
	From string
	// Result is ResultDelivered or ResultFailed.
	Result Result
	Reason string
	// At is when the peer recorded it (kept in the history detail; the
	// transition's time is the call's now).
	At time.Time
	// Attempts, when positive, is how many delivery attempts the peer
	// made: the message's attempts here become it (the origin's own count
	// of a forwarded message is 0).
	Attempts int
}

// ForwardExpiry moves forward_queued messages that waited too long to
// forward_failed.
type ForwardExpiry struct {
	Now time.Time
	// QueuedBefore: messages whose queued_at is before it are failed.
	QueuedBefore time.Time
	// Limit bounds one call (> 0); callers loop until fewer come back.
	Limit int
}

// PeerRegistry is a peer's frontend registry as last learned.
type PeerRegistry struct {
	Peer      string
	Frontends []string
	UpdatedAt time.Time
}

// ExpireRequest fails messages whose validity has passed.
type ExpireRequest struct {
	Now time.Time
	// SubmittedBefore: messages submitted (or resubmitted) before this time
	// are expired.
	SubmittedBefore time.Time
	// Limit bounds one call (> 0); callers loop until fewer come back.
	Limit int
}

// CallTimeout bounds one call an actor makes to the store when its
// configuration sets no bound of its own: 30 s, far beyond a commit (a
// group commit with its sync takes milliseconds) and long enough for a
// Postgres failover, so a call that takes longer means the store is stuck:
// the actor fails that call and tries again on its own schedule instead of
// waiting for good.
const CallTimeout = 30 * time.Second

// Store is the durable state of a node. Every method is safe for concurrent
// use; every write happens in one transaction, all or nothing, but for
// the one that Write's PartialAccept reports.
type Store interface {
	RingStore
	CredentialStore
	AuditStore
	ReceiptStore

	// Kind names the implementation ("sqlite" or "postgres").
	Kind() string
	// Ping checks that the store is reachable.
	Ping(ctx context.Context) error
	// Close releases the store; later calls return ErrClosed.
	Close() error

	// Write does the parts of w in one transaction (see Write): a worker
	// records what it finished and claims what comes next in one commit, the
	// intake stores its group commit and a peer's reports together. The
	// calls below are its one-part forms. A Write whose only part is
	// Accept may be done without one transaction (Postgres): when it fails
	// after it stored some of the new messages, its error is a
	// *PartialAccept with what it stored, and Written is zero. SQLite does
	// every Write in one transaction and never returns one.
	Write(ctx context.Context, now time.Time, w Write) (Written, error)

	// Accept stores messages in one transaction, each with its first history
	// entry and its outbox work. A message whose id is already stored is left
	// as it is and returned with Created false. A new message for local
	// delivery whose frontend is not registered is not stored
	// (Accepted.FrontendGone). Results are in input order; an id repeated
	// within the batch is created once. It is Write with Accept alone: its
	// error may be a *PartialAccept.
	Accept(ctx context.Context, now time.Time, batch []NewMessage) ([]Accepted, error)

	// GetMessage returns one message with its history (oldest first), or
	// ErrNotFound.
	GetMessage(ctx context.Context, id string) (messages.Message, error)
	// ListMessages returns a page of messages (without history), newest first.
	ListMessages(ctx context.Context, q ListQuery) (Page, error)
	// Stats counts messages by state and the outbox.
	Stats(ctx context.Context) (Stats, error)
	// OldestDue is the earliest due time of the outbox work that is
	// claimable at now: due by now and not leased (no lease, or one that
	// ended by now), of any kind and target; zero when there is none. Work
	// scheduled ahead (deliver_after, a retry's backoff) is not waiting yet
	// and leased work is being done, however long ago either was written.
	// It is read for every scrape (switchboard_outbox_oldest_age_seconds is
	// now less it), so it costs a seek per kind and target of work, not a
	// walk of the outbox.
	OldestDue(ctx context.Context, now time.Time) (time.Time, error)

	// ClaimWork leases due work and reports when the next becomes due. Work
	// whose outcome the ledger already holds is never returned (it is removed).
	// For delivery work each claimed message's attempts is incremented.
	ClaimWork(ctx context.Context, req ClaimRequest) (Claim, error)
	// CompleteWork records outcomes in one transaction. Delivered and Failed
	// write the ledger, set the message's final state (with history; Failed
	// also its reason) and delete the outbox row; Retry sets state retry and
	// makes the row due at RetryAt, unleased. Outcomes for work whose ledger
	// entry exists, or whose message is already final, change nothing, nor
	// does a delivery Retry of an attempt whose Retry is recorded (see
	// CompletionOf).
	CompleteWork(ctx context.Context, now time.Time, outcomes []Outcome) ([]Completion, error)
	// ReleaseLeases ends every lease held by owner (an earlier run of this
	// instance) so the work is claimable at once. It returns how many.
	ReleaseLeases(ctx context.Context, owner string) (int64, error)
	// Ledger returns the recorded outcome of work on a message, or ErrNotFound.
	Ledger(ctx context.Context, kind WorkKind, messageID, target string) (LedgerEntry, error)

	// ApplyStatus records peers' delivery_status reports in one
	// transaction. An update applies to a message whose dest_smsc is From
	// and whose state is pending, forward_queued, forwarded or
	// forward_failed: it moves to delivered or failed (Failed also sets the
	// reason), with history ("reported by <From>"), writes the forward
	// ledger entry (id, forward, From) if absent and removes the forward
	// outbox row (a report can overtake the forward's own completion).
	// A message already delivered or failed gives AlreadyRecorded; an
	// unknown id or another dest_smsc gives NoWork. Results are in input
	// order.
	ApplyStatus(ctx context.Context, now time.Time, updates []StatusUpdate) ([]Completion, error)
	// QueueForwards moves up to limit pending messages whose forward work
	// targets peer (and is not leased) to forward_queued, setting queued_at
	// to now, with history detail. It returns their ids. A peer that stops
	// being healthy has its not-yet-sent messages queued this way.
	QueueForwards(ctx context.Context, now time.Time, peer, detail string, limit int) ([]string, error)
	// FailForwards moves forward_queued messages whose queued_at is before
	// QueuedBefore and whose forward work is not leased to forward_failed
	// (reason forward_timeout), with history and a failed forward ledger
	// entry, and removes their forward work. It returns the messages.
	FailForwards(ctx context.Context, req ForwardExpiry) ([]messages.Message, error)

	// ForwardTargets returns the peers that forward work is for (once
	// each, ordered), at a cost that grows with the number of peers, not
	// of queued messages.
	ForwardTargets(ctx context.Context) ([]string, error)

	// PeerRegistries returns every stored peer registry ordered by peer.
	PeerRegistries(ctx context.Context) ([]PeerRegistry, error)
	// PutPeerRegistry replaces a peer's stored registry.
	PutPeerRegistry(ctx context.Context, r PeerRegistry) error

	// ExpireMessages fails (reason expired) messages in pending or retry
	// whose delivery work is not leased and that were submitted before the
	// cutoff, with history and ledger, and removes their work. It returns the
	// expired messages.
	ExpireMessages(ctx context.Context, req ExpireRequest) ([]messages.Message, error)

	// Purgeable returns up to req.Limit messages that Purge would delete
	// now, each with its history (oldest first): what a call record is made
	// of before its message goes. It reads; it changes nothing.
	Purgeable(ctx context.Context, req PurgeRequest) ([]messages.Message, error)
	// CountPurgeable counts the messages Purge would delete now, up to
	// req.Limit (which bounds the work of counting). It reads.
	CountPurgeable(ctx context.Context, req PurgeRequest) (int64, error)
	// Purge deletes, in one transaction, up to req.Limit messages that
	// persistence.Purge lets go (past their state's cutoff, no outbox row
	// left), with their history and ledger entries; when ids is not nil,
	// only those of ids that still qualify. It returns what it deleted.
	Purge(ctx context.Context, req PurgeRequest, ids []string) ([]Purged, error)
	// Compact gives space back after a purge, bounded so that it never
	// holds the store for long: the embedded store frees pages from the end
	// of its file and checkpoints its write-ahead log; Postgres folds the
	// counters' deltas (its autovacuum reclaims space). It returns the
	// bytes it gave back (0 when it cannot tell). short says the node is
	// short of space (it refuses new work for want of it): the embedded
	// store then gives back the free pages it keeps for its next writes
	// too, all but a minimal reserve, and the space its write-ahead log's
	// file holds (a TRUNCATE checkpoint, which never waits for a reader),
	// so that the file system sees them. The caller repeats it while it
	// gives something back.
	Compact(ctx context.Context, short bool) (int64, error)

	// RelayWork takes up to req.Limit delivery rows not yet relayed to the
	// bus that are due at req.Now, earliest due first (then oldest), from
	// after req.After, and marks them relayed in the same statement (rows another transaction
	// holds are skipped, never waited for). Rows due later are left for a
	// later RelayWork: the bus carries only work that is due (a consumer
	// that got work early would hold it, naked, in its ack-pending until
	// then).
	RelayWork(ctx context.Context, req RelayRequest) ([]Relay, error)
	// Unrelay marks rows not relayed again (the bus did not take them), for
	// a later RelayWork. Rows that no longer exist are ignored.
	Unrelay(ctx context.Context, rows []int64) error
	// OldestUnrelayed is the earliest due time of a delivery row not yet
	// relayed (zero when there is none): when it is past, the relay's lag;
	// when it is ahead, when the relay's next work falls due.
	OldestUnrelayed(ctx context.Context) (time.Time, error)
	// RelayAgain marks up to limit delivery rows that are marked relayed,
	// with ids above after, not relayed again, in id order, for RelayWork:
	// the bus lost what it held (its stream was made anew). Rows another
	// transaction holds are skipped. It returns the last row it marked, 0
	// when it found none: call it again with that id until then.
	RelayAgain(ctx context.Context, after int64, limit int) (int64, error)

	// Resubmit moves failed or forward_failed messages back to work in one
	// transaction: state, frontend and dest_smsc as given, attempts 0, reason
	// cleared, queued_at cleared (set to now when State is forward_queued),
	// submitted_at now, every ledger entry of the message removed (the
	// message starts its work afresh: a forward that a peer accepted before
	// it failed there is sent again, and a later final outcome is reported
	// to the origin again), history appended, the new work written.
	// Messages in any other state are left.
	Resubmit(ctx context.Context, now time.Time, reroutes []Reroute) ([]ResubmitResult, error)

	// Routes returns every route ordered by prefix.
	Routes(ctx context.Context) ([]Route, error)
	// PutRoute creates or replaces a route. A route to a local frontend
	// (r.Local) is refused with ErrUnknownFrontend unless the frontend is
	// stored, checked in the same transaction as the write (against a
	// DeleteFrontend from another instance of a site); a route to a peer's
	// frontend is not checked.
	PutRoute(ctx context.Context, r Route) error
	// DeleteRoute removes a route, or returns ErrNotFound.
	DeleteRoute(ctx context.Context, prefix string) error

	// Frontends returns every local frontend ordered by name.
	Frontends(ctx context.Context) ([]Frontend, error)
	// PutFrontend creates or replaces a frontend (CreatedAt is kept on replace).
	PutFrontend(ctx context.Context, f Frontend) error
	// DeleteFrontend removes a frontend, or returns ErrNotFound, or
	// ErrFrontendInUse while a route names it (checked in the same
	// transaction as the delete, against a PutRoute from another instance
	// of a site).
	DeleteFrontend(ctx context.Context, name string) error
}

// ValidateClaim reports what is wrong with a claim request.
func (r ClaimRequest) Validate() error {
	var errs []error
	if !r.Kind.Valid() {
		errs = append(errs, fmt.Errorf("claim: unknown kind %q", r.Kind))
	}
	if r.Target == "" {
		errs = append(errs, errors.New("claim: empty target"))
	}
	if r.Owner == "" {
		errs = append(errs, errors.New("claim: empty owner"))
	}
	if r.Limit <= 0 {
		errs = append(errs, fmt.Errorf("claim: limit %d must be positive", r.Limit))
	}
	if r.Lease <= 0 {
		errs = append(errs, fmt.Errorf("claim: lease %v must be positive", r.Lease))
	}
	if r.Ring != nil && r.IDs != nil {
		errs = append(errs, errors.New("claim: a claim of named messages is not ring-fenced"))
	}
	for _, id := range r.IDs {
		if id == "" {
			errs = append(errs, errors.New("claim: empty message id"))
			break
		}
	}
	if r.Ring != nil {
		if r.Ring.Epoch == 0 {
			errs = append(errs, errors.New("claim: ring epoch must be positive"))
		}
		for _, rg := range r.Ring.Ranges {
			if rg.Lo > rg.Hi {
				errs = append(errs, fmt.Errorf("claim: token range [%d, %d] has lo above hi", rg.Lo, rg.Hi))
			}
		}
	}
	return errors.Join(errs...)
}

// Precision is the time precision every store keeps (Postgres timestamptz).
const Precision = time.Microsecond

// Normalize returns t as the store keeps it: UTC, truncated to Precision.
func Normalize(t time.Time) time.Time { return t.UTC().Truncate(Precision) }

// FailureLevel is the level a failed write is logged at: debug when it
// failed for want of room (ErrNoSpace), which fails every write until
// there is room and which the node logs once, as its storage gate closes
// (space.Gate); an error otherwise.
func FailureLevel(err error) slog.Level {
	if errors.Is(err, ErrNoSpace) {
		return slog.LevelDebug
	}
	return slog.LevelError
}
