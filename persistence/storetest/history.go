package storetest

import (
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func historyCases() []testCase {
	return []testCase{
		{"EntriesKeepTheirAttempt", historyEntriesKeepTheirAttempt},
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
