package storetest

import (
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// A message's trace context is kept with it and comes back wherever the
// message does: the API's reads and the work a worker claims or is handed.

func traceCases() []testCase {
	return []testCase{
		{"KeptWithTheMessage", traceKept},
		{"EmptyWhenNotSampled", traceEmpty},
		{"NotPartOfTheContent", traceNotContent},
	}
}

const (
	traceA = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceB = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

func traced(m persistence.NewMessage, tp string) persistence.NewMessage {
	m.Trace = tp
	return m
}

func (f *fixture) wantTrace(what string, m messages.Message, tp string) {
	f.Helper()
	if m.Trace != tp || m.TraceID != messages.TraceIDOf(tp) {
		f.Errorf("%s: Trace %q TraceID %q, want %q %q", what, m.Trace, m.TraceID, tp, messages.TraceIDOf(tp))
	}
}

// traceKept: Accept's result, GetMessage, ListMessages, a claim and work
// handed over with a lease all carry the trace.
func traceKept(f *fixture) {
	res := f.accept(base, traced(newMsg("tr-1"), traceA), leased(traced(fwdMsg("tr-fwd", peerP), traceB), ownerA, at(lease)))
	f.wantTrace("Accept tr-1", res[0].Message, traceA)
	if res[1].Work == nil {
		f.Fatalf("tr-fwd: no work handed over")
	}
	f.wantTrace("handed-over tr-fwd", res[1].Work.Message, traceB)
	f.wantTrace("GetMessage tr-1", f.get("tr-1"), traceA)
	f.wantTrace("GetMessage tr-fwd", f.get("tr-fwd"), traceB)
	p := f.list(persistence.ListQuery{Limit: 10})
	for _, m := range p.Messages {
		switch m.ID {
		case "tr-1":
			f.wantTrace("ListMessages tr-1", m, traceA)
		case "tr-fwd":
			f.wantTrace("ListMessages tr-fwd", m, traceB)
		}
	}
	c := f.claimOf(persistence.WorkDelivery, feA, ownerA, base, 10)
	if len(c.Work) != 1 || c.Work[0].MessageID != "tr-1" {
		f.Fatalf("claim: %v, want tr-1", workIDs(c.Work))
	}
	f.wantTrace("claimed tr-1", c.Work[0].Message, traceA)
}

// traceEmpty: a message without a trace has none, and no trace_id.
func traceEmpty(f *fixture) {
	res := f.accept(base, newMsg("tr-none"))
	f.wantTrace("Accept", res[0].Message, "")
	f.wantTrace("GetMessage", f.get("tr-none"), "")
}

// traceNotContent: the same message again with another trace (a client's
// retry in a new trace) is the stored message, with its first trace.
func traceNotContent(f *fixture) {
	f.accept(base, traced(newMsg("tr-again"), traceA))
	res := f.accept(at(time.Second), traced(newMsg("tr-again"), traceB))
	if res[0].Created || res[0].Conflict != "" {
		f.Fatalf("again: Created %v Conflict %q, want the stored message", res[0].Created, res[0].Conflict)
	}
	f.wantTrace("again", res[0].Message, traceA)
}
