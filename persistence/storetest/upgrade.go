package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// CheckUpgradeFrom0001 checks a store opened on a database its schema 0001
// wrote (before the ledger had kinds of work) holding a delivered message id
// whose ledger entry for target has the detail "acked": the entry must now
// be a delivery entry, with no forward entry beside it, and the message not
// queued for a peer; no ring is published yet.
func CheckUpgradeFrom0001(t testing.TB, s persistence.Store, id, target string) {
	t.Helper()
	ctx := context.Background()
	e, err := s.Ledger(ctx, persistence.WorkDelivery, id, target)
	if err != nil || e.Result != persistence.ResultDelivered || e.Detail != "acked" || e.Kind != persistence.WorkDelivery {
		t.Errorf("Ledger after the upgrade = %+v, %v; want the delivery entry", e, err)
	}
	if _, err := s.Ledger(ctx, persistence.WorkForward, id, target); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("forward ledger after the upgrade: %v, want ErrNotFound", err)
	}
	if r, err := s.Ring(ctx); err != nil || r.Epoch != 0 || len(r.Owners) != 0 || r.Members != nil || !r.PublishedAt.IsZero() {
		t.Errorf("Ring after the upgrade = %+v, %v; want none", r, err)
	}
	m, err := s.GetMessage(ctx, id)
	if err != nil || m.QueuedAt != nil || m.State != messages.StateDelivered {
		t.Errorf("message after the upgrade = %+v, %v", m, err)
	}
}

// HistoryRewinder rewrites a message as a store wrote it before its row
// held history entries (persistence.HeldByRow): the value open returns
// must implement it (a test-only wrapper, like Recounter).
type HistoryRewinder interface {
	// UnholdHistory moves the entries the message's row holds, beyond
	// its first keep (0 or 1), into history rows with their ordinals, and
	// clears them from the row: keep 1 is a row written before the second
	// entry was held, keep 0 one written before the first was.
	UnholdHistory(ctx context.Context, id string, keep int) error
}

// UnholdHistorySQL are the statements of UnholdHistory for keep, each
// taking the message's id as $1. Both stores' schemas share these names,
// so their wrappers run them as they are (like OrphansSQL).
func UnholdHistorySQL(keep int) []string {
	stmts := []string{`INSERT INTO history (message_id, ordinal, state, at, detail)
			SELECT id, 2, second_state, second_at, second_detail FROM messages WHERE id = $1 AND second_state <> ''`,
		`UPDATE messages SET second_state = '', second_at = NULL, second_detail = '' WHERE id = $1`}
	if keep == 0 {
		stmts = append(stmts, `INSERT INTO history (message_id, ordinal, state, at, detail)
			SELECT id, 1, first_state, created_at, first_detail FROM messages WHERE id = $1 AND first_state <> ''`,
			`UPDATE messages SET first_state = '', first_detail = '' WHERE id = $1`)
	}
	return stmts
}

func upgradeCases() []testCase {
	return []testCase{
		{"HistoryOfEarlierRows", historyOfEarlierRows},
		{"DeferralAfterAnEarlierSecondEntry", deferralAfterAnEarlierSecondEntry},
	}
}

// deferralAfterAnEarlierSecondEntry: a message at history_len 2 whose
// second entry is a history row, as a store wrote it before the row held
// that entry (an empty second_state), has that row as its last entry,
// whatever else the row's second_* columns say (UnholdHistorySQL leaves
// its attempt and deferrals there; the history row it writes has
// neither, as one written before they were kept). A deferral of the same
// attempt then follows an entry that counts no deferral: it is an entry
// of its own, not folded into the columns of an entry the row does not
// hold (which put that entry back in the row, beside its history row:
// the history read it twice, out of order).
func deferralAfterAnEarlierSecondEntry(f *fixture) {
	rw, ok := f.store.(HistoryRewinder)
	if !ok {
		f.Fatalf("the store under test does not implement storetest.HistoryRewinder")
	}
	f.accept(base, newMsg("up-deferred"))
	deferral := func(now time.Time, detail string) {
		f.Helper()
		if c := f.claimDelivery(feA, ownerA, now, 1); len(c.Work) != 1 || c.Work[0].Message.Attempts != 1 {
			f.Fatalf("claim at %v: %q, want up-deferred at attempt 1", now.Sub(base), workIDs(c.Work))
		}
		f.completeOne(now.Add(time.Second), persistence.Outcome{MessageID: "up-deferred", Result: persistence.ResultRetry,
			RetryAt: now.Add(time.Minute), Reason: "busy", Detail: detail, Attempt: 1, Deferred: true, Owner: ownerA},
			persistence.Applied)
	}
	deferral(base, "not attempted (attempt 1 given back)")
	if err := rw.UnholdHistory(f.ctx, "up-deferred", 1); err != nil {
		f.Fatalf("UnholdHistory: %v", err)
	}
	deferral(at(time.Minute), "not attempted again (attempt 1 given back)")
	f.checkHistory("up-deferred",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateRetry, At: at(time.Second), Detail: "not attempted (attempt 1 given back)"},
		messages.HistoryEntry{State: messages.StateRetry, At: at(time.Minute + time.Second), Detail: "not attempted again (attempt 1 given back)"})
	f.wantHistoryMarks("up-deferred", [2]int{0, 0}, [2]int{0, 0}, [2]int{1, 1})
}

// historyOfEarlierRows: messages whose history the row does not hold (as
// earlier schemas wrote them) read, grow and purge like new ones.
func historyOfEarlierRows(f *fixture) {
	rw, ok := f.store.(HistoryRewinder)
	if !ok {
		f.Fatalf("the store under test does not implement storetest.HistoryRewinder")
	}
	unhold := func(id string, keep int) {
		f.Helper()
		if err := rw.UnholdHistory(f.ctx, id, keep); err != nil {
			f.Fatalf("UnholdHistory(%s, %d): %v", id, keep, err)
		}
	}
	accepted := messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"}
	busy := messages.HistoryEntry{State: messages.StateRetry, At: at(1e9), Detail: "busy"}
	done := messages.HistoryEntry{State: messages.StateDelivered, At: at(3e9), Detail: "delivered"}
	ids := []string{"up-second-row", "up-first-row", "up-both-rows", "up-new"}
	for _, id := range ids {
		f.accept(base, newMsg(id))
	}
	f.claimDelivery(feA, ownerA, base, 10)
	for _, id := range []string{"up-second-row", "up-both-rows", "up-new"} {
		f.retry(at(1e9), id, at(2e9))
	}
	unhold("up-second-row", 1)
	unhold("up-first-row", 0)
	unhold("up-both-rows", 0)
	f.checkHistory("up-second-row", accepted, busy)
	f.checkHistory("up-first-row", accepted)
	f.checkHistory("up-both-rows", accepted, busy)
	f.checkHistory("up-new", accepted, busy)

	f.claimDelivery(feA, ownerA, at(2e9), 10)
	for _, id := range ids {
		f.deliver(at(3e9), id)
	}
	f.checkHistory("up-second-row", accepted, busy, done)
	f.checkHistory("up-first-row", accepted, done)
	f.checkHistory("up-both-rows", accepted, busy, done)
	f.checkHistory("up-new", accepted, busy, done)
	listed := map[string]string{}
	for _, m := range f.list(persistence.ListQuery{Limit: 10}).Messages {
		listed[m.ID] = m.LastDetail
	}
	for _, id := range ids {
		if listed[id] != "delivered" || f.get(id).LastDetail != "delivered" {
			f.Errorf("%s: last detail %q listed, %q got; want delivered", id, listed[id], f.get(id).LastDetail)
		}
	}

	// The purge leaves none of their history rows behind (the suite's
	// reference check after the case).
	got := f.purge(retention(at(hour), at(hour), at(hour)), nil)
	if len(got) != len(ids) {
		f.Errorf("purged %d, want %d", len(got), len(ids))
	}
}
