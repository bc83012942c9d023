package storetest

import (
	"fmt"
	"sort"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func expireCases() []testCase {
	return []testCase{
		{"OnlyPendingAndRetry", expireOnlyPendingAndRetry},
		{"OnlySubmittedBeforeCutoff", expireOnlyBeforeCutoff},
		{"NeverWhileWorkIsLeased", expireNeverWhileLeased},
		{"LimitBoundsOneCall", expireLimit},
		{"ExpiredMessagesAreFailed", expireFailsMessages},
		{"ResubmitRestartsValidity", expireAfterResubmit},
	}
}

// day is the validity the expiry tests pretend to use.
const day = 24 * time.Hour

func expireOnlyPendingAndRetry(f *fixture) {
	q := newMsg("ex-queued")
	q.State = messages.StateForwardQueued
	q.Work = &persistence.WorkSpec{Kind: persistence.WorkForward, Target: peerP, DueAt: base}
	ff := msgNoWork("ex-ffailed")
	ff.State = messages.StateForwardFailed
	f.accept(base, newMsg("ex-pending"), newMsg("ex-retry"), newMsg("ex-delivered"), newMsg("ex-failed"), q, ff, msgNoWork("ex-nowork"))
	f.retry(at(1e9), "ex-retry", at(time.Minute))
	f.deliver(at(1e9), "ex-delivered")
	f.fail(at(1e9), "ex-failed")

	got := f.expire(persistence.ExpireRequest{Now: at(2 * day), SubmittedBefore: at(day), Limit: 100})
	ids := messageIDs(got)
	sort.Strings(ids)
	f.wantIDs("expired", ids, "ex-nowork", "ex-pending", "ex-retry")
	f.wantState("ex-delivered", messages.StateDelivered)
	f.wantState("ex-failed", messages.StateFailed)
	if r := f.get("ex-failed").Reason; r != messages.ReasonRejected {
		f.Errorf("ex-failed reason changed to %q", r)
	}
	f.wantState("ex-queued", messages.StateForwardQueued)
	f.wantState("ex-ffailed", messages.StateForwardFailed)
	if again := f.expire(persistence.ExpireRequest{Now: at(2 * day), SubmittedBefore: at(day), Limit: 100}); len(again) != 0 {
		f.Errorf("second call expired %q again", messageIDs(again))
	}
}

func expireOnlyBeforeCutoff(f *fixture) {
	f.accept(base, newMsg("ex-old"))
	f.accept(at(time.Hour), newMsg("ex-edge"))
	f.accept(at(2*time.Hour), newMsg("ex-young"))
	got := f.expire(persistence.ExpireRequest{Now: at(3 * time.Hour), SubmittedBefore: at(time.Hour), Limit: 10})
	f.wantIDs("expired (cutoff = ex-edge's submitted_at, exclusive)", messageIDs(got), "ex-old")
	f.wantState("ex-edge", messages.StatePending)
	f.wantState("ex-young", messages.StatePending)
}

func expireNeverWhileLeased(f *fixture) {
	f.accept(base, newMsg("ex-leased"), msgDue("ex-free", at(day)))
	f.claimDelivery(feA, ownerA, base, 10) // ex-leased until base+1h
	got := f.expire(persistence.ExpireRequest{Now: at(30 * time.Minute), SubmittedBefore: at(time.Minute), Limit: 10})
	f.wantIDs("expired while ex-leased is leased", messageIDs(got), "ex-free")
	f.wantState("ex-leased", messages.StatePending)
	f.wantIDs("ex-leased's work is still there, leased", workIDs(f.claimDelivery(feA, ownerB, at(lease), 10).Work), "ex-leased")
	// Leased again by B until base+2h; expire after that lease ended.
	got = f.expire(persistence.ExpireRequest{Now: at(2 * lease), SubmittedBefore: at(time.Minute), Limit: 10})
	f.wantIDs("expired after the lease ended", messageIDs(got), "ex-leased")
}

func expireLimit(f *fixture) {
	var batch []persistence.NewMessage
	for i := range 5 {
		batch = append(batch, newMsg(fmt.Sprintf("exl-%d", i)))
	}
	f.accept(base, batch...)
	seen := map[string]bool{}
	for _, want := range []int{2, 2, 1, 0} {
		got := f.expire(persistence.ExpireRequest{Now: at(2 * day), SubmittedBefore: at(day), Limit: 2})
		if len(got) != want {
			f.Fatalf("ExpireMessages(limit 2) returned %d, want %d", len(got), want)
		}
		for _, m := range got {
			if seen[m.ID] {
				f.Errorf("%s expired twice", m.ID)
			}
			seen[m.ID] = true
		}
	}
	if st := f.stats(); st.ByState[messages.StateFailed] != 5 || st.DLQDepth != 5 {
		f.Errorf("failed %d, DLQDepth %d; want 5 and 5", st.ByState[messages.StateFailed], st.DLQDepth)
	}
}

func expireFailsMessages(f *fixture) {
	f.accept(base, newMsg("exf"))
	f.claimDelivery(feA, ownerA, base, 1)
	f.retry(at(time.Minute), "exf", at(2*time.Minute))
	now := at(2*day + 7)
	got := f.expire(persistence.ExpireRequest{Now: now, SubmittedBefore: at(day), Limit: 10})
	if len(got) != 1 {
		f.Fatalf("expired %d messages, want 1", len(got))
	}
	want := expected(newMsg("exf"), base)
	want.State, want.Reason, want.Attempts, want.UpdatedAt = messages.StateFailed, messages.ReasonExpired, 1, norm(now)
	f.checkMessage("returned", got[0], want)
	f.checkMessage("stored", f.get("exf"), want)
	h := f.get("exf").History
	if len(h) != 3 || h[2].State != messages.StateFailed {
		f.Errorf("history = %+v, want pending, retry, failed", h)
	} else {
		f.wantTime("history At", h[2].At, now)
	}
	e := f.ledger("exf", feA)
	if e.Result != persistence.ResultFailed {
		f.Errorf("Ledger = %+v, want result failed", e)
	}
	f.wantTime("Ledger.At", e.At, now)
	f.wantOutbox(0)
	if c := f.claimDelivery(feA, ownerB, at(3*day), 10); len(c.Work) != 0 || !c.NextDue.IsZero() {
		f.Errorf("expired work still in the outbox: %q, NextDue %v", workIDs(c.Work), c.NextDue)
	}
	if d := f.stats().DLQDepth; d != 1 {
		f.Errorf("DLQDepth = %d, want 1", d)
	}
}

func expireAfterResubmit(f *fixture) {
	f.accept(base, newMsg("exr"))
	f.fail(at(time.Minute), "exr")
	f.resubmit(at(2*day), persistence.Reroute{ID: "exr", Frontend: feA, State: messages.StatePending, Detail: "again",
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: feA, DueAt: at(2 * day)}})
	got := f.expire(persistence.ExpireRequest{Now: at(2*day + time.Hour), SubmittedBefore: at(day + time.Hour), Limit: 10})
	if len(got) != 0 {
		f.Errorf("expired %q: validity counts from the resubmit", messageIDs(got))
	}
	got = f.expire(persistence.ExpireRequest{Now: at(3*day + time.Hour), SubmittedBefore: at(2*day + time.Minute), Limit: 10})
	f.wantIDs("expired a day after the resubmit", messageIDs(got), "exr")
}
