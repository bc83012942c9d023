package deploy

import (
	"crypto/tls"
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
	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
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
	*nodetest.Client
	t     *testing.T
	node  *switchboard.Node
	fails *atomic.Int32
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
	n := nodetest.Embedded(t, cfg)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// The node serves a self-signed certificate on loopback.
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	api, err := apiclient.NewURL("https://"+n.Addr(), apiclient.Config{Token: cfg.APIToken, HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{Client: nodetest.NewClient(t, api), t: t, node: n, fails: &atomic.Int32{}}
	t.Cleanup(api.Close)
	return tn
}

// startSiteNode starts instance id of site "s" on the Postgres database
// dsn: the instances of a site share its name, its store and its API
// token (by which, without --tls-ca, the ring master lets its members'
// ring calls in).
func startSiteNode(t *testing.T, dsn, id string) *testNode {
	t.Helper()
	cfg := baseConfig(t, "s")
	cfg.InstanceID, cfg.Postgres = id, dsn
	cfg.APIToken = "site-s-admin-token-0123"
	cfg.InsecureSkipVerify = true // the instances serve self-signed certificates
	cfg.RingPublishInterval = 500 * time.Millisecond
	cfg.RingReconnectBackoffMin, cfg.RingReconnectBackoffMax = 50*time.Millisecond, 200*time.Millisecond
	cfg.RingReconnectMaxAttempts = 20
	return runNode(t, cfg)
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
	c.Must(200, "PUT", "/api/frontends/fe-c", map[string]string{"mode": "pull"}, nil)
	c.Must(200, "PUT", "/api/routes/3", map[string]string{"frontend": "fe-c"}, nil)
	c.Submit("bus-1", "3555")
	c.ack("fe-c", c.PollOne("fe-c"), messages.Retry)
	c.ack("fe-c", c.PollOne("fe-c"), messages.Delivered)
	c.WaitState("bus-1", messages.StateDelivered)
	c.Submit("bus-2", "3556")
	c.ack("fe-c", c.PollOne("fe-c"), messages.Failed)
	c.WaitState("bus-2", messages.StateFailed)
}

// ack acks m at fe with status.
func (n *testNode) ack(fe string, m messages.Outgoing, status messages.DeliveryStatus) {
	n.t.Helper()
	n.Ack(fe, messages.DeliveryResult{ID: m.ID, Status: status, Attempt: m.Attempt, Reason: "test"})
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
	b.Must(200, "PUT", "/api/frontends/fe-b", map[string]string{"mode": "pull"}, nil)
	b.Must(200, "PUT", "/api/routes/2", map[string]string{"frontend": "fe-b"}, nil)
	a.Must(200, "PUT", "/api/frontends/fe-a", map[string]string{"mode": "pull"}, nil)
	a.Must(200, "PUT", "/api/routes/1", map[string]string{"frontend": "fe-a"}, nil)
	a.WaitPeer("b", messages.PeerHealthy)
	polltest.Eventually(t, 20*time.Second, func() error {
		if status, body := a.Do("PUT", "/api/routes/2", map[string]string{"frontend": "fe-b"}); status != 200 {
			return fmt.Errorf("route 2 -> fe-b on a: %d %s", status, body)
		}
		return nil
	})

	// Forwarded: the first forward request fails, the message waits and
	// goes when b passes its next check; b delivers and reports back.
	a.fails.Store(1)
	a.Submit("fwd-1", "2555")
	got := b.PollOne("fe-b")
	b.ack("fe-b", got, messages.Delivered)
	a.WaitState("fwd-1", messages.StateDelivered)

	// Local: a retry, then delivered; and one failed for good.
	a.Submit("loc-1", "1555")
	got = a.PollOne("fe-a")
	a.ack("fe-a", got, messages.Retry)
	got = a.PollOne("fe-a")
	a.ack("fe-a", got, messages.Delivered)
	a.WaitState("loc-1", messages.StateDelivered)
	a.Submit("loc-2", "1556")
	got = a.PollOne("fe-a")
	a.ack("fe-a", got, messages.Failed)
	a.WaitState("loc-2", messages.StateFailed)
}
