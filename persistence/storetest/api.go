package storetest

import (
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The cases of the v2 API: the optional message fields, id conflicts of
// clients' submissions, and pull acks of messages never offered.
func apiCases() []testCase {
	return []testCase{
		{"StoresOptionalFields", apiStoresOptionalFields},
		{"ReusedIDWithOtherContentConflicts", apiReusedIDConflicts},
		{"ReusedIDWithSameContentDoesNotConflict", apiReusedIDSameContent},
		{"RepeatInBatchWithOtherContentConflicts", apiRepeatInBatchConflicts},
		{"ForwardOfStoredIDConflictsOnlyOnContent", apiForwardConflictsOnlyOnContent},
		{"AckOfMessageNeverOfferedChangesNothing", apiAckNotOffered},
		{"AckAfterTheLeaseRanOutApplies", apiAckAfterLease},
		{"AckNamingAnAttemptOfferedAgainIsStale", apiAckStale},
		{"OwnValidityExpires", apiOwnValidityExpires},
		{"ReportedAttemptsAreTheMessages", apiReportedAttempts},
		{"NextAttemptAndLastDetail", apiNextAttemptAndLastDetail},
	}
}

// binaryMsg is newMsg as a binary message: every byte value, validity,
// scheduled delivery and message class 1.
func binaryMsg(id string) persistence.NewMessage {
	nm := newMsg(id)
	nm.Body = ""
	nm.Binary = make([]byte, 256)
	for i := range nm.Binary {
		nm.Binary[i] = byte(i)
	}
	nm.DataCoding = messages.CodingBinary
	nm.ValidityUntil = ptr(at(3*time.Hour + 123456789))
	nm.DeliverAfter = ptr(at(time.Hour + 987654321))
	nm.MessageClass = messages.Class(1)
	return nm
}

func apiStoresOptionalFields(f *fixture) {
	bin := binaryMsg("api-bin")
	gsm := newMsg("api-gsm")
	gsm.DataCoding = messages.CodingGSM7
	gsm.Body = "€ and {braces} ok"
	gsm.MessageClass = messages.Class(0) // a flash SMS: class 0 is not none
	res := f.accept(base, bin, gsm, newMsg("api-plain"))
	for i, nm := range []persistence.NewMessage{bin, gsm, newMsg("api-plain")} {
		want := expected(nm, base)
		want.ValidityUntil, want.DeliverAfter = nm.ValidityUntil, nm.DeliverAfter
		f.checkMessage("Accept", res[i].Message, want)
		want.Seq = res[i].Message.Seq
		f.checkMessage("GetMessage", f.get(nm.ID), want)
	}
	if m := f.get("api-plain"); m.Binary != nil || m.DataCoding != "" || m.ValidityUntil != nil || m.DeliverAfter != nil || m.MessageClass != nil {
		f.Errorf("a message without optional fields reads back %+v", m.Options)
	}
	page := f.list(persistence.ListQuery{Limit: 10})
	for _, m := range page.Messages {
		if m.ID == "api-bin" && string(m.Binary) != string(bin.Binary) {
			f.Errorf("ListMessages: binary body %x, want %x", m.Binary, bin.Binary)
		}
	}
	c := f.claimDelivery(feA, ownerA, base, 10)
	for _, w := range c.Work {
		if w.MessageID == "api-bin" && (string(w.Message.Binary) != string(bin.Binary) || w.Message.DataCoding != messages.CodingBinary ||
			classString(w.Message.MessageClass) != "1") {
			f.Errorf("ClaimWork: message %+v lost its optional fields", w.Message.Options)
		}
	}
}

func apiReusedIDConflicts(f *fixture) {
	first := newMsg("api-dup")
	f.accept(base, first)
	for field, change := range map[string]func(*persistence.NewMessage){
		"source_msisdn":      func(m *persistence.NewMessage) { m.SourceMSISDN = "+1999" },
		"destination_msisdn": func(m *persistence.NewMessage) { m.DestinationMSISDN = "4400" },
		"message_body":       func(m *persistence.NewMessage) { m.Body = "another body" },
		"data_coding":        func(m *persistence.NewMessage) { m.DataCoding = messages.CodingUCS2 },
		"message_class":      func(m *persistence.NewMessage) { m.MessageClass = messages.Class(0) },
	} {
		again := newMsg("api-dup")
		change(&again)
		res := f.accept(at(time.Minute), again)
		if res[0].Created || res[0].Conflict != field {
			f.Errorf("reuse with another %s: Created %v, Conflict %q", field, res[0].Created, res[0].Conflict)
		}
	}
	want := expected(first, base)
	f.checkMessage("after the conflicts", f.get("api-dup"), want)
	f.wantOutbox(1)
	if n := f.historyLen("api-dup"); n != 1 {
		f.Errorf("history has %d entries, want 1", n)
	}
	f.accept(base, binaryMsg("api-dup-bin"))
	again := binaryMsg("api-dup-bin")
	again.Binary = []byte{0, 1, 2}
	if res := f.accept(at(time.Minute), again); res[0].Created || res[0].Conflict != "message_body_base64" {
		f.Errorf("reuse with other bytes: Created %v, Conflict %q", res[0].Created, res[0].Conflict)
	}
}

func apiReusedIDSameContent(f *fixture) {
	f.accept(base, newMsg("api-same"))
	again := newMsg("api-same")
	again.Frontend, again.DestSMSC, again.Detail = feB, "elsewhere", "routed elsewhere now"
	again.Work = &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: feB, DueAt: at(time.Minute)}
	res := f.accept(at(time.Minute), again)
	if res[0].Created || res[0].Conflict != "" {
		f.Errorf("the same content again: Created %v, Conflict %q; want the stored message", res[0].Created, res[0].Conflict)
	}
	f.wantOutbox(1)
}

func apiRepeatInBatchConflicts(f *fixture) {
	one := newMsg("api-twice")
	two := newMsg("api-twice")
	two.Body = "other"
	three := newMsg("api-twice")
	res := f.accept(base, one, two, three)
	if !res[0].Created || res[1].Conflict != "message_body" || res[2].Conflict != "" || res[2].Created {
		f.Errorf("results %+v %+v %+v: want created, conflict on message_body, repeat", res[0], res[1], res[2])
	}
	if got := f.get("api-twice").Body; got != one.Body {
		f.Errorf("stored body %q, want the first's", got)
	}
}

// apiForwardConflictsOnlyOnContent: a peer's forward of a stored id with
// the same content is its retry (another trace context included); with
// other content it is a Conflict, as a client's submission is.
func apiForwardConflictsOnlyOnContent(f *fixture) {
	fwd := newMsg("api-fwd")
	fwd.ReportTo = peerP
	f.accept(base, fwd)
	retry := newMsg("api-fwd")
	retry.ReportTo = peerP
	retry.Trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if res := f.accept(at(time.Minute), retry); res[0].Created || res[0].Conflict != "" {
		f.Errorf("a peer's forward of a stored id again: Created %v, Conflict %q; want a duplicate", res[0].Created, res[0].Conflict)
	}
	again := newMsg("api-fwd")
	again.ReportTo = peerP
	again.Body = "changed on the way"
	if res := f.accept(at(time.Minute), again); res[0].Created || res[0].Conflict != "message_body" {
		f.Errorf("a peer's forward of a stored id with another body: Created %v, Conflict %q; want a message_body conflict", res[0].Created, res[0].Conflict)
	}
	if got := f.get("api-fwd").Body; got != fwd.Body {
		f.Errorf("stored body %q, want the first's", got)
	}
}

func apiAckNotOffered(f *fixture) {
	f.accept(base, newMsg("api-never"))
	before := f.get("api-never")
	for _, r := range []persistence.Result{persistence.ResultDelivered, persistence.ResultFailed, persistence.ResultRetry} {
		f.completeOne(at(time.Second), persistence.Outcome{MessageID: "api-never", Result: r, RetryAt: at(time.Hour), Ack: true},
			persistence.NotOffered)
	}
	f.checkMessage("after acks of a message never offered", f.get("api-never"), before)
	f.noLedger("api-never", feA)
	if c := f.claimDelivery(feA, ownerA, base, 10); len(c.Work) != 1 {
		f.Errorf("the message's work is gone: claim %q", workIDs(c.Work))
	}
	// Offered now: the same ack applies.
	f.completeOne(at(2*time.Second), persistence.Outcome{MessageID: "api-never", Result: persistence.ResultDelivered, Ack: true},
		persistence.Applied)
	f.wantState("api-never", messages.StateDelivered)
}

func apiAckAfterLease(f *fixture) {
	f.accept(base, newMsg("api-late"))
	f.store.ClaimWork(f.ctx, persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA,
		Limit: 1, Now: base, Lease: time.Second})
	// The lease ran out (nobody claimed the row again): the frontend's
	// verdict still stands.
	f.completeOne(at(time.Minute), persistence.Outcome{MessageID: "api-late", Result: persistence.ResultDelivered, Ack: true},
		persistence.Applied)
	f.wantState("api-late", messages.StateDelivered)
}

// apiAckStale: poller A's lease of attempt 1 ran out and poller B (here
// or at another instance) claimed attempt 2 before A's verdicts naming
// attempt 1 were recorded. A's retry and failed are stale: nothing
// changes, B's lease stands (applied, the retry made the row due again,
// unleased, and the message was offered a third time while B held it; the
// failure dead-lettered the message B was delivering). A delivered
// verdict naming attempt 1 is taken, and B's verdicts naming attempt 2
// apply.
func apiAckStale(f *fixture) {
	f.accept(base, newMsg("api-stale"), newMsg("api-stale-d"))
	for _, owner := range []string{ownerA, ownerB} { // A's lease of attempt 1 runs out; B claims attempt 2
		now := at(time.Minute)
		if owner == ownerA {
			now = base
		}
		c := f.claim(persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: owner,
			Limit: 2, Now: now, Lease: time.Second})
		f.wantIDSet("claim of "+owner, workIDs(c.Work), "api-stale", "api-stale-d")
	}
	before := f.get("api-stale")
	if before.Attempts != 2 {
		f.Fatalf("attempts %d after two claims, want 2", before.Attempts)
	}
	ack := func(id string, r persistence.Result, named int) persistence.Outcome {
		return persistence.Outcome{Kind: persistence.WorkDelivery, Target: feA, MessageID: id, Result: r, RetryAt: at(2 * time.Minute), Reason: "busy",
			Detail: fmt.Sprintf("attempt %d %s", named, r), Attempt: named, Named: named, Ack: true}
	}
	f.completeAll(at(time.Minute+100*time.Millisecond), []persistence.Completion{persistence.Stale, persistence.Stale},
		ack("api-stale", persistence.ResultRetry, 1), ack("api-stale", persistence.ResultFailed, 1))
	f.checkMessage("after stale verdicts naming attempt 1", f.get("api-stale"), before)
	f.noLedger("api-stale", feA)
	if c := f.claimDelivery(feA, ownerC, at(time.Minute+500*time.Millisecond), 10); len(c.Work) != 0 {
		f.Errorf("B's lease of attempt 2 was taken away: claim %q", workIDs(c.Work))
	}
	// A delivered verdict is taken whatever attempt it names.
	f.completeOne(at(time.Minute+200*time.Millisecond), ack("api-stale-d", persistence.ResultDelivered, 1), persistence.Applied)
	f.wantState("api-stale-d", messages.StateDelivered)
	// B's own retry, naming attempt 2, applies.
	f.completeOne(at(time.Minute+300*time.Millisecond), ack("api-stale", persistence.ResultRetry, 2), persistence.Applied)
	f.wantState("api-stale", messages.StateRetry)
}

func apiOwnValidityExpires(f *fixture) {
	short := newMsg("api-short")
	short.ValidityUntil = ptr(at(time.Hour))
	later := newMsg("api-later")
	later.ValidityUntil = ptr(at(3 * time.Hour))
	f.accept(base, short, later, newMsg("api-node-validity"))
	// The node's validity is far from over; only api-short's own has passed.
	got := f.expire(persistence.ExpireRequest{Now: at(2 * time.Hour), SubmittedBefore: at(-time.Hour), Limit: 10})
	f.wantIDs("expired", messageIDs(got), "api-short")
	f.wantState("api-short", messages.StateFailed)
	if m := f.get("api-short"); m.Reason != messages.ReasonExpired {
		f.Errorf("reason %q, want expired", m.Reason)
	}
	f.wantState("api-later", messages.StatePending)
	f.wantState("api-node-validity", messages.StatePending)
	// The node's validity still applies to the others.
	got = f.expire(persistence.ExpireRequest{Now: at(2 * time.Hour), SubmittedBefore: at(time.Second), Limit: 10})
	f.wantIDSet("expired by the node's validity", messageIDs(got), "api-later", "api-node-validity")
}

func apiReportedAttempts(f *fixture) {
	f.accept(base, fwdMsg("api-att", peerP), fwdMsg("api-att-none", peerP))
	f.applyStatus(at(time.Minute), []persistence.Completion{persistence.Applied, persistence.Applied},
		persistence.StatusUpdate{ID: "api-att", From: peerP, Result: persistence.ResultDelivered, At: at(time.Second), Attempts: 3},
		persistence.StatusUpdate{ID: "api-att-none", From: peerP, Result: persistence.ResultDelivered, At: at(time.Second)})
	if m := f.get("api-att"); m.State != messages.StateDelivered || m.Attempts != 3 {
		f.Errorf("reported with 3 attempts: %s with %d attempts", m.State, m.Attempts)
	}
	if m := f.get("api-att-none"); m.Attempts != 0 {
		f.Errorf("reported without attempts (an older peer): %d attempts, want 0", m.Attempts)
	}
}

func apiNextAttemptAndLastDetail(f *fixture) {
	f.accept(base, msgDue("api-next", at(time.Minute)), newMsg("api-done"))
	check := func(what, id string, due *time.Time, detail string) {
		f.Helper()
		var listed messages.Message
		for _, m := range f.list(persistence.ListQuery{Limit: 10}).Messages {
			if m.ID == id {
				listed = m
			}
		}
		for where, m := range map[string]messages.Message{"GetMessage": f.get(id), "ListMessages": listed} {
			if msg := queuedDiff(m.NextAttemptAt, due); msg != "" || m.LastDetail != detail {
				f.Errorf("%s: %s: next attempt %v (%s), last detail %q; want %q", what, where, m.NextAttemptAt, msg, m.LastDetail, detail)
			}
		}
	}
	check("accepted", "api-next", ptr(at(time.Minute)), "accepted")
	f.claimDelivery(feA, ownerA, at(time.Minute), 10)
	f.completeOne(at(2*time.Minute), persistence.Outcome{MessageID: "api-next", Result: persistence.ResultRetry, RetryAt: at(10 * time.Minute),
		Detail: "attempt 1 failed: busy; retry in 8m"}, persistence.Applied)
	check("retrying", "api-next", ptr(at(10*time.Minute)), "attempt 1 failed: busy; retry in 8m")
	f.claimDelivery(feA, ownerA, base, 10)
	f.deliver(at(time.Second), "api-done")
	check("delivered", "api-done", nil, "delivered")
}
