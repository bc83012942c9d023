package intake

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func submit(id, dest string) (*messages.Submit, chan messages.SubmitReply) {
	reply := make(chan messages.SubmitReply, 1)
	return &messages.Submit{Submission: messages.Submission{ID: id, DestinationMSISDN: dest}, Reply: reply}, reply
}

// forwardOfTwo is peer c's forward request of x and y, and its reply.
func forwardOfTwo() (*forwardReq, chan messages.AcceptForwardsReply) {
	reply := make(chan messages.AcceptForwardsReply, 1)
	return &forwardReq{m: &messages.AcceptForwards{From: "c", Reply: reply,
		Forwards: []messages.Forward{{ID: "x", SourceSMSC: "c"}, {ID: "y", SourceSMSC: "c"}}}, results: make([]messages.ForwardResult, 2), left: 2}, reply
}

// reports is peer p's request to apply the status updates, and its reply.
func reports(updates ...persistence.StatusUpdate) (*statusReq, chan messages.ApplyStatusesReply) {
	reply := make(chan messages.ApplyStatusesReply, 1)
	return &statusReq{m: &messages.ApplyStatuses{From: "p", Reply: reply}, updates: updates}, reply
}

func TestSettle(t *testing.T) {
	s1, r1 := submit("a", "44")
	s2, r2 := submit("b", "44")
	fwd, fwdReply := forwardOfTwo()
	rep, statusReply := reports(persistence.StatusUpdate{ID: "r1", From: "p", Result: persistence.ResultDelivered}, persistence.StatusUpdate{ID: "r2", From: "p", Result: persistence.ResultFailed})
	work := func(kind persistence.WorkKind, target string) *persistence.WorkSpec {
		return &persistence.WorkSpec{Kind: kind, Target: target}
	}
	b := &Batch{Now: t0,
		entries: []entry{{sub: s1}, {sub: s2}, {fwd: fwd, idx: 0}, {fwd: fwd, idx: 1}},
		from:    []int{0, 1, 2, 3},
		Stored: []persistence.NewMessage{
			{ID: "a", Work: work(persistence.WorkDelivery, "uk")}, {ID: "b", Work: work(persistence.WorkForward, "peer")},
			{ID: "x", Work: work(persistence.WorkDelivery, "uk")}, {ID: "y", Work: work(persistence.WorkDelivery, "uk")},
		},
		reports: []*statusReq{rep},
	}
	w := persistence.Written{
		Accepted: []persistence.Accepted{
			{Created: true, Message: messages.Message{ID: "a", State: messages.StatePending}},
			{Created: true, Message: messages.Message{ID: "b", State: messages.StateForwardQueued}},
			{Created: false, ReportTo: "c", Message: messages.Message{ID: "x", State: messages.StateDelivered, SourceSMSC: "c"}},
			// y names c as its source but another peer forwarded it: its
			// origin is who forwarded it (ReportTo), not what a body says.
			{Created: false, ReportTo: "elsewhere", Message: messages.Message{ID: "y", SourceSMSC: "c"}},
		},
		Reported: []persistence.Completion{persistence.Applied, persistence.NoWork},
	}
	changes, kicks := b.settle(w, nil)
	if got := (<-r1).Message.ID; got != "a" {
		t.Errorf("submit a answered %q", got)
	}
	if got := <-r2; !got.Created || got.Message.State != messages.StateForwardQueued {
		t.Errorf("submit b answered %+v", got)
	}
	fr := <-fwdReply
	if !fr.Results[0].Duplicate || fr.Results[0].Error != nil || fr.Results[1].Error == nil {
		t.Errorf("forward results %+v: x a duplicate, y another origin's id", fr.Results)
	}
	sr := <-statusReply
	if sr.Results[0].Outcome != "applied" || sr.Results[1].Outcome != "no_work" {
		t.Errorf("status results %+v", sr.Results)
	}
	// a and b created, r1 applied; the queued forward kicks nothing.
	if len(changes) != 3 || changes[2].ID != "r1" || changes[2].State != messages.StateDelivered {
		t.Errorf("changes %+v", changes)
	}
	if len(kicks) != 1 || kicks[0].Target != "uk" {
		t.Errorf("kicks %+v, want the uk worker only", kicks)
	}

	s3, r3 := submit("c", "44")
	rep2Reply := make(chan messages.ApplyStatusesReply, 1)
	rep2 := &statusReq{m: &messages.ApplyStatuses{From: "p", Reply: rep2Reply}}
	b = &Batch{entries: []entry{{sub: s3}}, from: []int{0}, Stored: []persistence.NewMessage{{ID: "c"}}, reports: []*statusReq{rep2}}
	if changes, kicks := b.settle(persistence.Written{}, errors.New("disk full")); changes != nil || kicks != nil {
		t.Errorf("a failed commit published %v, kicked %v", changes, kicks)
	}
	if got := <-r3; got.Err == nil {
		t.Error("submit of a failed commit answered without error")
	}
	if got := <-rep2Reply; got.Err == nil {
		t.Error("reports of a failed commit answered without error")
	}
}

// TestHandOverSettlesEveryGrant: each grant the board gave a batch ends
// once: with the Work that carries it to its worker (Granted, which the
// worker settles), settled at once when the commit stored none of its
// rows, or released when the commit failed.
func TestHandOverSettlesEveryGrant(t *testing.T) {
	board := handover.NewBoard()
	uk := handover.Key{Kind: persistence.WorkDelivery, Target: "uk"}
	se := handover.Key{Kind: persistence.WorkDelivery, Target: "se"}
	wUK, wSE := &actor.PID{Id: "uk"}, &actor.PID{Id: "se"}
	board.Offer(uk, 10, time.Minute, wUK)
	board.Offer(se, 10, time.Minute, wSE)
	due := func(target string) *persistence.WorkSpec {
		return &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: target, DueAt: t0}
	}
	newBatch := func() *Batch {
		return &Batch{Now: t0, Stored: []persistence.NewMessage{
			{ID: "a", State: messages.StatePending, Work: due("uk")}, {ID: "b", State: messages.StatePending, Work: due("uk")},
			{ID: "c", State: messages.StatePending, Work: due("se")},
		}}
	}
	b := newBatch()
	b.hand(board, "me")
	if board.Owed(uk, wUK) != 2 || board.Owed(se, wSE) != 1 {
		t.Fatalf("owed uk %d se %d after the batch took its offers", board.Owed(uk, wUK), board.Owed(se, wSE))
	}
	// uk's rows were stored leased; se's one was a duplicate (not stored).
	leased := func(id string) *persistence.Work {
		return &persistence.Work{Kind: persistence.WorkDelivery, Target: "uk", MessageID: id}
	}
	w := persistence.Written{Accepted: []persistence.Accepted{{Created: true, Work: leased("a")}, {Created: true, Work: leased("b")}, {}}}
	sent := map[*actor.PID]*handover.Work{}
	b.handOver(w, func(to *actor.PID, work *handover.Work) { sent[to] = work })
	b.release() // as the intake does after every commit: nothing is left
	if len(sent) != 1 || sent[wUK] == nil || len(sent[wUK].Work) != 2 || sent[wUK].Granted != 2 || sent[wUK].Key != uk {
		t.Fatalf("sent %+v, want uk's 2 rows with its grant of 2", sent)
	}
	if n := board.Owed(se, wSE); n != 0 {
		t.Fatalf("se is still owed %d for a row the commit did not store", n)
	}
	if n := board.Owed(uk, wUK); n != 2 {
		t.Fatalf("uk owed %d before its Work came, want 2", n)
	}
	sent[wUK].Arrived(board, wUK)
	if n := board.Owed(uk, wUK); n != 0 {
		t.Fatalf("uk owed %d after its Work came", n)
	}

	// A commit that failed hands nothing over and owes nothing.
	b = newBatch()
	b.hand(board, "me")
	b.settle(persistence.Written{}, errors.New("disk on fire"))
	b.release()
	if board.Owed(uk, wUK) != 0 || board.Owed(se, wSE) != 0 {
		t.Fatalf("a failed commit left owed uk %d se %d", board.Owed(uk, wUK), board.Owed(se, wSE))
	}
	// Nor does a batch the intake gave up (its commit's goroutine panicked).
	b = newBatch()
	b.hand(board, "me")
	b.abandon(errors.New("restarted"))
	if board.Owed(uk, wUK) != 0 || board.Owed(se, wSE) != 0 {
		t.Fatalf("an abandoned batch left owed uk %d se %d", board.Owed(uk, wUK), board.Owed(se, wSE))
	}
	// Every grant that never came was offered again (the workers' room did
	// not change): se's 10 whole; uk's 10 less the 2 rows that came.
	if n, _, _ := board.Take(uk, 99); n != 8 {
		t.Errorf("uk offers %d after the refunds, want 8", n)
	}
	if n, _, _ := board.Take(se, 99); n != 10 {
		t.Errorf("se offers %d after the refunds, want 10", n)
	}
}

// TestForwardRequestSplitOverCommitsIsAnsweredOnce: a peer's forward
// request whose messages two commits share (Take cuts at MaxBatch) is
// answered once. When both commits fail, the second does not block its
// goroutine on the request's one-answer Reply channel (nobody reads it
// once the peer's timeout ended the request); when both succeed, from
// goroutines of their own, the one answer holds every result.
func TestForwardRequestSplitOverCommitsIsAnsweredOnce(t *testing.T) {
	split := func() (chan messages.AcceptForwardsReply, *Batch, *Batch) {
		reply := make(chan messages.AcceptForwardsReply, 1) // as the gateway makes it
		m := &messages.AcceptForwards{From: "a", Reply: reply,
			Forwards: []messages.Forward{{ID: "x", SourceSMSC: "a"}, {ID: "y", SourceSMSC: "a"}}}
		p := Pipeline{Depth: 2, MaxBatch: 1}
		p.Forwards(m)
		e1, _, _ := p.Take()
		e2, _, _ := p.Take()
		work := &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe"}
		return reply, &Batch{entries: e1, from: []int{0}, Stored: []persistence.NewMessage{{ID: "x", Work: work}}},
			&Batch{entries: e2, from: []int{0}, Stored: []persistence.NewMessage{{ID: "y", Work: work}}}
	}
	settled := func(b *Batch, w persistence.Written, err error) chan struct{} {
		done := make(chan struct{})
		go func() { b.settle(w, err); close(done) }()
		return done
	}
	wait := func(what string, done chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the commit's settle is blocked sending a second answer", what)
		}
	}

	reply, b1, b2 := split()
	wait("first failed commit", settled(b1, persistence.Written{}, errors.New("store timeout")))
	wait("second failed commit", settled(b2, persistence.Written{}, errors.New("store timeout")))
	if r := <-reply; r.Err == nil {
		t.Errorf("the failed request was answered %+v, want its error", r)
	}
	select {
	case r := <-reply:
		t.Errorf("a second answer: %+v", r)
	default:
	}

	reply, b1, b2 = split()
	accepted := func(id string) persistence.Written {
		return persistence.Written{Accepted: []persistence.Accepted{{Created: true,
			Message: messages.Message{ID: id, SourceSMSC: "a", State: messages.StatePending}}}}
	}
	d1, d2 := settled(b1, accepted("x"), nil), settled(b2, accepted("y"), nil)
	wait("first commit", d1)
	wait("second commit", d2)
	r := <-reply
	if r.Err != nil || len(r.Results) != 2 || r.Results[0].ID != "x" || r.Results[1].ID != "y" || r.Results[0].Error != nil || r.Results[1].Error != nil {
		t.Errorf("the request stored by two commits was answered %+v", r)
	}
}

// TestSettleGivesBackAFrontendGone: an entry the store did not create for
// a frontend it no longer has (FrontendGone) is not answered but given back
// (Again), to be routed again by a directory read since, ahead of the queue
// (Pipeline.Again); given back once already, it is answered.
func TestSettleGivesBackAFrontendGone(t *testing.T) {
	s1, r1 := submit("a", "44")
	s2, r2 := submit("b", "44")
	work := &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "old"}
	b := &Batch{Now: t0, entries: []entry{{sub: s1}, {sub: s2}}, from: []int{0, 1},
		Stored: []persistence.NewMessage{{ID: "a", Work: work}, {ID: "b", Work: work}}}
	w := persistence.Written{Accepted: []persistence.Accepted{
		{FrontendGone: true}, {Created: true, Message: messages.Message{ID: "b", State: messages.StatePending}},
	}}
	changes, _ := b.settle(w, nil)
	if got := <-r2; got.Message.ID != "b" || !got.Created {
		t.Errorf("submit b answered %+v", got)
	}
	select {
	case got := <-r1:
		t.Fatalf("submit a, for a frontend gone, answered %+v; want it given back", got)
	default:
	}
	if len(b.Again) != 1 || b.Again[0].sub != s1 || len(changes) != 1 {
		t.Fatalf("given back %+v, changes %+v; want submit a given back, b's change", b.Again, changes)
	}

	s3, _ := submit("c", "44")
	p := Pipeline{Depth: 1, MaxBatch: 10}
	p.Submit(s3, nil)
	p.Again(b.Again)
	entries, _, _ := p.Take()
	if len(entries) != 2 || entries[0].sub != s1 || !entries[0].rerouted || entries[1].sub != s3 || entries[1].rerouted {
		t.Fatalf("queue after Again: %+v; want a (rerouted) ahead of c", entries)
	}

	b = &Batch{Now: t0, entries: entries[:1], from: []int{0}, Stored: []persistence.NewMessage{{ID: "a", Work: work}}}
	b.settle(persistence.Written{Accepted: []persistence.Accepted{{FrontendGone: true}}}, nil)
	if got := <-r1; got.Err == nil || len(b.Again) != 0 {
		t.Errorf("a given back once and gone again: answered %+v, given back %d; want an error", got, len(b.Again))
	}
}

// TestSettleForwardRefusedHere: a forward this node refuses (forwardTarget:
// it stopped serving the frontend) went to the commit as a lookup. Its id
// stored from the same peer is answered duplicate with the stored state,
// as any forward sent again; an id not stored gets the refusal.
func TestSettleForwardRefusedHere(t *testing.T) {
	reply := make(chan messages.AcceptForwardsReply, 1)
	fwd := &forwardReq{m: &messages.AcceptForwards{From: "c", Reply: reply,
		Forwards: []messages.Forward{{ID: "x", SourceSMSC: "c"}, {ID: "y", SourceSMSC: "c"}}}, results: make([]messages.ForwardResult, 2), left: 2}
	refusal := messages.Errorf(messages.CodeNotOurFrontend, "frontend %q is not served by b", "gone")
	b := &Batch{Now: t0,
		entries: []entry{{fwd: fwd, idx: 0, refusal: refusal}, {fwd: fwd, idx: 1, refusal: refusal}},
		from:    []int{0, 1},
		Stored:  []persistence.NewMessage{storedOnlyForward(fwd.m.Forwards[0], "c"), storedOnlyForward(fwd.m.Forwards[1], "c")},
	}
	w := persistence.Written{Accepted: []persistence.Accepted{
		{ReportTo: "c", Message: messages.Message{ID: "x", State: messages.StatePending, SourceSMSC: "c"}},
		{Absent: true},
	}}
	b.settle(w, nil)
	fr := <-reply
	if r := fr.Results[0]; !r.Duplicate || r.Error != nil || r.State != messages.StatePending {
		t.Errorf("x (stored from c) answered %+v, want a duplicate, pending", r)
	}
	if r := fr.Results[1]; r.Error == nil || r.Error.Code != messages.CodeNotOurFrontend {
		t.Errorf("y (not stored) answered %+v, want %s", r, messages.CodeNotOurFrontend)
	}
	if nm := b.Stored[0]; !nm.StoredOnly || nm.ReportTo != "c" || nm.Work != nil || nm.State != "" {
		t.Errorf("lookup of a refused forward = %+v: stored-only, ReportTo the caller, no state or work", nm)
	}
}

// TestSettlePartial: a commit whose store stored some new messages and
// could not read the others back (a PartialAccept) answers the created
// entries, submits and forwards alike, and publishes and kicks their work
// as any commit; the Unread ones, and any report, get the store's failure
// (unavailable: retry with the same id).
func TestSettlePartial(t *testing.T) {
	s1, r1 := submit("a", "44")
	s2, r2 := submit("b", "44")
	fwd, fwdReply := forwardOfTwo()
	rep, statusReply := reports(persistence.StatusUpdate{ID: "r1", From: "p", Result: persistence.ResultDelivered})
	work := &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "uk"}
	b := &Batch{Now: t0,
		entries: []entry{{sub: s1}, {sub: s2}, {fwd: fwd, idx: 0}, {fwd: fwd, idx: 1}},
		from:    []int{0, 1, 2, 3},
		Stored:  []persistence.NewMessage{{ID: "a", Work: work}, {ID: "b", Work: work}, {ID: "x", Work: work}, {ID: "y", Work: work}},
		reports: []*statusReq{rep},
	}
	created := func(id string) persistence.Accepted {
		return persistence.Accepted{Created: true, Message: messages.Message{ID: id, State: messages.StatePending}}
	}
	err := &persistence.PartialAccept{Err: errors.New("connection lost"),
		Accepted: []persistence.Accepted{created("a"), {Unread: true}, created("x"), {Unread: true}}}
	changes, kicks := b.settle(persistence.Written{}, err)
	if got := <-r1; got.Err != nil || !got.Created || got.Message.ID != "a" {
		t.Errorf("submit a, created: %+v", got)
	}
	var me *messages.Error
	if got := <-r2; !errors.As(got.Err, &me) || me.Code != messages.CodeUnavailable {
		t.Errorf("submit b, unread: %+v, want %s", got, messages.CodeUnavailable)
	}
	fr := <-fwdReply
	if fr.Err != nil || fr.Results[0].Error != nil || fr.Results[0].Duplicate || fr.Results[1].Error == nil || fr.Results[1].Error.Code != messages.CodeUnavailable {
		t.Errorf("forward results %+v: x created, y %s", fr, messages.CodeUnavailable)
	}
	if got := <-statusReply; got.Err == nil {
		t.Errorf("reports of a partial commit answered %+v, want its error", got)
	}
	if len(changes) != 2 || changes[0].ID != "a" || changes[1].ID != "x" || len(kicks) != 1 || kicks[0].Target != "uk" {
		t.Errorf("changes %+v, kicks %+v; want a's and x's, the uk worker kicked", changes, kicks)
	}
}
