package storetest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func claimWorkCases() []testCase {
	return []testCase{
		{"OnlyDueRows", claimOnlyDueRows},
		{"DueAtEqualToNowIsDue", claimDueAtEqualNow},
		{"LimitRespected", claimLimitRespected},
		{"OrderedByDueAtThenID", claimOrdered},
		{"WorkFieldsAndLease", claimWorkFieldsAndLease},
		{"LeasedRowNotClaimableUntilLeaseEnds", claimLeasedUntilLeaseEnds},
		{"AttemptsCountEachClaim", claimAttemptsCountEachClaim},
		{"OnlyDeliveryWorkCountsAttempts", claimOnlyDeliveryCountsAttempts},
		{"NextDueZeroWhenNothingIsLeft", claimNextDueZero},
		{"NextDueIsEarliestDueAt", claimNextDueEarliestDue},
		{"NextDueIsLeaseEnd", claimNextDueLeaseEnd},
		{"NextDueCountsRowsLeftByLimit", claimNextDueRowsLeftByLimit},
		{"KindsAndTargetsIsolated", claimKindsAndTargetsIsolated},
		{"LedgeredWorkNeverReturned", claimLedgeredWorkNeverReturned},
		{"InvalidRequestIsError", claimInvalidRequest},
	}
}

func claimOnlyDueRows(f *fixture) {
	f.accept(base, msgDue("due-0", base), msgDue("due-1", at(60e9)), msgDue("due-2", at(120e9)))
	c := f.claimDelivery(feA, ownerA, at(60e9), 10)
	f.wantIDs("ClaimWork at +1m", workIDs(c.Work), "due-0", "due-1")
	f.wantTime("NextDue", c.NextDue, at(120e9))
	for _, w := range c.Work {
		if w.DueAt.After(norm(at(60e9))) {
			f.Errorf("claimed %s due at %v, after Now", w.MessageID, w.DueAt)
		}
	}
}

func claimDueAtEqualNow(f *fixture) {
	due := at(30e9 + 1234) // the store keeps it at microseconds; Now is the same instant
	f.accept(base, msgDue("due-eq", due))
	c := f.claimDelivery(feA, ownerA, norm(due), 1)
	f.wantIDs("ClaimWork at due_at", workIDs(c.Work), "due-eq")
}

func claimLimitRespected(f *fixture) {
	var batch []persistence.NewMessage
	for i := range 5 {
		batch = append(batch, newMsg(fmt.Sprintf("lim-%d", i)))
	}
	f.accept(base, batch...)
	seen := map[string]bool{}
	for _, want := range []int{2, 2, 1, 0} {
		c := f.claimDelivery(feA, ownerA, base, 2)
		if len(c.Work) != want {
			f.Fatalf("ClaimWork(limit 2) returned %d rows, want %d", len(c.Work), want)
		}
		for _, w := range c.Work {
			if seen[w.MessageID] {
				f.Errorf("%s claimed twice while leased", w.MessageID)
			}
			seen[w.MessageID] = true
		}
	}
}

func claimOrdered(f *fixture) {
	// Accepted in an order that is neither due order nor reverse.
	f.accept(base, msgDue("ord-c", at(3e9)), msgDue("ord-a1", at(1e9)))
	f.accept(base, msgDue("ord-b", at(2e9)), msgDue("ord-a2", at(1e9)))
	f.accept(base, msgDue("ord-d", at(4e9)))
	c := f.claimDelivery(feA, ownerA, at(10e9), 10)
	if len(c.Work) != 5 {
		f.Fatalf("claimed %d rows, want 5", len(c.Work))
	}
	sorted := sort.SliceIsSorted(c.Work, func(i, j int) bool {
		a, b := c.Work[i], c.Work[j]
		if !a.DueAt.Equal(b.DueAt) {
			return a.DueAt.Before(b.DueAt)
		}
		return a.ID < b.ID
	})
	if !sorted {
		f.Errorf("work not ordered by due_at, then id: %+v", c.Work)
	}
	for i := 1; i < len(c.Work); i++ {
		if c.Work[i].ID == c.Work[i-1].ID {
			f.Errorf("two rows with id %d", c.Work[i].ID)
		}
	}
	if got := c.Work[4].MessageID; got != "ord-d" {
		f.Errorf("last claimed %s, want ord-d", got)
	}
	if got := c.Work[2].MessageID; got != "ord-b" {
		f.Errorf("third claimed %s, want ord-b", got)
	}

	// Under a limit, the earliest rows are the ones taken.
	f.releaseAll(ownerA)
	c = f.claimDelivery(feA, ownerB, at(10e9), 2)
	f.wantIDSet("first two by due_at", workIDs(c.Work), "ord-a1", "ord-a2")
	c = f.claimDelivery(feA, ownerB, at(10e9), 2)
	f.wantIDs("next two by due_at", workIDs(c.Work), "ord-b", "ord-c")
	c = f.claimDelivery(feA, ownerB, at(10e9), 2)
	f.wantIDs("last by due_at", workIDs(c.Work), "ord-d")
}

// releaseAll ends owner's leases, failing the test on error.
func (f *fixture) releaseAll(owner string) {
	f.Helper()
	if _, err := f.store.ReleaseLeases(f.ctx, owner); err != nil {
		f.Fatalf("ReleaseLeases(%s): %v", owner, err)
	}
}

func claimWorkFieldsAndLease(f *fixture) {
	f.accept(base, newMsg("fields"))
	now := at(5e9 + 777)
	c := f.claim(persistence.ClaimRequest{
		Kind: persistence.WorkDelivery, Target: feA, Owner: ownerB, Limit: 1, Now: now, Lease: 90 * time.Second,
	})
	if len(c.Work) != 1 {
		f.Fatalf("claimed %d rows, want 1", len(c.Work))
	}
	w := c.Work[0]
	if w.ID == 0 || w.Kind != persistence.WorkDelivery || w.Target != feA || w.MessageID != "fields" || w.Token != messages.TokenOf("fields") {
		f.Errorf("work = %+v", w)
	}
	if w.LeaseOwner != ownerB {
		f.Errorf("LeaseOwner = %q, want %q", w.LeaseOwner, ownerB)
	}
	f.wantTime("LeaseUntil", w.LeaseUntil, now.Add(90*time.Second))
	f.wantTime("DueAt", w.DueAt, base)
	f.wantTime("CreatedAt", w.CreatedAt, base)
	want := expected(newMsg("fields"), base)
	want.Attempts = 1
	f.checkMessage("Work.Message", w.Message, want)
	if !c.NextDue.IsZero() {
		f.Errorf("NextDue = %v, want zero (the only row was claimed)", c.NextDue)
	}
}

func claimLeasedUntilLeaseEnds(f *fixture) {
	f.accept(base, newMsg("lease"))
	if c := f.claimDelivery(feA, ownerA, base, 1); len(c.Work) != 1 {
		f.Fatalf("first claim returned %d rows", len(c.Work))
	}
	for _, now := range []time.Time{base, at(30 * 60e9), at(lease - time.Microsecond)} {
		c := f.claimDelivery(feA, ownerB, now, 10)
		if len(c.Work) != 0 {
			f.Errorf("ClaimWork at %v while leased returned %q", now, workIDs(c.Work))
		}
		f.wantTime("NextDue while leased", c.NextDue, at(lease))
	}
	c := f.claimDelivery(feA, ownerB, at(lease), 10)
	f.wantIDs("ClaimWork at lease end", workIDs(c.Work), "lease")
	if len(c.Work) == 1 {
		if c.Work[0].LeaseOwner != ownerB {
			f.Errorf("LeaseOwner = %q, want %q", c.Work[0].LeaseOwner, ownerB)
		}
		f.wantTime("LeaseUntil", c.Work[0].LeaseUntil, at(2*lease))
		if c.Work[0].Message.Attempts != 2 {
			f.Errorf("Attempts = %d after the second claim, want 2", c.Work[0].Message.Attempts)
		}
	}
}

func claimAttemptsCountEachClaim(f *fixture) {
	f.accept(base, newMsg("att"))
	if n := f.get("att").Attempts; n != 0 {
		f.Errorf("Attempts = %d before any claim, want 0", n)
	}
	for i := 1; i <= 3; i++ {
		now := at(time.Duration(i-1) * lease)
		c := f.claimDelivery(feA, ownerA, now, 1)
		if len(c.Work) != 1 {
			f.Fatalf("claim %d returned %d rows", i, len(c.Work))
		}
		if got := c.Work[0].Message.Attempts; got != i {
			f.Errorf("claim %d: Work.Message.Attempts = %d, want %d", i, got, i)
		}
		if got := f.get("att").Attempts; got != i {
			f.Errorf("claim %d: stored Attempts = %d, want %d", i, got, i)
		}
	}
}

func claimOnlyDeliveryCountsAttempts(f *fixture) {
	f.accept(base, msgFor("fwd", persistence.WorkForward, peerP), msgFor("sts", persistence.WorkStatus, peerP))
	for _, kind := range []persistence.WorkKind{persistence.WorkForward, persistence.WorkStatus} {
		c := f.claim(persistence.ClaimRequest{Kind: kind, Target: peerP, Owner: ownerA, Limit: 10, Now: base, Lease: lease})
		if len(c.Work) != 1 {
			f.Fatalf("%s claim returned %d rows, want 1", kind, len(c.Work))
		}
		if c.Work[0].Message.Attempts != 0 || f.get(c.Work[0].MessageID).Attempts != 0 {
			f.Errorf("%s claim counted an attempt (attempts counts delivery claims only)", kind)
		}
		if c.Work[0].Message.ID != c.Work[0].MessageID {
			f.Errorf("%s claim: Work.Message is %q, want %q", kind, c.Work[0].Message.ID, c.Work[0].MessageID)
		}
	}
}

func claimNextDueZero(f *fixture) {
	c := f.claimDelivery(feA, ownerA, base, 10)
	if len(c.Work) != 0 || !c.NextDue.IsZero() {
		f.Errorf("empty outbox: %q, NextDue %v; want nothing, zero", workIDs(c.Work), c.NextDue)
	}
	f.accept(base, newMsg("nd-0"))
	f.deliver(at(1e9), "nd-0")
	if c := f.claimDelivery(feA, ownerA, at(2e9), 10); !c.NextDue.IsZero() {
		f.Errorf("after the only row was completed: NextDue %v, want zero", c.NextDue)
	}
}

func claimNextDueEarliestDue(f *fixture) {
	f.accept(base, msgDue("ne-3", at(180e9)), msgDue("ne-1", at(60e9)), msgDue("ne-2", at(120e9)))
	c := f.claimDelivery(feA, ownerA, base, 10)
	if len(c.Work) != 0 {
		f.Fatalf("claimed %q before anything was due", workIDs(c.Work))
	}
	f.wantTime("NextDue", c.NextDue, at(60e9))
	c = f.claimDelivery(feA, ownerA, at(60e9), 10)
	f.wantIDs("claim at +1m", workIDs(c.Work), "ne-1")
	f.wantTime("NextDue after the claim", c.NextDue, at(120e9))
}

func claimNextDueLeaseEnd(f *fixture) {
	f.accept(base, newMsg("nl-1"), msgDue("nl-2", at(2*lease)))
	f.claim(persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA, Limit: 1, Now: base, Lease: 10 * time.Minute})
	c := f.claimDelivery(feA, ownerB, at(time.Minute), 10)
	if len(c.Work) != 0 {
		f.Fatalf("claimed %q", workIDs(c.Work))
	}
	f.wantTime("NextDue (a lease ends before the other row is due)", c.NextDue, at(10*time.Minute))
}

func claimNextDueRowsLeftByLimit(f *fixture) {
	f.accept(base, msgDue("nr-1", base), msgDue("nr-2", at(1e9)), msgDue("nr-3", at(2e9)))
	c := f.claimDelivery(feA, ownerA, at(5e9), 1)
	f.wantIDs("claim", workIDs(c.Work), "nr-1")
	f.wantTime("NextDue (rows left by Limit are due already)", c.NextDue, at(1e9))
}

func claimKindsAndTargetsIsolated(f *fixture) {
	f.accept(base,
		msgFor("iso-da", persistence.WorkDelivery, feA),
		msgFor("iso-db", persistence.WorkDelivery, feB),
		msgFor("iso-fa", persistence.WorkForward, feA),
		msgFor("iso-sa", persistence.WorkStatus, feA),
	)
	type key struct {
		kind   persistence.WorkKind
		target string
	}
	want := map[key]string{
		{persistence.WorkDelivery, feA}: "iso-da",
		{persistence.WorkDelivery, feB}: "iso-db",
		{persistence.WorkForward, feA}:  "iso-fa",
		{persistence.WorkStatus, feA}:   "iso-sa",
		{persistence.WorkForward, feB}:  "",
	}
	for k, id := range want {
		c := f.claim(persistence.ClaimRequest{Kind: k.kind, Target: k.target, Owner: ownerA, Limit: 10, Now: base, Lease: lease})
		var wantIDs []string
		if id != "" {
			wantIDs = []string{id}
		}
		f.wantIDs(fmt.Sprintf("claim %s/%s", k.kind, k.target), workIDs(c.Work), wantIDs...)
		if !c.NextDue.IsZero() {
			f.Errorf("claim %s/%s: NextDue %v counts another kind or target's row", k.kind, k.target, c.NextDue)
		}
	}
}

// seed writes a ledger entry through the store's LedgerSeeder.
func (f *fixture) seed(e persistence.LedgerEntry) {
	f.Helper()
	seeder, ok := f.store.(LedgerSeeder)
	if !ok {
		f.Fatalf("storetest: the store from open (%T) does not implement storetest.LedgerSeeder; "+
			"wrap it in the driver's test (see LedgerSeeder)", f.store)
	}
	if err := seeder.SeedLedger(f.ctx, e); err != nil {
		f.Fatalf("SeedLedger: %v", err)
	}
}

func claimLedgeredWorkNeverReturned(f *fixture) {
	f.accept(base, newMsg("lw-done"), newMsg("lw-open"))
	f.seed(persistence.LedgerEntry{
		MessageID: "lw-done", Kind: persistence.WorkDelivery, Target: feA, Result: persistence.ResultDelivered, At: base, Detail: "seeded",
	})
	c := f.claimDelivery(feA, ownerA, base, 10)
	f.wantIDs("claim", workIDs(c.Work), "lw-open")
	if !c.NextDue.IsZero() {
		f.Errorf("NextDue = %v, want zero: the ledgered row is gone and the other is claimed", c.NextDue)
	}
	f.wantOutbox(1)
	c = f.claimDelivery(feA, ownerA, at(lease), 10)
	f.wantIDs("claim after the lease", workIDs(c.Work), "lw-open")
	if n := f.get("lw-done").Attempts; n != 0 {
		f.Errorf("the ledgered message counts %d attempts, want 0", n)
	}
}

func claimInvalidRequest(f *fixture) {
	f.accept(base, newMsg("inv"))
	good := persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA, Limit: 1, Now: base, Lease: lease}
	bad := map[string]func(r *persistence.ClaimRequest){
		"unknown kind":   func(r *persistence.ClaimRequest) { r.Kind = "teleport" },
		"empty target":   func(r *persistence.ClaimRequest) { r.Target = "" },
		"empty owner":    func(r *persistence.ClaimRequest) { r.Owner = "" },
		"zero limit":     func(r *persistence.ClaimRequest) { r.Limit = 0 },
		"negative limit": func(r *persistence.ClaimRequest) { r.Limit = -1 },
		"zero lease":     func(r *persistence.ClaimRequest) { r.Lease = 0 },
	}
	for name, mutate := range bad {
		r := good
		mutate(&r)
		if r.Validate() == nil {
			f.Fatalf("%s: ClaimRequest.Validate accepts it; the suite is wrong", name)
		}
		if c, err := f.store.ClaimWork(f.ctx, r); err == nil {
			f.Errorf("ClaimWork with %s: no error (claimed %q)", name, workIDs(c.Work))
		}
	}
	f.wantIDs("a valid claim after the invalid ones", workIDs(f.claim(good).Work), "inv")
}

func completeWorkCases() []testCase {
	return []testCase{
		{"DeliveredIsRecorded", completeDelivered},
		{"FailedDeadLetters", completeFailed},
		{"RetryReschedulesUnleased", completeRetry},
		{"SecondOutcomeIsAlreadyRecorded", completeSecondOutcome},
		{"RepeatInOneCallIsAlreadyRecorded", completeRepeatInOneCall},
		{"RepeatedRetryOfAnAttemptIsAlreadyRecorded", completeRepeatedRetry},
		{"RetryOfAttemptReleasedAtRestartIsApplied", completeRetryAfterRelease},
		{"DeferredRetryGivesBackItsAttempt", completeDeferredRetry},
		{"DeferralOfAnotherOwnersClaimIsStale", completeDeferralOfAnotherClaim},
		{"DeferralOfTheOwnersEarlierClaimIsStale", completeDeferralOfAnEarlierClaim},
		{"ResentDeferralAckOfTheFirstAttemptIsAlreadyRecorded", completeResentFirstDeferralAck},
		{"UnknownMessageIsNoWork", completeUnknownMessage},
		{"MessageWithoutWorkIsNoWork", completeMessageWithoutWork},
		{"OtherKindOrTargetIsNoWork", completeOtherKindOrTarget},
		{"FinalMessageIsAlreadyRecorded", completeFinalMessage},
		{"OtherTargetsFinalMessageIsNoWork", completeOtherTargetsFinalMessage},
		{"SeveralOutcomesInInputOrder", completeSeveralInOrder},
		{"EmptyCall", completeEmpty},
		{"TextIsStoredClean", completeTextIsStoredClean},
	}
}

// completeTextIsStoredClean: a reason and a detail from outside (a
// webhook's error body cut at 256 bytes inside a character, with a NUL; a
// frontend's reason past the bound) are stored as persistence.CleanText
// makes them, by both stores alike. Postgres refused them raw (SQLSTATE
// 22021), and the round that held them was retried for ever.
func completeTextIsStoredClean(f *fixture) {
	f.accept(base, newMsg("ctext-f"), newMsg("ctext-r"))
	f.claimDelivery(feA, ownerA, base, 10)
	cut := "HTTP 503: " + strings.Repeat("a", 245) + "\xc3" // 256 bytes, the last half of an é
	long := "rejected by fe: " + strings.Repeat("é\x00", 700)
	f.completeOne(at(1e9), persistence.Outcome{MessageID: "ctext-f", Result: persistence.ResultFailed,
		Reason: "rejected: " + cut, Detail: long}, persistence.Applied)
	f.completeOne(at(1e9), persistence.Outcome{MessageID: "ctext-r", Result: persistence.ResultRetry,
		RetryAt: at(60e9), Reason: cut, Detail: "attempt 1 failed: " + cut + "\x00\n"}, persistence.Applied)
	for _, c := range []struct{ id, reason, detail string }{
		{"ctext-f", "rejected: " + cut, long},
		{"ctext-r", "", "attempt 1 failed: " + cut + "\x00\n"},
	} {
		m := f.get(c.id)
		if want := persistence.CleanText(c.reason); m.Reason != want {
			f.Errorf("%s: reason %q, want %q", c.id, m.Reason, want)
		}
		d := f.lastHistory(c.id).Detail
		if want := persistence.CleanText(c.detail); d != want {
			f.Errorf("%s: history detail %q, want %q", c.id, d, want)
		}
		if !utf8.ValidString(d) || strings.ContainsRune(d, 0) || len(d) > persistence.MaxTextBytes {
			f.Errorf("%s: history detail of %d bytes is not clean: %q", c.id, len(d), d)
		}
	}
	if e := f.ledger("ctext-f", feA); e.Detail != persistence.CleanText(long) {
		f.Errorf("ledger detail %q, want the clean text", e.Detail)
	}
}

func completeDelivered(f *fixture) {
	f.accept(base, newMsg("cd"))
	f.claimDelivery(feA, ownerA, at(1e9), 1)
	done := at(2e9 + 5)
	f.completeOne(done, persistence.Outcome{MessageID: "cd", Result: persistence.ResultDelivered, Detail: "frontend ack"}, persistence.Applied)
	want := expected(newMsg("cd"), base)
	want.State, want.Attempts, want.UpdatedAt = messages.StateDelivered, 1, norm(done)
	f.checkMessage("after Delivered", f.get("cd"), want)
	f.checkHistory("cd",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateDelivered, At: done, Detail: "frontend ack"},
	)
	e := f.ledger("cd", feA)
	if e.MessageID != "cd" || e.Target != feA || e.Result != persistence.ResultDelivered || e.Detail != "frontend ack" {
		f.Errorf("Ledger = %+v", e)
	}
	f.wantTime("Ledger.At", e.At, done)
	f.wantOutbox(0)
	if c := f.claimDelivery(feA, ownerB, at(3*lease), 10); len(c.Work) != 0 || !c.NextDue.IsZero() {
		f.Errorf("delivered work still claimable: %q, NextDue %v", workIDs(c.Work), c.NextDue)
	}
}

func completeFailed(f *fixture) {
	f.accept(base, newMsg("cf"), newMsg("cf-other"))
	f.claimDelivery(feA, ownerA, base, 10)
	f.completeOne(at(1e9), persistence.Outcome{
		MessageID: "cf", Result: persistence.ResultFailed, Reason: messages.ReasonRejected, Detail: "frontend said 400",
	}, persistence.Applied)
	want := expected(newMsg("cf"), base)
	want.State, want.Reason, want.Attempts, want.UpdatedAt = messages.StateFailed, messages.ReasonRejected, 1, norm(at(1e9))
	f.checkMessage("after Failed", f.get("cf"), want)
	f.checkHistory("cf",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateFailed, At: at(1e9), Detail: "frontend said 400"},
	)
	e := f.ledger("cf", feA)
	if e.Result != persistence.ResultFailed || e.Detail != "frontend said 400" {
		f.Errorf("Ledger = %+v, want result failed", e)
	}
	f.wantTime("Ledger.At", e.At, at(1e9))
	st := f.stats()
	if st.DLQDepth != 1 || st.OutboxDepth != 1 {
		f.Errorf("DLQDepth %d, OutboxDepth %d; want 1 and 1", st.DLQDepth, st.OutboxDepth)
	}
	f.fail(at(2e9), "cf-other")
	if got := f.stats().DLQDepth; got != 2 {
		f.Errorf("DLQDepth = %d, want 2", got)
	}
	f.wantOutbox(0)
}

func completeRetry(f *fixture) {
	f.accept(base, newMsg("cr"))
	f.claimDelivery(feA, ownerA, base, 1) // leased until base+1h
	retryAt := at(time.Minute)
	f.completeOne(at(10e9), persistence.Outcome{MessageID: "cr", Result: persistence.ResultRetry, RetryAt: retryAt, Detail: "503"}, persistence.Applied)
	want := expected(newMsg("cr"), base)
	want.State, want.Attempts, want.UpdatedAt = messages.StateRetry, 1, norm(at(10e9))
	f.checkMessage("after Retry", f.get("cr"), want)
	f.checkHistory("cr",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateRetry, At: at(10e9), Detail: "503"},
	)
	f.noLedger("cr", feA)
	f.wantOutbox(1)
	c := f.claimDelivery(feA, ownerB, at(30e9), 10)
	if len(c.Work) != 0 {
		f.Errorf("claimable before RetryAt: %q", workIDs(c.Work))
	}
	f.wantTime("NextDue", c.NextDue, retryAt)
	// At RetryAt, well inside the first lease: claimable only if Retry
	// dropped the lease.
	c = f.claimDelivery(feA, ownerB, retryAt, 10)
	f.wantIDs("claim at RetryAt", workIDs(c.Work), "cr")
	if len(c.Work) == 1 {
		f.wantTime("DueAt", c.Work[0].DueAt, retryAt)
		if c.Work[0].LeaseOwner != ownerB || c.Work[0].Message.Attempts != 2 {
			f.Errorf("reclaimed work: owner %q attempts %d, want %q and 2", c.Work[0].LeaseOwner, c.Work[0].Message.Attempts, ownerB)
		}
	}
	// A retry of a retry keeps the message in retry and appends history.
	f.retry(at(90e9), "cr", at(5*time.Minute))
	if n := f.historyLen("cr"); n != 3 {
		f.Errorf("history has %d entries after two retries, want 3", n)
	}
}

func completeSecondOutcome(f *fixture) {
	f.accept(base, newMsg("c2"))
	f.deliver(at(1e9), "c2")
	for _, r := range []persistence.Result{persistence.ResultFailed, persistence.ResultRetry, persistence.ResultDelivered} {
		f.completeOne(at(2e9), persistence.Outcome{MessageID: "c2", Result: r, RetryAt: at(3e9), Reason: messages.ReasonRejected, Detail: "late ack"}, persistence.AlreadyRecorded)
	}
	want := expected(newMsg("c2"), base)
	want.State, want.UpdatedAt = messages.StateDelivered, norm(at(1e9))
	f.checkMessage("after late outcomes", f.get("c2"), want)
	if n := f.historyLen("c2"); n != 2 {
		f.Errorf("history has %d entries, want 2", n)
	}
	e := f.ledger("c2", feA)
	if e.Result != persistence.ResultDelivered || e.Detail != "delivered" {
		f.Errorf("ledger changed: %+v", e)
	}
	f.wantTime("Ledger.At", e.At, at(1e9))
	st := f.stats()
	if st.OutboxDepth != 0 || st.DLQDepth != 0 {
		f.Errorf("OutboxDepth %d DLQDepth %d, want 0 and 0", st.OutboxDepth, st.DLQDepth)
	}
}

func completeRepeatInOneCall(f *fixture) {
	f.accept(base, newMsg("c1"))
	got := f.complete(at(1e9),
		persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: "c1", Result: persistence.ResultDelivered, Detail: "first"},
		persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: "c1", Result: persistence.ResultFailed, Reason: messages.ReasonRejected, Detail: "second"},
	)
	if got[0] != persistence.Applied || got[1] != persistence.AlreadyRecorded {
		f.Errorf("completions = %v, want [applied already_recorded]", got)
	}
	f.wantState("c1", messages.StateDelivered)
	if n := f.historyLen("c1"); n != 2 {
		f.Errorf("history has %d entries, want 2", n)
	}
	if e := f.ledger("c1", feA); e.Detail != "first" {
		f.Errorf("ledger = %+v, want the first outcome", e)
	}
}

// completeRepeatedRetry: a pull frontend's retry ack sent again for the
// same attempt (its HTTP client resent it, the first answer lost) is
// already_recorded and changes nothing: not the due time (a later RetryAt
// pushed the next attempt back), not the history, not the attempts. A
// repeat in the same call is already_recorded too. The next attempt's
// retry is recorded.
func completeRepeatedRetry(f *fixture) {
	f.accept(base, newMsg("crr"), newMsg("crr-one-call"))
	f.claimDelivery(feA, ownerA, base, 10)
	retry := func(id string, retryAt time.Time, detail string) persistence.Outcome {
		return persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: id, Result: persistence.ResultRetry,
			RetryAt: retryAt, Reason: "busy", Detail: detail, Ack: true}
	}
	f.completeOne(at(10e9), retry("crr", at(time.Minute), "attempt 1 failed"), persistence.Applied)
	first := f.get("crr")
	f.completeAll(at(20e9), []persistence.Completion{persistence.AlreadyRecorded}, retry("crr", at(2*time.Minute), "attempt 1 failed again"))
	f.checkMessage("after the repeated retry", f.get("crr"), first)
	if msg := queuedDiff(f.get("crr").NextAttemptAt, ptr(at(time.Minute))); msg != "" {
		f.Errorf("next attempt after the repeated retry: %s", msg)
	}
	f.checkHistory("crr",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateRetry, At: at(10e9), Detail: "attempt 1 failed"},
	)

	f.completeAll(at(10e9), []persistence.Completion{persistence.Applied, persistence.AlreadyRecorded},
		retry("crr-one-call", at(time.Minute), "first"), retry("crr-one-call", at(2*time.Minute), "second"))
	if n := f.historyLen("crr-one-call"); n != 2 {
		f.Errorf("history has %d entries after a retry repeated in one call, want 2", n)
	}

	c := f.claimDelivery(feA, ownerA, at(time.Minute), 10)
	f.wantIDSet("claim at the first RetryAt", workIDs(c.Work), "crr", "crr-one-call")
	for _, w := range c.Work {
		if w.Message.Attempts != 2 {
			f.Errorf("%s: attempts %d at the second claim, want 2", w.MessageID, w.Message.Attempts)
		}
	}
	f.completeOne(at(70e9), retry("crr", at(5*time.Minute), "attempt 2 failed"), persistence.Applied)
	if n := f.historyLen("crr"); n != 3 {
		f.Errorf("history has %d entries after attempt 2's retry, want 3", n)
	}
	f.completeAll(at(80e9), []persistence.Completion{persistence.AlreadyRecorded}, retry("crr", at(9*time.Minute), "attempt 2 failed again"))
	if msg := queuedDiff(f.get("crr").NextAttemptAt, ptr(at(5*time.Minute))); msg != "" {
		f.Errorf("next attempt after attempt 2's repeated retry: %s", msg)
	}
}

// completeRetryAfterRelease: attempt 2 of a message in retry was leased
// when the node restarted (ReleaseLeases took the lease back); the
// frontend's retry of attempt 2 arriving then is applied, though the
// message is in retry and its row unleased as after attempt 1's retry.
func completeRetryAfterRelease(f *fixture) {
	f.accept(base, newMsg("crl"))
	f.claimDelivery(feA, ownerA, base, 1)
	retry := persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: "crl", Result: persistence.ResultRetry, Ack: true}
	retry.RetryAt, retry.Detail = at(time.Minute), "attempt 1 failed"
	f.completeOne(at(10e9), retry, persistence.Applied)
	f.wantIDs("claim of attempt 2", workIDs(f.claimDelivery(feA, ownerA, at(time.Minute), 1).Work), "crl")
	if _, err := f.store.ReleaseLeases(f.ctx, ownerA); err != nil {
		f.Fatalf("ReleaseLeases: %v", err)
	}
	retry.RetryAt, retry.Detail = at(3*time.Minute), "attempt 2 failed"
	f.completeOne(at(2*time.Minute), retry, persistence.Applied)
	m := f.get("crl")
	if m.State != messages.StateRetry || m.Attempts != 2 {
		f.Errorf("after attempt 2's retry: %s with %d attempts, want retry with 2", m.State, m.Attempts)
	}
	if msg := queuedDiff(m.NextAttemptAt, ptr(at(3*time.Minute))); msg != "" {
		f.Errorf("next attempt after attempt 2's retry: %s", msg)
	}
	f.checkHistory("crl",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateRetry, At: at(10e9), Detail: "attempt 1 failed"},
		messages.HistoryEntry{State: messages.StateRetry, At: at(2 * time.Minute), Detail: "attempt 2 failed"},
	)
	retry.RetryAt = at(4 * time.Minute)
	f.completeAll(at(150e9), []persistence.Completion{persistence.AlreadyRecorded}, retry)
}

// completeDeferredRetry: a deferral (Outcome.Deferred: the frontend was
// busy, the message not attempted) leaves the attempts where they were
// before its claim, and the next claim counts the same attempt again,
// however often it is deferred; the same deferral sent again gives back
// nothing more; a real attempt's retry under the number a deferral gave
// back is recorded (not taken for the deferral's), and uses its attempt.
// The deferrals of attempt 2 are one history entry (persistence.FoldsInto).
func completeDeferredRetry(f *fixture) {
	f.accept(base, newMsg("cdr"))
	deferral := func(retryAt time.Time, detail string) persistence.Outcome {
		return persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: "cdr", Result: persistence.ResultRetry,
			RetryAt: retryAt, Reason: "throttled", Detail: detail, Attempt: 2, Deferred: true, Owner: ownerA}
	}
	claim := func(now time.Time, attempts int) {
		f.Helper()
		c := f.claimDelivery(feA, ownerA, now, 1)
		if len(c.Work) != 1 || c.Work[0].Message.Attempts != attempts {
			got := fmt.Sprint(workIDs(c.Work))
			if len(c.Work) == 1 {
				got = fmt.Sprintf("cdr at attempt %d", c.Work[0].Message.Attempts)
			}
			f.Fatalf("claim at %v: %v, want cdr at attempt %d", now.Sub(base), got, attempts)
		}
	}
	claim(base, 1)
	f.completeOne(at(1e9), persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: "cdr",
		Result: persistence.ResultRetry, RetryAt: at(10e9), Detail: "attempt 1 failed"}, persistence.Applied)
	for i := range 3 {
		claim(at(time.Duration(10*(2*i+1))*1e9), 2)
		f.completeOne(at(time.Duration(10*(2*i+1)+1)*1e9), deferral(at(time.Duration(10*(2*i+2))*1e9), "not attempted"), persistence.Applied)
		if m := f.get("cdr"); m.State != messages.StateRetry || m.Attempts != 1 {
			f.Errorf("after deferral %d: %s with %d attempts, want retry with 1", i+1, m.State, m.Attempts)
		}
	}
	f.completeAll(at(62e9), []persistence.Completion{persistence.AlreadyRecorded}, deferral(at(70e9), "not attempted again"))
	if m := f.get("cdr"); m.Attempts != 1 || f.historyLen("cdr") != 3 {
		f.Errorf("after the same deferral again: %d attempts, %d history entries; want 1, 3", m.Attempts, f.historyLen("cdr"))
	}
	claim(at(70e9), 2)
	f.completeOne(at(71e9), persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: "cdr",
		Result: persistence.ResultRetry, RetryAt: at(90e9), Detail: "attempt 2 failed"}, persistence.Applied)
	if m := f.get("cdr"); m.Attempts != 2 || f.historyLen("cdr") != 4 {
		f.Errorf("after attempt 2's retry: %d attempts, %d history entries; want 2, 4", m.Attempts, f.historyLen("cdr"))
	}
	claim(at(90e9), 3)
}

// completeDeferralOfAnotherClaim: instance A's deferral, recorded after
// its lease ran out and instance B claimed the row by id (a bus claim: not
// ring-fenced, epoch 0), is stale: it would give back B's attempt, in
// flight. B's own deferral gives it back.
func completeDeferralOfAnotherClaim(f *fixture) {
	f.accept(base, newMsg("cdo"))
	if c := f.claimDelivery(feA, ownerA, base, 1); len(c.Work) != 1 || c.Work[0].Message.Attempts != 1 {
		f.Fatalf("A's claim: %q, want cdo at attempt 1", workIDs(c.Work))
	}
	c := f.claim(persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerB, Limit: 1,
		Now: at(lease + 1e9), Lease: lease, IDs: []string{"cdo"}})
	if len(c.Work) != 1 || c.Work[0].Message.Attempts != 2 || c.Work[0].LeaseEpoch != 0 {
		f.Fatalf("B's claim by id after A's lease: %q, want cdo at attempt 2, epoch 0", workIDs(c.Work))
	}
	deferral := func(owner string) persistence.Outcome {
		return persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: "cdo", Result: persistence.ResultRetry,
			RetryAt: at(lease + 60e9), Reason: "HTTP 429", Detail: "not attempted: " + owner, Deferred: true, Owner: owner}
	}
	f.completeOne(at(lease+2e9), deferral(ownerA), persistence.StaleEpoch)
	if m := f.get("cdo"); m.Attempts != 2 || f.historyLen("cdo") != 1 {
		f.Errorf("after A's late deferral: %d attempts, %d history entries; want 2, 1 (B's attempt kept)", m.Attempts, f.historyLen("cdo"))
	}
	f.completeOne(at(lease+3e9), deferral(ownerB), persistence.Applied)
	if m := f.get("cdo"); m.Attempts != 1 || m.State != messages.StateRetry {
		f.Errorf("after B's deferral: %s with %d attempts, want retry with 1", m.State, m.Attempts)
	}
}

// completeDeferralOfAnEarlierClaim: a deferral names the attempt its
// claim counted (Outcome.Attempt). Its owner's lease ran out and the owner
// claimed the row again since (attempt 2, under way): the late deferral of
// attempt 1 gives back nothing (the owner alone does not tell the claims
// apart); the deferral of attempt 2 gives that one back.
func completeDeferralOfAnEarlierClaim(f *fixture) {
	f.accept(base, newMsg("cde"))
	f.claimDelivery(feA, ownerA, base, 1)
	c := f.claim(persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA, Limit: 1,
		Now: at(lease + 1e9), Lease: lease, IDs: []string{"cde"}})
	if len(c.Work) != 1 || c.Work[0].Message.Attempts != 2 {
		f.Fatalf("A's claim again by id after its lease: %q, want cde at attempt 2", workIDs(c.Work))
	}
	deferral := func(attempt int) persistence.Outcome {
		return persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: "cde", Result: persistence.ResultRetry,
			RetryAt: at(lease + 60e9), Reason: "HTTP 429", Detail: fmt.Sprintf("not attempted (attempt %d given back)", attempt),
			Deferred: true, Owner: ownerA, Attempt: attempt}
	}
	f.completeOne(at(lease+2e9), deferral(1), persistence.StaleEpoch)
	if m := f.get("cde"); m.Attempts != 2 || f.historyLen("cde") != 1 {
		f.Errorf("after the late deferral of attempt 1: %d attempts, %d history entries; want 2, 1 (attempt 2 kept)", m.Attempts, f.historyLen("cde"))
	}
	f.completeOne(at(lease+3e9), deferral(2), persistence.Applied)
	if m := f.get("cde"); m.Attempts != 1 || m.State != messages.StateRetry {
		f.Errorf("after the deferral of attempt 2: %s with %d attempts, want retry with 1", m.State, m.Attempts)
	}
}

// completeResentFirstDeferralAck: a pull frontend's deferral ack of
// attempt 1 (Outcome.Ack, no owner) gives that attempt back, which leaves
// the message in retry with no attempts, as one never offered has none.
// The same ack sent again (its first answer lost) is already_recorded,
// as a deferral's repeat is at any other attempt, not not_offered: the
// message was offered. It changes nothing. A deferral ack of a message
// never offered stays not_offered.
func completeResentFirstDeferralAck(f *fixture) {
	f.accept(base, newMsg("crf"), newMsg("crf-never"))
	if c := f.claim(persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA, Limit: 1,
		Now: base, Lease: lease, IDs: []string{"crf"}}); len(c.Work) != 1 || c.Work[0].Message.Attempts != 1 {
		f.Fatalf("claim: %q, want crf at attempt 1", workIDs(c.Work))
	}
	deferral := func(id string, attempt int) persistence.Outcome {
		return persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: id, Result: persistence.ResultRetry,
			RetryAt: at(time.Minute), Reason: "busy", Detail: fmt.Sprintf("not attempted (attempt %d given back)", attempt),
			Deferred: true, Attempt: attempt, Ack: true}
	}
	f.completeOne(at(1e9), deferral("crf", 1), persistence.Applied)
	first := f.get("crf")
	if first.State != messages.StateRetry || first.Attempts != 0 {
		f.Errorf("after the deferral: %s with %d attempts, want retry with 0", first.State, first.Attempts)
	}
	// Sent again, the frontend's attempt now reads as 0 (the delivery
	// dispatcher's Ack names the message's count).
	f.completeAll(at(2e9), []persistence.Completion{persistence.AlreadyRecorded}, deferral("crf", 0))
	f.completeAll(at(3e9), []persistence.Completion{persistence.AlreadyRecorded}, deferral("crf", 1))
	f.checkMessage("after the deferral sent again", f.get("crf"), first)
	if n := f.historyLen("crf"); n != 2 {
		f.Errorf("history has %d entries after the deferral sent again, want 2", n)
	}
	never := f.get("crf-never")
	f.completeOne(at(4e9), deferral("crf-never", 0), persistence.NotOffered)
	f.checkMessage("after a deferral of a message never offered", f.get("crf-never"), never)
}

func completeUnknownMessage(f *fixture) {
	f.accept(base, newMsg("cu-known"))
	f.completeOne(at(1e9), persistence.Outcome{MessageID: "cu-unknown", Result: persistence.ResultDelivered}, persistence.NoWork)
	f.noLedger("cu-unknown", feA)
	f.wantOutbox(1)
}

func completeMessageWithoutWork(f *fixture) {
	f.accept(base, msgNoWork("cn"))
	for _, r := range []persistence.Result{persistence.ResultDelivered, persistence.ResultFailed, persistence.ResultRetry} {
		f.completeOne(at(1e9), persistence.Outcome{MessageID: "cn", Result: r, RetryAt: at(2e9)}, persistence.NoWork)
	}
	f.wantState("cn", messages.StatePending)
	if n := f.historyLen("cn"); n != 1 {
		f.Errorf("history has %d entries, want 1", n)
	}
	f.noLedger("cn", feA)
	f.wantOutbox(0)
}

func completeOtherKindOrTarget(f *fixture) {
	f.accept(base, newMsg("co"))
	f.completeOne(at(1e9), persistence.Outcome{Target: feB, MessageID: "co", Result: persistence.ResultDelivered}, persistence.NoWork)
	f.completeOne(at(1e9), persistence.Outcome{Kind: persistence.WorkForward, Target: feA, MessageID: "co", Result: persistence.ResultDelivered}, persistence.NoWork)
	f.wantState("co", messages.StatePending)
	f.noLedger("co", feA)
	f.noLedger("co", feB)
	f.wantIDs("the delivery row is untouched", workIDs(f.claimDelivery(feA, ownerA, base, 10).Work), "co")
}

func completeFinalMessage(f *fixture) {
	// The message is final (expired while its row was leased to feA, which
	// still has its row); feA's late outcome changes nothing.
	f.accept(base, newMsg("cfin"))
	f.claimDelivery(feA, ownerA, base, 1)
	f.fail(at(1e9), "cfin")
	for _, r := range []persistence.Result{persistence.ResultFailed, persistence.ResultDelivered, persistence.ResultRetry} {
		f.completeOne(at(2e9), persistence.Outcome{MessageID: "cfin", Result: r, RetryAt: at(3e9), Ack: true}, persistence.AlreadyRecorded)
	}
	f.wantState("cfin", messages.StateFailed)
}

// completeOtherTargetsFinalMessage: the message is final (delivered
// through feA); an outcome of feB, which has no work on it (a pull
// frontend's ack of an id it was never given), is no_work, as before the
// message was final. It answered already_recorded, telling feB that feA's
// message exists and is done.
func completeOtherTargetsFinalMessage(f *fixture) {
	f.accept(base, newMsg("cother"))
	f.completeOne(at(5e8), persistence.Outcome{Target: feB, MessageID: "cother", Result: persistence.ResultDelivered, Ack: true}, persistence.NoWork)
	f.deliver(at(1e9), "cother")
	for _, r := range []persistence.Result{persistence.ResultFailed, persistence.ResultDelivered, persistence.ResultRetry} {
		f.completeOne(at(2e9), persistence.Outcome{Target: feB, MessageID: "cother", Result: r, RetryAt: at(3e9), Ack: true}, persistence.NoWork)
	}
	f.wantState("cother", messages.StateDelivered)
	f.noLedger("cother", feB)
	if n := f.historyLen("cother"); n != 2 {
		f.Errorf("history has %d entries, want 2", n)
	}
}

func completeSeveralInOrder(f *fixture) {
	f.accept(base, newMsg("cs-1"), newMsg("cs-2"), newMsg("cs-3"))
	f.claimDelivery(feA, ownerA, base, 10)
	o := func(id string, r persistence.Result) persistence.Outcome {
		return persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: id, Result: r,
			RetryAt: at(time.Minute), Reason: messages.ReasonRejected, Detail: string(r)}
	}
	got := f.complete(at(1e9),
		o("cs-1", persistence.ResultDelivered),
		o("cs-nope", persistence.ResultDelivered),
		o("cs-2", persistence.ResultRetry),
		o("cs-3", persistence.ResultFailed),
		o("cs-1", persistence.ResultFailed),
	)
	want := []persistence.Completion{persistence.Applied, persistence.NoWork, persistence.Applied, persistence.Applied, persistence.AlreadyRecorded}
	for i := range want {
		if got[i] != want[i] {
			f.Errorf("completion %d = %s, want %s", i, got[i], want[i])
		}
	}
	f.wantState("cs-1", messages.StateDelivered)
	f.wantState("cs-2", messages.StateRetry)
	f.wantState("cs-3", messages.StateFailed)
	if r := f.get("cs-3").Reason; r != messages.ReasonRejected {
		f.Errorf("cs-3 reason %q, want %q", r, messages.ReasonRejected)
	}
	f.wantOutbox(1)
	c := f.claimDelivery(feA, ownerB, at(time.Minute), 10)
	f.wantIDs("claim at RetryAt", workIDs(c.Work), "cs-2")
}

func completeEmpty(f *fixture) {
	got, err := f.store.CompleteWork(f.ctx, base, nil)
	if err != nil || len(got) != 0 {
		f.Errorf("CompleteWork(nil) = %v, %v; want none, nil", got, err)
	}
}

func releaseLeasesCases() []testCase {
	return []testCase{
		{"EndsOnlyOwnersLeases", releaseOnlyOwners},
		{"UnknownOwnerReleasesNothing", releaseUnknownOwner},
	}
}

func releaseOnlyOwners(f *fixture) {
	m3 := newMsg("rl-3")
	m3.Work.Target = feB
	f.accept(base, newMsg("rl-1"), newMsg("rl-2"), m3)
	if n := len(f.claimDelivery(feA, ownerA, base, 10).Work); n != 2 {
		f.Fatalf("owner A claimed %d rows, want 2", n)
	}
	if n := len(f.claimDelivery(feB, ownerB, base, 10).Work); n != 1 {
		f.Fatalf("owner B claimed %d rows, want 1", n)
	}
	n, err := f.store.ReleaseLeases(f.ctx, ownerA)
	if err != nil || n != 2 {
		f.Fatalf("ReleaseLeases(A) = %d, %v; want 2", n, err)
	}
	// Claimable at once, at the same Now the leases were taken.
	c := f.claimDelivery(feA, ownerC, base, 10)
	f.wantIDSet("claim after release", workIDs(c.Work), "rl-1", "rl-2")
	for _, w := range c.Work {
		if w.Message.Attempts != 2 {
			f.Errorf("%s: Attempts %d after the reclaim, want 2", w.MessageID, w.Message.Attempts)
		}
	}
	c = f.claimDelivery(feB, ownerC, base, 10)
	if len(c.Work) != 0 {
		f.Errorf("owner B's lease was released too: %q", workIDs(c.Work))
	}
	f.wantTime("NextDue of B's leased row", c.NextDue, at(lease))
	if n, err := f.store.ReleaseLeases(f.ctx, ownerA); err != nil || n != 0 {
		f.Errorf("second ReleaseLeases(A) = %d, %v; want 0 (C holds those leases now)", n, err)
	}
	if n, err := f.store.ReleaseLeases(f.ctx, ownerB); err != nil || n != 1 {
		f.Errorf("ReleaseLeases(B) = %d, %v; want 1", n, err)
	}
	f.wantIDs("B's row after release", workIDs(f.claimDelivery(feB, ownerC, base, 10).Work), "rl-3")
}

func releaseUnknownOwner(f *fixture) {
	f.accept(base, newMsg("ru"))
	f.claimDelivery(feA, ownerA, base, 10)
	if n, err := f.store.ReleaseLeases(f.ctx, "nobody"); err != nil || n != 0 {
		f.Errorf("ReleaseLeases(nobody) = %d, %v; want 0", n, err)
	}
	if c := f.claimDelivery(feA, ownerB, base, 10); len(c.Work) != 0 {
		f.Errorf("A's lease ended: %q", workIDs(c.Work))
	}
}

func ledgerCases() []testCase {
	return []testCase{
		{"ReturnsRecordedOutcome", ledgerReturnsEntry},
		{"MissingIsErrNotFound", ledgerMissing},
		{"KeyedByKind", ledgerKeyedByKind},
	}
}

// ledgerKeyedByKind: fe-a names a frontend and, here, a peer too. A delivery
// to frontend fe-a and a forward to peer fe-a are different work, each with
// its own ledger entry.
func ledgerKeyedByKind(f *fixture) {
	f.accept(base, msgFor("lk-fwd", persistence.WorkForward, feA), msgFor("lk-dlv", persistence.WorkDelivery, feA))
	f.seed(persistence.LedgerEntry{MessageID: "lk-fwd", Kind: persistence.WorkDelivery, Target: feA,
		Result: persistence.ResultDelivered, At: base, Detail: "seeded delivery"})
	f.seed(persistence.LedgerEntry{MessageID: "lk-dlv", Kind: persistence.WorkForward, Target: feA,
		Result: persistence.ResultDelivered, At: base, Detail: "seeded forward"})
	f.wantIDs("forward claim beside a delivery entry", workIDs(f.claimOf(persistence.WorkForward, feA, ownerA, base, 10).Work), "lk-fwd")
	f.wantIDs("delivery claim beside a forward entry", workIDs(f.claimDelivery(feA, ownerA, base, 10).Work), "lk-dlv")
	f.noLedgerOf(persistence.WorkForward, "lk-fwd", feA)
	f.noLedgerOf(persistence.WorkStatus, "lk-fwd", feA)
	f.completeAll(at(1e9), []persistence.Completion{persistence.Applied, persistence.Applied},
		outcome(persistence.WorkForward, feA, "lk-fwd", persistence.ResultDelivered),
		outcome(persistence.WorkDelivery, feA, "lk-dlv", persistence.ResultDelivered))
	f.wantState("lk-fwd", messages.StateForwarded)
	f.wantState("lk-dlv", messages.StateDelivered)
	for _, c := range []struct {
		kind   persistence.WorkKind
		id     string
		detail string
	}{
		{persistence.WorkDelivery, "lk-fwd", "seeded delivery"},
		{persistence.WorkForward, "lk-fwd", "forward delivered"},
		{persistence.WorkForward, "lk-dlv", "seeded forward"},
		{persistence.WorkDelivery, "lk-dlv", "delivery delivered"},
	} {
		if e := f.ledgerOf(c.kind, c.id, feA); e.Detail != c.detail {
			f.Errorf("Ledger(%s, %s) = %+v, want detail %q", c.kind, c.id, e, c.detail)
		}
	}
	f.wantOutbox(0)
}

func ledgerReturnsEntry(f *fixture) {
	f.accept(base, newMsg("lg-ok"), newMsg("lg-bad"))
	f.complete(at(1e9+999),
		persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: "lg-ok", Result: persistence.ResultDelivered, Detail: "ack 1"},
		persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: "lg-bad", Result: persistence.ResultFailed, Reason: messages.ReasonRejected, Detail: "nack"},
	)
	want := map[string]persistence.LedgerEntry{
		"lg-ok":  {MessageID: "lg-ok", Kind: persistence.WorkDelivery, Target: feA, Result: persistence.ResultDelivered, Detail: "ack 1"},
		"lg-bad": {MessageID: "lg-bad", Kind: persistence.WorkDelivery, Target: feA, Result: persistence.ResultFailed, Detail: "nack"},
	}
	for id, w := range want {
		e := f.ledger(id, feA)
		if e != (persistence.LedgerEntry{MessageID: w.MessageID, Kind: w.Kind, Target: w.Target, Result: w.Result, At: e.At, Detail: w.Detail}) {
			f.Errorf("Ledger(%s) = %+v, want %+v", id, e, w)
		}
		f.wantTime("Ledger.At", e.At, at(1e9+999))
	}
}

func ledgerMissing(f *fixture) {
	f.accept(base, newMsg("lm"), newMsg("lm-pending"))
	f.deliver(at(1e9), "lm")
	for _, k := range [][2]string{{"lm-unknown", feA}, {"lm-pending", feA}, {"lm", feB}} {
		if _, err := f.store.Ledger(f.ctx, persistence.WorkDelivery, k[0], k[1]); !errors.Is(err, persistence.ErrNotFound) {
			f.Errorf("Ledger(%s, %s): err %v, want ErrNotFound", k[0], k[1], err)
		}
	}
}
