package switchboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
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

// startRefused starts a node of cfg and wants its Start to fail, which it
// returns; a node that starts is stopped and the test fails with started.
func startRefused(t *testing.T, cfg switchboard.Config, started string) error {
	t.Helper()
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = n.Start(t.Context())
	if err == nil {
		_ = n.Stop(context.Background())
		t.Fatal(started)
	}
	return err
}

// onEachStore runs test once on a node of each store, the embedded one and
// Postgres, as subtests named sqlite and postgres.
func onEachStore(t *testing.T, test func(t *testing.T, h *harness)) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			cfg := testConfig(t)
			if store == "postgres" {
				cfg.Postgres = pgtest.DSN(t)
			}
			test(t, startNode(t, cfg))
		})
	}
}

func startNode(t *testing.T, cfg switchboard.Config) *harness {
	t.Helper()
	n := nodetest.Embedded(t, cfg)
	h := &harness{t: t, node: n, cfg: cfg, base: "https://" + n.Addr(), token: cfg.APIToken, client: &http.Client{}}
	if cfg.Listen != "" {
		h.client = trustingClient(t, filepath.Join(cfg.DataDir, "selfsigned.pem"))
	}
	t.Cleanup(func() { h.stop() })
	return h
}

func trustingClient(t *testing.T, certFile string) *http.Client {
	t.Helper()
	trust, err := apiclient.TrustFile(certFile, "localhost")
	if err != nil {
		t.Fatalf("trust the node's certificate: %v", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = trust
	tr.MaxIdleConnsPerHost = 32
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func (h *harness) stop() {
	nodetest.StopEmbedded(h.t, h.node)
	h.client.CloseIdleConnections()
}

// api is a client of the node's API with the harness's token of the
// moment (a test may change h.token).
func (h *harness) api() *nodetest.Client {
	base, err := url.Parse(h.base)
	if err != nil {
		h.t.Fatal(err)
	}
	return nodetest.NewClient(h.t, apiclient.New(apiclient.Config{Base: base, Token: h.token, HTTP: h.client}))
}

// do sends a request with a JSON body (raw []byte and string bodies are
// sent as is) and returns the status and body.
func (h *harness) do(method, path string, body any) (int, []byte) {
	h.t.Helper()
	return h.api().Do(method, path, body)
}

// must sends a request, checks its status and decodes the reply into out.
func (h *harness) must(want int, method, path string, body, out any) {
	h.t.Helper()
	h.api().Must(want, method, path, body, out)
}

// apiError checks that a request fails with status and code, and returns
// the error's message.
func (h *harness) apiError(status int, code, method, path string, body any) string {
	h.t.Helper()
	return h.api().APIError(status, code, method, path, body)
}

func (h *harness) pullFrontend(name string, prefixes ...string) {
	h.t.Helper()
	h.api().PullFrontend(name, prefixes...)
}

func (h *harness) webhookFrontend(name, url string, prefixes ...string) {
	h.t.Helper()
	h.must(200, "PUT", "/api/frontends/"+name, map[string]string{"mode": "webhook", "url": url}, nil)
	h.api().Routes(name, prefixes...)
}

func (h *harness) submit(id, dest string) string {
	h.t.Helper()
	return h.submitAs(id, dest, messages.StatePending)
}

// submitAs submits and checks the state the 202 reports.
func (h *harness) submitAs(id, dest string, state messages.State) string {
	h.t.Helper()
	r := h.api().Submit(id, dest)
	if r.State != state || r.ID == "" || (id != "" && r.ID != id) {
		h.t.Fatalf("submit reply %+v", r)
	}
	return r.ID
}

func (h *harness) message(id string) messages.Message {
	h.t.Helper()
	return h.api().Message(id)
}

// waitState polls the API until the message is in state (or fails after 20s).
func (h *harness) waitState(id string, state messages.State) messages.Message {
	h.t.Helper()
	return h.api().WaitState(id, state)
}

// final polls the API until the message is final (or fails after within).
func (h *harness) final(id string, within time.Duration) messages.Message {
	h.t.Helper()
	var m messages.Message
	polltest.Eventually(h.t, within, func() error {
		if m = h.message(id); !m.State.Final() {
			return fmt.Errorf("%s %s after %d attempts", id, m.State, m.Attempts)
		}
		return nil
	})
	return m
}

func (h *harness) poll(fe string, max int, waitMS, leaseMS int64) []messages.Outgoing {
	h.t.Helper()
	return h.api().Poll(fe, max, waitMS, leaseMS)
}

func (h *harness) ack(fe string, results ...messages.DeliveryResult) []messages.AckOutcome {
	h.t.Helper()
	return h.api().Ack(fe, results...)
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

func jsonDecode(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }
