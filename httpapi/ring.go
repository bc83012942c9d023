package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchboard-dev/switchboard/messages"
)

// Paths of the ring API (docs/ring.md). join, poll and leave are
// instance to instance inside one site (ringMember): with mutual TLS they
// authenticate like the federation API (X-Federation-Node = the
// certificate's name, which for an instance of our own site is our own
// --name); without it, by an admin's API token as well. status is an
// operator call under the API token.
const (
	pathRingJoin   = "/api/ring/join"
	pathRingPoll   = "/api/ring/poll"
	pathRingLeave  = "/api/ring/leave"
	pathRingStatus = "/api/ring/status"
)

// RingBackend is the node's ring coordinator as the gateway sees it. from
// is the caller's authenticated X-Federation-Node; the backend refuses a
// caller that is not of its own site (ring_node_mismatch).
type RingBackend interface {
	// RingJoin admits a slave and answers the current assignment, or
	// refuses it (ring_* codes).
	RingJoin(ctx context.Context, from string, j messages.RingJoin) (messages.RingAssignment, error)
	// RingPoll is the slave's subscription: it answers when an assignment
	// newer than p.Epoch is published, or after min(p.WaitMs, the publish
	// interval) with the current one. ctx ends when the caller goes away.
	RingPoll(ctx context.Context, from string, p messages.RingPoll) (messages.RingAssignment, error)
	// RingLeave removes a slave at once (graceful stop).
	RingLeave(ctx context.Context, from string, l messages.RingLeave) error
	// RingStatus is GET /api/ring/status.
	RingStatus(ctx context.Context) (messages.RingStatus, error)
}

// maxRingWait bounds how long a poll may be held (a slave asking for more
// gets this); the publish interval is normally far below it.
const maxRingWait = 10 * time.Minute

// ringRoutes adds the ring API when the node has a ring.
func (s *Server) ringRoutes(r *mux.Router) {
	ring := s.cfg.Ring
	if ring == nil {
		return
	}
	s.guarded(r, pathRingStatus, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := s.ctx(r)
		defer cancel()
		st, err := ring.RingStatus(ctx)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if st.Members == nil {
			st.Members = []messages.RingMember{}
		}
		writeJSON(w, http.StatusOK, st)
	}), http.MethodGet, readers)
	r.Handle(pathRingJoin, s.ringMember(func(w http.ResponseWriter, r *http.Request, from string) {
		var j messages.RingJoin
		if err := decodePeer(w, r, &j); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := j.Validate(); err != nil {
			s.fail(w, r, err)
			return
		}
		if j.Node != from {
			s.refuse(w, r, from, mismatch("node", j.Node, from))
			return
		}
		ctx, cancel := s.ctx(r)
		defer cancel()
		a, err := ring.RingJoin(ctx, from, j)
		if err != nil {
			s.fail(w, r, err) // the coordinator logs the refusals it makes
			return
		}
		writeJSON(w, http.StatusOK, a)
	})).Methods(http.MethodPost)
	r.Handle(pathRingPoll, s.ringMember(func(w http.ResponseWriter, r *http.Request, from string) {
		var p messages.RingPoll
		if err := decodePeer(w, r, &p); err != nil {
			s.fail(w, r, err)
			return
		}
		if p.InstanceID == "" || p.WaitMs < 0 {
			s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "instance_id is required and wait_ms must not be negative"))
			return
		}
		// Capped as an integer, before the conversion (which would wrap
		// around past 2^63 ns), and for the coordinator too.
		p.WaitMs = min(p.WaitMs, maxRingWait.Milliseconds())
		wait := time.Duration(p.WaitMs) * time.Millisecond
		ctx, cancel := context.WithTimeout(r.Context(), wait+s.cfg.RequestTimeout)
		defer cancel()
		a, err := ring.RingPoll(ctx, from, p)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, a)
	})).Methods(http.MethodPost)
	r.Handle(pathRingLeave, s.ringMember(func(w http.ResponseWriter, r *http.Request, from string) {
		var l messages.RingLeave
		if err := decodePeer(w, r, &l); err != nil {
			s.fail(w, r, err)
			return
		}
		if l.InstanceID == "" {
			s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "instance_id is required"))
			return
		}
		ctx, cancel := s.ctx(r)
		defer cancel()
		if err := ring.RingLeave(ctx, from, l); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})).Methods(http.MethodPost)
}

// ringMemberPath reports whether path is a member's call to its master
// (the calls RingToken is sent on).
func ringMemberPath(path string) bool {
	return path == pathRingJoin || path == pathRingPoll || path == pathRingLeave
}

// ringMember authenticates a member's call (join, poll, leave). With
// mutual TLS (--tls-ca) the site's certificate does it (peerAuth). Without
// it X-Federation-Node proves nothing: anyone who knows the site's --name
// could join a member that owns ranges and works none of them, or make the
// master drop a real one. So the call must then carry an admin's API token
// too, as any call that changes the node (the member's peer client sends
// the node's --api-token, RingToken); a node without credentials is open,
// its ring as the rest of its API.
func (s *Server) ringMember(h peerHandler) http.Handler {
	if s.cfg.RequireClientCert {
		return s.peerAuth(h)
	}
	return s.guard(adminOnly, s.peerAuth(h))
}

// ringTarget is the address key of a ring call and the node its
// certificate must name: the master is an instance of our own site, so an
// address that answers as another node is refused before anything is sent.
func (c *PeerClient) ringTarget(ctx context.Context, addr string) (key, want string, err error) {
	key, want, err = c.identified(ctx, addr)
	if err == nil && want != "" && want != c.cfg.Node {
		err = fmt.Errorf("the ring master at %s is node %q, not an instance of this site %q", addr, want, c.cfg.Node)
	}
	return key, want, err
}

// RingJoin implements transport.Ring.
func (c *PeerClient) RingJoin(ctx context.Context, addr string, j messages.RingJoin) (messages.RingAssignment, error) {
	key, want, err := c.ringTarget(ctx, addr)
	if err != nil {
		return messages.RingAssignment{}, err
	}
	var out messages.RingAssignment
	err = c.callWithin(ctx, c.cfg.Timeout, key, "", want, pathRingJoin, j, &out)
	return out, err
}

// RingPoll implements transport.Ring: the call may take p.WaitMs, plus
// the usual --http-timeout for the answer to come back.
func (c *PeerClient) RingPoll(ctx context.Context, addr string, p messages.RingPoll) (messages.RingAssignment, error) {
	key, want, err := c.ringTarget(ctx, addr)
	if err != nil {
		return messages.RingAssignment{}, err
	}
	var out messages.RingAssignment
	err = c.callWithin(ctx, time.Duration(p.WaitMs)*time.Millisecond+c.cfg.Timeout, key, "", want, pathRingPoll, p, &out)
	return out, err
}

// RingLeave implements transport.Ring.
func (c *PeerClient) RingLeave(ctx context.Context, addr string, l messages.RingLeave) error {
	key, want, err := c.ringTarget(ctx, addr)
	if err != nil {
		return err
	}
	return c.callWithin(ctx, c.cfg.Timeout, key, "", want, pathRingLeave, l, nil)
}
