package storetest

import (
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The delivery bus's store support: the relay's work (RelayWork, Unrelay,
// OldestUnrelayed) and claims of named messages (ClaimRequest.IDs).
func busCases() []testCase {
	return []testCase{
		{"RelayTakesUnrelayedDeliveryRowsDueNowEarliestFirst", relayOldestFirst},
		{"RelayLeavesWorkNotYetDueUntilItIs", relayDueOnly},
		{"TakenRowsAreNotTakenAgainUntilUnrelayed", relayTakenOnce},
		{"RelayTakesRowsAfterAKeyInItsOrder", relayAfter},
		{"ARetryGoesBackToTheRelayForItsDueTime", relayRetry},
		{"WorkDueLaterIsNotWrittenToPublish", relayPublishLater},
		{"NewWorkOfAResubmitIsRelayedAgain", relayResubmit},
		{"WorkWrittenLeasedIsNotRelayed", relayNotLeasedAtAccept},
		{"WorkWrittenToPublishIsNamedAndNotRelayedAgain", relayPublishedAtAccept},
		{"RelayAgainMarksEveryRelayedDeliveryRow", relayAgain},
		{"RelayInvalidRequestIsError", relayInvalid},
		{"ClaimNamedTakesOnlyThoseRows", claimNamedOnly},
		{"ClaimNamedTellsWhenTheRestIsClaimable", claimNamedLater},
		{"ClaimNamedOfDoneWorkFindsNothing", claimNamedDone},
	}
}

// relay takes rows as a relay at relayNow would.
func (f *fixture) relay(limit int) []persistence.Relay {
	f.Helper()
	return f.relayAt(relayNow, limit)
}

// relayNow is when relay takes rows: after every row the cases write with
// newMsg is due.
var relayNow = at(time.Minute)

func (f *fixture) relayAt(now time.Time, limit int) []persistence.Relay {
	f.Helper()
	rs, err := f.store.RelayWork(f.ctx, persistence.RelayRequest{Now: now, Limit: limit})
	if err != nil {
		f.Fatalf("RelayWork(%v, %d): %v", now, limit, err)
	}
	return rs
}

func (f *fixture) unrelay(rows []int64) {
	f.Helper()
	if err := f.store.Unrelay(f.ctx, rows); err != nil {
		f.Fatalf("Unrelay: %v", err)
	}
}

func relayIDs(rs []persistence.Relay) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.MessageID
	}
	return out
}

func relayRows(rs []persistence.Relay) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Row
	}
	return out
}

func (f *fixture) wantOldestUnrelayed(want time.Time) {
	f.Helper()
	got, err := f.store.OldestUnrelayed(f.ctx)
	if err != nil {
		f.Fatalf("OldestUnrelayed: %v", err)
	}
	f.wantTime("OldestUnrelayed", got, want)
}

func relayOldestFirst(f *fixture) {
	f.wantOldestUnrelayed(time.Time{})
	f.accept(base, newMsg("r-0"))
	f.accept(at(1e9), msgFor("r-fwd", persistence.WorkForward, peerP), msgDue("r-1", at(time.Hour)))
	f.accept(at(2e9), msgFor("r-2", persistence.WorkDelivery, feB), msgDue("r-early", at(-time.Second)))
	// The oldest due time (not the oldest row): r-early, accepted last.
	f.wantOldestUnrelayed(at(-time.Second))
	rs := f.relayAt(at(2e9), 2)
	f.wantIDs("RelayWork", relayIDs(rs), "r-early", "r-0")
	if len(rs) == 2 {
		if rs[1].Target != feA || rs[0].Row <= 0 || rs[1].Row <= 0 {
			f.Errorf("RelayWork rows = %+v, want fe-a and rows positive", rs)
		}
		f.wantTime("DueAt", rs[0].DueAt, at(-time.Second))
		f.wantTime("DueAt", rs[1].DueAt, base)
		f.wantTime("CreatedAt", rs[1].CreatedAt, base)
	}
	f.wantOldestUnrelayed(base)
	rs = f.relayAt(at(2e9), 10)
	f.wantIDs("RelayWork after the first two were taken", relayIDs(rs), "r-2")
	if len(rs) == 1 && rs[0].Target != feB {
		f.Errorf("Target = %q, want %q", rs[0].Target, feB)
	}
	// r-1 is not due yet: the oldest unrelayed due time is ahead, when the
	// relay's next work falls due.
	f.wantOldestUnrelayed(at(time.Hour))
	f.wantIDs("RelayWork when r-1 falls due", relayIDs(f.relayAt(at(time.Hour), 10)), "r-1")
	f.wantOldestUnrelayed(time.Time{})
}

// relayDueOnly: the bus carries only work that is due (a consumer handed
// work early holds it in its ack-pending until then): rows scheduled ahead
// wait in the outbox, unrelayed, and are taken once due, however many of
// them come first in the outbox.
func relayDueOnly(f *fixture) {
	var later []persistence.NewMessage
	for i := range 5 {
		later = append(later, msgDue(fmt.Sprintf("due-later-%d", i), at(time.Hour+secs(i))))
	}
	f.accept(base, later...)
	f.accept(at(1e9), msgDue("due-now", at(1e9)))
	f.wantIDs("RelayWork an hour early", relayIDs(f.relayAt(at(2e9), 3)), "due-now")
	f.wantIDs("RelayWork a second before the first falls due", relayIDs(f.relayAt(at(time.Hour-time.Microsecond), 10)))
	f.wantOldestUnrelayed(at(time.Hour))
	f.wantIDs("RelayWork as two fall due", relayIDs(f.relayAt(at(time.Hour+secs(1)), 10)), "due-later-0", "due-later-1")
	f.wantIDs("RelayWork when all are due", relayIDs(f.relayAt(at(2*time.Hour), 10)), "due-later-2", "due-later-3", "due-later-4")
	f.wantOldestUnrelayed(time.Time{})
	// A claim from the store is unchanged: what is due is claimable,
	// relayed or not.
	f.wantIDs("claim", workIDs(f.claimDelivery(feA, ownerA, at(2*time.Hour), 10).Work),
		"due-now", "due-later-0", "due-later-1", "due-later-2", "due-later-3", "due-later-4")
}

// relayRetry: a retry writes its row back unrelayed in the retry's own
// transaction (instead of a bus message waiting, naked, for its time), so
// the relay publishes it again once it is due, with its new due time.
func relayRetry(f *fixture) {
	held := newMsg("retry-held")
	held.Lease = &persistence.Lease{Owner: ownerA, Until: at(time.Minute)}
	f.accept(base, newMsg("retry-bus"), held)
	first := f.relayAt(base, 10)
	f.wantIDs("RelayWork", relayIDs(first), "retry-bus")
	f.wantIDs("claim", workIDs(f.claim(persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA,
		Limit: 10, Now: base, Lease: lease, IDs: []string{"retry-bus"}}).Work), "retry-bus")
	f.retry(at(1e9), "retry-bus", at(time.Minute))
	f.retry(at(1e9), "retry-held", at(2*time.Minute))
	f.wantIDs("RelayWork before the retries are due", relayIDs(f.relayAt(at(time.Minute-time.Microsecond), 10)))
	f.wantOldestUnrelayed(at(time.Minute))
	again := f.relayAt(at(time.Minute), 10)
	f.wantIDs("RelayWork when the first retry is due", relayIDs(again), "retry-bus")
	if len(again) == 1 && len(first) == 1 {
		if again[0].Row != first[0].Row {
			f.Errorf("the retry is row %d, first relayed as %d: want the same row", again[0].Row, first[0].Row)
		}
		f.wantTime("DueAt of the retry", again[0].DueAt, at(time.Minute))
	}
	f.wantIDs("RelayWork when the handed-over row's retry is due", relayIDs(f.relayAt(at(2*time.Minute), 10)), "retry-held")
	f.wantOldestUnrelayed(time.Time{})
}

// relayPublishLater: work due after the accept's now is written unrelayed
// even when asked to Publish (the bus carries only work that is due): its
// writer gets no row to publish, and the relay takes it when due.
func relayPublishLater(f *fixture) {
	later := msgDue("pub-later", at(time.Minute))
	later.Publish = true
	now := msgDue("pub-now", base)
	now.Publish = true
	res := f.accept(base, later, now)
	if res[0].Relay != nil || !res[0].Created {
		f.Errorf("Accepted of work due later = %+v (Relay %+v), want created, no Relay", res[0], res[0].Relay)
	}
	if r := res[1].Relay; r == nil {
		f.Errorf("Accepted of work due now has no Relay")
	} else {
		f.wantTime("Relay.DueAt", r.DueAt, base)
	}
	f.wantIDs("RelayWork at the accept", relayIDs(f.relayAt(base, 10)))
	f.wantIDs("RelayWork when due", relayIDs(f.relayAt(at(time.Minute), 10)), "pub-later")
}

// relayAfter: a relay goes on past rows it could not publish (given
// back, they would come first in every round): RelayWork takes only the
// rows after a key, in its order (due time, then row).
func relayAfter(f *fixture) {
	f.accept(base, newMsg("after-a"), newMsg("after-b"), msgDue("after-early", at(-time.Second)), newMsg("after-c"))
	all := f.relayAt(base, 10)
	f.wantIDs("RelayWork", relayIDs(all), "after-early", "after-a", "after-b", "after-c")
	f.unrelay(relayRows(all))
	take := func(after persistence.RelayKey, limit int) []persistence.Relay {
		f.Helper()
		rs, err := f.store.RelayWork(f.ctx, persistence.RelayRequest{Now: base, Limit: limit, After: after})
		if err != nil {
			f.Fatalf("RelayWork after %+v: %v", after, err)
		}
		return rs
	}
	if len(all) != 4 {
		f.FailNow()
	}
	// After after-a: after-b and after-c; after-early (due earlier, a
	// later row) comes before it.
	f.wantIDs("RelayWork after after-a", relayIDs(take(all[1].Key(), 1)), "after-b")
	f.wantIDs("RelayWork after after-a again", relayIDs(take(all[1].Key(), 10)), "after-c")
	f.wantIDs("RelayWork after the last", relayIDs(take(all[3].Key(), 10)))
	// From the first again: what was not taken.
	f.wantIDs("RelayWork from the first", relayIDs(take(persistence.RelayKey{}, 10)), "after-early", "after-a")
	if _, err := f.store.RelayWork(f.ctx, persistence.RelayRequest{Now: base, Limit: 1, After: persistence.RelayKey{Row: -1}}); err == nil {
		f.Errorf("RelayWork after row -1 succeeded")
	}
}

func relayTakenOnce(f *fixture) {
	f.accept(base, newMsg("t-0"), newMsg("t-1"))
	first := f.relay(10)
	f.wantIDs("first relay", relayIDs(first), "t-0", "t-1")
	f.wantIDs("a second relay", relayIDs(f.relay(10)))
	// The bus did not take t-1: given back, it is taken again.
	f.unrelay(relayRows(first[1:]))
	f.wantOldestUnrelayed(base)
	f.wantIDs("after Unrelay", relayIDs(f.relay(10)), "t-1")
	// Relaying changes nothing else of the work; giving back a row that is
	// gone (delivered since) is harmless.
	c := f.claimDelivery(feA, ownerA, base, 10)
	f.wantIDs("ClaimWork of relayed work", workIDs(c.Work), "t-0", "t-1")
	f.deliver(base, "t-0")
	f.unrelay(relayRows(first))
	f.wantIDs("after giving back a delivered row and t-1", relayIDs(f.relay(10)), "t-1")
	f.unrelay(nil)
}

func relayResubmit(f *fixture) {
	f.accept(base, newMsg("rs"))
	rs := f.relay(10)
	f.claimDelivery(feA, ownerA, base, 1)
	f.fail(base, "rs")
	res, err := f.store.Resubmit(f.ctx, at(1e9), []persistence.Reroute{{ID: "rs", Frontend: feA, DestSMSC: "smsc-out",
		State: messages.StatePending, Detail: "resubmitted",
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: feA, DueAt: at(1e9)}}})
	if err != nil || len(res) != 1 || !res[0].Applied {
		f.Fatalf("Resubmit = %+v, %v", res, err)
	}
	again := f.relay(10)
	f.wantIDs("RelayWork after a resubmit", relayIDs(again), "rs")
	if len(again) == 1 && len(rs) == 1 && again[0].Row == rs[0].Row {
		f.Errorf("the resubmit's work has the old row id %d: the bus would drop it as a duplicate", rs[0].Row)
	}
}

func relayNotLeasedAtAccept(f *fixture) {
	held := newMsg("held")
	held.Lease = &persistence.Lease{Owner: ownerA, Until: at(time.Minute)}
	f.accept(base, held, newMsg("free"))
	f.wantIDs("RelayWork", relayIDs(f.relay(10)), "free")
	// The worker it was handed to died: after its lease a claim from the
	// store (the bus's backstop) takes it.
	f.wantIDs("claim after the lease", workIDs(f.claimDelivery(feA, ownerB, at(time.Minute), 10).Work), "held", "free")
}

func relayPublishedAtAccept(f *fixture) {
	pub := newMsg("pub")
	pub.Publish = true
	res := f.accept(base, newMsg("free"), pub)
	if res[0].Relay != nil {
		f.Errorf("Accepted.Relay of work not written to publish = %+v, want nil", res[0].Relay)
	}
	r := res[1].Relay
	if r == nil || r.Row <= 0 || r.MessageID != "pub" || r.Target != feA || res[1].Work != nil {
		f.Fatalf("Accepted = %+v (Relay %+v), want the row of pub for fe-a and no leased Work", res[1], r)
	}
	f.wantTime("Relay.CreatedAt", r.CreatedAt, base)
	f.wantTime("Relay.DueAt", r.DueAt, base)
	// Its writer publishes it: no relay takes it, until it is given back.
	f.wantIDs("RelayWork", relayIDs(f.relay(10)), "free")
	f.unrelay([]int64{r.Row})
	again := f.relay(10)
	f.wantIDs("RelayWork after giving it back", relayIDs(again), "pub")
	if len(again) == 1 && again[0].Row != r.Row {
		f.Errorf("the row given back is relayed as row %d, written as %d: the bus would not drop a second publish", again[0].Row, r.Row)
	}
	// A claim from the store (the bus's backstop) takes it like any row.
	f.wantIDs("claim", workIDs(f.claimDelivery(feA, ownerB, base, 10).Work), "free", "pub")
}

func relayAgain(f *fixture) {
	pub := newMsg("again-pub")
	pub.Publish = true
	held := newMsg("again-held")
	held.Lease = &persistence.Lease{Owner: ownerA, Until: at(time.Minute)}
	f.accept(base, newMsg("again-0"), pub, held, msgFor("again-fwd", persistence.WorkForward, peerP), newMsg("again-1"))
	f.wantIDs("RelayWork", relayIDs(f.relay(1)), "again-0")
	f.accept(at(1e9), newMsg("again-new"))
	// The bus lost its stream: every delivery row marked relayed (taken by
	// a relay, written to publish or handed over) is relayed again, a
	// page at a time; the rows never taken are not counted in its pages.
	var last int64
	pages := 0
	for {
		next, err := f.store.RelayAgain(f.ctx, last, 2)
		if err != nil {
			f.Fatalf("RelayAgain(%d, 2): %v", last, err)
		}
		if next == 0 {
			break
		}
		if next <= last {
			f.Fatalf("RelayAgain(%d, 2) = %d, want a later row", last, next)
		}
		last, pages = next, pages+1
	}
	if pages != 2 {
		f.Errorf("RelayAgain marked its rows in %d pages of 2, want 2 (three rows)", pages)
	}
	again := f.relay(10)
	f.wantIDs("RelayWork after RelayAgain", relayIDs(again), "again-0", "again-pub", "again-held", "again-1", "again-new")
	f.wantIDs("RelayWork once more", relayIDs(f.relay(10)))
	if last, err := f.store.RelayAgain(f.ctx, again[len(again)-1].Row, 10); err != nil || last != 0 {
		f.Errorf("RelayAgain after the last row = %d, %v; want 0, nil", last, err)
	}
	// The forward's row is no bus work: a claim of forwards still finds it.
	f.wantIDs("forward claim", workIDs(f.claim(persistence.ClaimRequest{Kind: persistence.WorkForward, Target: peerP,
		Owner: ownerA, Limit: 10, Now: base, Lease: lease}).Work), "again-fwd")
}

func relayInvalid(f *fixture) {
	leased := newMsg("pub-leased")
	leased.Publish, leased.Lease = true, &persistence.Lease{Owner: ownerA, Until: at(time.Minute)}
	forward := msgFor("pub-forward", persistence.WorkForward, peerP)
	forward.Publish = true
	none := msgNoWork("pub-none")
	none.Publish = true
	for _, nm := range []persistence.NewMessage{leased, forward, none} {
		if _, err := f.store.Accept(f.ctx, base, []persistence.NewMessage{nm}); err == nil {
			f.Errorf("Accept of %s to publish succeeded", nm.ID)
		}
	}
	f.wantIDs("RelayWork after refused accepts", relayIDs(f.relay(10)))
	for _, req := range []persistence.RelayRequest{{Now: base}, {Limit: 1}} {
		if _, err := f.store.RelayWork(f.ctx, req); err == nil {
			f.Errorf("RelayWork(%+v) succeeded", req)
		}
	}
	if err := f.store.Unrelay(f.ctx, []int64{0}); err == nil {
		f.Errorf("Unrelay([0]) succeeded")
	}
	for _, c := range []struct {
		after int64
		limit int
	}{{-1, 1}, {0, 0}} {
		if _, err := f.store.RelayAgain(f.ctx, c.after, c.limit); err == nil {
			f.Errorf("RelayAgain(%d, %d) succeeded", c.after, c.limit)
		}
	}
	req := persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA, Limit: 1, Now: base,
		Lease: lease, IDs: []string{"x"}, Ring: &persistence.RingClaim{Epoch: 1}}
	if _, err := f.store.ClaimWork(f.ctx, req); err == nil {
		f.Errorf("a ring-fenced claim of named messages succeeded")
	}
}

func (f *fixture) claimNamed(now time.Time, ids ...string) persistence.Claim {
	f.Helper()
	return f.claim(persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerB,
		Limit: len(ids), Now: now, Lease: lease, IDs: ids})
}

func claimNamedOnly(f *fixture) {
	f.accept(base, newMsg("n-0"), newMsg("n-1"), newMsg("n-2"), msgFor("n-b", persistence.WorkDelivery, feB))
	c := f.claimNamed(base, "n-2", "n-0", "n-b", "unknown")
	f.wantIDs("claim of named messages", workIDs(c.Work), "n-0", "n-2")
	if len(c.Later) != 0 {
		f.Errorf("Later = %v, want none (fe-b's work and an unknown id have no row for fe-a)", c.Later)
	}
	if !c.NextDue.IsZero() {
		f.Errorf("NextDue = %v, want zero for a claim of named messages", c.NextDue)
	}
	for _, w := range c.Work {
		if w.Message.Attempts != 1 || w.LeaseOwner != ownerB || w.LeaseEpoch != 0 {
			f.Errorf("claimed %s: attempts %d, owner %q, epoch %d; want 1, %q, 0", w.MessageID, w.Message.Attempts,
				w.LeaseOwner, w.LeaseEpoch, ownerB)
		}
	}
	f.wantIDs("the rest by a claim of the queue", workIDs(f.claimDelivery(feA, ownerA, base, 10).Work), "n-1")
}

func claimNamedLater(f *fixture) {
	f.accept(base, msgDue("later-due", at(time.Minute)), newMsg("later-leased"), newMsg("later-free"))
	f.claim(persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA, Limit: 1, Now: base,
		Lease: 2 * time.Minute, IDs: []string{"later-leased"}})
	c := f.claimNamed(at(1e9), "later-due", "later-leased", "later-free")
	f.wantIDs("claim", workIDs(c.Work), "later-free")
	if len(c.Later) != 2 {
		f.Fatalf("Later = %v, want the two rows not claimable", c.Later)
	}
	f.wantTime("Later of the row not due", c.Later["later-due"], at(time.Minute))
	f.wantTime("Later of the leased row", c.Later["later-leased"], at(2*time.Minute))
	if _, ok := c.Later["later-free"]; ok {
		f.Errorf("Later names the row the claim took")
	}
}

func claimNamedDone(f *fixture) {
	f.accept(base, newMsg("done"))
	f.claimDelivery(feA, ownerA, base, 1)
	f.deliver(base, "done")
	c := f.claimNamed(at(1e9), "done")
	if len(c.Work) != 0 || len(c.Later) != 0 {
		f.Errorf("claim of delivered work = %+v, want nothing", c)
	}
	if got := f.get("done"); got.State != messages.StateDelivered || got.Attempts != 1 {
		f.Errorf("message after the claim: state %s attempts %d, want delivered, 1", got.State, got.Attempts)
	}
}
