package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// Peer carries every outbound call to a peer: the seam between the
// actors and the network. httpapi.PeerClient implements it over HTTPS (the
// production network); the sim harness swaps in an in-memory network that
// can cut, delay, drop and duplicate. Addresses are "host:port".
//
// Every call but Identity names the node it is for (Target): an address
// says where a node was, not who answers there now (a host or pod IP
// reused, an SRV record moved), and an answer from another node must not
// be taken for the peer's. The callee refuses a call for another node
// (421 misdirected), and the call fails as Unreachable.
//
// An error is either a *CallError (the peer answered with an error
// document: it is up, and refused) or anything else (the call did not
// complete: connection refused, timeout, TLS failure, cancelled); KindOf
// tells callers which, and what kind of refusal.
type Peer interface {
	// Identity asks who answers at addr (GET /api/federation/identity).
	Identity(ctx context.Context, addr string) (messages.Identity, error)
	// Health is the two-way health exchange (POST /api/federation/health).
	Health(ctx context.Context, to Target, h messages.Health) (messages.Health, error)
	// Registry exchanges frontend registries (POST /api/federation/registry).
	Registry(ctx context.Context, to Target, r messages.Registry) (messages.Registry, error)
	// Forward hands messages to the peer. With batch, forward_batch
	// requests carry them; without, each goes in its own forward request.
	// Results are in input order; a message the peer refused has its
	// result's Error set (a *messages.Error with the peer's code). With an
	// error, the results are nil (none is known) or hold those of the
	// requests that completed: a result with an empty ID is not known.
	// Each request has its own bound (the transport's timeout); ctx bounds
	// the whole call.
	Forward(ctx context.Context, to Target, batch bool, fs []messages.Forward) ([]messages.ForwardResult, error)
	// Status reports final delivery outcomes to the origin, one
	// delivery_status_batch call with batch, else one call each. Results
	// are in input order and, with an error, as Forward's: nil, or those
	// of the requests that completed (an empty ID: not known).
	Status(ctx context.Context, to Target, batch bool, rs []messages.StatusReport) ([]messages.StatusReply, error)
}

// Target is where a call goes: the node it is for, at one of its
// addresses.
type Target struct {
	// Node is the peer's name: the callee must be it (with mutual TLS its
	// certificate must name it too).
	Node string
	// Addr is the instance called ("host:port").
	Addr string
}

// CallError is a peer's error answer: the call reached it and it refused.
type CallError struct {
	// Kind is what the answer means to the caller; callers decide on it,
	// never on Status.
	Kind Kind
	// Status is the HTTP status (for logs).
	Status int
	// Code and Message come from the peer's error document (Code is
	// "http_<status>" when the body was not one).
	Code    string
	Message string
	// RetryAfter is the answer's Retry-After (whole seconds; zero when it
	// had none).
	RetryAfter time.Duration
}

func (e *CallError) Error() string {
	return fmt.Sprintf("peer answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Kind classifies how a call to another node failed. The client that
// carries the call maps the answer to it (httpapi's peer client: status
// and error code); callers decide on it alone.
type Kind int

const (
	// None: no error.
	None Kind = iota
	// Unreachable: the call did not complete: no connection, a TLS
	// failure, the deadline, a reset, or the peer gave up waiting for the
	// request (408); or another node answers at the address (421
	// misdirected: the peer is not there, as if nothing answered). Every
	// error that is not a *CallError is of this kind.
	Unreachable
	// Refused: the peer says the call is wrong (400, 413, 422, any other
	// 4xx not below): the same call fails again.
	Refused
	// Conflict: the call clashes with the peer's state (409: an id reused
	// with other content, a state that does not allow it, an instance id
	// subscribed from another address): it fails again while that lasts.
	Conflict
	// Forbidden: the peer does not let the caller in (401, 403: federation
	// off, an unknown peer, a certificate or node that does not match, a
	// ring member of another site or configuration).
	Forbidden
	// UnknownTarget: the peer serves no such call (404, 405: another
	// version of the API, or no node at all).
	UnknownTarget
	// NotMember: a ring master does not know the caller as a member (it
	// was dropped, or the master changed): join again.
	NotMember
	// NotMaster: the ring instance called is not the master (any more).
	NotMaster
	// Busy: the peer sheds load (429) or has no room for new work (507,
	// storage full): it is up and serves everything else; RetryAfter says
	// when to come back.
	Busy
	// Unavailable: the peer is up but does not serve now (503): it is
	// stopping or starting, or its store does not answer. A ring master
	// that stops answers its subscriptions so.
	Unavailable
	// ServerError: any other answer: a 5xx or a status the client does
	// not know.
	ServerError
)

var kindNames = [...]string{
	None: "none", Unreachable: "unreachable", Refused: "refused", Conflict: "conflict", Forbidden: "forbidden",
	UnknownTarget: "unknown_target", NotMember: "not_member", NotMaster: "not_master", Busy: "busy",
	Unavailable: "unavailable", ServerError: "server_error",
}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// RetryAfterHeader is an HTTP answer's Retry-After in seconds, the form
// our nodes send (zero when absent, negative or a date).
func RetryAfterHeader(h http.Header) time.Duration {
	secs, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || secs < 0 {
		return 0
	}
	return time.Duration(secs) * time.Second
}

// RetryAfterOf is the Retry-After of a call's error answer (zero when
// err is no *CallError or the answer had none).
func RetryAfterOf(err error) time.Duration {
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.RetryAfter
	}
	return 0
}

// Misdirected reports whether err is a callee's refusal of a call made for
// another node (421 misdirected): the address reaches another node now.
func Misdirected(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.Code == messages.CodeMisdirected
}

// KindOf is the kind of a call's error: a *CallError's Kind, None for
// nil, Unreachable for anything else (the call did not complete).
func KindOf(err error) Kind {
	var ce *CallError
	switch {
	case err == nil:
		return None
	case errors.As(err, &ce):
		return ce.Kind
	}
	return Unreachable
}
