package transport

import (
	"context"

	"github.com/switchboard-dev/switchboard/messages"
)

// Ring carries a slave's calls to its master: httpapi.PeerClient over
// HTTPS in production (the same client, certificates and connection pool
// as federation), the sim harness's in-memory network in simulation.
// Errors follow Peer: a *CallError is the master's refusal (KindOf:
// NotMember, NotMaster, Forbidden, Unavailable while it stops, ...),
// anything else a call that did not complete. addr is "host:port".
type Ring interface {
	// RingJoin asks to join (POST /api/ring/join).
	RingJoin(ctx context.Context, addr string, j messages.RingJoin) (messages.RingAssignment, error)
	// RingPoll is the subscription call (POST /api/ring/poll); it may take
	// p.WaitMs before the master answers.
	RingPoll(ctx context.Context, addr string, p messages.RingPoll) (messages.RingAssignment, error)
	// RingLeave says goodbye (POST /api/ring/leave).
	RingLeave(ctx context.Context, addr string, l messages.RingLeave) error
}
