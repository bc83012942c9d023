package persistence

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

var t0 = time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC)

// loaded builds a Loaded holding one message of id in state with the given
// outbox rows (ids from 1) and recorded ledger keys.
func loaded(id string, state messages.State, work []WorkRow, recorded ...LedgerKey) (*Loaded, *Row) {
	l := NewLoaded()
	m := &Row{Message: messages.Message{ID: id, State: state, Frontend: "fe", DestSMSC: "peer", Token: 7,
		SubmittedAt: t0, CreatedAt: t0}, HistoryLen: 1}
	l.Rows[id] = m
	for i := range work {
		work[i].ID = int64(i + 1)
	}
	l.Work[id] = work
	for _, k := range recorded {
		l.Recorded[k] = true
	}
	return l, m
}

func deliveryRow(owner string, until time.Time, epoch uint64) WorkRow {
	return WorkRow{Kind: WorkDelivery, Target: "fe", LeaseOwner: owner, LeaseUntil: until, LeaseEpoch: epoch}
}

func TestComplete(t *testing.T) {
	now := t0.Add(time.Minute)
	leased := deliveryRow("a", now.Add(time.Hour), 3)
	cases := []struct {
		name     string
		state    messages.State
		work     []WorkRow
		recorded []LedgerKey
		reportTo string
		o        Outcome
		want     Completion
		// what the changes must show
		wantState    messages.State
		wantLedger   int
		wantFinished int
		wantDue      []time.Time
		wantWork     []WorkKind
		wantReason   string
	}{
		{name: "delivered", state: messages.StatePending, work: []WorkRow{leased},
			o:    Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultDelivered, Detail: "ok"},
			want: Applied, wantState: messages.StateDelivered, wantLedger: 1, wantFinished: 1},
		{name: "delivered reports to the origin", state: messages.StatePending, work: []WorkRow{leased}, reportTo: "origin",
			o:    Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultDelivered},
			want: Applied, wantState: messages.StateDelivered, wantLedger: 1, wantFinished: 1, wantWork: []WorkKind{WorkStatus}},
		{name: "failed sets the reason", state: messages.StateRetry, work: []WorkRow{leased},
			o:    Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultFailed, Reason: "rejected"},
			want: Applied, wantState: messages.StateFailed, wantLedger: 1, wantFinished: 1, wantReason: "rejected"},
		{name: "retry reschedules", state: messages.StatePending, work: []WorkRow{leased},
			o:    Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultRetry, RetryAt: now.Add(time.Hour)},
			want: Applied, wantState: messages.StateRetry, wantDue: []time.Time{now.Add(time.Hour)}},
		{name: "retry without a time is due now", state: messages.StatePending, work: []WorkRow{leased},
			o:    Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultRetry},
			want: Applied, wantState: messages.StateRetry, wantDue: []time.Time{now}},
		{name: "forward retry of a queued message is no transition", state: messages.StateForwardQueued,
			work: []WorkRow{{Kind: WorkForward, Target: "peer"}},
			o:    Outcome{Kind: WorkForward, Target: "peer", MessageID: "m", Result: ResultRetry, RetryAt: now},
			want: Applied, wantState: messages.StateForwardQueued, wantDue: []time.Time{now}},
		{name: "forward accepted is forwarded", state: messages.StatePending,
			work: []WorkRow{{Kind: WorkForward, Target: "peer"}},
			o:    Outcome{Kind: WorkForward, Target: "peer", MessageID: "m", Result: ResultDelivered},
			want: Applied, wantState: messages.StateForwarded, wantLedger: 1, wantFinished: 1},
		{name: "status work of a final message", state: messages.StateDelivered,
			work: []WorkRow{{Kind: WorkStatus, Target: "origin"}},
			o:    Outcome{Kind: WorkStatus, Target: "origin", MessageID: "m", Result: ResultDelivered},
			want: Applied, wantState: messages.StateDelivered, wantLedger: 1, wantFinished: 1},
		{name: "recorded", state: messages.StatePending, work: []WorkRow{leased},
			recorded: []LedgerKey{{MessageID: "m", Kind: WorkDelivery, Target: "fe"}},
			o:        Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultDelivered},
			want:     AlreadyRecorded, wantState: messages.StatePending},
		{name: "final message", state: messages.StateFailed, work: []WorkRow{leased},
			o:    Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultDelivered},
			want: AlreadyRecorded, wantState: messages.StateFailed},
		{name: "final message, another target's work", state: messages.StateDelivered,
			recorded: []LedgerKey{{MessageID: "m", Kind: WorkDelivery, Target: "other"}},
			o:        Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultDelivered, Ack: true},
			want:     NoWork, wantState: messages.StateDelivered},
		{name: "no row", state: messages.StatePending,
			o:    Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultDelivered},
			want: NoWork, wantState: messages.StatePending},
		{name: "unknown message", state: messages.StatePending, work: []WorkRow{leased},
			o:    Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "other", Result: ResultDelivered},
			want: NoWork, wantState: messages.StatePending},
		{name: "fenced by the claim it came from", state: messages.StatePending, work: []WorkRow{leased},
			o:    Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultDelivered, Epoch: 3, Owner: "a"},
			want: Applied, wantState: messages.StateDelivered, wantLedger: 1, wantFinished: 1},
		{name: "fenced, claimed again since", state: messages.StatePending, work: []WorkRow{leased},
			o:    Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultDelivered, Epoch: 2, Owner: "a"},
			want: StaleEpoch, wantState: messages.StatePending},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, m := loaded("m", tc.state, tc.work, tc.recorded...)
			m.ReportTo = tc.reportTo
			c := NewChanges(now)
			if got := Complete(l, c, tc.o); got != tc.want {
				t.Fatalf("Complete = %s, want %s", got, tc.want)
			}
			if m.State != tc.wantState {
				t.Errorf("state %s, want %s", m.State, tc.wantState)
			}
			if len(c.Ledger) != tc.wantLedger || len(c.Finished) != tc.wantFinished {
				t.Errorf("ledger %d, finished %d; want %d, %d", len(c.Ledger), len(c.Finished), tc.wantLedger, tc.wantFinished)
			}
			if len(c.Rescheduled) != len(tc.wantDue) {
				t.Fatalf("rescheduled %+v, want due %v", c.Rescheduled, tc.wantDue)
			}
			for i, due := range tc.wantDue {
				if !c.Rescheduled[i].DueAt.Equal(due) {
					t.Errorf("rescheduled due %v, want %v", c.Rescheduled[i].DueAt, due)
				}
			}
			var kinds []WorkKind
			for _, w := range c.Work {
				kinds = append(kinds, w.Spec.Kind)
			}
			if strings.Join(kindStrings(kinds), ",") != strings.Join(kindStrings(tc.wantWork), ",") {
				t.Errorf("new work %v, want %v", kinds, tc.wantWork)
			}
			if m.Reason != tc.wantReason {
				t.Errorf("reason %q, want %q", m.Reason, tc.wantReason)
			}
			moved := tc.wantState != tc.state
			if moved != (len(c.Moved) == 1) || len(c.History) != 0 {
				t.Errorf("moved %d, history rows %d; want a move only when the state changes, and no history row", len(c.Moved), len(c.History))
			}
			if moved && (m.Second == nil || m.Second.State != tc.wantState || !m.Second.At.Equal(now) || m.HistoryLen != 2 || !m.UpdatedAt.Equal(now)) {
				t.Errorf("second entry %+v, history_len %d, updated %v; want the row's second entry at now", m.Second, m.HistoryLen, m.UpdatedAt)
			}
		})
	}
}

func kindStrings(ks []WorkKind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

// TestCompleteBatchSeesEarlierItems: a later item of a batch sees what an
// earlier one did (a second verdict is recorded already; a retry leaves the
// row unleased for the fence).
func TestCompleteBatchSeesEarlierItems(t *testing.T) {
	now := t0.Add(time.Minute)
	l, m := loaded("m", messages.StatePending, []WorkRow{deliveryRow("a", now.Add(time.Hour), 3)})
	c := NewChanges(now)
	o := Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultRetry, RetryAt: now.Add(time.Hour), Epoch: 3, Owner: "a"}
	if got := Complete(l, c, o); got != Applied {
		t.Fatalf("first retry: %s", got)
	}
	if got := Complete(l, c, o); got != StaleEpoch {
		t.Errorf("the same fenced retry again: %s, want stale_epoch (the row is no longer leased to it)", got)
	}
	d := Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultDelivered}
	if got := Complete(l, c, d); got != Applied {
		t.Fatalf("delivered: %s", got)
	}
	if got := Complete(l, c, d); got != AlreadyRecorded {
		t.Errorf("delivered again: %s, want already_recorded", got)
	}
	if m.State != messages.StateDelivered || len(c.Moved) != 1 || m.Second == nil || m.Second.State != messages.StateRetry ||
		len(c.History) != 1 || c.History[0].Ordinal != 3 {
		t.Errorf("state %s, moved %d, second %+v, history rows %+v", m.State, len(c.Moved), m.Second, c.History)
	}
	if len(c.Rescheduled) != 0 || len(c.Finished) != 1 {
		t.Errorf("a finished row is not rescheduled too: rescheduled %+v, finished %v", c.Rescheduled, c.Finished)
	}
}

// A deferral (Outcome.Deferred: the frontend was busy, the message not
// attempted) gives back the attempt its claim counted, and keeps no
// attempt on its row; given back once only (its row unleased since, or
// taken back); the real attempt claimed next under the same number has
// its retry applied, not taken for the deferral's. It gives back only
// its own claim's attempt: a row leased to another owner (claimed by id
// since its lease ran out: a bus claim, not ring-fenced) is that claim's
// (StaleEpoch), as is a row its owner claimed again since (the lease ran
// out), counting another attempt than the deferral's. A pull frontend's
// deferral (an ack: no owner) stands whoever leased the row. An ordinary retry, and forward work, keep the
// attempts.
func TestDeferralGivesBackItsAttempt(t *testing.T) {
	now := t0.Add(time.Minute)
	leased := deliveryRow("a", now.Add(time.Hour), 0)
	retry := Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultRetry, RetryAt: now.Add(time.Second),
		Detail: "attempt 3 failed"}
	deferred := retry
	deferred.Deferred, deferred.Detail, deferred.Owner = true, "not attempted: fe busy", "a"
	fencedDeferral := deferred
	fencedDeferral.Epoch, fencedDeferral.Owner = 3, "a"
	acked := deferred
	acked.Owner, acked.Ack = "", true
	forward := Outcome{Kind: WorkForward, Target: "peer", MessageID: "m", Result: ResultRetry, Deferred: true}
	ofAttempt := func(o Outcome, attempt int) Outcome { o.Attempt = attempt; return o }
	unleased := func(retried int) WorkRow { return WorkRow{Kind: WorkDelivery, Target: "fe", RetriedAttempt: retried} }
	for _, tc := range []struct {
		name         string
		state        messages.State
		attempts     int
		row          WorkRow
		o            Outcome
		want         Completion
		wantAttempts int
		wantRetried  int // the row's RetriedAttempt, when rescheduled
	}{
		{"ordinary retry uses its attempt", messages.StateRetry, 3, leased, retry, Applied, 3, 3},
		{"deferral gives its attempt back", messages.StateRetry, 3, leased, deferred, Applied, 2, 0},
		{"deferral of the first attempt", messages.StatePending, 1, leased, deferred, Applied, 0, 0},
		{"deferral of its claim, the lease run out", messages.StateRetry, 3, deliveryRow("a", now.Add(-time.Second), 0), deferred, Applied, 2, 0},
		{"deferral of a row claimed by another owner since", messages.StateRetry, 3, deliveryRow("b", now.Add(time.Hour), 0), deferred, StaleEpoch, 3, 0},
		{"deferral naming its claim's attempt", messages.StateRetry, 3, leased, ofAttempt(deferred, 3), Applied, 2, 0},
		{"deferral of the owner's earlier claim, claimed again since", messages.StateRetry, 4, leased, ofAttempt(deferred, 3), StaleEpoch, 4, 0},
		{"pull frontend's deferral of an earlier offer", messages.StateRetry, 4, deliveryRow("b", now.Add(time.Hour), 0), ofAttempt(acked, 3), Applied, 3, 0},
		{"pull frontend's deferral, another owner's lease", messages.StateRetry, 3, deliveryRow("b", now.Add(time.Hour), 0), acked, Applied, 2, 0},
		{"fenced deferral of its own claim", messages.StateRetry, 3, deliveryRow("a", now.Add(time.Hour), 3), fencedDeferral, Applied, 2, 0},
		{"fenced deferral, claimed again since", messages.StateRetry, 3, deliveryRow("a", now.Add(time.Hour), 4), fencedDeferral, StaleEpoch, 3, 0},
		{"deferral of a row given back already", messages.StateRetry, 2, unleased(0), deferred, AlreadyRecorded, 2, 0},
		{"deferral of a row whose retry is recorded", messages.StateRetry, 3, unleased(3), deferred, AlreadyRecorded, 3, 0},
		{"real attempt after a deferral", messages.StateRetry, 3, WorkRow{Kind: WorkDelivery, Target: "fe",
			LeaseOwner: "a", LeaseUntil: now.Add(time.Hour)}, retry, Applied, 3, 3},
		{"forward retry gives back nothing", messages.StateForwardQueued, 2, WorkRow{Kind: WorkForward, Target: "peer"}, forward, Applied, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, m := loaded("m", tc.state, []WorkRow{tc.row})
			m.Attempts = tc.attempts
			c := NewChanges(now)
			if got := Complete(l, c, tc.o); got != tc.want {
				t.Fatalf("Complete = %s, want %s", got, tc.want)
			}
			if m.Attempts != tc.wantAttempts {
				t.Errorf("attempts %d, want %d", m.Attempts, tc.wantAttempts)
			}
			if tc.want != Applied {
				if !c.Empty() {
					t.Errorf("changes %+v, want none", c)
				}
				return
			}
			if len(c.Rescheduled) != 1 || c.Rescheduled[0].Attempt != tc.wantRetried {
				t.Errorf("rescheduled %+v, want the row's retried attempt %d", c.Rescheduled, tc.wantRetried)
			}
			if tc.o.Kind == WorkDelivery && (len(c.Moved) != 1 || m.State != messages.StateRetry || m.Second == nil || m.Second.Detail != tc.o.Detail) {
				t.Errorf("moved %d, state %s, entry %+v; want retry with the outcome's detail (the attempts written with the move)",
					len(c.Moved), m.State, m.Second)
			}
		})
	}
	// The same deferral twice in one batch: the second finds the row
	// unleased by the first and gives back nothing more.
	l, m := loaded("m", messages.StateRetry, []WorkRow{leased})
	m.Attempts = 3
	c := NewChanges(now)
	if got := Complete(l, c, deferred); got != Applied {
		t.Fatalf("deferral: %s", got)
	}
	if got := Complete(l, c, deferred); got != AlreadyRecorded || m.Attempts != 2 {
		t.Errorf("the same deferral again: %s, attempts %d; want already_recorded, 2", got, m.Attempts)
	}
}

// TestStaleAck: a pull frontend's retry or failed verdict naming an
// attempt older than the message's count when it is recorded (its lease
// ran out and another poll claimed the next attempt after the ack read
// the count) is Stale and changes nothing: applied, the retry took the
// newer holder's lease away, the failure dead-lettered the message it is
// delivering. A delivered verdict is taken whatever attempt it names, a
// verdict naming none or the latest applies, a deferral keeps its own
// rule, and only an ack's named attempt counts (a push frontend's
// verdicts are fenced instead).
func TestStaleAck(t *testing.T) {
	now := t0.Add(time.Minute)
	held := deliveryRow("b", now.Add(time.Hour), 0) // the newer attempt's lease, another poller's
	ack := func(r Result, named int) Outcome {
		return Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: r, RetryAt: now.Add(time.Minute),
			Reason: "busy", Detail: "verdict", Attempt: 1, Named: named, Ack: true}
	}
	deferral := ack(ResultRetry, 1)
	deferral.Deferred = true
	push := ack(ResultRetry, 1)
	push.Ack = false
	for _, tc := range []struct {
		name      string
		o         Outcome
		attempts  int
		want      Completion
		wantState messages.State
	}{
		{"retry naming an older attempt", ack(ResultRetry, 1), 2, Stale, messages.StatePending},
		{"failed naming an older attempt", ack(ResultFailed, 1), 2, Stale, messages.StatePending},
		{"retry naming an attempt two back", ack(ResultRetry, 1), 3, Stale, messages.StatePending},
		{"delivered naming an older attempt", ack(ResultDelivered, 1), 2, Applied, messages.StateDelivered},
		{"retry naming the latest attempt", ack(ResultRetry, 2), 2, Applied, messages.StateRetry},
		{"failed naming the latest attempt", ack(ResultFailed, 2), 2, Applied, messages.StateFailed},
		{"retry naming no attempt", ack(ResultRetry, 0), 2, Applied, messages.StateRetry},
		{"failed naming no attempt", ack(ResultFailed, 0), 2, Applied, messages.StateFailed},
		{"deferral naming an older attempt", deferral, 2, Applied, messages.StateRetry},
		{"push frontend's retry", push, 2, Applied, messages.StateRetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, m := loaded("m", messages.StatePending, []WorkRow{held})
			m.Attempts = tc.attempts
			c := NewChanges(now)
			if got := Complete(l, c, tc.o); got != tc.want {
				t.Fatalf("Complete = %s, want %s", got, tc.want)
			}
			if m.State != tc.wantState {
				t.Errorf("state %s, want %s", m.State, tc.wantState)
			}
			if tc.want != Applied && !c.Empty() {
				t.Errorf("changes %+v, want none: the newer attempt's lease stands", c)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	now := t0.Add(time.Minute)
	for _, tc := range []struct {
		state messages.State
		from  string
		want  Completion
	}{
		{messages.StatePending, "peer", Applied},
		{messages.StateForwardQueued, "peer", Applied},
		{messages.StateForwarded, "peer", Applied},
		{messages.StateForwardFailed, "peer", Applied},
		{messages.StateDelivered, "peer", AlreadyRecorded},
		{messages.StateFailed, "peer", AlreadyRecorded},
		{messages.StateRetry, "peer", NoWork},
		{messages.StateForwarded, "someone-else", NoWork},
	} {
		l, m := loaded("m", tc.state, []WorkRow{{Kind: WorkForward, Target: "peer", LeaseOwner: "a", LeaseUntil: now.Add(time.Hour)}})
		c := NewChanges(now)
		u := StatusUpdate{ID: "m", From: tc.from, Result: ResultFailed, Reason: "gone", At: t0}
		if got := Status(l, c, u); got != tc.want {
			t.Errorf("%s from %s: %s, want %s", tc.state, tc.from, got, tc.want)
			continue
		}
		if tc.want != Applied {
			if !c.Empty() {
				t.Errorf("%s from %s: changes %+v, want none", tc.state, tc.from, c)
			}
			continue
		}
		if m.State != messages.StateFailed || m.Reason != "gone" || len(c.Finished) != 1 || len(c.Ledger) != 1 ||
			c.Ledger[0].Kind != WorkForward || c.Ledger[0].Result != ResultFailed {
			t.Errorf("%s: state %s reason %q finished %v ledger %+v", tc.state, m.State, m.Reason, c.Finished, c.Ledger)
		}
		if want := "reported by peer at 2031-03-14T15:09:26Z"; m.Second == nil || m.Second.Detail != want {
			t.Errorf("second entry %+v, want detail %q", m.Second, want)
		}
	}
	l := NewLoaded()
	if got := Status(l, NewChanges(now), StatusUpdate{ID: "nobody", From: "peer", Result: ResultDelivered}); got != NoWork {
		t.Errorf("unknown message: %s, want no_work", got)
	}
}

func TestSweeps(t *testing.T) {
	now := t0.Add(48 * time.Hour)
	live := WorkRow{Kind: WorkDelivery, Target: "fe", LeaseOwner: "a", LeaseUntil: now.Add(time.Minute)}
	ended := WorkRow{Kind: WorkDelivery, Target: "fe", LeaseOwner: "a", LeaseUntil: now}
	status := WorkRow{Kind: WorkStatus, Target: "origin"}
	expire := ExpireRequest{Now: now, SubmittedBefore: t0.Add(time.Hour), Limit: 10}

	t.Run("expire", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			state messages.State
			work  []WorkRow
			want  bool
		}{
			{"pending", messages.StatePending, []WorkRow{{Kind: WorkDelivery, Target: "fe"}, status}, true},
			{"retry, lease ended", messages.StateRetry, []WorkRow{ended}, true},
			{"without work", messages.StatePending, nil, true},
			{"leased", messages.StatePending, []WorkRow{live}, false},
			{"forward_queued", messages.StateForwardQueued, []WorkRow{{Kind: WorkForward, Target: "peer"}}, false},
			{"delivered", messages.StateDelivered, nil, false},
		} {
			l, m := loaded("m", tc.state, tc.work)
			c := NewChanges(now)
			if got := Expire(l, c, m, expire); got != tc.want {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				continue
			}
			if !tc.want {
				continue
			}
			if m.State != messages.StateFailed || m.Reason != messages.ReasonExpired || len(c.Ledger) != 1 {
				t.Errorf("%s: state %s reason %q ledger %+v", tc.name, m.State, m.Reason, c.Ledger)
			}
			if k := (LedgerKey{MessageID: "m", Kind: WorkDelivery, Target: "fe"}); !l.Recorded[k] {
				t.Errorf("%s: ledger key %+v not recorded", tc.name, k)
			}
			for _, w := range l.Work["m"] {
				if w.Kind != WorkStatus {
					t.Errorf("%s: row %+v left; only status rows stay", tc.name, w)
				}
			}
		}
		_, young := loaded("m", messages.StatePending, nil)
		young.SubmittedAt = t0.Add(time.Hour)
		if Expire(NewLoaded(), NewChanges(now), young, expire) {
			t.Errorf("a message submitted at the cutoff expired")
		}
	})

	t.Run("fail forward", func(t *testing.T) {
		q := t0
		l, m := loaded("m", messages.StateForwardQueued, nil)
		m.QueuedAt = &q
		c := NewChanges(now)
		req := ForwardExpiry{Now: now, QueuedBefore: t0.Add(time.Second), Limit: 10}
		if !FailForward(l, c, m, req) || m.State != messages.StateForwardFailed || m.QueuedAt != nil {
			t.Fatalf("state %s queued %v", m.State, m.QueuedAt)
		}
		if len(c.Ledger) != 1 || c.Ledger[0].Kind != WorkForward || c.Ledger[0].Target != "peer" {
			t.Errorf("fallback ledger %+v, want (forward, dest_smsc)", c.Ledger)
		}
		l, m = loaded("m", messages.StateForwardQueued, []WorkRow{{Kind: WorkForward, Target: "peer", LeaseUntil: now.Add(time.Second), LeaseOwner: "a"}})
		m.QueuedAt = &q
		if FailForward(l, NewChanges(now), m, req) {
			t.Errorf("failed a forward in flight")
		}
	})

	t.Run("queue forward", func(t *testing.T) {
		l, m := loaded("m", messages.StatePending, []WorkRow{{Kind: WorkForward, Target: "peer"}})
		c := NewChanges(now)
		if !QueueForward(l, c, m, now, "peer", "peer down") || m.State != messages.StateForwardQueued || !m.QueuedAt.Equal(now) {
			t.Fatalf("state %s queued %v", m.State, m.QueuedAt)
		}
		for _, tc := range []struct {
			name  string
			state messages.State
			work  WorkRow
		}{
			{"leased", messages.StatePending, WorkRow{Kind: WorkForward, Target: "peer", LeaseOwner: "a", LeaseUntil: now.Add(time.Second)}},
			{"another peer", messages.StatePending, WorkRow{Kind: WorkForward, Target: "other"}},
			{"not pending", messages.StateForwarded, WorkRow{Kind: WorkForward, Target: "peer"}},
		} {
			l, m := loaded("m", tc.state, []WorkRow{tc.work})
			if QueueForward(l, NewChanges(now), m, now, "peer", "x") {
				t.Errorf("%s: queued", tc.name)
			}
		}
	})
}

func TestResubmit(t *testing.T) {
	now := t0.Add(time.Hour)
	work := &WorkSpec{Kind: WorkForward, Target: "peer2"}
	r := Reroute{ID: "m", Frontend: "fe2", DestSMSC: "peer2", State: messages.StateForwardQueued, Detail: "again", Work: work}

	l, m := loaded("m", messages.StateFailed,
		[]WorkRow{{Kind: WorkDelivery, Target: "fe"}, {Kind: WorkStatus, Target: "origin"}},
		LedgerKey{MessageID: "m", Kind: WorkDelivery, Target: "fe"})
	m.Attempts, m.Reason = 5, "rejected"
	c := NewChanges(now)
	c.Record(l, LedgerKey{MessageID: "m", Kind: WorkStatus, Target: "origin"}, ResultDelivered, "earlier in the batch")
	got := Resubmit(l, c, r)
	if got != (ResubmitResult{ID: "m", Applied: true, Found: true, State: messages.StateForwardQueued}) {
		t.Fatalf("Resubmit = %+v", got)
	}
	if m.Frontend != "fe2" || m.DestSMSC != "peer2" || m.Attempts != 0 || m.Reason != "" ||
		!m.SubmittedAt.Equal(now) || m.QueuedAt == nil || !m.QueuedAt.Equal(now) {
		t.Errorf("row after resubmit: %+v", m.Message)
	}
	if len(c.Ledger) != 0 || len(c.Unledgered) != 1 || len(l.Recorded) != 0 {
		t.Errorf("ledger %+v unledgered %v recorded %v: every entry goes, those of this batch too", c.Ledger, c.Unledgered, l.Recorded)
	}
	if len(c.Finished) != 2 || c.Finished[0] != 1 || c.Finished[1] != 2 || len(l.Work["m"]) != 0 {
		t.Errorf("finished %v, left %+v: the old delivery row goes, and the status row (a report of the outcome undone)", c.Finished, l.Work["m"])
	}
	if len(c.Work) != 1 || c.Work[0].Spec.Target != "peer2" || !c.Work[0].Spec.DueAt.Equal(now) || c.Work[0].Token != 7 {
		t.Errorf("new work %+v", c.Work)
	}
	if again := Resubmit(l, c, r); again.Applied || !again.Found || again.State != messages.StateForwardQueued {
		t.Errorf("a repeat in the same batch: %+v, want left alone", again)
	}
	if got := Resubmit(l, c, Reroute{ID: "nobody", State: messages.StatePending}); got != (ResubmitResult{ID: "nobody"}) {
		t.Errorf("unknown: %+v", got)
	}
}

func TestChanges(t *testing.T) {
	now := t0
	l, _ := loaded("m", messages.StatePending, []WorkRow{{Kind: WorkDelivery, Target: "fe"}, {Kind: WorkForward, Target: "p"}})
	c := NewChanges(now)
	c.Reschedule(l, "m", 1, now.Add(time.Hour), 1)
	c.Reschedule(l, "m", 2, now.Add(time.Hour), 0)
	c.Reschedule(l, "m", 1, now.Add(2*time.Hour), 2)
	if len(c.Rescheduled) != 2 || !c.Rescheduled[0].DueAt.Equal(now.Add(2*time.Hour)) || c.Rescheduled[0].Attempt != 2 {
		t.Errorf("rescheduled %+v: one entry per row, the last time and attempt", c.Rescheduled)
	}
	if w := l.Work["m"][0]; w.RetriedAttempt != 2 {
		t.Errorf("loaded row %+v: want its retried attempt 2, as later decisions read it", w)
	}
	c.Finish(l, "m", 1)
	if len(c.Rescheduled) != 1 || c.Rescheduled[0].Row != 2 || len(l.Work["m"]) != 1 {
		t.Errorf("after finishing row 1: rescheduled %+v, work %+v", c.Rescheduled, l.Work["m"])
	}
	c.Reschedule(l, "m", 2, now.Add(3*time.Hour), 0)
	if len(c.Rescheduled) != 1 || !c.Rescheduled[0].DueAt.Equal(now.Add(3*time.Hour)) {
		t.Errorf("rescheduled %+v after the index was rebuilt", c.Rescheduled)
	}
	c.AddWork(NewLoaded(), "m", 7, WorkSpec{Kind: WorkStatus, Target: "o", DueAt: now.Add(time.Second)})
	c.AddWork(NewLoaded(), "m", 7, WorkSpec{Kind: WorkStatus, Target: "o"})
	if len(c.Work) != 1 || !c.Work[0].Spec.DueAt.Equal(now) {
		t.Errorf("work %+v: one row per kind and target, the last spec (zero due = now)", c.Work)
	}
}

func TestValidatorsReportEveryProblem(t *testing.T) {
	for name, err := range map[string]error{
		"new":       ValidateNew([]NewMessage{{State: "x"}, {ID: "b", State: messages.StatePending, Work: &WorkSpec{Kind: "k"}}}),
		"outcomes":  ValidateOutcomes([]Outcome{{}, {Kind: WorkDelivery, Target: "t", MessageID: "m", Result: "x"}}),
		"statuses":  ValidateStatuses([]StatusUpdate{{}, {ID: "i", From: "f", Result: ResultRetry}}),
		"reroutes":  ValidateReroutes([]Reroute{{State: messages.StatePending}, {ID: "i", State: messages.StateDelivered}}),
		"queue":     ValidateQueue("", 0),
		"list":      ListQuery{State: "x", Limit: 0, Before: -1, Budget: -1}.Validate(),
		"registry":  func() error { _, err := ValidateRegistry(PeerRegistry{Frontends: []string{""}}); return err }(),
		"frontend":  ValidateFrontend(Frontend{Mode: "x"}),
		"claim":     ClaimRequest{}.Validate(),
		"owner":     errors.Join(ValidateOwner(""), ValidateRoute(Route{Prefix: "1"})),
		"expiry":    errors.Join(ExpireRequest{}.Validate(), ForwardExpiry{}.Validate()),
		"publish":   ValidatePublish(2, RingState{Epoch: 1, Owners: []RangeOwner{{Service: "x"}}}),
		"final too": ValidateReroutes([]Reroute{{ID: "i", State: messages.StateFailed}, {ID: "j", State: messages.StateDelivered}}),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if n := strings.Count(err.Error(), "\n") + 1; n < 2 {
			t.Errorf("%s: %d problem reported, want every one: %v", name, n, err)
		}
	}
	if err := ValidateReroutes([]Reroute{{ID: "i", State: messages.StatePending, Work: &WorkSpec{Kind: WorkDelivery, Target: "t"}}}); err != nil {
		t.Errorf("a valid reroute: %v", err)
	}
	fes, err := ValidateRegistry(PeerRegistry{Peer: "p", Frontends: []string{"b", "a", "b"}})
	if err != nil || strings.Join(fes, ",") != "a,b" {
		t.Errorf("ValidateRegistry = %v, %v; want [a b]", fes, err)
	}
}

// TestCountsFollowChanges: every change the core decides carries the
// deltas of the counters it touches, and only those.
func TestCountsFollowChanges(t *testing.T) {
	now := t0.Add(time.Minute)
	state := func(s messages.State) Counter { return Counter{Of: CountState, Key: string(s)} }
	work := func(k WorkKind, target string) Counter { return Counter{Of: string(k), Key: target} }
	cases := []struct {
		name   string
		state  messages.State
		work   []WorkRow
		report string
		decide func(l *Loaded, c *Changes, m *Row)
		want   Counts
	}{
		{"delivered: a state moves, the row goes", messages.StatePending, []WorkRow{deliveryRow("a", now.Add(time.Hour), 0)}, "",
			func(l *Loaded, c *Changes, _ *Row) {
				Complete(l, c, Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultDelivered})
			},
			Counts{state(messages.StatePending): -1, state(messages.StateDelivered): 1, work(WorkDelivery, "fe"): -1}},
		{"delivered with a report owed: status work comes", messages.StatePending, []WorkRow{deliveryRow("a", now.Add(time.Hour), 0)}, "origin",
			func(l *Loaded, c *Changes, _ *Row) {
				Complete(l, c, Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultDelivered})
			},
			Counts{state(messages.StatePending): -1, state(messages.StateDelivered): 1, work(WorkDelivery, "fe"): -1, work(WorkStatus, "origin"): 1}},
		{"retry: the row stays", messages.StatePending, []WorkRow{deliveryRow("a", now.Add(time.Hour), 0)}, "",
			func(l *Loaded, c *Changes, _ *Row) {
				Complete(l, c, Outcome{Kind: WorkDelivery, Target: "fe", MessageID: "m", Result: ResultRetry, RetryAt: now})
			},
			Counts{state(messages.StatePending): -1, state(messages.StateRetry): 1}},
		{"status work replaced: the count stays", messages.StateDelivered, []WorkRow{{Kind: WorkStatus, Target: "origin"}}, "origin",
			func(l *Loaded, c *Changes, m *Row) {
				c.AddWork(l, "m", 7, WorkSpec{Kind: WorkStatus, Target: "origin"})
			},
			Counts{}},
		{"purged", messages.StateFailed, nil, "",
			func(l *Loaded, c *Changes, m *Row) {
				at := t0
				m.FinalizedAt = &at
				Purge(l, c, m, PurgeRequest{Before: map[messages.State]time.Time{messages.StateFailed: now}, Limit: 1})
			},
			Counts{state(messages.StateFailed): -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, m := loaded("m", tc.state, tc.work)
			m.ReportTo = tc.report
			c := NewChanges(now)
			tc.decide(l, c, m)
			if got, want := fmt.Sprint(c.Counts.Sorted()), fmt.Sprint(tc.want.Sorted()); got != want {
				t.Errorf("counts %s, want %s", got, want)
			}
		})
	}
}

func TestPurgeDecides(t *testing.T) {
	rest := t0
	cut := map[messages.State]time.Time{messages.StateDelivered: t0.Add(time.Second), messages.StateForwarded: t0.Add(time.Second)}
	cases := []struct {
		name      string
		state     messages.State
		finalized *time.Time
		work      []WorkRow
		want      bool
	}{
		{"delivered past its cutoff", messages.StateDelivered, &rest, nil, true},
		{"forwarded past its cutoff", messages.StateForwarded, &rest, nil, true},
		{"no cutoff for its state", messages.StateFailed, &rest, nil, false},
		{"at rest after the cutoff", messages.StateDelivered, ptr(t0.Add(time.Second)), nil, false},
		{"no rest time", messages.StateDelivered, nil, nil, false},
		{"a report still owed", messages.StateDelivered, &rest, []WorkRow{{Kind: WorkStatus, Target: "origin"}}, false},
		{"live, with a cutoff given anyway", messages.StatePending, &rest, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, m := loaded("m", tc.state, tc.work)
			m.FinalizedAt = tc.finalized
			req := PurgeRequest{Before: maps.Clone(cut), Limit: 1}
			if tc.state == messages.StatePending {
				req.Before[messages.StatePending] = t0.Add(time.Hour)
			}
			c := NewChanges(t0.Add(time.Hour))
			if got := Purge(l, c, m, req); got != tc.want || (len(c.Purged) == 1) != tc.want {
				t.Errorf("Purge = %v (%d purged), want %v", got, len(c.Purged), tc.want)
			}
		})
	}
}

func TestMoveSetsTheRestTime(t *testing.T) {
	now := t0.Add(time.Minute)
	for _, next := range messages.AllStates {
		l, m := loaded("m", messages.StatePending, nil)
		c := NewChanges(now)
		c.Move(l, m, next, "x")
		if Resting(next) != (m.FinalizedAt != nil) || (m.FinalizedAt != nil && !m.FinalizedAt.Equal(now)) {
			t.Errorf("moved to %s: finalized_at %v", next, m.FinalizedAt)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestHistoryGoesToTheRowThenToRows: the second entry is the row's, the
// third and later are history rows numbered from 3.
func TestHistoryGoesToTheRowThenToRows(t *testing.T) {
	l, m := loaded("m", messages.StatePending, nil)
	c := NewChanges(t0)
	c.Move(l, m, messages.StateRetry, "try again")
	c.Note(m, "a receipt")
	c.Move(l, m, messages.StateDelivered, "delivered")
	if m.Second == nil || m.Second.State != messages.StateRetry || m.Second.Detail != "try again" {
		t.Errorf("second entry %+v, want the retry", m.Second)
	}
	if len(c.History) != 2 || c.History[0].Ordinal != 3 || c.History[1].Ordinal != 4 ||
		c.History[0].State != messages.StateRetry || c.History[1].State != messages.StateDelivered {
		t.Errorf("history rows %+v, want ordinals 3 (the receipt) and 4 (delivered)", c.History)
	}
	if len(c.Moved) != 1 || m.HistoryLen != 4 {
		t.Errorf("moved %d, history_len %d; want the row once, 4 entries", len(c.Moved), m.HistoryLen)
	}
}

func TestHistoryOf(t *testing.T) {
	e := func(s messages.State) messages.HistoryEntry { return messages.HistoryEntry{State: s} }
	none := messages.HistoryEntry{}
	states := func(h []messages.HistoryEntry) string {
		var out []string
		for _, x := range h {
			out = append(out, string(x.State))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name          string
		first, second messages.HistoryEntry
		rows          []messages.HistoryEntry
		want          string
	}{
		{"one entry", e("pending"), none, nil, "pending"},
		{"two, both held", e("pending"), e("delivered"), nil, "pending,delivered"},
		{"four, two held", e("pending"), e("retry"), []messages.HistoryEntry{e("retry"), e("delivered")}, "pending,retry,retry,delivered"},
		{"second a row (before 0013)", e("pending"), none, []messages.HistoryEntry{e("retry"), e("delivered")}, "pending,retry,delivered"},
		{"first a row (before 0004), second held", none, e("retry"), []messages.HistoryEntry{e("pending"), e("delivered")}, "pending,retry,delivered"},
		{"all rows (before 0004)", none, none, []messages.HistoryEntry{e("pending"), e("delivered")}, "pending,delivered"},
	} {
		if got := states(HistoryOf(tc.first, tc.second, tc.rows)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
