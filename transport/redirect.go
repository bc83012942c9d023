package transport

import (
	"context"

	"github.com/switchboard-dev/switchboard/messages"
)

// Calls a Redirect names to its Resolve.
const (
	CallIdentity = "identity"
	CallHealth   = "health"
	CallRegistry = "registry"
	CallForward  = "forward"
	CallStatus   = "status"
)

// Redirect is a Peer transport that passes every call to Inner at the address
// Resolve gives for it (for the same node). Tests and the benchmark name peers by symbolic
// addresses before their listeners' ports are known, and cut a link by
// failing Resolve (the call then fails before it leaves, as a refused
// connection does). call is one of the Call* names.
type Redirect struct {
	Inner   Peer
	Resolve func(call, addr string) (string, error)
}

var _ Peer = Redirect{}

// Identity implements Peer.
func (r Redirect) Identity(ctx context.Context, addr string) (messages.Identity, error) {
	real, err := r.Resolve(CallIdentity, addr)
	if err != nil {
		return messages.Identity{}, err
	}
	return r.Inner.Identity(ctx, real)
}

// Health implements Peer.
func (r Redirect) Health(ctx context.Context, to Target, h messages.Health) (messages.Health, error) {
	real, err := r.Resolve(CallHealth, to.Addr)
	if err != nil {
		return messages.Health{}, err
	}
	return r.Inner.Health(ctx, Target{Node: to.Node, Addr: real}, h)
}

// Registry implements Peer.
func (r Redirect) Registry(ctx context.Context, to Target, reg messages.Registry) (messages.Registry, error) {
	real, err := r.Resolve(CallRegistry, to.Addr)
	if err != nil {
		return messages.Registry{}, err
	}
	return r.Inner.Registry(ctx, Target{Node: to.Node, Addr: real}, reg)
}

// Forward implements Peer.
func (r Redirect) Forward(ctx context.Context, to Target, batch bool, fs []messages.Forward) ([]messages.ForwardResult, error) {
	real, err := r.Resolve(CallForward, to.Addr)
	if err != nil {
		return nil, err
	}
	return r.Inner.Forward(ctx, Target{Node: to.Node, Addr: real}, batch, fs)
}

// Status implements Peer.
func (r Redirect) Status(ctx context.Context, to Target, batch bool, rs []messages.StatusReport) ([]messages.StatusReply, error) {
	real, err := r.Resolve(CallStatus, to.Addr)
	if err != nil {
		return nil, err
	}
	return r.Inner.Status(ctx, Target{Node: to.Node, Addr: real}, batch, rs)
}
