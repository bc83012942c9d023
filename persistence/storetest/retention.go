package storetest

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func retentionCases() []testCase {
	return []testCase{
		{"PurgesRestingMessagesPastTheirCutoff", purgePastCutoff},
		{"NeverPurgesLiveMessages", purgeNeverLive},
		{"OwedReportKeepsTheMessage", purgeKeepsOwedReport},
		{"ForwardedAtTheOrigin", purgeForwardedAtOrigin},
		{"ResubmitEndsTheRest", purgeAfterResubmit},
		{"LimitAndGivenIDs", purgeLimitAndIDs},
		{"PurgeableReadsWholeMessages", purgePurgeable},
		{"AChangeSinceTheReadKeepsTheMessage", purgeSeen},
		{"AnIDIsFreeAfterItsPurge", purgeFreesTheID},
		{"RequestValidated", purgeValidated},
		{"CountsFollowPurges", purgeCounts},
		{"CompactAfterPurge", purgeCompact},
		{"RecordsAMessageChangedSinceItsRead", purgeRecordsAMessageChangedSinceItsRead},
		{"RacesResubmits", purgeRacesResubmits},
	}
}

// hour is the retention the purge tests pretend to use.
const hour = time.Hour

// retention is a request purging delivered messages that came to rest
// before deliveredBefore and failed and forward_failed ones before
// failedBefore, at now.
func retention(now, deliveredBefore, failedBefore time.Time) persistence.PurgeRequest {
	return persistence.PurgeRequest{Now: now, Limit: 100, Before: map[messages.State]time.Time{
		messages.StateDelivered:     deliveredBefore,
		messages.StateFailed:        failedBefore,
		messages.StateForwardFailed: failedBefore,
	}}
}

func (f *fixture) purge(req persistence.PurgeRequest, ids []string) []persistence.Purged {
	f.Helper()
	got, err := f.store.Purge(f.ctx, req, ids)
	if err != nil {
		f.Fatalf("Purge(%+v): %v", req, err)
	}
	return got
}

// purgedIDs is the sorted ids of purged messages.
func purgedIDs(p []persistence.Purged) []string {
	out := make([]string, len(p))
	for i, x := range p {
		out[i] = x.ID
	}
	sort.Strings(out)
	return out
}

// wantGone fails unless id, its history and its ledger entry on feA are gone.
func (f *fixture) wantGone(id string) {
	f.Helper()
	if m, err := f.store.GetMessage(f.ctx, id); !errors.Is(err, persistence.ErrNotFound) {
		f.Errorf("GetMessage(%s) after its purge = %s, %v; want ErrNotFound", id, m.State, err)
	}
	f.noLedger(id, feA)
}

func purgePastCutoff(f *fixture) {
	ff := msgNoWork("pg-ffailed")
	ff.State = messages.StateForwardQueued
	ff.Work = &persistence.WorkSpec{Kind: persistence.WorkForward, Target: peerP, DueAt: base}
	f.accept(base, newMsg("pg-old-delivered"), newMsg("pg-young-delivered"), newMsg("pg-old-failed"),
		newMsg("pg-mid-failed"), ff)
	f.deliver(at(hour), "pg-old-delivered")
	f.fail(at(hour), "pg-old-failed")
	f.fail(at(3*hour), "pg-mid-failed")
	f.deliver(at(5*hour), "pg-young-delivered")
	f.failForwards(persistence.ForwardExpiry{Now: at(hour), QueuedBefore: at(hour), Limit: 10})
	f.wantState("pg-ffailed", messages.StateForwardFailed)

	// At 6h: delivered kept 4h (cutoff 2h), failed kept 1.5h (cutoff 4.5h).
	got := f.purge(retention(at(6*hour), at(2*hour), at(4*hour+30*time.Minute)), nil)
	f.wantIDs("purged", purgedIDs(got), "pg-ffailed", "pg-mid-failed", "pg-old-delivered", "pg-old-failed")
	for _, p := range got {
		want := map[string]messages.State{"pg-old-delivered": messages.StateDelivered, "pg-old-failed": messages.StateFailed,
			"pg-mid-failed": messages.StateFailed, "pg-ffailed": messages.StateForwardFailed}[p.ID]
		if p.State != want {
			f.Errorf("purged %s in state %s, want %s", p.ID, p.State, want)
		}
	}
	for _, id := range []string{"pg-old-delivered", "pg-old-failed", "pg-mid-failed", "pg-ffailed"} {
		f.wantGone(id)
	}
	f.noLedgerOf(persistence.WorkForward, "pg-ffailed", peerP)
	f.wantState("pg-young-delivered", messages.StateDelivered)
	f.ledger("pg-young-delivered", feA)
	if again := f.purge(retention(at(6*hour), at(2*hour), at(4*hour+30*time.Minute)), nil); len(again) != 0 {
		f.Errorf("a second purge deleted %v", purgedIDs(again))
	}
	// The cutoff is exclusive: a message at rest since exactly the cutoff stays.
	if got := f.purge(retention(at(9*hour), at(5*hour), at(5*hour)), nil); len(got) != 0 {
		f.Errorf("purge with the cutoff at pg-young-delivered's rest deleted %v", purgedIDs(got))
	}
	f.wantIDs("purged once past it", purgedIDs(f.purge(retention(at(9*hour), at(5*hour+time.Microsecond), at(5*hour)), nil)),
		"pg-young-delivered")
}

func purgeNeverLive(f *fixture) {
	q := newMsg("pg-queued")
	q.State = messages.StateForwardQueued
	q.Work = &persistence.WorkSpec{Kind: persistence.WorkForward, Target: peerP, DueAt: base}
	f.accept(base, newMsg("pg-pending"), newMsg("pg-retry"), q, msgNoWork("pg-nowork"))
	f.retry(at(hour), "pg-retry", at(2*hour))
	// Every resting state, cutoffs far in the future: nothing live goes.
	req := retention(at(100*hour), at(99*hour), at(99*hour))
	req.Before[messages.StateForwarded] = at(99 * hour)
	if got := f.purge(req, nil); len(got) != 0 {
		f.Errorf("purged live messages %v", purgedIDs(got))
	}
	if got := f.purge(req, []string{"pg-pending", "pg-retry", "pg-queued", "pg-nowork"}); len(got) != 0 {
		f.Errorf("purged live messages named by id %v", purgedIDs(got))
	}
	f.wantState("pg-pending", messages.StatePending)
	f.wantState("pg-retry", messages.StateRetry)
	f.wantState("pg-queued", messages.StateForwardQueued)
	f.wantState("pg-nowork", messages.StatePending)
}

func purgeKeepsOwedReport(f *fixture) {
	f.accept(base, reportMsg("pg-owed"))
	f.deliver(at(hour), "pg-owed")
	f.wantStatusWork(at(hour), "pg-owed") // leased now, until at(2h)
	req := retention(at(10*hour), at(9*hour), at(9*hour))
	if got := f.purge(req, nil); len(got) != 0 {
		f.Errorf("purged %v while its report to the origin is owed", purgedIDs(got))
	}
	if got := f.purge(req, []string{"pg-owed"}); len(got) != 0 {
		f.Errorf("purged %v by id while its report to the origin is owed", purgedIDs(got))
	}
	f.completeAll(at(3*hour), []persistence.Completion{persistence.Applied},
		outcome(persistence.WorkStatus, peerP, "pg-owed", persistence.ResultDelivered))
	f.wantIDs("purged once the origin has its report", purgedIDs(f.purge(req, nil)), "pg-owed")
	f.wantGone("pg-owed")
	f.noLedgerOf(persistence.WorkStatus, "pg-owed", peerP)
}

func purgeForwardedAtOrigin(f *fixture) {
	f.accept(base, fwdMsg("pg-fwd-reported", peerP), fwdMsg("pg-fwd-silent", peerP))
	f.claimOf(persistence.WorkForward, peerP, ownerA, base, 10)
	f.completeAll(at(hour), []persistence.Completion{persistence.Applied, persistence.Applied},
		outcome(persistence.WorkForward, peerP, "pg-fwd-reported", persistence.ResultDelivered),
		outcome(persistence.WorkForward, peerP, "pg-fwd-silent", persistence.ResultDelivered))
	f.wantState("pg-fwd-silent", messages.StateForwarded)

	// Without a cutoff for forwarded, a forwarded message is kept however old.
	if got := f.purge(retention(at(100*hour), at(99*hour), at(99*hour)), nil); len(got) != 0 {
		f.Errorf("purged forwarded messages %v with no cutoff for forwarded", purgedIDs(got))
	}
	// The report arrives: delivered, at rest from the report's arrival.
	f.applyStatus(at(10*hour), []persistence.Completion{persistence.Applied}, status("pg-fwd-reported", peerP, persistence.ResultDelivered))
	if got := f.purge(retention(at(11*hour), at(10*hour), at(10*hour)), nil); len(got) != 0 {
		f.Errorf("purged %v: reported delivered at 10h, cutoff 10h", purgedIDs(got))
	}
	f.wantIDs("purged a reported forward past the delivered cutoff",
		purgedIDs(f.purge(retention(at(12*hour), at(11*hour), at(11*hour)), nil)), "pg-fwd-reported")
	f.noLedgerOf(persistence.WorkForward, "pg-fwd-reported", peerP)

	// A report that never comes: the forwarded cutoff (counted from the
	// forward's acceptance, 1h) ends it.
	req := retention(at(50*hour), at(49*hour), at(49*hour))
	req.Before[messages.StateForwarded] = at(hour)
	if got := f.purge(req, nil); len(got) != 0 {
		f.Errorf("purged %v: forwarded at 1h, forwarded cutoff 1h", purgedIDs(got))
	}
	req.Before[messages.StateForwarded] = at(2 * hour)
	f.wantIDs("purged a forward whose report never came", purgedIDs(f.purge(req, nil)), "pg-fwd-silent")
	// A report that comes after all finds nothing.
	f.applyStatus(at(60*hour), []persistence.Completion{persistence.NoWork}, status("pg-fwd-silent", peerP, persistence.ResultDelivered))
}

func purgeAfterResubmit(f *fixture) {
	f.accept(base, newMsg("pg-again"))
	f.fail(at(hour), "pg-again")
	f.resubmit(at(2*hour), persistence.Reroute{ID: "pg-again", Frontend: feA, State: messages.StatePending, Detail: "resubmitted",
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: feA}})
	if got := f.purge(retention(at(10*hour), at(9*hour), at(9*hour)), nil); len(got) != 0 {
		f.Errorf("purged %v: resubmitted, back at work", purgedIDs(got))
	}
	f.claimDelivery(feA, ownerA, at(3*hour), 10)
	f.deliver(at(4*hour), "pg-again")
	// At rest again from 4h, not from its first failure.
	if got := f.purge(retention(at(10*hour), at(4*hour), at(9*hour)), nil); len(got) != 0 {
		f.Errorf("purged %v: delivered at 4h, cutoff 4h", purgedIDs(got))
	}
	f.wantIDs("purged", purgedIDs(f.purge(retention(at(10*hour), at(5*hour), at(9*hour)), nil)), "pg-again")
}

func purgeLimitAndIDs(f *fixture) {
	var batch []persistence.NewMessage
	for i := range 7 {
		batch = append(batch, newMsg(fmt.Sprintf("pgl-%d", i)))
	}
	f.accept(base, batch...)
	for i := range 7 {
		f.deliver(at(time.Duration(i+1)*time.Minute), fmt.Sprintf("pgl-%d", i))
	}
	req := retention(at(10*hour), at(9*hour), at(9*hour))
	req.Limit = 3
	f.wantIDs("first batch: the oldest three", purgedIDs(f.purge(req, nil)), "pgl-0", "pgl-1", "pgl-2")
	// By id: only the named ones that are still eligible; ids past Limit
	// are not looked at.
	f.wantIDs("by id", purgedIDs(f.purge(req, []string{"pgl-5", "pgl-0", "pg-unknown"})), "pgl-5")
	f.wantIDs("by id", purgedIDs(f.purge(req, []string{"pgl-6"})), "pgl-6")
	req.Limit = 1
	f.wantIDs("by id, limit 1", purgedIDs(f.purge(req, []string{"pgl-3", "pgl-4"})), "pgl-3")
	if got := f.purge(req, []string{}); len(got) != 0 {
		f.Errorf("an empty id list purged %v", purgedIDs(got))
	}
	req.Limit = 10
	f.wantIDs("the rest", purgedIDs(f.purge(req, nil)), "pgl-4")
}

func purgePurgeable(f *fixture) {
	f.accept(base, newMsg("pgp-a"), newMsg("pgp-b"), newMsg("pgp-young"), reportMsg("pgp-owed"))
	f.deliver(at(hour), "pgp-b")
	f.fail(at(2*hour), "pgp-a")
	f.deliver(at(hour), "pgp-owed")
	f.deliver(at(8*hour), "pgp-young")
	req := retention(at(10*hour), at(5*hour), at(5*hour))
	got, err := f.store.Purgeable(f.ctx, req)
	if err != nil {
		f.Fatalf("Purgeable: %v", err)
	}
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	f.wantIDs("purgeable", ids, "pgp-a", "pgp-b")
	for limit, want := range map[int]int64{1: 1, 2: 2, 10: 2} {
		req := req
		req.Limit = limit
		if n, err := f.store.CountPurgeable(f.ctx, req); err != nil || n != want {
			f.Errorf("CountPurgeable(limit %d) = %d, %v; want %d", limit, n, err, want)
		}
	}
	for _, m := range got {
		want := f.get(m.ID)
		f.checkMessage("purgeable", m, want)
		if len(m.History) != len(want.History) || len(m.History) != 2 {
			f.Errorf("purgeable %s: history %+v, want %+v", m.ID, m.History, want.History)
		}
	}
	// It read; nothing went.
	f.wantState("pgp-a", messages.StateFailed)
	f.wantIDs("purged after", purgedIDs(f.purge(req, ids)), "pgp-a", "pgp-b")
}

func purgeFreesTheID(f *fixture) {
	first := newMsg("pg-reused")
	f.accept(base, first)
	f.deliver(at(hour), "pg-reused")
	// Within retention the id is taken: the stored message comes back.
	if res := f.accept(at(2*hour), newMsg("pg-reused")); res[0].Created || res[0].Message.State != messages.StateDelivered {
		f.Errorf("accept within retention: created %v state %s, want the stored delivered message", res[0].Created, res[0].Message.State)
	}
	f.wantIDs("purged", purgedIDs(f.purge(retention(at(30*hour), at(25*hour), at(25*hour)), nil)), "pg-reused")
	res := f.accept(at(31*hour), newMsg("pg-reused"))
	if !res[0].Created || res[0].Message.State != messages.StatePending {
		f.Errorf("accept after the purge: created %v state %s, want a new pending message", res[0].Created, res[0].Message.State)
	}
	if h := f.get("pg-reused").History; len(h) != 1 {
		f.Errorf("the new message carries history %+v", h)
	}
}

func purgeValidated(f *fixture) {
	f.accept(base, newMsg("pgv"))
	f.deliver(at(hour), "pgv")
	for _, req := range []persistence.PurgeRequest{
		{Now: at(10 * hour), Limit: 0, Before: map[messages.State]time.Time{messages.StateDelivered: at(9 * hour)}},
		{Now: at(10 * hour), Limit: 10},
		{Now: at(10 * hour), Limit: 10, Before: map[messages.State]time.Time{messages.StateDelivered: at(9 * hour), messages.StatePending: at(9 * hour)}},
	} {
		if _, err := f.store.Purge(f.ctx, req, nil); err == nil {
			f.Errorf("Purge(%+v) accepted", req)
		}
		if _, err := f.store.Purgeable(f.ctx, req); err == nil {
			f.Errorf("Purgeable(%+v) accepted", req)
		}
	}
	f.wantState("pgv", messages.StateDelivered)
}

func purgeCounts(f *fixture) {
	f.accept(base, newMsg("pgc-1"), newMsg("pgc-2"), newMsg("pgc-3"))
	f.deliver(at(hour), "pgc-1")
	f.deliver(at(hour), "pgc-2")
	f.fail(at(hour), "pgc-3")
	f.wantByState(f.stats().ByState, map[messages.State]int64{messages.StateDelivered: 2, messages.StateFailed: 1})
	f.purge(retention(at(10*hour), at(9*hour), at(9*hour)), []string{"pgc-1", "pgc-3"})
	st := f.stats()
	f.wantByState(st.ByState, map[messages.State]int64{messages.StateDelivered: 1})
	if st.DLQDepth != 0 {
		f.Errorf("DLQ depth %d after purging the failed message", st.DLQDepth)
	}
}

func purgeCompact(f *fixture) {
	var batch []persistence.NewMessage
	for i := range 300 {
		m := newMsg(fmt.Sprintf("pgk-%03d", i))
		m.Body = fmt.Sprintf("%01000d", i) // 1 kB each: pages to give back
		batch = append(batch, m)
	}
	f.accept(base, batch...)
	for _, m := range batch {
		f.deliver(at(hour), m.ID)
	}
	req := retention(at(10*hour), at(9*hour), at(9*hour))
	req.Limit = 1000
	if got := f.purge(req, nil); len(got) != len(batch) {
		f.Fatalf("purged %d of %d", len(got), len(batch))
	}
	freed, err := f.store.Compact(f.ctx, false)
	if err != nil {
		f.Fatalf("Compact: %v", err)
	}
	if freed < 0 {
		f.Errorf("Compact gave back %d bytes", freed)
	}
	if _, err := f.store.Compact(f.ctx, true); err != nil {
		f.Fatalf("Compact again: %v", err)
	}
	f.accept(at(11*hour), newMsg("pgk-after"))
	f.wantState("pgk-after", messages.StatePending)
}

// A purge by ids with the history lengths its caller read (the cleaner,
// which wrote the messages' call records from that read) keeps one that
// changed since: a receipt recorded in between would be missing from its
// record. The others go.
func purgeSeen(f *fixture) {
	f.accept(base, newMsg("pao-same"), newMsg("pao-receipt"))
	f.claimDelivery(feA, ownerA, base, 10)
	f.deliver(at(hour), "pao-same")
	f.deliverSMSC(at(hour), "pao-receipt", "pao-x")
	req := retention(at(10*hour), at(5*hour), at(5*hour))
	read, err := f.store.Purgeable(f.ctx, req)
	if err != nil || len(read) != 2 {
		f.Fatalf("Purgeable: %d, %v", len(read), err)
	}
	req.Seen = map[string]int{}
	var ids []string
	for _, m := range read {
		req.Seen[m.ID] = len(m.History)
		ids = append(ids, m.ID)
	}
	f.receipts(at(9*hour), []persistence.Completion{persistence.Applied}, receipt(feA, "pao-x", "DELIVRD"))
	f.wantIDs("purged", purgedIDs(f.purge(req, ids)), "pao-same")
	f.wantGone("pao-same")
	f.wantState("pao-receipt", messages.StateDelivered)
	// Read again (its record written again), it goes. Its second record
	// has more history entries than its first, the rule call records'
	// readers follow (docs/operations.md): the receipt is no transition,
	// so the entries' last transition is where it was.
	m := f.get("pao-receipt")
	if len(m.History) <= req.Seen[m.ID] || m.History[len(m.History)-1].State != messages.StateDelivered {
		f.Errorf("pao-receipt read again: %d history entries, %d at its first read; want more, the last delivered", len(m.History), req.Seen[m.ID])
	}
	req.Seen = map[string]int{m.ID: len(m.History)}
	f.wantIDs("purged after a new read", purgedIDs(f.purge(req, []string{m.ID})), "pao-receipt")
}

// purgeRecordsAMessageChangedSinceItsRead: the cleaner writes a message's
// call record from what Purgeable read, then purges what is unchanged
// since (Seen). A failed message resubmitted in between is kept; it comes
// to rest again, and the next pass records and purges it. Its two records
// then share id and created_at, and the one with the most history entries
// is the message as it was purged, the rule docs/operations.md gives call
// records' readers (a receipt in between, purgeAfterOrigin's, adds an
// entry without a later final_at).
func purgeRecordsAMessageChangedSinceItsRead(f *fixture) {
	f.accept(base, newMsg("pr-changed"))
	f.fail(at(hour), "pr-changed")
	type record struct {
		state            messages.State
		created, finalAt time.Time
		entries          int
	}
	var records []record
	pass := func(now time.Time, between func()) []persistence.Purged {
		req := retention(now, now.Add(-hour/2), now.Add(-hour/2))
		read, err := f.store.Purgeable(f.ctx, req)
		if err != nil {
			f.Fatalf("Purgeable: %v", err)
		}
		req.Seen = map[string]int{}
		var ids []string
		for _, m := range read {
			records = append(records, record{m.State, m.CreatedAt, m.History[len(m.History)-1].At, len(m.History)}) // retention.RecordOf's
			req.Seen[m.ID] = len(m.History)
			ids = append(ids, m.ID)
		}
		if between != nil {
			between()
		}
		return f.purge(req, ids)
	}
	if got := pass(at(10*hour), func() {
		f.resubmit(at(10*hour), persistence.Reroute{ID: "pr-changed", Frontend: feA, State: messages.StatePending, Detail: "resubmitted",
			Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: feA}})
	}); len(got) != 0 {
		f.Fatalf("purged %v though resubmitted since its read", purgedIDs(got))
	}
	f.claimDelivery(feA, ownerA, at(11*hour), 10)
	f.fail(at(11*hour), "pr-changed")
	got := pass(at(20*hour), nil)
	if len(got) != 1 || got[0].State != messages.StateFailed {
		f.Fatalf("second pass purged %+v, want pr-changed, failed", got)
	}
	if len(records) != 2 || !records[0].created.Equal(records[1].created) {
		f.Fatalf("records %+v, want two of one message (the same created_at)", records)
	}
	// The second pass's record is the message as purged.
	if last := records[1]; last.entries <= records[0].entries || !last.finalAt.Equal(norm(at(11*hour))) || last.state != got[0].State {
		f.Errorf("records %+v: want the one of the message as purged (failed at %v) to have the most history entries", records, norm(at(11*hour)))
	}
}

// purgeRacesResubmits: resubmits of failed messages race
// purges of them (by the candidates' query, and by ids read before); a
// message whose resubmit applied is never purged, one purged is never
// resubmitted, and the counts follow.
func purgeRacesResubmits(f *fixture) {
	const n = 150
	var all []string
	for i := range n {
		id := fmt.Sprintf("rr-%03d", i)
		all = append(all, id)
		f.accept(base, newMsg(id))
		f.fail(at(hour), id)
	}
	req := retention(at(10*hour), at(9*hour), at(9*hour))
	req.Limit = 7
	var (
		mu        sync.Mutex
		purged    = map[string]int{}
		applied   = map[string]bool{}
		errs      []error
		wg        sync.WaitGroup
		resubDone = make(chan struct{})
	)
	note := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	wg.Add(3)
	go func() {
		defer wg.Done()
		defer close(resubDone)
		for i := len(all) - 1; i >= 0; i-- {
			res, err := f.store.Resubmit(f.ctx, at(10*hour), []persistence.Reroute{{ID: all[i], Frontend: feA, State: messages.StatePending,
				Detail: "resubmitted", Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: feA}}})
			if err != nil {
				note(err)
				continue
			}
			if len(res) == 1 && res[0].Applied {
				mu.Lock()
				applied[all[i]] = true
				mu.Unlock()
			}
		}
	}()
	sweeper := func(byIDs bool) {
		defer wg.Done()
		for {
			var got []persistence.Purged
			var err error
			if byIDs {
				var read []messages.Message
				read, err = f.store.Purgeable(f.ctx, req)
				if err == nil && len(read) > 0 {
					r := req
					r.Seen = map[string]int{}
					var ids []string
					for _, m := range read {
						r.Seen[m.ID] = len(m.History)
						ids = append(ids, m.ID)
					}
					got, err = f.store.Purge(f.ctx, r, ids)
				}
			} else {
				got, err = f.store.Purge(f.ctx, req, nil)
			}
			if err != nil {
				note(err)
			}
			mu.Lock()
			for _, p := range got {
				purged[p.ID]++
			}
			mu.Unlock()
			select {
			case <-resubDone:
				if len(got) == 0 {
					return
				}
			default:
			}
		}
	}
	go sweeper(false)
	go sweeper(true)
	wg.Wait()
	for _, err := range errs {
		f.Errorf("race: %v", err)
	}
	kept := 0
	for _, id := range all {
		_, err := f.store.GetMessage(f.ctx, id)
		present := err == nil
		switch {
		case applied[id] && purged[id] > 0:
			f.Errorf("%s: resubmit applied and purged", id)
		case applied[id] && !present:
			f.Errorf("%s: resubmit applied, gone", id)
		case !applied[id] && present:
			f.Errorf("%s: neither resubmitted nor purged", id)
		case purged[id] > 1:
			f.Errorf("%s purged %d times", id, purged[id])
		}
		if present {
			kept++
		}
	}
	st := f.stats()
	if st.ByState[messages.StatePending] != int64(kept) || st.ByState[messages.StateFailed] != 0 {
		f.Errorf("counts %v, want pending %d (kept) and failed 0", st.ByState, kept)
	}
}
