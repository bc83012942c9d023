package switchboard

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
)

// The node's own timeline for the web UI's live chart: messages accepted,
// delivered and failed per second, and the outbox and forward queue
// depths, over the last hour, from the node's own counters (no external
// service). Counters are bumped by every published transition; a sampler
// reads and resets them every timelineInterval, with the store's counts
// (the stats cache: at most one store read a second).
const (
	// timelineInterval is the chart's resolution: a point each 10 s, the
	// rates averaged over it.
	timelineInterval = 10 * time.Second
	// timelinePoints is an hour of points.
	timelinePoints = 360
)

// eventCounts counts transitions since the last sample (safe for
// concurrent use; publish runs on many goroutines).
type eventCounts struct {
	accepted, delivered, failed atomic.Int64
}

// count notes one published transition.
func (c *eventCounts) count(ev messages.StateChanged) {
	switch {
	case ev.Accepted:
		c.accepted.Add(1)
	case ev.State == messages.StateDelivered:
		c.delivered.Add(1)
	case ev.State == messages.StateFailed || ev.State == messages.StateForwardFailed:
		c.failed.Add(1)
	}
}

// timeline is a ring of the last timelinePoints points. Safe for
// concurrent use.
type timeline struct {
	mu     sync.Mutex
	points []httpapi.TimelinePoint // oldest first, at most timelinePoints
}

// add appends a point, dropping the oldest beyond the hour.
func (t *timeline) add(p httpapi.TimelinePoint) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.points = append(t.points, p)
	if n := len(t.points) - timelinePoints; n > 0 {
		t.points = append(t.points[:0], t.points[n:]...)
	}
}

// snapshot returns a copy of the points, oldest first.
func (t *timeline) snapshot() []httpapi.TimelinePoint {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]httpapi.TimelinePoint{}, t.points...)
}

// sample takes one point at now: the counts since the last sample as
// rates over elapsed, and the depths the stats cache has.
func (n *Node) sample(now time.Time, elapsed time.Duration) {
	secs := elapsed.Seconds()
	p := httpapi.TimelinePoint{
		At:        now.UTC(),
		Accepted:  float64(n.events.accepted.Swap(0)) / secs,
		Delivered: float64(n.events.delivered.Swap(0)) / secs,
		Failed:    float64(n.events.failed.Swap(0)) / secs,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := n.stats.get(ctx); err == nil {
		outbox, fwd := st.OutboxDepth, forwardDepth(st)
		p.OutboxDepth, p.ForwardQueueDepth = &outbox, &fwd
	}
	n.timeline.add(p)
}

// startTimeline samples every timelineInterval until the node stops.
func (n *Node) startTimeline() {
	last := n.clock.Now()
	var tick func()
	tick = func() {
		select {
		case <-n.stopping:
			return
		default:
		}
		now := n.clock.Now()
		n.sample(now, now.Sub(last))
		last = now
		n.timelineMu.Lock()
		if !n.timelineStopped {
			n.stopTimeline = n.clock.AfterFunc(timelineInterval, tick)
		}
		n.timelineMu.Unlock()
	}
	n.timelineMu.Lock()
	n.stopTimeline = n.clock.AfterFunc(timelineInterval, tick)
	n.timelineMu.Unlock()
}

// endTimeline stops the sampler.
func (n *Node) endTimeline() {
	n.timelineMu.Lock()
	defer n.timelineMu.Unlock()
	n.timelineStopped = true
	if n.stopTimeline != nil {
		n.stopTimeline()
	}
}
