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
	} {
		if _, err := f.store.ListMessages(f.ctx, q); err == nil {
			f.Errorf("%s: no error", name)
		}
	}
}
