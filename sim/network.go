package sim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/transport"
)

// The calls of the federation protocol, as Link.Only names them (the
// names transport.Redirect gives them).
const (
	OpIdentity = transport.CallIdentity
	OpHealth   = transport.CallHealth
	OpRegistry = transport.CallRegistry
	OpForward  = transport.CallForward
	OpStatus   = transport.CallStatus
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

// Network is the in-memory network between the sim's nodes. Every node
// serves its real HTTPS API (httpapi's server, the node's TLS) on an
// in-memory listener and calls its peers with the real peer client over
// connections the network dials (Config.Listener, Config.Dial): what a
// call meets on the way is the production gateway, not a restatement of
// it. Faults are injected at that seam, per direction:
//
//   - at the dial: a cut link, a callee that is down or an unknown
//     address refuse the connection;
//   - per request, by the interceptor in front of the callee's API
//     (Config.Intercept), which knows the caller from the request's
//     X-Federation-Node header: a cut link aborts the request unrun
//     (keep-alive connections opened before the cut), a delay or a slow
//     callee holds it, a dropped request is held until the caller gives
//     up and never runs, a duplicated one runs twice (one after the other
//     or both at once), a lost answer runs and its connection is reset,
//     an armed crash runs the forward and crashes the callee before the
//     answer leaves.
//
// A crashed incarnation's connections are all closed (Endpoint.Kill).
// Its randomness comes from one seeded source, drawn in the order the
// requests reach the interceptors.
//
// A node (a site) may have several instances, each with an address of its
// own: links, slowness and armed crashes are per site (the instances of
// one site share a link), the listener and the address per instance.
// A site's instances call each other (the ring calls) over the link from
// the site to itself.
type Network struct {
	mu    sync.Mutex
	rng   *rand.Rand
	links map[[2]string]Link
	slow  map[string]time.Duration
	lns   map[string]*listener // instance -> its running incarnation's listener (absent when down)
	addrs map[string]string    // address -> instance
	site  map[string]string    // instance -> its site's name
	armed map[string]func(string)
	// drains are the restarts armed for the next forward a site makes
	// (by caller site).
	drains  map[string]drain
	timeout time.Duration
	stats   NetStats
}

// NewNetwork returns a network whose random faults come from seed; a
// dropped request is held at most timeout (longer than the callers'
// --http-timeout: they give up first).
func NewNetwork(seed int64, timeout time.Duration) *Network {
	return &Network{
		rng: rand.New(rand.NewSource(seed)), links: map[[2]string]Link{}, slow: map[string]time.Duration{},
		lns: map[string]*listener{}, addrs: map[string]string{}, site: map[string]string{}, armed: map[string]func(string){},
		drains: map[string]drain{}, timeout: timeout,
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

// drain is a restart armed for a site's next forward call.
type drain struct {
	// abrupt: restart runs once the callee committed the call, and its
	// answer is lost; else restart starts as the callee gets the call.
	abrupt  bool
	restart func()
}

// ArmDrainRestart runs restart during the next forward call that site
// name makes (the drain of its queue, after a heal): abrupt, once the
// callee committed it, the answer lost; else as the callee starts on it.
func (w *Network) ArmDrainRestart(name string, abrupt bool, restart func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drains[name] = drain{abrupt: abrupt, restart: restart}
}

// Armed is how many armed crashes and drain restarts have not fired yet.
func (w *Network) Armed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.armed) + len(w.drains)
}

// HealAll ends every link fault, slow node and armed crash.
func (w *Network) HealAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.links = map[[2]string]Link{}
	w.slow = map[string]time.Duration{}
	w.armed = map[string]func(string){}
	w.drains = map[string]drain{}
}

// Stats returns the counters so far.
func (w *Network) Stats() NetStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Errors of dials that found no one.
var (
	errRefused  = errors.New("connection refused (sim)")
	errKilled   = errors.New("the calling node crashed (sim)")
	errNotFound = errors.New("no such host (sim)")
)

// Endpoint is one incarnation of an instance on the Network: its
// listener (Config.Listener), its dialer (Config.Dial) and the
// interceptor in front of its API (Config.Intercept). After Kill its
// connections are closed and it dials no more, as a crashed process.
type Endpoint struct {
	site     string
	instance string
	addr     string
	net      *Network
	ln       *listener
	dead     atomic.Bool
	// label names the incarnation to those it calls (their
	// RemoteAddr); "" is its address.
	label string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	// paused holds the requests to the incarnation and its dials while it
	// is paused (PauseMaster).
	paused freeze
}

// Endpoint returns a new incarnation of instance, listening at its
// address; it is reachable once Attach runs.
func (w *Network) Endpoint(instance string) *Endpoint {
	w.mu.Lock()
	defer w.mu.Unlock()
	site := w.site[instance]
	if site == "" {
		site = instance
	}
	addr := ""
	for a, in := range w.addrs {
		if in == instance {
			addr = a
		}
	}
	e := &Endpoint{site: site, instance: instance, addr: addr, net: w, conns: map[net.Conn]struct{}{}}
	e.ln = newListener(addr, e)
	return e
}

// Listener is the incarnation's listener (Config.Listener).
func (e *Endpoint) Listener() net.Listener { return e.ln }

// Attach makes the incarnation reachable at its address.
func (e *Endpoint) Attach() {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.net.lns[e.instance] = e.ln
}

// Detach makes the incarnation unreachable: new connections to it are
// refused (those open stay until it closes them).
func (e *Endpoint) Detach() {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.net.lns[e.instance] == e.ln {
		delete(e.net.lns, e.instance)
	}
}

// Kill detaches the incarnation and closes every connection it opened or
// accepted: a crashed process's sockets die with it.
func (e *Endpoint) Kill() {
	e.dead.Store(true)
	e.paused.end()
	e.Detach()
	e.ln.Close()
	e.mu.Lock()
	conns := e.conns
	e.conns = map[net.Conn]struct{}{}
	e.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// track adds c to the incarnation's connections (false: it is dead, c
// is closed).
func (e *Endpoint) track(c net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dead.Load() {
		c.Close()
		return false
	}
	e.conns[c] = struct{}{}
	return true
}

func (e *Endpoint) untrack(c net.Conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.conns, c)
}

// Dial is the incarnation's dialer (Config.Dial): an in-memory
// connection to the listener of the instance at addr.
func (e *Endpoint) Dial(ctx context.Context, _, addr string) (net.Conn, error) {
	if !e.paused.wait(ctx) {
		return nil, ctx.Err()
	}
	if e.dead.Load() {
		return nil, errKilled
	}
	w := e.net
	w.mu.Lock()
	inst, ok := w.addrs[addr]
	if !ok {
		w.mu.Unlock()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errNotFound}
	}
	ln := w.lns[inst]
	cut := w.links[[2]string{e.site, w.site[inst]}].Cut
	if ln == nil || cut {
		w.stats.Refused++
		w.mu.Unlock()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errRefused}
	}
	w.mu.Unlock()
	client, server := net.Pipe()
	from := e.label
	if from == "" {
		from = e.addr
	}
	cc, sc := &conn{Conn: client, ep: e, local: from, remote: addr}, &conn{Conn: server, ep: ln.ep, local: addr, remote: from}
	if !e.track(cc) {
		server.Close()
		return nil, errKilled
	}
	if !ln.ep.track(sc) {
		cc.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errRefused}
	}
	select {
	case ln.ch <- sc:
		return cc, nil
	case <-ln.done:
	case <-ctx.Done():
	}
	cc.Close()
	sc.Close()
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errRefused}
}

// conn is one end of an in-memory connection, tracked by its
// incarnation.
type conn struct {
	net.Conn
	ep            *Endpoint
	local, remote string
	once          sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() { c.ep.untrack(c) })
	return c.Conn.Close()
}

func (c *conn) LocalAddr() net.Addr  { return simAddr(c.local) }
func (c *conn) RemoteAddr() net.Addr { return simAddr(c.remote) }

// simAddr is an address on the sim network.
type simAddr string

func (simAddr) Network() string  { return "sim" }
func (a simAddr) String() string { return string(a) }

// listener is an incarnation's in-memory listener.
type listener struct {
	addr string
	ep   *Endpoint
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newListener(addr string, ep *Endpoint) *listener {
	return &listener{addr: addr, ep: ep, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *listener) Addr() net.Addr { return simAddr(l.addr) }

// plan is what the network does with one request.
type plan struct {
	delay                   time.Duration
	refuse, drop, dup, lose bool
	together                bool // the duplicate runs at the same time as the original
	crash                   func()
	drain                   drain // the caller restarts (restart nil: not)
}

func (w *Network) plan(from, to, inst, op string) plan {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Calls++
	l := w.links[[2]string{from, to}]
	p := plan{delay: l.Delay + w.slow[to]}
	applies := l.Only == "" || l.Only == op || (l.Only == OpRing && ringOp(op))
	// Draw every number every time, so that the sequence of draws does
	// not depend on which faults happen to be set.
	d, u, x, y := w.rng.Float64(), w.rng.Float64(), w.rng.Float64(), w.rng.Float64()
	switch {
	case l.Cut:
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
			if d, ok := w.drains[from]; ok && from != to {
				delete(w.drains, from)
				p.drain = d
			}
		}
	}
	return p
}

func ringOp(op string) bool { return op == OpRingJoin || op == OpRingPoll || op == OpRingLeave }

// opOf names the call of a request path ("" for anything but the
// federation and ring calls).
func opOf(path string) string {
	switch path {
	case "/api/federation/identity":
		return OpIdentity
	case "/api/federation/health":
		return OpHealth
	case "/api/federation/registry":
		return OpRegistry
	case "/api/federation/forward", "/api/federation/forward_batch":
		return OpForward
	case "/api/federation/delivery_status", "/api/federation/delivery_status_batch":
		return OpStatus
	case "/api/ring/join":
		return OpRingJoin
	case "/api/ring/poll":
		return OpRingPoll
	case "/api/ring/leave":
		return OpRingLeave
	}
	return ""
}

// Intercept is the incarnation's request faults (Config.Intercept): in
// front of the real API, for federation and ring calls, by the link from
// the caller's site (its X-Federation-Node header, which the peer client
// sets on every call, identity calls included; a request without one is
// taken as its caller's by the address it comes from).
func (e *Endpoint) Intercept(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := opOf(r.URL.Path)
		if op == "" {
			if !e.paused.wait(r.Context()) {
				panic(http.ErrAbortHandler) // the caller gave up on a paused process
			}
			api.ServeHTTP(w, r)
			return
		}
		from := r.Header.Get(messages.FederationHeader)
		if from == "" {
			from = e.net.siteAt(r.RemoteAddr)
		}
		// The body is read first: once it is, the server notices the
		// caller hanging up (its request's context ends), so a held
		// request ends with its caller or its server.
		body, err := io.ReadAll(r.Body)
		if err != nil || !e.paused.wait(r.Context()) {
			panic(http.ErrAbortHandler) // or the caller gave up on a paused process
		}
		p := e.net.plan(from, e.site, e.instance, op)
		if p.delay > 0 && !e.sleep(r.Context(), p.delay) {
			panic(http.ErrAbortHandler)
		}
		switch {
		case p.refuse:
			panic(http.ErrAbortHandler)
		case p.drop:
			// A lost request: the caller waits for nothing until it
			// gives up (virtual time: the wait costs nothing).
			e.sleep(r.Context(), e.net.timeout)
			panic(http.ErrAbortHandler)
		}
		again := func() *http.Request {
			c := r.Clone(r.Context())
			c.Body = io.NopCloser(bytes.NewReader(body))
			return c
		}
		switch {
		case p.dup && p.together:
			// The copy and the original race at the callee (a retry that
			// overtakes a slow original).
			done := make(chan struct{})
			go func() {
				defer close(done)
				api.ServeHTTP(httptest.NewRecorder(), again())
			}()
			defer func() { <-done }()
		case p.dup:
			api.ServeHTTP(httptest.NewRecorder(), again())
		}
		if p.drain.restart != nil && !p.drain.abrupt {
			// The caller stops while the callee runs its call.
			go p.drain.restart()
		}
		if p.crash == nil && !p.lose && !p.drain.abrupt {
			api.ServeHTTP(w, again())
			return
		}
		api.ServeHTTP(httptest.NewRecorder(), again())
		if p.drain.abrupt {
			// The caller dies with the call committed and unanswered.
			go p.drain.restart()
		}
		if p.crash != nil {
			// The callee dies before its answer leaves; the crash stops
			// this server, which waits for this handler: it runs apart.
			go p.crash()
		}
		panic(http.ErrAbortHandler)
	})
}

// siteAt is the site of the instance at addr ("" when none).
func (w *Network) siteAt(addr string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.site[w.addrs[addr]]
}

// sleep waits d, or until ctx ends or the incarnation dies (false).
func (e *Endpoint) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-e.ln.done:
		return false
	}
}
