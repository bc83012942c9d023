package smppout

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
// message is a deferred retry (not attempted: it uses no attempt) that
// asks to wait out the pause. Meanwhile the client says it is paced
// (PacedUntil: its worker claims nothing until then), and a message whose
// time the pause outlasts is not sent: deferred too.
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
	if v := <-submit(1); v.Status != messages.Retry || v.Reason != "ESME_RTHROTTLED (0x00000058)" || !v.Deferred || v.RetryAfter != time.Second {
		t.Fatalf("m-1: %+v, want a deferred retry after 1s", v)
	}
	short, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Second))
	defer cancel()
	if v := c.Submit(short, messages.Outgoing{ID: "m-short", SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: "hi"}, ""); v.Status != messages.Retry || !v.Deferred || v.RetryAfter != time.Second || len(smsc.Submits()) != 1 {
		t.Fatalf("m-short, 1 s to go in a pause of 1 s: %+v (%d submits at the SMSC), want a deferred retry after 1s, not sent", v, len(smsc.Submits()))
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
		if r := <-v; r.Status != want || (want == messages.Retry && (!r.Deferred || r.RetryAfter != 2*pause)) {
			t.Fatalf("m-%d: %+v, want %s (a retry deferred by the next pause, %v)", i+2, r, want, 2*pause)
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

// A long text whose part the SMSC throttles sends none of its later parts
// (they would go into the pause; the text is retried whole). Nothing of
// it reached the SMSC when the throttled part was its first: deferred.
// An SMSC that took an earlier part has that part (the handset may get
// it, and the retry sends it again): an ordinary retry, its attempt used.
// The parts go 500 ms apart (rate=2), the throttled one's answer held
// until the next part's slot is near, then let go (a receipt behind it on
// the connection tells that the client has read it).
func TestThrottledPartStopsTheText(t *testing.T) {
	for _, c := range []struct {
		name      string
		throttled int // the part throttled, from 1
		deferred  bool
		reason    string
	}{
		{"first part throttled", 1, true, "part 1 of 3: ESME_RTHROTTLED (0x00000058)"},
		{"second part throttled", 2, false, "part 2 of 3: ESME_RTHROTTLED (0x00000058)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) {
				if s.N == c.throttled {
					return smpp.StatusThrottled, true
				}
				return smpp.StatusOK, false
			})
			clk := newManualClock()
			cl := boundClient(t, "smpp://sb@"+smsc.Addr+"?rate=2", Config{Clock: clk})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			verdict := make(chan messages.DeliveryResult, 1)
			go func() {
				body := strings.Repeat("0123456789", 40) // 400 septets: 3 parts
				verdict <- cl.Submit(ctx, messages.Outgoing{ID: "m-1", SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: body}, "")
			}()
			// The session's timers are 10 s (responses) and 30 s (keepalive).
			paced := func() bool { return len(clk.pending(time.Second)) == 1 }
			for part := 1; part <= c.throttled; part++ {
				polltest.Until(t, 20*time.Second, fmt.Sprintf("part %d sent, the wait for the next", part), func() bool {
					return len(smsc.Submits()) == part && paced()
				})
				if part == c.throttled {
					if n := smsc.Release(); n != 1 {
						t.Fatalf("%d throttled answers let go, want 1", n)
					}
					if st, err := smsc.Receipt("nobody", "DELIVRD"); err != nil || st != smpp.StatusOK {
						t.Fatalf("receipt behind the answer: %s %v", st, err)
					}
				}
				clk.Advance(500 * time.Millisecond)
			}
			v := <-verdict
			if v.Status != messages.Retry || v.Deferred != c.deferred || v.Reason != c.reason {
				t.Errorf("%+v; want a retry (%q), deferred %v", v, c.reason, c.deferred)
			}
			if n := len(smsc.Submits()); n != c.throttled {
				t.Errorf("%d parts at the SMSC, want %d: none after the throttled one", n, c.throttled)
			}
		})
	}
}
