package storetest

import (
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func writeCases() []testCase {
	return []testCase{
		{"EveryPartInOneCall", writeEveryPart},
		{"PartsInOrder", writePartsInOrder},
		{"RefusedClaimKeepsTheRest", writeRefusedClaim},
		{"InvalidPartChangesNothing", writeInvalidPart},
		{"Empty", writeEmpty},
	}
}

func (f *fixture) write(now time.Time, w persistence.Write) persistence.Written {
	f.Helper()
	f.register(w.Accept)
	got, err := f.store.Write(f.ctx, now, w)
	if err != nil {
		f.Fatalf("Write: %v", err)
	}
	if len(got.Completions) != len(w.Outcomes) || len(got.Reported) != len(w.Statuses) ||
		len(got.Accepted) != len(w.Accept) || len(got.Claims) != len(w.Claims) {
		f.Fatalf("Write returned %d completions, %d reports, %d accepted, %d claims for %d, %d, %d, %d",
			len(got.Completions), len(got.Reported), len(got.Accepted), len(got.Claims),
			len(w.Outcomes), len(w.Statuses), len(w.Accept), len(w.Claims))
	}
	return got
}

// writeEveryPart: an ack, a peer's report, new messages and the next claim
// in one call, each with the result its one-part call would give.
func writeEveryPart(f *fixture) {
	f.accept(base, newMsg("w-ack"), fwdMsg("w-fwd", peerP))
	f.claimDelivery(feA, ownerA, base, 10)
	f.claimOf(persistence.WorkForward, peerP, ownerA, base, 10)
	f.completeAll(at(time.Second), []persistence.Completion{persistence.Applied},
		outcome(persistence.WorkForward, peerP, "w-fwd", persistence.ResultDelivered))

	now := at(time.Minute)
	got := f.write(now, persistence.Write{
		Outcomes: []persistence.Outcome{
			{Kind: persistence.WorkDelivery, Target: feA, MessageID: "w-ack", Result: persistence.ResultDelivered, Detail: "acked"},
			{Kind: persistence.WorkDelivery, Target: feA, MessageID: "w-nobody", Result: persistence.ResultDelivered},
		},
		Statuses: []persistence.StatusUpdate{status("w-fwd", peerP, persistence.ResultDelivered)},
		Accept:   []persistence.NewMessage{msgFor("w-new", persistence.WorkDelivery, feB), newMsg("w-ack")},
		Claims: []persistence.ClaimRequest{
			{Kind: persistence.WorkDelivery, Target: feB, Owner: ownerA, Limit: 10, Now: now, Lease: lease},
			{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA, Limit: 10, Now: now, Lease: lease},
		},
	})
	if got.Completions[0] != persistence.Applied || got.Completions[1] != persistence.NoWork {
		f.Errorf("completions %v, want [applied no_work]", got.Completions)
	}
	if got.Reported[0] != persistence.Applied {
		f.Errorf("reported %v, want [applied]", got.Reported)
	}
	if !got.Accepted[0].Created || got.Accepted[1].Created || got.Accepted[1].Message.State != messages.StateDelivered {
		f.Errorf("accepted %+v: want w-new created and w-ack returned as stored (delivered by this very call)", got.Accepted)
	}
	f.wantIDs("claim on feB", workIDs(got.Claims[0].Work), "w-new")
	if len(got.Claims[0].Work) == 1 && got.Claims[0].Work[0].Message.Attempts != 1 {
		f.Errorf("claimed w-new with attempts %d, want 1", got.Claims[0].Work[0].Message.Attempts)
	}
	f.wantIDs("claim on feA", workIDs(got.Claims[1].Work))
	f.wantState("w-ack", messages.StateDelivered)
	f.wantState("w-fwd", messages.StateDelivered)
	f.ledger("w-ack", feA)
	f.wantOutbox(1)
}

// writePartsInOrder: outcomes before statuses (a later item sees an earlier
// one), messages stored before claims look for work.
func writePartsInOrder(f *fixture) {
	f.accept(base, fwdMsg("wo-fwd", peerP))
	f.claimOf(persistence.WorkForward, peerP, ownerA, base, 10)
	now := at(time.Minute)
	got := f.write(now, persistence.Write{
		Outcomes: []persistence.Outcome{outcome(persistence.WorkForward, peerP, "wo-fwd", persistence.ResultDelivered)},
		Statuses: []persistence.StatusUpdate{status("wo-fwd", peerP, persistence.ResultFailed)},
		Accept:   []persistence.NewMessage{msgDue("wo-new", now)},
		Claims:   []persistence.ClaimRequest{{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA, Limit: 10, Now: now, Lease: lease}},
	})
	if got.Completions[0] != persistence.Applied || got.Reported[0] != persistence.Applied {
		f.Errorf("completion %v, report %v; want applied, applied", got.Completions, got.Reported)
	}
	f.checkHistory("wo-fwd",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateForwarded, At: now, Detail: "forward delivered"},
		messages.HistoryEntry{State: messages.StateFailed, At: now, Detail: persistence.StatusDetail(status("wo-fwd", peerP, persistence.ResultFailed))},
	)
	f.wantIDs("claim after the accept in the same call", workIDs(got.Claims[0].Work), "wo-new")
}

// writeRefusedClaim: a claim under a stale epoch comes back Refused; the
// outcome and the other claim of the same call still commit.
func writeRefusedClaim(f *fixture) {
	f.publish(0, alone(1, ownerA))
	f.accept(base, newMsg("wr-a"), newMsg("wr-b"))
	c := f.claim(fenced(persistence.WorkDelivery, feA, ownerA, base, 1, wholeRing))
	f.wantIDs("fenced claim", workIDs(c.Work), "wr-a", "wr-b")
	now := at(2 * lease)
	got := f.write(now, persistence.Write{
		Outcomes: []persistence.Outcome{fencedOutcome("wr-a", persistence.ResultDelivered, 1, ownerA)},
		Claims: []persistence.ClaimRequest{
			fenced(persistence.WorkDelivery, feA, ownerA, now, 7, wholeRing),
			fenced(persistence.WorkDelivery, feA, ownerB, now, 1, wholeRing),
			fenced(persistence.WorkDelivery, feA, ownerA, now, 1, wholeRing),
		},
	})
	if got.Completions[0] != persistence.Applied {
		f.Errorf("completion %v, want applied", got.Completions)
	}
	if !got.Claims[0].Refused || len(got.Claims[0].Work) != 0 {
		f.Errorf("claim under a stale epoch: %+v, want refused and empty", got.Claims[0])
	}
	if !got.Claims[1].Refused || len(got.Claims[1].Work) != 0 {
		f.Errorf("claim of ranges its owner does not hold: %+v, want refused and empty", got.Claims[1])
	}
	if got.Claims[2].Refused {
		f.Errorf("claim under the stored epoch refused")
	}
	f.wantIDs("the third claim (wr-b's lease ran out)", workIDs(got.Claims[2].Work), "wr-b")
	f.wantState("wr-a", messages.StateDelivered)
}

// writeInvalidPart: one invalid part refuses the whole call.
func writeInvalidPart(f *fixture) {
	f.accept(base, newMsg("wi"))
	_, err := f.store.Write(f.ctx, at(time.Minute), persistence.Write{
		Outcomes: []persistence.Outcome{outcome(persistence.WorkDelivery, feA, "wi", persistence.ResultDelivered)},
		Accept:   []persistence.NewMessage{newMsg("wi-new")},
		Claims:   []persistence.ClaimRequest{{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA, Limit: 0, Now: base, Lease: lease}},
	})
	if err == nil {
		f.Fatalf("Write with a claim of limit 0: no error")
	}
	f.wantState("wi", messages.StatePending)
	f.wantOutbox(1)
	f.noLedger("wi", feA)
}

func writeEmpty(f *fixture) {
	if _, err := f.store.Write(f.ctx, base, persistence.Write{}); err != nil {
		f.Errorf("empty Write: %v", err)
	}
}
