package retention

import (
	"math/rand/v2"
	"testing"
	"testing/quick"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

func TestPolicyRequest(t *testing.T) {
	now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	p := Policy{Retention: time.Hour, RetentionFailed: 2 * time.Hour, ForwardedAfter: 3 * time.Hour}
	req, ok := p.Request(now, 7)
	want := map[messages.State]time.Time{
		messages.StateDelivered: now.Add(-time.Hour), messages.StateFailed: now.Add(-2 * time.Hour),
		messages.StateForwardFailed: now.Add(-2 * time.Hour), messages.StateForwarded: now.Add(-3 * time.Hour),
	}
	if !ok || req.Limit != 7 || !req.Now.Equal(now) || len(req.Before) != len(want) {
		t.Fatalf("Request = %+v, %v", req, ok)
	}
	for st, cut := range want {
		if !req.Before[st].Equal(cut) {
			t.Errorf("cutoff of %s = %v, want %v", st, req.Before[st], cut)
		}
	}
	if err := req.Validate(); err != nil {
		t.Errorf("the request is invalid: %v", err)
	}
	// Zero keeps forever: that state has no cutoff.
	req, ok = Policy{Retention: time.Hour}.Request(now, 1)
	if !ok || len(req.Before) != 1 {
		t.Errorf("delivered only: %+v %v", req.Before, ok)
	}
	if _, ok := (Policy{}).Request(now, 1); ok {
		t.Error("a policy that keeps everything asked for a purge")
	}
}

func TestPolicyInterval(t *testing.T) {
	for _, c := range []struct {
		p    Policy
		want time.Duration
	}{
		{Policy{Retention: 24 * time.Hour, RetentionFailed: 168 * time.Hour}, time.Minute},
		{Policy{Retention: 30 * time.Second, RetentionFailed: time.Hour}, 3 * time.Second},
		{Policy{Retention: 2 * time.Second}, time.Second},
		{Policy{RetentionFailed: 5 * time.Minute}, 30 * time.Second},
		{Policy{}, time.Minute},
	} {
		if got := c.p.Interval(); got != c.want {
			t.Errorf("%+v: Interval %v, want %v", c.p, got, c.want)
		}
	}
}

func TestPacerAdapts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := DefaultPacer()
	b := p.Batch()
	// Fast full batches grow it, up to Max.
	for range 50 {
		pause, more := p.Done(p.Batch(), p.Batch(), time.Millisecond, false, r)
		if !more || pause < p.MinPause {
			t.Fatalf("a fast full batch: pause %v more %v", pause, more)
		}
	}
	if p.Batch() != p.Max {
		t.Errorf("after fast batches the batch is %d, want %d (from %d)", p.Batch(), p.Max, b)
	}
	// A slow batch halves it; the pause follows the batch's time.
	pause, more := p.Done(p.Batch(), p.Batch(), 100*time.Millisecond, false, r)
	if !more || p.Batch() != p.Max/2 || pause < 80*time.Millisecond || pause > 120*time.Millisecond {
		t.Errorf("after a slow batch: batch %d, pause %v, more %v", p.Batch(), pause, more)
	}
	// A failure quarters it, ends the pass and backs off.
	pause, more = p.Done(p.Batch(), 0, time.Second, true, r)
	if more || pause != p.Backoff || p.Batch() != p.Max/8 {
		t.Errorf("after a failure: batch %d, pause %v, more %v", p.Batch(), pause, more)
	}
	// A short batch ends the pass.
	if _, more := p.Done(p.Batch(), p.Batch()-1, time.Millisecond, false, r); more {
		t.Error("a short batch did not end the pass")
	}
}

// TestPacerBounds: whatever the batches do, the size stays within
// [Min, Max] and the pause between batches of a pass is at least MinPause
// and at most ~the batch's time (the cleaner's duty stays near half).
func TestPacerBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	f := func(steps []uint16) bool {
		p := DefaultPacer()
		for _, s := range steps {
			asked := p.Batch()
			if asked < p.Min || asked > p.Max {
				return false
			}
			took := time.Duration(s%200) * time.Millisecond
			purged := asked
			if s%7 == 0 {
				purged = asked / 2
			}
			pause, more := p.Done(asked, purged, took, s%11 == 0, r)
			if more && s%11 != 0 && (pause < p.MinPause || pause > max(p.MinPause, took*6/5)) {
				return false
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Error(err)
	}
}

// TestPacerKeepsThePassPace: a pass over what became eligible since the
// last one spreads its batches over the interval; a backlog goes at the
// duty cap.
func TestPacerKeepsThePassPace(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	p := DefaultPacer()
	p.Pass(6000, time.Minute) // 120 a second with the headroom
	asked := p.Batch()
	pause, more := p.Done(asked, asked, time.Millisecond, false, r)
	want := time.Duration(float64(asked)/120*float64(time.Second)) - time.Millisecond
	if !more || pause < want*8/10 || pause > want*12/10 {
		t.Errorf("a paced pass: pause %v after %d, want about %v", pause, asked, want)
	}
	p.Pass(100_000_000, time.Minute) // a backlog: the duty cap rules
	asked = p.Batch()
	if pause, _ := p.Done(asked, asked, 20*time.Millisecond, false, r); pause < 16*time.Millisecond || pause > 24*time.Millisecond {
		t.Errorf("a backlog: pause %v after a batch of 20ms", pause)
	}
}
