package peer

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

func TestHealthStateMachine(t *testing.T) {
	fail := errors.New("connection refused")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		err      error
		state    messages.PeerState
		failures int
		changed  bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"first pass", []step{{nil, messages.PeerHealthy, 0, true}}},
		{"first failure is degraded", []step{{fail, messages.PeerDegraded, 1, true}}},
		{"three failures make unhealthy", []step{
			{nil, messages.PeerHealthy, 0, true},
			{fail, messages.PeerDegraded, 1, true},
			{fail, messages.PeerDegraded, 2, false},
			{fail, messages.PeerUnhealthy, 3, true},
			{fail, messages.PeerUnhealthy, 4, false},
		}},
		{"one pass heals at once", []step{
			{fail, messages.PeerDegraded, 1, true},
			{fail, messages.PeerDegraded, 2, false},
			{fail, messages.PeerUnhealthy, 3, true},
			{nil, messages.PeerHealthy, 0, true},
			{nil, messages.PeerHealthy, 0, false},
		}},
		{"a pass between failures resets the count", []step{
			{fail, messages.PeerDegraded, 1, true},
			{fail, messages.PeerDegraded, 2, false},
			{nil, messages.PeerHealthy, 0, true},
			{fail, messages.PeerDegraded, 1, true},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h Health
			if h.State() != messages.PeerUnknown || h.Healthy() {
				t.Fatalf("zero value: %s", h.State())
			}
			for i, s := range tc.steps {
				now := t0.Add(time.Duration(i) * time.Second)
				tr, changed := h.Observe(now, s.err)
				if h.State() != s.state || h.Failures() != s.failures || changed != s.changed {
					t.Fatalf("step %d: state %s failures %d changed %v; want %s %d %v",
						i, h.State(), h.Failures(), changed, s.state, s.failures, s.changed)
				}
				if changed && tr.To != s.state {
					t.Fatalf("step %d: transition to %s, want %s", i, tr.To, s.state)
				}
				if s.err == nil && !h.LastSuccess().Equal(now) {
					t.Fatalf("step %d: last success %v", i, h.LastSuccess())
				}
				if (s.err != nil) != (h.LastError() != "") {
					t.Fatalf("step %d: last error %q", i, h.LastError())
				}
			}
		})
	}
}
