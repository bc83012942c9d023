package intake

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Routing: what the store keeps for each entry of a group commit, by the
// routing table as the intake knows it.

// router turns entries into what the store keeps, with the routing table
// and this node's name.
type router struct {
	table *Table
	node  string
	newID func() string
	site  func(messages.Options) error // Config.Site; nil takes everything
}

// batch forms a group commit of entries and reports: what the store keeps
// for each entry, routed by r's table. When an entry is refused for want
// of a route or a frontend (a miss) and reread is set, the directory is
// read again, once, r's table replaced with what reread returns, and the
// misses routed again. An entry still refused that carries an id goes to
// the commit all the same, to be looked up (its refusal is the answer when
// the id is not stored); the other refused entries are answered at once
// and are not in the batch.
func (r *router) batch(now time.Time, entries []entry, reports []*statusReq, reread func() *Table) *Batch {
	b := &Batch{Now: now, entries: entries, reports: reports}
	for _, rep := range reports {
		b.Updates = append(b.Updates, rep.updates...)
	}
	errs := make([]error, len(entries))
	stored := make([]persistence.NewMessage, len(entries))
	missed := false
	for i, e := range entries {
		stored[i], errs[i] = r.entryMessage(e, now)
		missed = missed || isMiss(errs[i])
	}
	if missed && reread != nil {
		r.table = reread()
		for i, e := range entries {
			if isMiss(errs[i]) {
				stored[i], errs[i] = r.entryMessage(e, now)
			}
		}
	}
	for i, e := range entries {
		if errs[i] != nil && e.sub != nil && e.sub.Submission.ID != "" {
			// It may be a retry of one stored while it could be: the
			// commit answers the stored message, or this error.
			entries[i].refusal = errs[i]
			stored[i], errs[i] = storedOnly(e.sub.Submission), nil
		}
		if errs[i] != nil && e.fwd != nil {
			// Likewise a forward sent again (its answer was lost) after
			// this node stopped serving its frontend: the id is stored,
			// and the protocol answers it duplicate.
			entries[i].refusal = errs[i]
			stored[i], errs[i] = storedOnlyForward(e.fwd.m.Forwards[e.idx], e.fwd.m.From), nil
		}
		if errs[i] != nil {
			answer(e, persistence.Accepted{}, errs[i])
			continue
		}
		b.Stored = append(b.Stored, stored[i])
		b.from = append(b.from, i)
	}
	return b
}

// receiptTo is the ReportTo of a submission whose ESME asked for a
// receipt ("" for none).
func receiptTo(systemID string, failedOnly bool) string {
	if systemID == "" {
		return ""
	}
	return persistence.ReceiptReportTo(systemID, failedOnly)
}

// newMessage builds what the store keeps for a submission routed to t.
func (r router) newMessage(s messages.Submission, t Target, now time.Time) persistence.NewMessage {
	nm := persistence.NewMessage{
		ID: s.ID, SourceMSISDN: s.SourceMSISDN, DestinationMSISDN: s.DestinationMSISDN,
		Body: s.Body, Options: s.Options, SourceSMSC: r.node, DestSMSC: r.node, Frontend: t.Frontend,
		SubmittedBy: s.SubmittedBy, Trace: s.Trace,
		State: messages.StatePending,
		// An SMPP client that asked for a delivery receipt gets it
		// through the outbox (receipt work) once the message is final.
		ReportTo: receiptTo(s.ReceiptTo, s.ReceiptFailedOnly),
		Detail:   "accepted for frontend " + t.Frontend,
		Work:     &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: t.Frontend, DueAt: firstAttempt(s.Options, now)},
	}
	if t.Peer != "" {
		nm.DestSMSC = t.Peer
		nm.Work = &persistence.WorkSpec{Kind: persistence.WorkForward, Target: t.Peer, DueAt: now}
		nm.Detail = fmt.Sprintf("accepted for frontend %s at peer %s", t.Frontend, t.Peer)
		if !t.Healthy {
			nm.State = messages.StateForwardQueued
			nm.Detail = fmt.Sprintf("queued for frontend %s at peer %s, which is not healthy", t.Frontend, t.Peer)
		}
	}
	return nm
}

// storedOnly is what the commit looks up for a client's submission with an
// id that may not be stored: the stored message if it is a retry.
func storedOnly(s messages.Submission) persistence.NewMessage {
	return persistence.NewMessage{
		ID: s.ID, SourceMSISDN: s.SourceMSISDN, DestinationMSISDN: s.DestinationMSISDN, Body: s.Body, Options: s.Options,
		SubmittedBy: s.SubmittedBy, ReportTo: receiptTo(s.ReceiptTo, s.ReceiptFailedOnly), StoredOnly: true,
	}
}

// storedOnlyForward is what the commit looks up for a peer's forward this
// node refuses (forwardTarget): the stored message if it is a retry.
func storedOnlyForward(f messages.Forward, from string) persistence.NewMessage {
	return persistence.NewMessage{
		ID: f.ID, SourceMSISDN: f.SourceMSISDN, DestinationMSISDN: f.DestinationMSISDN, Body: f.Body, Options: f.Options,
		ReportTo: from, StoredOnly: true,
	}
}

// forwardTarget checks a forwarded message against this node: it must be
// addressed to us, for a frontend we serve.
func (r router) forwardTarget(f messages.Forward) error {
	if f.DestSMSC != r.node {
		return messages.Errorf(messages.CodeNotOurFrontend, "dest_smsc is %q; this node is %q", f.DestSMSC, r.node)
	}
	if _, ok := r.table.Frontend(f.Frontend); !ok {
		return messages.Errorf(messages.CodeNotOurFrontend, "frontend %q is not served by %s", f.Frontend, r.node)
	}
	return nil
}

// entryMessage routes one entry into what the store keeps.
func (r router) entryMessage(e entry, now time.Time) (persistence.NewMessage, error) {
	if e.sub != nil {
		s := e.sub.Submission
		if e.sub.Refusal != nil {
			return persistence.NewMessage{}, e.sub.Refusal
		}
		// Resolve again: a directory change may have arrived after the submit.
		t, err := r.table.Resolve(s.DestinationMSISDN)
		if err != nil {
			return persistence.NewMessage{}, err
		}
		if s.ID == "" {
			s.ID = r.newID()
		}
		return r.newMessage(s, t, now), nil
	}
	f := e.fwd.m.Forwards[e.idx]
	if err := r.forwardTarget(f); err != nil {
		return persistence.NewMessage{}, err
	}
	if r.site != nil {
		if err := r.site(f.Options); err != nil {
			return persistence.NewMessage{}, err
		}
	}
	return persistence.NewMessage{
		ID: f.ID, SourceMSISDN: f.SourceMSISDN, DestinationMSISDN: f.DestinationMSISDN,
		Body: f.Body, Options: f.Options, SourceSMSC: f.SourceSMSC, DestSMSC: r.node, Frontend: f.Frontend,
		// The gateway replaced the peer's traceparent with its receipt's.
		Trace:    f.Traceparent,
		State:    messages.StatePending,
		Detail:   fmt.Sprintf("forwarded by %s for frontend %s", e.fwd.m.From, f.Frontend),
		Work:     &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: f.Frontend, DueAt: firstAttempt(f.Options, now)},
		ReportTo: e.fwd.m.From,
	}, nil
}

// firstAttempt is when a message's first delivery may be made: now, or its
// scheduled delivery time (deliver_after) when that is later. A forward
// leaves at once: the delivering node waits for the time.
func firstAttempt(o messages.Options, now time.Time) time.Time {
	if o.DeliverAfter != nil && o.DeliverAfter.After(now) {
		return *o.DeliverAfter
	}
	return now
}

// isMiss reports whether err refuses a message for want of a route or a
// frontend: what another instance's directory change may have cured.
func isMiss(err error) bool {
	var me *messages.Error
	return errors.As(err, &me) && (me.Code == messages.CodeNoRoute || me.Code == messages.CodeNotOurFrontend)
}
