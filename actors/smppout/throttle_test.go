package smppout

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
)

// An SMSC at its limit answers ESME_RTHROTTLED: the frontend's new
// submits wait, 1 s after the first throttle, 2 s after the next (on the
// client's clock), and go at once again after an ESME_ROK; the throttled
// message is a retry, as any temporary status. Meanwhile the client says
// it is paced (PacedUntil: its worker claims nothing until then).
func TestThrottledSMSCPausesNewSubmits(t *testing.T) {
	const throttled = 2
	smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) {
		if s.N <= throttled {
			return smpp.StatusThrottled, false
		}
		return smpp.StatusOK, false
	})
	clk := newManualClock()
	c := boundClient(t, "smpp://sb@"+smsc.Addr, Config{Clock: clk})
	submit := func(i int) <-chan messages.DeliveryResult {
		v := make(chan messages.DeliveryResult, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			v <- c.Submit(ctx, messages.Outgoing{ID: fmt.Sprintf("m-%d", i), SourceMSISDN: "+15550001",
				DestinationMSISDN: "+33600000001", Body: "hi"}, "")
		}()
		return v
	}
	if v := <-submit(1); v.Status != messages.Retry || v.Reason != "ESME_RTHROTTLED (0x00000058)" {
		t.Fatalf("m-1: %+v, want a retry", v)
	}
	// The session's own timers are 10 s (responses) and 30 s (keepalive).
	pauses := func() []time.Duration { return clk.pending(5 * time.Second) }
	for i, pause := range []time.Duration{time.Second, 2 * time.Second} {
		if got, want := c.PacedUntil(10*time.Second), clk.Now().Add(pause); !got.Equal(want) {
			t.Errorf("after %d throttles: paced until %v, want %v (%v on)", i+1, got, want, pause)
		}
		v := submit(i + 2)
		polltest.Until(t, 20*time.Second, fmt.Sprintf("m-%d sent or waiting", i+2), func() bool {
			return len(smsc.Submits()) > i+1 || len(pauses()) > 0
		})
		if n := len(smsc.Submits()); n > i+1 || !slices.Equal(pauses(), []time.Duration{pause}) {
			t.Fatalf("after %d throttles: m-%d sent at once (%d submits at the SMSC, waits %v), want it to wait %v",
				i+1, i+2, n, pauses(), pause)
		}
		clk.Advance(pause)
		want := messages.Retry
		if i+2 > throttled {
			want = messages.Delivered
		}
		if r := <-v; r.Status != want {
			t.Fatalf("m-%d: %+v, want %s", i+2, r, want)
		}
	}
	// Accepted: the next goes at once.
	if got := c.PacedUntil(10 * time.Second); !got.IsZero() {
		t.Errorf("after an ESME_ROK: paced until %v", got)
	}
	if v := <-submit(9); v.Status != messages.Delivered || len(pauses()) != 0 {
		t.Fatalf("m-9 after an ESME_ROK: %+v, waits %v", v, pauses())
	}
}
