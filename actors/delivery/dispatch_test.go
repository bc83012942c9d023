package delivery

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// dispatchPolicy allows 3 attempts.
var dispatchPolicy = Policy{RetryMin: time.Minute, RetryMax: 8 * time.Minute, MaxAttempts: 3, Validity: 24 * time.Hour}

func newPull() *Dispatcher {
	return NewDispatcher(DispatcherConfig{Frontend: "fe", Pull: true, Owner: "me", Policy: dispatchPolicy, MaxClaim: 1000})
}

func newPush(max int) *Dispatcher {
	return NewDispatcher(DispatcherConfig{Frontend: "fe", Owner: "me", Policy: dispatchPolicy, MaxInFlight: max,
		PushLease: time.Minute, DeliveryTimeout: 10 * time.Second})
}

func poll(max int, lease time.Duration) *messages.Poll {
	return &messages.Poll{Frontend: "fe", Max: max, Wait: 5 * time.Second, Lease: lease, Done: make(chan struct{}),
		Reply: make(chan messages.PollReply, 1)}
}

// work is n claimed rows leased until t0+lease, first attempt.
func work(prefix string, n int, lease time.Duration) []persistence.Work {
	out := make([]persistence.Work, n)
	for i := range out {
		id := fmt.Sprintf("%s%d", prefix, i)
		out[i] = persistence.Work{Kind: persistence.WorkDelivery, Target: "fe", MessageID: id, LeaseOwner: "me",
			LeaseUntil: t0.Add(lease), Message: messages.Message{ID: id, Attempts: 1, SubmittedAt: t0}}
	}
	return out
}

func rng() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

func ids(out []messages.Outgoing) []string {
	var s []string
	for _, o := range out {
		s = append(s, o.ID)
	}
	return s
}

func TestPullClaimsOnceForEveryWaitingPoll(t *testing.T) {
	d := newPull()
	if _, ok := d.Next(t0); ok {
		t.Fatal("a round with no poll waiting")
	}
	p1, p2, p3 := poll(2, 30*time.Second), poll(3, 30*time.Second), poll(5, time.Minute)
	d.Poll(t0, p1)
	d.Poll(t0, p2)
	d.Poll(t0, p3)
	r, ok := d.Next(t0)
	if !ok || r.Claim == nil || r.Claim.Limit != 5 || r.Claim.Lease != 30*time.Second {
		t.Fatalf("round %+v: want one claim of 5 (the polls asking for the oldest poll's lease)", r)
	}
	if _, ok := d.Next(t0); ok {
		t.Fatal("a second round while one is out")
	}
	e := d.Done(t0, r, nil, &persistence.Claim{Work: work("m", 4, 30*time.Second)}, nil)
	if len(e.Answers) != 2 || fmt.Sprint(ids(e.Answers[0].Reply.Messages)) != "[m0 m1]" ||
		fmt.Sprint(ids(e.Answers[1].Reply.Messages)) != "[m2 m3]" {
		t.Fatalf("answers %+v: want p1 two, p2 the other two", e.Answers)
	}
	for _, a := range e.Answers {
		if len(a.Until) != len(a.Reply.Messages) || !a.Until[0].Equal(t0.Add(30*time.Second)) {
			t.Fatalf("answer's lease ends %v for %d messages, want each at its lease's end", a.Until, len(a.Reply.Messages))
		}
	}
	// The claim came back short: no more claims until something changes.
	if r, ok := d.Next(t0); ok {
		t.Fatalf("round %+v after a short claim", r)
	}
	d.Kick()
	r, ok = d.Next(t0)
	if !ok || r.Claim.Limit != 5 || r.Claim.Lease != time.Minute {
		t.Fatalf("after a kick: round %+v, want a claim for p3", r)
	}
}

func TestPullSkipsGoneAndStalePolls(t *testing.T) {
	d := newPull()
	gonePoll := poll(10, 30*time.Second)
	left := make(chan struct{})
	close(left)
	gonePoll.Done = left
	d.Poll(t0, gonePoll)
	if _, ok := d.Next(t0); ok {
		t.Fatal("claimed for a poll whose poller left")
	}
	p := poll(10, 30*time.Second)
	d.Poll(t0, p)
	r, _ := d.Next(t0)
	// Half of the lease is gone by the time the claim returns: the poll
	// would not get what it asked for.
	e := d.Done(t0.Add(20*time.Second), r, nil, &persistence.Claim{Work: work("s", 2, 30*time.Second)}, nil)
	if len(e.Answers) != 0 {
		t.Fatalf("answered %+v with work whose lease is nearly over", e.Answers)
	}
	if !d.Waiting() {
		t.Fatal("the poll stopped waiting")
	}
}

func TestPullPollAnsweredEmptyAtItsDeadline(t *testing.T) {
	d := newPull()
	p := poll(10, 0)
	d.Poll(t0, p)
	if w := d.Wake(); !w.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("Wake = %v, want the poll's deadline", w)
	}
	e := d.Tick(t0.Add(5*time.Second), rng())
	if len(e.Answers) != 1 || len(e.Answers[0].Reply.Messages) != 0 || e.Answers[0].Reply.Err != nil {
		t.Fatalf("answers %+v, want one empty", e.Answers)
	}
}

// TestPullPollWithoutWaitGetsItsClaim: a poll with wait_ms 0 was answered
// empty by the Tick at its deadline, before the claim made for it came
// back; the work it took waited leased, an attempt counted. Its deadline
// now waits for that claim: Done answers it, or the next Tick, empty.
func TestPullPollWithoutWaitGetsItsClaim(t *testing.T) {
	d := newPull()
	p := poll(10, 30*time.Second)
	p.Wait = 0
	d.Poll(t0, p)
	r, ok := d.Next(t0)
	if !ok || r.Claim == nil {
		t.Fatalf("round %+v, want the poll's claim", r)
	}
	if w := d.Wake(); !w.IsZero() {
		t.Errorf("Wake = %v while the poll's claim is out, want none", w)
	}
	if e := d.Tick(t0.Add(time.Millisecond), rng()); len(e.Answers) != 0 {
		t.Fatalf("answered %+v before its claim came back", e.Answers)
	}
	e := d.Done(t0.Add(2*time.Millisecond), r, nil, &persistence.Claim{Work: work("w", 1, 30*time.Second)}, nil)
	if len(e.Answers) != 1 || e.Answers[0].Poll != p || fmt.Sprint(ids(e.Answers[0].Reply.Messages)) != "[w0]" {
		t.Fatalf("answers %+v, want the poll to get w0", e.Answers)
	}
	// Nothing due: the claim comes back empty and the next Tick answers.
	p2 := poll(10, 30*time.Second)
	p2.Wait = 0
	now := t0.Add(time.Second)
	d.Poll(now, p2)
	r, _ = d.Next(now)
	if e := d.Done(now.Add(time.Millisecond), r, nil, &persistence.Claim{}, nil); len(e.Answers) != 0 {
		t.Fatalf("answers %+v", e.Answers)
	}
	if w := d.Wake(); !w.Equal(now) {
		t.Fatalf("Wake = %v, want the poll's deadline %v", w, now)
	}
	if e := d.Tick(now.Add(time.Millisecond), rng()); len(e.Answers) != 1 || len(e.Answers[0].Reply.Messages) != 0 {
		t.Fatalf("answers %+v, want the poll answered empty", e.Answers)
	}
	// A poll that came after the claim was made is not held by it.
	d.Poll(now, poll(1, 30*time.Second))
	r, _ = d.Next(now)
	late := poll(1, 30*time.Second)
	late.Wait = 0
	d.Poll(now.Add(time.Millisecond), late)
	if e := d.Tick(now.Add(2*time.Millisecond), rng()); len(e.Answers) != 1 || e.Answers[0].Poll != late {
		t.Fatalf("answers %+v, want the late poll answered empty", e.Answers)
	}
	_ = r
}

func TestAckAnsweredAfterItsCommit(t *testing.T) {
	d := newPull()
	reply := make(chan messages.AckReply, 1)
	a := &messages.Ack{Frontend: "fe", Reply: reply, Results: []messages.DeliveryResult{
		{ID: "a", Status: messages.Delivered},
		{ID: "b", Status: messages.Retry, Attempt: 1},
		{ID: "a", Status: messages.Delivered},
		{ID: "c", Status: messages.Failed, Attempt: 1},
		{ID: "gone", Status: messages.Retry},
	}}
	attempts := Attempts{"b": 1, "c": 2}
	if e := d.Ack(t0, a, attempts, nil, rng()); len(e.Acks) != 0 {
		t.Fatalf("answered before the commit: %+v", e.Acks)
	}
	r, ok := d.Next(t0)
	if !ok || len(r.Outcomes) != 3 || r.Claim != nil {
		t.Fatalf("round %+v: want the three verdicts to record (a's repeat too: the store tells it; c is stale, gone has no message), no claim", r)
	}
	if r.Outcomes[1].Result != persistence.ResultRetry || r.Outcomes[1].RetryAt.IsZero() {
		t.Errorf("retry outcome %+v", r.Outcomes[1])
	}
	e := d.Done(t0, r, []persistence.Completion{persistence.Applied, persistence.Applied, persistence.AlreadyRecorded}, nil, nil)
	if len(e.Acks) != 1 || len(e.Applied) != 2 {
		t.Fatalf("effects %+v", e)
	}
	got := fmt.Sprint(e.Acks[0].Reply.Outcomes)
	want := "[{a applied} {b applied} {a already_recorded} {c stale} {gone no_work}]"
	if got != want || e.Acks[0].Reply.Err != nil {
		t.Errorf("ack reply %s %v, want %s", got, e.Acks[0].Reply.Err, want)
	}
}

// TestAckRepeatedIDDecidesEachVerdict: one ack with a stale retry for
// attempt 1 and delivered for attempt 2 of the same message. The repeat
// was answered with the first occurrence's outcome (stale), and the
// delivered verdict was never recorded.
func TestAckRepeatedIDDecidesEachVerdict(t *testing.T) {
	d := newPull()
	a := &messages.Ack{Frontend: "fe", Reply: make(chan messages.AckReply, 1), Results: []messages.DeliveryResult{
		{ID: "m", Status: messages.Retry, Attempt: 1, Reason: "busy"},
		{ID: "m", Status: messages.Delivered, Attempt: 2},
	}}
	if e := d.Ack(t0, a, Attempts{"m": 2}, nil, rng()); len(e.Acks) != 0 {
		t.Fatalf("answered before the delivered verdict was recorded: %+v", e.Acks)
	}
	r, ok := d.Next(t0)
	if !ok || len(r.Outcomes) != 1 || r.Outcomes[0].Result != persistence.ResultDelivered {
		t.Fatalf("round %+v: want the delivered verdict to record", r)
	}
	e := d.Done(t0, r, []persistence.Completion{persistence.Applied}, nil, nil)
	if len(e.Acks) != 1 || fmt.Sprint(e.Acks[0].Reply.Outcomes) != "[{m stale} {m applied}]" {
		t.Fatalf("acks %+v, want [{m stale} {m applied}]", e.Acks)
	}
}

func TestFailedRoundFailsAcksAndKeepsVerdicts(t *testing.T) {
	d := newPush(4)
	r, _ := d.Next(t0)
	e := d.Done(t0, r, nil, &persistence.Claim{Work: work("p", 2, time.Minute)}, nil)
	if len(e.Start) != 2 {
		t.Fatalf("started %d, want 2", len(e.Start))
	}
	d.Verdict(t0, "p0", 0, messages.DeliveryResult{ID: "p0", Status: messages.Delivered}, false, rng())
	r, ok := d.Next(t0)
	if !ok || len(r.Outcomes) != 1 || r.Claim == nil || r.Claim.Limit != 3 {
		t.Fatalf("round %+v: want the verdict and a claim of the free slots in one Write", r)
	}
	d.Done(t0, r, nil, nil, errors.New("disk gone"))
	if _, ok := d.Next(t0.Add(time.Millisecond)); ok {
		t.Fatal("a round right after a failed one")
	}
	if w := d.Wake(); !w.Equal(t0.Add(storeRetry)) {
		t.Errorf("Wake = %v, want the retry at +%v", w, storeRetry)
	}
	r, ok = d.Next(t0.Add(storeRetry))
	if !ok || len(r.Outcomes) != 1 || r.Outcomes[0].MessageID != "p0" {
		t.Fatalf("round %+v after the retry wait: want p0's verdict again", r)
	}
}

// TestRoundRefusedForItsInputIsNotRetriedForEver: a round the store
// refuses for its input (persistence.ErrInvalid: Postgres refused a
// webhook's error body cut inside a UTF-8 character) was retried with the
// same outcomes every storeRetry, for ever: no verdict or claim of the
// frontend was recorded again, and a drain never ended. Its verdicts are
// now recorded one per round, and the one refused alone is dropped.
func TestRoundRefusedForItsInputIsNotRetriedForEver(t *testing.T) {
	d := newPush(4)
	r, _ := d.Next(t0)
	d.Done(t0, r, nil, &persistence.Claim{Work: work("p", 2, time.Minute)}, nil)
	d.Verdict(t0, "p0", 0, messages.DeliveryResult{ID: "p0", Status: messages.Retry, Reason: "bad\x00"}, false, rng())
	d.Verdict(t0, "p1", 0, messages.DeliveryResult{ID: "p1", Status: messages.Delivered}, false, rng())
	r, ok := d.Next(t0)
	if !ok || len(r.Outcomes) != 2 || r.Claim == nil {
		t.Fatalf("round %+v: want both verdicts and a claim", r)
	}
	refused := fmt.Errorf("postgres: write: SQLSTATE 22021: %w", persistence.ErrInvalid)
	if e := d.Done(t0, r, nil, nil, refused); len(e.Dropped) != 0 {
		t.Fatalf("dropped %+v from a round of two", e.Dropped)
	}
	// No wait: the store is up. p0 alone, then p1 alone.
	r, ok = d.Next(t0)
	if !ok || len(r.Outcomes) != 1 || r.Outcomes[0].MessageID != "p0" || r.Claim != nil {
		t.Fatalf("round %+v: want p0's verdict alone, no claim", r)
	}
	e := d.Done(t0, r, nil, nil, refused)
	if len(e.Dropped) != 1 || e.Dropped[0].MessageID != "p0" {
		t.Fatalf("dropped %+v, want p0's verdict (refused alone)", e.Dropped)
	}
	r, ok = d.Next(t0)
	if !ok || len(r.Outcomes) != 1 || r.Outcomes[0].MessageID != "p1" || r.Claim != nil {
		t.Fatalf("round %+v: want p1's verdict alone", r)
	}
	e = d.Done(t0, r, []persistence.Completion{persistence.Applied}, nil, nil)
	if len(e.Applied) != 1 || e.Applied[0].Result != persistence.ResultDelivered {
		t.Fatalf("effects %+v: want p1 delivered", e)
	}
	r, ok = d.Next(t0)
	if !ok || len(r.Outcomes) != 0 || r.Claim == nil {
		t.Fatalf("round %+v: want claims to go on", r)
	}
	d.Done(t0, r, nil, &persistence.Claim{}, nil)
	if e := d.Drain(); !e.Drained {
		t.Fatalf("drain not complete: pending %+v", d.pending)
	}
}

// TestPullWaitsForAPollAfterAFailedRound: once the wait after a failed
// round is over, a pull dispatcher with no poll waiting asks for no
// wake-up (the sim found a worker of a multi-instance site waking up at
// once, for ever, at 100% CPU, after a store write failed while its
// frontend polled the other instances).
func TestPullWaitsForAPollAfterAFailedRound(t *testing.T) {
	d := newPull()
	p := poll(2, 30*time.Second)
	d.Poll(t0, p)
	r, ok := d.Next(t0)
	if !ok || r.Claim == nil {
		t.Fatalf("round %+v, want the poll's claim", r)
	}
	d.Done(t0, r, nil, nil, errors.New("disk gone"))
	d.Tick(t0.Add(p.Wait), rng()) // the poll ends unanswered
	if d.waiters.Len() != 0 {
		t.Fatal("the poll still waits")
	}
	if _, ok := d.Next(t0.Add(storeRetry)); ok {
		t.Fatal("a round with nothing to record and no poll waiting")
	}
	if w := d.Wake(); !w.IsZero() {
		t.Fatalf("Wake = %v with no poll waiting and nothing to record: a wake-up due at once", w)
	}
	d.Poll(t0.Add(storeRetry), poll(2, 30*time.Second))
	if r, ok := d.Next(t0.Add(storeRetry)); !ok || r.Claim == nil {
		t.Fatalf("round %+v: a new poll claims", r)
	}
}

func TestPushClaimsItsFreeSlots(t *testing.T) {
	d := newPush(3)
	r, ok := d.Next(t0)
	if !ok || r.Claim == nil || r.Claim.Limit != 3 || r.Claim.Lease != time.Minute {
		t.Fatalf("first round %+v, want a claim of 3", r)
	}
	e := d.Done(t0, r, nil, &persistence.Claim{Work: work("p", 3, time.Minute)}, nil)
	if len(e.Start) != 3 {
		t.Fatalf("started %d", len(e.Start))
	}
	if _, ok := d.Next(t0); ok {
		t.Fatal("claimed with no free slot")
	}
	// A timeout frees a slot and queues a retry; the full claim said more
	// may be due.
	e = d.Tick(t0.Add(10*time.Second), rng())
	r, ok = d.Next(t0.Add(10 * time.Second))
	if !ok || len(r.Outcomes) != 3 || r.Claim == nil || r.Claim.Limit != 3 {
		t.Fatalf("after the timeouts: round %+v, want 3 retries and a claim of 3", r)
	}
	d.Hold(true)
	d.Done(t0, r, []persistence.Completion{persistence.Applied, persistence.Applied, persistence.Applied}, &persistence.Claim{}, nil)
	d.Kick()
	if r, ok := d.Next(t0); ok && r.Claim != nil {
		t.Errorf("claimed while held: %+v", r)
	}
}

// TestPushLimit: a limit under MaxInFlight (an smpp frontend's submit
// rate) bounds the claims and the offer; deliveries under way beyond a
// lower limit go on, and none is claimed until they are under it.
func TestPushLimit(t *testing.T) {
	d := newPush(5)
	d.Limit(2)
	r, ok := d.Next(t0)
	if !ok || r.Claim == nil || r.Claim.Limit != 2 {
		t.Fatalf("round %+v, want a claim of 2", r)
	}
	d.Done(t0, r, nil, &persistence.Claim{Work: work("a", 2, time.Minute)}, nil)
	d.Kick()
	if r, ok := d.Next(t0); ok && r.Claim != nil {
		t.Fatalf("claimed %+v with 2 of a limit of 2 under way", r)
	}
	if n, _ := d.Offer(); n != 0 {
		t.Fatalf("offered %d with 2 of 2 under way", n)
	}
	d.Limit(1)
	d.Verdict(t0, "a0", 0, messages.DeliveryResult{ID: "a0", Status: messages.Delivered}, false, rng())
	if r, ok := d.Next(t0); !ok || r.Claim != nil {
		t.Fatalf("round %+v: 1 under way, the limit 1: the verdict alone", r)
	} else {
		d.Done(t0, r, []persistence.Completion{persistence.Applied}, nil, nil)
	}
	d.Limit(0) // MaxInFlight again
	d.Kick()
	if r, ok := d.Next(t0); !ok || r.Claim == nil || r.Claim.Limit != 4 {
		t.Fatalf("round %+v, want a claim of the 4 slots of 5 free", r)
	}
}

// TestPushLeavesRoomForRowsOwed: rows the handover board granted that
// have not come take their slots: a claim, and the bus's room, ask only
// for the rest, so that a handover racing a claim cannot take the
// frontend past MaxInFlight.
func TestPushLeavesRoomForRowsOwed(t *testing.T) {
	d := newPush(5)
	d.Owe(3)
	r, ok := d.Next(t0)
	if !ok || r.Claim == nil || r.Claim.Limit != 2 {
		t.Fatalf("round %+v, want a claim of the 2 slots not owed", r)
	}
	d.Done(t0, r, nil, &persistence.Claim{Work: work("c", 2, time.Minute)}, nil)
	d.Kick()
	if r, ok := d.Next(t0); ok && r.Claim != nil {
		t.Fatalf("claimed %+v with every slot in flight or owed", r)
	}
	// The owed rows come: the frontend has all 5 under way.
	d.Owe(0)
	if e := d.Handover(t0, work("h", 3, time.Minute)); len(e.Start) != 3 {
		t.Fatalf("started %d of the 3 handed over", len(e.Start))
	}
	d.Kick()
	if r, ok := d.Next(t0); ok && r.Claim != nil {
		t.Fatalf("claimed %+v with 5 of 5 under way", r)
	}
	// With the bus, its fetch's room leaves the owed rows their slots too.
	b := newBusPush(5)
	b.Owe(2)
	if n := b.BusRoom(); n != 3 {
		t.Fatalf("bus room %d with 2 of 5 owed, want 3", n)
	}
	b.Owe(-1) // a board that settled more than it granted owes nothing
	if n := b.BusRoom(); n != 5 {
		t.Fatalf("bus room %d with nothing owed, want 5", n)
	}
}

// TestPushInheritedFlightsTakeTheirSlots: the deliveries a restarted
// worker's previous incarnation had under way (Inherit) are still under
// way at the frontend: they take their slots of MaxInFlight until their
// verdict comes or their deadline passes, each slot freed once (a verdict
// after the deadline frees nothing more). Not counted, the next
// incarnation claimed and was offered MaxInFlight on top of them: 3 + 2
// calls at once at a frontend of 3.
func TestPushInheritedFlightsTakeTheirSlots(t *testing.T) {
	deadline := t0.Add(5 * time.Second) // before the 10 s of this incarnation's deliveries
	d := newPush(3)
	d.Inherit(Carry{flights: map[string]time.Time{"o0": deadline, "o1": deadline}})
	r, ok := d.Next(t0)
	if !ok || r.Claim == nil || r.Claim.Limit != 1 {
		t.Fatalf("first round %s, want a claim of the 1 slot of 3 the 2 inherited leave", claimOf(r))
	}
	if e := d.Done(t0, r, nil, &persistence.Claim{Work: work("p", 1, time.Minute)}, nil); len(e.Start) != 1 {
		t.Fatalf("started %d, want 1", len(e.Start))
	}
	d.Kick()
	if r, ok := d.Next(t0); ok && r.Claim != nil {
		t.Fatalf("round %s with 1 under way and 2 inherited of 3", claimOf(r))
	}
	d.Owe(0)
	if n, _ := d.Offer(); n != 0 {
		t.Fatalf("offered %d with 1 under way and 2 inherited of 3", n)
	}

	// o0's verdict frees its slot: the claim that follows it asks for 1.
	d.Verdict(t0, "o0", 1, messages.DeliveryResult{ID: "o0", Status: messages.Delivered}, false, rng())
	r, ok = d.Next(t0)
	if !ok || len(r.Outcomes) != 1 || r.Claim == nil || r.Claim.Limit != 1 {
		t.Fatalf("round %s, want o0's late verdict and a claim of 1", claimOf(r))
	}
	d.Done(t0, r, []persistence.Completion{persistence.Applied}, &persistence.Claim{}, nil)
	if n, _ := d.Offer(); n != 1 {
		t.Fatalf("offered %d with 1 under way and o1 inherited of 3, want 1", n)
	}

	// o1's deadline frees its slot; its verdict after that frees nothing more.
	d.Tick(deadline, rng())
	if n, _ := d.Offer(); n != 2 {
		t.Fatalf("offered %d after o1's deadline, want 2", n)
	}
	d.Verdict(deadline, "o1", 1, messages.DeliveryResult{ID: "o1", Status: messages.Delivered}, false, rng())
	r, ok = d.Next(deadline)
	if !ok || len(r.Outcomes) != 1 || r.Claim == nil || r.Claim.Limit != 2 {
		t.Fatalf("round %s, want o1's late verdict and a claim of 2 (p0 under way)", claimOf(r))
	}
	d.Done(deadline, r, []persistence.Completion{persistence.Applied}, &persistence.Claim{}, nil)
	if n, _ := d.Offer(); n != 2 {
		t.Fatalf("offered %d after o1's late verdict, want 2: its slot was freed at its deadline", n)
	}

	// With the bus, its fetch's room leaves them their slots too.
	b := newBusPush(3)
	b.Inherit(Carry{flights: map[string]time.Time{"o0": deadline, "o1": deadline}})
	if n := b.BusRoom(); n != 1 {
		t.Fatalf("bus room %d with 2 inherited of 3, want 1", n)
	}
	if n, _ := b.Offer(); n != 1 {
		t.Fatalf("bus offer %d with 2 inherited of 3, want 1", n)
	}
}

// claimOf is what a failing test prints of round r: its outcomes' ids
// and its claim's limit.
func claimOf(r *Round) string {
	if r == nil {
		return "none"
	}
	var out []string
	for _, o := range r.Outcomes {
		out = append(out, o.MessageID)
	}
	if r.Claim == nil {
		return fmt.Sprintf("outcomes %v, no claim", out)
	}
	return fmt.Sprintf("outcomes %v, a claim of %d", out, r.Claim.Limit)
}

// TestActorLateRetryOfEarlierAttempt: an in-process frontend answers
// attempt 1 Retry after it timed out, while attempt 2 is in flight. The
// answer was taken as attempt 2's verdict (on the last attempt: failed
// max_attempts, and attempt 2's delivered then dropped). It is attempt
// 1's, late, and dropped, whether it names its attempt or not.
func TestActorLateRetryOfEarlierAttempt(t *testing.T) {
	for _, echo := range []bool{false, true} {
		d, now := secondAttemptOut(t)
		late := messages.DeliveryResult{ID: "m0", Status: messages.Retry, Reason: "about attempt 1"}
		if echo {
			late.Attempt = 1
		}
		d.ActorVerdict(now.Add(time.Second), late, rng())
		if r, ok := d.Next(now.Add(time.Second)); ok && len(r.Outcomes) > 0 {
			t.Fatalf("echo %v: round %+v: attempt 1's late retry was taken as attempt 2's verdict", echo, r)
		}
		d.ActorVerdict(now.Add(2*time.Second), messages.DeliveryResult{ID: "m0", Status: messages.Delivered}, rng())
		r, ok := d.Next(now.Add(2 * time.Second))
		if !ok || len(r.Outcomes) != 1 || r.Outcomes[0].Result != persistence.ResultDelivered || r.Outcomes[0].Detail != "delivered to fe (attempt 2)" {
			t.Fatalf("echo %v: round %+v, want attempt 2 delivered", echo, r)
		}
	}
}

// secondAttemptOut is an in-process frontend's dispatcher whose attempt 1
// of m0 was asked, timed out and its retry recorded, and whose attempt 2
// is asked now, in flight until now + 10 s.
func secondAttemptOut(t *testing.T) (*Dispatcher, time.Time) {
	t.Helper()
	d := newPush(4)
	r, _ := d.Next(t0)
	d.Done(t0, r, nil, &persistence.Claim{Work: work("m", 1, time.Minute)}, nil)
	d.Asked("m0", 1)
	d.Tick(t0.Add(10*time.Second), rng())
	now := t0.Add(11 * time.Second)
	r, _ = d.Next(now)
	if len(r.Outcomes) != 1 || r.Outcomes[0].Reason != "timeout" {
		t.Fatalf("round %+v, want attempt 1's timeout", r)
	}
	again := work("m", 1, 2*time.Minute)
	again[0].Message.Attempts = 2
	if e := d.Done(now, r, []persistence.Completion{persistence.Applied}, &persistence.Claim{Work: again}, nil); len(e.Start) != 1 {
		t.Fatalf("started %+v, want attempt 2", e.Start)
	}
	d.Asked("m0", 2)
	return d, now
}

// TestActorAnswerWithoutAttemptAfterATimeout: attempt 1 of m0 was never
// answered in time (the frontend's actor panicked on it, or was slow) and
// attempt 2 is in flight; then come answers that do not name their
// attempt. They are either attempt 2's (attempt 1 panicked) or, the first
// of them, attempt 1's, late (a slow frontend). Each was taken as attempt
// 1's: after a panic, attempt 2's retry was dropped as late (the timeout
// recorded for it at its deadline instead of its reason) and its delivered
// or failed was recorded against attempt 1, late, with attempt 2 left in
// flight until its deadline. A final answer is attempt 2's now (the
// message is final either way), and a retry is held on attempt 2: dropped
// if another answer comes for it, its verdict at its deadline if none does
// (attempt 2's own retry after a panic; after a slow attempt 1, the time
// attempt 2's timeout would have retried it).
func TestActorAnswerWithoutAttemptAfterATimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []messages.DeliveryResult
		want    []string // recorded as the answers came
		// atDeadline: recorded when attempt 2's deadline passes (its
		// timeout, unless it is answered by then)
		atDeadline []string
	}{
		{name: "panicked, then retry", answers: []messages.DeliveryResult{{Status: messages.Retry, Reason: "busy"}},
			atDeadline: []string{"retry a2 busy"}},
		{name: "panicked, then delivered", answers: []messages.DeliveryResult{{Status: messages.Delivered}},
			want: []string{"delivered a2"}},
		{name: "panicked, then failed", answers: []messages.DeliveryResult{{Status: messages.Failed, Reason: "no such number"}},
			want: []string{"failed a2 rejected: no such number"}},
		{name: "panicked, then retry naming attempt 2", answers: []messages.DeliveryResult{{Status: messages.Retry, Reason: "busy", Attempt: 2}},
			want: []string{"retry a2 busy"}},
		{name: "slow: attempt 1's retry, then attempt 2's delivered",
			answers: []messages.DeliveryResult{{Status: messages.Retry, Reason: "slow"}, {Status: messages.Delivered}},
			want:    []string{"delivered a2"}},
		{name: "slow: attempt 1's retry, then attempt 2's retry",
			answers: []messages.DeliveryResult{{Status: messages.Retry, Reason: "slow"}, {Status: messages.Retry, Reason: "busy"}},
			want:    []string{"retry a2 busy"}},
		{name: "slow: attempt 1's retry, attempt 2 not answered", answers: []messages.DeliveryResult{{Status: messages.Retry, Reason: "slow"}},
			atDeadline: []string{"retry a2 slow"}},
		{name: "slow: attempt 1's failed, then attempt 2's delivered",
			answers: []messages.DeliveryResult{{Status: messages.Failed, Reason: "no such number"}, {Status: messages.Delivered}},
			want:    []string{"failed a2 rejected: no such number", "delivered a2 late"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, now := secondAttemptOut(t)
			recorded := func() []string {
				var out []string
				for _, p := range d.pending {
					s := []string{string(p.o.Result), fmt.Sprintf("a%d", p.o.Attempt), p.o.Reason}
					if p.late {
						s = append(s, "late")
					}
					out = append(out, strings.Join(slices.DeleteFunc(s, func(w string) bool { return w == "" }), " "))
				}
				d.pending = nil
				return out
			}
			for i, r := range tc.answers {
				r.ID = "m0"
				d.ActorVerdict(now.Add(time.Duration(i+1)*time.Second), r, rng())
			}
			if got := recorded(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("recorded %q as the answers came, want %q", got, tc.want)
			}
			d.Tick(now.Add(10*time.Second), rng())
			if got := recorded(); fmt.Sprint(got) != fmt.Sprint(tc.atDeadline) {
				t.Errorf("recorded %q at attempt 2's deadline, want %q", got, tc.atDeadline)
			}
		})
	}
}

// TestActorLateDeliveredOnFailedMessage: a late Delivered after the last
// attempt timed out and failed the message changes nothing (a final state
// stays: reports, CDRs and retention rest on it), and is reported to the
// worker for a warning.
func TestActorLateDeliveredOnFailedMessage(t *testing.T) {
	d := newPush(4)
	r, _ := d.Next(t0)
	d.Done(t0, r, nil, &persistence.Claim{Work: work("m", 1, time.Minute)}, nil)
	d.Asked("m0", 1)
	d.Tick(t0.Add(10*time.Second), rng())
	r, _ = d.Next(t0.Add(10 * time.Second))
	d.Done(t0.Add(10*time.Second), r, []persistence.Completion{persistence.Applied}, nil, nil) // say, failed max_attempts
	d.ActorVerdict(t0.Add(11*time.Second), messages.DeliveryResult{ID: "m0", Status: messages.Delivered}, rng())
	r, ok := d.Next(t0.Add(11 * time.Second))
	if !ok || len(r.Outcomes) != 1 || r.Outcomes[0].Result != persistence.ResultDelivered {
		t.Fatalf("round %+v, want the late delivered verdict (the store decides)", r)
	}
	e := d.Done(t0.Add(11*time.Second), r, []persistence.Completion{persistence.AlreadyRecorded}, nil, nil)
	if len(e.LateRefused) != 1 || e.LateRefused[0].MessageID != "m0" || len(e.Applied) != 0 {
		t.Fatalf("effects %+v, want m0's late verdict refused", e)
	}
}

// TestPushReclaimedInFlightIsNotHandedOverAgain: a node's clock stepped
// forward past a delivery's lease (not yet past its deadline by a Tick)
// lets the next claim take the row the worker still has in flight. The
// frontend must not be handed the message a second time: the delivery in
// flight answers for the new claim, and its verdict is fenced with it.
func TestPushReclaimedInFlightIsNotHandedOverAgain(t *testing.T) {
	d := newPush(3)
	r, _ := d.Next(t0)
	if e := d.Done(t0, r, nil, &persistence.Claim{Work: work("m", 1, time.Minute)}, nil); len(e.Start) != 1 {
		t.Fatalf("started %+v, want m0", e.Start)
	}
	later := t0.Add(5 * time.Minute) // the clock stepped forward
	d.Kick()
	r, ok := d.Next(later)
	if !ok || r.Claim == nil || r.Claim.Limit != 2 {
		t.Fatalf("round %+v, want a claim of the 2 free slots", r)
	}
	again := work("m", 1, 5*time.Minute+time.Minute)
	again[0].Message.Attempts, again[0].LeaseEpoch = 2, 4
	fresh := work("n", 1, 5*time.Minute+time.Minute)
	e := d.Done(later, r, nil, &persistence.Claim{Work: append(again, fresh...)}, nil)
	if len(e.Start) != 1 || e.Start[0].MessageID != "n0" {
		t.Fatalf("started %+v, want n0 only: m0 is in flight", e.Start)
	}
	// The first hand-over's answer settles m0, under the newer claim.
	d.Verdict(later, "m0", 1, messages.DeliveryResult{ID: "m0", Status: messages.Delivered}, false, rng())
	r, ok = d.Next(later)
	if !ok || len(r.Outcomes) != 1 || r.Outcomes[0].MessageID != "m0" || r.Outcomes[0].Result != persistence.ResultDelivered ||
		r.Outcomes[0].Epoch != 4 || r.Outcomes[0].Owner != "me" {
		t.Fatalf("round %+v, want m0 delivered, fenced with the newer claim (epoch 4)", r)
	}
	d.Done(later, r, []persistence.Completion{persistence.Applied}, nil, nil)
	d.Verdict(later, "m0", 1, messages.DeliveryResult{ID: "m0", Status: messages.Retry, Reason: "timeout"}, false, rng())
	if r, ok := d.Next(later); ok && len(r.Outcomes) > 0 {
		t.Errorf("round %+v: a second verdict on m0, handed over once", r)
	}
}

func TestClaimedWorkThePolicyRefuses(t *testing.T) {
	d := newPush(10)
	r, _ := d.Next(t0)
	w := work("x", 2, time.Minute)
	w[0].Message.Attempts = 4 // past MaxAttempts (3): a lease ran out too often
	w[1].Message.SubmittedAt = t0.Add(-25 * time.Hour)
	w[1].LeaseEpoch = 7
	e := d.Done(t0, r, nil, &persistence.Claim{Work: w}, nil)
	if len(e.Start) != 0 {
		t.Fatalf("started %+v", e.Start)
	}
	r, ok := d.Next(t0)
	if !ok || len(r.Outcomes) != 2 {
		t.Fatalf("round %+v, want the two failures", r)
	}
	if r.Outcomes[0].Reason != messages.ReasonMaxAttempts || r.Outcomes[1].Reason != messages.ReasonExpired ||
		r.Outcomes[1].Epoch != 7 || r.Outcomes[1].Owner != "me" {
		t.Errorf("outcomes %+v", r.Outcomes)
	}
}

func TestDrain(t *testing.T) {
	d := newPush(2)
	r, _ := d.Next(t0)
	d.Done(t0, r, nil, &persistence.Claim{Work: work("d", 1, time.Minute)}, nil)
	if e := d.Drain(); e.Drained {
		t.Fatal("drained with a delivery in flight")
	}
	d.Verdict(t0, "d0", 0, messages.DeliveryResult{ID: "d0", Status: messages.Delivered}, false, rng())
	r, ok := d.Next(t0)
	if !ok || r.Claim != nil {
		t.Fatalf("round %+v while draining: want the verdict only", r)
	}
	if e := d.Done(t0, r, []persistence.Completion{persistence.Applied}, nil, nil); !e.Drained {
		t.Error("not drained once the last verdict was recorded")
	}
	p := poll(1, 0)
	if e := newPull().Drain(); !e.Drained {
		t.Error("an idle dispatcher is not drained at once")
	}
	dp := newPull()
	dp.Drain()
	if e := dp.Poll(t0, p); len(e.Answers) != 1 || e.Answers[0].Reply.Err == nil {
		t.Errorf("a poll while draining: %+v, want refused", e.Answers)
	}
}

func TestStopFailsWaitingAcks(t *testing.T) {
	d := newPull()
	reply := make(chan messages.AckReply, 1)
	d.Ack(t0, &messages.Ack{Frontend: "fe", Reply: reply, Results: []messages.DeliveryResult{{ID: "a", Status: messages.Delivered}}}, nil, nil, rng())
	d.Next(t0)
	p := poll(1, 0)
	d.Poll(t0, p)
	e := d.Stop()
	if len(e.Acks) != 1 || e.Acks[0].Reply.Err == nil || len(e.Answers) != 1 {
		t.Fatalf("effects %+v: want the ack failed and the poll answered", e)
	}
}

// TestDoneOfAnEarlierIncarnationsRound: a worker that restarts while a
// store round of its runs gets that round's result in its next incarnation
// (same PID, same mailbox). Its new dispatcher took it for the end of its
// own round: the round it had out was forgotten, so a second claim went
// out beside it (two rounds at once), the work the dead round claimed was
// handed out as its own, and an ack the restart had answered (Stop) was
// answered again. Only what that round committed is reported now; the
// work it claimed waits for its lease, as after any restart.
func TestDoneOfAnEarlierIncarnationsRound(t *testing.T) {
	// Pull: the earlier incarnation's round records an ack's verdict and
	// claims for its poll; it restarts (Stop answers the ack) meanwhile.
	before := newPull()
	before.Ack(t0, &messages.Ack{Frontend: "fe", Reply: make(chan messages.AckReply, 2),
		Results: []messages.DeliveryResult{{ID: "a", Status: messages.Delivered}}}, nil, nil, rng())
	before.Poll(t0, poll(1, time.Minute))
	old, _ := before.Next(t0)
	if e := before.Stop(); len(e.Acks) != 1 {
		t.Fatalf("Stop effects %+v: want the ack answered", e)
	}
	d := newPull()
	d.Poll(t0, poll(1, time.Minute))
	d.Poll(t0, poll(1, time.Minute))
	mine, ok := d.Next(t0)
	if !ok || mine.Claim == nil || mine.Claim.Limit != 2 {
		t.Fatalf("round %+v: want a claim for both polls", mine)
	}
	e := d.Done(t0, old, []persistence.Completion{persistence.Applied}, &persistence.Claim{Work: work("old", 1, time.Minute)}, nil)
	if len(e.Applied) != 1 || e.Applied[0].MessageID != "a" {
		t.Errorf("applied %+v: want a's verdict, which that round committed", e.Applied)
	}
	if len(e.Acks) != 0 || len(e.Answers) != 0 {
		t.Errorf("acks %+v, answers %+v: an ack answered twice, or a poll given work this dispatcher did not claim", e.Acks, e.Answers)
	}
	if r, ok := d.Next(t0); ok {
		t.Fatalf("round %+v while its own is out", r)
	}
	e = d.Done(t0, mine, nil, &persistence.Claim{Work: work("new", 2, time.Minute)}, nil)
	if len(e.Answers) != 2 {
		t.Errorf("answers %+v at the end of its own round: want both polls served", e.Answers)
	}

	// Push: the work an earlier incarnation's claim took is not delivered.
	p := newPush(2)
	old, _ = newPush(2).Next(t0)
	mine, _ = p.Next(t0)
	if e := p.Done(t0, old, nil, &persistence.Claim{Work: work("old", 2, time.Minute)}, nil); len(e.Start) != 0 {
		t.Errorf("started %+v: the work of an earlier incarnation's claim", e.Start)
	}
	if r, ok := p.Next(t0); ok {
		t.Fatalf("push round %+v while its own is out", r)
	}
	if e := p.Done(t0, mine, nil, &persistence.Claim{Work: work("new", 2, time.Minute)}, nil); len(e.Start) != 2 {
		t.Errorf("started %+v at the end of its own round: want its 2", e.Start)
	}
}

// TestVerdictsUnrecordedAtARestart: a push worker that restarts with
// verdicts not recorded yet (a webhook's 200 waiting for the next round,
// a retry, and the round out with another 200) hands them to its next
// incarnation (Carry, Inherit), whose first round records them.
// Stop dropped them: each message waited for its lease and was delivered
// again, a webhook that had answered 200 included. The round out gives
// its final verdicts (recorded twice, one is AlreadyRecorded: counted
// once, and not taken for a late verdict refused), not its retries (a
// retry recorded after the next attempt's claim would answer for it); a
// pull frontend's acks are answered by Stop (the consumer acks again),
// not carried.
func TestVerdictsUnrecordedAtARestart(t *testing.T) {
	before := newPush(4)
	r, _ := before.Next(t0)
	claimed := work("p", 4, time.Minute)
	for i := range claimed {
		claimed[i].LeaseEpoch = 7
	}
	before.Done(t0, r, nil, &persistence.Claim{Work: claimed}, nil)
	delivered := messages.DeliveryResult{Status: messages.Delivered}
	before.Verdict(t0, "p0", 1, delivered, false, rng())
	before.Verdict(t0, "p1", 1, messages.DeliveryResult{Status: messages.Retry, Reason: "503"}, false, rng())
	out, ok := before.Next(t0)
	if !ok || len(out.Outcomes) != 2 {
		t.Fatalf("round %s, want p0's and p1's verdicts", claimOf(out))
	}
	// While that round is out: p2's 200, p3's retry. Then the restart.
	before.Verdict(t0, "p2", 1, delivered, false, rng())
	before.Verdict(t0, "p3", 1, messages.DeliveryResult{Status: messages.Retry, Reason: "503"}, false, rng())
	c := before.Carry(t0.Add(time.Minute))
	before.Stop()

	d := newPush(4)
	d.Inherit(c)
	first, ok := d.Next(t0)
	got := map[string]persistence.Result{}
	for _, o := range first.Outcomes {
		got[o.MessageID] = o.Result
		if o.Epoch != 7 || o.Owner != "me" {
			t.Errorf("%s's outcome fenced with epoch %d owner %q, want its claim's 7, me", o.MessageID, o.Epoch, o.Owner)
		}
	}
	want := map[string]persistence.Result{"p0": persistence.ResultDelivered, "p2": persistence.ResultDelivered, "p3": persistence.ResultRetry}
	if !ok || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the next incarnation's first round records %v, want %v (p1's retry was in the round out)", got, want)
	}

	// The earlier round committed p0's and p1's verdicts: its result
	// reports them; the next incarnation's record of p0 is AlreadyRecorded.
	if e := d.Done(t0, out, []persistence.Completion{persistence.Applied, persistence.Applied}, nil, nil); len(e.Applied) != 2 {
		t.Fatalf("applied %+v of the earlier round, want p0 and p1", e.Applied)
	}
	cs := make([]persistence.Completion, len(first.Outcomes))
	for i, o := range first.Outcomes {
		cs[i] = persistence.Applied
		if o.MessageID == "p0" {
			cs[i] = persistence.AlreadyRecorded
		}
	}
	e := d.Done(t0, first, cs, &persistence.Claim{}, nil)
	if len(e.Applied) != 2 || len(e.LateRefused) != 0 {
		t.Fatalf("applied %+v, late refused %+v: want p2 and p3 applied, p0 counted once (by the earlier round)", e.Applied, e.LateRefused)
	}

	// A pull frontend's ack is answered by Stop, not carried.
	pull := newPull()
	pull.Ack(t0, &messages.Ack{Frontend: "fe", Reply: make(chan messages.AckReply, 1),
		Results: []messages.DeliveryResult{{ID: "a", Status: messages.Delivered}}}, nil, nil, rng())
	if v := pull.Carry(t0).verdicts; len(v) != 0 {
		t.Fatalf("carried %+v: a pull frontend's ack", v)
	}
	if e := pull.Stop(); len(e.Acks) != 1 || e.Acks[0].Reply.Err == nil {
		t.Fatalf("Stop effects %+v: want the ack answered unavailable", e)
	}
}

func newBusPush(max int) *Dispatcher {
	d := NewDispatcher(DispatcherConfig{Frontend: "fe", Owner: "me", Policy: dispatchPolicy, MaxInFlight: max,
		PushLease: time.Minute, DeliveryTimeout: 10 * time.Second, Bus: true, BusOverdue: time.Minute, BusBackstop: 10 * time.Second})
	d.SetBus(true)
	// The first round is the backstop's claim of overdue work: none.
	r, ok := d.Next(t0)
	if !ok || r.Claim == nil || r.Claim.IDs != nil {
		panic(fmt.Sprintf("the first round with the bus up is %+v, want the backstop's claim", r))
	}
	d.Done(t0, r, nil, &persistence.Claim{}, nil)
	return d
}

// TestBusBackstopClaimsOverdueWork: with the bus up, a claim from the
// store is made every BusBackstop, as if BusOverdue ago (only work due and
// unleased that long), with a lease that still runs PushLease from now.
func TestBusBackstopClaimsOverdueWork(t *testing.T) {
	d := newBusPush(3)
	if r, ok := d.Next(t0.Add(9 * time.Second)); ok {
		t.Fatalf("a round before the backstop is due: %+v", r)
	}
	if w := d.Wake(); !w.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("Wake = %v, want the backstop at +10s", w)
	}
	now := t0.Add(10 * time.Second)
	r, ok := d.Next(now)
	if !ok || r.Claim == nil || r.Claim.IDs != nil || !r.Claim.Now.Equal(now.Add(-time.Minute)) ||
		r.Claim.Lease != 2*time.Minute || r.Claim.Limit != 3 {
		t.Fatalf("backstop round = %+v", r.Claim)
	}
	e := d.Done(now, r, nil, &persistence.Claim{Work: work("late", 1, time.Minute)}, nil)
	if len(e.Start) != 1 {
		t.Fatalf("the overdue work was not started: %+v", e)
	}
	if n, _ := d.Offer(); n != 2 {
		t.Fatalf("Offer with the bus up and one slot busy = %d, want 2", n)
	}
	// Full: the backstop's time passes without a claim, and its wake-up
	// moves on (it must not come back at once).
	full := newBusPush(2)
	at := t0.Add(10 * time.Second)
	full.Handover(at, work("busy", 2, time.Minute))
	if r, ok := full.Next(at); ok {
		t.Fatalf("a round with every slot busy: %+v", r.Claim)
	}
	if w := full.Wake(); !w.After(at) {
		t.Fatalf("Wake = %v, not after %v: the worker would spin", w, at)
	}
}

// TestBusClaimsOnlyWhatTheBusNames: with the bus up a push dispatcher
// never claims the queue; it asks the bus for its free slots, claims the
// rows of the messages the bus names (unfenced, by id), delivers what it
// got, reports the rest with when they become claimable, and reports every
// committed outcome for its bus message to be settled.
func TestBusClaimsOnlyWhatTheBusNames(t *testing.T) {
	d := newBusPush(3)
	d.Kick()
	if r, ok := d.Next(t0); ok {
		t.Fatalf("a round with the bus up, nothing named and the backstop not due: %+v", r)
	}
	if n := d.BusRoom(); n != 3 {
		t.Fatalf("BusRoom = %d, want the 3 free slots", n)
	}
	if refused := d.Named("a", "b", "gone"); refused != nil {
		t.Fatalf("Named refused %v", refused)
	}
	if n := d.BusRoom(); n != 0 {
		t.Fatalf("BusRoom = %d with 3 named, want 0", n)
	}
	r, ok := d.Next(t0)
	if !ok || r.Claim == nil || fmt.Sprint(r.Claim.IDs) != "[a b gone]" || r.Claim.Limit != 3 || r.Claim.Ring != nil {
		t.Fatalf("round = %+v, want a claim of a, b and gone", r)
	}
	later := t0.Add(time.Minute)
	claimed := &persistence.Claim{Work: work("a", 1, time.Minute), Later: map[string]time.Time{"b": later}}
	e := d.Done(t0, r, nil, claimed, nil)
	if len(e.Start) != 1 || e.Start[0].MessageID != "a0" {
		t.Fatalf("Start = %+v, want a0", e.Start)
	}
	// work("a", 1) names a0: a itself came back unclaimed with b and gone.
	want := map[string]time.Time{"a": {}, "b": later, "gone": {}}
	if len(e.Unclaimed) != 3 {
		t.Fatalf("Unclaimed = %+v", e.Unclaimed)
	}
	for _, u := range e.Unclaimed {
		if w, ok := want[u.ID]; !ok || !u.Later.Equal(w) {
			t.Errorf("Unclaimed %s later %v, want %v", u.ID, u.Later, w)
		}
	}
	d.Verdict(t0, "a0", 1, messages.DeliveryResult{ID: "a0", Status: messages.Retry, Reason: "busy"}, false, rng())
	r, _ = d.Next(t0)
	e = d.Done(t0, r, []persistence.Completion{persistence.Applied}, nil, nil)
	if len(e.Settled) != 1 || e.Settled[0].Outcome.Result != persistence.ResultRetry || e.Settled[0].Completion != persistence.Applied {
		t.Fatalf("Settled = %+v, want a0's retry", e.Settled)
	}
}

// TestBusDownClaimsTheQueue: while the bus is down the dispatcher claims
// from the store as without it; a failed claim of named messages names
// them again.
func TestBusDownClaimsTheQueue(t *testing.T) {
	d := newBusPush(2)
	d.Named("x")
	r, _ := d.Next(t0)
	d.Done(t0, r, nil, nil, errors.New("store down"))
	d.SetBus(false)
	if d.BusRoom() != 0 {
		t.Fatal("BusRoom with the bus down")
	}
	r, ok := d.Next(t0.Add(storeRetry))
	if !ok || r.Claim == nil || r.Claim.IDs != nil || r.Claim.Limit != 2 {
		t.Fatalf("round with the bus down = %+v, want a claim of the queue", r)
	}
	d.Done(t0, r, nil, &persistence.Claim{}, nil)
	d.SetBus(true)
	r, ok = d.Next(t0.Add(storeRetry))
	if !ok || fmt.Sprint(r.Claim.IDs) != "[x]" {
		t.Fatalf("round with the bus up again = %+v, want x named again", r)
	}
}

// TestBusPullKeepsWorkAtHandWithoutPolls: with no poll waiting, a pull
// dispatcher that answered a poll as it came (the window of room for the
// next poll is open) takes named messages up to MaxClaim of work at hand
// (claimed or being claimed) and refuses the rest; the next poll is
// answered from that work at once. With the window closed (before any
// poll, and handFor after the last answer) it refuses them all: the bus
// hands them to a poll waiting elsewhere.
func TestBusPullKeepsWorkAtHandWithoutPolls(t *testing.T) {
	d := NewDispatcher(DispatcherConfig{Frontend: "fe", Pull: true, Owner: "me", Policy: dispatchPolicy, MaxClaim: 3, Bus: true,
		BusOverdue: time.Minute, BusBackstop: 10 * time.Second})
	d.SetBus(true)
	if refused := d.Named("x0"); fmt.Sprint(refused) != "[x0]" {
		t.Fatalf("Named before any poll = %v, want x0 refused", refused)
	}
	d.Poll(t0, poll(1, defaultPollLease))
	if e := d.Handover(t0, work("z", 1, defaultPollLease)); len(e.Answers) != 1 {
		t.Fatalf("handover answers = %+v, want the poll answered as it came", e.Answers)
	}
	if refused := d.Named("a0", "a1"); refused != nil {
		t.Fatalf("Named with no poll = %v, want both taken", refused)
	}
	r, ok := d.Next(t0)
	if !ok || fmt.Sprint(r.Claim.IDs) != "[a0 a1]" || r.Claim.Lease != defaultPollLease {
		t.Fatalf("round = %+v, want a claim of a0 and a1 for the default poll lease", r)
	}
	if refused := d.Named("b0", "b1"); fmt.Sprint(refused) != "[b1]" {
		t.Fatalf("Named with 2 being claimed = %v, want b1 refused (MaxClaim 3)", refused)
	}
	d.Done(t0, r, nil, &persistence.Claim{Work: work("a", 2, defaultPollLease)}, nil)
	r, _ = d.Next(t0)
	d.Done(t0, r, nil, &persistence.Claim{Work: work("b", 1, defaultPollLease)}, nil)
	if refused := d.Named("c0"); fmt.Sprint(refused) != "[c0]" {
		t.Fatalf("Named with 3 at hand = %v, want c0 refused", refused)
	}
	p := poll(2, defaultPollLease)
	e := d.Poll(t0, p)
	if len(e.Answers) != 1 || len(e.Answers[0].Reply.Messages) != 2 || e.Answers[0].Reply.Messages[0].ID != "a0" {
		t.Fatalf("the next poll's answers = %+v, want a0 and a1 at once", e.Answers)
	}
	if e := d.Poll(t0, poll(5, defaultPollLease)); len(e.Answers) != 1 || len(e.Answers[0].Reply.Messages) != 1 {
		t.Fatalf("the poll after = %+v, want b0 alone", e.Answers)
	}
	if n := d.BusRoom(); n != 3 {
		t.Fatalf("BusRoom = %d with no poll waiting just after one, want room for the next poll (MaxClaim 3)", n)
	}
	d.Tick(t0.Add(handFor), rng())
	if n := d.BusRoom(); n != 0 {
		t.Fatalf("BusRoom = %d with no poll waiting for %v, want 0", n, handFor)
	}
	if refused := d.Named("y0"); fmt.Sprint(refused) != "[y0]" {
		t.Fatalf("Named %v after the last answer = %v, want y0 refused", handFor, refused)
	}
}

// TestBusPullClaimAfterThePollsLeft: a claim made after the polls were
// answered leases for the last poll's lease.
func TestBusPullClaimAfterThePollsLeft(t *testing.T) {
	d := NewDispatcher(DispatcherConfig{Frontend: "fe", Pull: true, Owner: "me", Policy: dispatchPolicy, MaxClaim: 1000, Bus: true,
		BusOverdue: time.Minute, BusBackstop: 10 * time.Second})
	d.SetBus(true)
	p := poll(2, 2*time.Minute)
	done := make(chan struct{})
	p.Done = done
	d.Poll(t0, p)
	if n := d.BusRoom(); n != 2 {
		t.Fatalf("BusRoom = %d, want the poll's 2", n)
	}
	r, _ := d.Next(t0) // the backstop's first claim, for the poll
	if r.Claim.IDs != nil || r.Claim.Limit != 2 || r.Claim.Lease != 3*time.Minute {
		t.Fatalf("backstop round for the poll = %+v", r.Claim)
	}
	d.Done(t0, r, nil, &persistence.Claim{}, nil)
	d.Named("a")
	close(done) // the poll went away before the claim
	r, _ = d.Next(t0)
	if r.Claim.Lease != 2*time.Minute {
		t.Fatalf("lease %v, want the last poll's", r.Claim.Lease)
	}
}

// TestBusPullOffersRoomForTheNextPoll: with the bus up, a pull dispatcher
// that answered a poll offers room for the next poll (that poll's max,
// less the work at hand) for handFor, so the commits between two polls
// hand their work over instead of sending it round the bus; the next poll
// is answered from it at once. The offer ends handFor after the last
// answer (Wake brings that Tick), and there is none without the bus, while
// draining, or before any answer.
func TestBusPullOffersRoomForTheNextPoll(t *testing.T) {
	d := NewDispatcher(DispatcherConfig{Frontend: "fe", Pull: true, Owner: "me", Policy: dispatchPolicy, MaxClaim: 1000, Bus: true,
		BusOverdue: time.Minute, BusBackstop: 10 * time.Second})
	d.SetBus(true)
	if n, _ := d.Offer(); n != 0 {
		t.Fatalf("Offer before any poll = %d, want 0", n)
	}
	d.Poll(t0, poll(5, 2*time.Minute))
	if !d.handUntil.IsZero() {
		t.Fatalf("a poll that waits opened the window of room for the next poll")
	}
	if n, lease := d.Offer(); n != 5 || lease != 2*time.Minute {
		t.Fatalf("Offer with a poll of 5 waiting = %d for %v, want 5 for the poll's lease", n, lease)
	}
	if e := d.Handover(t0, work("a", 2, 2*time.Minute)); len(e.Answers) != 1 {
		t.Fatalf("handover answers = %+v, want the poll answered", e.Answers)
	}
	if n, lease := d.Offer(); n != 5 || lease != 2*time.Minute {
		t.Fatalf("Offer after the poll was answered = %d for %v, want room for the next poll: 5 for the last poll's lease", n, lease)
	}
	d.Handover(t0.Add(handFor/4), work("b", 3, 2*time.Minute))
	if n, _ := d.Offer(); n != 2 {
		t.Fatalf("Offer with 3 at hand = %d, want 2", n)
	}
	if w := d.Wake(); !w.Equal(t0.Add(handFor)) {
		t.Fatalf("Wake = %v, want the end of the offer at +%v", w, handFor)
	}
	at := t0.Add(handFor / 2)
	e := d.Poll(at, poll(5, 2*time.Minute))
	if len(e.Answers) != 1 || fmt.Sprint(ids(e.Answers[0].Reply.Messages)) != "[b0 b1 b2]" {
		t.Fatalf("the next poll's answers = %+v, want the work at hand at once", e.Answers)
	}
	d.Tick(at.Add(handFor-time.Millisecond), rng())
	if n, _ := d.Offer(); n != 5 {
		t.Fatalf("Offer just before the end = %d, want 5", n)
	}
	// The bus's fetch and its backstop share that room, so the work the
	// bus holds is not starved by new work that polls take at once.
	if n := d.BusRoom(); n != 5 {
		t.Fatalf("BusRoom with no poll waiting just after one = %d, want 5", n)
	}
	d.Named("n0", "n1")
	if n, _ := d.Offer(); n != 3 {
		t.Fatalf("Offer with 2 named = %d, want 3", n)
	}
	if r, ok := d.Next(at.Add(handFor - time.Millisecond)); !ok || r.Claim == nil || len(r.Claim.IDs) != 2 || r.Claim.Lease != 2*time.Minute {
		t.Fatalf("round = %+v, want the claim of the 2 named for the last poll's lease", r)
	} else {
		d.Done(at, r, nil, &persistence.Claim{}, nil)
	}
	if r, ok := d.Next(at.Add(handFor - time.Millisecond)); !ok || r.Claim == nil || r.Claim.IDs != nil || r.Claim.Limit != 5 ||
		r.Claim.Lease != 2*time.Minute+time.Minute {
		t.Fatalf("round = %+v, want the backstop's claim of room for the next poll", r)
	} else {
		d.Done(at, r, nil, &persistence.Claim{}, nil)
	}
	d.Tick(at.Add(handFor), rng())
	if n, _ := d.Offer(); n != 0 {
		t.Fatalf("Offer %v after the last answer = %d, want 0", handFor, n)
	}
	d.Poll(at.Add(handFor), poll(5, 2*time.Minute))
	d.Handover(at.Add(handFor), work("c", 1, 2*time.Minute))
	d.Drain()
	if n, _ := d.Offer(); n != 0 {
		t.Fatalf("Offer while draining = %d, want 0", n)
	}

	// A poll that waited longer than handFor for its answer (a quiet
	// time: its consumer may poll elsewhere next) opens no window.
	q := NewDispatcher(DispatcherConfig{Frontend: "fe", Pull: true, Owner: "me", Policy: dispatchPolicy, MaxClaim: 1000, Bus: true,
		BusOverdue: time.Minute, BusBackstop: 10 * time.Second})
	q.SetBus(true)
	q.Poll(t0, poll(5, 2*time.Minute))
	if e := q.Handover(t0.Add(handFor), work("a", 1, 2*time.Minute)); len(e.Answers) != 1 {
		t.Fatalf("handover answers = %+v, want the poll answered", e.Answers)
	}
	if n, _ := q.Offer(); n != 0 {
		t.Fatalf("Offer after a poll answered %v after it came = %d, want 0", handFor, n)
	}

	// Without the bus an answered poll leaves no room: new work must not
	// overtake what waits in the store.
	p := newPull()
	p.Poll(t0, poll(5, 2*time.Minute))
	p.Handover(t0, work("a", 2, 2*time.Minute))
	if n, _ := p.Offer(); n != 0 {
		t.Fatalf("Offer without the bus after the poll was answered = %d, want 0", n)
	}
}

// TestOutstandingAndTheEarlierRoundsSettled: what a restarting worker's
// bus link holds on (busLink.handOn) rests on Outstanding: a delivery
// under way (inherited ones included) or a verdict to record (in the round
// out too); and, with the bus, the outcomes an earlier incarnation's round
// committed come back as Settled, so that the next incarnation settles
// the bus messages held on for them (a retry's is acked: its commit wrote
// the row back for the relay).
func TestOutstandingAndTheEarlierRoundsSettled(t *testing.T) {
	d := newBusPush(4)
	d.Inherit(Carry{flights: map[string]time.Time{"orphan": t0.Add(time.Second)}})
	d.Handover(t0, work("f", 2, time.Minute))
	d.Verdict(t0, "f0", 1, messages.DeliveryResult{Status: messages.Delivered}, false, rng())
	for id, want := range map[string]bool{"orphan": true, "f0": true, "f1": true, "gone": false} {
		if got := d.Outstanding(id); got != want {
			t.Errorf("Outstanding(%s) = %v, want %v", id, got, want)
		}
	}
	out, ok := d.Next(t0)
	if !ok || d.Out() != out || len(out.Outcomes) != 1 || !d.Outstanding("f0") {
		t.Fatalf("round %+v (out %+v): want f0's verdict in it, still outstanding", out, d.Out())
	}
	d.Tick(t0.Add(2*time.Second), rng())
	if d.Outstanding("orphan") {
		t.Error("an inherited delivery past its deadline is still outstanding")
	}

	e := newBusPush(4).Done(t0, out, []persistence.Completion{persistence.Applied}, nil, nil)
	if len(e.Settled) != 1 || e.Settled[0].Outcome.MessageID != "f0" || e.Settled[0].Completion != persistence.Applied {
		t.Fatalf("settled %+v of the earlier round, want f0's", e.Settled)
	}
	if e := newPush(4).Done(t0, out, []persistence.Completion{persistence.Applied}, nil, nil); len(e.Settled) != 0 {
		t.Fatalf("settled %+v without the bus", e.Settled)
	}
}

// TestDrainAndRetireWaitForTheRoundsOfEarlierIncarnations: the store
// rounds a worker's earlier incarnations had out as they restarted
// (Carry, Inherit) keep a drain and a retirement of the next one
// from ending until each reports (Done, failed or not) or the time past
// which its result cannot come passes (Tick, woken for it); a second
// restart carries them on.
func TestDrainAndRetireWaitForTheRoundsOfEarlierIncarnations(t *testing.T) {
	by := t0.Add(10 * time.Second) // the round's store call times out
	for _, tc := range []struct {
		name     string
		retire   bool
		restarts int
		fail     error // the round fails (nil: it reports its completions)
		timeout  bool  // its result never comes (Tick at by)
	}{
		{name: "drain, the round reports", restarts: 1},
		{name: "drain, the round fails", restarts: 1, fail: errors.New("store down")},
		{name: "drain, the round times out", restarts: 1, timeout: true},
		{name: "retire, the round reports", retire: true, restarts: 1},
		{name: "retire, the round times out", retire: true, restarts: 1, timeout: true},
		{name: "retire after two restarts, the round reports", retire: true, restarts: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := newPush(4)
			first.Handover(t0, work("f", 1, time.Minute))
			first.Verdict(t0, "f0", 1, messages.DeliveryResult{ID: "f0", Status: messages.Retry}, false, rng())
			out, ok := first.Next(t0)
			if !ok || len(out.Outcomes) != 1 {
				t.Fatalf("round %+v: want f0's retry in it", out)
			}
			c := first.Carry(by)
			if len(c.rounds) != 1 || !c.rounds[out].Equal(by) {
				t.Fatalf("carried rounds %v, want the round out until %v", c.rounds, by)
			}
			d := newPush(4)
			d.Inherit(c)
			for range tc.restarts - 1 {
				next := newPush(4)
				next.Inherit(d.Carry(t0.Add(time.Hour))) // none of its own out: only the inherited one
				d = next
			}
			var e Effects
			if tc.retire {
				e = d.Retire(t0, t0.Add(time.Hour))
			} else {
				e = d.Drain()
			}
			if e.Drained || e.Retired {
				t.Fatalf("drained %v, retired %v with the round of an earlier incarnation out", e.Drained, e.Retired)
			}
			if w := d.Wake(); !w.Equal(by) {
				t.Fatalf("Wake = %v, want %v (the round's result cannot come later)", w, by)
			}
			if e := d.Tick(by.Add(-time.Second), rng()); e.Drained || e.Retired {
				t.Fatalf("drained %v, retired %v before the round's time passed", e.Drained, e.Retired)
			}
			if tc.timeout {
				e = d.Tick(by, rng())
			} else {
				e = d.Done(t0, out, []persistence.Completion{persistence.Applied}, nil, tc.fail)
			}
			if !e.Drained || e.Retired != tc.retire {
				t.Fatalf("drained %v, retired %v once the round ended; want drained, retired %v", e.Drained, e.Retired, tc.retire)
			}
			if applied := len(e.Applied) == 1; applied != (!tc.timeout && tc.fail == nil) {
				t.Errorf("Applied %+v", e.Applied)
			}
			if rounds := d.Carry(by).rounds; len(rounds) != 0 {
				t.Errorf("carried rounds %v once the round ended, want none", rounds)
			}
		})
	}
}

// TestCarriedLateVerdictOfTheRoundOutIsNotLateRefused: a late final
// verdict in the round out as the worker restarts is carried (again); the
// next incarnation's record of it is AlreadyRecorded (the earlier round
// did it), which is that round's doing, not a late verdict refused.
func TestCarriedLateVerdictOfTheRoundOutIsNotLateRefused(t *testing.T) {
	d := newPush(4)
	d.Handover(t0, work("f", 1, time.Minute))
	late := t0.Add(11 * time.Second) // past the 10 s delivery deadline
	d.Tick(late, rng())              // f0 times out: a retry to record
	r, ok := d.Next(late)
	if !ok {
		t.Fatal("no round for the timeout")
	}
	d.Done(late, r, []persistence.Completion{persistence.Applied}, nil, nil)
	d.Verdict(late, "f0", 1, messages.DeliveryResult{Status: messages.Delivered}, false, rng()) // late
	out, ok := d.Next(late)
	if !ok || len(out.pending) != 1 || !out.pending[0].late {
		t.Fatalf("round out %+v, want f0's late 200", out)
	}
	c := d.Carry(late.Add(30 * time.Second))
	d.Stop()
	next := newPush(4)
	next.Inherit(c)
	first, ok := next.Next(late)
	if !ok || len(first.Outcomes) != 1 {
		t.Fatalf("first round %+v, want f0's carried verdict", first)
	}
	e := next.Done(late, first, []persistence.Completion{persistence.AlreadyRecorded}, nil, nil)
	if len(e.LateRefused) != 0 {
		t.Errorf("LateRefused %+v: the carried verdict's AlreadyRecorded is the earlier round's doing", e.LateRefused)
	}
}

// TestBusPullClaimsFromTheStoreForPollsThatDoNotWait: with the bus up, a
// poll that waits less than BusShortPoll (wait_ms 0 above all) is served
// from the store, as without the bus: answered before a fetch could bring
// its work, it got none of the work that went through the bus. A poll that
// waits longer gets the backstop's claim (overdue work only), as before;
// named messages are claimed first.
func TestBusPullClaimsFromTheStoreForPollsThatDoNotWait(t *testing.T) {
	newBusPull := func() *Dispatcher {
		d := NewDispatcher(DispatcherConfig{Frontend: "fe", Pull: true, Owner: "me", Policy: dispatchPolicy, MaxClaim: 1000, Bus: true,
			BusOverdue: time.Minute, BusBackstop: 10 * time.Second, BusShortPoll: 50 * time.Millisecond})
		d.SetBus(true)
		return d
	}
	d := newBusPull()
	long := poll(2, defaultPollLease)
	long.Wait = 50 * time.Millisecond
	d.Poll(t0, long)
	r, _ := d.Next(t0)
	if r.Claim == nil || r.Claim.IDs != nil || !r.Claim.Now.Equal(t0.Add(-time.Minute)) {
		t.Fatalf("claim for a poll that waits BusShortPoll = %+v, want the backstop's", r.Claim)
	}
	d.Done(t0, r, nil, &persistence.Claim{}, nil)

	d = newBusPull()
	p := poll(3, defaultPollLease)
	p.Wait = 0
	d.Poll(t0, p)
	r, _ = d.Next(t0)
	if r.Claim == nil || r.Claim.IDs != nil || !r.Claim.Now.Equal(t0) || r.Claim.Limit != 3 || r.Claim.Lease != defaultPollLease {
		t.Fatalf("claim for a poll with wait 0 = %+v, want a claim of the work due now for its 3", r.Claim)
	}
	if e := d.Tick(t0, rng()); len(e.Answers) != 0 {
		t.Fatalf("answers while its claim is out = %+v, want it held for the claim", e.Answers)
	}
	e := d.Done(t0, r, nil, &persistence.Claim{Work: work("s", 1, defaultPollLease)}, nil)
	if len(e.Answers) != 1 || fmt.Sprint(ids(e.Answers[0].Reply.Messages)) != "[s0]" {
		t.Fatalf("answers = %+v, want s0 from the store", e.Answers)
	}

	d = newBusPull()
	d.Poll(t0, long)
	d.Named("a")
	d.Poll(t0, p)
	if r, _ = d.Next(t0); r.Claim == nil || fmt.Sprint(r.Claim.IDs) != "[a]" {
		t.Fatalf("claim = %+v, want the named message first", r.Claim)
	}
	d.Done(t0, r, nil, &persistence.Claim{}, nil)
	if r, _ = d.Next(t0); r.Claim == nil || r.Claim.IDs != nil || !r.Claim.Now.Equal(t0) {
		t.Fatalf("claim after the named one = %+v, want one from the store", r.Claim)
	}
}

// TestPushDeferralsBackOff: a push frontend that defers one message again
// and again (a webhook's 429) is called again later each time, as retries
// are: the k-th deferral in a row of an attempt waits as a retry of
// attempt+k-1 would (doubling from RetryMin to RetryMax, jittered),
// whether or not the worker restarted between; one that names its wait
// (Retry-After) waits that, or its attempt's backoff when longer (within
// RetryMax). A verdict that is no deferral (here a 503,
// which uses its attempt) ends the run; so does a run's message not seen
// again within RetryMax of its retry falling due (Tick forgets it).
func TestPushDeferralsBackOff(t *testing.T) {
	d := newPush(1)
	now, attempt := t0, 1
	busy := messages.DeliveryResult{ID: "m0", Status: messages.Retry, Reason: "HTTP 429", Deferred: true}
	for i, c := range []struct {
		v        messages.DeliveryResult
		min, max time.Duration
		restart  bool // the worker restarts before this delivery
	}{
		{v: busy, min: 30 * time.Second, max: time.Minute},
		{v: busy, min: time.Minute, max: 2 * time.Minute},
		// A wait it names is taken at its word (not doubled on): the
		// attempt's own backoff when that is longer.
		{v: messages.DeliveryResult{ID: "m0", Status: messages.Retry, Reason: "HTTP 429", Deferred: true, RetryAfter: 10 * time.Second},
			min: 30 * time.Second, max: time.Minute},
		{v: messages.DeliveryResult{ID: "m0", Status: messages.Retry, Reason: "HTTP 429", Deferred: true, RetryAfter: 7 * time.Minute},
			min: 7 * time.Minute, max: 7 * time.Minute},
		{v: busy, min: 4 * time.Minute, max: 8 * time.Minute, restart: true},
		{v: busy, min: 4 * time.Minute, max: 8 * time.Minute},
		{v: messages.DeliveryResult{ID: "m0", Status: messages.Retry, Reason: "HTTP 429", Deferred: true, RetryAfter: time.Hour},
			min: 8 * time.Minute, max: 8 * time.Minute},
		{v: messages.DeliveryResult{ID: "m0", Status: messages.Retry, Reason: "HTTP 503"}, min: 30 * time.Second, max: time.Minute},
		{v: busy, min: time.Minute, max: 2 * time.Minute}, // attempt 2: its own backoff again
		{v: busy, min: 2 * time.Minute, max: 4 * time.Minute},
	} {
		if c.restart {
			next := newPush(1)
			next.Inherit(d.Carry(now))
			d = next
		}
		wk := work("m", 1, time.Minute)
		wk[0].LeaseUntil, wk[0].Message.Attempts = now.Add(time.Minute), attempt
		if e := d.Handover(now, wk); len(e.Start) != 1 {
			t.Fatalf("delivery %d: started %+v, want m0", i+1, e.Start)
		}
		d.Verdict(now, "m0", attempt, c.v, false, rng())
		r, ok := d.Next(now)
		if !ok || len(r.Outcomes) != 1 || r.Outcomes[0].Result != persistence.ResultRetry || r.Outcomes[0].Deferred != c.v.Deferred {
			t.Fatalf("delivery %d (%s): round %+v, want its retry", i+1, c.v.Reason, r)
		}
		o := r.Outcomes[0]
		if wait := o.RetryAt.Sub(now); wait < c.min || wait > c.max {
			t.Errorf("delivery %d (attempt %d, %s, Retry-After %v): called again in %v, want in [%v, %v]",
				i+1, attempt, c.v.Reason, c.v.RetryAfter, wait, c.min, c.max)
		}
		d.Done(now, r, []persistence.Completion{persistence.Applied}, &persistence.Claim{}, nil)
		now = o.RetryAt
		if !o.Deferred {
			attempt++
		}
	}
	// Not seen again until past RetryMax after it fell due: forgotten.
	now = now.Add(dispatchPolicy.RetryMax + time.Second)
	d.Tick(now, rng())
	wk := work("m", 1, time.Minute)
	wk[0].LeaseUntil, wk[0].Message.Attempts = now.Add(time.Minute), attempt
	d.Handover(now, wk)
	d.Verdict(now, "m0", attempt, busy, false, rng())
	if r, ok := d.Next(now); !ok || len(r.Outcomes) != 1 || r.Outcomes[0].RetryAt.Sub(now) > 2*time.Minute {
		t.Errorf("a deferral of attempt %d after the run was forgotten: round %+v, want a retry within 2m (its attempt's backoff)", attempt, r)
	}
}

// TestBusPullWorkForTheNextPollHasThePollsLease: work a pull dispatcher
// takes with the bus up for a poll that has not come yet (the bus's
// messages claimed after the waiting poll was answered, work handed over
// in the window of room for the next poll) is leased for the last poll's
// lease. It was leased for at least the default 30 s: a consumer polling
// with lease_ms 3000 that did not ack got such messages back only after
// 30 s, not its 3 s (seen end to end in 4 runs of 9: the bus handed a
// batch out in two fetches, and the second, named while the first's
// claim was out, was claimed once the poll had been answered).
func TestBusPullWorkForTheNextPollHasThePollsLease(t *testing.T) {
	const lease = 3 * time.Second
	d := NewDispatcher(DispatcherConfig{Frontend: "fe", Pull: true, Owner: "me", Policy: dispatchPolicy, MaxClaim: 1000, Bus: true,
		BusOverdue: time.Minute, BusBackstop: 10 * time.Second})
	d.SetBus(true)
	p := poll(10, lease)
	p.Wait = 2 * time.Second
	d.Poll(t0, p)
	r, _ := d.Next(t0) // the backstop's first claim, for the poll: none
	d.Done(t0, r, nil, &persistence.Claim{}, nil)
	d.Named("a0")
	r, _ = d.Next(t0)
	if r.Claim == nil || fmt.Sprint(r.Claim.IDs) != "[a0]" || r.Claim.Lease != lease {
		t.Fatalf("round = %+v, want the claim of a0 for the poll's lease", r)
	}
	if refused := d.Named("b0", "b1", "b2"); refused != nil {
		t.Fatalf("Named with the poll waiting = %v, want all taken", refused)
	}
	if e := d.Done(t0, r, nil, &persistence.Claim{Work: work("a", 1, lease)}, nil); len(e.Answers) != 1 {
		t.Fatalf("answers = %+v, want the poll answered with a0", e.Answers)
	}
	r, _ = d.Next(t0)
	if r.Claim == nil || fmt.Sprint(r.Claim.IDs) != "[b0 b1 b2]" || r.Claim.Lease != lease {
		t.Fatalf("round after the poll was answered = %+v, want the claim of b0..b2 for the last poll's lease %v", r.Claim, lease)
	}
	d.Done(t0, r, nil, &persistence.Claim{Work: work("b", 3, r.Claim.Lease)}, nil)
	at := t0.Add(time.Millisecond)
	e := d.Poll(at, poll(10, lease))
	if len(e.Answers) != 1 || fmt.Sprint(ids(e.Answers[0].Reply.Messages)) != "[b0 b1 b2]" {
		t.Fatalf("the next poll's answers = %+v, want b0..b2", e.Answers)
	}
	for _, until := range e.Answers[0].Until {
		if until.After(at.Add(lease)) {
			t.Fatalf("the next poll got work leased until +%v, want at most its lease %v", until.Sub(at), lease)
		}
	}
	if n, l := d.Offer(); n == 0 || l != lease {
		t.Fatalf("Offer after the poll was answered = %d for %v, want room for the next poll for its lease %v", n, l, lease)
	}
}

// TestActorLateAnswerToAnAttemptBeforeAResubmit: the last attempt (3) of
// m0 times out and fails it; an operator resubmits it (its attempts start
// again) and attempt 1 is handed out. The frontend's late answer to
// attempt 3, which it did deliver, is recorded as attempt 3's late
// verdict. A check that ignored answers naming an attempt later than any
// handed out (for a frontend that echoes Attempt+1) dropped it: attempt
// numbers go back at a resubmit, so the worker cannot tell that answer
// from an off-by-one, and it is not made.
func TestActorLateAnswerToAnAttemptBeforeAResubmit(t *testing.T) {
	d := newPush(4)
	w3 := work("m", 1, time.Minute)
	w3[0].Message.Attempts = 3
	r, _ := d.Next(t0)
	d.Done(t0, r, nil, &persistence.Claim{Work: w3}, nil)
	d.Asked("m0", 3)
	d.Tick(t0.Add(10*time.Second), rng())
	now := t0.Add(11 * time.Second)
	r, _ = d.Next(now)
	w1 := work("m", 1, 2*time.Minute) // resubmitted: claimed again, attempts from 0
	if e := d.Done(now, r, []persistence.Completion{persistence.Applied}, &persistence.Claim{Work: w1}, nil); len(e.Start) != 1 {
		t.Fatalf("started %+v, want the resubmitted attempt 1", e.Start)
	}
	d.Asked("m0", 1)
	d.pending = nil
	d.ActorVerdict(now.Add(time.Second), messages.DeliveryResult{ID: "m0", Status: messages.Delivered, Attempt: 3}, rng())
	if len(d.pending) != 1 || d.pending[0].o.Result != persistence.ResultDelivered || d.pending[0].o.Attempt != 3 || !d.pending[0].late {
		t.Errorf("recorded %+v, want attempt 3's late delivered", d.pending)
	}
}
