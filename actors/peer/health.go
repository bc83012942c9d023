package peer

import (
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// Thresholds of the health state machine (docs/api.md, "Peer states").
const (
	// UnhealthyAfter consecutive failed checks make a peer unhealthy; fewer
	// (but at least one) make it degraded.
	UnhealthyAfter = 3
	// SlowCheck is the latency above which a passed check is logged as a
	// degraded link (it still counts as passed).
	SlowCheck = 2 * time.Second
)

// Health is the pure health state machine of one peer. The zero value is a
// peer whose first check is in progress (unknown).
type Health struct {
	state       messages.PeerState
	failures    int
	lastSuccess time.Time
	lastError   string
}

// Transition is a change of state reported by Observe.
type Transition struct {
	From, To messages.PeerState
}

// State is the current state.
func (h *Health) State() messages.PeerState {
	if h.state == "" {
		return messages.PeerUnknown
	}
	return h.state
}

// Failures counts consecutive failed checks.
func (h *Health) Failures() int { return h.failures }

// LastSuccess is the time of the last passed check (zero if none).
func (h *Health) LastSuccess() time.Time { return h.lastSuccess }

// LastError is the error of the last failed check ("" after a success).
func (h *Health) LastError() string { return h.lastError }

// Observe records the result of one check at now: err nil is a pass. It
// returns the transition when the state changed.
func (h *Health) Observe(now time.Time, err error) (Transition, bool) {
	from := h.State()
	if err == nil {
		h.failures, h.lastSuccess, h.lastError = 0, now, ""
		h.state = messages.PeerHealthy
	} else {
		h.failures++
		h.lastError = err.Error()
		h.state = messages.PeerDegraded
		if h.failures >= UnhealthyAfter {
			h.state = messages.PeerUnhealthy
		}
	}
	if h.state == from {
		return Transition{}, false
	}
	return Transition{From: from, To: h.state}, true
}

// Healthy reports whether the peer gets forwards and registry syncs.
func (h *Health) Healthy() bool { return h.State() == messages.PeerHealthy }
