package storetest

import (
	"errors"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The cases below pin down where the two stores once disagreed, when each
// held its own copy of the rules (before the decision core). Each names
// what one of them used to do.

func driftCases() []testCase {
	return []testCase{
		{"ResubmitIntoFinalStateRefused", driftRestartFinal},
		{"InvalidBatchReportsEveryItem", driftEveryProblem},
		{"ResubmitRemovesOldRouteWork", driftOldRouteWork},
		{"ZeroDueMeansNow", driftZeroDue},
		{"ListQueryValidated", driftListQuery},
		{"ExpiryOldestFirstAcrossStates", driftExpiryOrder},
	}
}

// driftRestartFinal: SQLite refused a reroute into a final state, Postgres
// delivered the message that way. A reroute into delivered or failed is
// refused, for the whole call, and changes nothing.
func driftRestartFinal(f *fixture) {
	f.accept(base, newMsg("dr-final"))
	f.fail(at(time.Minute), "dr-final")
	for _, state := range []messages.State{messages.StateDelivered, messages.StateFailed} {
		r := reroute("dr-final", feB, at(time.Hour))
		r.State = state
		if _, err := f.store.Resubmit(f.ctx, at(time.Hour), []persistence.Reroute{reroute("dr-final", feB, at(time.Hour)), r}); err == nil {
			f.Errorf("Resubmit into %s: no error", state)
		}
	}
	f.wantState("dr-final", messages.StateFailed)
	if n := f.historyLen("dr-final"); n != 2 {
		f.Errorf("history has %d entries after refused resubmits, want 2", n)
	}
	f.wantOutbox(0)
}

// driftEveryProblem: SQLite stopped at the first invalid item, Postgres
// reported them all. Every call reports every invalid item.
func driftEveryProblem(f *fixture) {
	calls := map[string]func() error{
		"Accept": func() error {
			bad := newMsg("dr-bad-state")
			bad.State = "nonsense"
			_, err := f.store.Accept(f.ctx, base, []persistence.NewMessage{newMsg(""), newMsg("dr-ok"), bad})
			return err
		},
		"CompleteWork": func() error {
			_, err := f.store.CompleteWork(f.ctx, base, []persistence.Outcome{
				{Kind: persistence.WorkDelivery, Target: feA, Result: persistence.ResultDelivered},
				{Kind: persistence.WorkDelivery, Target: feA, MessageID: "dr-x", Result: "maybe"},
			})
			return err
		},
		"ApplyStatus": func() error {
			_, err := f.store.ApplyStatus(f.ctx, base, []persistence.StatusUpdate{
				{From: peerP, Result: persistence.ResultDelivered},
				{ID: "dr-y", From: peerP, Result: persistence.ResultRetry},
			})
			return err
		},
		"Resubmit": func() error {
			bad := reroute("dr-z", feB, base)
			bad.State = "nonsense"
			_, err := f.store.Resubmit(f.ctx, base, []persistence.Reroute{reroute("", feB, base), bad})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if err == nil {
			f.Errorf("%s with two invalid items: no error", name)
			continue
		}
		// errors.Join puts one problem on each line.
		if n := strings.Count(err.Error(), "\n") + 1; n < 2 {
			f.Errorf("%s with two invalid items reported %d problem: %v", name, n, err)
		}
	}
	f.wantOutbox(0)
	if _, err := f.store.GetMessage(f.ctx, "dr-ok"); !errors.Is(err, persistence.ErrNotFound) {
		f.Errorf("the valid message of a refused batch: %v, want ErrNotFound", err)
	}
}

// driftOldRouteWork: SQLite removed a resubmitted message's old delivery
// and forward rows, Postgres left them to be claimed on the old route.
func driftOldRouteWork(f *fixture) {
	m := newMsg("dr-old-route") // failed, but with delivery work for feA
	m.State = messages.StateFailed
	f.accept(base, m)
	got := f.resubmit(at(time.Hour), reroute("dr-old-route", feB, at(time.Hour)))
	f.wantResult(got[0], persistence.ResubmitResult{ID: "dr-old-route", Applied: true, Found: true, State: messages.StatePending})
	if c := f.claimDelivery(feA, ownerA, at(time.Hour), 10); len(c.Work) != 0 {
		f.Errorf("work on the old route after Resubmit: %q", workIDs(c.Work))
	}
	f.wantIDs("claim on the new route", workIDs(f.claimDelivery(feB, ownerA, at(time.Hour), 10).Work), "dr-old-route")
	f.wantOutbox(1)
}

// driftZeroDue: work with no due time (and a retry with no RetryAt) is due
// at the call's now; SQLite stored the zero time (year 1).
func driftZeroDue(f *fixture) {
	m := newMsg("dr-due")
	m.Work.DueAt = time.Time{}
	now := at(time.Hour)
	f.accept(now, m)
	c := f.claimDelivery(feA, ownerA, now, 10)
	if len(c.Work) != 1 {
		f.Fatalf("claim at the acceptance time: %d rows, want 1", len(c.Work))
	}
	f.wantTime("DueAt of work accepted without one", c.Work[0].DueAt, now)
	f.completeOne(at(2*time.Hour), persistence.Outcome{MessageID: "dr-due", Result: persistence.ResultRetry, Detail: "busy"}, persistence.Applied)
	c = f.claimDelivery(feA, ownerA, at(2*time.Hour), 10)
	if len(c.Work) != 1 {
		f.Fatalf("claim after a retry without RetryAt: %d rows, want 1", len(c.Work))
	}
	f.wantTime("DueAt after a retry without RetryAt", c.Work[0].DueAt, at(2*time.Hour))
}

// driftListQuery: Postgres refused an unknown state filter and a negative
// cursor, SQLite listed nothing or everything. Both refuse them with
// ErrInvalid (the caller's mistake: the gateway once answered such a
// refusal 503 "the store is unavailable"), and so a number key that is
// not its own messages.NumberKey (" +5" is "+5" as a key).
func driftListQuery(f *fixture) {
	f.accept(base, newMsg("dr-list"))
	for _, q := range []persistence.ListQuery{
		{State: "nonsense", Limit: 10},
		{Limit: 10, Before: -1},
		{Limit: 0},
		{Limit: 10, Source: persistence.NumberMatch{Key: " +5"}},
		{Limit: 10, Destination: persistence.NumberMatch{Key: "+44"}},
	} {
		p, err := f.store.ListMessages(f.ctx, q)
		if err == nil {
			f.Errorf("ListMessages(%+v) = %d messages, want an error", q, len(p.Messages))
		} else if !errors.Is(err, persistence.ErrInvalid) {
			f.Errorf("ListMessages(%+v): %v, want persistence.ErrInvalid", q, err)
		}
	}
}

// driftExpiryOrder: SQLite's expiry walked pending messages before retry
// ones whatever their age; both stores expire the oldest submission first.
func driftExpiryOrder(f *fixture) {
	f.accept(base, newMsg("dr-old-retry"))
	f.retry(at(time.Second), "dr-old-retry", at(time.Minute))
	f.accept(at(time.Hour), newMsg("dr-young-pending"))
	got := f.expire(persistence.ExpireRequest{Now: at(3 * day), SubmittedBefore: at(day), Limit: 1})
	f.wantIDs("the first expired", messageIDs(got), "dr-old-retry")
	got = f.expire(persistence.ExpireRequest{Now: at(3 * day), SubmittedBefore: at(day), Limit: 1})
	f.wantIDs("the second expired", messageIDs(got), "dr-young-pending")
}
