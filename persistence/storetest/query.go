package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func getMessageCases() []testCase {
	return []testCase{
		{"HistoryOldestFirst", getHistoryOldestFirst},
		{"UnknownIDIsErrNotFound", getUnknownIsNotFound},
	}
}

func getHistoryOldestFirst(f *fixture) {
	f.accept(base, newMsg("get-h"))
	f.claimDelivery(feA, ownerA, base, 1)
	f.retry(at(1e9), "get-h", at(60e9))
	f.claimDelivery(feA, ownerA, at(60e9), 1)
	f.completeOne(at(120e9), persistence.Outcome{
		MessageID: "get-h", Result: persistence.ResultFailed, Reason: messages.ReasonMaxAttempts, Detail: "gave up",
	}, persistence.Applied)
	f.checkHistory("get-h",
		messages.HistoryEntry{State: messages.StatePending, At: base, Detail: "accepted"},
		messages.HistoryEntry{State: messages.StateRetry, At: at(1e9), Detail: "busy"},
		messages.HistoryEntry{State: messages.StateFailed, At: at(120e9), Detail: "gave up"},
	)
	want := expected(newMsg("get-h"), base)
	want.State, want.Reason, want.Attempts, want.UpdatedAt = messages.StateFailed, messages.ReasonMaxAttempts, 2, norm(at(120e9))
	f.checkMessage("GetMessage", f.get("get-h"), want)
}

func getUnknownIsNotFound(f *fixture) {
	f.accept(base, newMsg("get-known"))
	if m, err := f.store.GetMessage(f.ctx, "get-unknown"); !errors.Is(err, persistence.ErrNotFound) {
		f.Errorf("GetMessage(unknown) = %+v, %v; want ErrNotFound", m, err)
	}
}

func listMessagesCases() []testCase {
	return []testCase{
		{"NewestFirst", listNewestFirst},
		{"StateFilter", listStateFilter},
		{"PagesVisitEveryMessageOnce", listPagesVisitEveryMessageOnce},
		{"LastFullPageHasNoNext", listLastFullPageHasNoNext},
		{"FilteredPages", listFilteredPages},
		{"BeforeCursor", listBeforeCursor},
		{"WithoutHistory", listWithoutHistory},
		{"EmptyStore", listEmptyStore},
	}
}

func listNewestFirst(f *fixture) {
	for i := range 5 {
		f.accept(at(secs(i)), newMsg(fmt.Sprintf("list-%d", i)))
	}
	p := f.list(persistence.ListQuery{Limit: 10})
	f.wantIDs("ListMessages", messageIDs(p.Messages), "list-4", "list-3", "list-2", "list-1", "list-0")
	if p.Next != 0 {
		f.Errorf("Next = %d on the only page, want 0", p.Next)
	}
	for i := 1; i < len(p.Messages); i++ {
		if p.Messages[i].Seq >= p.Messages[i-1].Seq {
			f.Errorf("Seq not decreasing: %d then %d", p.Messages[i-1].Seq, p.Messages[i].Seq)
		}
	}
	want := expected(newMsg("list-4"), at(4e9))
	f.checkMessage("ListMessages", p.Messages[0], want)
}

func listStateFilter(f *fixture) {
	for i := range 6 {
		f.accept(at(secs(i)), newMsg(fmt.Sprintf("lsf-%d", i)))
	}
	f.deliver(at(1e9), "lsf-1")
	f.deliver(at(1e9), "lsf-4")
	f.fail(at(1e9), "lsf-2")
	cases := []struct {
		state messages.State
		want  []string
	}{
		{messages.StateDelivered, []string{"lsf-4", "lsf-1"}},
		{messages.StateFailed, []string{"lsf-2"}},
		{messages.StatePending, []string{"lsf-5", "lsf-3", "lsf-0"}},
		{messages.StateForwarded, nil},
		{"", []string{"lsf-5", "lsf-4", "lsf-3", "lsf-2", "lsf-1", "lsf-0"}},
	}
	for _, c := range cases {
		p := f.list(persistence.ListQuery{State: c.state, Limit: 10})
		f.wantIDs(fmt.Sprintf("ListMessages(state %q)", c.state), messageIDs(p.Messages), c.want...)
		if p.Next != 0 {
			f.Errorf("ListMessages(state %q): Next = %d, want 0", c.state, p.Next)
		}
		for _, m := range p.Messages {
			if c.state != "" && m.State != c.state {
				f.Errorf("ListMessages(state %q) returned %s in %s", c.state, m.ID, m.State)
			}
		}
	}
}

// pageThrough pages with limit and checks the page invariants; it returns the
// ids in visiting order.
func (f *fixture) pageThrough(state messages.State, limit int) (ids []string, pages int) {
	f.Helper()
	q := persistence.ListQuery{State: state, Limit: limit}
	var lastSeq int64
	for {
		pages++
		if pages > 1000 {
			f.Fatalf("paging does not end")
		}
		p := f.list(q)
		if len(p.Messages) > limit {
			f.Fatalf("page %d has %d messages, limit %d", pages, len(p.Messages), limit)
		}
		for _, m := range p.Messages {
			if lastSeq != 0 && m.Seq >= lastSeq {
				f.Errorf("page %d: Seq %d after %d, want strictly decreasing", pages, m.Seq, lastSeq)
			}
			lastSeq = m.Seq
			ids = append(ids, m.ID)
		}
		if p.Next == 0 {
			return ids, pages
		}
		if len(p.Messages) != limit {
			f.Errorf("page %d has %d messages and a Next cursor; a short page must be the last", pages, len(p.Messages))
		}
		q.Before = p.Next
	}
}

func listPagesVisitEveryMessageOnce(f *fixture) {
	var want []string
	n := 0
	for _, size := range []int{1, 7, 3, 12} { // 23 messages in four accepts
		var batch []persistence.NewMessage
		for range size {
			id := fmt.Sprintf("page-%02d", n)
			batch = append(batch, newMsg(id))
			want = append([]string{id}, want...)
			n++
		}
		f.accept(at(secs(n)), batch...)
	}
	got, pages := f.pageThrough("", 5)
	f.wantIDs("paged ids", got, want...)
	if pages != 5 {
		f.Errorf("23 messages in pages of 5 took %d pages, want 5", pages)
	}
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	for id, k := range seen {
		if k != 1 {
			f.Errorf("%s visited %d times", id, k)
		}
	}
}

func listLastFullPageHasNoNext(f *fixture) {
	var batch []persistence.NewMessage
	for i := range 20 {
		batch = append(batch, newMsg(fmt.Sprintf("full-%02d", i)))
	}
	f.accept(base, batch...)
	got, pages := f.pageThrough("", 5)
	if len(got) != 20 || pages != 4 {
		f.Errorf("20 messages in pages of 5: %d messages in %d pages, want 20 in 4 (Next must be 0 on the last full page)", len(got), pages)
	}
}

func listFilteredPages(f *fixture) {
	var batch []persistence.NewMessage
	for i := range 25 {
		batch = append(batch, newMsg(fmt.Sprintf("fp-%02d", i)))
	}
	f.accept(base, batch...)
	var want []string
	for i := 0; i < 25; i += 2 {
		f.deliver(at(1e9), fmt.Sprintf("fp-%02d", i))
		want = append([]string{fmt.Sprintf("fp-%02d", i)}, want...)
	}
	got, _ := f.pageThrough(messages.StateDelivered, 4)
	f.wantIDs("delivered, paged by 4", got, want...)
	got, _ = f.pageThrough(messages.StatePending, 3)
	if len(got) != 12 {
		f.Errorf("pending, paged by 3: %d messages, want 12", len(got))
	}
}

func listBeforeCursor(f *fixture) {
	var res []persistence.Accepted
	for i := range 5 {
		res = append(res, f.accept(at(secs(i)), newMsg(fmt.Sprintf("cur-%d", i)))...)
	}
	p := f.list(persistence.ListQuery{Limit: 10, Before: res[2].Message.Seq})
	f.wantIDs("ListMessages(Before cur-2)", messageIDs(p.Messages), "cur-1", "cur-0")
	p = f.list(persistence.ListQuery{Limit: 10, Before: res[0].Message.Seq})
	if len(p.Messages) != 0 || p.Next != 0 {
		f.Errorf("ListMessages(Before oldest) = %q next %d, want empty", messageIDs(p.Messages), p.Next)
	}
}

func listWithoutHistory(f *fixture) {
	f.accept(base, newMsg("lwh"))
	f.deliver(at(1e9), "lwh")
	for _, m := range f.list(persistence.ListQuery{Limit: 10}).Messages {
		if m.History != nil {
			f.Errorf("ListMessages loaded history of %s: %+v", m.ID, m.History)
		}
	}
}

func listEmptyStore(f *fixture) {
	p := f.list(persistence.ListQuery{Limit: 10})
	if len(p.Messages) != 0 || p.Next != 0 {
		f.Errorf("ListMessages on an empty store = %d messages, next %d", len(p.Messages), p.Next)
	}
}

func statsCases() []testCase {
	return []testCase{
		{"EmptyStoreHasEveryState", statsEmpty},
		{"CountsByState", statsCountsByState},
		{"OutboxDepthCountsEveryKind", statsOutboxDepth},
		{"DLQDepthCountsFailed", statsDLQDepth},
		{"OldestDueIsTheClaimableWork", statsOldestDue},
		{"ForwardQueueByPeer", statsForwardQueue},
	}
}

// wantByState fails unless ByState has exactly one key per state, with the
// counts in want (missing states: 0).
func (f *fixture) wantByState(got map[messages.State]int64, want map[messages.State]int64) {
	f.Helper()
	if len(got) != len(messages.AllStates) {
		f.Errorf("ByState has %d keys, want one per state (%d): %v", len(got), len(messages.AllStates), got)
	}
	for _, s := range messages.AllStates {
		n, ok := got[s]
		if !ok {
			f.Errorf("ByState has no key %q", s)
		}
		if n != want[s] {
			f.Errorf("ByState[%s] = %d, want %d", s, n, want[s])
		}
	}
}

func statsEmpty(f *fixture) {
	st := f.stats()
	f.wantByState(st.ByState, nil)
	if st.OutboxDepth != 0 || st.DLQDepth != 0 {
		f.Errorf("empty store: OutboxDepth %d, DLQDepth %d; want 0, 0", st.OutboxDepth, st.DLQDepth)
	}
}

func statsCountsByState(f *fixture) {
	var batch []persistence.NewMessage
	for i := range 7 {
		batch = append(batch, newMsg(fmt.Sprintf("st-%d", i)))
	}
	q := newMsg("st-q")
	q.State = messages.StateForwardQueued
	q.Work = &persistence.WorkSpec{Kind: persistence.WorkForward, Target: peerP, DueAt: base}
	batch = append(batch, q)
	f.accept(base, batch...)
	f.deliver(at(1e9), "st-0")
	f.deliver(at(1e9), "st-1")
	f.fail(at(1e9), "st-2")
	f.retry(at(1e9), "st-3", at(60e9))
	f.wantByState(f.stats().ByState, map[messages.State]int64{
		messages.StatePending:       3,
		messages.StateRetry:         1,
		messages.StateDelivered:     2,
		messages.StateFailed:        1,
		messages.StateForwardQueued: 1,
	})
}

func statsOutboxDepth(f *fixture) {
	f.accept(base,
		msgFor("od-d", persistence.WorkDelivery, feA),
		msgFor("od-f", persistence.WorkForward, peerP),
		msgFor("od-s", persistence.WorkStatus, peerP),
		msgNoWork("od-none"),
	)
	f.wantOutbox(3)
	f.deliver(at(1e9), "od-d")
	f.wantOutbox(2)
}

func statsDLQDepth(f *fixture) {
	f.accept(base, newMsg("dlq-1"), newMsg("dlq-2"), newMsg("dlq-3"))
	f.fail(at(1e9), "dlq-1")
	f.fail(at(1e9), "dlq-3")
	st := f.stats()
	if st.DLQDepth != 2 || st.ByState[messages.StateFailed] != 2 {
		f.Errorf("DLQDepth %d, failed %d; want 2 and 2", st.DLQDepth, st.ByState[messages.StateFailed])
	}
}

// wantOldestDue requires OldestDue at now to be want (zero: none).
func (f *fixture) wantOldestDue(now, want time.Time) {
	f.Helper()
	got, err := f.store.OldestDue(f.ctx, now)
	if err != nil {
		f.Fatalf("OldestDue: %v", err)
	}
	f.wantTime(fmt.Sprintf("OldestDue at %v", now.Sub(base)), got, want)
}

// statsOldestDue: OldestDue is the earliest due time of the work that is
// claimable at now, over every kind and target: work scheduled ahead and
// work leased now are not waiting, however long ago they were written;
// work whose lease ended waits since it fell due.
func statsOldestDue(f *fixture) {
	f.wantOldestDue(base, time.Time{})
	due := func(m persistence.NewMessage, at time.Time) persistence.NewMessage {
		m.Work.DueAt = at
		return m
	}
	f.accept(base, msgDue("od-later", at(time.Hour)))
	f.wantOldestDue(at(30*time.Minute), time.Time{})
	f.accept(at(time.Second),
		due(msgFor("od-fe-b", persistence.WorkDelivery, feB), at(5*time.Second)),
		due(msgFor("od-fwd", persistence.WorkForward, peerP), at(10*time.Second)),
		due(msgFor("od-status", persistence.WorkStatus, peerP), at(20*time.Second)),
	)
	f.wantOldestDue(at(4*time.Second), time.Time{})
	f.wantOldestDue(at(30*time.Second), at(5*time.Second))
	// Leased: being worked on, not waiting, until its lease ends.
	if c := f.claimOf(persistence.WorkDelivery, feB, ownerA, at(30*time.Second), 10); len(c.Work) != 1 {
		f.Fatalf("claimed %d rows for %s, want od-fe-b", len(c.Work), feB)
	}
	f.wantOldestDue(at(30*time.Second), at(10*time.Second))
	f.completeAll(at(31*time.Second), []persistence.Completion{persistence.Applied},
		outcome(persistence.WorkForward, peerP, "od-fwd", persistence.ResultDelivered))
	// Due at now is due.
	f.wantOldestDue(at(20*time.Second), at(20*time.Second))
	f.wantOldestDue(at(19*time.Second), time.Time{})
	afterLease := at(30*time.Second + lease)
	f.wantOldestDue(afterLease, at(5*time.Second))
	f.completeAll(afterLease, []persistence.Completion{persistence.Applied, persistence.Applied},
		outcome(persistence.WorkDelivery, feB, "od-fe-b", persistence.ResultDelivered),
		outcome(persistence.WorkStatus, peerP, "od-status", persistence.ResultDelivered))
	f.wantOldestDue(afterLease, at(time.Hour))
}

func statsForwardQueue(f *fixture) {
	f.wantForwardQueue(map[string]int64{})
	f.accept(base,
		fwdMsg("fq-p1", peerP), queuedMsg("fq-p2", peerP), queuedMsg("fq-q", peerQ),
		msgFor("fq-d", persistence.WorkDelivery, peerP), msgFor("fq-s", persistence.WorkStatus, peerP),
	)
	f.wantForwardQueue(map[string]int64{peerP: 2, peerQ: 1})
	f.completeAll(at(1e9), []persistence.Completion{persistence.Applied},
		outcome(persistence.WorkForward, peerQ, "fq-q", persistence.ResultDelivered))
	f.wantForwardQueue(map[string]int64{peerP: 2})
	f.wantOutbox(4)
}
