package switchboard_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/messages"
)

// harness is one node started through the embedding API with real HTTPS on
// a random loopback port, and a client that trusts its certificate.
type harness struct {
	t      *testing.T
	node   *switchboard.Node
	cfg    switchboard.Config
	base   string
	client *http.Client
	token  string
}

func testConfig(t *testing.T) switchboard.Config {
	cfg := switchboard.DefaultConfig()
	cfg.Name = "test-node"
	cfg.InstanceID = "test-node-0"
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.Logger = testLogger(t)
	cfg.DeliveryRetryMin = 20 * time.Millisecond
	cfg.DeliveryRetryMax = 80 * time.Millisecond
	cfg.WebhookTimeout = 2 * time.Second
	cfg.SMPPReconnectMin = 20 * time.Millisecond
	cfg.SMPPReconnectMax = 100 * time.Millisecond
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.DeadLetterThrottle = 10 * time.Millisecond // goleak waits for its goroutine
	return cfg
}

// testLogger writes to the test log only when SWITCHBOARD_TEST_LOG is set:
// the nodes are chatty and the failures speak for themselves.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("SWITCHBOARD_TEST_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func startNode(t *testing.T, cfg switchboard.Config) *harness {
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
	h := &harness{t: t, node: n, cfg: cfg, base: "https://" + n.Addr(), token: cfg.APIToken, client: &http.Client{}}
	if cfg.Listen != "" {
		h.client = trustingClient(t, filepath.Join(cfg.DataDir, "selfsigned.pem"))
	}
	t.Cleanup(func() { h.stop() })
	return h
}

func trustingClient(t *testing.T, certFile string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatalf("read node certificate: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", certFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: "localhost"}
	tr.MaxIdleConnsPerHost = 32
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func (h *harness) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.node.Stop(ctx); err != nil {
		h.t.Errorf("Stop: %v", err)
	}
	h.client.CloseIdleConnections()
}

// do sends a request with a JSON body (raw []byte bodies are sent as is)
// and returns the status and body.
func (h *harness) do(method, path string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, data
}

// must sends a request, checks its status and decodes the reply into out.
func (h *harness) must(want int, method, path string, body, out any) {
	h.t.Helper()
	status, data := h.do(method, path, body)
	if status != want {
		h.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			h.t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

// apiError checks that a request fails with status and code.
func (h *harness) apiError(status int, code, method, path string, body any) {
	h.t.Helper()
	got, data := h.do(method, path, body)
	var doc struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		h.t.Fatalf("%s %s: error body %q is not the JSON error document: %v", method, path, data, err)
	}
	if got != status || doc.Error.Code != code || doc.Error.Message == "" {
		h.t.Fatalf("%s %s: got %d %q (%s), want %d %q", method, path, got, doc.Error.Code, doc.Error.Message, status, code)
	}
}

func (h *harness) pullFrontend(name string, prefixes ...string) {
	h.t.Helper()
	h.must(200, "PUT", "/api/frontends/"+name, map[string]string{"mode": "pull"}, nil)
	for _, p := range prefixes {
		h.must(200, "PUT", "/api/routes/"+p, map[string]string{"frontend": name}, nil)
	}
}

func (h *harness) webhookFrontend(name, url string, prefixes ...string) {
	h.t.Helper()
	h.must(200, "PUT", "/api/frontends/"+name, map[string]string{"mode": "webhook", "url": url}, nil)
	for _, p := range prefixes {
		h.must(200, "PUT", "/api/routes/"+p, map[string]string{"frontend": name}, nil)
	}
}

func (h *harness) submit(id, dest string) string {
	h.t.Helper()
	return h.submitAs(id, dest, messages.StatePending)
}

// submitAs submits and checks the state the 202 reports.
func (h *harness) submitAs(id, dest string, state messages.State) string {
	h.t.Helper()
	var r struct{ ID, State string }
	h.must(202, "POST", "/api/messages", map[string]string{
		"id": id, "source_msisdn": "15550001", "destination_msisdn": dest, "message_body": "hello " + id,
	}, &r)
	if r.State != string(state) || r.ID == "" || (id != "" && r.ID != id) {
		h.t.Fatalf("submit reply %+v", r)
	}
	return r.ID
}

func (h *harness) message(id string) messages.Message {
	h.t.Helper()
	var m messages.Message
	h.must(200, "GET", "/api/messages/"+id, nil, &m)
	return m
}

// waitState polls the API until the message is in state (or fails after 20s).
func (h *harness) waitState(id string, state messages.State) messages.Message {
	h.t.Helper()
	var m messages.Message
	eventually(h.t, 20*time.Second, func() error {
		m = h.message(id)
		if m.State != state {
			return fmt.Errorf("message %s is %s, want %s", id, m.State, state)
		}
		return nil
	})
	return m
}

type pollReply struct {
	Messages []messages.Outgoing `json:"messages"`
}

func (h *harness) poll(fe string, max int, waitMS, leaseMS int64) []messages.Outgoing {
	h.t.Helper()
	var r pollReply
	h.must(200, "POST", "/api/frontends/"+fe+"/poll", map[string]any{"max": max, "wait_ms": waitMS, "lease_ms": leaseMS}, &r)
	return r.Messages
}

func (h *harness) ack(fe string, results ...messages.DeliveryResult) []messages.AckOutcome {
	h.t.Helper()
	var r struct{ Results []messages.AckOutcome }
	h.must(200, "POST", "/api/frontends/"+fe+"/ack", map[string]any{"results": results}, &r)
	return r.Results
}

type statusDoc struct {
	Node        string
	Store       string
	Counts      map[string]int64
	OutboxDepth int64 `json:"outbox_depth"`
	DLQDepth    int64 `json:"dlq_depth"`
	Frontends   []messages.Frontend
}

func (h *harness) status() statusDoc {
	h.t.Helper()
	var s statusDoc
	h.must(200, "GET", "/api/status", nil, &s)
	return s
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
		time.Sleep(10 * time.Millisecond)
	}
}

func jsonDecode(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }
