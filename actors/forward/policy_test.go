package forward

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestPolicyJudge(t *testing.T) {
	p := DefaultPolicy()
	w := persistence.Work{Kind: persistence.WorkForward, Target: "b", MessageID: "m1"}
	cases := []struct {
		name   string
		r      messages.ForwardResult
		result persistence.Result
		status bool
		reason string
		retry  time.Time
	}{
		{name: "accepted", r: messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: "m1", State: messages.StatePending}},
			result: persistence.ResultDelivered},
		{name: "duplicate still pending there", r: messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: "m1", Duplicate: true, State: messages.StateRetry}},
			result: persistence.ResultDelivered},
		{name: "duplicate delivered there", r: messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: "m1", Duplicate: true, State: messages.StateDelivered}},
			result: persistence.ResultDelivered, status: true},
		{name: "duplicate failed there", r: messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: "m1", Duplicate: true, State: messages.StateFailed, Reason: "expired"}},
			result: persistence.ResultFailed, status: true, reason: "expired"},
		{name: "refused for good", r: messages.ForwardResult{Error: messages.Errorf(messages.CodeNotOurFrontend, "no")},
			result: persistence.ResultFailed, reason: messages.ReasonPeerRejected},
		{name: "refused for now", r: messages.ForwardResult{Error: messages.Errorf(messages.CodeUnavailable, "later")},
			result: persistence.ResultRetry, retry: t0.Add(p.RetryInterval)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := p.Judge(t0, "b", w, tc.r)
			if tc.status {
				if v.Status == nil || v.Outcome != nil || v.Status.Result != tc.result || v.Status.From != "b" || v.Status.Reason != tc.reason {
					t.Fatalf("verdict %+v %+v", v.Outcome, v.Status)
				}
				return
			}
			if v.Outcome == nil || v.Status != nil {
				t.Fatalf("verdict %+v %+v", v.Outcome, v.Status)
			}
			o := *v.Outcome
			if o.Result != tc.result || o.Reason != tc.reason || !o.RetryAt.Equal(tc.retry) || o.Kind != persistence.WorkForward || o.Target != "b" || o.MessageID != "m1" {
				t.Fatalf("outcome %+v", o)
			}
		})
	}
}

func TestPolicyUnsentWaitsForHealth(t *testing.T) {
	p := DefaultPolicy()
	o := p.Unsent(t0, "b", persistence.Work{Kind: persistence.WorkForward, MessageID: "m"}, errors.New("refused"))
	if o.Result != persistence.ResultRetry || !o.RetryAt.Equal(t0) {
		t.Fatalf("%+v", o)
	}
}

func TestPolicyDeadlineDerivedFromQueuedAt(t *testing.T) {
	cases := []struct {
		interval time.Duration
		retries  int
		want     time.Duration
	}{
		{5 * time.Second, 50, 250 * time.Second},
		{time.Second, 1, time.Second},
		{100 * time.Millisecond, 30, 3 * time.Second},
		// Products past a Duration's range saturate instead of wrapping
		// (3689348815 x 5s wrapped to 1.29s, 2147483647 x 5s to a
		// negative wait): the cutoff stays in the past.
		{5 * time.Second, 3689348815, math.MaxInt64},
		{5 * time.Second, 2147483647, math.MaxInt64},
		{time.Hour, math.MaxInt, math.MaxInt64},
	}
	for _, tc := range cases {
		p := Policy{RetryInterval: tc.interval, MaxRetries: tc.retries, Batch: 1, InFlight: 1}
		if p.MaxWait() != tc.want || !p.QueuedBefore(t0).Equal(t0.Add(-tc.want)) {
			t.Fatalf("%v x %d: wait %v cutoff %v", tc.interval, tc.retries, p.MaxWait(), p.QueuedBefore(t0))
		}
	}
}

func TestPolicyTick(t *testing.T) {
	p := DefaultPolicy()
	for _, tc := range []struct{ idlePoll, want time.Duration }{
		{0, p.RetryInterval},
		{time.Second, time.Second},
		{p.RetryInterval + time.Second, p.RetryInterval},
	} {
		if got := p.Tick(tc.idlePoll); got != tc.want {
			t.Errorf("idle poll %v: tick %v, want %v", tc.idlePoll, got, tc.want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Policy{
		{RetryInterval: 0, MaxRetries: 1, Batch: 1, InFlight: 1},
		{RetryInterval: time.Second, MaxRetries: 0, Batch: 1, InFlight: 1},
		{RetryInterval: time.Second, MaxRetries: 1, Batch: 0, InFlight: 1},
		{RetryInterval: time.Second, MaxRetries: 1, Batch: messages.MaxForwardBatch + 1, InFlight: 1},
		{RetryInterval: time.Second, MaxRetries: 1, Batch: 1, InFlight: 0},
		{RetryInterval: 5 * time.Second, MaxRetries: 2147483647, Batch: 1, InFlight: 1},
		{RetryInterval: 5 * time.Second, MaxRetries: 3689348815, Batch: 1, InFlight: 1},
		{RetryInterval: MaxWaitLimit + 1, MaxRetries: 1, Batch: 1, InFlight: 1},
	}
	for i, p := range bad {
		if p.Validate() == nil {
			t.Fatalf("case %d: %+v passed", i, p)
		}
	}
}

// TestLane walks the flow control through a drain, a failure and a heal.
func TestLane(t *testing.T) {
	type op struct {
		name   string
		do     func(l *Lane) bool
		want   bool // result of do
		claims int  // Claims() after
	}
	const batch = 10
	ops := []op{
		{"closed lane claims nothing", func(l *Lane) bool { l.Kick(); return l.Open() }, false, 0},
		{"healthy opens with work assumed", func(l *Lane) bool { l.SetOpen(true); return l.Open() }, true, 2},
		{"full claim sends", func(l *Lane) bool { return l.Claimed(batch, batch, l.Kicks()) }, true, 1},
		{"second full claim sends", func(l *Lane) bool { return l.Claimed(batch, batch, l.Kicks()) }, true, 0},
		{"success frees a slot, more assumed", func(l *Lane) bool { return !l.Done(true) && l.Open() }, true, 1},
		{"short claim sends and ends the drain", func(l *Lane) bool { return l.Claimed(3, batch, l.Kicks()) }, true, 0},
		{"success with nothing more", func(l *Lane) bool { l.Done(true); return l.Open() }, true, 0},
		{"kick makes it look again", func(l *Lane) bool { l.Kick(); return l.Open() }, true, 1},
		{"empty claim sends nothing", func(l *Lane) bool { return l.Claimed(0, batch, l.Kicks()) }, false, 0},
		{"kick again fills the second slot", func(l *Lane) bool { l.Kick(); return l.Claimed(batch, batch, l.Kicks()) }, true, 0},
		{"a kick during a claim outlives its coming back short", func(l *Lane) bool {
			at := l.Kicks()
			l.Done(true)
			l.Done(true)
			l.Kick()
			return l.Claimed(1, batch, at)
		}, true, 1},
		{"failure closes the lane and says so", func(l *Lane) bool { return l.Done(false) && !l.Open() }, true, 0},
		{"the other request failing on the closed lane does not", func(l *Lane) bool { return l.Done(false) }, false, 0},
		{"kicks while closed do nothing", func(l *Lane) bool { l.Kick(); return l.Open() }, false, 0},
		{"heal reopens", func(l *Lane) bool { l.SetOpen(true); return l.Open() }, true, 2},
		{"unhealthy closes", func(l *Lane) bool { l.SetOpen(false); return l.Open() }, false, 0},
	}
	l := NewLane(2)
	for _, o := range ops {
		if got := o.do(l); got != o.want {
			t.Fatalf("%s: got %v", o.name, got)
		}
		if got := l.Claims(); got != o.claims {
			t.Fatalf("%s: claims %d, want %d (in flight %d)", o.name, got, o.claims, l.InFlight())
		}
	}
}
