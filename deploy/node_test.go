package deploy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/actors/bus/bustest"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/transport"
)

// fedNet lets the test nodes name each other ("b.test:1") before their
// random ports are known: each node's transport resolves the name to the
// real HTTPS address at call time and calls it with the real peer client.
type fedNet struct {
	mu    sync.Mutex
	addrs map[string]string
}

func symbolic(name string) string { return name + ".test:1" }

func (f *fedNet) set(name, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs[symbolic(name)] = addr
}

func (f *fedNet) resolve(addr string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	real, ok := f.addrs[addr]
	if !ok {
		return "", fmt.Errorf("dial %s: no such host", addr)
	}
	return real, nil
}

// testNode is a federated node started through the embedding API on random
// loopback ports, with an HTTPS client for its API.
type testNode struct {
	t      *testing.T
	node   *switchboard.Node
	base   string
	client *http.Client
	fails  *atomic.Int32
}

func startFedNode(t *testing.T, fn *fedNet, name string, peers ...string) *testNode {
	t.Helper()
	pc := httpapi.DefaultPeerClientConfig()
	pc.Node, pc.InsecureSkipVerify = name, true
	client, err := httpapi.NewPeerClient(pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)

	fails := &atomic.Int32{}
	cfg := baseConfig(t, name)
	cfg.Federation = true
	for _, p := range peers {
		cfg.Peers = append(cfg.Peers, symbolic(p))
	}
	cfg.HealthInterval = 100 * time.Millisecond
	cfg.RegistryInterval = 100 * time.Millisecond
	cfg.ForwardRetryInterval = 100 * time.Millisecond
	cfg.DNSPollInterval = 200 * time.Millisecond
	cfg.HTTPTimeout = 2 * time.Second
	// fails makes that many Forward calls fail as a cut connection would,
	// so that the failed-request counter has a sample.
	cfg.Transport = transport.Redirect{Inner: client, Resolve: func(call, addr string) (string, error) {
		if call == transport.CallForward && fails.Add(-1) >= 0 {
			return "", fmt.Errorf("dial %s: connection refused (injected by the test)", addr)
		}
		return fn.resolve(addr)
	}}

	tn := runNode(t, cfg)
	tn.fails = fails
	fn.set(name, tn.node.Addr())
	return tn
}

// baseConfig is a test node's configuration: random loopback ports, quick
// retries.
func baseConfig(t *testing.T, name string) switchboard.Config {
	cfg := switchboard.DefaultConfig()
	cfg.Name, cfg.InstanceID = name, name+"-0"
	cfg.DataDir = t.TempDir()
	cfg.Listen, cfg.MetricsListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.DeliveryRetryMin, cfg.DeliveryRetryMax = 20*time.Millisecond, 80*time.Millisecond
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

// runNode starts a node with cfg and stops it when the test ends.
func runNode(t *testing.T, cfg switchboard.Config) *testNode {
	t.Helper()
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// The node serves a self-signed certificate on loopback.
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	tn := &testNode{t: t, node: n, base: "https://" + n.Addr(), client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, fails: &atomic.Int32{}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("Stop %s: %v", cfg.Name, err)
		}
		tn.client.CloseIdleConnections()
	})
	return tn
}

// startBusNode starts a node on Postgres with the delivery bus on a
// JetStream server of the test's own: the bus's metrics exist only there.
func startBusNode(t *testing.T) *testNode {
	t.Helper()
	cfg := baseConfig(t, "c")
	cfg.Postgres, cfg.NatsURL = pgtest.DSN(t), bustest.Start(t).URL()
	return runNode(t, cfg)
}

// driveBus makes the bus node deliver through the bus: one message after a
// retry (a delayed redelivery), one failed for good (termed).
func driveBus(t *testing.T, c *testNode) {
	t.Helper()
	c.must(200, "PUT", "/api/frontends/fe-c", map[string]string{"mode": "pull"}, nil)
	c.must(200, "PUT", "/api/routes/3", map[string]string{"frontend": "fe-c"}, nil)
	c.submit("bus-1", "3555")
	c.ack("fe-c", c.pollOne("fe-c"), messages.Retry)
	c.ack("fe-c", c.pollOne("fe-c"), messages.Delivered)
	c.waitState("bus-1", messages.StateDelivered)
	c.submit("bus-2", "3556")
	c.ack("fe-c", c.pollOne("fe-c"), messages.Failed)
	c.waitState("bus-2", messages.StateFailed)
}

// do sends a JSON request and returns the status and the body.
func (n *testNode) do(method, path string, body any) (int, []byte) {
	n.t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			n.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, n.base+path, rd)
	if err != nil {
		n.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		n.t.Fatal(err)
	}
	return resp.StatusCode, data
}

func (n *testNode) must(want int, method, path string, body, out any) {
	n.t.Helper()
	status, data := n.do(method, path, body)
	if status != want {
		n.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			n.t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

func (n *testNode) submit(id, dest string) {
	n.t.Helper()
	n.must(202, "POST", "/api/messages", map[string]string{
		"id": id, "source_msisdn": "15550001", "destination_msisdn": dest, "message_body": "hello " + id,
	}, nil)
}

// pollOne long-polls fe until a message comes.
func (n *testNode) pollOne(fe string) messages.Outgoing {
	n.t.Helper()
	var got messages.Outgoing
	eventually(n.t, 20*time.Second, func() error {
		var r struct{ Messages []messages.Outgoing }
		n.must(200, "POST", "/api/frontends/"+fe+"/poll", map[string]any{"max": 1, "wait_ms": 500, "lease_ms": 30000}, &r)
		if len(r.Messages) != 1 {
			return fmt.Errorf("no message at %s", fe)
		}
		got = r.Messages[0]
		return nil
	})
	return got
}

func (n *testNode) ack(fe string, m messages.Outgoing, status messages.DeliveryStatus) {
	n.t.Helper()
	n.must(200, "POST", "/api/frontends/"+fe+"/ack", map[string]any{
		"results": []messages.DeliveryResult{{ID: m.ID, Status: status, Attempt: m.Attempt, Reason: "test"}},
	}, nil)
}

func (n *testNode) waitState(id string, state messages.State) {
	n.t.Helper()
	eventually(n.t, 20*time.Second, func() error {
		var m messages.Message
		n.must(200, "GET", "/api/messages/"+id, nil, &m)
		if m.State != state {
			return fmt.Errorf("message %s is %s, want %s", id, m.State, state)
		}
		return nil
	})
}

func (n *testNode) waitPeer(name string, state messages.PeerState) {
	n.t.Helper()
	eventually(n.t, 20*time.Second, func() error {
		var peers []messages.PeerInfo
		n.must(200, "GET", "/api/peers", nil, &peers)
		for _, p := range peers {
			if p.Node == name && p.State == state {
				return nil
			}
		}
		return fmt.Errorf("peer %s not %s in %+v", name, state, peers)
	})
}

// scrape fetches the node's /metrics from its plain-HTTP metrics listener.
func (n *testNode) scrape() (scrape, error) {
	text, err := n.scrapeText()
	if err != nil {
		return nil, err
	}
	return parseScrape(text)
}

// scrapeText is the node's /metrics as served.
func (n *testNode) scrapeText() (string, error) {
	req, err := http.NewRequest("GET", "http://"+n.node.MetricsAddr()+"/metrics", nil)
	if err != nil {
		return "", err
	}
	req.Close = true // no idle connection left for goleak to find
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("GET /metrics: %d %s", resp.StatusCode, data)
	}
	return string(data), nil
}

// driveTraffic makes node a exercise what the dashboard and the alerts
// watch: a message forwarded to b and reported delivered back (after one
// forward request failed), and local deliveries that end delivered after a
// retry, and failed.
func driveTraffic(t *testing.T, a, b *testNode) {
	t.Helper()
	b.must(200, "PUT", "/api/frontends/fe-b", map[string]string{"mode": "pull"}, nil)
	b.must(200, "PUT", "/api/routes/2", map[string]string{"frontend": "fe-b"}, nil)
	a.must(200, "PUT", "/api/frontends/fe-a", map[string]string{"mode": "pull"}, nil)
	a.must(200, "PUT", "/api/routes/1", map[string]string{"frontend": "fe-a"}, nil)
	a.waitPeer("b", messages.PeerHealthy)
	eventually(t, 20*time.Second, func() error {
		if status, body := a.do("PUT", "/api/routes/2", map[string]string{"frontend": "fe-b"}); status != 200 {
			return fmt.Errorf("route 2 -> fe-b on a: %d %s", status, body)
		}
		return nil
	})

	// Forwarded: the first forward request fails, the message waits and
	// goes when b passes its next check; b delivers and reports back.
	a.fails.Store(1)
	a.submit("fwd-1", "2555")
	got := b.pollOne("fe-b")
	b.ack("fe-b", got, messages.Delivered)
	a.waitState("fwd-1", messages.StateDelivered)

	// Local: a retry, then delivered; and one failed for good.
	a.submit("loc-1", "1555")
	got = a.pollOne("fe-a")
	a.ack("fe-a", got, messages.Retry)
	got = a.pollOne("fe-a")
	a.ack("fe-a", got, messages.Delivered)
	a.waitState("loc-1", messages.StateDelivered)
	a.submit("loc-2", "1556")
	got = a.pollOne("fe-a")
	a.ack("fe-a", got, messages.Failed)
	a.waitState("loc-2", messages.StateFailed)
}

// eventually retries f until it returns nil or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
