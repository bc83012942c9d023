package delivery

import (
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestPace is the worker's step beside its dispatcher's, by frontend mode
// and what the step reads: whether claims are held, the idle poll, the
// next wake-up (with the dispatcher asking for +1m) and the offer on the
// handover board.
func TestPace(t *testing.T) {
	const idle = 5 * time.Second
	cases := []struct {
		name   string
		mode   messages.FrontendMode
		r      reading
		held   bool
		idle   time.Duration
		wake   time.Duration // from t0
		offers bool
	}{
		{name: "webhook, store alone", mode: messages.ModeWebhook, wake: time.Minute, offers: true},
		{name: "webhook, shared store", mode: messages.ModeWebhook, r: reading{fenceIdle: idle},
			idle: idle, wake: idle},
		{name: "webhook, shared store, bus up", mode: messages.ModeWebhook, r: reading{fenceIdle: idle, busUp: true},
			wake: time.Minute, offers: true},
		{name: "pull, no poll waits", mode: messages.ModePull, r: reading{fenceIdle: idle},
			wake: time.Minute, offers: true},
		{name: "pull, polls wait", mode: messages.ModePull, r: reading{fenceIdle: idle, waiting: true},
			idle: idle, wake: idle, offers: true},
		{name: "pull, polls wait, bus up", mode: messages.ModePull, r: reading{fenceIdle: idle, waiting: true, busUp: true},
			wake: time.Minute, offers: true},
		{name: "actor not registered", mode: messages.ModeActor, held: true, wake: time.Minute, offers: true},
		{name: "actor registered", mode: messages.ModeActor, r: reading{registered: true}, wake: time.Minute, offers: true},
		{name: "smpp without a client", mode: messages.ModeSMPP, held: true, wake: time.Minute, offers: true},
		{name: "smpp not bound", mode: messages.ModeSMPP, r: reading{client: true}, held: true,
			wake: smppHeldPoll, offers: true},
		{name: "smpp bound", mode: messages.ModeSMPP, r: reading{client: true, bound: true}, wake: time.Minute, offers: true},
		{name: "smpp bound, its rate leaving no slot in time", mode: messages.ModeSMPP,
			r: reading{client: true, bound: true, pacedUntil: t0.Add(3 * time.Second)}, held: true, wake: 3 * time.Second, offers: true},
		{name: "smpp not bound, shared store", mode: messages.ModeSMPP, r: reading{client: true, fenceIdle: 500 * time.Millisecond},
			held: true, idle: 500 * time.Millisecond, wake: 500 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pace{mode: c.mode}
			if got := p.held(c.r); got != c.held {
				t.Errorf("held = %v, want %v", got, c.held)
			}
			if got := p.idle(c.r); got != c.idle {
				t.Errorf("idle = %v, want %v", got, c.idle)
			}
			if got := p.next(t0, c.r, time.Time{}, t0.Add(time.Minute)); !got.Equal(t0.Add(c.wake)) {
				t.Errorf("next = +%v, want +%v", got.Sub(t0), c.wake)
			}
			if got := p.offers(c.r); got != c.offers {
				t.Errorf("offers = %v, want %v", got, c.offers)
			}
		})
	}
}

// TestPaceNextWithNothingDue: without anything due, an idle poll or an
// unbound client, the worker sleeps until a message comes.
func TestPaceNextWithNothingDue(t *testing.T) {
	p := pace{mode: messages.ModeWebhook}
	if got := p.next(t0, reading{}, time.Time{}, time.Time{}); !got.IsZero() {
		t.Fatalf("next = %v, want none", got)
	}
	if got := p.next(t0, reading{}, t0.Add(time.Hour), t0.Add(time.Second), time.Time{}); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("next = %v, want the earliest due", got)
	}
}
