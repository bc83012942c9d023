package switchboard_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
	"github.com/switchboard-dev/switchboard/transport"
)

// fedNet lets in-process test nodes name each other by symbolic addresses
// ("b.test:1"), resolved at call time to the node's real HTTPS listener, so
// that peers can be configured before any port is known. Calls go through
// the real HTTPS peer client; a test can cut a direction (the call fails
// as a refused connection would, without reaching the peer).
type fedNet struct {
	mu    sync.Mutex
	addrs map[string]string // symbolic -> real
	cut   map[[2]string]bool
}

func newFedNet() *fedNet {
	return &fedNet{addrs: map[string]string{}, cut: map[[2]string]bool{}}
}

func symbolic(name string) string { return name + ".test:1" }

func (f *fedNet) set(name, real string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs[symbolic(name)] = real
}

// setCut cuts (or heals) both directions between a and b.
func (f *fedNet) setCut(a, b string, cut bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut[[2]string{a, symbolic(b)}] = cut
	f.cut[[2]string{b, symbolic(a)}] = cut
}

func (f *fedNet) resolve(from, addr string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut[[2]string{from, addr}] {
		return "", fmt.Errorf("dial %s: %w", addr, &net.OpError{Op: "dial", Err: fmt.Errorf("connection refused (cut by the test)")})
	}
	real, ok := f.addrs[addr]
	if !ok {
		return "", fmt.Errorf("dial %s: no such host", addr)
	}
	return real, nil
}

// testPeerClient is the real HTTPS peer client of node name, trusting any
// certificate (the test nodes serve self-signed ones).
func testPeerClient(t *testing.T, name string) transport.Peer {
	pc := httpapi.DefaultPeerClientConfig()
	pc.Node, pc.InsecureSkipVerify = name, true
	c, err := httpapi.NewPeerClient(pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// fedBase is a federated test node named name whose peers are others, at
// their symbolic addresses, with the short intervals of these tests; its
// caller says how it reaches them.
func fedBase(t *testing.T, name string, others ...string) switchboard.Config {
	cfg := testConfig(t)
	cfg.Name, cfg.InstanceID = name, name+"-0"
	cfg.Federation = true
	for _, o := range others {
		cfg.Peers = append(cfg.Peers, symbolic(o))
	}
	cfg.HealthInterval = 100 * time.Millisecond
	cfg.RegistryInterval = 100 * time.Millisecond
	cfg.ForwardRetryInterval = 100 * time.Millisecond
	cfg.DNSPollInterval = 200 * time.Millisecond
	cfg.HTTPTimeout = 2 * time.Second
	return cfg
}

// fedConfig is a federated test node named name whose peers are others.
func fedConfig(t *testing.T, fn *fedNet, name string, others ...string) switchboard.Config {
	cfg := fedBase(t, name, others...)
	cfg.Transport = transport.Redirect{Inner: testPeerClient(t, name),
		Resolve: func(_, addr string) (string, error) { return fn.resolve(name, addr) }}
	return cfg
}

// startFed starts a federated node and publishes its address on the net.
func startFed(t *testing.T, fn *fedNet, cfg switchboard.Config) *harness {
	h := startNode(t, cfg)
	fn.set(cfg.Name, h.node.Addr())
	return h
}

// forwardingPair starts a and b, peers of each other: b serves frontend
// fe-b (pull) for prefix 2, and a routes 2 to it once it knows b's
// registry. set, when given, changes both nodes' configs.
func forwardingPair(t *testing.T, set ...func(*switchboard.Config)) (fn *fedNet, a, b *harness) {
	fn = newFedNet()
	ca, cb := fedConfig(t, fn, "a", "b"), fedConfig(t, fn, "b", "a")
	for _, f := range set {
		f(&ca)
		f(&cb)
	}
	a, b = startFed(t, fn, ca), startFed(t, fn, cb)
	b.pullFrontend("fe-b", "2")
	a.waitPeer("b", messages.PeerHealthy)
	a.routeWhenKnown("2", "fe-b")
	return fn, a, b
}

// waitPeer waits until h sees peer in state.
func (h *harness) waitPeer(peerName string, state messages.PeerState) messages.PeerInfo {
	h.t.Helper()
	var info messages.PeerInfo
	polltest.Eventually(h.t, 20*time.Second, func() error {
		var peers []messages.PeerInfo
		h.must(200, "GET", "/api/peers", nil, &peers)
		for _, p := range peers {
			if p.Node == peerName {
				info = p
				if p.State == state {
					return nil
				}
				return fmt.Errorf("peer %s is %s (%s), want %s", peerName, p.State, p.LastError, state)
			}
		}
		return fmt.Errorf("peer %s not listed in %+v", peerName, peers)
	})
	return info
}

// routeWhenKnown sets a route once the node has learned who serves fe.
func (h *harness) routeWhenKnown(prefix, fe string) {
	h.t.Helper()
	polltest.Eventually(h.t, 20*time.Second, func() error {
		status, body := h.do("PUT", "/api/routes/"+prefix, map[string]string{"frontend": fe})
		if status != 200 {
			return fmt.Errorf("PUT route %s -> %s: %d %s", prefix, fe, status, body)
		}
		return nil
	})
}

// pollOne long-polls fe until one message comes, and returns it.
func (h *harness) pollOne(fe string) messages.Outgoing {
	h.t.Helper()
	var got []messages.Outgoing
	polltest.Eventually(h.t, 20*time.Second, func() error {
		got = h.poll(fe, 1, 500, 30000)
		if len(got) != 1 {
			return fmt.Errorf("no message at %s", fe)
		}
		return nil
	})
	return got[0]
}

// queueDuringCut cuts the link from h to peer and submits n messages for
// the peer's prefix 2 (ids prefix-0, prefix-1, ...), each answered
// forward_queued; the link stays cut.
func (h *harness) queueDuringCut(fn *fedNet, peer, prefix string, n int) []string {
	h.t.Helper()
	fn.setCut(h.cfg.Name, peer, true)
	h.waitPeer(peer, messages.PeerUnhealthy)
	var ids []string
	for i := range n {
		ids = append(ids, h.submitAs(fmt.Sprintf("%s-%d", prefix, i), "2555", messages.StateForwardQueued))
	}
	return ids
}

func states(m messages.Message) []messages.State {
	var out []messages.State
	for _, e := range m.History {
		out = append(out, e.State)
	}
	return out
}

func TestFederationForwardsAndReportsBack(t *testing.T) {
	fn := newFedNet()
	a := startFed(t, fn, fedConfig(t, fn, "a", "b"))
	b := startFed(t, fn, fedConfig(t, fn, "b", "a"))
	b.pullFrontend("fe-b", "2")
	a.waitPeer("b", messages.PeerHealthy)
	b.waitPeer("a", messages.PeerHealthy)
	a.routeWhenKnown("2", "fe-b")

	id := a.submit("fed-1", "2555")
	got := b.pollOne("fe-b")
	if got.ID != id || got.SourceSMSC != "a" {
		t.Fatalf("b's frontend got %+v", got)
	}
	at := b.message(id)
	if at.SourceSMSC != "a" || at.DestSMSC != "b" || at.Frontend != "fe-b" {
		t.Fatalf("b stores %+v", at)
	}
	b.ack("fe-b", messages.DeliveryResult{ID: id, Status: messages.Delivered, Attempt: got.Attempt})
	b.waitState(id, messages.StateDelivered)
	m := a.waitState(id, messages.StateDelivered)
	want := []messages.State{messages.StatePending, messages.StateForwarded, messages.StateDelivered}
	if fmt.Sprint(states(m)) != fmt.Sprint(want) || m.DestSMSC != "b" {
		t.Fatalf("a's history %v (dest %s), want %v", states(m), m.DestSMSC, want)
	}
}

func TestFederationQueuesDuringCutAndDrainsAfter(t *testing.T) {
	fn := newFedNet()
	a := startFed(t, fn, fedConfig(t, fn, "a", "b"))
	b := startFed(t, fn, fedConfig(t, fn, "b", "a"))
	a.pullFrontend("fe-a", "1")
	b.pullFrontend("fe-b", "2")
	a.waitPeer("b", messages.PeerHealthy)
	a.routeWhenKnown("2", "fe-b")

	ids := a.queueDuringCut(fn, "b", "cut", 20)
	for _, id := range ids {
		if m := a.message(id); m.State != messages.StateForwardQueued {
			t.Fatalf("%s is %s during the cut, want forward_queued", id, m.State)
		}
	}
	if got := a.poll("fe-a", 10, 0, 1000); len(got) != 0 {
		t.Fatalf("a's own frontend got %d messages meant for b", len(got))
	}

	fn.setCut("a", "b", false)
	seen := map[string]int{}
	polltest.Eventually(t, 20*time.Second, func() error {
		for _, o := range b.poll("fe-b", 50, 200, 30000) {
			seen[o.ID]++
			b.ack("fe-b", messages.DeliveryResult{ID: o.ID, Status: messages.Delivered, Attempt: o.Attempt})
		}
		if len(seen) < len(ids) {
			return fmt.Errorf("%d of %d delivered at b", len(seen), len(ids))
		}
		return nil
	})
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("%s seen %d times at b", id, seen[id])
		}
		a.waitState(id, messages.StateDelivered)
	}
}

func TestFederationForwardFailedThenResubmit(t *testing.T) {
	fn := newFedNet()
	cfgA := fedConfig(t, fn, "a", "b")
	cfgA.ForwardMaxRetries = 3 // 300 ms of waiting
	a := startFed(t, fn, cfgA)
	b := startFed(t, fn, fedConfig(t, fn, "b", "a"))
	b.pullFrontend("fe-b", "2")
	a.waitPeer("b", messages.PeerHealthy)
	a.routeWhenKnown("2", "fe-b")

	fn.setCut("a", "b", true)
	a.waitPeer("b", messages.PeerUnhealthy)
	id := a.submitAs("ff-1", "2555", messages.StateForwardQueued)
	m := a.waitState(id, messages.StateForwardFailed)
	if m.Reason != messages.ReasonForwardTimeout {
		t.Fatalf("reason %q", m.Reason)
	}
	fn.setCut("a", "b", false)
	a.waitPeer("b", messages.PeerHealthy)
	a.must(200, "POST", "/api/messages/"+id+"/resubmit", nil, nil)
	got := b.pollOne("fe-b")
	b.ack("fe-b", messages.DeliveryResult{ID: got.ID, Status: messages.Delivered, Attempt: got.Attempt})
	a.waitState(id, messages.StateDelivered)
}

func TestFederationRegistrySurvivesRestart(t *testing.T) {
	fn := newFedNet()
	cfgA := fedConfig(t, fn, "a", "b")
	a := startFed(t, fn, cfgA)
	b := startFed(t, fn, fedConfig(t, fn, "b", "a"))
	b.pullFrontend("fe-b", "2")
	a.waitPeer("b", messages.PeerHealthy)
	a.routeWhenKnown("2", "fe-b")
	b.stop()
	a.stop()

	// b stays down; a restarted still knows b serves fe-b, so the message
	// queues for b instead of being refused (or delivered elsewhere).
	fn.setCut("a", "b", true)
	a2 := startFed(t, fn, cfgA)
	var r struct{ ID, State string }
	a2.must(202, "POST", "/api/messages", map[string]string{
		"id": "after-restart", "source_msisdn": "1", "destination_msisdn": "2555", "message_body": "x",
	}, &r)
	if r.State != string(messages.StateForwardQueued) {
		t.Fatalf("state %s, want forward_queued", r.State)
	}
}

func TestFederationRefusesUnknownCallers(t *testing.T) {
	fn := newFedNet()
	a := startFed(t, fn, fedConfig(t, fn, "a", "b"))
	// A node that a does not list as a peer.
	c := startFed(t, fn, fedConfig(t, fn, "c", "a"))
	polltest.Eventually(t, 20*time.Second, func() error {
		var peers []messages.PeerInfo
		c.must(200, "GET", "/api/peers", nil, &peers)
		if len(peers) != 1 || peers[0].State == messages.PeerHealthy || !strings.Contains(peers[0].LastError, messages.CodeUnknownPeer) {
			return fmt.Errorf("c's view of a: %+v", peers)
		}
		return nil
	})
	var peers []messages.PeerInfo
	a.must(200, "GET", "/api/peers", nil, &peers)
	for _, p := range peers {
		if p.Node == "c" {
			t.Fatalf("a lists c, which it was not told about: %+v", p)
		}
	}
}

// TestFederationMetricsAreCompleteAndLintClean: a federated node exports
// the federation metrics docs/metrics.md lists, lint-clean.
func TestFederationMetricsAreCompleteAndLintClean(t *testing.T) {
	_, a, b := forwardingPair(t)
	id := a.submit("m-1", "2555")
	got := b.pollOne("fe-b")
	b.ack("fe-b", messages.DeliveryResult{ID: id, Status: messages.Delivered, Attempt: got.Attempt})
	a.waitState(id, messages.StateDelivered)

	problems, err := testutil.GatherAndLint(a.node.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	// The store's gauges come from a stats cache that lives a second and
	// that the health exchange reads too: right after the delivery it may
	// still hold a snapshot taken while the forward was pending (a loaded
	// CI run saw forward_queue_depth 1). The scrape settles.
	polltest.Eventually(t, 10*time.Second, func() error {
		text := scrape(t, a)
		for _, want := range []string{
			`switchboard_federation_forward_completed_total{dest_controller="b"} 1`,
			`switchboard_forward_queue_depth{node="a",peer="b"} 0`,
			`switchboard_peer_state{peer="b",state="healthy"} 1`,
			`switchboard_peer_state{peer="b",state="unhealthy"} 0`,
			`switchboard_federation_health_check_seconds_bucket{peer="b"`,
		} {
			if !strings.Contains(text, want) {
				return fmt.Errorf("/metrics lacks %q", want)
			}
		}
		return nil
	})
}

// TestFederationBadCallersStoreNothing: forwards from a node that is not a
// peer, or naming another node in the body, are refused and store nothing.
// (b is started so that a knows it: an unknown caller is refused before
// its body is read, whatever the body.)
func TestFederationBadCallersStoreNothing(t *testing.T) {
	fn := newFedNet()
	a := startFed(t, fn, fedConfig(t, fn, "a", "b"))
	startFed(t, fn, fedConfig(t, fn, "b", "a"))
	a.waitPeer("b", messages.PeerHealthy)
	a.pullFrontend("fe-a", "1")
	fwd := messages.Forward{ID: "spoof-1", SourceMSISDN: "1", DestinationMSISDN: "1555", Body: "x",
		SourceSMSC: "mallory", DestSMSC: "a", Frontend: "fe-a"}
	call := func(from string, body any) (int, string) {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", a.base+"/api/federation/forward", bytes.NewReader(data))
		req.Header.Set(messages.FederationHeader, from)
		resp, err := a.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct{ Error struct{ Code string } }
		_ = json.NewDecoder(resp.Body).Decode(&doc)
		return resp.StatusCode, doc.Error.Code
	}
	if st, code := call("mallory", fwd); st != 403 || code != messages.CodeUnknownPeer {
		t.Fatalf("unknown node: %d %s", st, code)
	}
	if st, code := call("", fwd); st != 400 || code != messages.CodeInvalidRequest {
		t.Fatalf("no header: %d %s", st, code)
	}
	if st, code := call("b", map[string]any{"id": "spoof-1"}); st != 400 || code != messages.CodeInvalidRequest {
		t.Fatalf("missing fields: %d %s", st, code)
	}
	if st, code := call("mallory", map[string]any{"id": "spoof-1"}); st != 403 || code != messages.CodeUnknownPeer {
		t.Fatalf("missing fields from an unknown node: %d %s, want 403 %s before the body is read", st, code, messages.CodeUnknownPeer)
	}
	a.apiError(404, messages.CodeNotFound, "GET", "/api/messages/spoof-1", nil)
}

func scrape(t *testing.T, h *harness) string {
	t.Helper()
	resp, err := http.Get("http://" + h.node.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestFederationBatchLargerThanThePeersAdmission: a forward batch larger
// than the receiver's --max-pending-submits is admitted when nothing else
// waits there (refused each time, it would never get in, and its messages
// would fail for good once the forward timeout ran out).
func TestFederationBatchLargerThanThePeersAdmission(t *testing.T) {
	fn := newFedNet()
	a := startFed(t, fn, fedConfig(t, fn, "a", "b"))
	cfgB := fedConfig(t, fn, "b", "a")
	cfgB.MaxPendingSubmits = 2
	b := startFed(t, fn, cfgB)
	b.pullFrontend("fe-b", "2")
	a.waitPeer("b", messages.PeerHealthy)
	a.routeWhenKnown("2", "fe-b")

	// Queued during a cut, the messages go in one batch once it heals.
	ids := a.queueDuringCut(fn, "b", "big", 12)
	fn.setCut("a", "b", false)
	for _, id := range ids {
		a.waitState(id, messages.StateForwarded)
	}
	if m := b.message(ids[0]); m.State != messages.StatePending {
		t.Fatalf("%s at b: %s, want pending", ids[0], m.State)
	}
}

// TestFederationResubmitAtPeerReportsTheNewOutcome: a message failed at b,
// whose report to a waits (the link is cut), is resubmitted at b (as
// docs/federation.md advises for a message failed at the peer). The
// report owed of the first failure goes with the resubmit: when the link
// heals, a learns the outcome of the new attempt, not "delivered" for a
// message that no frontend had taken (which then kept the real outcome
// from being recorded).
func TestFederationResubmitAtPeerReportsTheNewOutcome(t *testing.T) {
	fn, a, b := forwardingPair(t)

	id := a.submit("rs-1", "2555")
	got := b.pollOne("fe-b")
	a.waitState(id, messages.StateForwarded)
	fn.setCut("a", "b", true)
	b.waitPeer("a", messages.PeerUnhealthy)
	b.ack("fe-b", messages.DeliveryResult{ID: got.ID, Status: messages.Failed, Reason: "first", Attempt: got.Attempt})
	b.waitState(id, messages.StateFailed)

	b.must(200, "POST", "/api/messages/"+id+"/resubmit", nil, nil)
	if m := b.message(id); m.State != messages.StatePending {
		t.Fatalf("b's copy is %s after the resubmit", m.State)
	}
	fn.setCut("a", "b", false)
	a.waitPeer("b", messages.PeerHealthy)
	again := b.pollOne("fe-b")
	b.ack("fe-b", messages.DeliveryResult{ID: again.ID, Status: messages.Failed, Reason: "second", Attempt: again.Attempt})
	m := a.waitState(id, messages.StateFailed)
	if m.Reason != "rejected: second" && !strings.HasSuffix(m.Reason, "second") {
		t.Errorf("a records %s failed with %q, want the second attempt's reason", id, m.Reason)
	}
	if slices.Contains(states(m), messages.StateDelivered) {
		t.Errorf("a's history %v: %s was never delivered", states(m), id)
	}
}

// postAs posts body to h's federation path as node from (without TLS the
// header is taken on trust).
func postAs(t *testing.T, h *harness, from, path string, body any) (int, string) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", h.base+path, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(messages.FederationHeader, from)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// TestFederationForwardAgainAfterFrontendGoneIsDuplicate: a's forward of a
// message b stored is sent again (its answer was lost) after b stopped
// serving the frontend. The protocol is idempotent on id: b holds the
// message, so the answer is duplicate with its state, not 422
// unknown_frontend_here (which makes a record it forward_failed,
// peer_rejected: stored nowhere, and invites a resubmit elsewhere). An id
// b does not hold still gets the refusal.
func TestFederationForwardAgainAfterFrontendGoneIsDuplicate(t *testing.T) {
	fn := newFedNet()
	a := startFed(t, fn, fedConfig(t, fn, "a", "b"))
	b := startFed(t, fn, fedConfig(t, fn, "b", "a"))
	b.must(200, "PUT", "/api/frontends/fe-b", map[string]string{"mode": "pull"}, nil)
	a.waitPeer("b", messages.PeerHealthy)
	a.routeWhenKnown("2", "fe-b")
	id := a.submit("dup-1", "2555")
	m := a.waitState(id, messages.StateForwarded)

	if status, body := b.do("DELETE", "/api/frontends/fe-b", nil); status >= 300 {
		t.Fatalf("delete fe-b at b: %d %s", status, body)
	}
	fwd := messages.ForwardOf(m)
	fwd.DestSMSC = "b"
	st, out := postAs(t, b, "a", "/api/federation/forward", fwd)
	if st != 202 || !strings.Contains(out, `"duplicate":true`) || !strings.Contains(out, `"state":"pending"`) {
		t.Fatalf("forward of %s again from its origin: %d %s, want 202 duplicate, pending (b holds it)", id, st, out)
	}
	fwd.ID = "dup-never-stored"
	if st, out := postAs(t, b, "a", "/api/federation/forward", fwd); st != 422 || !strings.Contains(out, messages.CodeNotOurFrontend) {
		t.Fatalf("forward of an id b does not hold, for a frontend it does not serve: %d %s, want 422 %s", st, out, messages.CodeNotOurFrontend)
	}
}

// TestFederationForwardOfAStoredIDWithOtherContentIsAConflict: b holds a
// message that a forwarded under id cc-1 (pending there). A forward from a
// of that id with other content (a's id reused once a purged its copy, a
// store restored from a backup) is another message: b refuses it 409
// id_conflict and stores nothing, and a records its message
// forward_failed (peer_rejected) instead of forwarded with the stored
// copy's state. The same content sent again is a duplicate, whatever its
// trace context.
func TestFederationForwardOfAStoredIDWithOtherContentIsAConflict(t *testing.T) {
	_, a, b := forwardingPair(t)
	held := messages.Forward{ID: "cc-1", SourceMSISDN: "15550001", DestinationMSISDN: "2555", Body: "the first",
		SourceSMSC: "a", DestSMSC: "b", Frontend: "fe-b"}
	if st, out := postAs(t, b, "a", "/api/federation/forward", held); st != 202 || !strings.Contains(out, `"duplicate":false`) {
		t.Fatalf("first forward of cc-1: %d %s", st, out)
	}
	held.Traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if st, out := postAs(t, b, "a", "/api/federation/forward", held); st != 202 || !strings.Contains(out, `"duplicate":true`) {
		t.Fatalf("the same forward again: %d %s, want 202 duplicate", st, out)
	}
	other := held
	other.Body = "other content"
	if st, out := postAs(t, b, "a", "/api/federation/forward", other); st != 409 || !strings.Contains(out, messages.CodeIDConflict) {
		t.Fatalf("forward of cc-1 with another body: %d %s, want 409 %s", st, out, messages.CodeIDConflict)
	}

	id := a.submit("cc-1", "2555") // its body is "hello cc-1"
	m := a.waitState(id, messages.StateForwardFailed)
	if m.Reason != messages.ReasonPeerRejected || !strings.Contains(m.History[len(m.History)-1].Detail, messages.CodeIDConflict) {
		t.Errorf("a's cc-1 is forward_failed with reason %q, history %+v; want %s for %s", m.Reason, m.History, messages.ReasonPeerRejected, messages.CodeIDConflict)
	}
	if slices.Contains(states(m), messages.StateForwarded) {
		t.Errorf("a's history %v: b never took a's cc-1", states(m))
	}
	if got := b.message("cc-1"); got.Body != held.Body {
		t.Errorf("b's cc-1 has body %q, want %q", got.Body, held.Body)
	}
}

// TestFederationResubmitAtOriginForwardsTheSameContentAsADuplicate: a
// message that failed at b is resubmitted at a and forwarded to b again
// with the same content (a new attempt, another time): b answers it as a
// duplicate, failed, and a records it failed again at once with b's reason
// (docs/federation.md), not a conflict.
func TestFederationResubmitAtOriginForwardsTheSameContentAsADuplicate(t *testing.T) {
	_, a, b := forwardingPair(t)
	id := a.submit("rso-1", "2555")
	got := b.pollOne("fe-b")
	b.ack("fe-b", messages.DeliveryResult{ID: got.ID, Status: messages.Failed, Reason: "no such subscriber", Attempt: got.Attempt})
	a.waitState(id, messages.StateFailed)

	a.must(200, "POST", "/api/messages/"+id+"/resubmit", nil, nil)
	var m messages.Message
	polltest.Eventually(t, 20*time.Second, func() error {
		m = a.message(id)
		if n := len(slices.DeleteFunc(states(m), func(s messages.State) bool { return s != messages.StateFailed })); n != 2 {
			return fmt.Errorf("a's %s: %v", id, states(m))
		}
		return nil
	})
	if m.State != messages.StateFailed || !strings.HasSuffix(m.Reason, "no such subscriber") || slices.Contains(states(m), messages.StateForwardFailed) {
		t.Errorf("a's %s after the resubmit: %s (%q), history %v; want failed with b's reason", id, m.State, m.Reason, states(m))
	}
}

// TestFederationForwardNamingAnotherOriginRefused: c, a peer of b, forwards
// a message under the id of a's message naming a as its source_smsc. b
// refuses it (403 node_mismatch) and stores nothing, so a's own message
// under that id is stored and delivered at b with a's content.
func TestFederationForwardNamingAnotherOriginRefused(t *testing.T) {
	fn := newFedNet()
	a := startFed(t, fn, fedConfig(t, fn, "a", "b"))
	b := startFed(t, fn, fedConfig(t, fn, "b", "a", "c"))
	startFed(t, fn, fedConfig(t, fn, "c", "b"))
	b.pullFrontend("fe-b", "2")
	b.waitPeer("c", messages.PeerHealthy)
	a.waitPeer("b", messages.PeerHealthy)
	a.routeWhenKnown("2", "fe-b")

	spoof := messages.Forward{ID: "victim-1", SourceMSISDN: "1", DestinationMSISDN: "2555", Body: "not a's",
		SourceSMSC: "a", DestSMSC: "b", Frontend: "fe-b"}
	if st, out := postAs(t, b, "c", "/api/federation/forward", spoof); st != 403 || !strings.Contains(out, messages.CodeNodeMismatch) {
		t.Fatalf("c's forward naming a as its source: %d %s, want 403 %s", st, out, messages.CodeNodeMismatch)
	}
	id := a.submit("victim-1", "2555")
	a.waitState(id, messages.StateForwarded)
	if got := b.pollOne("fe-b"); got.ID != id || got.Body == spoof.Body {
		t.Fatalf("b's frontend got %s %q: want a's own message", got.ID, got.Body)
	}
}

// TestFederationLongFailureReportsReachTheOrigin: 200 messages forwarded to
// b fail there with a reason a pull consumer may give (1014 '&', within
// the 1024 bytes allowed, six bytes each in JSON). b's reports wait during
// a cut; once it heals b sends them in requests that fit a's 1 MiB bound
// (one of 200 would be refused 413 and sent again whole, for ever), and a
// records every outcome.
func TestFederationLongFailureReportsReachTheOrigin(t *testing.T) {
	logs := map[string]*logtest.Buffer{}
	fn, a, b := forwardingPair(t, func(c *switchboard.Config) {
		c.Logger, logs[c.Name] = logtest.New()
		// The subject is how the reports are split, not how fast a
		// applies a request of 1 MiB: on a loaded machine that can take
		// longer than these tests' usual 2 s.
		c.HTTPTimeout = 10 * time.Second
	})

	const n = 200
	var ids []string
	for i := range n {
		ids = append(ids, a.submit(fmt.Sprintf("long-%d", i), "2555"))
	}
	var got []messages.Outgoing
	polltest.Eventually(t, 30*time.Second, func() error {
		got = append(got, b.poll("fe-b", 500, 200, 600000)...)
		if len(got) < n {
			return fmt.Errorf("%d of %d at b", len(got), n)
		}
		return nil
	})
	fn.setCut("a", "b", true)
	b.waitPeer("a", messages.PeerUnhealthy)
	reason := strings.Repeat("&", 1014) // "rejected: " + this is 1024 bytes
	for lo := 0; lo < n; lo += 50 {
		var rs []messages.DeliveryResult
		for _, o := range got[lo:min(lo+50, n)] {
			rs = append(rs, messages.DeliveryResult{ID: o.ID, Status: messages.Failed, Reason: reason, Attempt: o.Attempt})
		}
		b.ack("fe-b", rs...)
	}
	b.waitState(ids[n-1], messages.StateFailed)
	fn.setCut("a", "b", false)
	a.waitPeer("b", messages.PeerHealthy)
	polltest.Eventually(t, 60*time.Second, func() error {
		for _, id := range ids {
			if m := a.message(id); m.State != messages.StateFailed {
				return fmt.Errorf("%s is %s at a, failed at b", id, m.State)
			}
		}
		return nil
	})
	// A status request may fail on its way (a report committed before b's
	// queue heard of the cut goes out into it; a slow answer times out)
	// and be sent again. What must never come is a's refusal of a batch.
	for _, rec := range logs["b"].Records(t, "request to peer failed") {
		if err, _ := rec["err"].(string); rec["kind"] == "status" && strings.Contains(err, "peer answered") {
			t.Errorf("a refused b's reports: %v", err)
		}
	}
}
