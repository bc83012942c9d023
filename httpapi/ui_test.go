package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// stubBackend is a fixed node for the UI tests: it answers every call with
// the same small data set, so the documents the page reads can be checked.
type stubBackend struct{}

var stubTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func stubMessage(id string, state messages.State) messages.Message {
	return messages.Message{
		ID: id, SourceMSISDN: "alice", DestinationMSISDN: "+447700900001", Body: "<b>hi</b>",
		State: state, SourceSMSC: "ui", Frontend: "fe-a", Attempts: 5, Reason: messages.ReasonMaxAttempts,
		CreatedAt: stubTime, UpdatedAt: stubTime, SubmittedAt: stubTime,
	}
}

func (stubBackend) Submit(_ context.Context, sub messages.Submission) (messages.Message, bool, error) {
	if err := sub.Validate(); err != nil { // as the Backend contract says
		return messages.Message{}, false, err
	}
	return messages.Message{}, false, messages.Errorf(messages.CodeNoRoute, "stub: no route")
}

func (stubBackend) Message(_ context.Context, id string) (messages.Message, error) {
	if id != "m-1" {
		return messages.Message{}, messages.Errorf(messages.CodeNotFound, "message %q not found", id)
	}
	m := stubMessage(id, messages.StateFailed)
	m.NextAttemptAt, m.LastDetail = &stubTime, "max attempts"
	m.History = []messages.HistoryEntry{
		{State: messages.StatePending, At: stubTime, Detail: "accepted"},
		{State: messages.StateFailed, At: stubTime, Detail: "max attempts"},
	}
	return m, nil
}

func (stubBackend) Messages(context.Context, persistence.ListQuery) (persistence.Page, error) {
	return persistence.Page{Messages: []messages.Message{stubMessage("m-1", messages.StateFailed)}, Next: 7}, nil
}

func (stubBackend) Resubmit(_ context.Context, id string) (messages.Message, error) {
	return stubMessage(id, messages.StatePending), nil
}

func (stubBackend) ResubmitBulk(context.Context, messages.State) (messages.BulkReply, error) {
	return messages.BulkReply{Resubmitted: 2, Skipped: 1}, nil
}

func (stubBackend) Status(context.Context) (Status, error) {
	counts := map[string]int64{}
	for i, s := range messages.AllStates {
		counts[string(s)] = int64(i)
	}
	return Status{
		Node: "ui-node", Version: "test", Store: "stub", Counts: counts,
		Peers: []messages.PeerInfo{}, Frontends: []messages.Frontend{{Name: "fe-a", Mode: messages.ModePull}},
		Delivery: "store",
	}, nil
}

func (stubBackend) Routes(context.Context) ([]messages.Route, error) {
	return []messages.Route{{Prefix: "44", Frontend: "fe-a", UpdatedAt: stubTime}}, nil
}

func (stubBackend) PutRoute(_ context.Context, r messages.Route) (messages.Route, error) {
	r.UpdatedAt = stubTime
	return r, nil
}

func (stubBackend) DeleteRoute(context.Context, string) error { return nil }

func (stubBackend) Frontends(context.Context) ([]messages.Frontend, error) {
	return []messages.Frontend{
		{Name: "fe-a", Mode: messages.ModePull, CreatedAt: stubTime, UpdatedAt: stubTime},
		{Name: "fe-b", Mode: messages.ModeWebhook, URL: "http://127.0.0.1:9/hook", CreatedAt: stubTime, UpdatedAt: stubTime},
	}, nil
}

func (stubBackend) PutFrontend(_ context.Context, f messages.Frontend) (messages.Frontend, error) {
	f.CreatedAt, f.UpdatedAt = stubTime, stubTime
	return f, nil
}

func (stubBackend) DeleteFrontend(_ context.Context, name string) error {
	return messages.Errorf(messages.CodeFrontendInUse, "frontend %q is named by route 44", name)
}

func (stubBackend) Poll(context.Context, string, int, time.Duration, time.Duration) ([]messages.Outgoing, error) {
	return nil, nil
}

func (stubBackend) Ack(context.Context, string, []messages.DeliveryResult) ([]messages.AckOutcome, error) {
	return nil, nil
}

func (stubBackend) Ready(context.Context) error { return nil }
func (stubBackend) Storage() (string, string)   { return "ok", "" }
func (stubBackend) Bus() (string, string)       { return "off", "" }

func (stubBackend) Audit(context.Context, messages.AuditEntry) {}

func (stubBackend) AuditTrail(context.Context, persistence.AuditQuery) (persistence.AuditPage, error) {
	return persistence.AuditPage{Entries: []messages.AuditEntry{{Seq: 7, At: stubTime, Actor: "ops", Role: messages.RoleOperator,
		Remote: "192.0.2.1:40000", Action: messages.AuditResubmit, Target: "m-1", Detail: "to frontend fe-a, now pending"}}, Next: 7}, nil
}

func (stubBackend) Timeline(context.Context) (Timeline, error) {
	depth := int64(3)
	return Timeline{IntervalSeconds: 10, Points: []TimelinePoint{
		{At: stubTime, Accepted: 1.5, Delivered: 1.2, Failed: 0.1, OutboxDepth: &depth, ForwardQueueDepth: &depth}}}, nil
}

func (stubBackend) Peers(context.Context) ([]messages.PeerInfo, error) {
	return []messages.PeerInfo{{Node: "peer-a", Address: "127.0.0.1:8443", State: messages.PeerHealthy,
		LastSuccess: &stubTime, Frontends: []string{"fe-x"}, Instances: []messages.PeerInstance{}}}, nil
}

// The federation calls answer as a node "ui-node" that knows every caller
// and serves the frontend fe-a only (the fuzz tests reach them).

func (stubBackend) FederationCaller(string) error { return nil }

func (stubBackend) Identity() messages.Identity {
	return messages.Identity{Node: "ui-node", InstanceID: "ui-node", ProtocolVersion: messages.ProtocolVersion,
		Capabilities: []string{messages.CapForwardBatch, messages.CapStatusBatch}}
}

func (stubBackend) FederationHealth(context.Context, string, messages.Health) (messages.Health, error) {
	return messages.Health{Node: "ui-node", Time: stubTime, Status: messages.HealthOK}, nil
}

func (stubBackend) FederationRegistry(context.Context, string, messages.Registry) (messages.Registry, error) {
	return messages.Registry{Node: "ui-node", Frontends: []string{"fe-a"}}, nil
}

func (stubBackend) FederationForward(_ context.Context, _ string, fs []messages.Forward) ([]messages.ForwardResult, error) {
	out := make([]messages.ForwardResult, len(fs))
	for i, f := range fs {
		out[i].ID = f.ID
		if f.Frontend != "fe-a" {
			out[i].Error = messages.Errorf(messages.CodeNotOurFrontend, "ui-node does not serve %q", f.Frontend)
		}
	}
	return out, nil
}

func (stubBackend) FederationStatus(_ context.Context, _ string, rs []messages.StatusReport) ([]messages.StatusReply, error) {
	out := make([]messages.StatusReply, len(rs))
	for i, r := range rs {
		out[i] = messages.StatusReply{ID: r.ID, Outcome: "no_work"}
	}
	return out, nil
}

const stubToken = "s3cret"

// uiServer serves the gateway over a stub node that requires stubToken.
func uiServer(t *testing.T) *httptest.Server {
	t.Helper()
	s, err := New(Config{Backend: stubBackend{}, Ring: stubRing{}, APIToken: stubToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// fetchUI gets path (GET /, /ui.js or /ui.css, without a token: the page
// must load so that the operator can enter one) and returns the response
// and its body.
func fetchUI(t *testing.T, srv *httptest.Server, path string) (*http.Response, string) {
	t.Helper()
	res, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

// uiScriptOf is the page's script, where everything the page does is.
func uiScriptOf(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	_, script := fetchUI(t, srv, "/ui.js")
	return script
}

// TestUIServesPage: the page and its two files, each with its type and
// the security headers: a policy that allows no inline script or style
// and nothing from another origin, no MIME sniffing, no referrer, no
// framing.
func TestUIServesPage(t *testing.T) {
	srv := uiServer(t)
	for _, c := range []struct{ path, ctype string }{
		{"/", "text/html; charset=utf-8"}, {"/ui.js", "text/javascript; charset=utf-8"}, {"/ui.css", "text/css; charset=utf-8"},
	} {
		res, body := fetchUI(t, srv, c.path)
		if res.StatusCode != http.StatusOK || body == "" {
			t.Fatalf("GET %s = %d (%d bytes), want 200", c.path, res.StatusCode, len(body))
		}
		for k, want := range map[string]string{
			"Content-Type":            c.ctype,
			"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
			"X-Frame-Options":         "DENY",
		} {
			if got := res.Header.Get(k); got != want {
				t.Errorf("GET %s: %s = %q, want %q", c.path, k, got, want)
			}
		}
	}
	_, page := fetchUI(t, srv, "/")
	if !regexp.MustCompile(`<title>[^<]*Switchboard[^<]*</title>`).MatchString(page) {
		t.Error("the page's <title> does not contain Switchboard")
	}
}

// TestUISameOrigin: under the policy every resource is a file of the node;
// the page holds no inline script, style or event handler (which the
// policy would block), and loads nothing from elsewhere.
func TestUISameOrigin(t *testing.T) {
	srv := uiServer(t)
	_, page := fetchUI(t, srv, "/")
	attr := regexp.MustCompile(`(?i)\s(src|href|action|formaction|poster|srcset|data)\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)`)
	for _, m := range attr.FindAllStringSubmatch(page, -1) {
		v := strings.Trim(m[2], `"'`)
		if strings.Contains(v, "http://") || strings.Contains(v, "https://") || strings.HasPrefix(v, "//") ||
			(v != "" && !strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "#")) {
			t.Errorf("%s=%q is not a same-origin path", m[1], v)
		}
	}
	markup := regexp.MustCompile(`(?s)<!--.*?-->`).ReplaceAllString(page, "")
	if got := regexp.MustCompile(`(?i)<script[^>]*>`).FindAllString(markup, -1); !slices.Equal(got, []string{`<script src="/ui.js" defer>`}) {
		t.Errorf("script elements %q, want only <script src=\"/ui.js\" defer>", got)
	}
	if strings.Contains(markup, "</script>") && !strings.Contains(markup, `<script src="/ui.js" defer></script>`) {
		t.Error("a script element has content: inline script is blocked by the policy")
	}
	for _, bad := range []*regexp.Regexp{regexp.MustCompile(`(?i)<style`), regexp.MustCompile(`(?i)\sstyle\s*=`),
		regexp.MustCompile(`(?i)\son[a-z]+\s*=`), regexp.MustCompile(`(?i)javascript:`)} {
		if m := bad.FindString(markup); m != "" {
			t.Errorf("the page contains %q: inline styles, handlers and scripts are blocked by the policy", m)
		}
	}
	script := uiScriptOf(t, srv)
	_, style := fetchUI(t, srv, "/ui.css")
	for _, bad := range []string{"@import", "url(", "http://", "https://", "//cdn"} {
		if strings.Contains(style, bad) {
			t.Errorf("ui.css contains %q", bad)
		}
	}
	// Styles set from the script go through the CSSOM (allowed), never a
	// style attribute (blocked).
	if strings.Contains(script, "setAttribute('style'") || strings.Contains(script, "{ style:") {
		t.Error("ui.js sets a style attribute; the policy blocks it")
	}
	// Every fetch goes through api(path) with a path of the API table.
	if n := strings.Count(script, "fetch("); n != 1 {
		t.Errorf("the script calls fetch( %d times, want once (in api())", n)
	}
}

// TestUIEscapes: values reach the DOM only through textContent and
// createElement; none of the HTML-parsing sinks appears in the script.
func TestUIEscapes(t *testing.T) {
	script := uiScriptOf(t, uiServer(t))
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "createContextualFragment"} {
		if strings.Contains(script, sink) {
			t.Errorf("the script uses %s", sink)
		}
	}
}

// uiCall is one API call the page makes: the literal path fragments it
// builds the URL from, a concrete request, and the fields of the answer it
// reads.
type uiCall struct {
	fragments []string // as quoted in the page
	method    string
	path      string
	body      string
	status    int
	fields    []string // top-level keys of the JSON answer the page reads
}

var uiCalls = []uiCall{
	{[]string{"/api/status"}, "GET", "/api/status", "", 200,
		[]string{"node", "version", "store", "counts", "forward_queue_depth", "outbox_depth", "dlq_depth", "peers"}},
	{[]string{"/api/messages?"}, "GET", "/api/messages?limit=100&state=failed&cursor=9", "", 200,
		[]string{"messages", "next_cursor"}},
	{[]string{"/api/messages?"}, "GET", "/api/messages?limit=100&destination=4477*&since=2026-01-01T00:00:00Z", "", 200,
		[]string{"messages", "next_cursor"}},
	{[]string{"/api/stats/timeline"}, "GET", "/api/stats/timeline", "", 200, []string{"interval_seconds", "points"}},
	{[]string{"/api/messages/"}, "GET", "/api/messages/m-1", "", 200,
		[]string{"id", "state", "reason", "source_msisdn", "destination_msisdn", "message_body", "frontend",
			"source_smsc", "dest_smsc", "attempts", "created_at", "submitted_at", "updated_at", "history",
			"next_attempt_at", "last_detail"}},
	{[]string{"/api/messages/", "/resubmit"}, "POST", "/api/messages/m-1/resubmit", "", 200, []string{"state"}},
	{[]string{"/api/messages/resubmit"}, "POST", "/api/messages/resubmit", `{"state":"failed"}`, 200,
		[]string{"resubmitted", "skipped"}},
	{[]string{"/api/routes"}, "GET", "/api/routes", "", 200, []string{"routes"}},
	{[]string{"/api/routes/"}, "PUT", "/api/routes/4477", `{"frontend":"fe-a"}`, 200, nil},
	{[]string{"/api/routes/"}, "DELETE", "/api/routes/4477", "", 204, nil},
	{[]string{"/api/frontends"}, "GET", "/api/frontends", "", 200, []string{"frontends"}},
	{[]string{"/api/frontends/"}, "PUT", "/api/frontends/fe-c", `{"mode":"webhook","url":"http://127.0.0.1:9/x"}`, 200, nil},
	{[]string{"/api/frontends/"}, "DELETE", "/api/frontends/fe-a", "", 409, []string{"error"}},
	// Every node answers the ring status (a single instance is the master
	// and only member of its own ring); the page shows its ring section
	// while this answers 200 and hides it on a 404 (an older node).
	{[]string{"/api/ring/status"}, "GET", "/api/ring/status", "", 200,
		[]string{"instance_id", "role", "master", "epoch", "coverage", "members"}},
	// Who the token is: the page shows and offers what its role may do.
	{[]string{"/api/whoami"}, "GET", "/api/whoami", "", 200, []string{"name", "role", "frontends", "open"}},
	{[]string{"/api/audit?limit="}, "GET", "/api/audit?limit=50", "", 200, []string{"entries"}},
}

func uiDo(t *testing.T, srv *httptest.Server, method, path, body, token string) (*http.Response, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s %s: answer is not a JSON object: %v: %s", method, path, err, raw)
		}
	}
	return res, doc
}

// TestUIAPIPaths: the page mentions each API path it uses, uses no other,
// and each of them answers (over the stub node) with the fields the page
// reads.
func TestUIAPIPaths(t *testing.T) {
	srv := uiServer(t)
	page := uiScriptOf(t, srv)

	var want []string
	for _, c := range uiCalls {
		for _, f := range c.fragments {
			if !slices.Contains(want, f) && strings.HasPrefix(f, "/api") {
				want = append(want, f)
			}
			if !strings.Contains(page, "'"+f+"'") {
				t.Errorf("the page does not mention %q", f)
			}
		}
		for _, k := range c.fields {
			if !strings.Contains(page, k) {
				t.Errorf("the page does not read %q of %s %s", k, c.method, c.path)
			}
		}
	}
	for _, m := range regexp.MustCompile(`['"](/api[^'"]*)['"]`).FindAllStringSubmatch(page, -1) {
		if !slices.Contains(want, m[1]) {
			t.Errorf("the page uses %q, which this test does not know: add it to uiCalls", m[1])
		}
	}

	for _, c := range uiCalls {
		res, doc := uiDo(t, srv, c.method, c.path, c.body, stubToken)
		if res.StatusCode != c.status {
			t.Errorf("%s %s = %d, want %d (%v)", c.method, c.path, res.StatusCode, c.status, doc)
			continue
		}
		for _, k := range c.fields {
			if _, ok := doc[k]; !ok {
				t.Errorf("%s %s: the answer has no %q: %v", c.method, c.path, k, doc)
			}
		}
	}

	// The details the page relies on beyond top-level keys.
	_, st := uiDo(t, srv, "GET", "/api/status", "", stubToken)
	counts, _ := st["counts"].(map[string]any)
	for _, s := range messages.AllStates {
		if _, ok := counts[string(s)]; !ok {
			t.Errorf("/api/status counts has no %q", s)
		}
		if !strings.Contains(page, "'"+string(s)+"'") {
			t.Errorf("the page does not list the state %q", s)
		}
	}
	// The peers table (fed from /api/status) shows these fields of each peer.
	for _, k := range []string{"node", "address", "state", "forward_queue_depth", "consecutive_failures",
		"last_success", "frontends", "last_error"} {
		if !strings.Contains(page, "peer."+k) {
			t.Errorf("the peers table does not show %q", k)
		}
	}
	// The ring's members table shows these fields of each member.
	_, ring := uiDo(t, srv, "GET", "/api/ring/status", "", stubToken)
	members, _ := ring["members"].([]any)
	if len(members) == 0 {
		t.Fatalf("ring members = %v, want some", ring["members"])
	}
	for _, k := range []string{"instance_id", "address", "zone", "services", "ranges"} {
		if _, ok := members[0].(map[string]any)[k]; !ok {
			t.Errorf("ring member has no %q: %v", k, members[0])
		}
		if !strings.Contains(page, "m."+k) {
			t.Errorf("the ring members table does not show %q", k)
		}
	}
	_, list := uiDo(t, srv, "GET", "/api/messages", "", stubToken)
	if list["next_cursor"] != "7" {
		t.Errorf("next_cursor = %v, want \"7\"", list["next_cursor"])
	}
	_, msg := uiDo(t, srv, "GET", "/api/messages/m-1", "", stubToken)
	hist, _ := msg["history"].([]any)
	if len(hist) != 2 {
		t.Fatalf("history = %v, want 2 entries", msg["history"])
	}
	for _, k := range []string{"state", "at", "detail"} {
		if _, ok := hist[0].(map[string]any)[k]; !ok {
			t.Errorf("history entry has no %q: %v", k, hist[0])
		}
	}
}

// TestUIErrorDocuments: the page shows the API's {"error":{code,message}}
// verbatim and prompts for the token on 401.
func TestUIErrorDocuments(t *testing.T) {
	srv := uiServer(t)
	page := uiScriptOf(t, srv)
	for _, k := range []string{".error", ".code", ".message", "401", "403", "'Bearer '", "localStorage"} {
		if !strings.Contains(page, k) {
			t.Errorf("the page does not contain %q", k)
		}
	}
	for _, tc := range []struct {
		token, path string
		status      int
		code        string
	}{
		{"", "/api/status", 401, messages.CodeUnauthorized},
		{"wrong", "/api/status", 401, messages.CodeUnauthorized},
		{stubToken, "/api/messages/nope", 404, messages.CodeNotFound},
		{stubToken, "/api/frontends/fe-a", 409, messages.CodeFrontendInUse},
	} {
		method := "GET"
		if strings.HasPrefix(tc.path, "/api/frontends/") {
			method = "DELETE"
		}
		res, doc := uiDo(t, srv, method, tc.path, "", tc.token)
		e, _ := doc["error"].(map[string]any)
		if res.StatusCode != tc.status || e["code"] != tc.code || e["message"] == "" {
			t.Errorf("%s %s with token %q = %d %v, want %d with code %s and a message",
				method, tc.path, tc.token, res.StatusCode, doc, tc.status, tc.code)
		}
	}
}
