package switchboard_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
)

// roleNode is a node whose credentials file holds one credential of each
// role (the frontend one bound to fe-a), and a second client.
type roleNode struct {
	*harness
	tokens map[messages.Role]string
	other  string // the second client's token
	file   string
}

func startRoleNode(t *testing.T) *roleNode {
	t.Helper()
	cfg := testConfig(t)
	rn := &roleNode{tokens: map[messages.Role]string{}, file: filepath.Join(cfg.DataDir, "credentials.json")}
	var f auth.File
	add := func(name string, role messages.Role, fes ...string) string {
		tok, hash := auth.NewToken()
		f.Credentials = append(f.Credentials, messages.Credential{Name: name, Role: role, TokenHash: hash, Frontends: fes})
		return tok
	}
	rn.tokens[messages.RoleAdmin] = add("root", messages.RoleAdmin)
	rn.tokens[messages.RoleOperator] = add("ops", messages.RoleOperator)
	rn.tokens[messages.RoleClient] = add("shop", messages.RoleClient)
	rn.tokens[messages.RoleFrontend] = add("gw", messages.RoleFrontend, "fe-a")
	rn.other = add("other-shop", messages.RoleClient)
	if err := os.WriteFile(rn.file, f.Format(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Credentials = rn.file
	rn.harness = startNode(t, cfg)
	rn.token = rn.tokens[messages.RoleAdmin]
	return rn
}

// as is the harness calling with token.
func (h *harness) as(token string) *harness {
	c := *h
	c.token = token
	return &c
}

// roleOp is how the route x role test calls one documented operation: a
// request that the gateway answers want when the role may make it. setup,
// when set, runs as admin before each call (it makes what the call
// consumes: a failed message to resubmit, a route to delete).
type roleOp struct {
	path  string
	body  any
	want  int
	setup func(n *roleNode, call int) (path string)
}

// documentedRoles reads every operation's x-switchboard-roles from the
// OpenAPI document the node serves.
func documentedRoles(t *testing.T, h *harness) map[string][]messages.Role {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]struct {
			Roles []messages.Role `json:"x-switchboard-roles"`
		} `json:"paths"`
	}
	h.must(200, "GET", "/api/openapi.json", nil, &doc)
	out := map[string][]messages.Role{}
	for path, item := range doc.Paths {
		for method, op := range item {
			if len(op.Roles) > 0 {
				out[strings.ToUpper(method)+" "+path] = op.Roles
			}
		}
	}
	return out
}

// TestRouteRoleTable calls every operation the OpenAPI document gives
// roles, as every role, against a real node: a role the document names
// gets the operation's answer; any other gets 403 forbidden and nothing
// changes (messages, their states and histories, routes, frontends, the
// audit trail). Without a token, and with a token that is no credential,
// every one of them is 401 and changes nothing either.
func TestRouteRoleTable(t *testing.T) {
	n := startRoleNode(t)
	// fe-a is polled and acked by the calls below and never holds a
	// message: a poll that finds one leases it, a change the refusals'
	// snapshots would see. The submits go to fe-c, which nobody polls;
	// fe-b makes failed messages to resubmit.
	n.pullFrontend("fe-a", "44")
	n.pullFrontend("fe-b", "33")
	n.pullFrontend("fe-c", "55")
	// A message the client submitted, which every reader may read.
	shopMsg := n.as(n.tokens[messages.RoleClient]).submit("", "551")
	seq := 0
	unique := func(p string) string { seq++; return fmt.Sprintf("%s-%d", p, seq) }
	failed := func(n *roleNode) string {
		id := unique("dead")
		n.submit(id, "331")
		for _, o := range n.poll("fe-b", 10, 1000, 60000) {
			n.ack("fe-b", messages.DeliveryResult{ID: o.ID, Status: messages.Failed, Reason: "barred", Attempt: o.Attempt})
		}
		n.waitState(id, messages.StateFailed)
		return id
	}
	ops := map[string]roleOp{
		"POST /api/messages": {want: 202, setup: func(*roleNode, int) string { return "/api/messages" },
			body: nil /* set per call below */},
		"GET /api/messages": {path: "/api/messages?limit=5", want: 200},
		"POST /api/messages/resubmit": {path: "/api/messages/resubmit", body: map[string]string{"state": "failed"}, want: 200,
			setup: func(n *roleNode, _ int) string { failed(n); return "/api/messages/resubmit" }},
		"GET /api/messages/{id}": {path: "/api/messages/" + shopMsg, want: 200},
		"POST /api/messages/{id}/resubmit": {want: 200,
			setup: func(n *roleNode, _ int) string { return "/api/messages/" + failed(n) + "/resubmit" }},
		"GET /api/status":         {path: "/api/status", want: 200},
		"GET /api/stats/timeline": {path: "/api/stats/timeline", want: 200},
		"GET /api/routes":         {path: "/api/routes", want: 200},
		"PUT /api/routes/{prefix}": {want: 200, body: map[string]string{"frontend": "fe-a"},
			setup: func(_ *roleNode, call int) string { return fmt.Sprintf("/api/routes/9%d", call) }},
		"DELETE /api/routes/{prefix}": {want: 204, setup: func(n *roleNode, call int) string {
			p := fmt.Sprintf("8%d", call)
			n.must(200, "PUT", "/api/routes/"+p, map[string]string{"frontend": "fe-a"}, nil)
			return "/api/routes/" + p
		}},
		"GET /api/frontends":        {path: "/api/frontends", want: 200},
		"PUT /api/frontends/{name}": {path: "/api/frontends/fe-a", body: map[string]string{"mode": "pull"}, want: 200},
		"DELETE /api/frontends/{name}": {want: 204, setup: func(n *roleNode, call int) string {
			name := fmt.Sprintf("tmp-%d", call)
			n.must(200, "PUT", "/api/frontends/"+name, map[string]string{"mode": "pull"}, nil)
			return "/api/frontends/" + name
		}},
		"POST /api/frontends/{name}/poll": {path: "/api/frontends/fe-a/poll", body: map[string]any{"max": 1, "wait_ms": 0, "lease_ms": 1000}, want: 200},
		"POST /api/frontends/{name}/ack":  {path: "/api/frontends/fe-a/ack", body: map[string]any{"results": []any{}}, want: 200},
		"GET /api/peers":                  {path: "/api/peers", want: 200},
		"GET /api/audit":                  {path: "/api/audit?limit=5", want: 200},
		"GET /api/whoami":                 {path: "/api/whoami", want: 200},
		"GET /api/openapi.json":           {path: "/api/openapi.json", want: 200},
		"GET /api/ring/status":            {path: "/api/ring/status", want: 200},
	}
	documented := documentedRoles(t, n.harness)
	if len(documented) < 20 {
		t.Fatalf("the document gives roles to %d operations; expected every client and operator operation", len(documented))
	}
	for _, key := range slices.Sorted(maps.Keys(documented)) {
		op, ok := ops[key]
		if !ok {
			t.Errorf("%s: the document gives it roles %v, the test has no call for it", key, documented[key])
			continue
		}
		method, _, _ := strings.Cut(key, " ")
		call := 0
		request := func() (string, any) {
			call++
			path, body := op.path, op.body
			if op.setup != nil {
				path = op.setup(n, call)
			}
			if key == "POST /api/messages" {
				body = map[string]string{"id": unique("m"), "source_msisdn": "1555", "destination_msisdn": "5512", "message_body": "hi"}
			}
			return path, body
		}
		for _, role := range messages.AllRoles {
			allowed := slices.Contains(documented[key], role)
			path, body := request()
			caller := n.as(n.tokens[role])
			if allowed {
				if status, data := caller.do(method, path, body); status != op.want {
					t.Errorf("%s as %s (allowed): %d, want %d: %s", key, role, status, op.want, data)
				}
				continue
			}
			before := n.snapshotWithAudit()
			caller.apiError(403, messages.CodeForbidden, method, path, body)
			if after := n.snapshotWithAudit(); after != before {
				t.Errorf("%s as %s was refused but changed the node:\nbefore %s\nafter  %s", key, role, before, after)
			}
		}
		for _, tok := range []string{"", "sbt_not-a-credential-of-this-node-at-all"} {
			path, body := request()
			before := n.snapshotWithAudit()
			n.as(tok).apiError(401, messages.CodeUnauthorized, method, path, body)
			if after := n.snapshotWithAudit(); after != before {
				t.Errorf("%s without a valid token was refused but changed the node", key)
			}
		}
	}
}

// TestRoleScopes: what each role may touch within the calls it may make.
// A frontend credential acts only for its bound frontends; a client reads
// only the messages it submitted, and an id another client used is not
// its to take; a refusal changes nothing.
func TestRoleScopes(t *testing.T) {
	n := startRoleNode(t)
	n.pullFrontend("fe-a", "44")
	n.pullFrontend("fe-b", "33")
	gw := n.as(n.tokens[messages.RoleFrontend])
	shop := n.as(n.tokens[messages.RoleClient])
	other := n.as(n.other)

	mine := shop.submit("shop-1", "441")
	theirs := other.submit("other-1", "442")
	n.submit("root-1", "443")

	before := n.snapshotWithAudit()
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/frontends/fe-b/poll"},
		{"POST", "/api/frontends/fe-b/ack"},
		{"PUT", "/api/frontends/fe-b"},
		{"PUT", "/api/frontends/fe-new"},
	} {
		body := map[string]any{"max": 1, "wait_ms": 0}
		switch {
		case strings.HasSuffix(c.path, "/ack"):
			body = map[string]any{"results": []any{}}
		case c.method == "PUT":
			body = map[string]any{"mode": "pull"}
		}
		gw.apiError(403, messages.CodeForbidden, c.method, c.path, body)
	}
	if after := n.snapshotWithAudit(); after != before {
		t.Errorf("refused frontend calls changed the node:\nbefore %s\nafter  %s", before, after)
	}
	// Its own frontend: poll, ack, register.
	got := gw.poll("fe-a", 10, 1000, 30000)
	if len(got) != 3 {
		t.Fatalf("the frontend credential polled %d of fe-a's 3 messages", len(got))
	}
	for _, o := range got {
		if out := gw.ack("fe-a", messages.DeliveryResult{ID: o.ID, Status: messages.Delivered, Attempt: o.Attempt}); out[0].Outcome != "applied" {
			t.Errorf("ack of %s: %+v", o.ID, out)
		}
	}
	gw.must(200, "PUT", "/api/frontends/fe-a", map[string]string{"mode": "pull"}, nil)

	// A client reads its own messages only.
	shop.must(200, "GET", "/api/messages/"+mine, nil, nil)
	shop.apiError(404, messages.CodeNotFound, "GET", "/api/messages/"+theirs, nil)
	shop.apiError(404, messages.CodeNotFound, "GET", "/api/messages/root-1", nil)
	var list struct{ Messages []messages.Message }
	shop.must(200, "GET", "/api/messages?limit=100", nil, &list)
	if len(list.Messages) != 1 || list.Messages[0].ID != mine || list.Messages[0].SubmittedBy != "shop" {
		t.Errorf("the client's list: %+v, want only %s", list.Messages, mine)
	}
	shop.must(200, "GET", "/api/messages?destination=44*", nil, &list)
	if len(list.Messages) != 1 {
		t.Errorf("the client's search found %d messages, want its own 1", len(list.Messages))
	}
	// An id another client used is taken: not returned, not overwritten.
	before = n.snapshotWithAudit()
	shop.apiError(409, messages.CodeIDConflict, "POST", "/api/messages",
		map[string]string{"id": theirs, "source_msisdn": "15550001", "destination_msisdn": "442", "message_body": "hello " + theirs})
	if after := n.snapshotWithAudit(); after != before {
		t.Error("a client's submit of another's id changed the node")
	}
	// The operator and the admin read everything.
	var all struct{ Messages []messages.Message }
	n.as(n.tokens[messages.RoleOperator]).must(200, "GET", "/api/messages?limit=100", nil, &all)
	if len(all.Messages) != 3 {
		t.Errorf("the operator lists %d messages, want 3", len(all.Messages))
	}
	// whoami tells each credential what it is.
	var who struct {
		Name      string
		Role      messages.Role
		Frontends []string
		Open      bool
	}
	gw.must(200, "GET", "/api/whoami", nil, &who)
	if who.Name != "gw" || who.Role != messages.RoleFrontend || !slices.Equal(who.Frontends, []string{"fe-a"}) || who.Open {
		t.Errorf("whoami as gw: %+v", who)
	}
}

// snapshotWithAudit is snapshot plus the audit trail.
func (h *harness) snapshotWithAudit() string {
	h.t.Helper()
	var trail json.RawMessage
	h.must(200, "GET", "/api/audit?limit=1000", nil, &trail)
	return h.snapshot() + string(trail)
}

// TestRevokedFrontendCredentialEndsItsLongPoll: a long-poll waiting when
// its frontend credential is revoked ends with 401, and the message
// submitted once the revocation is in force is not leased to it (it got
// it, up to wait_ms later): the next poll gets it, its first attempt.
func TestRevokedFrontendCredentialEndsItsLongPoll(t *testing.T) {
	cfg := testConfig(t)
	cfg.Credentials = filepath.Join(cfg.DataDir, "credentials.json")
	rootTok, rootHash := auth.NewToken()
	gwTok, gwHash := auth.NewToken()
	file := auth.File{Credentials: []messages.Credential{
		{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash},
		{Name: "gw", Role: messages.RoleFrontend, TokenHash: gwHash, Frontends: []string{"fe-a"}}}}
	writeCredentials(t, cfg.Credentials, file)
	polling, once := make(chan struct{}), sync.Once{}
	cfg.Intercept = func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/poll") {
				once.Do(func() { close(polling) })
			}
			next.ServeHTTP(w, r)
		})
	}
	h := startNode(t, cfg)
	h.token = rootTok
	h.pullFrontend("fe-a", "44")
	type answer struct {
		status int
		body   []byte
	}
	done := make(chan answer, 1)
	go func() {
		status, body := h.as(gwTok).do("POST", "/api/frontends/fe-a/poll", map[string]any{"max": 10, "wait_ms": 30000, "lease_ms": 60000})
		done <- answer{status, body}
	}()
	<-polling
	writeCredentials(t, cfg.Credentials, auth.File{Credentials: file.Credentials[:1]})
	if err := h.node.Reload(); err != nil {
		t.Fatal(err)
	}
	id := h.submit("after-revoke", "441")
	if a := <-done; a.status != 401 || strings.Contains(string(a.body), id) {
		t.Errorf("the poll of the revoked credential: %d %s, want 401 without %s", a.status, a.body, id)
	}
	var got struct{ Messages []messages.Outgoing }
	h.must(200, "POST", "/api/frontends/fe-a/poll", map[string]any{"max": 10, "wait_ms": 5000}, &got)
	if len(got.Messages) != 1 || got.Messages[0].ID != id || got.Messages[0].Attempt != 1 {
		t.Errorf("the next poll: %+v, want %s at its first attempt", got.Messages, id)
	}
}
