package persistence

import (
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// AcceptPlan is what an Accept reads off its batch, once.
type AcceptPlan struct {
	// Firsts lists, in input order, the index of the entry of the batch
	// that creates each id: its first occurrence that is not StoredOnly (a
	// repeat gets its result). An id that only StoredOnly entries name is
	// not listed: it is one of Lookups.
	Firsts []int
	// Lookups lists, in input order, the ids that only StoredOnly entries
	// name: Accept reads them (if stored) and creates none of them.
	Lookups []string
	// creator is the index of each id's entry in Firsts, by id.
	creator map[string]int
}

// PlanAccept is batch's AcceptPlan.
func PlanAccept(batch []NewMessage) AcceptPlan {
	p := AcceptPlan{Firsts: make([]int, 0, len(batch)), creator: make(map[string]int, len(batch))}
	for i, nm := range batch {
		if _, ok := p.creator[nm.ID]; ok || nm.StoredOnly {
			continue
		}
		p.creator[nm.ID] = i
		p.Firsts = append(p.Firsts, i)
	}
	var seen map[string]bool
	for _, nm := range batch {
		if _, creates := p.creator[nm.ID]; nm.StoredOnly && !creates && !seen[nm.ID] {
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[nm.ID] = true
			p.Lookups = append(p.Lookups, nm.ID)
		}
	}
	return p
}

// LocalFrontend names the frontend nm is for when its work is local
// delivery: the store creates such a message only while it has that
// frontend (a directory cached by another instance of a site may name one
// deleted since), checked in the statement that inserts it, with no lock.
func LocalFrontend(nm NewMessage) (string, bool) {
	if nm.StoredOnly || nm.Work == nil || nm.Work.Kind != WorkDelivery {
		return "", false
	}
	return nm.Work.Target, true
}

// LocalFrontends lists, sorted and each once, the LocalFrontend of the
// entries of batch at idx.
func LocalFrontends(batch []NewMessage, idx []int) []string {
	seen := map[string]bool{}
	var out []string
	for _, i := range idx {
		if fe, ok := LocalFrontend(batch[i]); ok && !seen[fe] {
			seen[fe] = true
			out = append(out, fe)
		}
	}
	slices.Sort(out)
	return out
}

// NewRow is the row nm starts as when it is accepted at now: its first
// history entry is its state with nm.Detail; forward_queued sets queued_at.
// The store draws Seq.
func NewRow(nm NewMessage, now time.Time) Row {
	now = Normalize(now)
	m := messages.Message{
		ID: nm.ID, SourceMSISDN: nm.SourceMSISDN, DestinationMSISDN: nm.DestinationMSISDN, Body: nm.Body,
		Options: normalizeOptions(nm.Options), State: nm.State, SourceSMSC: nm.SourceSMSC, DestSMSC: nm.DestSMSC, Frontend: nm.Frontend,
		SubmittedBy: nm.SubmittedBy, CreatedAt: now, UpdatedAt: now, SubmittedAt: now, Token: messages.TokenOf(nm.ID),
	}
	m.SetTrace(nm.Trace)
	if nm.State == messages.StateForwardQueued {
		m.QueuedAt = &now
	}
	if nm.Lease != nil && nm.Work != nil && nm.Work.Kind == WorkDelivery {
		m.Attempts = 1 // the lease is this attempt's, as a claim's would be
	}
	return Row{Message: m, ReportTo: nm.ReportTo, HistoryLen: 1}
}

// normalizeOptions returns o with its times as the store keeps them.
func normalizeOptions(o messages.Options) messages.Options {
	for _, t := range []**time.Time{&o.ValidityUntil, &o.DeliverAfter} {
		if *t != nil {
			n := Normalize(**t)
			*t = &n
		}
	}
	return o
}

// NewWork is the outbox row nm's work (nm.Work must be set) starts as when
// it is accepted at now; a zero DueAt means now. Work due after now is not
// written to publish whatever nm.Publish says: the bus carries only work
// that is due (see bus.go), and the relay publishes it when it is.
func NewWork(nm NewMessage, now time.Time) WorkAdd {
	spec := *nm.Work
	now = Normalize(now)
	if spec.DueAt.IsZero() {
		spec.DueAt = now
	}
	spec.DueAt = Normalize(spec.DueAt)
	return WorkAdd{MessageID: nm.ID, Token: messages.TokenOf(nm.ID), Spec: spec, Lease: nm.Lease,
		Publish: nm.Publish && !spec.DueAt.After(now)}
}

// LeasedWork is the Work a created message's leased row (id row) stands
// for, as a claim would return it; nil when nm asked for no lease.
func LeasedWork(nm NewMessage, m messages.Message, row int64) *Work {
	if nm.Lease == nil || nm.Work == nil {
		return nil
	}
	w := NewWork(nm, m.CreatedAt)
	return &Work{ID: row, Kind: w.Spec.Kind, Target: w.Spec.Target, MessageID: m.ID, Token: m.Token, DueAt: w.Spec.DueAt,
		LeaseOwner: nm.Lease.Owner, LeaseUntil: Normalize(nm.Lease.Until), CreatedAt: m.CreatedAt, Message: m}
}

// PublishedWork is the Relay a created message's row (id row) written to
// publish stands for; nil when nm did not ask to Publish it.
func PublishedWork(nm NewMessage, m messages.Message, row int64) *Relay {
	if !nm.Publish || nm.Work == nil || nm.Lease != nil {
		return nil
	}
	w := NewWork(nm, m.CreatedAt)
	if !w.Publish {
		return nil
	}
	return &Relay{Row: row, MessageID: m.ID, Target: w.Spec.Target, CreatedAt: m.CreatedAt, DueAt: w.Spec.DueAt}
}

// AcceptResults assembles Accept's results in input order: created holds
// the messages this call created (by id), stored the others as they were
// stored before it, rows the outbox row ids of created messages' work
// written relayed (leased, or to publish: WorkAdd.Relayed). The entry that
// created an id (plan's Firsts) gets Created; every other entry of the id (a
// repeat within the batch, a StoredOnly one) gets its message with Created
// false, as does every entry of an id stored before. A client's submission
// whose id is stored (or taken earlier in the batch) with other content is
// a Conflict. A StoredOnly entry whose id is neither is Absent; any other
// entry whose id is neither is FrontendGone when its LocalFrontend is one
// of unknown, the frontends the store found it does not have. reportTo
// holds the ReportTo of the stored messages (Accepted.ReportTo).
func AcceptResults(plan AcceptPlan, batch []NewMessage, created, stored map[string]messages.Message, reportTo map[string]string, rows map[string]int64, unknown map[string]bool) ([]Accepted, error) {
	out := acceptResults(plan, batch, created, stored, reportTo, rows, unknown, false)
	for i, acc := range out {
		if acc.Unread {
			return nil, fmt.Errorf("message %q neither created nor found", batch[i].ID)
		}
	}
	return out, nil
}

// KnownResults are the results of an Accept that failed after some of its
// messages were stored, for its PartialAccept: AcceptResults's for every
// entry whose id was created or found, or whose frontend the store found
// it does not have; Unread for every other entry, a StoredOnly one too
// (the read that would find its id may not have been made).
func KnownResults(plan AcceptPlan, batch []NewMessage, created, stored map[string]messages.Message, reportTo map[string]string, rows map[string]int64, unknown map[string]bool) []Accepted {
	return acceptResults(plan, batch, created, stored, reportTo, rows, unknown, true)
}

// acceptResults is AcceptResults with each entry whose id is neither
// created nor found, and not FrontendGone, Unread; partial makes a
// StoredOnly one Unread too instead of Absent.
func acceptResults(plan AcceptPlan, batch []NewMessage, created, stored map[string]messages.Message, reportTo map[string]string, rows map[string]int64, unknown map[string]bool, partial bool) []Accepted {
	out := make([]Accepted, len(batch))
	creator := plan.creator
	for i, nm := range batch {
		m, made := created[nm.ID]
		switch {
		case made && creator[nm.ID] == i:
			out[i] = Accepted{Message: m, Created: true, ReportTo: nm.ReportTo, Work: LeasedWork(nm, m, rows[nm.ID]), Relay: PublishedWork(nm, m, rows[nm.ID])}
		case made:
			out[i] = Accepted{Message: m, ReportTo: batch[creator[nm.ID]].ReportTo, Conflict: Conflict(nm, m)}
		default:
			if m, ok := stored[nm.ID]; ok {
				out[i] = Accepted{Message: m, ReportTo: reportTo[nm.ID], Conflict: Conflict(nm, m)}
			} else if nm.StoredOnly && !partial {
				out[i] = Accepted{Absent: true}
			} else if fe, ok := LocalFrontend(nm); ok && unknown[fe] {
				out[i] = Accepted{FrontendGone: true}
			} else {
				out[i] = Accepted{Unread: true}
			}
		}
	}
	return out
}

// PartialAccept is the error of a Write whose only part is Accept when the
// store stored some of its new messages and then failed before it knew
// what became of the others. Only a store that does such a Write without
// one transaction returns it: Postgres inserts the new messages in one
// statement that commits on its own, then reads the messages whose ids
// were taken in a round trip of its own; when that read fails (the
// connection broke, the call's time ran out), what the insert created is
// stored all the same, and its work is due. SQLite does every Write in one
// transaction, all or nothing, and never returns it.
//
// Accepted holds the results in input order, as Written.Accepted would:
// the created messages (with their Work and Relay), and every entry whose
// fate the store learnt, have their results; every other entry is Unread.
// Err is why the Write failed: the caller answers each Unread entry as if
// the whole Write had failed with Err (a retry with the same id then finds
// the message if it was stored after all). At least one entry is Created.
type PartialAccept struct {
	Accepted []Accepted
	Err      error
}

func (p *PartialAccept) Error() string {
	n := 0
	for _, acc := range p.Accepted {
		if acc.Unread {
			n++
		}
	}
	return fmt.Sprintf("%d of %d new messages not read back: %v", n, len(p.Accepted), p.Err)
}

func (p *PartialAccept) Unwrap() error { return p.Err }

// Partial is the error of an Accept alone that failed with err after its
// insert committed, given what the store knows (KnownResults): a
// *PartialAccept when it created a message, err itself when it created
// none (then it stored nothing).
func Partial(known []Accepted, err error) error {
	if !slices.ContainsFunc(known, func(acc Accepted) bool { return acc.Created }) {
		return err
	}
	return &PartialAccept{Accepted: known, Err: err}
}

// Conflict names the first field of content (messages.ContentDiff) in
// which nm, a client's submission or a peer's forward, differs from
// stored, the message already stored under its id; "" when they agree.
// Only what the client said is compared, so a forward that arrives again
// (its origin's retry after a lost answer, a crash or a resubmit, with
// another trace context) is the stored message. An id stored for another
// credential is "submitted_by" whatever the content: a client never gets
// another's message back by naming its id. (A forward has no credential;
// whether its origin is the stored message's is the caller's check, with
// Accepted.ReportTo.)
func Conflict(nm NewMessage, stored messages.Message) string {
	_, _, receipt := ReceiptTarget(nm.ReportTo)
	forward := nm.ReportTo != "" && !receipt
	if !forward && nm.SubmittedBy != stored.SubmittedBy {
		return ConflictOwner
	}
	return messages.ContentDiff(NewRow(nm, stored.CreatedAt).Message, stored)
}

// ConflictOwner is the Conflict of an id another credential submitted.
const ConflictOwner = "submitted_by"

// AcceptedCounts are the counter deltas of storing the created messages
// (each in its first state) with their new outbox rows.
func AcceptedCounts(created map[string]messages.Message, work []WorkAdd) Counts {
	c := Counts{}
	for _, m := range created {
		c.State(m.State, 1)
	}
	for _, w := range work {
		c.Work(w.Spec.Kind, w.Spec.Target, 1)
	}
	return c
}
