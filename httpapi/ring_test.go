package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/transport"
)

// ringBackend is a master that records the calls that reach it.
type ringBackend struct {
	mu    sync.Mutex
	calls []string
	a     messages.RingAssignment
	// pollWait and pollLeft are the last poll's wait_ms and the time its
	// context had left.
	pollWait int64
	pollLeft time.Duration
}

func newRingBackend() *ringBackend {
	return &ringBackend{a: messages.RingAssignment{Epoch: 3, Master: "home-0", MasterAddress: "127.0.0.1:1",
		Members: []messages.RingMember{{InstanceID: "home-0", Address: "127.0.0.1:1", Services: messages.AllServices,
			Ranges: []messages.TokenRange{{Lo: 0, Hi: math.MaxUint64}}}}, Coverage: 1}}
}

func (b *ringBackend) record(call string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, call)
}

func (b *ringBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

func (b *ringBackend) RingJoin(_ context.Context, from string, j messages.RingJoin) (messages.RingAssignment, error) {
	b.record("join " + j.InstanceID + " from " + from)
	return b.a, nil
}

func (b *ringBackend) RingPoll(ctx context.Context, from string, p messages.RingPoll) (messages.RingAssignment, error) {
	b.record("poll " + p.InstanceID + " from " + from)
	b.mu.Lock()
	b.pollWait = p.WaitMs
	if deadline, ok := ctx.Deadline(); ok {
		b.pollLeft = time.Until(deadline)
	}
	b.mu.Unlock()
	if p.InstanceID == "stranger" {
		return messages.RingAssignment{}, messages.Errorf(messages.CodeRingUnknownMember, "join again")
	}
	return b.a, nil
}

func (b *ringBackend) RingLeave(_ context.Context, from string, l messages.RingLeave) error {
	b.record("leave " + l.InstanceID + " from " + from)
	return nil
}

func (b *ringBackend) RingStatus(context.Context) (messages.RingStatus, error) {
	return messages.RingStatus{InstanceID: "home-0", Role: messages.RoleMaster, Master: "home-0", Epoch: b.a.Epoch,
		Coverage: 1, Members: b.a.Members}, nil
}

func ringGateway(t *testing.T, p pki, rb RingBackend, mtls bool) *httptest.Server {
	t.Helper()
	s, err := New(Config{Backend: newFedBackend(homeNode), Ring: rb, Logger: slog.New(slog.DiscardHandler), RequireClientCert: mtls, APIToken: stubToken})
	if err != nil {
		t.Fatal(err)
	}
	return startTLS(t, s, p.serverTLS(t, homeNode, mtls))
}

func joinBody(node, id string) string {
	b, _ := json.Marshal(messages.RingJoin{InstanceID: id, Node: node, Address: "127.0.0.1:2", Services: messages.AllServices})
	return string(b)
}

// TestRingEndpointsRefuseBadCallsBeforeTheBackend: every refusal of the
// ring API answers its status and code, and none reaches the coordinator.
func TestRingEndpointsRefuseBadCallsBeforeTheBackend(t *testing.T) {
	p := newPKI(t, homeNode, peerA)
	rb := newRingBackend()
	srv := ringGateway(t, p, rb, true)
	withCert, noCert := tlsClient(t, p, homeNode), tlsClient(t, p, "")
	for _, tc := range []struct {
		name   string
		client *http.Client
		path   string
		from   string
		body   string
		status int
		code   string
	}{
		{"no client certificate", noCert, pathRingJoin, homeNode, joinBody(homeNode, "home-1"), 403, messages.CodeClientCertReq},
		{"header not the certificate", withCert, pathRingJoin, peerA, joinBody(peerA, "a-1"), 403, messages.CodeNodeMismatch},
		{"no header", withCert, pathRingJoin, "", joinBody(homeNode, "home-1"), 400, messages.CodeInvalidRequest},
		{"malformed", withCert, pathRingJoin, homeNode, `{"instance_id":`, 400, messages.CodeInvalidJSON},
		{"missing fields", withCert, pathRingJoin, homeNode, `{"instance_id":"home-1"}`, 400, messages.CodeRingBadJoin},
		{"unknown service", withCert, pathRingJoin, homeNode,
			`{"instance_id":"home-1","node":"home","address":"h:1","services":["billing"]}`, 400, messages.CodeRingBadJoin},
		{"body names another node", withCert, pathRingJoin, homeNode, joinBody(peerA, "home-1"), 403, messages.CodeNodeMismatch},
		{"poll without instance", withCert, pathRingPoll, homeNode, `{"epoch":1}`, 400, messages.CodeInvalidRequest},
		{"poll negative wait", withCert, pathRingPoll, homeNode, `{"instance_id":"home-1","wait_ms":-1}`, 400, messages.CodeInvalidRequest},
		{"leave without instance", withCert, pathRingLeave, homeNode, `{}`, 400, messages.CodeInvalidRequest},
		{"oversize", withCert, pathRingJoin, homeNode, `{"zone":"` + strings.Repeat("z", 2<<20) + `"}`, 413, messages.CodeBodyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, code, raw := fedCall(t, tc.client, srv, http.MethodPost, tc.path, tc.from, strings.NewReader(tc.body))
			if status != tc.status || code != tc.code {
				t.Fatalf("%d %s (%s), want %d %s", status, code, raw, tc.status, tc.code)
			}
		})
	}
	if n := rb.count(); n != 0 {
		t.Fatalf("%d refused calls reached the coordinator: %v", n, rb.calls)
	}

	// The good calls reach it, and a refusal of the coordinator keeps its code.
	status, _, raw := fedCall(t, withCert, srv, http.MethodPost, pathRingJoin, homeNode, strings.NewReader(joinBody(homeNode, "home-1")))
	var a messages.RingAssignment
	if status != 200 || json.Unmarshal(raw, &a) != nil || a.Epoch != 3 || a.Members[0].Ranges[0].Hi != math.MaxUint64 {
		t.Fatalf("join: %d %s", status, raw)
	}
	if !strings.Contains(string(raw), `"ranges":[[0,18446744073709551615]]`) {
		t.Fatalf("ranges are not [lo, hi] pairs of exact integers: %s", raw)
	}
	if status, code, _ := fedCall(t, withCert, srv, http.MethodPost, pathRingPoll, homeNode,
		strings.NewReader(`{"instance_id":"stranger","epoch":0,"wait_ms":0}`)); status != 409 || code != messages.CodeRingUnknownMember {
		t.Fatalf("poll of a stranger: %d %s", status, code)
	}
	if status, _, raw := fedCall(t, withCert, srv, http.MethodPost, pathRingLeave, homeNode,
		strings.NewReader(`{"instance_id":"home-1"}`)); status != 204 {
		t.Fatalf("leave: %d %s", status, raw)
	}
}

// TestRingPollWaitIsCappedBeforeItIsADuration: a wait_ms over the cap is
// held for the cap (10 minutes), the coordinator is told the cap, and the
// call's deadline is the cap plus the request timeout, also for a value
// whose nanoseconds would wrap around past 2^63 into a short (or
// negative) wait.
func TestRingPollWaitIsCappedBeforeItIsADuration(t *testing.T) {
	rb := newRingBackend()
	s, err := New(Config{Backend: stubBackend{}, Ring: rb, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ms := range []string{"600001", "18446744073710", "9223372036854775807", "9223372036854"} {
		req := httptest.NewRequest(http.MethodPost, pathRingPoll, strings.NewReader(`{"instance_id":"home-1","epoch":0,"wait_ms":`+ms+`}`))
		req.Header.Set(messages.FederationHeader, homeNode)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		rb.mu.Lock()
		wait, left := rb.pollWait, rb.pollLeft
		rb.mu.Unlock()
		if rec.Code != 200 || wait != maxRingWait.Milliseconds() || left < maxRingWait || left > maxRingWait+DefaultRequestTimeout {
			t.Errorf("wait_ms %s: %d, the coordinator got wait_ms %d with %v left; want 200, %d and %v to %v",
				ms, rec.Code, wait, left, maxRingWait.Milliseconds(), maxRingWait, maxRingWait+DefaultRequestTimeout)
		}
	}
}

// TestRingStatusNeedsTheAPIToken: status is an operator call; without a
// ring the paths do not exist.
func TestRingStatusNeedsTheAPIToken(t *testing.T) {
	s, err := New(Config{Backend: stubBackend{}, Ring: newRingBackend(), APIToken: stubToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	get := func(s *Server, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, pathRingStatus, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	if rec := get(s, ""); rec.Code != http.StatusUnauthorized {
		t.Fatalf("without token: %d", rec.Code)
	}
	rec := get(s, stubToken)
	var st messages.RingStatus
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &st) != nil || st.Role != messages.RoleMaster || st.Coverage != 1 {
		t.Fatalf("status: %d %s", rec.Code, rec.Body)
	}
	none, err := New(Config{Backend: stubBackend{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if rec := get(none, ""); rec.Code != http.StatusNotFound {
		t.Fatalf("without a ring: %d", rec.Code)
	}
}

// TestPeerClientRingCalls: the slave's client reaches the master, keeps
// the master's refusals as CallErrors, and will not talk ring to an
// address that answers as another node.
func TestPeerClientRingCalls(t *testing.T) {
	p := newPKI(t, homeNode, peerA)
	rb := newRingBackend()
	srv := ringGateway(t, p, rb, true)
	addr := strings.TrimPrefix(srv.URL, "https://")
	client := func(node string) *PeerClient {
		pair := p.pair(t, node)
		c, err := NewPeerClient(PeerClientConfig{Node: node, RootCAs: p.pool, Certificate: &pair, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	ctx := context.Background()
	home := client(homeNode)
	a, err := home.RingJoin(ctx, addr, messages.RingJoin{InstanceID: "home-1", Node: homeNode, Address: "h:1", Services: messages.AllServices})
	if err != nil || a.Epoch != 3 {
		t.Fatalf("join: %+v %v", a, err)
	}
	if _, err := home.RingPoll(ctx, addr, messages.RingPoll{InstanceID: "home-1", Epoch: 3, WaitMs: 10}); err != nil {
		t.Fatalf("poll: %v", err)
	}
	_, err = home.RingPoll(ctx, addr, messages.RingPoll{InstanceID: "stranger"})
	if ce, ok := err.(*transport.CallError); !ok || ce.Code != messages.CodeRingUnknownMember || ce.Status != 409 {
		t.Fatalf("poll of a stranger: %v", err)
	}
	if err := home.RingLeave(ctx, addr, messages.RingLeave{InstanceID: "home-1"}); err != nil {
		t.Fatalf("leave: %v", err)
	}
	before := rb.count()
	if _, err := client(peerA).RingJoin(ctx, addr, messages.RingJoin{InstanceID: "a-1", Node: peerA, Address: "h:1", Services: messages.AllServices}); err == nil ||
		!strings.Contains(err.Error(), "not an instance of this site") {
		t.Fatalf("join of a master of another site: %v", err)
	}
	if rb.count() != before {
		t.Fatal("a call to another site's instance was sent")
	}
}

// TestRingMemberCallsNeedAnAdminTokenWithoutMutualTLS: without --tls-ca
// the X-Federation-Node header proves nothing (anyone may send the site's
// name), so on a node with credentials join, poll and leave need an
// admin's API token: 401 without one or with a wrong one, 403 for another
// role, and none of those reaches the coordinator (no fake member joins,
// no real one is made to leave). With the token they do; a node without
// credentials is open, its ring as the rest of its API. (With mutual TLS
// the certificate is the credential: TestRingEndpointsRefuseBadCallsBeforeTheBackend.)
func TestRingMemberCallsNeedAnAdminTokenWithoutMutualTLS(t *testing.T) {
	const opsToken = "ops-token-0123456789"
	creds := staticCredentials{auth.NewSet([]messages.Credential{TokenCredential(stubToken),
		{Name: "ops", Role: messages.RoleOperator, TokenHash: auth.Hash(opsToken)}}, true)}
	calls := []struct{ path, body string }{
		{pathRingJoin, joinBody(homeNode, "intruder")},
		{pathRingPoll, `{"instance_id":"home-1","epoch":0,"wait_ms":0}`},
		{pathRingLeave, `{"instance_id":"home-1"}`},
	}
	call := func(s *Server, path, body, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set(messages.FederationHeader, homeNode)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	rb := newRingBackend()
	s, err := New(Config{Backend: stubBackend{}, Ring: rb, Credentials: creds, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		for _, tc := range []struct {
			token  string
			status int
			code   string
		}{
			{"", 401, messages.CodeUnauthorized},
			{"not-the-token-0123456789", 401, messages.CodeUnauthorized},
			{opsToken, 403, messages.CodeForbidden},
		} {
			rec := call(s, c.path, c.body, tc.token)
			var doc errorDoc
			if rec.Code != tc.status || json.Unmarshal(rec.Body.Bytes(), &doc) != nil || doc.Error.Code != tc.code {
				t.Errorf("%s with token %q: %d %s, want %d %s", c.path, tc.token, rec.Code, rec.Body, tc.status, tc.code)
			}
		}
	}
	if n := rb.count(); n != 0 {
		t.Fatalf("%d calls without an admin token reached the coordinator: %v", n, rb.calls)
	}
	for _, c := range calls {
		if rec := call(s, c.path, c.body, stubToken); rec.Code != 200 && rec.Code != 204 {
			t.Errorf("%s with the admin token: %d %s", c.path, rec.Code, rec.Body)
		}
	}
	if n := rb.count(); n != len(calls) {
		t.Fatalf("%d of the %d calls with the admin token reached the coordinator", n, len(calls))
	}
	open, err := New(Config{Backend: stubBackend{}, Ring: rb, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if rec := call(open, pathRingJoin, joinBody(homeNode, "home-2"), ""); rec.Code != 200 {
		t.Errorf("join on a node without credentials: %d %s", rec.Code, rec.Body)
	}
}

// TestPeerClientSendsTheRingTokenToItsMasterOnly: a member's client sends
// RingToken on its ring calls, which a master without --tls-ca then lets
// in; federation calls (identity, health: to other sites) never carry it.
// Without the token the master refuses the join as Forbidden (the slave
// gives up, saying why).
func TestPeerClientSendsTheRingTokenToItsMasterOnly(t *testing.T) {
	p := newPKI(t, homeNode)
	rb := newRingBackend()
	s, err := New(Config{Backend: newFedBackend(homeNode, homeNode), Ring: rb, APIToken: stubToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{} // path -> Authorization
	srv := startTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		s.ServeHTTP(w, r)
	}), p.serverTLS(t, homeNode, false))
	addr := strings.TrimPrefix(srv.URL, "https://")
	client := func(token func() string) *PeerClient {
		c, err := NewPeerClient(PeerClientConfig{Node: homeNode, RootCAs: p.pool, Timeout: 2 * time.Second, RingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	ctx := context.Background()
	join := messages.RingJoin{InstanceID: "home-1", Node: homeNode, Address: "h:1", Services: messages.AllServices}

	_, err = client(nil).RingJoin(ctx, addr, join)
	wantCallError(t, "join without a token", err, 401, messages.CodeUnauthorized, transport.Forbidden)
	if rb.count() != 0 {
		t.Fatal("a join without a token reached the coordinator")
	}

	home := client(func() string { return stubToken })
	if _, err := home.Health(ctx, toHome(addr), messages.Health{Node: homeNode, Time: fedTime, Status: messages.HealthOK}); err != nil {
		t.Fatalf("health: %v", err)
	}
	if _, err := home.RingJoin(ctx, addr, join); err != nil {
		t.Fatalf("join: %v", err)
	}
	if _, err := home.RingPoll(ctx, addr, messages.RingPoll{InstanceID: "home-1", Epoch: 3, WaitMs: 10}); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if err := home.RingLeave(ctx, addr, messages.RingLeave{InstanceID: "home-1"}); err != nil {
		t.Fatalf("leave: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for path, want := range map[string]string{
		pathIdentity: "", pathHealth: "",
		pathRingJoin: "Bearer " + stubToken, pathRingPoll: "Bearer " + stubToken, pathRingLeave: "Bearer " + stubToken,
	} {
		if got, ok := seen[path]; !ok || got != want {
			t.Errorf("%s: Authorization %q (called %v), want %q", path, got, ok, want)
		}
	}
}

func ringFuzzServe(t *testing.T, path string, body []byte) {
	s, err := New(Config{Backend: stubBackend{}, Ring: newRingBackend(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set(messages.FederationHeader, homeNode)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	switch rec.Code {
	case 200, 204, 400, 403, 409, 413:
	default:
		t.Fatalf("%s with %q: status %d", path, body, rec.Code)
	}
	if rec.Code >= 400 {
		var doc errorDoc
		if json.Unmarshal(rec.Body.Bytes(), &doc) != nil || doc.Error.Code == "" || doc.Error.Message == "" {
			t.Fatalf("%s with %q: %d %q is not an error document", path, body, rec.Code, rec.Body)
		}
	}
}

func ringSeeds(f *testing.F) {
	for _, s := range []string{
		joinBody(homeNode, "home-1"), `{}`, `null`, `[]`, `{"instance_id":"home-1","epoch":18446744073709551615,"wait_ms":5}`,
		`{"instance_id":"home-1","epoch":-1}`, `{"instance_id":"x","node":"home","address":"h:1","services":["delivery","delivery"]}`,
		`{"instance_id":"home-1","touch":true}`, `{"instance_id":"\xff"}`,
	} {
		f.Add([]byte(s))
	}
}

func FuzzRingJoin(f *testing.F) {
	ringSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) { ringFuzzServe(t, pathRingJoin, body) })
}

func FuzzRingPoll(f *testing.F) {
	ringSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) { ringFuzzServe(t, pathRingPoll, body) })
}

// FuzzTokenRange: a range decodes only as an ordered pair and encodes back
// to the same pair.
func FuzzTokenRange(f *testing.F) {
	for _, s := range []string{`[0,18446744073709551615]`, `[5,4]`, `[1]`, `{"lo":1}`, `[1,2,3]`, `[-1,2]`, `[1.5,2]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var r messages.TokenRange
		if err := json.Unmarshal(raw, &r); err != nil {
			return
		}
		if r.Lo > r.Hi {
			t.Fatalf("%q decoded to an unordered range %+v", raw, r)
		}
		out, _ := json.Marshal(r)
		var back messages.TokenRange
		if err := json.Unmarshal(out, &back); err != nil || back != r {
			t.Fatalf("%+v round-tripped to %+v (%v)", r, back, err)
		}
	})
}
