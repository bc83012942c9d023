package persistence

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestDeferralsFold: a deferral whose message's last entry is a deferral
// of the same attempt updates that entry, where it is written (the row's
// second, a history row loaded, or one this transaction appends); any
// other entry is appended.
func TestDeferralsFold(t *testing.T) {
	now := t0.Add(time.Hour)
	deferral := func(attempt int) messages.HistoryEntry {
		return messages.HistoryEntry{Detail: "not attempted: busy", Attempt: attempt, Deferrals: 1}
	}
	failure := messages.HistoryEntry{Detail: "attempt 2 failed", Attempt: 2}
	for _, tc := range []struct {
		name       string
		historyLen int
		last       messages.HistoryEntry // as loaded
		e          messages.HistoryEntry
		folds      bool
		wantCount  int // the entry's Deferrals after
	}{
		{"deferral after a deferral of the same attempt, a history row", 5, deferral(2), deferral(2), true, 2},
		{"deferral after a deferral of the same attempt, the row's second", 2, deferral(2), deferral(2), true, 2},
		{"deferral after 40 of the same attempt", 5, messages.HistoryEntry{Attempt: 2, Deferrals: 40}, deferral(2), true, 41},
		{"deferral after a deferral of another attempt", 5, deferral(1), deferral(2), false, 1},
		{"deferral after the failure of its attempt", 5, failure, deferral(2), false, 1},
		{"deferral after an entry not loaded (not in retry, or older)", 5, messages.HistoryEntry{}, deferral(2), false, 1},
		{"failure after a deferral of its attempt", 5, deferral(2), failure, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FoldsInto(tc.last, tc.e); got != tc.folds {
				t.Fatalf("FoldsInto = %v, want %v", got, tc.folds)
			}
			l, m := loaded("m", messages.StateRetry, nil)
			m.HistoryLen, m.Last = tc.historyLen, tc.last
			c := NewChanges(now)
			c.MoveWith(l, m, messages.StateRetry, tc.e)
			var got messages.HistoryEntry
			switch {
			case !tc.folds:
				if m.HistoryLen != tc.historyLen+1 || len(c.Folded) != 0 {
					t.Fatalf("history_len %d, folded %+v; want an entry appended (%d)", m.HistoryLen, c.Folded, tc.historyLen+1)
				}
				got = c.History[0].HistoryEntry
			case HeldByRow(tc.historyLen):
				if m.HistoryLen != tc.historyLen || m.Second == nil || len(c.History)+len(c.Folded) != 0 {
					t.Fatalf("history_len %d, second %+v, rows %+v %+v; want the row's second entry folded", m.HistoryLen, m.Second, c.History, c.Folded)
				}
				got = *m.Second
			default:
				if m.HistoryLen != tc.historyLen || len(c.History) != 0 || len(c.Folded) != 1 || c.Folded[0].Ordinal != tc.historyLen {
					t.Fatalf("history_len %d, appended %+v, folded %+v; want history row %d folded", m.HistoryLen, c.History, c.Folded, tc.historyLen)
				}
				got = c.Folded[0].HistoryEntry
			}
			if got.Deferrals != tc.wantCount || got.Attempt != tc.e.Attempt || got.State != messages.StateRetry {
				t.Errorf("entry %+v, want attempt %d, %d deferrals, retry", got, tc.e.Attempt, tc.wantCount)
			}
			if tc.folds {
				want := "not attempted: busy; deferred " + strconv.Itoa(tc.wantCount) + " times, the last at " + now.UTC().Format(time.RFC3339)
				if got.Detail != want || got.LastAt == nil || !got.LastAt.Equal(now) || !got.At.IsZero() {
					t.Errorf("folded entry %+v, want detail %q, LastAt now, At zero (the stored time kept)", got, want)
				}
			}
			if !c.moved["m"] {
				t.Error("the message is not written (updated_at, attempts)")
			}
		})
	}
}

// TestDeferralsFoldWithinATransaction: a deferral folds into one this
// transaction appended, where it was appended.
func TestDeferralsFoldWithinATransaction(t *testing.T) {
	for _, historyLen := range []int{1, 4} {
		l, m := loaded("m", messages.StateRetry, nil)
		m.HistoryLen = historyLen
		c := NewChanges(t0)
		e := messages.HistoryEntry{Detail: "busy", Attempt: 3, Deferrals: 1}
		c.MoveWith(l, m, messages.StateRetry, e)
		c.MoveWith(l, m, messages.StateRetry, e)
		c.MoveWith(l, m, messages.StateRetry, e)
		got := m.Second
		if !HeldByRow(historyLen + 1) {
			if len(c.History) != 1 || len(c.Folded) != 0 {
				t.Fatalf("history_len %d: appended %+v, folded %+v; want one row appended", historyLen, c.History, c.Folded)
			}
			got = &c.History[0].HistoryEntry
		}
		if m.HistoryLen != historyLen+1 || got == nil || got.Deferrals != 3 || !got.At.Equal(t0) {
			t.Errorf("history_len %d: now %d, entry %+v; want one entry of 3 deferrals at t0", historyLen, m.HistoryLen, got)
		}
	}
}

// TestFoldedDetailStaysWithinBounds: the count is kept whole, the last
// deferral's detail cut to make room for it.
func TestFoldedDetailStaysWithinBounds(t *testing.T) {
	long := strings.Repeat("é", MaxTextBytes/2)
	f := Folded(messages.HistoryEntry{Attempt: 1, Deferrals: 9}, messages.HistoryEntry{Detail: long, Attempt: 1, Deferrals: 1}, t0)
	if len(f.Detail) > MaxTextBytes || !strings.HasSuffix(f.Detail, "; deferred 10 times, the last at 2031-03-14T15:09:26Z") ||
		CleanText(f.Detail) != f.Detail {
		t.Errorf("%d bytes, ends %q", len(f.Detail), f.Detail[len(f.Detail)-60:])
	}
}
