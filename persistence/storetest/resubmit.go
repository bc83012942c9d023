package storetest

import (
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func resubmitCases() []testCase {
	return []testCase{
		{"FailedMessageGoesBackToWork", resubmitFailed},
		{"FailedLedgerRemovedSoWorkIsClaimableAgain", resubmitSameTarget},
		{"ForwardFailedMessage", resubmitForwardFailed},
		{"ForwardFailedBackToForwardQueue", resubmitToForwardQueue},
		{"TimedOutForwardToLocalWork", resubmitTimedOutForward},
		{"UnknownIDNotFound", resubmitUnknown},
		{"OtherStatesUntouched", resubmitOtherStates},
		{"SeveralInInputOrder", resubmitSeveral},
	}
}

// reroute sends id to target as pending delivery work due at due.
func reroute(id, target string, due time.Time) persistence.Reroute {
	return persistence.Reroute{
		ID: id, Frontend: target, DestSMSC: "smsc-new", State: messages.StatePending, Detail: "operator resubmit",
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: target, DueAt: due},
	}
}

func (f *fixture) wantResult(got persistence.ResubmitResult, want persistence.ResubmitResult) {
	f.Helper()
	if got != want {
		f.Errorf("Resubmit result = %+v, want %+v", got, want)
	}
}

func resubmitFailed(f *fixture) {
	f.accept(base, newMsg("rs"))
	f.claimDelivery(feA, ownerA, base, 1)
	f.fail(at(time.Minute), "rs")
	now := at(2*time.Hour + 3)
	got := f.resubmit(now, reroute("rs", feB, now))
	f.wantResult(got[0], persistence.ResubmitResult{ID: "rs", Applied: true, Found: true, State: messages.StatePending})

	want := expected(newMsg("rs"), base)
	want.State, want.Frontend, want.DestSMSC = messages.StatePending, feB, "smsc-new"
	want.Attempts, want.Reason = 0, ""
	want.SubmittedAt, want.UpdatedAt = norm(now), norm(now)
	f.checkMessage("after Resubmit", f.get("rs"), want)
	f.checkHistory("rs",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateFailed, At: at(time.Minute), Detail: "refused"},
		messages.HistoryEntry{State: messages.StatePending, At: now, Detail: "operator resubmit"},
	)
	f.noLedger("rs", feA)
	st := f.stats()
	if st.DLQDepth != 0 || st.OutboxDepth != 1 || st.ByState[messages.StatePending] != 1 {
		f.Errorf("Stats: DLQDepth %d, OutboxDepth %d, pending %d; want 0, 1, 1", st.DLQDepth, st.OutboxDepth, st.ByState[messages.StatePending])
	}
	f.wantOldestDue(now, now) // the new work, due at once
	if c := f.claimDelivery(feA, ownerA, now, 10); len(c.Work) != 0 {
		f.Errorf("work for the old frontend: %q", workIDs(c.Work))
	}
	c := f.claimDelivery(feB, ownerA, now, 10)
	f.wantIDs("claim on the new frontend", workIDs(c.Work), "rs")
	if len(c.Work) == 1 && c.Work[0].Message.Attempts != 1 {
		f.Errorf("Attempts = %d on the first claim after resubmit, want 1", c.Work[0].Message.Attempts)
	}
}

func resubmitSameTarget(f *fixture) {
	f.accept(base, newMsg("rst"))
	f.fail(at(time.Minute), "rst")
	f.ledger("rst", feA)
	f.resubmit(at(time.Hour), reroute("rst", feA, at(time.Hour)))
	f.noLedger("rst", feA)
	c := f.claimDelivery(feA, ownerA, at(time.Hour), 10)
	f.wantIDs("claim on the same frontend", workIDs(c.Work), "rst")
	f.deliver(at(time.Hour+time.Second), "rst")
	if e := f.ledger("rst", feA); e.Result != persistence.ResultDelivered {
		f.Errorf("ledger after the second run = %+v, want delivered", e)
	}
}

func resubmitForwardFailed(f *fixture) {
	m := msgNoWork("rff")
	m.State = messages.StateForwardFailed
	m.Detail = "peer gone for good"
	f.accept(base, m)
	got := f.resubmit(at(time.Hour), reroute("rff", feB, at(time.Hour)))
	f.wantResult(got[0], persistence.ResubmitResult{ID: "rff", Applied: true, Found: true, State: messages.StatePending})
	if fe := f.get("rff").Frontend; fe != feB {
		f.Errorf("Frontend = %q, want %q", fe, feB)
	}
	f.wantIDs("claim", workIDs(f.claimDelivery(feB, ownerA, at(time.Hour), 10).Work), "rff")
}

func resubmitUnknown(f *fixture) {
	got := f.resubmit(base, reroute("rs-nope", feA, base))
	f.wantResult(got[0], persistence.ResubmitResult{ID: "rs-nope"})
	f.wantOutbox(0)
	f.noLedger("rs-nope", feA)
}

func resubmitOtherStates(f *fixture) {
	q := newMsg("rs-queued")
	q.State = messages.StateForwardQueued
	q.Work = &persistence.WorkSpec{Kind: persistence.WorkForward, Target: peerP, DueAt: base}
	f.accept(base, newMsg("rs-pending"), newMsg("rs-retry"), newMsg("rs-delivered"), q)
	f.retry(at(1e9), "rs-retry", at(time.Minute))
	f.deliver(at(1e9), "rs-delivered")
	before := map[string]messages.Message{}
	for _, id := range []string{"rs-pending", "rs-retry", "rs-delivered", "rs-queued"} {
		before[id] = f.get(id)
	}
	depth := f.stats().OutboxDepth
	var rr []persistence.Reroute
	for _, id := range []string{"rs-pending", "rs-retry", "rs-delivered", "rs-queued"} {
		rr = append(rr, reroute(id, feB, at(time.Hour)))
	}
	got := f.resubmit(at(time.Hour), rr...)
	for i, r := range rr {
		b := before[r.ID]
		f.wantResult(got[i], persistence.ResubmitResult{ID: r.ID, Applied: false, Found: true, State: b.State})
		now := f.get(r.ID)
		f.checkMessage("untouched", now, b)
		if len(now.History) != len(b.History) {
			f.Errorf("%s: history grew from %d to %d", r.ID, len(b.History), len(now.History))
		}
	}
	f.wantOutbox(depth)
	if c := f.claimDelivery(feB, ownerA, at(time.Hour), 10); len(c.Work) != 0 {
		f.Errorf("work written for untouched messages: %q", workIDs(c.Work))
	}
	f.ledger("rs-delivered", feA)
}

func resubmitSeveral(f *fixture) {
	f.accept(base, newMsg("rsv-1"), newMsg("rsv-2"), newMsg("rsv-3"))
	f.fail(at(1e9), "rsv-1")
	f.deliver(at(1e9), "rsv-2")
	f.fail(at(1e9), "rsv-3")
	got := f.resubmit(at(time.Hour),
		reroute("rsv-1", feB, at(time.Hour)),
		reroute("rsv-nope", feB, at(time.Hour)),
		reroute("rsv-2", feB, at(time.Hour)),
		reroute("rsv-3", feB, at(time.Hour)),
		reroute("rsv-1", feB, at(time.Hour)), // already resubmitted above: now pending
	)
	want := []persistence.ResubmitResult{
		{ID: "rsv-1", Applied: true, Found: true, State: messages.StatePending},
		{ID: "rsv-nope"},
		{ID: "rsv-2", Found: true, State: messages.StateDelivered},
		{ID: "rsv-3", Applied: true, Found: true, State: messages.StatePending},
		{ID: "rsv-1", Found: true, State: messages.StatePending},
	}
	for i := range want {
		f.wantResult(got[i], want[i])
	}
	if n := f.historyLen("rsv-1"); n != 3 {
		f.Errorf("rsv-1 history has %d entries, want 3 (resubmitted once)", n)
	}
	c := f.claimDelivery(feB, ownerA, at(time.Hour), 10)
	f.wantIDSet("claim", workIDs(c.Work), "rsv-1", "rsv-3")
}

func resubmitToForwardQueue(f *fixture) {
	f.accept(base, fwdMsg("rq", peerP))
	o := outcome(persistence.WorkForward, peerP, "rq", persistence.ResultFailed)
	o.Reason = messages.ReasonPeerRejected
	f.completeAll(at(1e9), []persistence.Completion{persistence.Applied}, o)
	f.ledgerOf(persistence.WorkForward, "rq", peerP)
	now := at(time.Hour + 3)
	got := f.resubmit(now, persistence.Reroute{ID: "rq", Frontend: "far-fe", DestSMSC: peerP,
		State: messages.StateForwardQueued, Detail: "operator resubmit",
		Work: &persistence.WorkSpec{Kind: persistence.WorkForward, Target: peerP, DueAt: now}})
	f.wantResult(got[0], persistence.ResubmitResult{ID: "rq", Applied: true, Found: true, State: messages.StateForwardQueued})
	want := expected(fwdMsg("rq", peerP), base)
	want.State, want.SubmittedAt, want.UpdatedAt, want.QueuedAt = messages.StateForwardQueued, norm(now), norm(now), ptr(norm(now))
	f.checkMessage("after Resubmit", f.get("rq"), want)
	f.noLedgerOf(persistence.WorkForward, "rq", peerP)
	f.wantIDs("the forward is claimable again", workIDs(f.claimOf(persistence.WorkForward, peerP, ownerA, now, 10).Work), "rq")
	f.wantForwardQueue(map[string]int64{peerP: 1})
}

func resubmitTimedOutForward(f *fixture) {
	f.accept(base, queuedMsg("rt", peerP))
	f.failForwards(persistence.ForwardExpiry{Now: at(day), QueuedBefore: at(time.Hour), Limit: 10})
	f.wantState("rt", messages.StateForwardFailed)
	got := f.resubmit(at(day+time.Hour), reroute("rt", feB, at(day+time.Hour)))
	f.wantResult(got[0], persistence.ResubmitResult{ID: "rt", Applied: true, Found: true, State: messages.StatePending})
	f.wantQueuedAt("rt", nil)
	f.noLedgerOf(persistence.WorkForward, "rt", peerP)
	if r := f.get("rt").Reason; r != "" {
		f.Errorf("reason %q after Resubmit, want none", r)
	}
	f.wantIDs("claim", workIDs(f.claimDelivery(feB, ownerA, at(day+time.Hour), 10).Work), "rt")
}
