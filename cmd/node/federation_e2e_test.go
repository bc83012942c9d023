package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// The federation scenarios of issue 3 with the real binary: three nodes a,
// b and c with mutual TLS, each serving one pull frontend (fe-a, fe-b,
// fe-c) and routing every frontend (1 -> fe-a, 2 -> fe-b, 3 -> fe-c). Every
// directed link between two nodes goes through its own toxiproxy proxy run
// in this process, so that the test can cut a link at the TCP level
// (closing the listener and every connection) or slow it down. Each node is
// given its peers as proxy addresses; peers are verified by node name, not
// by the address dialled.
//
// Consumers poll and ack every frontend and record each offer and ack by
// frontend and id, so that a duplicate, a message at a wrong frontend, or an
// id no client sent shows up in the final checks:
//   - every accepted message was acked exactly once at the frontend its
//     route names, and offered at no other frontend;
//   - it is delivered at its origin, with one delivered transition, and at
//     the destination node when that is another node;
//   - the third node never stored it;
//   - no log record of any run shows a panic or a fatal failure.

func TestFederationE2EPartition(t *testing.T) {
	c := startFedCluster(t)
	c.send("warm", 10, c.allPairs()...)
	c.waitDelivered(30 * time.Second)

	// Cut a <-> b at the TCP level; both ends must see the other as down.
	c.cut("a", "b")
	c.waitPeerState("a", "b", messages.PeerUnhealthy)
	c.waitPeerState("b", "a", messages.PeerUnhealthy)

	// a keeps accepting messages for b's frontend (and b for a's); they
	// queue. Traffic over the links that still work goes on meanwhile.
	queued := c.send("cut", 60, pair{"a", "b"}, pair{"b", "a"})
	for id, state := range queued {
		if state != messages.StateForwardQueued {
			t.Errorf("%s accepted as %s during the cut, want forward_queued", id, state)
		}
	}
	others := c.send("during", 10, c.pairsExcept(pair{"a", "b"}, pair{"b", "a"})...)
	c.waitDeliveredIDs(30*time.Second, keys(others))

	// Those deliveries took at least a few round trips after the queued
	// messages were accepted: by now none of these may have moved.
	for id := range queued {
		m := c.message(c.origin(id), id)
		if m.State != messages.StateForwardQueued || m.QueuedAt == nil {
			t.Errorf("%s is %s (queued_at %v) at %s during the cut, want forward_queued", id, m.State, m.QueuedAt, c.origin(id))
		}
		for _, fe := range c.frontendsWith(id) {
			t.Errorf("%s, queued at %s for %s, reached %s during the cut", id, c.origin(id), c.site(id), fe)
		}
	}
	// The peer views show the queues (the depth is read from the store
	// at most once a second, as the gauges are).
	for _, v := range [][2]string{{"a", "b"}, {"b", "a"}} {
		polltest.Eventually(t, 10*time.Second, func() error {
			p := c.peer(v[0], v[1])
			if p.State == messages.PeerHealthy || p.ForwardQueueDepth != 60 {
				return fmt.Errorf("%s sees %s as %s with forward_queue_depth %d during the cut, want not healthy with 60 queued", v[0], v[1], p.State, p.ForwardQueueDepth)
			}
			return nil
		})
	}
	if t.Failed() {
		t.FailNow()
	}

	// Heal: everything drains, and new traffic flows everywhere again.
	c.heal("a", "b")
	c.send("healed", 10, c.allPairs()...)
	c.waitDelivered(60 * time.Second)
	// A message accepted during the cut waited from its first state on
	// (forward_queued, then forwarded, or delivered by a report that
	// overtook the forward's answer).
	for id := range queued {
		m := c.message(c.origin(id), id)
		if len(m.History) == 0 || m.History[0].State != messages.StateForwardQueued {
			t.Errorf("%s: history at %s %+v, want it to start forward_queued", id, c.origin(id), m.History)
		}
	}
	c.finish()
}

func TestFederationE2EKillMidForward(t *testing.T) {
	c := startFedCluster(t)
	c.send("warm", 10, c.allPairs()...)
	c.waitDelivered(30 * time.Second)

	// A queue of a few hundred messages at a for b, built during a cut.
	const queueLen = 512 // two full forward batches
	c.cut("a", "b")
	c.waitPeerState("a", "b", messages.PeerUnhealthy)
	queued := c.send("queue", queueLen, pair{"a", "b"})
	for id, state := range queued {
		if state != messages.StateForwardQueued {
			t.Fatalf("%s accepted as %s during the cut, want forward_queued", id, state)
		}
	}

	// Heal with b's answers to a throttled to 2 KB/s: health checks (a
	// handshake and a few hundred bytes) pass well within --http-timeout,
	// but the answer to a batch of 256 forwards (over 12 KB) cannot
	// arrive within it. So a drains its queue to b, b commits and offers
	// the messages, and a is still waiting for b's answers when b is killed.
	c.throttleAnswers("a", "b", 2)
	c.heal("a", "b")
	polltest.Until(t, 30*time.Second, "the condition", func() bool { return c.offeredAt("b", queued) > 0 })
	c.killed["b"] = true
	c.nodes["b"].Kill()
	// b's host is gone: so are the connections to it (and the answers
	// the proxy still held).
	c.cut("a", "b")
	c.replaceLink("a", "b")
	atKill := c.offeredAt("b", queued)

	// a notices, and its messages for b wait again: none was forwarded
	// (no answer came), those b delivered before the kill may already be
	// delivered (b's report, sent over the b -> a link, overtook the
	// answer), and none reached another frontend.
	c.waitPeerNot("a", "b", messages.PeerHealthy)
	c.waitPeerNot("c", "b", messages.PeerHealthy)
	split := map[messages.State]int{}
	for id := range queued {
		m := c.message("a", id)
		split[m.State]++
		if m.State != messages.StateForwardQueued && m.State != messages.StateDelivered {
			t.Errorf("%s is %s at a after b was killed, want forward_queued (or delivered by b's report)", id, m.State)
		}
		for _, fe := range c.frontendsWith(id) {
			if fe != frontendOf("b") {
				t.Errorf("%s, queued at a for b, reached %s", id, fe)
			}
		}
	}
	t.Logf("killed b mid-forward: %d of %d queued messages offered at fe-b by then; at a after the kill: %v", atKill, queueLen, split)
	if t.Failed() {
		t.FailNow()
	}
	// Traffic from a and c goes on while b is down.
	c.send("b-down", 10, pair{"a", "a"}, pair{"a", "b"}, pair{"a", "c"}, pair{"c", "a"}, pair{"c", "b"}, pair{"c", "c"})

	// Restart b on the same data dir and port, and reconnect it to a:
	// everything drains.
	c.nodes["b"].Start()
	c.heal("a", "b")
	c.send("restarted", 10, c.allPairs()...)
	c.waitDelivered(60 * time.Second)
	c.finish()
}

// pair is a message's origin node and the node whose frontend it is for.
type pair struct{ origin, site string }

type fedKey struct{ fe, id string }

// fedLedger is what the frontends saw; seq orders events across goroutines.
type fedLedger struct {
	mu  sync.Mutex
	seq int64
	// offers: the seq at which the poll of each offer was sent.
	offers map[fedKey][]int64
	// applied: the seq of each ack the node answered "applied".
	applied map[fedKey][]int64
	// lostAcks: acks answered "already_recorded" after an earlier sending
	// of the same ack failed (cut off by a kill after the node committed).
	lostAcks map[fedKey][]int64
	// unexpected: offers of ids no client sent; oddAcks: acks of a
	// delivery answered neither applied nor already_recorded.
	unexpected, oddAcks []string
}

func (l *fedLedger) next() int64 { l.seq++; return l.seq }

type fedCluster struct {
	t     *testing.T
	nodes map[string]*e2eNode
	links map[[2]string]*toxiproxy.Proxy // [from, to]
	// proxies is the in-process toxiproxy the links belong to.
	proxies *toxiproxy.ApiServer
	ledger  *fedLedger
	// killed: sites killed during the test; only their frontends may offer
	// an id twice (a lease lost in the crash).
	killed map[string]bool

	mu       sync.Mutex
	sent     map[string]pair // every id a client sent, before it sent it
	accepted map[string]pair

	stopConsumers context.CancelFunc
	consumers     sync.WaitGroup
}

var fedSites = []string{"a", "b", "c"}

func frontendOf(site string) string { return "fe-" + site }

func prefixOf(site string) string { return fmt.Sprint(slices.Index(fedSites, site) + 1) }

func startFedCluster(t *testing.T) *fedCluster {
	bin := nodetest.Binary(t)
	dir := t.TempDir()
	certDir, pool := nodetest.DevCerts(t, bin, dir, strings.Join(fedSites, ","))

	c := &fedCluster{
		t: t, nodes: map[string]*e2eNode{}, links: map[[2]string]*toxiproxy.Proxy{},
		ledger: &fedLedger{offers: map[fedKey][]int64{}, applied: map[fedKey][]int64{}, lostAcks: map[fedKey][]int64{}},
		killed: map[string]bool{}, sent: map[string]pair{}, accepted: map[string]pair{},
	}
	addrs := map[string]string{}
	for _, s := range fedSites {
		addrs[s] = nodetest.FreeAddr(t)
	}
	// toxiproxy's toxics log through zerolog's global logger.
	zerolog.SetGlobalLevel(zerolog.Disabled)
	c.proxies = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	for _, from := range fedSites {
		for _, to := range fedSites {
			if from == to {
				continue
			}
			p := toxiproxy.NewProxy(c.proxies, from+"->"+to, "127.0.0.1:0", addrs[to])
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Stop)
			c.links[[2]string{from, to}] = p
		}
	}
	for _, s := range fedSites {
		var peers []string
		for _, o := range fedSites {
			if o != s {
				peers = append(peers, c.links[[2]string{s, o}].Listen)
			}
		}
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: s}, MaxIdleConnsPerHost: 16}
		t.Cleanup(tr.CloseIdleConnections)
		c.nodes[s] = newE2ENode(t, bin, addrs[s], &http.Client{Transport: tr, Timeout: 30 * time.Second}, []string{"run",
			"--name", s, "--instance-id", s + "-0",
			"--data-dir", filepath.Join(dir, s),
			"--listen", addrs[s], "--metrics-listen", "127.0.0.1:0",
			"--tls-ca", filepath.Join(certDir, "ca.pem"),
			"--tls-cert", filepath.Join(certDir, s+".pem"), "--tls-key", filepath.Join(certDir, s+".key"),
			"--federation", "--peers", strings.Join(peers, ","),
			"--health-interval", "200ms", "--registry-interval", "200ms", "--dns-poll-interval", "200ms",
			"--forward-retry-interval", "200ms", "--forward-max-retries", "1000", // 200 s: nothing fails here
			"--http-timeout", "2s",
			"--delivery-retry-min", "50ms", "--delivery-retry-max", "200ms", "--delivery-max-attempts", "50",
			"--log-format", "json", "--log-level", "info",
		}...)
	}
	t.Cleanup(func() {
		for _, s := range fedSites {
			n := c.nodes[s]
			if n.Started() {
				n.End()
			}
			if t.Failed() {
				for i, l := range n.RunLogs() {
					t.Logf("--- logs of %s, run %d ---\n%s", s, i+1, tail(l, 6000))
				}
			}
		}
	})
	for _, s := range fedSites {
		c.nodes[s].Start()
	}
	for _, s := range fedSites {
		c.nodes[s].Must(200, "PUT", "/api/frontends/"+frontendOf(s), map[string]string{"mode": "pull"}, nil)
	}
	for _, s := range fedSites {
		for _, o := range fedSites {
			if o != s {
				c.waitPeerState(s, o, messages.PeerHealthy)
			}
		}
	}
	// A route to a peer's frontend is taken once the registry has it.
	for _, s := range fedSites {
		for _, o := range fedSites {
			path, body := "/api/routes/"+prefixOf(o), map[string]string{"frontend": frontendOf(o)}
			polltest.Eventually(t, 20*time.Second, func() error {
				status, err := c.nodes[s].Call("PUT", path, body, nil)
				if err != nil || status != 200 {
					return fmt.Errorf("%s: PUT %s: %d %v", s, path, status, err)
				}
				return nil
			})
		}
	}

	// finish stops the consumers' polls (their unanswered acks go on); a
	// test that ends early aborts them.
	ctx, cancel := context.WithCancel(context.Background())
	abort, cancelAbort := context.WithCancel(context.Background())
	c.stopConsumers = cancel
	t.Cleanup(func() { cancel(); cancelAbort(); c.consumers.Wait() })
	for _, s := range fedSites {
		for range 2 {
			c.consumers.Add(1)
			go c.consume(ctx, abort, s)
		}
	}
	return c
}

// consume polls and acks site's frontend until ctx ends, recording every
// offer and ack.
func (c *fedCluster) consume(ctx, abort context.Context, site string) {
	defer c.consumers.Done()
	n, fe, l := c.nodes[site], frontendOf(site), c.ledger
	for ctx.Err() == nil {
		l.mu.Lock()
		sentAt := l.next()
		l.mu.Unlock()
		var pr struct{ Messages []messages.Outgoing }
		status, err := n.Call("POST", "/api/frontends/"+fe+"/poll", map[string]any{"max": 100, "wait_ms": 250, "lease_ms": 30000}, &pr)
		if err != nil || status != 200 {
			time.Sleep(20 * time.Millisecond) // the node is down or restarting
			continue
		}
		if len(pr.Messages) == 0 {
			continue
		}
		var results []messages.DeliveryResult
		l.mu.Lock()
		c.mu.Lock()
		for _, m := range pr.Messages {
			if _, ok := c.sent[m.ID]; !ok {
				l.unexpected = append(l.unexpected, fe+":"+m.ID)
			}
			k := fedKey{fe, m.ID}
			l.offers[k] = append(l.offers[k], sentAt)
			results = append(results, messages.DeliveryResult{ID: m.ID, Status: messages.Delivered, Attempt: m.Attempt})
		}
		c.mu.Unlock()
		l.mu.Unlock()
		// An ack is repeated until the node answers it, even after ctx
		// ends: one cut off by a kill may have been committed.
		var ar struct{ Results []messages.AckOutcome }
		lost := false
		deadline := time.Now().Add(60 * time.Second)
		for {
			status, err = n.Call("POST", "/api/frontends/"+fe+"/ack", map[string]any{"results": results}, &ar)
			if err == nil && status == 200 {
				break
			}
			lost = true
			if abort.Err() != nil {
				return
			}
			if time.Now().After(deadline) {
				c.t.Errorf("%s: ack not answered within 60s: %d %v", fe, status, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		l.mu.Lock()
		for _, o := range ar.Results {
			k := fedKey{fe, o.ID}
			switch {
			case o.Outcome == "applied":
				l.applied[k] = append(l.applied[k], l.next())
			case o.Outcome == "already_recorded" && lost:
				l.lostAcks[k] = append(l.lostAcks[k], l.next())
			case o.Outcome != "already_recorded":
				l.oddAcks = append(l.oddAcks, fe+":"+o.ID+":"+o.Outcome)
			}
		}
		l.mu.Unlock()
	}
}

func (c *fedCluster) allPairs() []pair {
	var ps []pair
	for _, o := range fedSites {
		for _, s := range fedSites {
			ps = append(ps, pair{o, s})
		}
	}
	return ps
}

func (c *fedCluster) pairsExcept(skip ...pair) []pair {
	var ps []pair
	for _, p := range c.allPairs() {
		if !slices.Contains(skip, p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// send submits n messages for each pair with client-chosen ids, the pairs
// and up to 8 messages of a pair at once, and returns the state each was
// accepted in. A submit that finds its node down (killed, restarting) is
// repeated with the same id until the node answers.
func (c *fedCluster) send(tag string, n int, pairs ...pair) map[string]messages.State {
	c.t.Helper()
	type job struct {
		p  pair
		id string
		i  int
	}
	jobs := make(chan job)
	out := map[string]messages.State{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for range min(8*len(pairs), 32) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				body := map[string]string{
					"id": j.id, "source_msisdn": "4455" + prefixOf(j.p.origin),
					"destination_msisdn": fmt.Sprintf("%s555%05d", prefixOf(j.p.site), j.i),
					"message_body":       fmt.Sprintf("%s from %s to %s", j.id, j.p.origin, frontendOf(j.p.site)),
				}
				state, err := c.submit(j.p.origin, body)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					out[j.id] = state
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range pairs {
		for i := range n {
			id := fmt.Sprintf("%s.%s-%s.%04d", tag, p.origin, frontendOf(p.site), i)
			c.mu.Lock()
			c.sent[id] = p
			c.mu.Unlock()
			jobs <- job{p, id, i}
		}
	}
	close(jobs)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	for id := range out {
		c.accepted[id] = c.sent[id]
	}
	c.mu.Unlock()
	return out
}

func (c *fedCluster) submit(origin string, body map[string]string) (messages.State, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var r struct {
			ID    string
			State messages.State
		}
		status, err := c.nodes[origin].Call("POST", "/api/messages", body, &r)
		switch {
		case err == nil && (status == 202 || status == 200):
			return r.State, nil
		case err == nil && status != 503 && status != 429:
			return "", fmt.Errorf("%s: submit %s: status %d", origin, body["id"], status)
		case time.Now().After(deadline):
			return "", fmt.Errorf("%s: submit %s: not accepted within 30s: %d %v", origin, body["id"], status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *fedCluster) origin(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[id].origin
}

func (c *fedCluster) site(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[id].site
}

// frontendsWith lists the frontends that were offered id so far.
func (c *fedCluster) frontendsWith(id string) []string {
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	var fes []string
	for _, s := range fedSites {
		if len(c.ledger.offers[fedKey{frontendOf(s), id}]) > 0 {
			fes = append(fes, frontendOf(s))
		}
	}
	return fes
}

// offeredAt counts the ids offered at site's frontend so far.
func (c *fedCluster) offeredAt(site string, ids map[string]messages.State) int {
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	n := 0
	for id := range ids {
		if len(c.ledger.offers[fedKey{frontendOf(site), id}]) > 0 {
			n++
		}
	}
	return n
}

func (c *fedCluster) message(node, id string) messages.Message {
	c.t.Helper()
	var m messages.Message
	if status, err := c.nodes[node].Call("GET", "/api/messages/"+id, nil, &m); err != nil || status != 200 {
		c.t.Fatalf("%s: GET message %s: %d %v", node, id, status, err)
	}
	return m
}

func (c *fedCluster) peers(node string) ([]messages.PeerInfo, error) {
	var peers []messages.PeerInfo
	status, err := c.nodes[node].Call("GET", "/api/peers", nil, &peers)
	if err == nil && status != 200 {
		err = fmt.Errorf("GET /api/peers: status %d", status)
	}
	return peers, err
}

func (c *fedCluster) peer(node, peerName string) messages.PeerInfo {
	c.t.Helper()
	peers, err := c.peers(node)
	if err != nil {
		c.t.Fatalf("%s: %v", node, err)
	}
	for _, p := range peers {
		if p.Node == peerName {
			return p
		}
	}
	c.t.Fatalf("%s does not list peer %s: %+v", node, peerName, peers)
	return messages.PeerInfo{}
}

func (c *fedCluster) waitPeer(node, peerName string, ok func(messages.PeerState) bool, want string) {
	c.t.Helper()
	polltest.Eventually(c.t, 20*time.Second, func() error {
		peers, err := c.peers(node)
		if err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
		for _, p := range peers {
			if p.Node == peerName {
				if ok(p.State) {
					return nil
				}
				return fmt.Errorf("%s sees %s as %s (%s), want %s", node, peerName, p.State, p.LastError, want)
			}
		}
		return fmt.Errorf("%s does not list %s: %+v", node, peerName, peers)
	})
}

func (c *fedCluster) waitPeerState(node, peerName string, state messages.PeerState) {
	c.t.Helper()
	c.waitPeer(node, peerName, func(s messages.PeerState) bool { return s == state }, string(state))
}

func (c *fedCluster) waitPeerNot(node, peerName string, state messages.PeerState) {
	c.t.Helper()
	c.waitPeer(node, peerName, func(s messages.PeerState) bool { return s != state }, "not "+string(state))
}

// cut stops the proxies of both directions between x and y: the listener
// closes (connections are refused) and every open connection is closed.
func (c *fedCluster) cut(x, y string) {
	c.links[[2]string{x, y}].Stop()
	c.links[[2]string{y, x}].Stop()
}

// heal starts them again on the same addresses.
func (c *fedCluster) heal(x, y string) {
	c.t.Helper()
	for _, k := range [][2]string{{x, y}, {y, x}} {
		if err := c.links[k].Start(); err != nil {
			c.t.Fatalf("restart proxy %s->%s: %v", k[0], k[1], err)
		}
	}
}

// throttleAnswers limits the bytes from to back to from (the answers to
// from's calls) to kbps KB/s.
func (c *fedCluster) throttleAnswers(from, to string, kbps int) {
	c.t.Helper()
	spec := fmt.Sprintf(`{"name":"throttle-answers","type":"bandwidth","stream":"downstream","toxicity":1,"attributes":{"rate":%d}}`, kbps)
	if _, err := c.links[[2]string{from, to}].Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
		c.t.Fatal(err)
	}
}

// replaceLink puts a new proxy, without toxics, on the address of the cut
// link from -> to. (Removing a toxic from toxiproxy waits up to 5 s for
// each of the link's dead connections to flush.)
func (c *fedCluster) replaceLink(from, to string) {
	c.t.Helper()
	k := [2]string{from, to}
	old := c.links[k]
	old.Lock()
	listen, upstream, enabled := old.Listen, old.Upstream, old.Enabled
	old.Unlock()
	if enabled {
		c.t.Fatalf("replaceLink %s->%s: the link is not cut", from, to)
	}
	p := toxiproxy.NewProxy(c.proxies, old.Name, listen, upstream)
	c.links[k] = p
	c.t.Cleanup(p.Stop)
}

// waitDelivered waits until every accepted message is delivered at its
// origin and, when it went to a peer, at that peer: each node's count of
// delivered messages reaches what the accepted messages make it.
func (c *fedCluster) waitDelivered(timeout time.Duration) {
	c.t.Helper()
	want := map[string]int64{}
	c.mu.Lock()
	for _, p := range c.accepted {
		want[p.origin]++
		if p.site != p.origin {
			want[p.site]++
		}
	}
	c.mu.Unlock()
	polltest.Eventually(c.t, timeout, func() error {
		for _, s := range fedSites {
			var st struct {
				Counts            map[string]int64
				ForwardQueueDepth int64 `json:"forward_queue_depth"`
			}
			status, err := c.nodes[s].Call("GET", "/api/status", nil, &st)
			if err != nil || status != 200 {
				return fmt.Errorf("%s: GET /api/status: %d %v", s, status, err)
			}
			if st.Counts["delivered"] < want[s] {
				return fmt.Errorf("%s: %d delivered, want %d (counts %v, forward queue %d)", s, st.Counts["delivered"], want[s], st.Counts, st.ForwardQueueDepth)
			}
		}
		return nil
	})
}

// waitDeliveredIDs waits until each of ids is delivered at its origin.
func (c *fedCluster) waitDeliveredIDs(timeout time.Duration, ids []string) {
	c.t.Helper()
	polltest.Eventually(c.t, timeout, func() error {
		for len(ids) > 0 {
			id := ids[0]
			var m messages.Message
			status, err := c.nodes[c.origin(id)].Call("GET", "/api/messages/"+id, nil, &m)
			if err != nil || status != 200 {
				return fmt.Errorf("GET %s: %d %v", id, status, err)
			}
			if m.State != messages.StateDelivered {
				return fmt.Errorf("%s is %s at %s (%d not delivered yet)", id, m.State, c.origin(id), len(ids))
			}
			ids = ids[1:]
		}
		return nil
	})
}

// finish stops the consumers, checks every accepted message at every node
// and at the frontends, stops the nodes gracefully and checks their logs.
func (c *fedCluster) finish() {
	t := c.t
	t.Helper()
	c.stopConsumers()
	c.consumers.Wait()

	c.mu.Lock()
	accepted := make(map[string]pair, len(c.accepted))
	for id, p := range c.accepted {
		accepted[id] = p
	}
	c.mu.Unlock()

	// The stores: delivered at the origin (once) and at the destination,
	// unknown to the third node.
	checkEach(t, accepted, c.checkStores)

	// The frontends: one recorded ack per id at its own frontend, nothing
	// anywhere else, no offer after the ack, and a repeated offer only
	// where a node was killed.
	l := c.ledger
	l.mu.Lock()
	if len(l.unexpected) > 0 {
		t.Errorf("frontends were offered ids no client sent: %v", l.unexpected)
	}
	if len(l.oddAcks) > 0 {
		t.Errorf("acks of offered messages answered neither applied nor already_recorded: %v", l.oddAcks)
	}
	redelivered := 0
	for id, p := range accepted {
		fe := frontendOf(p.site)
		k := fedKey{fe, id}
		for _, s := range fedSites {
			if s != p.site && len(l.offers[fedKey{frontendOf(s), id}]) > 0 {
				t.Errorf("%s (from %s for %s) was offered at %s %d times", id, p.origin, fe, frontendOf(s), len(l.offers[fedKey{frontendOf(s), id}]))
			}
		}
		recorded := append(slices.Clone(l.applied[k]), l.lostAcks[k]...)
		switch {
		case len(l.applied[k]) > 1:
			t.Errorf("%s acked and applied %d times at %s", id, len(l.applied[k]), fe)
			continue
		case len(recorded) == 0:
			t.Errorf("%s: no ack recorded at %s (offered %d times)", id, fe, len(l.offers[k]))
			continue
		}
		first := slices.Min(recorded)
		for _, o := range l.offers[k] {
			if o > first {
				t.Errorf("%s offered again at %s after its ack was recorded", id, fe)
			}
		}
		if len(l.offers[k]) > 1 {
			redelivered++
			if !c.killed[p.site] {
				t.Errorf("%s offered %d times at %s, whose node was never killed", id, len(l.offers[k]), fe)
			}
		}
	}
	l.mu.Unlock()
	t.Logf("%d messages accepted and delivered, %d offered again across a kill", len(accepted), redelivered)

	// Stopped together: a graceful stop may wait for peers' connections.
	for _, s := range fedSites {
		c.nodes[s].Interrupt()
	}
	for _, s := range fedSites {
		c.nodes[s].WaitStopped()
	}
	for _, s := range fedSites {
		for _, lg := range c.nodes[s].RunLogs() {
			checkLogs(t, lg)
		}
	}
}

func (c *fedCluster) checkStores(id string, p pair) error {
	return checkStored(id, p, fedSites, func(site, id string) (messages.Message, int, error) {
		var m messages.Message
		status, err := c.nodes[site].Call("GET", "/api/messages/"+id, nil, &m)
		return m, status, err
	})
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
