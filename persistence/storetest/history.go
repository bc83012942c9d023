package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func historyCases() []testCase {
	return []testCase{
		{"EntriesKeepTheirAttempt", historyEntriesKeepTheirAttempt},
		{"DeferralsOfAnAttemptFold", historyDeferralsFold},
		{"EntriesKeepTheirResendMark", historyEntriesKeepTheirResendMark},
	}
}

// wantHistoryMarks fails unless id's history entries carry the attempts and
// deferral counts of want, entry by entry (one {attempt, deferrals} each).
func (f *fixture) wantHistoryMarks(id string, want ...[2]int) {
	f.Helper()
	h := f.get(id).History
	got := make([][2]int, len(h))
	for i, e := range h {
		got[i] = [2]int{e.Attempt, e.Deferrals}
	}
	if len(got) != len(want) {
		f.Errorf("message %s: history {attempt, deferrals} %v, want %v: %+v", id, got, want, h)
		return
	}
	for i := range want {
		if got[i] != want[i] {
			f.Errorf("message %s: history {attempt, deferrals} %v, want %v: %+v", id, got, want, h)
			return
		}
	}
}

// historyEntriesKeepTheirAttempt: a delivery outcome's history entry keeps
// the attempt it speaks for (Outcome.Attempt) and whether it was a
// deferral, both where the message's row holds it (the second entry) and
// as a history row (the third and later; persistence.HeldByRow).
func historyEntriesKeepTheirAttempt(f *fixture) {
	f.accept(base, newMsg("hka"))
	f.claimDelivery(feA, ownerA, base, 1)
	f.completeOne(at(1e9), persistence.Outcome{MessageID: "hka", Result: persistence.ResultRetry, RetryAt: at(10e9),
		Detail: "busy", Attempt: 1}, persistence.Applied)
	f.claimDelivery(feA, ownerA, at(10e9), 1)
	f.completeOne(at(11e9), persistence.Outcome{MessageID: "hka", Result: persistence.ResultRetry, RetryAt: at(20e9),
		Detail: "frontend busy", Attempt: 2, Deferred: true, Owner: ownerA}, persistence.Applied)
	f.claimDelivery(feA, ownerA, at(20e9), 1)
	f.completeOne(at(21e9), persistence.Outcome{MessageID: "hka", Result: persistence.ResultDelivered, Detail: "delivered",
		Attempt: 2}, persistence.Applied)
	f.wantHistoryMarks("hka", [2]int{0, 0}, [2]int{1, 0}, [2]int{2, 1}, [2]int{2, 0})

	// A deferral as the second entry, held by the row.
	f.accept(base, newMsg("hkb"))
	f.claimDelivery(feA, ownerA, base, 1)
	f.completeOne(at(1e9), persistence.Outcome{MessageID: "hkb", Result: persistence.ResultRetry, RetryAt: at(10e9),
		Detail: "frontend busy", Attempt: 1, Deferred: true, Owner: ownerA}, persistence.Applied)
	f.wantHistoryMarks("hkb", [2]int{0, 0}, [2]int{1, 1})
	if m := f.get("hkb"); m.State != messages.StateRetry || m.Attempts != 0 {
		f.Errorf("hkb after its deferral: %s at attempt %d, want retry at 0", m.State, m.Attempts)
	}
}

// historyEntriesKeepTheirResendMark: a delivery outcome's history entry
// keeps whether its claim was a resend (Outcome.Resend), where the row
// holds it (the second entry) and as a history row, appended or with a
// deferral folded into it (the folded entry's mark is the last
// deferral's, as its detail is).
func historyEntriesKeepTheirResendMark(f *fixture) {
	f.accept(base, newMsg("hrm"))
	outcome := func(now time.Time, attempt int, deferred, resend bool) {
		f.Helper()
		c := f.claimDelivery(feA, ownerA, now, 1)
		if len(c.Work) != 1 || c.Work[0].Message.Attempts != attempt {
			f.Fatalf("claim at %v: %+v, want hrm at attempt %d", now.Sub(base), c.Work, attempt)
		}
		f.completeOne(now.Add(time.Second), persistence.Outcome{MessageID: "hrm", Result: persistence.ResultRetry,
			RetryAt: now.Add(time.Minute), Detail: fmt.Sprintf("attempt %d, resend %v", attempt, resend),
			Attempt: attempt, Deferred: deferred, Resend: resend, Owner: ownerA}, persistence.Applied)
	}
	want := func(what string, marks ...bool) {
		f.Helper()
		h := f.get("hrm").History
		got := make([]bool, len(h))
		for i, e := range h {
			got[i] = e.Resend
		}
		if fmt.Sprint(got) != fmt.Sprint(marks) {
			f.Errorf("%s: history resend marks %v, want %v: %+v", what, got, marks, h)
		}
	}
	outcome(base, 1, true, false)
	want("a deferral, held by the row", false, false)
	outcome(at(time.Minute), 1, true, true)
	want("a resend's deferral folded into it", false, true)
	outcome(at(2*time.Minute), 1, false, true)
	want("a resend's retry, a history row", false, true, true)
	outcome(at(3*time.Minute), 2, true, false)
	outcome(at(4*time.Minute), 2, true, true)
	want("a resend's deferral folded into a history row", false, true, true, true)
	outcome(at(5*time.Minute), 2, false, false)
	want("a retry", false, true, true, true, false)
}

// historyDeferralsFold: deferrals of the same attempt, one after another,
// leave one history entry that counts them (its time the first's, its
// detail the last's, with the count; LastAt the last's time), whether the
// row holds it (the second entry) or it is a history row; the attempt's
// real outcome, or a deferral of another attempt, adds an entry.
func historyDeferralsFold(f *fixture) {
	f.accept(base, newMsg("hdf"))
	defer1 := func(now time.Time, attempt int, detail string) {
		f.Helper()
		c := f.claimDelivery(feA, ownerA, now, 1)
		if len(c.Work) != 1 || c.Work[0].Message.Attempts != attempt {
			f.Fatalf("claim at %v: %+v, want hdf at attempt %d", now.Sub(base), c.Work, attempt)
		}
		f.completeOne(now.Add(time.Second), persistence.Outcome{MessageID: "hdf", Result: persistence.ResultRetry,
			RetryAt: now.Add(time.Minute), Reason: "busy", Detail: detail, Attempt: attempt, Deferred: true, Owner: ownerA},
			persistence.Applied)
	}
	want := func(i int, e messages.HistoryEntry, lastAt *time.Time) {
		f.Helper()
		h := f.get("hdf").History
		if i >= len(h) {
			f.Fatalf("hdf has %d history entries, want entry %d: %+v", len(h), i, h)
		}
		g := h[i]
		if g.State != e.State || g.Detail != e.Detail || g.Attempt != e.Attempt || g.Deferrals != e.Deferrals {
			f.Errorf("hdf history[%d] = %+v, want %+v", i, g, e)
		}
		if msg := timeDiff(g.At, e.At); msg != "" {
			f.Errorf("hdf history[%d].At: %s", i, msg)
		}
		if (g.LastAt == nil) != (lastAt == nil) || lastAt != nil && timeDiff(*g.LastAt, *lastAt) != "" {
			f.Errorf("hdf history[%d].LastAt = %v, want %v", i, g.LastAt, lastAt)
		}
	}
	// Attempt 1 deferred 4 times: the second entry, held by the row.
	for i := range 4 {
		defer1(at(time.Duration(i)*time.Minute), 1, fmt.Sprintf("not attempted (attempt 1 given back): busy %d", i))
	}
	last := at(3*time.Minute + time.Second)
	want(1, messages.HistoryEntry{State: messages.StateRetry, At: at(time.Second), Attempt: 1, Deferrals: 4,
		Detail: "not attempted (attempt 1 given back): busy 3; deferred 4 times, the last at " + last.UTC().Format(time.RFC3339)}, &last)
	if n := f.historyLen("hdf"); n != 2 {
		f.Errorf("after 4 deferrals of attempt 1: %d history entries, want 2", n)
	}
	// Attempt 1 fails: an entry of its own.
	f.claimDelivery(feA, ownerA, at(4*time.Minute), 1)
	f.completeOne(at(4*time.Minute+time.Second), persistence.Outcome{MessageID: "hdf", Result: persistence.ResultRetry,
		RetryAt: at(5 * time.Minute), Detail: "attempt 1 failed", Attempt: 1}, persistence.Applied)
	// Attempt 2 deferred 3 times: a history row.
	for i := range 3 {
		defer1(at(time.Duration(5+i)*time.Minute), 2, fmt.Sprintf("not attempted (attempt 2 given back): busy %d", i))
	}
	last = at(7*time.Minute + time.Second)
	want(3, messages.HistoryEntry{State: messages.StateRetry, At: at(5*time.Minute + time.Second), Attempt: 2, Deferrals: 3,
		Detail: "not attempted (attempt 2 given back): busy 2; deferred 3 times, the last at " + last.UTC().Format(time.RFC3339)}, &last)
	if m := f.get("hdf"); len(m.History) != 4 || m.LastDetail != m.History[3].Detail || m.Attempts != 1 {
		f.Errorf("after 3 deferrals of attempt 2: %d history entries, attempts %d, last detail %q; want 4, 1, the folded entry's",
			len(m.History), m.Attempts, m.LastDetail)
	}
	// A claim of attempt 2 leaves no verdict; attempt 3's deferral is an
	// entry of its own, and so is its delivery.
	f.claimDelivery(feA, ownerA, at(8*time.Minute), 1)
	defer1(at(8*time.Minute+lease+time.Second), 3, "not attempted (attempt 3 given back): busy")
	f.claimDelivery(feA, ownerA, at(10*time.Minute+lease), 1)
	f.completeOne(at(10*time.Minute+lease+time.Second), persistence.Outcome{MessageID: "hdf", Result: persistence.ResultDelivered,
		Detail: "delivered", Attempt: 3}, persistence.Applied)
	f.wantHistoryMarks("hdf", [2]int{0, 0}, [2]int{1, 4}, [2]int{1, 0}, [2]int{2, 3}, [2]int{3, 1}, [2]int{3, 0})
	want(4, messages.HistoryEntry{State: messages.StateRetry, At: at(8*time.Minute + lease + 2*time.Second), Attempt: 3, Deferrals: 1,
		Detail: "not attempted (attempt 3 given back): busy"}, nil)
}

// FoldWithinATransaction checks what store s writes when a deferral folds
// into an entry the same transaction appended as a history row: the
// decision core allows it (persistence.TestDeferralsFoldWithinATransaction),
// though no call of the Store reaches it today, so each store's own test
// runs it in its transaction: inTx loads message id in a write transaction
// of s at now, calls decide with what it loaded, and writes the changes.
// The folded entry must keep its count and its last_at. s has a pull
// frontend named target.
func FoldWithinATransaction(t testing.TB, s persistence.Store, target string,
	inTx func(now time.Time, id string, decide func(*persistence.Loaded, *persistence.Changes)) error) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Accept(ctx, base, []persistence.NewMessage{{ID: "fwt", SourceMSISDN: "+15550100",
		DestinationMSISDN: "+447700900123", Body: "b", SourceSMSC: "in", DestSMSC: "out", Frontend: target,
		State: messages.StatePending, Detail: "accepted",
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: target, DueAt: base}}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ { // attempts 1 and 2 fail: history rows up to ordinal 3
		now := base.Add(time.Duration(i) * time.Hour)
		c, err := s.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: target, Owner: "o",
			Limit: 1, Now: now, Lease: time.Minute})
		if err != nil || len(c.Work) != 1 {
			t.Fatalf("claim %d: %+v %v", i, c, err)
		}
		r, err := s.CompleteWork(ctx, now.Add(time.Second), []persistence.Outcome{{Kind: persistence.WorkDelivery, Target: target,
			MessageID: "fwt", Result: persistence.ResultRetry, RetryAt: now.Add(time.Minute), Detail: "attempt failed", Attempt: i}})
		if err != nil || r[0] != persistence.Applied {
			t.Fatalf("complete %d: %v %v", i, r, err)
		}
	}
	now := base.Add(10 * time.Hour)
	deferral := messages.HistoryEntry{Detail: "not attempted (attempt 3 given back): busy", Attempt: 3, Deferrals: 1}
	if err := inTx(now, "fwt", func(l *persistence.Loaded, c *persistence.Changes) {
		m := l.Rows["fwt"]
		c.MoveWith(l, m, messages.StateRetry, deferral)
		c.MoveWith(l, m, messages.StateRetry, deferral)
	}); err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMessage(ctx, "fwt")
	if err != nil {
		t.Fatal(err)
	}
	if e := m.History[len(m.History)-1]; e.Deferrals != 2 || e.LastAt == nil || !e.LastAt.Equal(norm(now)) {
		t.Errorf("the folded entry written: deferrals %d, last_at %v; want 2 and %v (its detail: %q)", e.Deferrals, e.LastAt, norm(now), e.Detail)
	}
}
