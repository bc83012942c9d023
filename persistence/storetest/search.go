package storetest

import (
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The search of ListMessages: numbers (exact or prefix, with or without
// their '+'), acceptance time, frontend and peer, with cursor paging.
func searchCases() []testCase {
	return []testCase{
		{"ByDestination", searchByDestination},
		{"BySource", searchBySource},
		{"ByTimePagesNewestFirst", searchByTimePages},
		{"NumberAndTimeTogether", searchNumberAndTime},
		{"ByFrontendAndPeer", searchByFrontendAndPeer},
		{"ByFrontendReadsAWindowPerPage", searchFrontendWindow},
		{"PrefixEscapesPatternCharacters", searchPrefixIsLiteral},
		{"InvalidQueryIsError", searchInvalid},
	}
}

// searchFixture accepts, a second apart from base, messages to these
// destinations (in order), each from source "+1555" + its index.
func searchFixture(f *fixture, dests ...string) {
	for i, d := range dests {
		nm := newMsg(fmt.Sprintf("s-%02d", i))
		nm.DestinationMSISDN, nm.SourceMSISDN = d, fmt.Sprintf("+1555%d", i%3)
		f.accept(at(secs(i)), nm)
	}
}

// searchAll pages through q (page size 2) and returns the ids in order.
func searchAll(f *fixture, q persistence.ListQuery) []string {
	f.Helper()
	q.Limit = 2
	var ids []string
	for range 100 {
		p := f.list(q)
		ids = append(ids, messageIDs(p.Messages)...)
		if p.Next == 0 {
			return ids
		}
		q.Before, q.BeforeAt = p.Next, p.NextAt
	}
	f.Fatalf("more than 100 pages")
	return nil
}

func searchByDestination(f *fixture) {
	searchFixture(f, "+447700900001", "447700900001", "+447700900002", "33612345678", "447700900001", "4477")
	exact := persistence.NumberMatch{Key: "447700900001"}
	f.wantIDs("exact, with or without '+'", searchAll(f, persistence.ListQuery{Destination: exact}), "s-04", "s-01", "s-00")
	prefix := persistence.NumberMatch{Key: "4477", Prefix: true}
	f.wantIDs("prefix", searchAll(f, persistence.ListQuery{Destination: prefix}), "s-05", "s-04", "s-02", "s-01", "s-00")
	f.wantIDs("prefix of one", searchAll(f, persistence.ListQuery{Destination: persistence.NumberMatch{Key: "3361", Prefix: true}}), "s-03")
	f.wantIDs("exact is not a prefix", searchAll(f, persistence.ListQuery{Destination: persistence.NumberMatch{Key: "4477"}}), "s-05")
	f.wantIDs("none", searchAll(f, persistence.ListQuery{Destination: persistence.NumberMatch{Key: "49"}}))
	f.wantIDs("with a state", searchAll(f, persistence.ListQuery{Destination: exact, State: messages.StateFailed}))
}

func searchBySource(f *fixture) {
	searchFixture(f, "1", "2", "3", "4", "5")
	f.wantIDs("source", searchAll(f, persistence.ListQuery{Source: persistence.NumberMatch{Key: "15551"}}), "s-04", "s-01")
	f.wantIDs("source prefix", searchAll(f, persistence.ListQuery{Source: persistence.NumberMatch{Key: "1555", Prefix: true}}),
		"s-04", "s-03", "s-02", "s-01", "s-00")
	alpha := newMsg("s-alpha")
	alpha.SourceMSISDN = "ACME Bank"
	f.accept(at(secs(9)), alpha)
	f.wantIDs("alphanumeric sender", searchAll(f, persistence.ListQuery{Source: persistence.NumberMatch{Key: "ACME", Prefix: true}}), "s-alpha")
}

func searchByTimePages(f *fixture) {
	searchFixture(f, "1", "2", "3", "4", "5", "6", "7")
	q := persistence.ListQuery{Since: at(secs(1)), Until: at(secs(6))}
	f.wantIDs("[1s, 6s)", searchAll(f, q), "s-05", "s-04", "s-03", "s-02", "s-01")
	f.wantIDs("since only", searchAll(f, persistence.ListQuery{Since: at(secs(5))}), "s-06", "s-05")
	f.wantIDs("until only", searchAll(f, persistence.ListQuery{Until: at(secs(2))}), "s-01", "s-00")
	q.State = messages.StatePending
	q.Frontend = feA
	f.wantIDs("with state and frontend", searchAll(f, q), "s-05", "s-04", "s-03", "s-02", "s-01")
	// Several messages accepted at one time page by seq within it.
	var batch []persistence.NewMessage
	for i := range 5 {
		batch = append(batch, newMsg(fmt.Sprintf("s-same-%d", i)))
	}
	f.accept(at(time.Hour), batch...)
	f.wantIDs("one time", searchAll(f, persistence.ListQuery{Since: at(time.Hour)}),
		"s-same-4", "s-same-3", "s-same-2", "s-same-1", "s-same-0")
}

func searchNumberAndTime(f *fixture) {
	searchFixture(f, "4471", "4471", "4472", "4471", "4471")
	q := persistence.ListQuery{Destination: persistence.NumberMatch{Key: "4471"}, Since: at(secs(1)), Until: at(secs(4))}
	f.wantIDs("number and time", searchAll(f, q), "s-03", "s-01")
	if q.ByTime() {
		f.Errorf("a number's search is ordered by seq, not by time")
	}
}

func searchByFrontendAndPeer(f *fixture) {
	local := newMsg("s-local")
	other := newMsg("s-other")
	other.Frontend = feB
	out := fwdMsg("s-out", peerP)
	in := newMsg("s-in")
	in.SourceSMSC, in.ReportTo = peerP, peerP
	f.accept(base, local, other, out, in)
	f.wantIDs("frontend", searchAll(f, persistence.ListQuery{Frontend: feB}), "s-other")
	f.wantIDs("peer: to it and from it", searchAll(f, persistence.ListQuery{Peer: peerP}), "s-in", "s-out")
}

// searchFrontendWindow: a frontend or peer search examines at most Budget
// seqs per page. 40 messages in one batch (consecutive seqs), of which feB
// has 4 far apart and peerP 2: with a budget of 5, pages are short or empty
// and carry a cursor at their window's start until the window reaches the
// oldest message; following the cursors finds each match once, newest
// first.
func searchFrontendWindow(f *fixture) {
	var batch []persistence.NewMessage
	for i := range 40 {
		nm := newMsg(fmt.Sprintf("w-%02d", i))
		switch i {
		case 0, 1, 17, 38:
			nm.Frontend = feB
		case 3, 25:
			nm = fwdMsg(nm.ID, peerP)
		}
		batch = append(batch, nm)
	}
	res := f.accept(base, batch...)
	seq := func(i int) int64 { return res[i].Message.Seq }
	for i := 1; i < len(res); i++ {
		if seq(i) != seq(i-1)+1 {
			f.Fatalf("one batch's seqs are not consecutive: %d then %d", seq(i-1), seq(i))
		}
	}

	// pages follows the cursors of q and returns each page's ids and
	// cursor.
	type page struct {
		ids  []string
		next int64
	}
	pages := func(q persistence.ListQuery) []page {
		f.Helper()
		var out []page
		for range 100 {
			p := f.list(q)
			out = append(out, page{messageIDs(p.Messages), p.Next})
			if p.Next == 0 {
				return out
			}
			if q.Before != 0 && p.Next >= q.Before {
				f.Fatalf("ListMessages(%+v): cursor %d does not move down", q, p.Next)
			}
			q.Before = p.Next
		}
		f.Fatalf("ListMessages(%+v): more than 100 pages", q)
		return nil
	}
	all := func(ps []page) []string {
		var ids []string
		for _, p := range ps {
			ids = append(ids, p.ids...)
		}
		return ids
	}

	q := persistence.ListQuery{Frontend: feB, Limit: 2, Budget: 5}
	ps := pages(q)
	f.wantIDs("frontend, a window per page", all(ps), "w-38", "w-17", "w-01", "w-00")
	// The first window is [35, 40): one match, and a cursor at its start.
	if p := ps[0]; !equalStrings(p.ids, []string{"w-38"}) || p.next != seq(35) {
		f.Errorf("first page = %q next %d, want [w-38] next %d (the window's start)", p.ids, p.next, seq(35))
	}
	if p := ps[1]; len(p.ids) != 0 || p.next != seq(30) {
		f.Errorf("second page = %q next %d, want none, next %d", p.ids, p.next, seq(30))
	}
	// [30, 35) .. [5, 10) hold one match; below 5 the window reaches the
	// oldest message and the last page is full.
	if len(ps) != 8 {
		f.Errorf("%d pages, want 8 (one per window of 5, the last reaching the oldest)", len(ps))
	}
	if last := ps[len(ps)-1]; !equalStrings(last.ids, []string{"w-01", "w-00"}) {
		f.Errorf("last page = %q, want [w-01 w-00]", last.ids)
	}

	q.State = messages.StatePending
	f.wantIDs("frontend and state", all(pages(q)), "w-38", "w-17", "w-01", "w-00")
	q.State = messages.StateDelivered
	f.wantIDs("frontend and a state none is in", all(pages(q)))
	f.wantIDs("peer", all(pages(persistence.ListQuery{Peer: peerP, Limit: 2, Budget: 5})), "w-25", "w-03")

	// A full page ends after its last row, as without a window.
	p := f.list(persistence.ListQuery{Frontend: feA, Limit: 2, Budget: 5})
	if got := messageIDs(p.Messages); !equalStrings(got, []string{"w-39", "w-37"}) || p.Next != seq(37) {
		f.Errorf("full page = %q next %d, want [w-39 w-37] next %d", got, p.Next, seq(37))
	}
	// A budget that covers the store changes nothing: one page, complete.
	p = f.list(persistence.ListQuery{Frontend: feB, Limit: 10, Budget: 40})
	if got := messageIDs(p.Messages); !equalStrings(got, []string{"w-38", "w-17", "w-01", "w-00"}) || p.Next != 0 {
		f.Errorf("budget 40 = %q next %d, want all four, last page", got, p.Next)
	}
	// So does the default budget, and the budget of a query that is not
	// windowed (a state alone, a number with the frontend).
	f.wantIDs("default budget", all(pages(persistence.ListQuery{Frontend: feB, Limit: 2})), "w-38", "w-17", "w-01", "w-00")
	p = f.list(persistence.ListQuery{State: messages.StatePending, Limit: 3, Budget: 1})
	if got := messageIDs(p.Messages); !equalStrings(got, []string{"w-39", "w-38", "w-37"}) || p.Next != seq(37) {
		f.Errorf("a state alone, budget 1 = %q next %d, want [w-39 w-38 w-37] next %d", got, p.Next, seq(37))
	}
	number := persistence.ListQuery{Frontend: feB, Destination: persistence.NumberMatch{Key: "447700900123"}, Limit: 10, Budget: 1}
	f.wantIDs("a number with the frontend", all(pages(number)), "w-38", "w-17", "w-01", "w-00")
	if n := len(pages(number)); n != 1 {
		f.Errorf("a number with the frontend: %d pages, want 1", n)
	}
}

func searchPrefixIsLiteral(f *fixture) {
	for i, src := range []string{"A_B", "AxB", "A%B", `A\B`} {
		nm := newMsg(fmt.Sprintf("s-lit-%d", i))
		nm.SourceMSISDN = src
		f.accept(at(secs(i)), nm)
	}
	f.wantIDs("underscore", searchAll(f, persistence.ListQuery{Source: persistence.NumberMatch{Key: "A_", Prefix: true}}), "s-lit-0")
	f.wantIDs("percent", searchAll(f, persistence.ListQuery{Source: persistence.NumberMatch{Key: "A%", Prefix: true}}), "s-lit-2")
	f.wantIDs("backslash", searchAll(f, persistence.ListQuery{Source: persistence.NumberMatch{Key: `A\`, Prefix: true}}), "s-lit-3")
}

func searchInvalid(f *fixture) {
	for name, q := range map[string]persistence.ListQuery{
		"since after until":       {Limit: 1, Since: at(secs(2)), Until: at(secs(1))},
		"a key with its +":        {Limit: 1, Destination: persistence.NumberMatch{Key: "+44"}},
		"an empty prefix":         {Limit: 1, Source: persistence.NumberMatch{Prefix: true}},
		"a time cursor by number": {Limit: 1, Before: 3, BeforeAt: base, Destination: persistence.NumberMatch{Key: "44"}},
		// A time range's next page is (NextAt, Next): its seq alone read
		// as a cursor at the zero time, an empty last page.
		"a time range's cursor without its time": {Limit: 1, Since: base, Before: 3},
	} {
		if _, err := f.store.ListMessages(f.ctx, q); err == nil {
			f.Errorf("%s: no error", name)
		}
	}
}
