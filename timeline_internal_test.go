package switchboard

import (
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
)

// TestTimelineKeepsAnHourOfRates: transitions are counted by kind, a
// sample turns the counts into rates over its interval and resets them,
// and the ring keeps the last hour.
func TestTimelineKeepsAnHourOfRates(t *testing.T) {
	var c eventCounts
	for _, ev := range []messages.StateChanged{
		{State: messages.StatePending, Accepted: true}, {State: messages.StateForwardQueued, Accepted: true},
		{State: messages.StatePending}, // a resubmit: not accepted
		{State: messages.StateDelivered}, {State: messages.StateFailed}, {State: messages.StateForwardFailed},
		{State: messages.StateRetry},
	} {
		c.count(ev)
	}
	if a, d, f := c.accepted.Load(), c.delivered.Load(), c.failed.Load(); a != 2 || d != 1 || f != 2 {
		t.Fatalf("counted accepted %d, delivered %d, failed %d; want 2, 1, 2", a, d, f)
	}
	var tl timeline
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range timelinePoints + 5 {
		tl.add(httpapi.TimelinePoint{At: t0.Add(time.Duration(i) * timelineInterval), Accepted: float64(i)})
	}
	pts := tl.snapshot()
	if len(pts) != timelinePoints || pts[0].Accepted != 5 || pts[len(pts)-1].Accepted != timelinePoints+4 {
		t.Fatalf("%d points from %v to %v, want the last %d", len(pts), pts[0].Accepted, pts[len(pts)-1].Accepted, timelinePoints)
	}
	pts[0].Accepted = -1
	if tl.snapshot()[0].Accepted == -1 {
		t.Fatal("snapshot shares the ring")
	}
}
