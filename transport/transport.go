package transport

import (
	"context"
	"fmt"
	"net/http"

	"github.com/switchboard-dev/switchboard/messages"
)

// Peer carries every outbound call to a peer: the seam between the
// actors and the network. httpapi.PeerClient implements it over HTTPS (the
// production network); the sim harness swaps in an in-memory network that
// can cut, delay, drop and duplicate. Addresses are "host:port".
//
// An error is either a *CallError (the peer answered with an error
// document: it is up, and refused) or anything else (the call did not
// complete: connection refused, timeout, TLS failure, cancelled).
type Peer interface {
	// Identity asks who answers at addr (GET /api/federation/identity).
	Identity(ctx context.Context, addr string) (messages.Identity, error)
	// Health is the two-way health exchange (POST /api/federation/health).
	Health(ctx context.Context, addr string, h messages.Health) (messages.Health, error)
	// Registry exchanges frontend registries (POST /api/federation/registry).
	Registry(ctx context.Context, addr string, r messages.Registry) (messages.Registry, error)
	// Forward hands messages to the peer. With batch, one forward_batch
	// call carries them all; without, each goes in its own forward call.
	// Results are in input order; a message the peer refused has its
	// result's Error set (a *messages.Error with the peer's code). An error
	// return means no result is known for any message.
	Forward(ctx context.Context, addr string, batch bool, fs []messages.Forward) ([]messages.ForwardResult, error)
	// Status reports final delivery outcomes to the origin, one
	// delivery_status_batch call with batch, else one call each. Results
	// are in input order; an error return means none is known.
	Status(ctx context.Context, addr string, batch bool, rs []messages.StatusReport) ([]messages.StatusReply, error)
}

// CallError is a peer's error answer: the call reached it and it refused.
type CallError struct {
	// Status is the HTTP status.
	Status int
	// Code and Message come from the peer's error document (Code is
	// "http_<status>" when the body was not one).
	Code    string
	Message string
}

func (e *CallError) Error() string {
	return fmt.Sprintf("peer answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Permanent reports whether repeating the same call cannot succeed: a 4xx
// other than 408 (timeout) and 429 (overloaded). 5xx and those two are
// transient, like a connection failure.
func (e *CallError) Permanent() bool {
	return e.Status >= 400 && e.Status < 500 &&
		e.Status != http.StatusRequestTimeout && e.Status != http.StatusTooManyRequests
}
