package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/transport"
)

// Federation timing of the bench pair: health every 200ms so that a heal
// is noticed within a few hundred milliseconds (a callee that hears from a
// peer it does not consider healthy also checks it back at once), and a
// forward wait long enough that nothing queued during a fill of 100,000
// messages turns forward_failed (1s x 3600 = one hour).
const (
	fedHealthInterval   = 200 * time.Millisecond
	fedRegistryInterval = 200 * time.Millisecond
	fedRetryInterval    = time.Second
	fedMaxRetries       = 3600
	fedHTTPTimeout      = 5 * time.Second
)

// Node names of the pair and the symbolic addresses they know each other
// by (the real ports are known only once the nodes listen).
const (
	nodeA = "bench-a"
	nodeB = "bench-b"
)

func symbolicAddr(node string) string { return node + ".bench:1" }

// fedLink is the network between the two bench nodes: it maps a symbolic
// address to the node's real HTTPS listener, and can be cut. Every peer
// call still goes through the real HTTPS peer client (TLS, keep-alive
// HTTP/1.1, the federation API, the peer's commits); while cut, a call
// fails before it leaves, as a refused connection does, in both
// directions.
type fedLink struct {
	mu    sync.Mutex
	addrs map[string]string
	cut   atomic.Bool
	// refused counts the calls the cut refused.
	refused atomic.Int64
}

func newFedLink() *fedLink { return &fedLink{addrs: map[string]string{}} }

func (l *fedLink) set(node, real string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.addrs[symbolicAddr(node)] = real
}

func (l *fedLink) resolve(addr string) (string, error) {
	if l.cut.Load() {
		l.refused.Add(1)
		return "", &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("%s: %w (link cut by the bench)", addr, syscall.ECONNREFUSED)}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	real, ok := l.addrs[addr]
	if !ok {
		return "", &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("%s: no such host", addr)}
	}
	return real, nil
}

// fedPair is node A (the clients submit to it) and node B (serves the
// bench pull frontend), federated over HTTPS, each with its own embedded
// SQLite store.
type fedPair struct {
	link    *fedLink
	a, b    *benchNode
	clients []*httpapi.PeerClient
	// submit is the submitting clients' client of A.
	submit *apiclient.Client
}

func fedConfig(link *fedLink, name, other, dir string) (switchboard.Config, *httpapi.PeerClient, error) {
	cfg := nodeConfig(name, dir)
	cfg.Federation = true
	cfg.InsecureSkipVerify = true
	cfg.Peers = []string{symbolicAddr(other)}
	cfg.HealthInterval = fedHealthInterval
	cfg.RegistryInterval = fedRegistryInterval
	cfg.ForwardRetryInterval = fedRetryInterval
	cfg.ForwardMaxRetries = fedMaxRetries
	cfg.HTTPTimeout = fedHTTPTimeout
	pc := httpapi.DefaultPeerClientConfig()
	pc.Node, pc.InsecureSkipVerify, pc.Timeout = name, true, fedHTTPTimeout
	client, err := httpapi.NewPeerClient(pc)
	if err != nil {
		return cfg, nil, err
	}
	// The real HTTPS peer client (certificates not verified: the bench
	// nodes serve self-signed ones) behind the link.
	cfg.Transport = transport.Redirect{Inner: client, Resolve: func(_, addr string) (string, error) { return link.resolve(addr) }}
	return cfg, client, nil
}

// startPair starts A and B, registers the pull frontend on B, waits until
// A sees B healthy and routes the bench prefix to B's frontend.
// clientConns is the size of the submitters' connection pool to A.
func startPair(dir string, clientConns, consumers int) (p *fedPair, err error) {
	p = &fedPair{link: newFedLink()}
	defer func() {
		if err != nil {
			p.close()
			p = nil
		}
	}()
	for _, n := range []struct {
		name, other string
		node        **benchNode
		conns       int
	}{{nodeA, nodeB, &p.a, clientConns}, {nodeB, nodeA, &p.b, consumers}} {
		cfg, pc, err := fedConfig(p.link, n.name, n.other, filepath.Join(dir, n.name))
		if err != nil {
			return p, err
		}
		p.clients = append(p.clients, pc)
		if *n.node, err = startNodeConfig(cfg, n.conns); err != nil {
			return p, fmt.Errorf("start %s: %w", n.name, err)
		}
		p.link.set(n.name, (*n.node).node.Addr())
	}
	p.submit = p.a.api
	if err := p.b.pullFrontend(); err != nil {
		return p, err
	}
	if _, err := p.waitPeer(messages.PeerHealthy, 30*time.Second); err != nil {
		return p, err
	}
	// The route is accepted once A has learned that B serves the frontend.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := p.a.route()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("route on %s: %w", nodeA, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p, nil
}

// peerState is B as A's GET /api/peers lists it.
func (p *fedPair) peerState() (messages.PeerInfo, error) {
	var peers []messages.PeerInfo
	if err := send(p.a.api, http.MethodGet, "/api/peers", nil, &peers); err != nil {
		return messages.PeerInfo{}, err
	}
	for _, pi := range peers {
		if pi.Node == nodeB {
			return pi, nil
		}
	}
	return messages.PeerInfo{}, fmt.Errorf("%s does not list %s", nodeA, nodeB)
}

// waitPeer waits until A sees B in state, polling every 10ms; it returns
// when it saw it.
func (p *fedPair) waitPeer(state messages.PeerState, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		pi, err := p.peerState()
		if err == nil && pi.State == state {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("peer %s is %s (%s)", nodeB, pi.State, pi.LastError)
			}
			return time.Time{}, fmt.Errorf("waiting for %s to see %s %s: %w", nodeA, nodeB, state, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *fedPair) close() error {
	var errs []error
	for _, b := range []*benchNode{p.a, p.b} {
		if b != nil {
			if err := b.stop(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, c := range p.clients {
		c.Close()
	}
	return errors.Join(errs...)
}

// nodeStatus is the part of GET /api/status the bench reports.
type nodeStatus struct {
	Counts            map[string]int64 `json:"counts"`
	ForwardQueueDepth int64            `json:"forward_queue_depth"`
	OutboxDepth       int64            `json:"outbox_depth"`
}

func (b *benchNode) fullStatus() (nodeStatus, error) {
	var st nodeStatus
	err := send(b.api, http.MethodGet, "/api/status", nil, &st)
	return st, err
}

// counts lists the non-zero message counts of a status.
func (st nodeStatus) counts() string {
	var parts []string
	for _, s := range messages.AllStates {
		if n := st.Counts[string(s)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	if len(parts) == 0 {
		return "no messages"
	}
	return strings.Join(parts, ", ")
}

// runFederated: the clients submit to A, consumers poll and ack on B; the
// figure is the acks answered at B in the window.
func runFederated(o options, bodies [][]byte, dir string, prof *profiler) (r runResult, err error) {
	p, err := startPair(dir, len(bodies), o.consumers)
	if err != nil {
		return r, err
	}
	defer func() {
		if cerr := p.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	var phase atomic.Int32
	cons := startConsumers(p.b, o.consumers, &phase)
	subs := startSubmitters(p.submit, bodies, &phase)
	r.window, r.cpu = measure(&phase, o, prof, p.a, p.b)
	subs.wait(&r)
	cons.wg.Wait()
	r.count = cons.acked.Load()
	r.rate = float64(r.count) / r.window.Seconds()
	r.errors += cons.errs.Load()
	if r.firstErr == "" {
		r.firstErr = cons.firstErr
	}
	stA, err := p.a.fullStatus()
	if err != nil {
		return r, err
	}
	stB, err := p.b.fullStatus()
	if err != nil {
		return r, err
	}
	perPoll := 0.0
	if polls := cons.polls.Load(); polls > 0 {
		perPoll = float64(r.count) / float64(polls)
	}
	r.note = fmt.Sprintf("submitted to A %.0f msg/s in the window, %.1f msgs per poll at B; after the run A: %s (forward queue %d, outbox %d), B: %s (outbox %d); A: %s; B: %s",
		float64(r.submits)/r.window.Seconds(), perPoll, stA.counts(), stA.ForwardQueueDepth, stA.OutboxDepth,
		stB.counts(), stB.OutboxDepth, p.a.actorLoad(r.window), p.b.actorLoad(r.window))
	if r.count == 0 {
		return r, fmt.Errorf("no ack completed at B in the window (%d failed; first: %s)", r.errors, r.firstErr)
	}
	return r, nil
}

// memResult is one measurement of the memory figure.
type memResult struct {
	perHundredK float64 // MB (10^6 bytes) of RSS growth per 100,000 queued messages
	queued      int64   // messages queued between the first and the last sample
	// samples[0] is taken after the warm-up fill, then one after each
	// further quarter of the fill; at[i] is how many were queued then.
	samples []memSample
	at      []int64
	fill    time.Duration // time to queue them (samples excluded)
}

func (m memResult) summary() string {
	first, last := m.samples[0], m.samples[len(m.samples)-1]
	var steps []string
	for i := 1; i < len(m.samples); i++ {
		steps = append(steps, fmt.Sprintf("%+.1f", float64(m.samples[i].rss-m.samples[i-1].rss)/1e6))
	}
	half := len(m.samples) / 2
	late := float64(last.rss-m.samples[half].rss) / 1e6 * 1e5 / float64(m.at[len(m.at)-1]-m.at[half])
	return fmt.Sprintf("%.2f MB per 100k: VmRSS %s at %d queued -> %s at %d (%+.1f MB: anon %+.1f MB, file %+.1f MB; Go heap in use %+.1f MB, Go runtime total %+.1f MB, the rest outside the Go heap); by quarter (MB): %s, the second half alone %.2f MB per 100k; filled at %.0f msg/s",
		m.perHundredK, mb(first.rss), m.at[0], mb(last.rss), m.at[len(m.at)-1], float64(last.rss-first.rss)/1e6,
		float64(last.anon-first.anon)/1e6, float64(last.file-first.file)/1e6,
		float64(int64(last.heap)-int64(first.heap))/1e6, float64(int64(last.sys)-int64(first.sys))/1e6,
		strings.Join(steps, " "), late, float64(m.queued)/m.fill.Seconds())
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

// memSample is the process's memory after a full collection.
type memSample struct {
	rss, anon, file int64  // /proc/self/status VmRSS, RssAnon, RssFile (bytes)
	heap, sys       uint64 // Go heap in use, Go runtime total (runtime.MemStats)
}

// sampleMemory collects garbage, returns freed pages to the system, lets
// the node settle and reads the process's resident set.
func sampleMemory() (memSample, error) {
	var s memSample
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(200 * time.Millisecond)
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.heap, s.sys = ms.HeapInuse, ms.Sys-ms.HeapReleased
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return s, fmt.Errorf("memory figure: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &s.rss
		case "RssAnon":
			dst = &s.anon
		case "RssFile":
			dst = &s.file
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return s, fmt.Errorf("/proc/self/status %s: %q", name, val)
		}
		*dst = kb * 1024
	}
	if s.rss == 0 {
		return s, errors.New("memory figure: no VmRSS in /proc/self/status")
	}
	return s, nil
}

// fill submits n messages to A with the clients, each waiting for its 202,
// and checks that A answered forward_queued to every one.
func fill(client *apiclient.Client, bodies [][]byte, n int64) error {
	var tickets, notQueued, errs atomic.Int64
	var mu sync.Mutex
	var firstErr, firstState string
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go pprof.Do(context.Background(), pprof.Labels("bench", "client"), func(context.Context) {
			defer wg.Done()
			for tickets.Add(1) <= n {
				for {
					state, err := submitState(client, bodies[i])
					if err == nil {
						if state != string(messages.StateForwardQueued) {
							if notQueued.Add(1) == 1 {
								mu.Lock()
								firstState = state
								mu.Unlock()
							}
						}
						break
					}
					if errs.Add(1) == 1 {
						mu.Lock()
						firstErr = err.Error()
						mu.Unlock()
					}
					if errs.Load() > 1000 {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if errs.Load() > 1000 {
		return fmt.Errorf("filling the queue: %d submits failed (first: %s)", errs.Load(), firstErr)
	}
	if notQueued.Load() > 0 {
		return fmt.Errorf("filling the queue: %d submits answered %q, not forward_queued (is the link cut?)", notQueued.Load(), firstState)
	}
	return nil
}

// submitState POSTs one submission and returns the state of the 202.
func submitState(c *apiclient.Client, body []byte) (string, error) {
	ack, err := c.Submit(context.Background(), json.RawMessage(body))
	if err != nil {
		return "", err
	}
	if ack.ID == "" {
		return "", fmt.Errorf("202 reply without an id: %+v", ack)
	}
	return string(ack.State), nil
}

// cutPair starts A and B, cuts the link between them and waits until A
// sees B unhealthy: from then on A answers forward_queued.
func cutPair(o options, bodies [][]byte, dir string) (p *fedPair, cutSeen time.Duration, err error) {
	if p, err = startPair(dir, len(bodies), o.consumers); err != nil {
		return nil, 0, err
	}
	p.link.cut.Store(true)
	cutAt := time.Now()
	if _, err := p.waitPeer(messages.PeerUnhealthy, 30*time.Second); err != nil {
		_ = p.close()
		return nil, 0, err
	}
	return p, time.Since(cutAt), nil
}

// waitQueued waits until A's status counts n messages forward_queued (the
// counts of GET /api/status are cached for up to a second).
func (p *fedPair) waitQueued(n int64) error {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		st, err := p.a.fullStatus()
		if err != nil {
			return err
		}
		q := st.Counts[string(messages.StateForwardQueued)]
		if q == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d messages forward_queued at %s after the fill, want %d (%s)", q, nodeA, n, st.counts())
		}
	}
}

// runMemory: A and B federated, the link cut, o.memQueued messages
// submitted to A (they wait forward_queued for B). The process's resident
// set is read after the first 5,000 of them (a twentieth with fewer:
// connections, statement caches and pools are warm then), after each
// further quarter, and after all of them; the growth from the first to the
// last reading, scaled to 100,000 messages, is the memory figure. B is in
// the process too, but idle behind the cut; the clients' memory does not
// grow with the number of messages.
func runMemory(o options, bodies [][]byte, dir string) (m memResult, err error) {
	p, _, err := cutPair(o, bodies, dir)
	if err != nil {
		return m, err
	}
	defer func() {
		if cerr := p.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	warm := min(max(o.memQueued/20, 1), 5000)
	if err := fill(p.submit, bodies, warm); err != nil {
		return m, err
	}
	queued := warm
	for i := 0; ; i++ {
		s, err := sampleMemory()
		if err != nil {
			return m, err
		}
		m.samples, m.at = append(m.samples, s), append(m.at, queued)
		if i == 4 {
			break
		}
		n := (o.memQueued - warm) * int64(i+1) / 4
		t := time.Now()
		if err := fill(p.submit, bodies, warm+n-queued); err != nil {
			return m, err
		}
		m.fill += time.Since(t)
		queued = warm + n
	}
	m.queued = o.memQueued - warm
	m.perHundredK = float64(m.samples[4].rss-m.samples[0].rss) / 1e6 * 1e5 / float64(m.queued)
	return m, p.waitQueued(o.memQueued)
}

// runDrain: A and B federated, the link cut, o.queued messages submitted
// to A (they wait forward_queued); then the link heals, and the figure is
// o.queued over the time from the heal until B's consumers have acked
// them all.
func runDrain(o options, bodies [][]byte, dir string, prof *profiler) (r runResult, err error) {
	p, cutSeen, err := cutPair(o, bodies, dir)
	if err != nil {
		return r, err
	}
	defer func() {
		if cerr := p.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	t := time.Now()
	if err := fill(p.submit, bodies, o.queued); err != nil {
		return r, err
	}
	filled := time.Since(t)
	if err := p.waitQueued(o.queued); err != nil {
		return r, err
	}

	// The heal. Consumers are long-polling B's (empty) frontend already;
	// everything they ack from here on crossed the healed link.
	p.submit.Close()
	var phase atomic.Int32
	phase.Store(measuring)
	cons := startConsumers(p.b, o.consumers, &phase)
	time.Sleep(100 * time.Millisecond)
	refused := p.link.refused.Load()
	prof.start()
	p.a.snapshot()
	p.b.snapshot()
	c0 := processCPU()
	t0 := time.Now()
	p.link.cut.Store(false)
	healthy := make(chan time.Time, 1)
	go func() {
		at, err := p.waitPeer(messages.PeerHealthy, time.Minute)
		if err != nil {
			at = time.Time{}
		}
		healthy <- at
	}()
	limit := time.Minute + time.Duration(o.queued)*4*time.Millisecond
	for cons.acked.Load() < o.queued && time.Since(t0) < limit {
		time.Sleep(5 * time.Millisecond)
	}
	r.window = time.Since(t0)
	r.cpu = processCPU() - c0
	p.a.snapshot()
	p.b.snapshot()
	prof.stop()
	phase.Store(over)
	cons.wg.Wait()
	healthyAt := <-healthy
	r.count = cons.acked.Load()
	r.rate = float64(r.count) / r.window.Seconds()
	r.errors += cons.errs.Load()
	r.firstErr = cons.firstErr
	if r.count < o.queued {
		return r, fmt.Errorf("drain: %d of %d acked at %s within %v", r.count, o.queued, nodeB, limit)
	}
	stA, err := p.a.fullStatus()
	if err != nil {
		return r, err
	}
	stB, err := p.b.fullStatus()
	if err != nil {
		return r, err
	}
	seen := "never"
	if !healthyAt.IsZero() {
		d := healthyAt.Sub(t0)
		seen = fmt.Sprintf("%v after the heal (%.0f msg/s from then)", d.Round(time.Millisecond), float64(r.count)/(r.window-d).Seconds())
	}
	r.note = fmt.Sprintf("%d messages queued at %s (filled in %v at %.0f msg/s; cut seen unhealthy after %v, %d calls refused by the cut); %s healthy at %s %s; after the drain A: %s (forward queue %d), B: %s; A: %s; B: %s",
		o.queued, nodeA, filled.Round(10*time.Millisecond), float64(o.queued)/filled.Seconds(), cutSeen.Round(time.Millisecond), refused, nodeB, nodeA, seen,
		stA.counts(), stA.ForwardQueueDepth, stB.counts(), p.a.actorLoad(r.window), p.b.actorLoad(r.window))
	return r, nil
}
