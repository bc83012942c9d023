package storetest

import (
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func receiptCases() []testCase {
	return []testCase{
		{"DeliveredKeepsSMSCIDs", smscKeepsIDs},
		{"ReceiptsLandInHistory", smscReceiptHistory},
		{"UnknownAndPurgedIDs", smscUnknownAndPurged},
		{"ReusedIDNamesTheNewest", smscReusedID},
		{"RefsOnlyWithDelivered", smscRefsValidated},
	}
}

// deliverSMSC records a delivered outcome of id's delivery work on feA
// with the SMSC's ids.
func (f *fixture) deliverSMSC(now time.Time, id string, smscIDs ...string) {
	f.Helper()
	f.completeOne(now, persistence.Outcome{MessageID: id, Result: persistence.ResultDelivered, Detail: "delivered",
		SMSCMessageIDs: smscIDs}, persistence.Applied)
}

func (f *fixture) receipts(now time.Time, want []persistence.Completion, rs ...persistence.Receipt) {
	f.Helper()
	got, err := f.store.RecordReceipts(f.ctx, now, rs)
	if err != nil {
		f.Fatalf("RecordReceipts: %v", err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		f.Fatalf("RecordReceipts = %v, want %v", got, want)
	}
}

func receipt(fe, smscID, stat string) persistence.Receipt {
	return persistence.Receipt{Frontend: fe, SMSCMessageID: smscID, Stat: stat, Detail: "dlr: " + stat + " (" + smscID + ")"}
}

// A delivered outcome keeps the SMSC's ids, one per part, in order; a
// retry before it keeps none.
func smscKeepsIDs(f *fixture) {
	f.accept(base, newMsg("sm-1"), newMsg("sm-2"))
	f.claimDelivery(feA, ownerA, base, 10)
	f.deliverSMSC(at(time.Second), "sm-1", "abc-1", "abc-2", "abc-3")
	f.deliver(at(time.Second), "sm-2")
	m := f.get("sm-1")
	if fmt.Sprint(m.SMSC) != "[{abc-1 } {abc-2 } {abc-3 }]" || m.SMSCMessageID != "abc-3" || m.State != messages.StateDelivered {
		f.Fatalf("sm-1: %s, SMSC %v, latest %q", m.State, m.SMSC, m.SMSCMessageID)
	}
	if m := f.get("sm-2"); m.SMSC != nil {
		f.Fatalf("sm-2 has SMSC refs %v", m.SMSC)
	}
	// A late duplicate outcome changes nothing: the first ids stay.
	f.completeOne(at(time.Minute), persistence.Outcome{MessageID: "sm-1", Result: persistence.ResultDelivered,
		SMSCMessageIDs: []string{"other"}}, persistence.AlreadyRecorded)
	if m := f.get("sm-1"); len(m.SMSC) != 3 {
		f.Fatalf("after a duplicate outcome: %v", m.SMSC)
	}
}

// A receipt adds a history entry in the message's state and sets the
// stat of its SMSC id; a later one for the same id replaces the stat.
func smscReceiptHistory(f *fixture) {
	f.accept(base, newMsg("sr-1"))
	f.claimDelivery(feA, ownerA, base, 10)
	f.deliverSMSC(at(time.Second), "sr-1", "x-1", "x-2")
	f.receipts(at(time.Minute), []persistence.Completion{persistence.Applied, persistence.Applied},
		receipt(feA, "x-2", "ACCEPTD"), receipt(feA, "x-1", "DELIVRD"))
	f.receipts(at(2*time.Minute), []persistence.Completion{persistence.Applied}, receipt(feA, "x-2", "DELIVRD"))
	m := f.get("sr-1")
	if m.State != messages.StateDelivered || fmt.Sprint(m.SMSC) != "[{x-1 DELIVRD} {x-2 DELIVRD}]" {
		f.Fatalf("sr-1: %s %v", m.State, m.SMSC)
	}
	h := m.History
	if len(h) != 5 {
		f.Fatalf("history %+v, want accepted, delivered and three receipts", h)
	}
	for i, want := range []string{"dlr: ACCEPTD (x-2)", "dlr: DELIVRD (x-1)", "dlr: DELIVRD (x-2)"} {
		e := h[2+i]
		if e.State != messages.StateDelivered || e.Detail != want {
			f.Errorf("history[%d] = %+v, want delivered %q", 2+i, e, want)
		}
	}
	f.wantTime("receipt at", h[4].At, at(2*time.Minute))
	if m.LastDetail != "dlr: DELIVRD (x-2)" {
		f.Errorf("last detail %q", m.LastDetail)
	}
	// The counts did not move: a receipt is no transition.
	if st := f.stats(); st.ByState[messages.StateDelivered] != 1 {
		f.Errorf("delivered count %d", st.ByState[messages.StateDelivered])
	}
}

// A receipt for an id never recorded, or for a purged message, is NoWork
// and changes nothing; bad receipts are refused whole.
func smscUnknownAndPurged(f *fixture) {
	f.accept(base, newMsg("su-1"))
	f.claimDelivery(feA, ownerA, base, 10)
	f.deliverSMSC(at(time.Second), "su-1", "u-1")
	f.receipts(at(time.Minute), []persistence.Completion{persistence.NoWork, persistence.NoWork, persistence.Applied},
		receipt(feA, "nobody", "DELIVRD"), receipt(feB, "u-1", "DELIVRD"), receipt(feA, "u-1", "DELIVRD"))
	if n := len(f.get("su-1").History); n != 3 {
		f.Fatalf("history has %d entries, want 3", n)
	}
	if got := f.purge(retention(at(3*hour), at(2*hour), at(2*hour)), nil); len(got) != 1 {
		f.Fatalf("purged %v", got)
	}
	f.wantGone("su-1")
	f.receipts(at(4*hour), []persistence.Completion{persistence.NoWork}, receipt(feA, "u-1", "DELIVRD"))
	if _, err := f.store.RecordReceipts(f.ctx, at(4*hour), []persistence.Receipt{{Frontend: feA, Stat: "X"}}); err == nil {
		f.Errorf("a receipt without an SMSC id was taken")
	}
}

// An SMSC that reuses an id: its receipt names the newest message.
func smscReusedID(f *fixture) {
	f.accept(base, newMsg("sx-1"), newMsg("sx-2"))
	f.claimDelivery(feA, ownerA, base, 10)
	f.deliverSMSC(at(time.Second), "sx-1", "same")
	f.receipts(at(time.Minute), []persistence.Completion{persistence.Applied}, receipt(feA, "same", "DELIVRD"))
	f.deliverSMSC(at(time.Hour), "sx-2", "same")
	f.receipts(at(2*time.Hour), []persistence.Completion{persistence.Applied}, receipt(feA, "same", "UNDELIV"))
	if m := f.get("sx-2"); fmt.Sprint(m.SMSC) != "[{same UNDELIV}]" || len(m.History) != 3 {
		f.Fatalf("sx-2: %v, %d history entries", m.SMSC, len(m.History))
	}
	if m := f.get("sx-1"); len(m.SMSC) != 0 || len(m.History) != 3 {
		f.Fatalf("sx-1: %v, %d history entries", m.SMSC, len(m.History))
	}
}

// SMSC ids go only with a delivered delivery outcome.
func smscRefsValidated(f *fixture) {
	f.accept(base, newMsg("sv-1"))
	f.claimDelivery(feA, ownerA, base, 10)
	for _, o := range []persistence.Outcome{
		{Kind: persistence.WorkDelivery, Target: feA, MessageID: "sv-1", Result: persistence.ResultRetry, SMSCMessageIDs: []string{"a"}},
		{Kind: persistence.WorkDelivery, Target: feA, MessageID: "sv-1", Result: persistence.ResultDelivered, SMSCMessageIDs: []string{""}},
	} {
		if _, err := f.store.CompleteWork(f.ctx, at(time.Second), []persistence.Outcome{o}); err == nil {
			f.Errorf("CompleteWork took %+v", o)
		}
	}
	if m := f.get("sv-1"); m.State != messages.StatePending {
		f.Fatalf("state %s after refused outcomes", m.State)
	}
}
