package persistence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// An smpp frontend's SMSC names each message it accepts with a message id
// of its own (one per submit_sm: a long text sent in parts has one per
// part). A delivered outcome carries them (Outcome.SMSCMessageIDs); the
// store keeps them by (frontend, SMSC message id), so that the SMSC's
// delivery receipts, which name only that id, find their message.

// SMSCRef is one SMSC message id to write with a delivered outcome.
type SMSCRef struct {
	Frontend      string
	SMSCMessageID string
	MessageID     string
	// Part is the submit_sm's part of the message (1 when it was sent
	// whole).
	Part int
}

// ReceiptMark is the stat of a receipt to write on its SMSC message id.
type ReceiptMark struct {
	Frontend      string
	SMSCMessageID string
	Stat          string
}

// Receipt is an SMSC's delivery receipt for a message an smpp frontend
// submitted.
type Receipt struct {
	Frontend      string
	SMSCMessageID string
	// Stat is the receipt's stat ("DELIVRD", "UNDELIV", ...).
	Stat string
	// Detail is the history detail ("dlr: DELIVRD err:000 ...").
	Detail string
	// MessageID is the message the SMSC id names, found by the store
	// (callers leave it empty).
	MessageID string
}

// ValidateReceipts reports what is wrong with receipts for RecordReceipts.
func ValidateReceipts(rs []Receipt) error {
	var errs []error
	for i, r := range rs {
		if r.Frontend == "" || r.SMSCMessageID == "" || r.Stat == "" {
			errs = append(errs, fmt.Errorf("record receipts: receipt %d: frontend, SMSC message id and stat are required", i))
		}
	}
	return errors.Join(errs...)
}

// validateRefs reports what is wrong with an outcome's SMSC message ids.
func validateRefs(i int, o Outcome) error {
	if len(o.SMSCMessageIDs) == 0 {
		return nil
	}
	if o.Kind != WorkDelivery || o.Result != ResultDelivered {
		return fmt.Errorf("complete work: outcome %d: SMSC message ids go only with a delivered delivery", i)
	}
	for _, id := range o.SMSCMessageIDs {
		if id == "" {
			return fmt.Errorf("complete work: outcome %d: an empty SMSC message id", i)
		}
	}
	return nil
}

// ReceiptStore is the part of a Store that keeps receipts.
type ReceiptStore interface {
	// RecordReceipts adds each receipt to the history of the message its
	// (Frontend, SMSCMessageID) names, in one transaction: an entry in the
	// message's state with the receipt's Detail, and the receipt's Stat
	// kept with the SMSC id (messages.Message.SMSC). A receipt whose id
	// names no message (never recorded, or purged) gives NoWork and
	// changes nothing. Results are in input order.
	RecordReceipts(ctx context.Context, now time.Time, rs []Receipt) ([]Completion, error)
}

// ApplyReceipt decides one receipt of RecordReceipts (its MessageID found
// by the store, "" when none) on what l holds and writes it into c.
func ApplyReceipt(l *Loaded, c *Changes, r Receipt) Completion {
	m := l.Rows[r.MessageID]
	if r.MessageID == "" || m == nil {
		return NoWork
	}
	c.Note(m, r.Detail)
	c.Receipts = append(c.Receipts, ReceiptMark{Frontend: r.Frontend, SMSCMessageID: r.SMSCMessageID, Stat: r.Stat})
	return Applied
}

// Note appends a history entry to m in its current state (something
// happened to it that is not a transition: an SMSC's receipt).
func (c *Changes) Note(m *Row, detail string) {
	c.appendHistory(m, messages.HistoryEntry{State: m.State, Detail: detail})
}

// refsOf are the SMSC refs of a delivered outcome.
func refsOf(o Outcome) []SMSCRef {
	out := make([]SMSCRef, len(o.SMSCMessageIDs))
	for i, id := range o.SMSCMessageIDs {
		out[i] = SMSCRef{Frontend: o.Target, SMSCMessageID: id, MessageID: o.MessageID, Part: i + 1}
	}
	return out
}
