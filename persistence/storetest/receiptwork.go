package storetest

import (
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// esmeE is the system_id of an SMPP client that asked for receipts.
const esmeE = "esme-e"

// receiptMsg is newMsg submitted over SMPP by esmeE with a delivery
// receipt asked for.
func receiptMsg(id string) persistence.NewMessage {
	m := newMsg(id)
	m.ReportTo = persistence.ReceiptReportTo(esmeE, false)
	return m
}

func receiptWorkCases() []testCase {
	return []testCase{
		{"WrittenOnEveryFinalState", receiptOnFinal},
		{"NotWrittenBeforeFinalOrWithoutAsking", receiptNotWritten},
		{"FailureOnly", receiptFailureOnly},
		{"OutcomesApplyToFinalMessages", receiptOutcomes},
		{"KeepsTheMessageFromPurge", receiptKeepsMessage},
		{"SameIDIsAClientsConflict", receiptConflict},
	}
}

// wantReceiptWork fails unless the receipt work for esmeE at now is
// exactly ids, and returns it (leased by ownerC).
func (f *fixture) wantReceiptWork(now time.Time, ids ...string) []persistence.Work {
	f.Helper()
	c := f.claimOf(persistence.WorkReceipt, esmeE, ownerC, now, 100)
	f.wantIDSet("receipt work", workIDs(c.Work), ids...)
	return c.Work
}

// receiptOnFinal: delivered, failed (by the frontend and by expiry) and
// forward_failed each owe the ESME a receipt, carrying the final state;
// no status work is written for it (it names no peer).
func receiptOnFinal(f *fixture) {
	fwd := fwdMsg("rc-fwd", peerP)
	fwd.ReportTo = persistence.ReceiptReportTo(esmeE, false)
	f.accept(base, receiptMsg("rc-ok"), receiptMsg("rc-bad"), receiptMsg("rc-exp"), fwd)
	f.deliver(at(1e9), "rc-ok")
	f.fail(at(1e9), "rc-bad")
	o := outcome(persistence.WorkForward, peerP, "rc-fwd", persistence.ResultFailed)
	o.Reason = messages.ReasonPeerRejected
	f.completeAll(at(1e9), []persistence.Completion{persistence.Applied}, o)
	got := f.expire(persistence.ExpireRequest{Now: at(2 * day), SubmittedBefore: at(day), Limit: 10})
	f.wantIDs("expired", messageIDs(got), "rc-exp")
	w := f.wantReceiptWork(at(2*day), "rc-ok", "rc-bad", "rc-exp", "rc-fwd")
	want := map[string]messages.State{"rc-ok": messages.StateDelivered, "rc-bad": messages.StateFailed,
		"rc-exp": messages.StateFailed, "rc-fwd": messages.StateForwardFailed}
	for _, x := range w {
		if x.Message.State != want[x.MessageID] || x.Kind != persistence.WorkReceipt || x.Target != esmeE {
			f.Errorf("%s: receipt work %s/%s carries %s, want %s", x.MessageID, x.Kind, x.Target, x.Message.State, want[x.MessageID])
		}
	}
	if c := f.claimOf(persistence.WorkStatus, esmeE, ownerC, at(2*day), 10); len(c.Work) != 0 {
		f.Errorf("status work written for an ESME: %q", workIDs(c.Work))
	}
}

func receiptNotWritten(f *fixture) {
	f.accept(base, receiptMsg("rn-retry"), newMsg("rn-plain"), fwdMsg("rn-fwd", peerP))
	f.retry(at(1e9), "rn-retry", at(time.Minute))
	f.deliver(at(1e9), "rn-plain")
	f.completeAll(at(1e9), []persistence.Completion{persistence.Applied},
		outcome(persistence.WorkForward, peerP, "rn-fwd", persistence.ResultDelivered))
	f.wantReceiptWork(at(time.Hour))
	f.wantOutbox(1) // rn-retry's delivery
}

// receiptFailureOnly: registered_delivery 0x02 asks for the receipt of
// a failure only.
func receiptFailureOnly(f *fixture) {
	ok, bad := newMsg("rfo-ok"), newMsg("rfo-bad")
	ok.ReportTo = persistence.ReceiptReportTo(esmeE, true)
	bad.ReportTo = ok.ReportTo
	f.accept(base, ok, bad)
	f.deliver(at(1e9), "rfo-ok")
	f.fail(at(1e9), "rfo-bad")
	f.wantReceiptWork(at(1e9), "rfo-bad")
}

// receiptOutcomes: the ESME's answer (or giving up) records the receipt
// in the ledger and removes the row, changing nothing of the message; a
// retry makes it due again.
func receiptOutcomes(f *fixture) {
	f.accept(base, receiptMsg("ro-ok"), receiptMsg("ro-later"))
	f.deliver(at(1e9), "ro-ok")
	f.deliver(at(1e9), "ro-later")
	f.wantReceiptWork(at(1e9), "ro-ok", "ro-later")
	before := f.get("ro-ok")
	r := outcome(persistence.WorkReceipt, esmeE, "ro-later", persistence.ResultRetry)
	r.RetryAt = at(time.Hour)
	f.completeAll(at(2e9), []persistence.Completion{persistence.Applied, persistence.Applied, persistence.AlreadyRecorded},
		outcome(persistence.WorkReceipt, esmeE, "ro-ok", persistence.ResultDelivered), r,
		outcome(persistence.WorkReceipt, esmeE, "ro-ok", persistence.ResultDelivered))
	m := f.get("ro-ok")
	f.checkMessage("a receipt outcome leaves the message", m, before)
	if len(m.History) != len(before.History) {
		f.Errorf("history grew from %d to %d", len(before.History), len(m.History))
	}
	if e := f.ledgerOf(persistence.WorkReceipt, "ro-ok", esmeE); e.Result != persistence.ResultDelivered {
		f.Errorf("receipt ledger = %+v", e)
	}
	f.wantReceiptWork(at(30 * time.Minute))
	f.wantReceiptWork(at(time.Hour), "ro-later")
	f.wantOutbox(1)
}

// receiptKeepsMessage: a receipt still owed keeps a delivered message
// past its retention; once sent, the message goes.
func receiptKeepsMessage(f *fixture) {
	f.accept(base, receiptMsg("rk"))
	f.deliver(at(1e9), "rk")
	req := persistence.PurgeRequest{Now: at(3 * day), Limit: 10,
		Before: map[messages.State]time.Time{messages.StateDelivered: at(2 * day)}}
	if got := f.purge(req, nil); len(got) != 0 {
		f.Errorf("purged %v with its receipt owed", got)
	}
	f.wantReceiptWork(at(3*day), "rk")
	f.completeAll(at(3*day), []persistence.Completion{persistence.Applied},
		outcome(persistence.WorkReceipt, esmeE, "rk", persistence.ResultDelivered))
	if got := f.purge(req, nil); len(got) != 1 || got[0].ID != "rk" {
		f.Errorf("purged %v after the receipt, want rk", got)
	}
}

// receiptConflict: a message submitted over SMPP is a client's: its id
// sent again with other content is a conflict, not a peer's retry.
func receiptConflict(f *fixture) {
	f.accept(base, receiptMsg("rcf"))
	again := receiptMsg("rcf")
	again.Body = "other"
	got := f.accept(at(1e9), again)
	if got[0].Created || got[0].Conflict != "message_body" {
		f.Errorf("the same id with another body: created %v, conflict %q; want a message_body conflict", got[0].Created, got[0].Conflict)
	}
}
