package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func acceptCases() []testCase {
	return []testCase{
		{"StoresEveryField", acceptStoresEveryField},
		{"TokenIsTokenOfID", acceptTokenIsTokenOfID},
		{"ForwardQueuedSetsQueuedAt", acceptForwardQueuedSetsQueuedAt},
		{"SeqIncreases", acceptSeqIncreases},
		{"TimesAreNow", acceptTimesAreNow},
		{"FirstHistoryEntry", acceptFirstHistoryEntry},
		{"WritesOutboxWork", acceptWritesOutboxWork},
		{"NoOutboxRowWithoutWork", acceptNoOutboxRowWithoutWork},
		{"ExistingIDReturnsStoredMessage", acceptExistingIDReturnsStored},
		{"ExistingIDAfterDeliveryWritesNothing", acceptExistingIDAfterDelivery},
		{"RepeatedIDInBatchCreatedOnce", acceptRepeatedIDInBatch},
		{"ResultsInInputOrder", acceptResultsInInputOrder},
		{"ThousandMessageBatch", acceptThousandMessageBatch},
		{"EmptyBatch", acceptEmptyBatch},
		{"InvalidMessageWritesNothing", acceptInvalidMessageWritesNothing},
		{"LeasedWorkIsHandedOver", acceptLeased},
		{"LeaseWithoutWorkRefused", acceptLeaseWithoutWork},
		{"StoredOnlyAnswersOnlyAStoredID", acceptStoredOnly},
		{"ResultsCarryTheStoredReportTo", acceptReportTo},
		{"FrontendDeletedUnderAccept", acceptFrontendDeleted},
	}
}

// acceptFrontendDeleted: a frontend deleted out from under an Accept that
// names it (through another instance of a site, while this one's directory
// still routed to it) gets no new message: each entry of a new id for
// local delivery to it is FrontendGone and nothing is written for it. An id
// already stored is a retry whatever its frontend; a StoredOnly entry is
// still Absent, forward work names no local frontend, and the other
// entries of the batch are stored. Once registered again, the frontend
// gets the id.
func acceptFrontendDeleted(f *fixture) {
	const fe = "fe-deleted"
	forFE := func(id string) persistence.NewMessage {
		m := msgFor(id, persistence.WorkDelivery, fe)
		m.Frontend = fe
		return m
	}
	f.accept(base, forFE("fd-stored"), newMsg("fd-first")) // registers fe and feA
	if err := f.store.DeleteFrontend(f.ctx, fe); err != nil {
		f.Fatalf("DeleteFrontend: %v", err)
	}
	batch := []persistence.NewMessage{forFE("fd-stored"), forFE("fd-new"), newMsg("fd-other"), forFE("fd-new"),
		msgFor("fd-fwd", persistence.WorkForward, "peer-x"), storedOnly(forFE("fd-so"))}
	res, err := f.store.Accept(f.ctx, at(time.Minute), batch)
	if err != nil {
		f.Fatalf("Accept: %v", err)
	}
	if len(res) != len(batch) {
		f.Fatalf("Accept returned %d results for %d messages", len(res), len(batch))
	}
	want := []struct {
		id                    string
		created, gone, absent bool
	}{
		{"fd-stored", false, false, false}, {"", false, true, false}, {"fd-other", true, false, false},
		{"", false, true, false}, {"fd-fwd", true, false, false}, {"", false, false, true},
	}
	for i, w := range want {
		r := res[i]
		if r.Message.ID != w.id || r.Created != w.created || r.FrontendGone != w.gone || r.Absent != w.absent || r.Conflict != "" {
			f.Errorf("entry %d (%s): id %q created %v frontend_gone %v absent %v conflict %q, want id %q created %v frontend_gone %v absent %v",
				i, batch[i].ID, r.Message.ID, r.Created, r.FrontendGone, r.Absent, r.Conflict, w.id, w.created, w.gone, w.absent)
		}
		if r.FrontendGone && (r.Work != nil || r.Relay != nil) {
			f.Errorf("entry %d (%s): FrontendGone with work %v relay %v", i, batch[i].ID, r.Work, r.Relay)
		}
	}
	if _, err := f.store.GetMessage(f.ctx, "fd-new"); !errors.Is(err, persistence.ErrNotFound) {
		f.Errorf("GetMessage(fd-new) = %v, want ErrNotFound: a message for a deleted frontend was stored", err)
	}
	f.putFrontend(persistence.Frontend{Name: fe, Mode: persistence.ModePull, CreatedAt: base, UpdatedAt: base})
	if r := f.accept(at(2*time.Minute), forFE("fd-new"))[0]; !r.Created || r.FrontendGone {
		f.Errorf("fd-new once its frontend is back: created %v frontend_gone %v, want created", r.Created, r.FrontendGone)
	}
}

// storedOnly is a client's submission of m's content that may not be
// stored: a retry of it finds the stored message, a first submit is Absent.
func storedOnly(m persistence.NewMessage) persistence.NewMessage {
	return persistence.NewMessage{ID: m.ID, SourceMSISDN: m.SourceMSISDN, DestinationMSISDN: m.DestinationMSISDN,
		Body: m.Body, Options: m.Options, SubmittedBy: m.SubmittedBy, StoredOnly: true}
}

// acceptStoredOnly: a StoredOnly submission writes nothing; its id stored
// (before, or created earlier in the same batch) answers the stored message
// (Created false, a Conflict for other content), its id absent answers
// Absent; it does not keep a later entry of its id in the batch from
// creating it.
func acceptStoredOnly(f *fixture) {
	f.accept(base, newMsg("so-stored"))
	other := storedOnly(newMsg("so-stored"))
	other.Body = "other content"
	res := f.accept(at(time.Minute), storedOnly(newMsg("so-stored")), other, storedOnly(newMsg("so-absent")),
		storedOnly(newMsg("so-later")), newMsg("so-later"), newMsg("so-new"), storedOnly(newMsg("so-new")))
	want := []struct {
		id              string
		created, absent bool
		conflict        string
	}{
		{"so-stored", false, false, ""}, {"so-stored", false, false, "message_body"}, {"", false, true, ""},
		{"so-later", false, false, ""}, {"so-later", true, false, ""}, {"so-new", true, false, ""}, {"so-new", false, false, ""},
	}
	for i, w := range want {
		r := res[i]
		if r.Message.ID != w.id || r.Created != w.created || r.Absent != w.absent || r.Conflict != w.conflict {
			f.Errorf("result %d: id %q created %v absent %v conflict %q; want id %q created %v absent %v conflict %q",
				i, r.Message.ID, r.Created, r.Absent, r.Conflict, w.id, w.created, w.absent, w.conflict)
		}
	}
	if got := f.get("so-stored"); got.Body != newMsg("so-stored").Body || f.historyLen("so-stored") != 1 {
		f.Errorf("so-stored changed: body %q, %d history entries", got.Body, f.historyLen("so-stored"))
	}
	if _, err := f.store.GetMessage(f.ctx, "so-absent"); !errors.Is(err, persistence.ErrNotFound) {
		f.Errorf("GetMessage(so-absent) = %v, want ErrNotFound: a stored-only submission was stored", err)
	}
	f.wantOutbox(3)
	alone := f.accept(at(time.Minute), storedOnly(newMsg("so-absent")))
	if !alone[0].Absent {
		f.Errorf("a batch of one absent stored-only submission: %+v, want Absent", alone[0])
	}
	bad := storedOnly(newMsg("so-bad"))
	bad.Work = &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: feA}
	if _, err := f.store.Accept(f.ctx, base, []persistence.NewMessage{bad}); err == nil {
		f.Errorf("Accept of a stored-only submission with work: no error")
	}
}

// acceptReportTo: every result names whom the message's reports go to, as
// stored (for a forwarded message, the peer that forwarded it), whoever
// the entry names: the intake answers a forward of a stored id duplicate
// only to that peer.
func acceptReportTo(f *fixture) {
	f.accept(base, reportMsg("rt-stored"), newMsg("rt-local"))
	again := reportMsg("rt-stored")
	again.ReportTo = "peer-other"
	lookup := storedOnly(reportMsg("rt-local"))
	lookup.ReportTo = peerP
	res := f.accept(at(time.Minute), again, lookup, reportMsg("rt-new"), storedOnly(reportMsg("rt-new")))
	for i, want := range []string{peerP, "", peerP, peerP} {
		if res[i].ReportTo != want {
			f.Errorf("result %d (%s): ReportTo %q, want %q", i, res[i].Message.ID, res[i].ReportTo, want)
		}
	}
}

// leased is m with its work written leased to owner until until.
func leased(m persistence.NewMessage, owner string, until time.Time) persistence.NewMessage {
	m.Lease = &persistence.Lease{Owner: owner, Until: until}
	return m
}

// acceptLeased: work written leased is returned as a claim would return
// it, counts an attempt (delivery), is nobody else's until the lease ends,
// and is completed or released like claimed work.
func acceptLeased(f *fixture) {
	until := at(time.Hour)
	res := f.accept(base, leased(newMsg("al-1"), ownerA, until), leased(newMsg("al-2"), ownerA, until),
		leased(fwdMsg("al-fwd", peerP), ownerA, until), newMsg("al-plain"))
	for i, id := range []string{"al-1", "al-2", "al-fwd"} {
		w := res[i].Work
		if w == nil {
			f.Fatalf("%s: no work handed over", id)
		}
		if w.MessageID != id || w.LeaseOwner != ownerA || w.LeaseEpoch != 0 || w.ID == 0 || w.Message.ID != id {
			f.Errorf("%s: work %+v", id, *w)
		}
		f.wantTime(id+" LeaseUntil", w.LeaseUntil, until)
		f.wantTime(id+" DueAt", w.DueAt, base)
	}
	if res[3].Work != nil {
		f.Errorf("al-plain: work %+v handed over without a lease", res[3].Work)
	}
	if a := res[0].Work.Message.Attempts; a != 1 || f.get("al-1").Attempts != 1 {
		f.Errorf("delivery work handed over: attempts %d (stored %d), want 1", a, f.get("al-1").Attempts)
	}
	if a := res[2].Work.Message.Attempts; a != 0 {
		f.Errorf("forward work handed over: attempts %d, want 0", a)
	}
	c := f.claimDelivery(feA, ownerB, base, 10)
	f.wantIDs("claim beside the leases", workIDs(c.Work), "al-plain")
	f.wantTime("NextDue (the lease end)", c.NextDue, until)
	f.completeAll(at(time.Minute), []persistence.Completion{persistence.Applied},
		outcome(persistence.WorkDelivery, feA, "al-1", persistence.ResultDelivered))
	f.wantState("al-1", messages.StateDelivered)
	if n, err := f.store.ReleaseLeases(f.ctx, ownerA); err != nil || n != 2 {
		f.Errorf("ReleaseLeases = %d, %v; want al-2 and al-fwd", n, err)
	}
	c = f.claimDelivery(feA, ownerB, at(time.Minute), 10)
	f.wantIDs("claim after the release", workIDs(c.Work), "al-2")
	if len(c.Work) == 1 && c.Work[0].Message.Attempts != 2 {
		f.Errorf("al-2 claimed with attempts %d, want 2", c.Work[0].Message.Attempts)
	}
	again := f.accept(at(time.Minute), leased(newMsg("al-2"), ownerA, at(2*time.Hour)))
	if again[0].Created || again[0].Work != nil {
		f.Errorf("an existing id accepted again with a lease: %+v", again[0])
	}
}

func acceptLeaseWithoutWork(f *fixture) {
	for _, m := range []persistence.NewMessage{
		leased(msgNoWork("aln"), ownerA, at(time.Hour)),
		leased(newMsg("alo"), "", at(time.Hour)),
		leased(newMsg("alu"), ownerA, time.Time{}),
	} {
		if _, err := f.store.Accept(f.ctx, base, []persistence.NewMessage{m}); err == nil {
			f.Errorf("Accept of %s with lease %+v and work %+v: no error", m.ID, m.Lease, m.Work)
		}
	}
	f.wantOutbox(0)
}

func acceptStoresEveryField(f *fixture) {
	nm := newMsg("acc-fields")
	nm.SourceMSISDN = "+4915112345678"
	nm.DestinationMSISDN = "+33612345678"
	nm.Body = "héllo wörld ✓ and 'quotes' \"too\""
	nm.SourceSMSC = "smsc-src"
	nm.DestSMSC = "smsc-dst"
	nm.Frontend = feB
	nm.Detail = "from client"
	got := f.accept(base, nm)
	if !got[0].Created {
		f.Errorf("Accept: Created = false for a new id")
	}
	want := expected(nm, base)
	f.checkMessage("Accept", got[0].Message, want)
	want.Seq = got[0].Message.Seq
	f.checkMessage("GetMessage", f.get(nm.ID), want)
}

func acceptTokenIsTokenOfID(f *fixture) {
	// Tokens are uint64; pick ids on both sides of 1<<63 so a store that keeps
	// them in a signed column must round-trip the top bit.
	var low, high string
	for i := 0; low == "" || high == ""; i++ {
		id := fmt.Sprintf("tok-%d", i)
		if messages.TokenOf(id) >= 1<<63 {
			if high == "" {
				high = id
			}
		} else if low == "" {
			low = id
		}
	}
	ids := []string{low, high, "ünïcode-ид-🚀"}
	var batch []persistence.NewMessage
	for _, id := range ids {
		batch = append(batch, newMsg(id))
	}
	res := f.accept(base, batch...)
	for i, id := range ids {
		want := messages.TokenOf(id)
		if res[i].Message.Token != want {
			f.Errorf("Accept(%q).Token = %d, want %d", id, res[i].Message.Token, want)
		}
		if got := f.get(id).Token; got != want {
			f.Errorf("GetMessage(%q).Token = %d, want %d", id, got, want)
		}
	}
	for _, m := range f.list(persistence.ListQuery{Limit: 10}).Messages {
		if m.Token != messages.TokenOf(m.ID) {
			f.Errorf("ListMessages: %q.Token = %d, want %d", m.ID, m.Token, messages.TokenOf(m.ID))
		}
	}
	for _, w := range f.claimDelivery(feA, ownerA, base, 10).Work {
		if w.Token != messages.TokenOf(w.MessageID) {
			f.Errorf("ClaimWork: %q.Token = %d, want %d", w.MessageID, w.Token, messages.TokenOf(w.MessageID))
		}
	}
}

func acceptSeqIncreases(f *fixture) {
	var seqs []int64
	var ids []string
	for _, r := range f.accept(base, newMsg("seq-1")) {
		seqs, ids = append(seqs, r.Message.Seq), append(ids, r.Message.ID)
	}
	for _, r := range f.accept(at(1), newMsg("seq-2")) {
		seqs, ids = append(seqs, r.Message.Seq), append(ids, r.Message.ID)
	}
	for _, r := range f.accept(at(2), newMsg("seq-3"), newMsg("seq-4"), newMsg("seq-5")) {
		seqs, ids = append(seqs, r.Message.Seq), append(ids, r.Message.ID)
	}
	for i, s := range seqs {
		if s <= 0 {
			f.Errorf("%s: Seq %d, want > 0 (0 is the cursor for \"from newest\")", ids[i], s)
		}
		if i > 0 && s <= seqs[i-1] {
			f.Errorf("%s: Seq %d not greater than %s's %d", ids[i], s, ids[i-1], seqs[i-1])
		}
		if got := f.get(ids[i]).Seq; got != s {
			f.Errorf("GetMessage(%s).Seq = %d, Accept said %d", ids[i], got, s)
		}
	}
}

func acceptTimesAreNow(f *fixture) {
	now := at(90*1e9 + 123) // nanoseconds that must be dropped
	res := f.accept(now, newMsg("acc-times"))
	for _, m := range []messages.Message{res[0].Message, f.get("acc-times")} {
		f.wantTime("CreatedAt", m.CreatedAt, now)
		f.wantTime("UpdatedAt", m.UpdatedAt, now)
		f.wantTime("SubmittedAt", m.SubmittedAt, now)
	}
}

func acceptFirstHistoryEntry(f *fixture) {
	nm := newMsg("acc-history")
	nm.Detail = "accepted from smsc-in"
	f.accept(base, nm)
	f.checkHistory(nm.ID, messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted from smsc-in"})

	q := newMsg("acc-history-q")
	q.State = messages.StateForwardQueued
	q.Detail = "peer unreachable"
	q.Work = &persistence.WorkSpec{Kind: persistence.WorkForward, Target: peerP, DueAt: base}
	f.accept(at(1e6), q)
	f.checkHistory(q.ID, messages.HistoryEntry{State: messages.StateForwardQueued, At: at(1e6), Detail: "peer unreachable"})
	f.wantState(q.ID, messages.StateForwardQueued)
}

func acceptWritesOutboxWork(f *fixture) {
	due := at(5e9)
	f.accept(base, msgDue("acc-work", due))
	f.wantOutbox(1)
	if c := f.claimDelivery(feA, ownerA, base, 10); len(c.Work) != 0 {
		f.Fatalf("ClaimWork before due_at returned %q", workIDs(c.Work))
	}
	c := f.claimDelivery(feA, ownerA, due, 10)
	if len(c.Work) != 1 {
		f.Fatalf("ClaimWork at due_at returned %d rows, want 1", len(c.Work))
	}
	w := c.Work[0]
	if w.Kind != persistence.WorkDelivery || w.Target != feA || w.MessageID != "acc-work" || w.Token != messages.TokenOf("acc-work") {
		f.Errorf("work = {%s %s %s %d}, want {delivery %s acc-work %d}", w.Kind, w.Target, w.MessageID, w.Token, feA, messages.TokenOf("acc-work"))
	}
	f.wantTime("Work.DueAt", w.DueAt, due)
	f.wantTime("Work.CreatedAt", w.CreatedAt, base)
}

func acceptNoOutboxRowWithoutWork(f *fixture) {
	f.accept(base, msgNoWork("acc-nowork"))
	f.wantOutbox(0)
	c := f.claimDelivery(feA, ownerA, at(24*3600e9), 10)
	if len(c.Work) != 0 || !c.NextDue.IsZero() {
		f.Errorf("ClaimWork = %q, NextDue %v; want nothing", workIDs(c.Work), c.NextDue)
	}
}

func acceptExistingIDReturnsStored(f *fixture) {
	first := newMsg("acc-dup")
	res := f.accept(base, first)
	stored := res[0].Message

	again := newMsg("acc-dup")
	again.Body = "a different body"
	again.Frontend = feB
	again.Detail = "second submit"
	again.Work = &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: feB, DueAt: at(60e9)}
	res = f.accept(at(60e9), again)
	if res[0].Created {
		f.Errorf("Accept of a stored id: Created = true")
	}
	want := expected(first, base)
	want.Seq = stored.Seq
	f.checkMessage("Accept of a stored id", res[0].Message, want)
	f.checkMessage("GetMessage", f.get("acc-dup"), want)
	f.checkHistory("acc-dup", messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"})
	f.wantOutbox(1)
	if c := f.claimDelivery(feB, ownerA, at(60e9), 10); len(c.Work) != 0 {
		f.Errorf("the repeated accept wrote work: %q", workIDs(c.Work))
	}
}

func acceptExistingIDAfterDelivery(f *fixture) {
	f.accept(base, newMsg("acc-done"))
	f.claimDelivery(feA, ownerA, base, 1)
	f.deliver(at(1e9), "acc-done")
	res := f.accept(at(2e9), newMsg("acc-done"))
	if res[0].Created {
		f.Errorf("Accept of a delivered id: Created = true")
	}
	want := expected(newMsg("acc-done"), base)
	want.State = messages.StateDelivered
	want.Attempts = 1
	want.UpdatedAt = norm(at(1e9))
	f.checkMessage("Accept of a delivered id", res[0].Message, want)
	f.checkMessage("GetMessage", f.get("acc-done"), want)
	if n := f.historyLen("acc-done"); n != 2 {
		f.Errorf("history has %d entries, want 2", n)
	}
	f.wantOutbox(0)
	if c := f.claimDelivery(feA, ownerA, at(3*3600e9), 10); len(c.Work) != 0 {
		f.Errorf("the repeated accept wrote work: %q", workIDs(c.Work))
	}
}

func acceptRepeatedIDInBatch(f *fixture) {
	one := newMsg("acc-twice")
	one.Body = "body one"
	two := newMsg("acc-twice")
	two.Body = "body two"
	res := f.accept(base, one, newMsg("acc-other"), two)
	f.wantIDs("result ids", []string{res[0].Message.ID, res[1].Message.ID, res[2].Message.ID}, "acc-twice", "acc-other", "acc-twice")
	if !res[0].Created || !res[1].Created || res[2].Created {
		f.Errorf("Created = %v %v %v, want true true false", res[0].Created, res[1].Created, res[2].Created)
	}
	if res[2].Message.Body != "body one" || res[2].Message.Seq != res[0].Message.Seq {
		f.Errorf("repeat returned body %q seq %d, want the first: body %q seq %d",
			res[2].Message.Body, res[2].Message.Seq, "body one", res[0].Message.Seq)
	}
	if got := f.get("acc-twice").Body; got != "body one" {
		f.Errorf("stored body %q, want %q", got, "body one")
	}
	if n := f.historyLen("acc-twice"); n != 1 {
		f.Errorf("history has %d entries, want 1", n)
	}
	f.wantOutbox(2)
	if got := f.stats().ByState[messages.StatePending]; got != 2 {
		f.Errorf("pending = %d, want 2", got)
	}
}

func acceptResultsInInputOrder(f *fixture) {
	f.accept(base, newMsg("acc-old"))
	res := f.accept(at(1e9), newMsg("acc-new-1"), newMsg("acc-old"), newMsg("acc-new-2"))
	f.wantIDs("result ids", []string{res[0].Message.ID, res[1].Message.ID, res[2].Message.ID}, "acc-new-1", "acc-old", "acc-new-2")
	if !res[0].Created || res[1].Created || !res[2].Created {
		f.Errorf("Created = %v %v %v, want true false true", res[0].Created, res[1].Created, res[2].Created)
	}
	f.wantTime("acc-old CreatedAt", res[1].Message.CreatedAt, base)
	f.wantTime("acc-new-2 CreatedAt", res[2].Message.CreatedAt, at(1e9))
}

func acceptThousandMessageBatch(f *fixture) {
	const n = 1000
	batch := make([]persistence.NewMessage, n)
	for i := range batch {
		batch[i] = newMsg(fmt.Sprintf("bulk-%04d", i))
	}
	res := f.accept(base, batch...)
	for i, r := range res {
		if r.Message.ID != batch[i].ID || !r.Created {
			f.Fatalf("result %d = %s created=%v, want %s created", i, r.Message.ID, r.Created, batch[i].ID)
		}
		if i > 0 && r.Message.Seq <= res[i-1].Message.Seq {
			f.Fatalf("result %d: Seq %d not greater than %d", i, r.Message.Seq, res[i-1].Message.Seq)
		}
	}
	st := f.stats()
	if st.ByState[messages.StatePending] != n || st.OutboxDepth != n {
		f.Errorf("Stats: pending %d outbox %d, want %d and %d", st.ByState[messages.StatePending], st.OutboxDepth, n, n)
	}
	all := f.listAll("", 300)
	if len(all) != n || all[0].ID != "bulk-0999" || all[n-1].ID != "bulk-0000" {
		f.Errorf("ListMessages paged %d messages (first %s), want %d newest first", len(all), all[0].ID, n)
	}
	if c := f.claimDelivery(feA, ownerA, base, n); len(c.Work) != n {
		f.Errorf("ClaimWork returned %d rows, want %d", len(c.Work), n)
	}
}

func acceptEmptyBatch(f *fixture) {
	res, err := f.store.Accept(f.ctx, base, nil)
	if err != nil || len(res) != 0 {
		f.Errorf("Accept(nil) = %d results, %v; want none, nil", len(res), err)
	}
}

func acceptInvalidMessageWritesNothing(f *fixture) {
	bad := newMsg("")
	_, err := f.store.Accept(f.ctx, base, []persistence.NewMessage{newMsg("acc-valid"), bad})
	if err == nil {
		f.Fatalf("Accept with an empty id: no error")
	}
	if _, err := f.store.GetMessage(f.ctx, "acc-valid"); !errors.Is(err, persistence.ErrNotFound) {
		f.Errorf("the valid message of a failed batch: GetMessage err %v, want ErrNotFound (all or nothing)", err)
	}
	f.wantOutbox(0)
}

func acceptForwardQueuedSetsQueuedAt(f *fixture) {
	now := at(5e9 + 123) // nanoseconds that must be dropped
	res := f.accept(now, queuedMsg("acc-queued", peerP), fwdMsg("acc-fwd", peerP))
	wantQ, wantP := expected(queuedMsg("acc-queued", peerP), now), expected(fwdMsg("acc-fwd", peerP), now)
	if wantQ.QueuedAt == nil || wantP.QueuedAt != nil {
		f.Fatalf("expected() does not set QueuedAt for forward_queued only; the suite is wrong")
	}
	f.checkMessage("Accept", res[0].Message, wantQ)
	f.checkMessage("Accept", res[1].Message, wantP)
	f.checkMessage("GetMessage", f.get("acc-queued"), wantQ)
	f.checkMessage("GetMessage", f.get("acc-fwd"), wantP)
	for _, m := range f.list(persistence.ListQuery{Limit: 10}).Messages {
		f.checkMessage("ListMessages", m, map[string]messages.Message{"acc-queued": wantQ, "acc-fwd": wantP}[m.ID])
	}
	for _, m := range f.list(persistence.ListQuery{State: messages.StateForwardQueued, Limit: 10}).Messages {
		f.checkMessage("ListMessages(forward_queued)", m, wantQ)
	}
	c := f.claimOf(persistence.WorkForward, peerP, ownerA, now, 10)
	f.wantIDSet("claim", workIDs(c.Work), "acc-queued", "acc-fwd")
	for _, w := range c.Work {
		f.checkMessage("ClaimWork", w.Message, map[string]messages.Message{"acc-queued": wantQ, "acc-fwd": wantP}[w.MessageID])
	}
}
