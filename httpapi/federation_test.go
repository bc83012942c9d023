package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
)

// pki is a CA and node certificates made by the certs package, as
// `switchboard certs init` makes them.
type pki struct {
	dir  string
	pool *x509.CertPool
}

// Node names of the federation tests: home serves, peer-a calls, peer-b is
// a node of the same CA that home does not know.
const (
	homeNode = "home"
	peerA    = "peer-a"
	peerB    = "peer-b"
)

func newPKI(t *testing.T, nodes ...string) pki {
	t.Helper()
	dir := t.TempDir()
	if err := certs.InitCA(dir, nodes, time.Now()); err != nil {
		t.Fatal(err)
	}
	caFile, _ := certs.CAFiles(dir)
	pool, err := certs.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	return pki{dir: dir, pool: pool}
}

func (p pki) pair(t *testing.T, node string) tls.Certificate {
	t.Helper()
	certFile, keyFile := certs.NodeFiles(p.dir, node)
	pair, err := certs.LoadKeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// serverTLS is the gateway's TLS configuration for node: with mtls the
// CA verifies client certificates, as with --tls-ca.
func (p pki) serverTLS(t *testing.T, node string, mtls bool) *tls.Config {
	t.Helper()
	certFile, keyFile := certs.NodeFiles(p.dir, node)
	caFile := ""
	if mtls {
		caFile, _ = certs.CAFiles(p.dir)
	}
	cfg, err := certs.ServerConfig(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startTLS serves h over real TLS with cfg on a loopback port.
func startTLS(t *testing.T, h http.Handler, cfg *tls.Config, opts ...func(*httptest.Server)) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	for _, o := range opts {
		o(srv)
	}
	// Refused handshakes are part of the tests; keep them off the output.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = cfg
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// fedBackend is the node behind the federation tests: it knows the peers
// in known, records every federation call, and stores forwards by id. Its
// settings change between requests, so they are read under mu as well.
type fedBackend struct {
	stubBackend

	mu    sync.Mutex
	node  string
	known map[string]bool
	// refuse, when set, is the error of every federation call (checked
	// after the known-peer check).
	refuse error
	// refuseID refuses the whole call when it carries one of these ids.
	refuseID map[string]error
	// entered, when set, receives each call's caller; block, when set,
	// holds calls until it is closed or their context ends.
	entered chan string
	block   chan struct{}

	// reorder answers a batch's results (forwards, reports) in reverse
	// order, and misname a single report's reply for another message (a
	// peer breaking the protocol).
	reorder, misname bool
	// off is --federation=false.
	off bool

	calls    []string // "<kind> from <node>"
	stored   []string // forward ids accepted
	inFlight int
	maxIn    int
}

func newFedBackend(node string, known ...string) *fedBackend {
	b := &fedBackend{node: node, known: map[string]bool{}, refuseID: map[string]error{}}
	for _, k := range known {
		b.known[k] = true
	}
	return b
}

// set changes the backend's settings.
func (b *fedBackend) set(f func(b *fedBackend)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b)
}

func (b *fedBackend) name() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.node
}

func (b *fedBackend) Identity() messages.Identity {
	node := b.name()
	return messages.Identity{Node: node, InstanceID: node + "-0", ProtocolVersion: messages.ProtocolVersion,
		Capabilities: []string{messages.CapForwardBatch, messages.CapStatusBatch}}
}

// FederationCaller admits the known peers while federation is on; the
// calls refused here are not recorded (they reach no handler).
func (b *fedBackend) FederationCaller(from string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.off:
		return messages.Errorf(messages.CodeFederationOff, "federation is off on %s", b.node)
	case !b.known[from]:
		return messages.Errorf(messages.CodeUnknownPeer, "%s does not know a peer named %q", b.node, from)
	}
	return nil
}

// enter records a call and applies the backend's admission rules; ids are
// the messages the call carries.
func (b *fedBackend) enter(ctx context.Context, kind, from string, ids ...string) (func(), error) {
	b.mu.Lock()
	b.calls = append(b.calls, kind+" from "+from)
	b.inFlight++
	b.maxIn = max(b.maxIn, b.inFlight)
	entered, block, known, refuse := b.entered, b.block, b.known[from], b.refuse
	for _, id := range ids {
		if err := b.refuseID[id]; err != nil && refuse == nil {
			refuse = err
		}
	}
	b.mu.Unlock()
	leave := func() {
		b.mu.Lock()
		b.inFlight--
		b.mu.Unlock()
	}
	if entered != nil {
		entered <- from
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			leave()
			return nil, ctx.Err()
		}
	}
	switch {
	case !known:
		leave()
		return nil, messages.Errorf(messages.CodeUnknownPeer, "%s does not know a peer named %q", b.name(), from)
	case refuse != nil:
		leave()
		return nil, refuse
	}
	return leave, nil
}

func (b *fedBackend) FederationHealth(ctx context.Context, from string, h messages.Health) (messages.Health, error) {
	leave, err := b.enter(ctx, "health", from)
	if err != nil {
		return messages.Health{}, err
	}
	defer leave()
	return messages.Health{Node: b.name(), Time: h.Time, Status: messages.HealthOK, ForwardQueueDepth: 3}, nil
}

func (b *fedBackend) FederationRegistry(ctx context.Context, from string, r messages.Registry) (messages.Registry, error) {
	leave, err := b.enter(ctx, "registry", from)
	if err != nil {
		return messages.Registry{}, err
	}
	defer leave()
	return messages.Registry{Node: b.name(), Frontends: []string{"fe-home"}}, nil
}

func (b *fedBackend) FederationForward(ctx context.Context, from string, fs []messages.Forward) ([]messages.ForwardResult, error) {
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.ID
	}
	leave, err := b.enter(ctx, fmt.Sprintf("forward(%d)", len(fs)), from, ids...)
	if err != nil {
		return nil, err
	}
	defer leave()
	out := make([]messages.ForwardResult, len(fs))
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, f := range fs {
		out[i].ID = f.ID
		if f.Frontend != "fe-home" {
			out[i].Error = messages.Errorf(messages.CodeNotOurFrontend, "%s does not serve %q", b.node, f.Frontend)
			continue
		}
		b.stored = append(b.stored, f.ID)
	}
	if b.reorder {
		slices.Reverse(out)
	}
	return out, nil
}

func (b *fedBackend) FederationStatus(ctx context.Context, from string, rs []messages.StatusReport) ([]messages.StatusReply, error) {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	leave, err := b.enter(ctx, fmt.Sprintf("status(%d)", len(rs)), from, ids...)
	if err != nil {
		return nil, err
	}
	defer leave()
	out := make([]messages.StatusReply, len(rs))
	for i, r := range rs {
		out[i] = messages.StatusReply{ID: r.ID, Outcome: "applied"}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reorder {
		slices.Reverse(out)
	}
	if b.misname {
		for i := range out {
			out[i].ID += "-other"
		}
	}
	return out, nil
}

func (b *fedBackend) Peers(context.Context) ([]messages.PeerInfo, error) {
	return []messages.PeerInfo{{Node: peerA, Address: "127.0.0.1:1", State: messages.PeerHealthy,
		Frontends: []string{"fe-a"}, Instances: []messages.PeerInstance{}}}, nil
}

func (b *fedBackend) callCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

func (b *fedBackend) storedIDs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string{}, b.stored...)
}

// fedGateway is home's gateway over TLS: with mtls, RequireClientCert and
// a listener that verifies client certificates against p's CA.
func fedGateway(t *testing.T, p pki, b Backend, mtls bool) *httptest.Server {
	t.Helper()
	s, err := New(Config{Backend: b, Logger: slog.New(slog.DiscardHandler), RequireClientCert: mtls, APIToken: stubToken})
	if err != nil {
		t.Fatal(err)
	}
	return startTLS(t, s, p.serverTLS(t, homeNode, mtls))
}

// tlsClient trusts p's CA and presents node's certificate ("" for none).
func tlsClient(t *testing.T, p pki, node string) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if node != "" {
		cfg.Certificates = []tls.Certificate{p.pair(t, node)}
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// fedCall makes one request; from "" sends no X-Federation-Node. It
// returns the status, the error code (if any) and the body.
func fedCall(t *testing.T, c *http.Client, srv *httptest.Server, method, path, from string, body io.Reader) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if from != "" {
		req.Header.Set(messages.FederationHeader, from)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var doc errorDoc
	if res.StatusCode >= 400 {
		if err := json.Unmarshal(raw, &doc); err != nil || doc.Error.Code == "" || doc.Error.Message == "" {
			t.Fatalf("%s %s: %d with %q: not an error document", method, path, res.StatusCode, raw)
		}
	}
	return res.StatusCode, doc.Error.Code, raw
}

var fedTime = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// validBodies are well-formed bodies from peer-a for each POST endpoint.
func validBodies() map[string]string {
	fwd := func(id, fe string) string {
		return fmt.Sprintf(`{"id":%q,"source_msisdn":"4477001","destination_msisdn":"+4412","message_body":"hi","source_smsc":"peer-a","dest_smsc":"home","frontend":%q}`, id, fe)
	}
	rep := func(id string) string {
		return fmt.Sprintf(`{"id":%q,"node":"peer-a","status":"delivered","at":"2026-03-04T05:06:07Z"}`, id)
	}
	return map[string]string{
		pathHealth:      `{"node":"peer-a","time":"2026-03-04T05:06:07Z","status":"ok","forward_queue_depth":2}`,
		pathRegistry:    `{"node":"peer-a","frontends":["fe-a","fe-a2"]}`,
		pathForward:     fwd("m-1", "fe-home"),
		pathForwardBat:  `{"messages":[` + fwd("m-1", "fe-home") + `,` + fwd("m-2", "fe-home") + `]}`,
		pathStatus:      rep("m-1"),
		pathStatusBatch: `{"statuses":[` + rep("m-1") + `,` + rep("m-2") + `]}`,
	}
}

var postPaths = []string{pathHealth, pathRegistry, pathForward, pathForwardBat, pathStatus, pathStatusBatch}

func TestFederationEndpoints(t *testing.T) {
	p := newPKI(t, homeNode, peerA)
	b := newFedBackend(homeNode, peerA)
	srv := fedGateway(t, p, b, true)
	c := tlsClient(t, p, peerA)
	bodies := validBodies()

	for _, tc := range []struct {
		path   string
		status int
		check  func(t *testing.T, raw []byte)
	}{
		{pathHealth, 200, func(t *testing.T, raw []byte) {
			var h messages.Health
			mustJSON(t, raw, &h)
			if h.Node != homeNode || h.Status != messages.HealthOK || !h.Time.Equal(fedTime) || h.ForwardQueueDepth != 3 {
				t.Errorf("health answer = %+v", h)
			}
		}},
		{pathRegistry, 200, func(t *testing.T, raw []byte) {
			var r messages.Registry
			mustJSON(t, raw, &r)
			if r.Node != homeNode || len(r.Frontends) != 1 || r.Frontends[0] != "fe-home" {
				t.Errorf("registry answer = %+v", r)
			}
		}},
		{pathForward, 202, func(t *testing.T, raw []byte) {
			var r messages.ForwardReply
			mustJSON(t, raw, &r)
			if r.ID != "m-1" || r.Duplicate {
				t.Errorf("forward answer = %+v", r)
			}
		}},
		{pathForwardBat, 200, func(t *testing.T, raw []byte) {
			var r messages.ForwardBatchReply
			mustJSON(t, raw, &r)
			if len(r.Results) != 2 || r.Results[0].ID != "m-1" || r.Results[1].ID != "m-2" || r.Results[0].Error != nil {
				t.Errorf("forward_batch answer = %s", raw)
			}
		}},
		{pathStatus, 200, func(t *testing.T, raw []byte) {
			var r messages.StatusReply
			mustJSON(t, raw, &r)
			if r.ID != "m-1" || r.Outcome != "applied" {
				t.Errorf("delivery_status answer = %+v", r)
			}
		}},
		{pathStatusBatch, 200, func(t *testing.T, raw []byte) {
			var r messages.StatusBatchReply
			mustJSON(t, raw, &r)
			if len(r.Results) != 2 || r.Results[1].ID != "m-2" {
				t.Errorf("delivery_status_batch answer = %s", raw)
			}
		}},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/api/federation/"), func(t *testing.T) {
			before := b.callCount()
			status, code, raw := fedCall(t, c, srv, "POST", tc.path, peerA, strings.NewReader(bodies[tc.path]))
			if status != tc.status {
				t.Fatalf("status = %d %s (%s), want %d", status, code, raw, tc.status)
			}
			tc.check(t, raw)
			if got := b.callCount() - before; got != 1 {
				t.Errorf("backend calls = %d, want 1", got)
			}
		})
	}
	b.mu.Lock()
	wantCalls := []string{"health from peer-a", "registry from peer-a", "forward(1) from peer-a",
		"forward(2) from peer-a", "status(1) from peer-a", "status(2) from peer-a"}
	if fmt.Sprint(b.calls) != fmt.Sprint(wantCalls) {
		t.Errorf("backend calls = %q, want %q", b.calls, wantCalls)
	}
	b.mu.Unlock()

	t.Run("identity", func(t *testing.T) {
		// No X-Federation-Node needed: discovery asks before it knows.
		status, _, raw := fedCall(t, c, srv, "GET", pathIdentity, "", nil)
		var id messages.Identity
		mustJSON(t, raw, &id)
		if status != 200 || id.Node != homeNode || id.ProtocolVersion != 1 || !id.Has(messages.CapForwardBatch) {
			t.Errorf("identity = %d %s", status, raw)
		}
	})
	t.Run("peers", func(t *testing.T) {
		status, code, _ := fedCall(t, c, srv, "GET", "/api/peers", "", nil)
		if status != 401 || code != messages.CodeUnauthorized {
			t.Errorf("GET /api/peers without the API token = %d %s, want 401", status, code)
		}
		req, _ := http.NewRequest("GET", srv.URL+"/api/peers", nil)
		req.Header.Set("Authorization", "Bearer "+stubToken)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var peers []messages.PeerInfo
		if err := json.NewDecoder(res.Body).Decode(&peers); err != nil || res.StatusCode != 200 {
			t.Fatalf("GET /api/peers = %d, %v", res.StatusCode, err)
		}
		if len(peers) != 1 || peers[0].Node != peerA || peers[0].State != messages.PeerHealthy {
			t.Errorf("peers = %+v", peers)
		}
	})
	t.Run("forward refused alone", func(t *testing.T) {
		body := strings.Replace(bodies[pathForward], `"fe-home"`, `"fe-elsewhere"`, 1)
		status, code, _ := fedCall(t, c, srv, "POST", pathForward, peerA, strings.NewReader(body))
		if status != 422 || code != messages.CodeNotOurFrontend {
			t.Errorf("forward for a frontend home does not serve = %d %s, want 422 %s", status, code, messages.CodeNotOurFrontend)
		}
	})
	t.Run("batch with an invalid message", func(t *testing.T) {
		// The invalid one is refused in its result, as the single form
		// would refuse it; the others are stored.
		bad := `{"id":"m-bad","source_msisdn":"1","destination_msisdn":"not digits","message_body":"x","source_smsc":"peer-a","dest_smsc":"home","frontend":"fe-home"}`
		good := strings.Replace(bodies[pathForward], `"m-1"`, `"m-3"`, 1)
		r, raw := forwardBatch(t, c, srv, bad, good)
		if len(r.Results) != 2 || r.Results[0].Error == nil || r.Results[0].Error.Code != messages.CodeInvalidRequest ||
			!strings.HasPrefix(r.Results[0].Error.Message, "messages[0]: ") || r.Results[1].Error != nil || r.Results[1].ID != "m-3" {
			t.Errorf("answer = %s", raw)
		}
		if ids := b.storedIDs(); ids[len(ids)-1] != "m-3" || strings.Contains(fmt.Sprint(ids), "m-bad") {
			t.Errorf("stored = %v, want m-3 last and no m-bad", ids)
		}
	})
}

// forwardBatch posts the forwards (JSON documents) as one forward_batch
// from peer-a and returns its 200 answer, decoded and raw.
func forwardBatch(t *testing.T, c *http.Client, srv *httptest.Server, forwards ...string) (messages.ForwardBatchReply, []byte) {
	t.Helper()
	status, code, raw := fedCall(t, c, srv, "POST", pathForwardBat, peerA, strings.NewReader(`{"messages":[`+strings.Join(forwards, ",")+`]}`))
	if status != 200 {
		t.Fatalf("status = %d %s", status, code)
	}
	var r messages.ForwardBatchReply
	mustJSON(t, raw, &r)
	return r, raw
}

// TestFederationForwardBatchSourceNotTheCaller: a batch message whose
// source_smsc is not the caller is refused alone (403 node_mismatch in its
// result) and stored nowhere; the caller's own are stored.
func TestFederationForwardBatchSourceNotTheCaller(t *testing.T) {
	p := newPKI(t, homeNode, peerA)
	b := newFedBackend(homeNode, peerA)
	srv := fedGateway(t, p, b, true)
	c := tlsClient(t, p, peerA)
	fwd := validBodies()[pathForward]
	spoof := strings.Replace(strings.Replace(fwd, `"m-1"`, `"m-spoof"`, 1), `"source_smsc":"peer-a"`, `"source_smsc":"peer-b"`, 1)
	good := strings.Replace(fwd, `"m-1"`, `"m-own"`, 1)
	r, raw := forwardBatch(t, c, srv, spoof, good)
	if len(r.Results) != 2 || r.Results[0].Error == nil || r.Results[0].Error.Code != messages.CodeNodeMismatch ||
		!strings.HasPrefix(r.Results[0].Error.Message, "messages[0]: ") || r.Results[1].Error != nil || r.Results[1].ID != "m-own" {
		t.Errorf("answer = %s", raw)
	}
	if ids := fmt.Sprint(b.storedIDs()); strings.Contains(ids, "m-spoof") || !strings.Contains(ids, "m-own") {
		t.Errorf("stored = %s, want m-own and no m-spoof", ids)
	}
}

// TestFederationForwardInvalidTextIsRefused: a peer's text that a JSON
// decoder would change (bytes that are not UTF-8, a \u escape of half a
// UTF-16 surrogate pair: both become U+FFFD) is refused 400
// invalid_request as the client API refuses it, not stored changed. The
// single form refuses the request, a forward_batch the message alone (its
// good ones are stored), every other peer call the request.
func TestFederationForwardInvalidTextIsRefused(t *testing.T) {
	p := newPKI(t, homeNode, peerA)
	b := newFedBackend(homeNode, peerA)
	srv := fedGateway(t, p, b, true)
	c := tlsClient(t, p, peerA)
	fwd := validBodies()[pathForward]
	badText := map[string]func(string) string{
		"invalid utf-8":  func(doc string) string { return strings.Replace(doc, `"hi"`, "\"h\xffi\"", 1) },
		"lone surrogate": func(doc string) string { return strings.Replace(doc, `"hi"`, `"h\ud800i"`, 1) },
	}
	for name, bad := range badText {
		id := "m-" + strings.ReplaceAll(name, " ", "-")
		st, code, raw := fedCall(t, c, srv, "POST", pathForward, peerA,
			strings.NewReader(bad(strings.Replace(fwd, `"m-1"`, strconv.Quote(id), 1))))
		if st != 400 || code != messages.CodeInvalidRequest {
			t.Errorf("forward with %s = %d %s %s, want 400 %s", name, st, code, raw, messages.CodeInvalidRequest)
		}
		if ids := fmt.Sprint(b.storedIDs()); strings.Contains(ids, id) {
			t.Errorf("forward with %s: stored %s", name, ids)
		}
	}
	good := strings.Replace(fwd, `"m-1"`, `"m-good"`, 1)
	r, raw := forwardBatch(t, c, srv,
		badText["invalid utf-8"](strings.Replace(fwd, `"m-1"`, `"m-bad-1"`, 1)), good,
		badText["lone surrogate"](strings.Replace(fwd, `"m-1"`, `"m-bad-2"`, 1)))
	if len(r.Results) != 3 || r.Results[1].Error != nil || r.Results[1].ID != "m-good" {
		t.Fatalf("batch answer = %s", raw)
	}
	for _, i := range []int{0, 2} {
		if e := r.Results[i].Error; e == nil || e.Code != messages.CodeInvalidRequest ||
			!strings.HasPrefix(e.Message, fmt.Sprintf("messages[%d]: the message ", i)) || r.Results[i].ID != fmt.Sprintf("m-bad-%d", i/2+1) {
			t.Errorf("batch result %d = %+v, want 400 %s for it alone", i, r.Results[i], messages.CodeInvalidRequest)
		}
	}
	if ids := fmt.Sprint(b.storedIDs()); !strings.Contains(ids, "m-good") || strings.Contains(ids, "m-bad") {
		t.Errorf("stored = %s, want m-good and no m-bad", ids)
	}
	// Bad text outside the messages (a field the callee does not know)
	// refuses the batch whole, as it refuses any other peer call.
	outside := `{"note":"` + "\xff" + `","messages":[` + strings.Replace(fwd, `"m-1"`, `"m-outside"`, 1) + `]}`
	if st, code, _ := fedCall(t, c, srv, "POST", pathForwardBat, peerA, strings.NewReader(outside)); st != 400 || code != messages.CodeInvalidRequest {
		t.Errorf("batch with bad text outside its messages = %d %s, want 400 %s", st, code, messages.CodeInvalidRequest)
	}
	for _, path := range []string{pathHealth, pathRegistry, pathStatus, pathStatusBatch} {
		body := strings.Replace(validBodies()[path], `"peer-a"`, `"peer-a","note":"\udc00"`, 1)
		if st, code, _ := fedCall(t, c, srv, "POST", path, peerA, strings.NewReader(body)); st != 400 || code != messages.CodeInvalidRequest {
			t.Errorf("%s with a lone surrogate = %d %s, want 400 %s", path, st, code, messages.CodeInvalidRequest)
		}
	}
	if ids := fmt.Sprint(b.storedIDs()); strings.Contains(ids, "m-outside") {
		t.Errorf("stored = %s", ids)
	}
}

func mustJSON(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("answer %q: %v", raw, err)
	}
}

// TestFederationRejects: every kind of bad request on every federation
// endpoint is refused with its status and code, and reaches no backend
// call (so nothing is stored).
func TestFederationRejects(t *testing.T) {
	p := newPKI(t, homeNode, peerA, peerB)
	other := newPKI(t, peerA) // another CA's certificate for the same name
	b := newFedBackend(homeNode, peerA)
	srv := fedGateway(t, p, b, true)
	withA := tlsClient(t, p, peerA)
	withB := tlsClient(t, p, peerB)
	without := tlsClient(t, p, "")
	bodies := validBodies()

	type rejection struct {
		name   string
		client *http.Client
		from   string
		body   string
		status int
		code   string
	}
	for _, path := range postPaths {
		valid := bodies[path]
		cases := []rejection{
			{"malformed JSON", withA, peerA, `{"node":"peer-a",`, 400, messages.CodeInvalidJSON},
			{"not an object", withA, peerA, `["peer-a"]`, 400, messages.CodeInvalidJSON},
			{"empty body", withA, peerA, ``, 400, messages.CodeInvalidJSON},
			{"trailing data", withA, peerA, valid + ` {}`, 400, messages.CodeInvalidJSON},
			{"missing fields", withA, peerA, `{}`, 400, messages.CodeInvalidRequest},
			{"no X-Federation-Node", withA, "", valid, 400, messages.CodeInvalidRequest},
			{"invalid X-Federation-Node", withA, "peer a", valid, 400, messages.CodeInvalidRequest},
			{"spoofed X-Federation-Node", withA, peerB, valid, 403, messages.CodeNodeMismatch},
			{"no client certificate", without, peerA, valid, 403, messages.CodeClientCertReq},
			{"oversize body", withA, peerA, "", 413, messages.CodeBodyTooLarge},
		}
		switch path {
		case pathHealth, pathRegistry, pathStatus:
			// The body names another node than the (authenticated) caller.
			cases = append(cases, rejection{"body names another node", withA, peerA,
				strings.Replace(valid, `"node":"peer-a"`, `"node":"peer-b"`, 1), 403, messages.CodeNodeMismatch})
		case pathStatusBatch:
			cases = append(cases,
				rejection{"a report names another node", withA, peerA,
					strings.Replace(valid, `"node":"peer-a"`, `"node":"peer-b"`, 1), 403, messages.CodeNodeMismatch},
				rejection{"an invalid report", withA, peerA,
					strings.Replace(valid, `"status":"delivered"`, `"status":"lost"`, 1), 400, messages.CodeInvalidRequest},
				rejection{"empty batch", withA, peerA, `{"statuses":[]}`, 400, messages.CodeInvalidRequest},
				rejection{"batch over the limit", withA, peerA, repeatBatch("statuses", validBodies()[pathStatus], messages.MaxStatusBatch+1), 400, messages.CodeInvalidRequest})
		case pathForwardBat:
			cases = append(cases,
				rejection{"empty batch", withA, peerA, `{"messages":[]}`, 400, messages.CodeInvalidRequest},
				rejection{"null batch", withA, peerA, `{"messages":null}`, 400, messages.CodeInvalidRequest},
				rejection{"batch over the limit", withA, peerA, repeatBatch("messages", validBodies()[pathForward], messages.MaxForwardBatch+1), 400, messages.CodeInvalidRequest})
		case pathForward:
			cases = append(cases, rejection{"invalid message", withA, peerA,
				strings.Replace(valid, `"dest_smsc":"home"`, `"dest_smsc":""`, 1), 400, messages.CodeInvalidRequest},
				// The origin is the caller: peer-a may not store a message
				// as peer-b's (and take its id and its reports).
				rejection{"source_smsc names another node", withA, peerA,
					strings.Replace(valid, `"source_smsc":"peer-a"`, `"source_smsc":"peer-b"`, 1), 403, messages.CodeNodeMismatch})
		}
		for _, tc := range cases {
			t.Run(strings.TrimPrefix(path, "/api/federation/")+"/"+tc.name, func(t *testing.T) {
				var body io.Reader = strings.NewReader(tc.body)
				if tc.status == 413 {
					body = oversize(valid)
				}
				before := b.callCount()
				status, code, raw := fedCall(t, tc.client, srv, "POST", path, tc.from, body)
				if status != tc.status || code != tc.code {
					t.Errorf("= %d %s (%s), want %d %s", status, code, raw, tc.status, tc.code)
				}
				if got := b.callCount() - before; got != 0 {
					t.Errorf("the backend was called %d times", got)
				}
			})
		}

		t.Run(strings.TrimPrefix(path, "/api/federation/")+"/unknown node", func(t *testing.T) {
			// peer-b is authenticated (its own certificate) but home has not
			// discovered it: the backend refuses, nothing is stored.
			stored := len(b.storedIDs())
			body := strings.ReplaceAll(valid, `"peer-a"`, `"peer-b"`)
			status, code, raw := fedCall(t, withB, srv, "POST", path, peerB, strings.NewReader(body))
			if status != 403 || code != messages.CodeUnknownPeer {
				t.Errorf("= %d %s (%s), want 403 %s", status, code, raw, messages.CodeUnknownPeer)
			}
			if len(b.storedIDs()) != stored {
				t.Errorf("a refused forward was stored")
			}
		})
	}

	t.Run("identity without client certificate", func(t *testing.T) {
		status, code, _ := fedCall(t, without, srv, "GET", pathIdentity, "", nil)
		if status != 403 || code != messages.CodeClientCertReq {
			t.Errorf("= %d %s, want 403 %s", status, code, messages.CodeClientCertReq)
		}
	})
	t.Run("certificate of another CA", func(t *testing.T) {
		// The listener verifies a given certificate against --tls-ca: one
		// of another CA fails the handshake, before any request. (Sent
		// whatever CAs the server names, which Go's client would heed.)
		pair := other.pair(t, peerA)
		cfg := &tls.Config{RootCAs: p.pool, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &pair, nil
		}}
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("POST", srv.URL+pathHealth, strings.NewReader(bodies[pathHealth]))
		req.Header.Set(messages.FederationHeader, peerA)
		before := b.callCount()
		if res, err := (&http.Client{Transport: tr}).Do(req); err == nil {
			res.Body.Close()
			t.Errorf("a certificate of another CA got %d", res.StatusCode)
		}
		if b.callCount() != before {
			t.Error("the backend was called")
		}
	})
	t.Run("wrong method", func(t *testing.T) {
		status, code, _ := fedCall(t, withA, srv, "GET", pathForward, peerA, nil)
		if status != 405 || code != messages.CodeMethodNotAllow {
			t.Errorf("GET forward = %d %s, want 405", status, code)
		}
	})
	if n := len(b.storedIDs()); n != 0 {
		t.Errorf("%d forwards stored by rejected requests", n)
	}
}

// repeatBatch is {"<field>":[item, item, ...]} with n items.
func repeatBatch(field, item string, n int) string {
	return `{"` + field + `":[` + strings.Repeat(item+",", n-1) + item + `]}`
}

// oversize is a body just over MaxBody whose length is not announced
// (chunked), so the limit is hit while reading: valid JSON up to the
// limit, padded with spaces inside the object.
func oversize(valid string) io.Reader {
	pad := bytes.Repeat([]byte(" "), MaxBody)
	return io.MultiReader(strings.NewReader(valid[:len(valid)-1]), bytes.NewReader(pad), strings.NewReader("}"))
}

// TestFederationInsecure: without RequireClientCert (--insecure-skip-verify)
// the header is taken on trust and no client certificate is asked for;
// the header is still required and the body's node must still match it.
func TestFederationInsecure(t *testing.T) {
	p := newPKI(t, homeNode)
	b := newFedBackend(homeNode, peerA, peerB)
	srv := fedGateway(t, p, b, false)
	c := tlsClient(t, p, "")
	body := validBodies()[pathHealth]
	if status, code, _ := fedCall(t, c, srv, "POST", pathHealth, peerA, strings.NewReader(body)); status != 200 {
		t.Errorf("health without a certificate = %d %s, want 200", status, code)
	}
	if status, code, _ := fedCall(t, c, srv, "POST", pathHealth, "", strings.NewReader(body)); status != 400 || code != messages.CodeInvalidRequest {
		t.Errorf("health without the header = %d %s, want 400", status, code)
	}
	if status, code, _ := fedCall(t, c, srv, "POST", pathHealth, peerB, strings.NewReader(body)); status != 403 || code != messages.CodeNodeMismatch {
		t.Errorf("health naming peer-a from peer-b = %d %s, want 403 %s", status, code, messages.CodeNodeMismatch)
	}
	if status, _, _ := fedCall(t, c, srv, "GET", pathIdentity, "", nil); status != 200 {
		t.Errorf("identity = %d, want 200", status)
	}
	if n := b.callCount(); n != 1 {
		t.Errorf("backend calls = %d, want 1", n)
	}
}

// TestFederationAdmitsTheCallerBeforeReadingTheBody: a call from a node
// the backend does not serve (federation off, a peer it never knew) is
// refused for that before its body is read, so even a malformed or
// oversize body gets 403 federation_disabled / unknown_peer, not 400 or
// 413, and the node decodes nothing (with and without mutual TLS).
func TestFederationAdmitsTheCallerBeforeReadingTheBody(t *testing.T) {
	p := newPKI(t, homeNode, peerA, peerB)
	for _, mtls := range []bool{true, false} {
		b := newFedBackend(homeNode, peerA)
		srv := fedGateway(t, p, b, mtls)
		withA, withB := tlsClient(t, p, peerA), tlsClient(t, p, peerB)
		for _, path := range postPaths {
			for _, body := range []string{`{"node":`, `[]`} {
				status, code, raw := fedCall(t, withB, srv, "POST", path, peerB, strings.NewReader(body))
				if status != 403 || code != messages.CodeUnknownPeer {
					t.Errorf("mtls %v: %s from an unknown peer with %s: %d %s (%s), want 403 %s", mtls, path, body, status, code, raw, messages.CodeUnknownPeer)
				}
			}
			status, code, raw := fedCall(t, withB, srv, "POST", path, peerB, oversize(validBodies()[path]))
			if status != 403 || code != messages.CodeUnknownPeer {
				t.Errorf("mtls %v: %s from an unknown peer, oversize: %d %s (%s), want 403 %s", mtls, path, status, code, raw, messages.CodeUnknownPeer)
			}
		}
		b.set(func(b *fedBackend) { b.off = true })
		for _, path := range postPaths {
			status, code, raw := fedCall(t, withA, srv, "POST", path, peerA, strings.NewReader(`{"node":`))
			if status != 403 || code != messages.CodeFederationOff {
				t.Errorf("mtls %v: %s with federation off: %d %s (%s), want 403 %s", mtls, path, status, code, raw, messages.CodeFederationOff)
			}
		}
		if n := b.callCount(); n != 0 {
			t.Errorf("mtls %v: %d refused calls reached the backend: %v", mtls, n, b.calls)
		}
	}
}

// TestFederationOffRefusesInTheGatewaysOrder: with federation off
// (docs/federation.md, "Turning it on"), a federation call is still
// checked as on any node before federation_disabled: no client
// certificate (with mutual TLS) is 403 client_certificate_required, no
// X-Federation-Node header 400 invalid_request, a header the certificate
// does not name 403 node_mismatch; only a call that passes them is 403
// federation_disabled. Identity is served.
func TestFederationOffRefusesInTheGatewaysOrder(t *testing.T) {
	p := newPKI(t, homeNode, peerA, peerB)
	for _, mtls := range []bool{true, false} {
		b := newFedBackend(homeNode, peerA)
		b.set(func(b *fedBackend) { b.off = true })
		srv := fedGateway(t, p, b, mtls)
		withA, without := tlsClient(t, p, peerA), tlsClient(t, p, "")
		type call struct {
			name   string
			c      *http.Client
			from   string
			status int
			code   string
		}
		calls := []call{
			{"no header", withA, "", 400, messages.CodeInvalidRequest},
			{"a header", withA, peerA, 403, messages.CodeFederationOff},
		}
		if mtls {
			calls = append(calls,
				call{"no client certificate", without, peerA, 403, messages.CodeClientCertReq},
				call{"another node's header", withA, peerB, 403, messages.CodeNodeMismatch})
		}
		for _, c := range calls {
			status, code, raw := fedCall(t, c.c, srv, "POST", pathHealth, c.from, strings.NewReader(`{}`))
			if status != c.status || code != c.code {
				t.Errorf("mtls %v, %s, federation off: %d %s (%s), want %d %s", mtls, c.name, status, code, raw, c.status, c.code)
			}
		}
		if status, _, raw := fedCall(t, withA, srv, "GET", pathIdentity, "", nil); status != 200 {
			t.Errorf("mtls %v: identity with federation off: %d (%s), want 200", mtls, status, raw)
		}
	}
}

// countHandler counts the records of one message.
type countHandler struct {
	msg string
	n   *atomic.Int64
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// TestFederationRefusalsAreLoggedAtABoundedRate: anyone who reaches the
// port can make the node refuse a federation caller (no certificate, a
// header that is not the certificate's name); the node logs the first
// refusals of a minute one by one and counts the rest, as it does for
// refused API tokens, instead of one line per request.
func TestFederationRefusalsAreLoggedAtABoundedRate(t *testing.T) {
	p := newPKI(t, homeNode, peerA)
	var n atomic.Int64
	s, err := New(Config{Backend: newFedBackend(homeNode, peerA), RequireClientCert: true,
		Logger: slog.New(countHandler{msg: "federation caller refused", n: &n})})
	if err != nil {
		t.Fatal(err)
	}
	srv := startTLS(t, s, p.serverTLS(t, homeNode, true))
	without, withA := tlsClient(t, p, ""), tlsClient(t, p, peerA)
	const calls = 50
	for i := range calls {
		c, from := without, peerA
		if i%2 == 1 {
			c, from = withA, homeNode // a certificate that does not name the header
		}
		if status, _, _ := fedCall(t, c, srv, "POST", pathHealth, from, strings.NewReader(validBodies()[pathHealth])); status != 403 {
			t.Fatalf("call %d: %d, want 403", i, status)
		}
	}
	if got := n.Load(); got < 1 || got > 10 {
		t.Errorf("%d refused calls logged %d lines, want 1 to 10 (the rest counted)", calls, got)
	}
}

// TestFederationStatusCodes pins the status of each federation code.
func TestFederationStatusCodes(t *testing.T) {
	for code, want := range map[string]int{
		messages.CodeFederationOff:  403,
		messages.CodeUnknownPeer:    403,
		messages.CodeNodeMismatch:   403,
		messages.CodeClientCertReq:  403,
		messages.CodeNotOurFrontend: 422,
	} {
		rec := httptest.NewRecorder()
		writeError(rec, slog.New(slog.DiscardHandler), httptest.NewRequest("GET", "/", nil), messages.Errorf(code, "x"))
		if rec.Code != want {
			t.Errorf("%s = %d, want %d", code, rec.Code, want)
		}
	}
}

// countPaths counts requests by path before handing them to h (or to
// instead, once a test sets it).
type countPaths struct {
	h       http.Handler
	instead atomic.Pointer[http.HandlerFunc]
	n       sync.Map // path -> *atomic.Int64
}

func (c *countPaths) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, _ := c.n.LoadOrStore(r.URL.Path, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	if h := c.instead.Load(); h != nil {
		(*h)(w, r)
		return
	}
	c.h.ServeHTTP(w, r)
}

func (c *countPaths) count(path string) int64 {
	v, ok := c.n.Load(path)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}
