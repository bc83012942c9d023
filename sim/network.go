package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
)

// The calls of the federation protocol, as Link.Only names them (the
// names peer.Redirect gives them).
const (
	OpIdentity = peer.CallIdentity
	OpHealth   = peer.CallHealth
	OpRegistry = peer.CallRegistry
	OpForward  = peer.CallForward
	OpStatus   = peer.CallStatus
	// The ring calls of a multi-instance site (slave -> master).
	OpRingJoin  = "ring_join"
	OpRingPoll  = "ring_poll"
	OpRingLeave = "ring_leave"
	// OpRing, as Link.Only, names the three ring calls at once.
	OpRing = "ring"
)

// Link is the fault state of one direction between two nodes. The zero
// Link is a perfect wire.
type Link struct {
	// Cut: every call fails as a refused connection, without reaching the
	// callee.
	Cut bool
	// Delay is added before every call reaches the callee.
	Delay time.Duration
	// Drop is the probability that a call is lost on the way (it fails
	// without reaching the callee).
	Drop float64
	// Duplicate is the probability that a call reaches the callee twice;
	// the caller sees the second answer.
	Duplicate float64
	// LoseAnswer is the probability that a call reaches the callee and runs
	// there, but its answer never comes back (the caller sees an error).
	LoseAnswer float64
	// Only, when set, limits Drop, Duplicate and LoseAnswer to one kind of
	// call (OpForward, ..., or OpRing for every ring call). Cut and Delay
	// apply to every call.
	Only string
}

func (l Link) zero() bool { return l == Link{} }

// NetStats counts what the network did.
type NetStats struct {
	Calls, Refused, Dropped, Duplicated, AnswersLost, CrashedAfterCommit int64
}

// Network is the in-memory network between the sim's nodes: each node's
// Config.Transport is one of its endpoints, and a call goes straight to the
// callee's *switchboard.Node methods, through the same validation and
// error statuses as the HTTPS gateway would apply. Faults are per
// direction. Its randomness comes from one seeded source.
//
// A node (a site) may have several instances, each with an address of its
// own: links, slowness and armed crashes are per site (the instances of
// one site share a link), the running node and the address per instance.
// A site's instances call each other (the ring calls) over the link from
// the site to itself.
type Network struct {
	mu      sync.Mutex
	rng     *rand.Rand
	links   map[[2]string]Link
	slow    map[string]time.Duration
	nodes   map[string]*switchboard.Node // instance -> running node (absent when down)
	addrs   map[string]string            // address -> instance
	site    map[string]string            // instance -> its site's name
	armed   map[string]func(string)      // site -> crash (of the instance) to run after its next forward commit
	timeout time.Duration
	stats   NetStats
}

// NewNetwork returns a network whose random faults come from seed; every
// call is bounded by timeout (the nodes' --http-timeout).
func NewNetwork(seed int64, timeout time.Duration) *Network {
	return &Network{
		rng: rand.New(rand.NewSource(seed)), links: map[[2]string]Link{}, slow: map[string]time.Duration{},
		nodes: map[string]*switchboard.Node{}, addrs: map[string]string{}, site: map[string]string{}, armed: map[string]func(string){},
		timeout: timeout,
	}
}

// Address registers the single instance of site name at addr (its peers'
// --peers entry).
func (w *Network) Address(name, addr string) { w.AddInstance(name, name, addr) }

// AddInstance registers instance of site at addr.
func (w *Network) AddInstance(site, instance, addr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.addrs[addr] = instance
	w.site[instance] = site
}

// Attach makes n answer as instance name (nil: it is down, calls are
// refused).
func (w *Network) Attach(name string, n *switchboard.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n == nil {
		delete(w.nodes, name)
		return
	}
	w.nodes[name] = n
}

// SetLink replaces the faults of the direction from -> to.
func (w *Network) SetLink(from, to string, l Link) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.zero() {
		delete(w.links, [2]string{from, to})
		return
	}
	w.links[[2]string{from, to}] = l
}

// UpdateLink changes the faults of from -> to with f.
func (w *Network) UpdateLink(from, to string, f func(*Link)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.links[[2]string{from, to}]
	f(&l)
	if l.zero() {
		delete(w.links, [2]string{from, to})
		return
	}
	w.links[[2]string{from, to}] = l
}

// SetSlow delays every call to name by d (0 ends it).
func (w *Network) SetSlow(name string, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d <= 0 {
		delete(w.slow, name)
		return
	}
	w.slow[name] = d
}

// ArmCrash runs crash after the next forward call that an instance of
// site name commits, before its answer leaves (crash gets the instance):
// the caller gets an error.
func (w *Network) ArmCrash(name string, crash func(instance string)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed[name] = crash
}

// Armed is how many armed crashes have not fired yet.
func (w *Network) Armed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.armed)
}

// HealAll ends every link fault, slow node and armed crash.
func (w *Network) HealAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.links = map[[2]string]Link{}
	w.slow = map[string]time.Duration{}
	w.armed = map[string]func(string){}
}

// Stats returns the counters so far.
func (w *Network) Stats() NetStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Endpoint is the transport of instance from (one incarnation of it:
// after Kill, its calls fail, as a crashed process makes none). Its calls
// name the instance's site as their caller.
func (w *Network) Endpoint(from string) *Endpoint {
	w.mu.Lock()
	site := w.site[from]
	w.mu.Unlock()
	if site == "" {
		site = from
	}
	return &Endpoint{from: site, instance: from, net: w}
}

// plan is what the network does with one call.
type plan struct {
	callee                  *switchboard.Node
	to                      string
	delay                   time.Duration
	refuse, drop, dup, lose bool
	together                bool // the duplicate runs at the same time as the original
	crash                   func()
	timeout                 time.Duration // 0: the network's
}

func (w *Network) plan(from, addr, op string) plan {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Calls++
	inst, ok := w.addrs[addr]
	if !ok {
		w.stats.Refused++
		return plan{refuse: true}
	}
	to := w.site[inst]
	l := w.links[[2]string{from, to}]
	p := plan{to: to, delay: l.Delay + w.slow[to], callee: w.nodes[inst]}
	applies := l.Only == "" || l.Only == op || (l.Only == OpRing && ringOp(op))
	// Draw every number every time, so that the sequence of draws does
	// not depend on which faults happen to be set.
	d, u, x, y := w.rng.Float64(), w.rng.Float64(), w.rng.Float64(), w.rng.Float64()
	switch {
	case l.Cut || p.callee == nil:
		p.refuse = true
		w.stats.Refused++
	case applies && d < l.Drop:
		p.drop = true
		w.stats.Dropped++
	default:
		p.dup = applies && u < l.Duplicate
		p.lose = applies && x < l.LoseAnswer
		if p.dup {
			w.stats.Duplicated++
			p.together = y < 0.5
		}
		if p.lose {
			w.stats.AnswersLost++
		}
		if op == OpForward {
			if c, ok := w.armed[to]; ok {
				delete(w.armed, to)
				p.crash = func() { c(inst) }
				w.stats.CrashedAfterCommit++
			}
		}
	}
	return p
}

// Errors the caller sees for calls that did not complete; none is a
// *peer.CallError (the peer never answered).
var (
	errRefused  = errors.New("connection refused (sim)")
	errDropped  = errors.New("i/o timeout: request lost (sim)")
	errLost     = errors.New("connection reset: answer lost (sim)")
	errKilled   = errors.New("the calling node crashed (sim)")
	errNotFound = errors.New("no such host (sim)")
)

func ringOp(op string) bool { return op == OpRingJoin || op == OpRingPoll || op == OpRingLeave }

// Endpoint is one instance's peer.Transport (and ring.Transport) on the
// Network.
type Endpoint struct {
	from     string // the site: the caller every call names
	instance string
	net      *Network
	dead     atomic.Bool
}

var (
	_ peer.Transport = (*Endpoint)(nil)
	_ ring.Transport = (*Endpoint)(nil)
)

// Kill ends this incarnation's calls: a crashed node's actors that are
// still winding down must not reach anyone.
func (e *Endpoint) Kill() { e.dead.Store(true) }

// do runs one call: fn is the callee's side (it runs once, twice for a
// duplicate, never when the call is refused or dropped).
func (e *Endpoint) do(ctx context.Context, addr, op string, fn func(ctx context.Context, n *switchboard.Node) error) error {
	if e.dead.Load() {
		return errKilled
	}
	p := e.net.plan(e.from, addr, op)
	if p.to == "" && p.refuse {
		return errNotFound
	}
	timeout := e.net.timeout
	if w, ok := ctx.Value(waitKey{}).(time.Duration); ok {
		timeout += w // a ring poll may be held that long before its answer
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if p.delay > 0 {
		t := time.NewTimer(p.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	switch {
	case p.refuse:
		return errRefused
	case p.drop:
		// A lost request: the caller waits for nothing until its timeout
		// in reality; failing at once keeps the story short.
		return errDropped
	}
	var err error
	switch {
	case p.dup && p.together && (op == OpForward || op == OpStatus):
		// The copy and the original race at the callee (a retry that
		// overtakes a slow original): see racing.
		err = fn(context.WithValue(ctx, togetherKey{}, true), p.callee)
	case p.dup:
		_ = fn(ctx, p.callee)
		err = fn(ctx, p.callee)
	default:
		err = fn(ctx, p.callee)
	}
	if p.crash != nil {
		p.crash()
		return errLost
	}
	if p.lose {
		return errLost
	}
	if e.dead.Load() {
		return errKilled
	}
	return err
}

// togetherKey marks a call whose duplicate runs at the same time.
type togetherKey struct{}

// waitKey carries how long the callee may hold a call (a ring poll's
// wait) on top of the network's timeout, as the peer client allows.
type waitKey struct{}

// racing calls call(in); for a call marked together it also calls it on
// a copy of in at the same time, and answers the second one's result.
func racing[I, O any](ctx context.Context, in I, call func(I) (O, error)) (O, error) {
	if ctx.Value(togetherKey{}) == nil {
		return call(in)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cp, err := wire(in); err == nil {
			_, _ = call(cp)
		}
	}()
	out, err := call(in)
	<-done
	return out, err
}

// wire passes v through JSON, as the HTTPS gateway would: nothing is
// shared between caller and callee.
func wire[T any](v T) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(b, &out)
	return out, err
}

// callError is the *peer.CallError the peer client would return for the
// gateway's answer to err.
func callError(err error) error {
	if err == nil {
		return nil
	}
	var e *messages.Error
	if !errors.As(err, &e) {
		return &peer.CallError{Status: http.StatusInternalServerError, Code: messages.CodeInternal, Message: "internal error"}
	}
	return &peer.CallError{Status: httpapi.StatusOf(e.Code), Code: e.Code, Message: e.Message}
}

func mismatch(got, from string) error {
	return callError(messages.Errorf(messages.CodeNodeMismatch, "node %q is not the caller %q", got, from))
}

// Identity implements peer.Transport.
func (e *Endpoint) Identity(ctx context.Context, addr string) (messages.Identity, error) {
	var out messages.Identity
	err := e.do(ctx, addr, OpIdentity, func(_ context.Context, n *switchboard.Node) error {
		id := n.Identity()
		if id.Capabilities == nil {
			id.Capabilities = []string{}
		}
		var err error
		out, err = wire(id)
		return err
	})
	return out, err
}

// Health implements peer.Transport.
func (e *Endpoint) Health(ctx context.Context, addr string, h messages.Health) (messages.Health, error) {
	return exchange(e, ctx, addr, OpHealth, h, "health", func(d messages.Health) string { return d.Node },
		func(ctx context.Context, n *switchboard.Node, in messages.Health) (messages.Health, error) {
			return n.FederationHealth(ctx, e.from, in)
		})
}

// Registry implements peer.Transport.
func (e *Endpoint) Registry(ctx context.Context, addr string, r messages.Registry) (messages.Registry, error) {
	return exchange(e, ctx, addr, OpRegistry, r, "registry", func(d messages.Registry) string { return d.Node },
		func(ctx context.Context, n *switchboard.Node, in messages.Registry) (messages.Registry, error) {
			ours, err := n.FederationRegistry(ctx, e.from, in)
			if err == nil && ours.Frontends == nil {
				ours.Frontends = []string{}
			}
			return ours, err
		})
}

// exchange is a two-way document exchange (health, registry) as the
// gateway and the peer client make it: the caller's document through JSON
// and validated (a body naming another node than the caller is
// node_mismatch), the callee's answer through JSON and validated.
func exchange[D interface{ Validate() error }](e *Endpoint, ctx context.Context, addr, op string, doc D, what string,
	node func(D) string, call func(context.Context, *switchboard.Node, D) (D, error)) (D, error) {
	var out D
	err := e.do(ctx, addr, op, func(ctx context.Context, n *switchboard.Node) error {
		in, err := wire(doc)
		if err != nil {
			return err
		}
		if err := in.Validate(); err != nil {
			return callError(err)
		}
		if node(in) != e.from {
			return mismatch(node(in), e.from)
		}
		ours, err := call(ctx, n, in)
		if err != nil {
			return callError(err)
		}
		if out, err = wire(ours); err != nil {
			return err
		}
		if err := out.Validate(); err != nil {
			return fmt.Errorf("%s answered an invalid %s document: %v", addr, what, err)
		}
		return nil
	})
	return out, err
}

// Forward implements peer.Transport: the batch form as forward_batch
// (each message validated alone), the single form one call per message
// (a message refusal becomes that message's result, any other refusal
// fails the call), as httpapi's gateway and peer client do.
func (e *Endpoint) Forward(ctx context.Context, addr string, batch bool, fs []messages.Forward) ([]messages.ForwardResult, error) {
	if !batch {
		results := make([]messages.ForwardResult, len(fs))
		for i := range fs {
			r, err := e.Forward(ctx, addr, true, fs[i:i+1])
			if err != nil {
				return nil, err
			}
			if r[0].Error != nil && !messageRefusal(r[0].Error) {
				return nil, callError(r[0].Error)
			}
			results[i] = r[0]
		}
		return results, nil
	}
	var out []messages.ForwardResult
	for lo := 0; lo < len(fs); lo += messages.MaxForwardBatch {
		hi := min(lo+messages.MaxForwardBatch, len(fs))
		var part []messages.ForwardResult
		err := e.do(ctx, addr, OpForward, func(ctx context.Context, n *switchboard.Node) error {
			in, err := wire(fs[lo:hi])
			if err != nil {
				return err
			}
			results := make([]messages.ForwardResult, len(in))
			var valid []messages.Forward
			var at []int
			for i, f := range in {
				if err := f.Validate(); err != nil {
					var me *messages.Error
					if !errors.As(err, &me) {
						me = &messages.Error{Code: messages.CodeInvalidRequest, Message: err.Error()}
					}
					results[i] = messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: f.ID}, Error: me}
					continue
				}
				valid = append(valid, f)
				at = append(at, i)
			}
			if len(valid) > 0 {
				res, err := racing(ctx, valid, func(v []messages.Forward) ([]messages.ForwardResult, error) {
					return n.FederationForward(ctx, e.from, v)
				})
				if err == nil && len(res) != len(valid) {
					err = fmt.Errorf("backend answered %d results for %d forwards", len(res), len(valid))
				}
				if err != nil {
					return callError(err)
				}
				for j, i := range at {
					results[i] = res[j]
				}
			}
			part, err = wire(results)
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
	}
	return out, nil
}

// messageRefusal reports whether a single-form refusal is about the
// message (permanent, not a refusal of the caller), as the peer client
// decides.
func messageRefusal(e *messages.Error) bool {
	var ce *peer.CallError
	if !errors.As(callError(e), &ce) || !ce.Permanent() {
		return false
	}
	switch ce.Code {
	case messages.CodeFederationOff, messages.CodeUnknownPeer, messages.CodeNodeMismatch,
		messages.CodeClientCertReq, messages.CodeUnauthorized, messages.CodeNotFound, messages.CodeMethodNotAllow:
		return false
	}
	return true
}

// Status implements peer.Transport (batch or one call per report; any
// refusal fails the whole call).
func (e *Endpoint) Status(ctx context.Context, addr string, batch bool, rs []messages.StatusReport) ([]messages.StatusReply, error) {
	if !batch {
		out := make([]messages.StatusReply, 0, len(rs))
		for i := range rs {
			r, err := e.Status(ctx, addr, true, rs[i:i+1])
			if err != nil {
				return nil, err
			}
			out = append(out, r...)
		}
		return out, nil
	}
	var out []messages.StatusReply
	for lo := 0; lo < len(rs); lo += messages.MaxStatusBatch {
		hi := min(lo+messages.MaxStatusBatch, len(rs))
		var part []messages.StatusReply
		err := e.do(ctx, addr, OpStatus, func(ctx context.Context, n *switchboard.Node) error {
			in, err := wire(rs[lo:hi])
			if err != nil {
				return err
			}
			for _, rep := range in {
				if err := rep.Validate(); err != nil {
					return callError(err)
				}
				if rep.Node != e.from {
					return mismatch(rep.Node, e.from)
				}
			}
			res, err := racing(ctx, in, func(v []messages.StatusReport) ([]messages.StatusReply, error) {
				return n.FederationStatus(ctx, e.from, v)
			})
			if err == nil && len(res) != len(in) {
				err = fmt.Errorf("backend answered %d results for %d reports", len(res), len(in))
			}
			if err != nil {
				return callError(err)
			}
			part, err = wire(res)
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
	}
	return out, nil
}

// RingJoin implements ring.Transport: the join document through JSON and
// validated, refused as node_mismatch when it names another site than the
// caller's, as httpapi's gateway does.
func (e *Endpoint) RingJoin(ctx context.Context, addr string, j messages.RingJoin) (messages.RingAssignment, error) {
	var out messages.RingAssignment
	err := e.do(ctx, addr, OpRingJoin, func(ctx context.Context, n *switchboard.Node) error {
		in, err := wire(j)
		if err != nil {
			return err
		}
		if err := in.Validate(); err != nil {
			return callError(err)
		}
		if in.Node != e.from {
			return mismatch(in.Node, e.from)
		}
		a, err := n.RingJoin(ctx, e.from, in)
		if err != nil {
			return callError(err)
		}
		out, err = wire(a)
		return err
	})
	return out, err
}

// RingPoll implements ring.Transport: the call may be held p.WaitMs
// before its answer, plus the network's timeout.
func (e *Endpoint) RingPoll(ctx context.Context, addr string, p messages.RingPoll) (messages.RingAssignment, error) {
	var out messages.RingAssignment
	ctx = context.WithValue(ctx, waitKey{}, time.Duration(max(0, p.WaitMs))*time.Millisecond)
	err := e.do(ctx, addr, OpRingPoll, func(ctx context.Context, n *switchboard.Node) error {
		in, err := wire(p)
		if err != nil {
			return err
		}
		if in.InstanceID == "" || in.WaitMs < 0 {
			return callError(messages.Errorf(messages.CodeInvalidRequest, "instance_id is required and wait_ms must not be negative"))
		}
		a, err := n.RingPoll(ctx, e.from, in)
		if err != nil {
			return callError(err)
		}
		out, err = wire(a)
		return err
	})
	return out, err
}

// RingLeave implements ring.Transport.
func (e *Endpoint) RingLeave(ctx context.Context, addr string, l messages.RingLeave) error {
	return e.do(ctx, addr, OpRingLeave, func(ctx context.Context, n *switchboard.Node) error {
		in, err := wire(l)
		if err != nil {
			return err
		}
		if in.InstanceID == "" {
			return callError(messages.Errorf(messages.CodeInvalidRequest, "instance_id is required"))
		}
		return callError(n.RingLeave(ctx, e.from, in))
	})
}
