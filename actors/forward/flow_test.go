package forward

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/transport"
)

func flowPolicy() Policy {
	p := DefaultPolicy()
	p.Batch, p.InFlight = 10, 2
	return p
}

func claimed(kind persistence.WorkKind, n int) *persistence.Claim {
	c := &persistence.Claim{}
	for i := range n {
		id := fmt.Sprintf("%s-%d", kind, i)
		c.Work = append(c.Work, persistence.Work{Kind: kind, Target: "b", MessageID: id, LeaseEpoch: 3,
			Message: messages.Message{ID: id, State: messages.StatePending, Frontend: "fe"}})
	}
	return c
}

func TestFlowClaimsForEveryFreeSlotInOneRound(t *testing.T) {
	f := NewFlow("b", "me", flowPolicy())
	if _, ok := f.Next(t0, time.Minute); ok {
		t.Fatal("a round with both lanes closed")
	}
	f.Lane(persistence.WorkForward).SetOpen(true)
	f.Lane(persistence.WorkStatus).SetOpen(true)
	r, ok := f.Next(t0, time.Minute)
	if !ok || len(r.Claims) != 2 || r.Claims[0].Kind != persistence.WorkStatus || r.Claims[1].Limit != 20 {
		t.Fatalf("round %+v: want a status claim and a forward claim of 2 x 10", r)
	}
	if _, ok := f.Next(t0, time.Minute); ok {
		t.Fatal("a second round while one is out")
	}
	sends, _ := f.Done(t0, r, persistence.Written{}, []*persistence.Claim{claimed(persistence.WorkStatus, 0), claimed(persistence.WorkForward, 14)}, nil)
	if len(sends) != 2 || len(sends[0].Work) != 10 || len(sends[1].Work) != 4 {
		t.Fatalf("sends %+v: want the 14 forwards in a batch of 10 and one of 4", sends)
	}
	if r, ok := f.Next(t0, time.Minute); ok {
		t.Fatalf("round %+v: both lanes came back short and the forward lane is full", r)
	}
}

func TestFlowRecordsResultsWithTheNextClaims(t *testing.T) {
	f := NewFlow("b", "me", flowPolicy())
	f.Lane(persistence.WorkForward).SetOpen(true)
	r, _ := f.Next(t0, time.Minute)
	sends, _ := f.Done(t0, r, persistence.Written{}, []*persistence.Claim{claimed(persistence.WorkForward, 3)}, nil)
	results := []messages.ForwardResult{
		{ForwardReply: messages.ForwardReply{ID: "forward-0"}},
		{ForwardReply: messages.ForwardReply{ID: "forward-1", Duplicate: true, State: messages.StateDelivered}},
		{ForwardReply: messages.ForwardReply{ID: "forward-2"}, Error: messages.Errorf(messages.CodeNotOurFrontend, "no")},
	}
	if closed := f.Sent(t0, sends[0], results, nil, nil); closed {
		t.Fatal("a request that worked closed the lane")
	}
	f.Lane(persistence.WorkForward).Kick()
	r, ok := f.Next(t0, time.Minute)
	if !ok || len(r.Outcomes)+len(r.Updates) != 3 || len(r.Claims) != 1 {
		t.Fatalf("round %+v: want the three results and the next claim", r)
	}
	for _, o := range r.Outcomes {
		if o.Epoch != 3 || o.Owner != "me" {
			t.Errorf("outcome %+v not fenced by its claim", o)
		}
	}
	comps := make([]persistence.Completion, len(r.Outcomes))
	for i := range comps {
		comps[i] = persistence.Applied
	}
	reps := make([]persistence.Completion, len(r.Updates))
	for i := range reps {
		reps[i] = persistence.Applied
	}
	_, changes := f.Done(t0, r, persistence.Written{Completions: comps, Reported: reps}, []*persistence.Claim{{}}, nil)
	if len(changes) != 3 {
		t.Errorf("changes %+v, want one per recorded result", changes)
	}
}

func TestFlowFailedRequestClosesTheLaneOnce(t *testing.T) {
	f := NewFlow("b", "me", flowPolicy())
	f.Lane(persistence.WorkForward).SetOpen(true)
	r, _ := f.Next(t0, time.Minute)
	sends, _ := f.Done(t0, r, persistence.Written{}, []*persistence.Claim{claimed(persistence.WorkForward, 20)}, nil)
	if len(sends) != 2 {
		t.Fatalf("sends %d, want 2", len(sends))
	}
	boom := errors.New("connection refused")
	if !f.Sent(t0, sends[0], nil, nil, boom) {
		t.Error("the first failed request did not close the lane")
	}
	if f.Sent(t0, sends[1], nil, nil, boom) {
		t.Error("the second failed request closed it again")
	}
	r, ok := f.Next(t0, time.Minute)
	if !ok || len(r.Outcomes) != 20 || len(r.Claims) != 0 {
		t.Fatalf("round %+v: want the 20 retries recorded, no claim on the closed lane", r)
	}
	for _, o := range r.Outcomes {
		if o.Result != persistence.ResultRetry {
			t.Errorf("outcome %+v, want a retry", o)
		}
	}
	// A failed round records nothing; its claims are asked for again at
	// the next kick (the queue's tick), not at once: a store that keeps
	// failing is not called in a loop.
	f.Lane(persistence.WorkForward).SetOpen(true)
	f.Done(t0, r, persistence.Written{}, nil, errors.New("store down"))
	r, ok = f.Next(t0, time.Minute)
	if !ok || len(r.Claims) != 1 {
		t.Fatalf("after a failed round and the lane reopened: %+v", r)
	}
	f.Done(t0, r, persistence.Written{}, nil, errors.New("store down"))
	if r, ok := f.Next(t0, time.Minute); ok {
		t.Errorf("a failed claim was retried at once: %+v", r)
	}
	f.Lane(persistence.WorkForward).Kick()
	if r, ok := f.Next(t0, time.Minute); !ok || len(r.Claims) != 1 {
		t.Errorf("after a failed round and a kick: %+v", r)
	}
}

func TestFlowSetHealthy(t *testing.T) {
	fwd := func(f *Flow) *Lane { return f.Lane(persistence.WorkForward) }
	drain := func(l *Lane) { l.Claimed(0, 10, l.Kicks()) }
	cases := []struct {
		name    string
		setup   func(f *Flow)
		healthy bool
		// want of the forward lane; status of the status lane's Open.
		open, drained, status bool
	}{
		{"healthy opens closed lanes, work assumed", func(*Flow) {}, true, true, false, true},
		{"healthy again leaves an open lane as it is", func(f *Flow) {
			f.SetHealthy(true)
			drain(fwd(f))
		}, true, true, true, true},
		{"healthy reopens a lane a failed request closed", func(f *Flow) {
			f.SetHealthy(true)
			drain(fwd(f))
			fwd(f).Took()
			fwd(f).Done(false)
		}, true, true, false, true},
		{"not healthy closes every lane", func(f *Flow) { f.SetHealthy(true) }, false, false, false, false},
		{"not healthy keeps closed lanes closed", func(*Flow) {}, false, false, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFlow("b", "me", flowPolicy())
			tc.setup(f)
			f.SetHealthy(tc.healthy)
			l := fwd(f)
			if l.Open() != tc.open || l.Drained() != tc.drained || f.Lane(persistence.WorkStatus).Open() != tc.status {
				t.Fatalf("forward lane open %v drained %v, status lane open %v; want %v %v %v",
					l.Open(), l.Drained(), f.Lane(persistence.WorkStatus).Open(), tc.open, tc.drained, tc.status)
			}
		})
	}
}

// TestFlowGonePeerGetsOnlyItsReports: a peer gone from discovery that
// still answers has its status lane opened (the reports owed to it) and
// its forward lane kept closed, so the round claims only status work and
// the queue offers the intake nothing; back in discovery, both open.
func TestFlowGonePeerGetsOnlyItsReports(t *testing.T) {
	f := NewFlow("b", "me", flowPolicy())
	f.SetLink(messages.PeerLink{Healthy: true, Addr: "b:1", Gone: true})
	if f.Lane(persistence.WorkForward).Open() || !f.Lane(persistence.WorkStatus).Open() {
		t.Fatalf("gone: forward lane open %v, status lane open %v; want closed, open",
			f.Lane(persistence.WorkForward).Open(), f.Lane(persistence.WorkStatus).Open())
	}
	r, ok := f.Next(t0, time.Minute)
	if !ok || len(r.Claims) != 1 || r.Claims[0].Kind != persistence.WorkStatus {
		t.Fatalf("round %+v: want one status claim", r)
	}
	if n := f.Offer(); n != 0 {
		t.Errorf("a gone peer's queue offers %d forwards", n)
	}
	f.Done(t0, r, persistence.Written{}, []*persistence.Claim{claimed(persistence.WorkStatus, 0)}, nil)
	f.SetLink(messages.PeerLink{Healthy: true, Addr: "b:1"})
	if !f.Lane(persistence.WorkForward).Open() || !f.Lane(persistence.WorkStatus).Open() {
		t.Fatal("back in discovery: want both lanes open")
	}
}

func TestFlowTickKicksEveryLane(t *testing.T) {
	f := NewFlow("b", "me", flowPolicy())
	f.SetHealthy(true)
	r, _ := f.Next(t0, time.Minute)
	f.Done(t0, r, persistence.Written{}, []*persistence.Claim{claimed(persistence.WorkStatus, 0), claimed(persistence.WorkForward, 0)}, nil)
	if r, ok := f.Next(t0, time.Minute); ok {
		t.Fatalf("round %+v: both lanes came back empty", r)
	}
	f.Tick()
	if r, ok := f.Next(t0, time.Minute); !ok || len(r.Claims) != 2 {
		t.Fatalf("round %+v after a tick: want a claim for each lane", r)
	}
}

// TestFlowHandedOverForwardsShareRequests: forwards handed over while the
// lane is full wait, and leave together once a request ends.
func TestFlowHandedOverForwardsShareRequests(t *testing.T) {
	f := NewFlow("b", "me", flowPolicy())
	f.Lane(persistence.WorkForward).SetOpen(true)
	r, _ := f.Next(t0, time.Minute)
	sends, _ := f.Done(t0, r, persistence.Written{}, []*persistence.Claim{claimed(persistence.WorkForward, 0)}, nil)
	if len(sends) != 0 || f.Offer() != 20 {
		t.Fatalf("an idle open lane: sends %d, offer %d; want none and 2 x 10", len(sends), f.Offer())
	}
	f.Handover(claimed(persistence.WorkForward, 3).Work)
	f.Handover(claimed(persistence.WorkForward, 3).Work)
	f.Handover(claimed(persistence.WorkForward, 12).Work)
	out := f.HandedOut()
	if len(out) != 2 || len(out[0].Work) != 10 || len(out[1].Work) != 8 {
		t.Fatalf("handed out %d batches, want 10 and 8", len(out))
	}
	f.Handover(claimed(persistence.WorkForward, 3).Work)
	f.Handover(claimed(persistence.WorkForward, 4).Work)
	if out := f.HandedOut(); len(out) != 0 {
		t.Fatalf("sent %d with the lane full", len(out))
	}
	if n := f.Offer(); n != 0 {
		t.Errorf("offer %d with the lane full", n)
	}
	f.Sent(t0, Batch{Kind: persistence.WorkForward, Work: out[0].Work}, make([]messages.ForwardResult, 10), nil, nil)
	if out := f.HandedOut(); len(out) != 1 || len(out[0].Work) != 7 {
		t.Fatalf("after a request ended: %+v, want the 7 waiting in one batch", out)
	}
}

// TestFlowFencesHandedOverWorkByItsOwner: forwards handed over by the
// intake are leased to this instance under epoch 0; their outcomes name
// the owner and that epoch, so that the store refuses them once another
// instance claimed the rows (their lease ran out).
func TestFlowFencesHandedOverWorkByItsOwner(t *testing.T) {
	f := NewFlow("b", "me", flowPolicy())
	f.Lane(persistence.WorkForward).SetOpen(true)
	work := claimed(persistence.WorkForward, 2).Work
	for i := range work {
		work[i].LeaseEpoch = 0
	}
	f.Handover(work)
	out := f.HandedOut()
	if len(out) != 1 {
		t.Fatalf("handed out %d batches, want 1", len(out))
	}
	f.Sent(t0, out[0], []messages.ForwardResult{{ForwardReply: messages.ForwardReply{ID: "forward-0"}},
		{ForwardReply: messages.ForwardReply{ID: "forward-1"}, Error: messages.Errorf(messages.CodeNotOurFrontend, "no")}}, nil, nil)
	r, ok := f.Next(t0, time.Minute)
	if !ok || len(r.Outcomes) != 2 {
		t.Fatalf("round %+v: want the two outcomes", r)
	}
	for _, o := range r.Outcomes {
		if o.Epoch != 0 || o.Owner != "me" {
			t.Errorf("outcome %s of %s: epoch %d, owner %q; want fenced by its lease (0, me)", o.Result, o.MessageID, o.Epoch, o.Owner)
		}
	}
}

// TestFlowBusyPeerKeepsTheLaneOpen: a peer that sheds load or has no room
// for new work (429, 507) is up: the lane stays open, and the work waits a
// retry interval, or the answer's Retry-After when that is longer.
func TestFlowBusyPeerKeepsTheLaneOpen(t *testing.T) {
	p := flowPolicy()
	for _, c := range []struct {
		retryAfter, want time.Duration
	}{{0, p.RetryInterval}, {p.RetryInterval / 2, p.RetryInterval}, {time.Minute, time.Minute}} {
		f := NewFlow("b", "me", p)
		f.Lane(persistence.WorkForward).SetOpen(true)
		r, _ := f.Next(t0, time.Minute)
		sends, _ := f.Done(t0, r, persistence.Written{}, []*persistence.Claim{claimed(persistence.WorkForward, 2)}, nil)
		full := &transport.CallError{Kind: transport.Busy, Status: 507, Code: messages.CodeStorageFull, RetryAfter: c.retryAfter}
		if f.Sent(t0, sends[0], nil, nil, full) {
			t.Errorf("Retry-After %v: a busy peer closed the lane", c.retryAfter)
		}
		if !f.Lane(persistence.WorkForward).Open() {
			t.Errorf("Retry-After %v: the lane is not open", c.retryAfter)
		}
		f.Lane(persistence.WorkForward).Kick()
		r, ok := f.Next(t0, time.Minute)
		if !ok || len(r.Outcomes) != 2 {
			t.Fatalf("round %+v: want the two retries recorded", r)
		}
		for _, o := range r.Outcomes {
			if o.Result != persistence.ResultRetry || !o.RetryAt.Equal(t0.Add(c.want)) || !strings.Contains(o.Detail, "busy") {
				t.Errorf("Retry-After %v: outcome %+v, want a retry at t0+%v saying busy", c.retryAfter, o, c.want)
			}
		}
	}
}

// TestFlowFailsForwardsQueuedPastTheWait: a claimed forward of a message
// forward_queued longer than MaxWait is not sent again (the redelivery
// horizon counts on no forward leaving after the wait, and the janitor's
// sweep comes up to an interval late) but failed, forward_timeout, with
// the next round; one inside the wait is sent. A claim of only such
// forwards frees its slot.
func TestFlowFailsForwardsQueuedPastTheWait(t *testing.T) {
	p := flowPolicy()
	f := NewFlow("b", "me", p)
	f.Lane(persistence.WorkForward).SetOpen(true)
	r, _ := f.Next(t0, time.Minute)
	c := claimed(persistence.WorkForward, 3)
	old, fresh := t0.Add(-p.MaxWait()-time.Second), t0.Add(-p.MaxWait()+time.Second)
	for i, at := range []time.Time{old, fresh} {
		c.Work[i].Message.State, c.Work[i].Message.QueuedAt = messages.StateForwardQueued, &at
	}
	sends, _ := f.Done(t0, r, persistence.Written{}, []*persistence.Claim{c}, nil)
	if len(sends) != 1 || len(sends[0].Work) != 2 || sends[0].Work[0].MessageID != "forward-1" || sends[0].Work[1].MessageID != "forward-2" {
		t.Fatalf("sends %+v: want forward-1 and forward-2, not forward-0 queued past the wait", sends)
	}
	f.Lane(persistence.WorkForward).Kick()
	r, ok := f.Next(t0, time.Minute)
	if !ok || len(r.Outcomes) != 1 {
		t.Fatalf("round %+v: want forward-0's failure", r)
	}
	if o := r.Outcomes[0]; o.MessageID != "forward-0" || o.Result != persistence.ResultFailed ||
		o.Reason != messages.ReasonForwardTimeout || o.Epoch != 3 || o.Owner != "me" {
		t.Fatalf("outcome %+v: want forward-0 failed, forward_timeout, fenced by its claim", o)
	}
	_, changes := f.Done(t0, r, persistence.Written{Completions: []persistence.Completion{persistence.Applied}},
		[]*persistence.Claim{claimed(persistence.WorkForward, 0)}, nil)
	if len(changes) != 1 || changes[0].State != messages.StateForwardFailed {
		t.Fatalf("changes %+v: want forward-0 forward_failed", changes)
	}

	// A claim of expired forwards only: nothing is sent, the lane's slots
	// are free for the next claim.
	f = NewFlow("b", "me", p)
	f.Lane(persistence.WorkForward).SetOpen(true)
	r, _ = f.Next(t0, time.Minute)
	c = claimed(persistence.WorkForward, p.Batch)
	for i := range c.Work {
		c.Work[i].Message.State, c.Work[i].Message.QueuedAt = messages.StateForwardQueued, &old
	}
	if sends, _ := f.Done(t0, r, persistence.Written{}, []*persistence.Claim{c}, nil); len(sends) != 0 {
		t.Fatalf("sends %+v of expired forwards", sends)
	}
	if n := f.Lane(persistence.WorkForward).InFlight(); n != 0 {
		t.Fatalf("%d requests in flight after sending none", n)
	}
}

// TestFlowHoldsBackReportsOfMessagesNotFinal: a report tells the origin a
// final outcome. A status row of a message that is pending again here (it
// was resubmitted while its report waited) is not sent, as "delivered" or
// at all: it waits a retry interval; final ones go out.
func TestFlowHoldsBackReportsOfMessagesNotFinal(t *testing.T) {
	p := flowPolicy()
	f := NewFlow("b", "me", p)
	f.Lane(persistence.WorkStatus).SetOpen(true)
	r, _ := f.Next(t0, time.Minute)
	c := claimed(persistence.WorkStatus, 3)
	c.Work[0].Message.State = messages.StateDelivered
	c.Work[1].Message.State = messages.StatePending
	c.Work[2].Message.State = messages.StateFailed
	sends, _ := f.Done(t0, r, persistence.Written{}, []*persistence.Claim{c}, nil)
	if len(sends) != 1 || len(sends[0].Work) != 2 || sends[0].Work[0].MessageID != "status-0" || sends[0].Work[1].MessageID != "status-2" {
		t.Fatalf("sends %+v: want the reports of status-0 and status-2, not of status-1 (pending)", sends)
	}
	f.Lane(persistence.WorkStatus).Kick()
	r, ok := f.Next(t0, time.Minute)
	if !ok || len(r.Outcomes) != 1 {
		t.Fatalf("round %+v: want status-1 rescheduled", r)
	}
	if o := r.Outcomes[0]; o.MessageID != "status-1" || o.Kind != persistence.WorkStatus || o.Result != persistence.ResultRetry ||
		!o.RetryAt.Equal(t0.Add(p.RetryInterval)) || o.Epoch != 3 || o.Owner != "me" {
		t.Fatalf("outcome %+v: want status-1's report retried a retry interval on, fenced by its claim", o)
	}
}

func TestReportOfOnlyFinalStates(t *testing.T) {
	for state, want := range map[messages.State]string{
		messages.StateDelivered:     messages.ReportDelivered,
		messages.StateFailed:        messages.ReportFailed,
		messages.StateForwardFailed: messages.ReportFailed,
		messages.StatePending:       "",
		messages.StateForwarded:     "",
		messages.StateForwardQueued: "",
	} {
		rep, ok := ReportOf("b", messages.Message{ID: "m", State: state})
		if got := map[bool]string{true: rep.Status}[ok]; got != want || ok != (want != "") {
			t.Errorf("ReportOf(%s) = %q, %v; want %q", state, rep.Status, ok, want)
		}
	}
}

// TestFlowHalvesTheBatchAfterATimeout: a request that timed out makes
// the lane's next batches half its size (requests of one size timing out
// together halve it once), claims and handed-over forwards alike; each
// request that succeeds doubles it back up to the policy's; a busy peer
// or a broken link leaves it as it is.
func TestFlowHalvesTheBatchAfterATimeout(t *testing.T) {
	timedOut := fmt.Errorf("Post \"https://b/api/federation/forward_batch\": %w", context.DeadlineExceeded)
	f := NewFlow("b", "me", flowPolicy())
	lane := f.Lane(persistence.WorkForward)
	lane.SetOpen(true)
	r, _ := f.Next(t0, time.Minute)
	sends, _ := f.Done(t0, r, persistence.Written{}, []*persistence.Claim{claimed(persistence.WorkForward, 20)}, nil)
	f.Sent(t0, sends[0], nil, nil, timedOut)
	f.Sent(t0, sends[1], nil, nil, timedOut)
	if got := f.Batch(persistence.WorkForward); got != 5 {
		t.Fatalf("batch after two requests of 10 timed out: %d, want 5", got)
	}
	if got := f.Batch(persistence.WorkStatus); got != 10 {
		t.Errorf("the status lane's batch %d, want 10: only the forward lane's requests timed out", got)
	}
	lane.SetOpen(true)
	r, ok := f.Next(t0, time.Minute)
	if !ok || len(r.Claims) != 1 || r.Claims[0].Limit != 10 {
		t.Fatalf("claims %+v: want one of 2 x 5", r.Claims)
	}
	sends, _ = f.Done(t0, r, persistence.Written{Completions: make([]persistence.Completion, len(r.Outcomes))},
		[]*persistence.Claim{claimed(persistence.WorkForward, 10)}, nil)
	if len(sends) != 2 || len(sends[0].Work) != 5 || len(sends[1].Work) != 5 {
		t.Fatalf("sends %+v: want two batches of 5", sends)
	}
	f.Sent(t0, sends[0], nil, nil, &transport.CallError{Kind: transport.Busy, Status: 429, Code: messages.CodeOverloaded})
	f.Sent(t0, sends[1], nil, nil, errors.New("connection refused"))
	if got := f.Batch(persistence.WorkForward); got != 5 {
		t.Fatalf("batch after a busy answer and a refused connection: %d, want 5", got)
	}
	f.Handover(claimed(persistence.WorkForward, 7).Work)
	out := f.HandedOut()
	if len(out) != 2 || len(out[0].Work) != 5 {
		t.Fatalf("handed out %+v: want batches of 5", out)
	}
	f.Sent(t0, out[0], make([]messages.ForwardResult, 5), nil, nil)
	if got := f.Batch(persistence.WorkForward); got != 10 {
		t.Errorf("batch after a success: %d, want 10", got)
	}
	f.Sent(t0, out[1], make([]messages.ForwardResult, 2), nil, nil)
	if got := f.Batch(persistence.WorkForward); got != 10 {
		t.Errorf("batch after another success: %d, want 10 (the policy's)", got)
	}
}

// TestFlowHalvingOutlivesALateSuccessOfTheOldSize: of two requests of the
// full batch in flight together, one times out and the other then gets
// through; the success says nothing new of a size the peer just failed
// at, so the batch stays halved (it went back to 10, and the next full
// batches timed out again). A success of a request cut at the halved
// batch doubles it.
func TestFlowHalvingOutlivesALateSuccessOfTheOldSize(t *testing.T) {
	timedOut := fmt.Errorf("Post \"https://b/api/federation/forward_batch\": %w", context.DeadlineExceeded)
	f := NewFlow("b", "me", flowPolicy())
	f.Lane(persistence.WorkForward).SetOpen(true)
	r, _ := f.Next(t0, time.Minute)
	sends, _ := f.Done(t0, r, persistence.Written{}, []*persistence.Claim{claimed(persistence.WorkForward, 20)}, nil)
	f.Sent(t0, sends[0], nil, nil, timedOut)
	f.Sent(t0, sends[1], make([]messages.ForwardResult, len(sends[1].Work)), nil, nil)
	if got := f.Batch(persistence.WorkForward); got != 5 {
		t.Fatalf("batch after a request of 10 timed out and another of 10 sent with it got through: %d, want 5", got)
	}
	f.Handover(claimed(persistence.WorkForward, 5).Work)
	out := f.HandedOut()
	if len(out) != 1 || len(out[0].Work) != 5 {
		t.Fatalf("handed out %+v: want one batch of 5", out)
	}
	f.Sent(t0, out[0], make([]messages.ForwardResult, 5), nil, nil)
	if got := f.Batch(persistence.WorkForward); got != 10 {
		t.Errorf("batch after a success of a request cut at 5: %d, want 10", got)
	}
}
