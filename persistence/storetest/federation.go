package storetest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// peerQ is a second peer.
const peerQ = "peer-q"

// fwdMsg is a pending message for a frontend of peer, with forward work to
// peer due at base, as the intake writes it for a healthy peer.
func fwdMsg(id, peer string) persistence.NewMessage {
	m := newMsg(id)
	m.DestSMSC, m.Frontend = peer, "far-fe"
	m.Work = &persistence.WorkSpec{Kind: persistence.WorkForward, Target: peer, DueAt: base}
	return m
}

// queuedMsg is fwdMsg accepted in forward_queued (a peer that is not
// healthy).
func queuedMsg(id, peer string) persistence.NewMessage {
	m := fwdMsg(id, peer)
	m.State, m.Detail = messages.StateForwardQueued, "peer down"
	return m
}

// reportMsg is newMsg forwarded to us by peerP, which it reports to.
func reportMsg(id string) persistence.NewMessage {
	m := newMsg(id)
	m.ReportTo = peerP
	return m
}

// claimOf claims up to limit rows of kind for target at now, leased for
// the suite's long lease.
func (f *fixture) claimOf(kind persistence.WorkKind, target, owner string, now time.Time, limit int) persistence.Claim {
	f.Helper()
	return f.claim(persistence.ClaimRequest{Kind: kind, Target: target, Owner: owner, Limit: limit, Now: now, Lease: lease})
}

// outcome is an outcome of kind on target for id.
func outcome(kind persistence.WorkKind, target, id string, r persistence.Result) persistence.Outcome {
	return persistence.Outcome{Kind: kind, Target: target, MessageID: id, Result: r, Detail: string(kind) + " " + string(r)}
}

// completeAll records outcomes and requires the completions want.
func (f *fixture) completeAll(now time.Time, want []persistence.Completion, outcomes ...persistence.Outcome) {
	f.Helper()
	if got := f.complete(now, outcomes...); !slices.Equal(got, want) {
		f.Errorf("CompleteWork = %v, want %v", got, want)
	}
}

// status is peer's report on id.
func status(id, peer string, r persistence.Result) persistence.StatusUpdate {
	u := persistence.StatusUpdate{ID: id, From: peer, Result: r, At: at(time.Minute)}
	if r == persistence.ResultFailed {
		u.Reason = messages.ReasonRejected
	}
	return u
}

// applyStatus records updates and requires the completions want.
func (f *fixture) applyStatus(now time.Time, want []persistence.Completion, updates ...persistence.StatusUpdate) {
	f.Helper()
	got, err := f.store.ApplyStatus(f.ctx, now, updates)
	if err != nil {
		f.Fatalf("ApplyStatus: %v", err)
	}
	if !slices.Equal(got, want) {
		f.Errorf("ApplyStatus = %v, want %v", got, want)
	}
}

func (f *fixture) queueForwards(now time.Time, peer string, limit int) []string {
	f.Helper()
	ids, err := f.store.QueueForwards(f.ctx, now, peer, "peer "+peer+" is not healthy", limit)
	if err != nil {
		f.Fatalf("QueueForwards(%s): %v", peer, err)
	}
	return ids
}

func (f *fixture) failForwards(req persistence.ForwardExpiry) []messages.Message {
	f.Helper()
	res, err := f.store.FailForwards(f.ctx, req)
	if err != nil {
		f.Fatalf("FailForwards(%+v): %v", req, err)
	}
	return res
}

// lastHistory is id's last history entry.
func (f *fixture) lastHistory(id string) messages.HistoryEntry {
	f.Helper()
	h := f.get(id).History
	if len(h) == 0 {
		f.Fatalf("message %s has no history", id)
	}
	return h[len(h)-1]
}

// wantForwardQueue fails unless Stats.ForwardQueue is want.
func (f *fixture) wantForwardQueue(want map[string]int64) {
	f.Helper()
	got := f.stats().ForwardQueue
	if got == nil {
		f.Errorf("Stats.ForwardQueue is nil, want a map")
	}
	if len(got) != len(want) {
		f.Errorf("Stats.ForwardQueue = %v, want %v", got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			f.Errorf("Stats.ForwardQueue = %v, want %v", got, want)
			return
		}
	}
}

func forwardOutcomeCases() []testCase {
	return []testCase{
		{"DeliveredIsForwarded", forwardDelivered},
		{"DeliveredClearsQueuedAt", forwardDeliveredClearsQueuedAt},
		{"FailedIsForwardFailed", forwardFailed},
		{"RetryQueuesAndKeepsQueuedAt", forwardRetry},
		{"RetryOfQueuedMessageKeepsQueuedAt", forwardRetryOfQueued},
		{"ForwardedTakesNoMoreForwardOutcomes", forwardedIsRecorded},
	}
}

func forwardDelivered(f *fixture) {
	f.accept(base, fwdMsg("fd", peerP))
	f.wantForwardQueue(map[string]int64{peerP: 1})
	c := f.claimOf(persistence.WorkForward, peerP, ownerA, base, 10)
	f.wantIDs("claim", workIDs(c.Work), "fd")
	done := at(2e9 + 5)
	f.completeAll(done, []persistence.Completion{persistence.Applied},
		outcome(persistence.WorkForward, peerP, "fd", persistence.ResultDelivered))
	want := expected(fwdMsg("fd", peerP), base)
	want.State, want.UpdatedAt = messages.StateForwarded, norm(done)
	f.checkMessage("after the peer took it", f.get("fd"), want)
	f.checkHistory("fd",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateForwarded, At: done, Detail: "forward delivered"},
	)
	e := f.ledgerOf(persistence.WorkForward, "fd", peerP)
	if e.Result != persistence.ResultDelivered || e.Detail != "forward delivered" {
		f.Errorf("forward ledger = %+v", e)
	}
	f.wantTime("Ledger.At", e.At, done)
	f.noLedger("fd", peerP)
	f.wantOutbox(0)
	f.wantForwardQueue(map[string]int64{})
}

func forwardDeliveredClearsQueuedAt(f *fixture) {
	f.accept(base, queuedMsg("fdq", peerP))
	f.wantQueuedAt("fdq", ptr(base))
	f.claimOf(persistence.WorkForward, peerP, ownerA, at(time.Minute), 10)
	f.completeAll(at(2*time.Minute), []persistence.Completion{persistence.Applied},
		outcome(persistence.WorkForward, peerP, "fdq", persistence.ResultDelivered))
	f.wantState("fdq", messages.StateForwarded)
	f.wantQueuedAt("fdq", nil)
}

func forwardFailed(f *fixture) {
	f.accept(base, fwdMsg("ff", peerP), queuedMsg("ffq", peerP))
	o := outcome(persistence.WorkForward, peerP, "ff", persistence.ResultFailed)
	o.Reason = messages.ReasonPeerRejected
	oq := o
	oq.MessageID = "ffq"
	f.completeAll(at(1e9), []persistence.Completion{persistence.Applied, persistence.Applied}, o, oq)
	want := expected(fwdMsg("ff", peerP), base)
	want.State, want.Reason, want.UpdatedAt = messages.StateForwardFailed, messages.ReasonPeerRejected, norm(at(1e9))
	f.checkMessage("after the peer refused it", f.get("ff"), want)
	f.wantQueuedAt("ffq", nil)
	for _, id := range []string{"ff", "ffq"} {
		if e := f.ledgerOf(persistence.WorkForward, id, peerP); e.Result != persistence.ResultFailed {
			f.Errorf("%s: forward ledger = %+v, want failed", id, e)
		}
		if h := f.lastHistory(id); h.State != messages.StateForwardFailed {
			f.Errorf("%s: last history %+v", id, h)
		}
	}
	f.wantOutbox(0)
	st := f.stats()
	if st.ByState[messages.StateForwardFailed] != 2 || st.DLQDepth != 0 {
		f.Errorf("forward_failed %d, DLQDepth %d; want 2 and 0 (the DLQ counts failed only)",
			st.ByState[messages.StateForwardFailed], st.DLQDepth)
	}
	// forward_failed is final: later outcomes change nothing (its own
	// work's: already recorded; work it never had: no work).
	f.completeAll(at(2e9), []persistence.Completion{persistence.AlreadyRecorded, persistence.NoWork, persistence.NoWork},
		outcome(persistence.WorkForward, peerP, "ff", persistence.ResultDelivered),
		outcome(persistence.WorkForward, peerQ, "ff", persistence.ResultDelivered),
		outcome(persistence.WorkDelivery, feA, "ff", persistence.ResultDelivered))
	f.wantState("ff", messages.StateForwardFailed)
}

func forwardRetry(f *fixture) {
	f.accept(base, fwdMsg("fr", peerP))
	f.claimOf(persistence.WorkForward, peerP, ownerA, base, 10) // leased until base+1h
	first, retryAt := at(10e9), at(time.Minute)
	o := outcome(persistence.WorkForward, peerP, "fr", persistence.ResultRetry)
	o.RetryAt = retryAt
	f.completeAll(first, []persistence.Completion{persistence.Applied}, o)
	want := expected(fwdMsg("fr", peerP), base)
	want.State, want.UpdatedAt, want.QueuedAt = messages.StateForwardQueued, norm(first), ptr(norm(first))
	f.checkMessage("after the first retry", f.get("fr"), want)
	f.checkHistory("fr",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateForwardQueued, At: first, Detail: "forward retry"},
	)
	f.noLedgerOf(persistence.WorkForward, "fr", peerP)
	c := f.claimOf(persistence.WorkForward, peerP, ownerB, at(30e9), 10)
	if len(c.Work) != 0 {
		f.Errorf("claimable before RetryAt: %q", workIDs(c.Work))
	}
	f.wantTime("NextDue", c.NextDue, retryAt)
	// At RetryAt, inside the first lease: the retry dropped it.
	c = f.claimOf(persistence.WorkForward, peerP, ownerB, retryAt, 10)
	f.wantIDs("claim at RetryAt", workIDs(c.Work), "fr")
	if len(c.Work) == 1 {
		f.wantTime("DueAt", c.Work[0].DueAt, retryAt)
		if msg := queuedDiff(c.Work[0].Message.QueuedAt, ptr(first)); msg != "" {
			f.Errorf("claimed Work.Message.QueuedAt: %s", msg)
		}
	}
	// Another retry: still queued since the first, no transition.
	o.RetryAt = at(5 * time.Minute)
	f.completeAll(at(90e9), []persistence.Completion{persistence.Applied}, o)
	f.checkMessage("after the second retry", f.get("fr"), want)
	if n := f.historyLen("fr"); n != 2 {
		f.Errorf("history has %d entries after two forward retries, want 2", n)
	}
	f.wantForwardQueue(map[string]int64{peerP: 1})
}

func forwardRetryOfQueued(f *fixture) {
	f.accept(base, queuedMsg("frq", peerP))
	o := outcome(persistence.WorkForward, peerP, "frq", persistence.ResultRetry)
	o.RetryAt = at(time.Hour)
	f.completeAll(at(time.Minute), []persistence.Completion{persistence.Applied}, o)
	want := expected(queuedMsg("frq", peerP), base)
	f.checkMessage("after a retry", f.get("frq"), want)
	if n := f.historyLen("frq"); n != 1 {
		f.Errorf("history has %d entries, want 1 (no transition)", n)
	}
	c := f.claimOf(persistence.WorkForward, peerP, ownerA, at(30*time.Minute), 10)
	if len(c.Work) != 0 {
		f.Errorf("claimable before RetryAt: %q", workIDs(c.Work))
	}
	f.wantTime("NextDue", c.NextDue, at(time.Hour))
}

func forwardedIsRecorded(f *fixture) {
	f.accept(base, fwdMsg("fx", peerP))
	f.completeAll(at(1e9), []persistence.Completion{persistence.Applied, persistence.AlreadyRecorded, persistence.AlreadyRecorded},
		outcome(persistence.WorkForward, peerP, "fx", persistence.ResultDelivered),
		outcome(persistence.WorkForward, peerP, "fx", persistence.ResultRetry),
		outcome(persistence.WorkForward, peerP, "fx", persistence.ResultFailed))
	f.wantState("fx", messages.StateForwarded)
	if n := f.historyLen("fx"); n != 2 {
		f.Errorf("history has %d entries, want 2", n)
	}
	if e := f.ledgerOf(persistence.WorkForward, "fx", peerP); e.Result != persistence.ResultDelivered {
		f.Errorf("ledger changed: %+v", e)
	}
}

func statusWorkCases() []testCase {
	return []testCase{
		{"WrittenOnFinalDelivery", statusOnDelivered},
		{"WrittenOnFailedDelivery", statusOnFailed},
		{"NotWrittenOnRetryOrWithoutOrigin", statusNotWritten},
		{"WrittenOnExpiry", statusOnExpiry},
		{"ExpiryKeepsAnUnsentReport", statusExpiryKeepsReport},
		{"OutcomesApplyToFinalMessages", statusOutcomes},
		{"RetryReschedules", statusRetry},
		{"ResubmitReportsAgain", statusAfterResubmit},
		{"ResubmitRemovesAnUnsentReport", statusUnsentAfterResubmit},
		{"ResubmitForwardsAgainAfterPeerFailed", forwardAgainAfterPeerFailed},
	}
}

// forwardAgainAfterPeerFailed: a message the peer accepted (forward ledger
// delivered) and later reported failed is forwarded again when it is
// resubmitted to the same peer: the old forward entry must not make the
// claim drop the new work.
func forwardAgainAfterPeerFailed(f *fixture) {
	f.accept(base, fwdMsg("rf", peerP))
	f.claimOf(persistence.WorkForward, peerP, ownerA, base, 10)
	f.completeAll(at(1e9), []persistence.Completion{persistence.Applied},
		outcome(persistence.WorkForward, peerP, "rf", persistence.ResultDelivered))
	f.applyStatus(at(2e9), []persistence.Completion{persistence.Applied}, status("rf", peerP, persistence.ResultFailed))
	f.wantState("rf", messages.StateFailed)
	r := reroute("rf", "far-fe", at(time.Hour))
	r.DestSMSC, r.Work = peerP, &persistence.WorkSpec{Kind: persistence.WorkForward, Target: peerP, DueAt: at(time.Hour)}
	if res := f.resubmit(at(time.Hour), r); !res[0].Applied {
		f.Fatalf("resubmit %+v", res[0])
	}
	f.noLedgerOf(persistence.WorkForward, "rf", peerP)
	f.wantIDs("claim after resubmit", workIDs(f.claimOf(persistence.WorkForward, peerP, ownerA, at(time.Hour), 10).Work), "rf")
}

// wantStatusWork fails unless the status work for peerP at now is exactly
// ids, and returns it (leased by ownerC).
func (f *fixture) wantStatusWork(now time.Time, ids ...string) []persistence.Work {
	f.Helper()
	c := f.claimOf(persistence.WorkStatus, peerP, ownerC, now, 100)
	f.wantIDSet("status work", workIDs(c.Work), ids...)
	return c.Work
}

func statusOnDelivered(f *fixture) {
	f.accept(base, reportMsg("sd"))
	f.claimDelivery(feA, ownerA, base, 1)
	done := at(3e9 + 7)
	f.deliver(done, "sd")
	if c := f.claimOf(persistence.WorkStatus, peerP, ownerC, at(1e9), 10); len(c.Work) != 0 {
		f.Errorf("status work claimable before the delivery: %q", workIDs(c.Work))
	} else {
		f.wantTime("NextDue of the status work", c.NextDue, done)
	}
	w := f.wantStatusWork(done, "sd")
	if len(w) == 1 {
		f.wantTime("status DueAt", w[0].DueAt, done)
		f.wantTime("status CreatedAt", w[0].CreatedAt, done)
		if w[0].Message.State != messages.StateDelivered {
			f.Errorf("status work carries the message in %s, want delivered", w[0].Message.State)
		}
	}
	f.wantOutbox(1)
	f.wantForwardQueue(map[string]int64{})
}

func statusOnFailed(f *fixture) {
	f.accept(base, reportMsg("sf"))
	f.fail(at(1e9), "sf")
	w := f.wantStatusWork(at(1e9), "sf")
	if len(w) == 1 && (w[0].Message.State != messages.StateFailed || w[0].Message.Reason != messages.ReasonRejected) {
		f.Errorf("status work carries %s/%q, want failed/%q", w[0].Message.State, w[0].Message.Reason, messages.ReasonRejected)
	}
}

func statusNotWritten(f *fixture) {
	f.accept(base, reportMsg("sn-retry"), newMsg("sn-local"))
	f.retry(at(1e9), "sn-retry", at(time.Minute))
	f.deliver(at(1e9), "sn-local")
	f.wantStatusWork(at(time.Hour))
	f.wantOutbox(1) // sn-retry's delivery
}

func statusOnExpiry(f *fixture) {
	f.accept(base, reportMsg("se"))
	got := f.expire(persistence.ExpireRequest{Now: at(2 * day), SubmittedBefore: at(day), Limit: 10})
	f.wantIDs("expired", messageIDs(got), "se")
	f.wantStatusWork(at(2*day), "se")
	if c := f.claimDelivery(feA, ownerA, at(3*day), 10); len(c.Work) != 0 {
		f.Errorf("expired delivery work left: %q", workIDs(c.Work))
	}
	f.ledger("se", feA)
}

// statusExpiryKeepsAnUnsentReport: a report still owed when the message is
// resubmitted is not the message's work; its expiry sends the new state.
func statusExpiryKeepsReport(f *fixture) {
	f.accept(base, reportMsg("sk"))
	f.fail(at(1e9), "sk")
	f.resubmit(at(time.Hour), reroute("sk", feA, at(time.Hour)))
	got := f.expire(persistence.ExpireRequest{Now: at(3 * day), SubmittedBefore: at(2 * day), Limit: 10})
	f.wantIDs("expired", messageIDs(got), "sk")
	f.noLedgerOf(persistence.WorkStatus, "sk", peerP)
	w := f.wantStatusWork(at(3*day), "sk")
	if len(w) == 1 && w[0].Message.Reason != messages.ReasonExpired {
		f.Errorf("the report carries reason %q, want %q", w[0].Message.Reason, messages.ReasonExpired)
	}
	f.wantOutbox(1)
}

func statusOutcomes(f *fixture) {
	f.accept(base, reportMsg("so-ok"), reportMsg("so-bad"))
	f.deliver(at(1e9), "so-ok")
	f.fail(at(1e9), "so-bad")
	f.wantStatusWork(at(1e9), "so-ok", "so-bad")
	before := map[string]messages.Message{"so-ok": f.get("so-ok"), "so-bad": f.get("so-bad")}
	now := at(2e9)
	f.completeAll(now, []persistence.Completion{persistence.Applied, persistence.Applied, persistence.AlreadyRecorded},
		outcome(persistence.WorkStatus, peerP, "so-ok", persistence.ResultDelivered),
		outcome(persistence.WorkStatus, peerP, "so-bad", persistence.ResultFailed),
		outcome(persistence.WorkStatus, peerP, "so-ok", persistence.ResultDelivered))
	for id, b := range before {
		m := f.get(id)
		f.checkMessage("a status outcome leaves the message", m, b)
		if len(m.History) != len(b.History) {
			f.Errorf("%s: history grew from %d to %d", id, len(b.History), len(m.History))
		}
	}
	for id, r := range map[string]persistence.Result{"so-ok": persistence.ResultDelivered, "so-bad": persistence.ResultFailed} {
		e := f.ledgerOf(persistence.WorkStatus, id, peerP)
		if e.Result != r {
			f.Errorf("%s: status ledger = %+v, want %s", id, e, r)
		}
		f.wantTime("status Ledger.At", e.At, now)
	}
	f.wantOutbox(0)
	// The status outcome did not touch the delivery ledger.
	if e := f.ledger("so-ok", feA); e.Result != persistence.ResultDelivered {
		f.Errorf("delivery ledger = %+v", e)
	}
}

func statusRetry(f *fixture) {
	f.accept(base, reportMsg("sr"))
	f.deliver(at(1e9), "sr")
	f.wantStatusWork(at(1e9), "sr") // leased by C for an hour
	o := outcome(persistence.WorkStatus, peerP, "sr", persistence.ResultRetry)
	o.RetryAt = at(time.Minute)
	f.completeAll(at(2e9), []persistence.Completion{persistence.Applied}, o)
	f.noLedgerOf(persistence.WorkStatus, "sr", peerP)
	f.wantState("sr", messages.StateDelivered)
	if n := f.historyLen("sr"); n != 2 {
		f.Errorf("history has %d entries, want 2", n)
	}
	if c := f.claimOf(persistence.WorkStatus, peerP, ownerB, at(30e9), 10); len(c.Work) != 0 {
		f.Errorf("claimable before RetryAt: %q", workIDs(c.Work))
	}
	f.wantIDs("claim at RetryAt", workIDs(f.claimOf(persistence.WorkStatus, peerP, ownerB, at(time.Minute), 10).Work), "sr")
}

func statusAfterResubmit(f *fixture) {
	f.accept(base, reportMsg("sa"))
	f.fail(at(1e9), "sa")
	f.wantStatusWork(at(1e9), "sa")
	f.completeAll(at(2e9), []persistence.Completion{persistence.Applied},
		outcome(persistence.WorkStatus, peerP, "sa", persistence.ResultDelivered))
	f.ledgerOf(persistence.WorkStatus, "sa", peerP)
	f.resubmit(at(time.Hour), reroute("sa", feA, at(time.Hour)))
	f.noLedgerOf(persistence.WorkStatus, "sa", peerP)
	f.deliver(at(time.Hour+time.Second), "sa")
	w := f.wantStatusWork(at(time.Hour+time.Second), "sa")
	if len(w) == 1 && w[0].Message.State != messages.StateDelivered {
		f.Errorf("the new report carries %s, want delivered", w[0].Message.State)
	}
}

// statusUnsentAfterResubmit: a report still owed when its message is
// resubmitted goes with the outcome it reported. Kept, it would tell the
// origin about a message that is pending again (a report of its last
// state, not of a final one); the next final outcome writes its own.
func statusUnsentAfterResubmit(f *fixture) {
	f.accept(base, reportMsg("su"))
	f.fail(at(1e9), "su")
	f.resubmit(at(time.Hour), reroute("su", feA, at(time.Hour)))
	f.wantStatusWork(at(time.Hour))
	f.wantOutbox(1) // the new delivery work
	f.deliver(at(time.Hour+time.Second), "su")
	w := f.wantStatusWork(at(time.Hour+time.Second), "su")
	if len(w) == 1 && w[0].Message.State != messages.StateDelivered {
		f.Errorf("the new report carries %s, want delivered", w[0].Message.State)
	}
}

func applyStatusCases() []testCase {
	return []testCase{
		{"AppliesFromEveryForwardState", applyFromEveryState},
		{"DeliveredOrFailedIsAlreadyRecorded", applyAlreadyRecorded},
		{"UnknownIDOrOtherDestIsNoWork", applyNoWork},
		{"OvertakesLeasedForward", applyOvertakesLeasedForward},
		{"SeveralInInputOrder", applySeveral},
		{"InvalidUpdateIsError", applyInvalid},
	}
}

func applyFromEveryState(f *fixture) {
	f.accept(base, fwdMsg("as-pending", peerP), queuedMsg("as-queued", peerP), fwdMsg("as-forwarded", peerP),
		fwdMsg("as-ffailed", peerP), fwdMsg("as-pending2", peerP))
	ffail := outcome(persistence.WorkForward, peerP, "as-ffailed", persistence.ResultFailed)
	ffail.Reason = messages.ReasonPeerRejected
	f.completeAll(at(1e9), []persistence.Completion{persistence.Applied, persistence.Applied},
		outcome(persistence.WorkForward, peerP, "as-forwarded", persistence.ResultDelivered), ffail)
	now := at(2*time.Minute + 3)
	f.applyStatus(now, []persistence.Completion{persistence.Applied, persistence.Applied, persistence.Applied, persistence.Applied, persistence.Applied},
		status("as-pending", peerP, persistence.ResultDelivered),
		status("as-queued", peerP, persistence.ResultFailed),
		status("as-forwarded", peerP, persistence.ResultDelivered),
		status("as-ffailed", peerP, persistence.ResultDelivered),
		status("as-pending2", peerP, persistence.ResultFailed),
	)
	wantState := map[string]messages.State{
		"as-pending": messages.StateDelivered, "as-queued": messages.StateFailed, "as-forwarded": messages.StateDelivered,
		"as-ffailed": messages.StateDelivered, "as-pending2": messages.StateFailed,
	}
	// The forward ledger entry is written when absent, kept when present.
	wantLedger := map[string]persistence.Result{
		"as-pending": persistence.ResultDelivered, "as-queued": persistence.ResultFailed, "as-forwarded": persistence.ResultDelivered,
		"as-ffailed": persistence.ResultFailed, "as-pending2": persistence.ResultFailed,
	}
	for id, state := range wantState {
		m := f.get(id)
		if m.State != state {
			f.Errorf("%s: state %s, want %s", id, m.State, state)
		}
		f.wantTime(id+" UpdatedAt", m.UpdatedAt, now)
		if m.QueuedAt != nil {
			f.Errorf("%s: QueuedAt %v in %s, want nil", id, *m.QueuedAt, m.State)
		}
		h := m.History[len(m.History)-1]
		if h.State != state || !strings.HasPrefix(h.Detail, "reported by "+peerP) {
			f.Errorf("%s: last history %+v, want %s reported by %s", id, h, state, peerP)
		}
		f.wantTime(id+" history At", h.At, now)
		if e := f.ledgerOf(persistence.WorkForward, id, peerP); e.Result != wantLedger[id] {
			f.Errorf("%s: forward ledger %+v, want %s", id, e, wantLedger[id])
		}
	}
	if r := f.get("as-queued").Reason; r != messages.ReasonRejected {
		f.Errorf("as-queued: reason %q, want the report's %q", r, messages.ReasonRejected)
	}
	if r := f.get("as-ffailed").Reason; r != messages.ReasonPeerRejected {
		f.Errorf("as-ffailed: reason %q, want it kept (%q) by a delivered report", r, messages.ReasonPeerRejected)
	}
	f.wantOutbox(0)
	f.wantForwardQueue(map[string]int64{})
	if n := f.stats().DLQDepth; n != 2 {
		f.Errorf("DLQDepth = %d, want 2", n)
	}
}

func applyAlreadyRecorded(f *fixture) {
	local := newMsg("aa-local")
	local.DestSMSC = peerP
	f.accept(base, fwdMsg("aa", peerP), local)
	f.deliver(at(1e9), "aa-local")
	f.applyStatus(at(2e9), []persistence.Completion{persistence.Applied}, status("aa", peerP, persistence.ResultDelivered))
	before := f.get("aa")
	f.applyStatus(at(3e9), []persistence.Completion{persistence.AlreadyRecorded, persistence.AlreadyRecorded, persistence.AlreadyRecorded},
		status("aa", peerP, persistence.ResultFailed),
		status("aa", peerP, persistence.ResultDelivered),
		status("aa-local", peerP, persistence.ResultFailed))
	f.checkMessage("after late reports", f.get("aa"), before)
	if n := f.historyLen("aa"); n != 2 {
		f.Errorf("history has %d entries, want 2", n)
	}
	f.wantState("aa-local", messages.StateDelivered)
	f.noLedgerOf(persistence.WorkForward, "aa-local", peerP)
}

func applyNoWork(f *fixture) {
	retry := fwdMsg("an-retry", peerP)
	retry.Work = &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: feA, DueAt: base}
	f.accept(base, fwdMsg("an", peerP), retry)
	f.retry(at(1e9), "an-retry", at(time.Hour))
	f.applyStatus(at(2e9), []persistence.Completion{persistence.NoWork, persistence.NoWork, persistence.NoWork},
		status("an-unknown", peerP, persistence.ResultDelivered),
		status("an", peerQ, persistence.ResultDelivered),
		status("an-retry", peerP, persistence.ResultDelivered))
	f.wantState("an", messages.StatePending)
	f.wantState("an-retry", messages.StateRetry)
	f.noLedgerOf(persistence.WorkForward, "an", peerQ)
	f.noLedgerOf(persistence.WorkForward, "an", peerP)
	f.wantIDs("an's forward is untouched", workIDs(f.claimOf(persistence.WorkForward, peerP, ownerA, base, 10).Work), "an")
}

func applyOvertakesLeasedForward(f *fixture) {
	f.accept(base, fwdMsg("ao", peerP))
	c := f.claimOf(persistence.WorkForward, peerP, ownerA, base, 10)
	f.wantIDs("claim", workIDs(c.Work), "ao")
	// The peer's report arrives before the forward's own answer.
	f.applyStatus(at(1e9), []persistence.Completion{persistence.Applied}, status("ao", peerP, persistence.ResultDelivered))
	f.wantState("ao", messages.StateDelivered)
	f.wantOutbox(0)
	f.completeAll(at(2e9), []persistence.Completion{persistence.AlreadyRecorded},
		outcome(persistence.WorkForward, peerP, "ao", persistence.ResultDelivered))
	f.checkHistory("ao",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateDelivered, At: at(1e9), Detail: f.lastHistory("ao").Detail},
	)
	if c := f.claimOf(persistence.WorkForward, peerP, ownerB, at(2*lease), 10); len(c.Work) != 0 || !c.NextDue.IsZero() {
		f.Errorf("the forward is still in the outbox: %q, NextDue %v", workIDs(c.Work), c.NextDue)
	}
}

func applySeveral(f *fixture) {
	f.accept(base, fwdMsg("av-1", peerP), fwdMsg("av-2", peerP))
	f.applyStatus(at(1e9), []persistence.Completion{persistence.Applied, persistence.NoWork, persistence.AlreadyRecorded, persistence.Applied},
		status("av-1", peerP, persistence.ResultFailed),
		status("av-nope", peerP, persistence.ResultDelivered),
		status("av-1", peerP, persistence.ResultDelivered),
		status("av-2", peerP, persistence.ResultDelivered))
	f.wantState("av-1", messages.StateFailed)
	f.wantState("av-2", messages.StateDelivered)
	if n := f.historyLen("av-1"); n != 2 {
		f.Errorf("av-1 history has %d entries, want 2", n)
	}
	if got, err := f.store.ApplyStatus(f.ctx, at(2e9), nil); err != nil || len(got) != 0 {
		f.Errorf("ApplyStatus(nil) = %v, %v; want none, nil", got, err)
	}
}

func applyInvalid(f *fixture) {
	f.accept(base, fwdMsg("ai", peerP))
	for name, u := range map[string]persistence.StatusUpdate{
		"retry result": {ID: "ai", From: peerP, Result: persistence.ResultRetry},
		"empty id":     {From: peerP, Result: persistence.ResultDelivered},
		"empty from":   {ID: "ai", Result: persistence.ResultDelivered},
	} {
		if _, err := f.store.ApplyStatus(f.ctx, at(1e9), []persistence.StatusUpdate{status("ai", peerP, persistence.ResultDelivered), u}); err == nil {
			f.Errorf("ApplyStatus with %s: no error", name)
		}
	}
	f.wantState("ai", messages.StatePending)
	f.wantOutbox(1)
}

func queueForwardsCases() []testCase {
	return []testCase{
		{"OnlyPendingUnleasedWorkForThePeer", queueOnlyPendingForPeer},
		{"LimitBoundsOneCall", queueLimit},
		{"EndedLeaseIsNoLease", queueAfterLeaseEnds},
		{"InvalidCallIsError", queueInvalid},
	}
}

func queueOnlyPendingForPeer(f *fixture) {
	later := func(m persistence.NewMessage) persistence.NewMessage {
		m.Work.DueAt = at(1e9)
		return m
	}
	f.accept(base, fwdMsg("qf-leased", peerP), later(fwdMsg("qf-1", peerP)), later(fwdMsg("qf-other", peerQ)),
		newMsg("qf-local"), later(queuedMsg("qf-queued", peerP)))
	f.accept(at(2e9), later(fwdMsg("qf-2", peerP)))
	f.wantIDs("leased", workIDs(f.claimOf(persistence.WorkForward, peerP, ownerA, base, 10).Work), "qf-leased")

	now := at(time.Minute)
	f.wantIDs("queued, in acceptance order", f.queueForwards(now, peerP, 10), "qf-1", "qf-2")
	for _, id := range []string{"qf-1", "qf-2"} {
		m := f.get(id)
		if m.State != messages.StateForwardQueued {
			f.Errorf("%s: state %s, want forward_queued", id, m.State)
		}
		f.wantTime(id+" UpdatedAt", m.UpdatedAt, now)
		f.wantQueuedAt(id, ptr(now))
		if h := m.History[len(m.History)-1]; h.State != messages.StateForwardQueued || h.Detail != "peer "+peerP+" is not healthy" {
			f.Errorf("%s: last history %+v", id, h)
		} else {
			f.wantTime(id+" history At", h.At, now)
		}
	}
	f.wantState("qf-leased", messages.StatePending)
	f.wantState("qf-other", messages.StatePending)
	f.wantState("qf-local", messages.StatePending)
	f.wantQueuedAt("qf-queued", ptr(base))
	if n := f.historyLen("qf-queued"); n != 1 {
		f.Errorf("qf-queued: history has %d entries, want 1", n)
	}
	// The forward work stays, due as it was, to drain when the peer heals.
	f.wantForwardQueue(map[string]int64{peerP: 4, peerQ: 1})
	c := f.claimOf(persistence.WorkForward, peerP, ownerB, now, 10)
	f.wantIDSet("forward work after queueing", workIDs(c.Work), "qf-1", "qf-queued", "qf-2")
	if again := f.queueForwards(now, peerP, 10); len(again) != 0 {
		f.Errorf("queued again: %q", again)
	}
}

func queueLimit(f *fixture) {
	var batch []persistence.NewMessage
	for i := range 5 {
		batch = append(batch, fwdMsg(fmt.Sprintf("ql-%d", i), peerP))
	}
	f.accept(base, batch...)
	var got []string
	for _, want := range []int{2, 2, 1, 0} {
		ids := f.queueForwards(at(1e9), peerP, 2)
		if len(ids) != want {
			f.Fatalf("QueueForwards(limit 2) returned %d, want %d", len(ids), want)
		}
		got = append(got, ids...)
	}
	f.wantIDs("queued, in acceptance order", got, "ql-0", "ql-1", "ql-2", "ql-3", "ql-4")
	if n := f.stats().ByState[messages.StateForwardQueued]; n != 5 {
		f.Errorf("forward_queued %d, want 5", n)
	}
}

func queueAfterLeaseEnds(f *fixture) {
	f.accept(base, fwdMsg("qa", peerP))
	f.claimOf(persistence.WorkForward, peerP, ownerA, base, 10)
	if ids := f.queueForwards(at(lease-time.Microsecond), peerP, 10); len(ids) != 0 {
		f.Errorf("queued %q while its forward is leased", ids)
	}
	f.wantIDs("queued at the lease end", f.queueForwards(at(lease), peerP, 10), "qa")
}

func queueInvalid(f *fixture) {
	f.accept(base, fwdMsg("qi", peerP))
	if _, err := f.store.QueueForwards(f.ctx, base, "", "x", 10); err == nil {
		f.Errorf("QueueForwards with an empty peer: no error")
	}
	if _, err := f.store.QueueForwards(f.ctx, base, peerP, "x", 0); err == nil {
		f.Errorf("QueueForwards with limit 0: no error")
	}
	f.wantState("qi", messages.StatePending)
}

func failForwardsCases() []testCase {
	return []testCase{
		{"OnlyQueuedBeforeCutoff", failOnlyBeforeCutoff},
		{"FailedMessagesAndLedger", failFailsMessages},
		{"NeverWhileForwardIsLeased", failNeverWhileLeased},
		{"LimitBoundsOneCallOldestFirst", failLimit},
		{"QueuedAtFromRetryAndQueueForwards", failQueuedAtFromTransitions},
		{"InvalidLimitIsError", failInvalid},
	}
}

func failOnlyBeforeCutoff(f *fixture) {
	f.accept(base, queuedMsg("fo-old", peerP), fwdMsg("fo-pending", peerP))
	f.accept(at(time.Hour), queuedMsg("fo-edge", peerP))
	f.accept(at(2*time.Hour), queuedMsg("fo-young", peerQ))
	got := f.failForwards(persistence.ForwardExpiry{Now: at(3 * time.Hour), QueuedBefore: at(time.Hour), Limit: 10})
	f.wantIDs("failed (cutoff = fo-edge's queued_at, exclusive)", messageIDs(got), "fo-old")
	f.wantState("fo-edge", messages.StateForwardQueued)
	f.wantState("fo-young", messages.StateForwardQueued)
	f.wantState("fo-pending", messages.StatePending)
	got = f.failForwards(persistence.ForwardExpiry{Now: at(3 * time.Hour), QueuedBefore: at(3 * time.Hour), Limit: 10})
	f.wantIDs("failed with a later cutoff", messageIDs(got), "fo-edge", "fo-young")
	f.wantState("fo-pending", messages.StatePending)
}

func failFailsMessages(f *fixture) {
	f.accept(base, queuedMsg("ffm", peerP))
	now := at(day + 7)
	got := f.failForwards(persistence.ForwardExpiry{Now: now, QueuedBefore: at(time.Hour), Limit: 10})
	if len(got) != 1 {
		f.Fatalf("failed %d messages, want 1", len(got))
	}
	want := expected(queuedMsg("ffm", peerP), base)
	want.State, want.Reason, want.UpdatedAt, want.QueuedAt = messages.StateForwardFailed, messages.ReasonForwardTimeout, norm(now), nil
	f.checkMessage("returned", got[0], want)
	f.checkMessage("stored", f.get("ffm"), want)
	if h := f.lastHistory("ffm"); h.State != messages.StateForwardFailed {
		f.Errorf("last history %+v, want forward_failed", h)
	} else {
		f.wantTime("history At", h.At, now)
	}
	e := f.ledgerOf(persistence.WorkForward, "ffm", peerP)
	if e.Result != persistence.ResultFailed {
		f.Errorf("forward ledger %+v, want failed", e)
	}
	f.wantTime("Ledger.At", e.At, now)
	f.wantOutbox(0)
	f.wantForwardQueue(map[string]int64{})
	if again := f.failForwards(persistence.ForwardExpiry{Now: now, QueuedBefore: now, Limit: 10}); len(again) != 0 {
		f.Errorf("failed again: %q", messageIDs(again))
	}
}

func failNeverWhileLeased(f *fixture) {
	f.accept(base, queuedMsg("fl-leased", peerP), queuedMsg("fl-free", peerQ))
	f.claimOf(persistence.WorkForward, peerP, ownerA, base, 10) // until base+1h
	before := f.get("fl-leased")
	got := f.failForwards(persistence.ForwardExpiry{Now: at(30 * time.Minute), QueuedBefore: at(time.Minute), Limit: 10})
	f.wantIDs("failed while fl-leased is leased", messageIDs(got), "fl-free")
	f.checkMessage("leased, untouched", f.get("fl-leased"), before)
	f.noLedgerOf(persistence.WorkForward, "fl-leased", peerP)
	// Its forward is still there, and its lease still holds.
	if c := f.claimOf(persistence.WorkForward, peerP, ownerB, at(30*time.Minute), 10); len(c.Work) != 0 {
		f.Errorf("the lease was dropped: %q", workIDs(c.Work))
	}
	got = f.failForwards(persistence.ForwardExpiry{Now: at(lease), QueuedBefore: at(time.Minute), Limit: 10})
	f.wantIDs("failed once the lease ended", messageIDs(got), "fl-leased")
}

func failLimit(f *fixture) {
	for i := range 5 {
		// Accepted newest first, so queue order is not acceptance order.
		f.accept(at(time.Duration(5-i)*time.Second), queuedMsg(fmt.Sprintf("fll-%d", i), peerP))
	}
	var got []string
	for _, want := range []int{2, 2, 1, 0} {
		ms := f.failForwards(persistence.ForwardExpiry{Now: at(day), QueuedBefore: at(time.Hour), Limit: 2})
		if len(ms) != want {
			f.Fatalf("FailForwards(limit 2) returned %d, want %d", len(ms), want)
		}
		got = append(got, messageIDs(ms)...)
	}
	f.wantIDs("failed, oldest queued first", got, "fll-4", "fll-3", "fll-2", "fll-1", "fll-0")
}

func failQueuedAtFromTransitions(f *fixture) {
	f.accept(base, fwdMsg("ft-retry", peerP), fwdMsg("ft-park", peerQ))
	o := outcome(persistence.WorkForward, peerP, "ft-retry", persistence.ResultRetry)
	o.RetryAt = at(time.Minute)
	f.completeAll(at(10*time.Minute), []persistence.Completion{persistence.Applied}, o)
	f.wantQueuedAt("ft-retry", ptr(at(10*time.Minute)))
	f.wantIDs("queued", f.queueForwards(at(20*time.Minute), peerQ, 10), "ft-park")
	f.wantQueuedAt("ft-park", ptr(at(20*time.Minute)))
	got := f.failForwards(persistence.ForwardExpiry{Now: at(day), QueuedBefore: at(10 * time.Minute), Limit: 10})
	if len(got) != 0 {
		f.Errorf("failed %q: the wait counts from queued_at, not acceptance", messageIDs(got))
	}
	got = f.failForwards(persistence.ForwardExpiry{Now: at(day), QueuedBefore: at(15 * time.Minute), Limit: 10})
	f.wantIDs("failed", messageIDs(got), "ft-retry")
	got = f.failForwards(persistence.ForwardExpiry{Now: at(day), QueuedBefore: at(25 * time.Minute), Limit: 10})
	f.wantIDs("failed", messageIDs(got), "ft-park")
}

func failInvalid(f *fixture) {
	if _, err := f.store.FailForwards(f.ctx, persistence.ForwardExpiry{Now: base, QueuedBefore: base}); err == nil {
		f.Errorf("FailForwards with limit 0: no error")
	}
}

func forwardTargetsCases() []testCase {
	return []testCase{{"EachPeerOnceOrdered", forwardTargetsEachOnce}}
}

func forwardTargetsEachOnce(f *fixture) {
	got, err := f.store.ForwardTargets(f.ctx)
	if err != nil || len(got) != 0 {
		f.Fatalf("ForwardTargets of an empty store = %q, %v", got, err)
	}
	f.accept(base, fwdMsg("ft-1", "peer-z"), fwdMsg("ft-2", peerP), queuedMsg("ft-3", peerP), newMsg("ft-local"),
		msgFor("ft-status", persistence.WorkStatus, "peer-s"))
	got, err = f.store.ForwardTargets(f.ctx)
	if err != nil {
		f.Fatal(err)
	}
	f.wantIDs("ForwardTargets", got, peerP, "peer-z")
}

func peerRegistryCases() []testCase {
	return []testCase{
		{"PutListReplace", registryPutListReplace},
		{"EmptyRegistryIsAbsent", registryEmpty},
		{"InvalidIsError", registryInvalid},
	}
}

func (f *fixture) registries() []persistence.PeerRegistry {
	f.Helper()
	rs, err := f.store.PeerRegistries(f.ctx)
	if err != nil {
		f.Fatalf("PeerRegistries: %v", err)
	}
	return rs
}

func (f *fixture) putRegistry(r persistence.PeerRegistry) {
	f.Helper()
	if err := f.store.PutPeerRegistry(f.ctx, r); err != nil {
		f.Fatalf("PutPeerRegistry(%+v): %v", r, err)
	}
}

func (f *fixture) wantRegistries(want ...persistence.PeerRegistry) {
	f.Helper()
	got := f.registries()
	if len(got) != len(want) {
		f.Fatalf("PeerRegistries = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Peer != want[i].Peer || !equalStrings(got[i].Frontends, want[i].Frontends) {
			f.Errorf("PeerRegistries[%d] = %+v, want %+v", i, got[i], want[i])
		}
		f.wantTime("registry "+want[i].Peer+" UpdatedAt", got[i].UpdatedAt, want[i].UpdatedAt)
	}
}

func registryPutListReplace(f *fixture) {
	if rs := f.registries(); len(rs) != 0 {
		f.Errorf("PeerRegistries on an empty store = %+v", rs)
	}
	f.putRegistry(persistence.PeerRegistry{Peer: peerQ, Frontends: []string{"fe-z", "fe-x"}, UpdatedAt: at(1e9)})
	f.putRegistry(persistence.PeerRegistry{Peer: peerP, Frontends: []string{"fe-y"}, UpdatedAt: base})
	f.wantRegistries(
		persistence.PeerRegistry{Peer: peerP, Frontends: []string{"fe-y"}, UpdatedAt: base},
		persistence.PeerRegistry{Peer: peerQ, Frontends: []string{"fe-x", "fe-z"}, UpdatedAt: at(1e9)},
	)
	// A replace drops what the peer no longer serves; a repeat counts once.
	f.putRegistry(persistence.PeerRegistry{Peer: peerQ, Frontends: []string{"fe-w", "fe-z", "fe-w"}, UpdatedAt: at(time.Hour)})
	f.wantRegistries(
		persistence.PeerRegistry{Peer: peerP, Frontends: []string{"fe-y"}, UpdatedAt: base},
		persistence.PeerRegistry{Peer: peerQ, Frontends: []string{"fe-w", "fe-z"}, UpdatedAt: at(time.Hour)},
	)
}

func registryEmpty(f *fixture) {
	f.putRegistry(persistence.PeerRegistry{Peer: peerP, Frontends: []string{"fe-y"}, UpdatedAt: base})
	f.putRegistry(persistence.PeerRegistry{Peer: peerQ, Frontends: []string{"fe-x"}, UpdatedAt: base})
	f.putRegistry(persistence.PeerRegistry{Peer: peerP, UpdatedAt: at(1e9)})
	f.wantRegistries(persistence.PeerRegistry{Peer: peerQ, Frontends: []string{"fe-x"}, UpdatedAt: base})
}

func registryInvalid(f *fixture) {
	if err := f.store.PutPeerRegistry(f.ctx, persistence.PeerRegistry{Frontends: []string{"fe"}, UpdatedAt: base}); err == nil {
		f.Errorf("PutPeerRegistry without a peer: no error")
	}
	if err := f.store.PutPeerRegistry(f.ctx, persistence.PeerRegistry{Peer: peerP, Frontends: []string{""}, UpdatedAt: base}); err == nil {
		f.Errorf("PutPeerRegistry with an empty frontend name: no error")
	}
	if rs := f.registries(); len(rs) != 0 {
		f.Errorf("PeerRegistries = %+v after invalid puts", rs)
	}
}
