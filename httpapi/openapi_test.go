package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchboard-dev/switchboard/messages"
)

// The OpenAPI document is checked four ways: it is structurally sound
// (version, info, every $ref resolves, every operation answers something,
// path parameters match their templates); it and the router list the same
// operations; the Go documents marshal to exactly the properties of their
// schemas; and real answers of the gateway (over stubBackend) validate
// against the schema of the status they came with. A full OpenAPI
// validator library would check more of the specification's fine print,
// but not these drifts, which are the ones that happen; go.mod stays as it
// is.

// undocumented lists the routes the document leaves out, with the reason.
var undocumented = map[string]string{
	"GET /favicon.ico": "answers 204 so that browsers stop asking; no API",
}

// openAPIMethods are the operation keys of an OpenAPI path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

type openAPI struct {
	t    *testing.T
	root map[string]any
}

func loadOpenAPI(t *testing.T) openAPI {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(openAPIDoc, &root); err != nil {
		t.Fatalf("openapi.json is not a JSON object: %v", err)
	}
	return openAPI{t: t, root: root}
}

// pointer resolves a local JSON pointer ("#/components/schemas/Message").
func (d openAPI) pointer(ref string) (any, error) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not local to the document", ref)
	}
	var cur any = d.root
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q: %q is not inside an object", ref, tok)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("$ref %q: no %q", ref, tok)
		}
	}
	return cur, nil
}

// deref follows $ref until an object without one.
func (d openAPI) deref(v any) map[string]any {
	d.t.Helper()
	for range 10 {
		m, ok := v.(map[string]any)
		if !ok {
			d.t.Fatalf("%v is not an object", v)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var err error
		if v, err = d.pointer(ref); err != nil {
			d.t.Fatal(err)
		}
	}
	d.t.Fatalf("$ref chain too long at %v", v)
	return nil
}

func (d openAPI) schema(name string) map[string]any {
	d.t.Helper()
	return d.deref(map[string]any{"$ref": "#/components/schemas/" + name})
}

func (d openAPI) paths() map[string]any {
	d.t.Helper()
	p, ok := d.root["paths"].(map[string]any)
	if !ok {
		d.t.Fatal("paths is not an object")
	}
	return p
}

// operation is the documented operation of method on path template, or nil.
func (d openAPI) operation(method, tpl string) map[string]any {
	item, _ := d.paths()[tpl].(map[string]any)
	op, _ := item[strings.ToLower(method)].(map[string]any)
	return op
}

// operations lists "METHOD /path" of every documented operation.
func (d openAPI) operations() map[string]map[string]any {
	out := map[string]map[string]any{}
	for path, item := range d.paths() {
		for _, m := range openAPIMethods {
			if op, ok := item.(map[string]any)[m].(map[string]any); ok {
				out[strings.ToUpper(m)+" "+path] = op
			}
		}
	}
	return out
}

// walk calls f on every value of the document with its location.
func walk(at string, v any, f func(at string, v any)) {
	f(at, v)
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			walk(at+"/"+k, v[k], f)
		}
	case []any:
		for i, x := range v {
			walk(at+"/"+strconv.Itoa(i), x, f)
		}
	}
}

var (
	statusKeyRE = regexp.MustCompile(`^([1-5][0-9][0-9]|[1-5]XX|default)$`)
	templateRE  = regexp.MustCompile(`\{([^}]+)\}`)
)

func TestOpenAPIStructure(t *testing.T) {
	d := loadOpenAPI(t)
	if v, _ := d.root["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	info, _ := d.root["info"].(map[string]any)
	for _, k := range []string{"title", "version"} {
		if s, _ := info[k].(string); s == "" {
			t.Errorf("info.%s is missing", k)
		}
	}
	if len(d.paths()) == 0 {
		t.Fatal("no paths")
	}

	// Every $ref resolves.
	walk("#", d.root, func(at string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if ref, ok := m["$ref"].(string); ok {
			if _, err := d.pointer(ref); err != nil {
				t.Errorf("%s: %v", at, err)
			}
		}
	})

	// Every object schema requires only properties it has.
	schemas, _ := d.root["components"].(map[string]any)["schemas"].(map[string]any)
	walk("#/components/schemas", schemas, func(at string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		props, _ := m["properties"].(map[string]any)
		req, _ := m["required"].([]any)
		for _, r := range req {
			if _, ok := props[r.(string)]; !ok {
				t.Errorf("%s: required %q is not a property", at, r)
			}
		}
	})

	schemes, _ := d.root["components"].(map[string]any)["securitySchemes"].(map[string]any)
	tags := map[string]bool{}
	for _, tag := range d.root["tags"].([]any) {
		tags[tag.(map[string]any)["name"].(string)] = true
	}
	checkSecurity := func(at string, v any) {
		reqs, ok := v.([]any)
		if !ok {
			t.Errorf("%s: security is not a list", at)
			return
		}
		for _, r := range reqs {
			for name := range r.(map[string]any) {
				if _, ok := schemes[name]; !ok {
					t.Errorf("%s: security scheme %q is not defined", at, name)
				}
			}
		}
	}
	checkSecurity("#/security", d.root["security"])

	ids := map[string]string{}
	checkOp := func(at, path string, op map[string]any) {
		id, _ := op["operationId"].(string)
		if id == "" {
			t.Errorf("%s: no operationId", at)
		} else if prev, dup := ids[id]; dup {
			t.Errorf("%s: operationId %q is also %s", at, id, prev)
		}
		ids[id] = at
		for _, tag := range op["tags"].([]any) {
			if !tags[tag.(string)] {
				t.Errorf("%s: tag %q is not declared", at, tag)
			}
		}
		if sec, ok := op["security"]; ok {
			checkSecurity(at, sec)
		}
		resp, _ := op["responses"].(map[string]any)
		if len(resp) == 0 {
			t.Errorf("%s: no responses", at)
		}
		for code, r := range resp {
			if !statusKeyRE.MatchString(code) {
				t.Errorf("%s: response key %q is no status", at, code)
			}
			if desc, _ := d.deref(r)["description"].(string); desc == "" {
				t.Errorf("%s %s: no description", at, code)
			}
		}
		// Path parameters and the template name the same variables.
		inPath := map[string]bool{}
		for _, m := range templateRE.FindAllStringSubmatch(path, -1) {
			inPath[m[1]] = true
		}
		params, _ := op["parameters"].([]any)
		declared := map[string]bool{}
		for _, p := range params {
			p := d.deref(p)
			if p["in"] == "path" {
				declared[p["name"].(string)] = true
				if p["required"] != true {
					t.Errorf("%s: path parameter %v is not required", at, p["name"])
				}
			}
		}
		if !maps.Equal(inPath, declared) {
			t.Errorf("%s: template variables %v, path parameters %v", at, slices.Sorted(maps.Keys(inPath)), slices.Sorted(maps.Keys(declared)))
		}
	}
	for key, op := range d.operations() {
		checkOp(key, strings.SplitN(key, " ", 2)[1], op)
	}
	hooks, _ := d.root["webhooks"].(map[string]any)
	for name, item := range hooks {
		for _, m := range openAPIMethods {
			if op, ok := item.(map[string]any)[m].(map[string]any); ok {
				checkOp("webhook "+name+" "+m, "", op)
			}
		}
	}
}

// TestOpenAPIErrorCodes: the error codes and statuses of the document are
// those of statusOf.
func TestOpenAPIErrorCodes(t *testing.T) {
	d := loadOpenAPI(t)
	var documented []string
	for _, c := range d.schema("ErrorCode")["enum"].([]any) {
		documented = append(documented, c.(string))
	}
	slices.Sort(documented)
	if want := slices.Sorted(maps.Keys(statusOf)); !slices.Equal(documented, want) {
		t.Errorf("ErrorCode enum = %v, statusOf has %v", documented, want)
	}

	errSchema := d.schema("Error")
	answered := map[int]bool{}
	for key, op := range d.operations() {
		for code, r := range op["responses"].(map[string]any) {
			n, err := strconv.Atoi(code)
			if err != nil || n < 400 {
				continue
			}
			content, _ := d.deref(r)["content"].(map[string]any)
			mt, _ := content["application/json"].(map[string]any)
			if mt == nil || !mapsSame(d.deref(mt["schema"]), errSchema) {
				t.Errorf("%s %s: not the Error document", key, code)
			}
			answered[n] = true
		}
	}
	// 405 answers a method no operation has, so no operation lists it.
	answered[http.StatusMethodNotAllowed] = true
	want := map[int]bool{}
	for _, s := range statusOf {
		want[s] = true
	}
	if !maps.Equal(answered, want) {
		t.Errorf("documented error statuses %v, statusOf answers %v", slices.Sorted(maps.Keys(answered)), slices.Sorted(maps.Keys(want)))
	}
}

func mapsSame(a, b map[string]any) bool { return fmt.Sprintf("%p", a) == fmt.Sprintf("%p", b) }

// stubRing is a ring master over stubBackend's site "ui-node": it admits
// instances of its own site and refuses those of another cluster.
type stubRing struct{}

func stubAssignment() messages.RingAssignment {
	return messages.RingAssignment{Epoch: 3, Master: "ui-node-0", MasterAddress: "10.0.0.1:8443", Cluster: "c1", Region: "r1",
		Members: []messages.RingMember{
			{InstanceID: "ui-node-0", Address: "10.0.0.1:8443", Zone: "z1", Services: messages.AllServices,
				Ranges: []messages.TokenRange{{Lo: 0, Hi: 1<<63 - 1}}, Capabilities: []string{messages.CapMessageClass}},
			{InstanceID: "ui-node-1", Address: "10.0.0.2:8443", Zone: "z2", Services: []string{messages.ServiceDelivery},
				Ranges: []messages.TokenRange{{Lo: 1 << 63, Hi: 1<<64 - 1}}, Capabilities: []string{messages.CapMessageClass}},
		}, Coverage: 0.5}
}

func (stubRing) RingJoin(_ context.Context, from string, j messages.RingJoin) (messages.RingAssignment, error) {
	if j.Cluster != "c1" {
		return messages.RingAssignment{}, messages.Errorf(messages.CodeRingCluster, "cluster %q is not the master's cluster \"c1\"", j.Cluster)
	}
	return stubAssignment(), nil
}

func (stubRing) RingPoll(context.Context, string, messages.RingPoll) (messages.RingAssignment, error) {
	return stubAssignment(), nil
}

func (stubRing) RingLeave(context.Context, string, messages.RingLeave) error { return nil }

func (stubRing) RingStatus(context.Context) (messages.RingStatus, error) {
	a := stubAssignment()
	return messages.RingStatus{InstanceID: "ui-node-0", Role: messages.RoleMaster, Master: a.Master, Epoch: a.Epoch,
		Coverage: a.Coverage, Members: a.Members}, nil
}

// TestOpenAPIMatchesRouter: every route the router serves is documented
// and every documented operation is served.
func TestOpenAPIMatchesRouter(t *testing.T) {
	d := loadOpenAPI(t)
	s, err := New(Config{Backend: stubBackend{}, Ring: stubRing{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	err = s.Router().Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return err
		}
		methods, err := route.GetMethods()
		if err != nil {
			return fmt.Errorf("route %s serves every method: %w", tpl, err)
		}
		for _, m := range methods {
			served[m+" "+tpl] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	documented := d.operations()
	for key := range served {
		if _, ok := documented[key]; !ok && undocumented[key] == "" {
			t.Errorf("the router serves %s, the document does not describe it", key)
		}
	}
	for key := range documented {
		if !served[key] {
			t.Errorf("the document describes %s, the router does not serve it", key)
		}
	}
	for key := range undocumented {
		if !served[key] {
			t.Errorf("undocumented lists %s, which the router does not serve", key)
		}
		if _, ok := documented[key]; ok {
			t.Errorf("undocumented lists %s, which the document describes", key)
		}
	}
}

// TestOpenAPIServed: GET /api/openapi.json answers the embedded document,
// behind the API token like the rest of /api/.
func TestOpenAPIServed(t *testing.T) {
	s := stubServer(t)
	get := func(token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/api/openapi.json", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	if rec := get(""); rec.Code != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", rec.Code)
	}
	rec := get(stubToken)
	if rec.Code != http.StatusOK {
		t.Fatalf("with the token: %d, want 200", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if !bytes.Equal(rec.Body.Bytes(), openAPIDoc) {
		t.Error("the body is not the embedded document")
	}
}

// TestOpenAPISecurity: an operation that documents the API token refuses a
// call without it (401) on a node with --api-token, and one that does not
// document it never asks for it.
func TestOpenAPISecurity(t *testing.T) {
	d := loadOpenAPI(t)
	s, err := New(Config{Backend: stubBackend{}, Ring: stubRing{}, APIToken: stubToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sample := strings.NewReplacer("{id}", "m-1", "{prefix}", "44", "{name}", "fe-a")
	for key, op := range d.operations() {
		method, path, _ := strings.Cut(key, " ")
		sec, ok := op["security"]
		if !ok {
			sec = d.root["security"]
		}
		wantToken := false
		for _, r := range sec.([]any) {
			if _, ok := r.(map[string]any)["apiToken"]; ok {
				wantToken = true
			}
		}
		req := httptest.NewRequest(method, sample.Replace(path), strings.NewReader("{}"))
		req.Header.Set(messages.FederationHeader, "peer-a")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if got := rec.Code == http.StatusUnauthorized; got != wantToken {
			t.Errorf("%s without a token: %d; the document says token required = %v", key, rec.Code, wantToken)
		}
	}
}

// validate checks v (decoded JSON) against schema: type, enum, pattern,
// required properties, items, and no property the schema does not name
// (unless additionalProperties allows it). With exact, every property of
// an object schema must be present: v is a fully populated Go value, and a
// documented property the Go type lacks is drift too.
func (d openAPI) validate(at string, schema any, v any, exact bool) []string {
	s := d.deref(schema)
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }

	if typ, ok := s["type"]; ok {
		var types []string
		switch typ := typ.(type) {
		case string:
			types = []string{typ}
		case []any:
			for _, x := range typ {
				types = append(types, x.(string))
			}
		}
		got := jsonType(v)
		if !slices.Contains(types, got) && !(got == "integer" && slices.Contains(types, "number")) {
			bad("%s, want %v", got, types)
			return errs
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
		bad("%v is not one of %v", v, enum)
	}
	if p, ok := s["pattern"].(string); ok {
		if str, ok := v.(string); ok && !regexp.MustCompile(p).MatchString(str) {
			bad("%q does not match %s", str, p)
		}
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := v[r.(string)]; !ok {
				bad("required %q is missing", r)
			}
		}
		if exact {
			for _, k := range slices.Sorted(maps.Keys(props)) {
				if _, ok := v[k]; !ok {
					bad("documented %q is not in the Go document", k)
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if ps, ok := props[k]; ok {
				errs = append(errs, d.validate(at+"."+k, ps, v[k], exact)...)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case map[string]any:
				errs = append(errs, d.validate(at+"."+k, ap, v[k], exact)...)
			case bool:
				if !ap {
					bad("%q is not documented", k)
				}
			default:
				if props != nil {
					bad("%q is not documented", k)
				}
			}
		}
	case []any:
		if items, ok := s["items"]; ok {
			for i, x := range v {
				errs = append(errs, d.validate(fmt.Sprintf("%s[%d]", at, i), items, x, exact)...)
			}
		}
	}
	return errs
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func decodeJSON(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}

func asJSON(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return decodeJSON(t, raw)
}

// TestOpenAPISchemasMatchGo: each Go document, fully populated, marshals
// to exactly its schema's properties (recursively, with valid values), and
// its zero value to exactly the schema's required ones (the fields without
// omitempty are always on the wire).
func TestOpenAPISchemasMatchGo(t *testing.T) {
	d := loadOpenAPI(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	hist := []messages.HistoryEntry{{State: messages.StateRetry, At: at, Detail: "not attempted (attempt 2 given back)", Attempt: 2, Deferrals: 3, LastAt: &at, Resend: true}}
	// Every field set, to marshal every property (a real message has a
	// text body or a binary one, never both).
	opts := messages.Options{DataCoding: messages.CodingBinary, Binary: []byte{0, 255}, ValidityUntil: &at, DeliverAfter: &at, MessageClass: messages.Class(0)}
	msg := messages.Message{ID: "m-1", SourceMSISDN: "alice", DestinationMSISDN: "+447700900001", Body: "hi", Options: opts,
		State: messages.StateForwardQueued, SourceSMSC: "a", DestSMSC: "b", Frontend: "fe", Attempts: 1,
		Reason: messages.ReasonExpired, CreatedAt: at, UpdatedAt: at, SubmittedAt: at, QueuedAt: &at, NextAttemptAt: &at,
		LastDetail: "accepted", History: hist, SubmittedBy: "shop", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		SMSC: []messages.SMSCRef{{MessageID: "p-1", Receipt: "DELIVRD"}}, SMSCMessageID: "p-1"}
	peer := messages.PeerInfo{Node: "b", Address: "127.0.0.1:8443", State: messages.PeerDegraded, ConsecutiveFailures: 1,
		LastSuccess: &at, Frontends: []string{"fe"}, ForwardQueueDepth: 3,
		Instances: []messages.PeerInstance{{Address: "127.0.0.1:8443", InstanceID: "b-0"}}, LastError: "timeout"}
	fe := messages.Frontend{Name: "fe", Mode: messages.ModeWebhook, URL: "https://fe.example/hook", SecretSet: true, CreatedAt: at, UpdatedAt: at,
		BindState: "bound_trx", Worker: messages.WorkerDown, WorkerRestartAt: &at}
	entry := messages.AuditEntry{Seq: 3, At: at, Actor: "ops", Role: messages.RoleOperator, Remote: "192.0.2.1:5000",
		Action: messages.AuditRoutePut, Target: "44", Detail: "frontend fe"}
	counts := map[string]int64{}
	for _, s := range messages.AllStates {
		counts[string(s)] = 1
	}
	fwd := messages.Forward{ID: "m-1", SourceMSISDN: "alice", DestinationMSISDN: "+4477", Body: "hi", Options: opts, SourceSMSC: "a", DestSMSC: "b", Frontend: "fe"}
	reply := messages.ForwardReply{ID: "m-1", Duplicate: true, State: messages.StateFailed, Reason: messages.ReasonRejected}
	report := messages.StatusReport{ID: "m-1", Node: "b", Status: messages.ReportFailed, At: at, Reason: "rejected", Attempts: 2}
	var errDoc errorDoc
	errDoc.Error.Code, errDoc.Error.Message = messages.CodeNotFound, "no such message"
	one := int64(1)

	cases := []struct {
		schema     string
		full, zero any
	}{
		{"Submission", messages.Submission{ID: "m-1", SourceMSISDN: "alice", DestinationMSISDN: "+4477", Body: "hi", Options: opts}, messages.Submission{}},
		{"SubmitReply", submitReply{ID: "m-1", State: messages.StatePending}, submitReply{}},
		{"Message", msg, messages.Message{}},
		{"HistoryEntry", hist[0], messages.HistoryEntry{}},
		{"MessageList", listReply{Messages: []messages.Message{msg}, NextCursor: "7"}, listReply{}},
		{"BulkReply", messages.BulkReply{Resubmitted: 2, Skipped: 1}, messages.BulkReply{}},
		{"Status", Status{Node: "a", InstanceID: "a-0", Version: "v", Store: "embedded", Federation: true, Counts: counts, ForwardQueueDepth: 1,
			OutboxDepth: 1, DLQDepth: 1, OutboxOldest: &at, Peers: []messages.PeerInfo{peer}, Frontends: []messages.Frontend{fe},
			Delivery: "bus", Bus: &BusStatus{State: "down", Stream: "SWITCHBOARD_a", Reason: "connection refused"}, TraceURL: "https://jaeger.example/trace/{trace_id}"}, Status{}},
		{"BusStatus", BusStatus{State: "down", Stream: "SWITCHBOARD_a", Reason: "connection refused"}, BusStatus{}},
		{"PeerInfo", peer, messages.PeerInfo{}},
		{"Timeline", Timeline{IntervalSeconds: 10, Points: []TimelinePoint{{At: at, Accepted: 1, Delivered: 1, Failed: 1,
			OutboxDepth: &one, ForwardQueueDepth: &one}}}, Timeline{}},
		{"TimelinePoint", TimelinePoint{At: at, Accepted: 1, Delivered: 1, Failed: 1, OutboxDepth: &one, ForwardQueueDepth: &one}, TimelinePoint{}},
		{"PeerInstance", peer.Instances[0], messages.PeerInstance{}},
		{"Route", messages.Route{Prefix: "44", Frontend: "fe", UpdatedAt: at}, messages.Route{}},
		{"Frontend", fe, messages.Frontend{}},
		{"Outgoing", messages.OutgoingOf(msg), messages.Outgoing{}},
		{"DeliveryResult", messages.DeliveryResult{ID: "m-1", Status: messages.Retry, Reason: "busy", Attempt: 2}, messages.DeliveryResult{}},
		{"AckOutcome", messages.AckOutcome{ID: "m-1", Outcome: messages.OutcomeStale}, messages.AckOutcome{}},
		{"Identity", messages.Identity{Node: "a", InstanceID: "a-0", ProtocolVersion: messages.ProtocolVersion,
			Capabilities: []string{messages.CapForwardBatch}}, messages.Identity{}},
		{"Health", messages.Health{Node: "a", Time: at, Status: messages.HealthStopping, ForwardQueueDepth: 1}, messages.Health{}},
		{"Registry", messages.Registry{Node: "a", Frontends: []string{"fe"}}, messages.Registry{}},
		{"Forward", fwd, messages.Forward{}},
		{"ForwardReply", reply, messages.ForwardReply{}},
		{"ForwardBatch", messages.ForwardBatch{Messages: []messages.Forward{fwd}}, messages.ForwardBatch{}},
		{"ForwardResult", messages.ForwardResult{ForwardReply: reply, Error: messages.Errorf(messages.CodeNotOurFrontend, "no")}, messages.ForwardResult{}},
		{"ForwardResultError", messages.Errorf(messages.CodeInvalidRequest, "bad"), messages.Error{}},
		{"ForwardBatchReply", messages.ForwardBatchReply{Results: []messages.ForwardResult{{ForwardReply: reply,
			Error: messages.Errorf(messages.CodeNotOurFrontend, "no")}}}, messages.ForwardBatchReply{}},
		{"StatusReport", report, messages.StatusReport{}},
		{"StatusReply", messages.StatusReply{ID: "m-1", Outcome: "applied"}, messages.StatusReply{}},
		{"StatusBatch", messages.StatusBatch{Statuses: []messages.StatusReport{report}}, messages.StatusBatch{}},
		{"StatusBatchReply", messages.StatusBatchReply{Results: []messages.StatusReply{{ID: "m-1", Outcome: "no_work"}}}, messages.StatusBatchReply{}},
		{"Error", errDoc, errorDoc{}},
		{"AuditEntry", entry, messages.AuditEntry{}},
		{"AuditList", auditReply{Entries: []messages.AuditEntry{entry}, NextCursor: "3"}, auditReply{}},
		{"Whoami", whoamiReply{Name: "shop", Role: messages.RoleClient, Frontends: []string{"fe"}, SubmitRate: 5, Open: false}, whoamiReply{}},
		{"RingJoin", messages.RingJoin{InstanceID: "a-1", Node: "a", Address: "10.0.0.2:8443", Cluster: "c1", Region: "r1", Zone: "z1",
			Services: []string{messages.ServiceDelivery}, Capabilities: []string{messages.CapMessageClass}}, messages.RingJoin{}},
		{"RingPoll", messages.RingPoll{InstanceID: "a-1", Epoch: 3, WaitMs: 30000, Touch: true}, messages.RingPoll{}},
		{"RingLeave", messages.RingLeave{InstanceID: "a-1"}, messages.RingLeave{}},
		{"RingMember", stubAssignment().Members[0], messages.RingMember{}},
		{"RingAssignment", stubAssignment(), messages.RingAssignment{}},
		{"RingStatus", messages.RingStatus{InstanceID: "a-0", Role: messages.RoleSlave, Master: "a-0", Epoch: 3, Coverage: 1,
			Members: stubAssignment().Members, Delivery: "bus"}, messages.RingStatus{}},
	}
	for _, c := range cases {
		t.Run(c.schema, func(t *testing.T) {
			s := d.schema(c.schema)
			for _, e := range d.validate(c.schema, s, asJSON(t, c.full), true) {
				t.Error(e)
			}
			zero, _ := asJSON(t, c.zero).(map[string]any)
			var req []string
			for _, r := range s["required"].([]any) {
				req = append(req, r.(string))
			}
			slices.Sort(req)
			if got := slices.Sorted(maps.Keys(zero)); !slices.Equal(got, req) {
				t.Errorf("always on the wire: %v; required: %v", got, req)
			}
		})
	}
}

// TestOpenAPIEnums: the enums are the Go constants.
func TestOpenAPIEnums(t *testing.T) {
	d := loadOpenAPI(t)
	enum := func(s map[string]any) []string {
		var out []string
		for _, v := range s["enum"].([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	str := func(xs ...any) []string {
		var out []string
		for _, x := range xs {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	var states, peerStates []any
	for _, s := range messages.AllStates {
		states = append(states, s)
	}
	for _, s := range messages.AllPeerStates {
		peerStates = append(peerStates, s)
	}
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"State", enum(d.schema("State")), str(states...)},
		{"MessageCounts", slices.Sorted(maps.Keys(d.schema("MessageCounts")["properties"].(map[string]any))), slices.Sorted(slices.Values(str(states...)))},
		{"PeerState", enum(d.schema("PeerState")), str(peerStates...)},
		{"FrontendMode", enum(d.schema("FrontendMode")), str(messages.ModePull, messages.ModeWebhook, messages.ModeSMPP, messages.ModeActor)},
		{"DeliveryResult.status", enum(d.deref(d.schema("DeliveryResult")["properties"].(map[string]any)["status"])),
			str(messages.Delivered, messages.Failed, messages.Retry)},
		{"Health.status", enum(d.deref(d.schema("Health")["properties"].(map[string]any)["status"])),
			str(messages.HealthOK, messages.HealthStopping)},
		{"StatusReport.status", enum(d.deref(d.schema("StatusReport")["properties"].(map[string]any)["status"])),
			str(messages.ReportDelivered, messages.ReportFailed)},
		{"RingService", enum(d.schema("RingService")), messages.AllServices},
		{"Role", enum(d.schema("Role")), str(messages.RoleAdmin, messages.RoleOperator, messages.RoleClient, messages.RoleFrontend)},
		{"AuditAction", enum(d.schema("AuditAction")), messages.AuditActions},
		{"RingStatus.role", enum(d.deref(d.schema("RingStatus")["properties"].(map[string]any)["role"])),
			str(messages.RoleMaster, messages.RoleSlave)},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: document %v, Go %v", c.name, c.got, c.want)
		}
	}
	for _, s := range enum(d.deref(d.schema("ResubmitBulkRequest")["properties"].(map[string]any)["state"])) {
		if !messages.State(s).Resubmittable() {
			t.Errorf("ResubmitBulkRequest.state lists %q, which is not resubmittable", s)
		}
	}
}

// answerBackend is stubBackend acking as a node does: one outcome per
// verdict, in order (stubBackend answers nil, which no node does).
type answerBackend struct{ stubBackend }

func (answerBackend) Ack(_ context.Context, _ string, rs []messages.DeliveryResult) ([]messages.AckOutcome, error) {
	out := make([]messages.AckOutcome, len(rs))
	for i, r := range rs {
		out[i] = messages.AckOutcome{ID: r.ID, Outcome: "applied"}
	}
	return out, nil
}

// TestOpenAPIAnswers sends real requests to the gateway over stubBackend
// and checks that each answer's status is documented for its operation and
// its body validates against the documented schema; the request bodies
// meant to be accepted validate against the request schema.
func TestOpenAPIAnswers(t *testing.T) {
	d := loadOpenAPI(t)
	s, err := New(Config{Backend: answerBackend{}, Ring: stubRing{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	const when = `"2026-01-02T03:04:05Z"`
	fwd := func(id, fe string) string {
		return `{"id":"` + id + `","source_msisdn":"alice","destination_msisdn":"+4477","message_body":"hi","source_smsc":"peer-a","dest_smsc":"ui-node","frontend":"` + fe + `"}`
	}
	report := `{"id":"m-1","node":"peer-a","status":"delivered","at":` + when + `}`
	cases := []struct {
		method, path, body string
		valid              bool // the body must validate against the request schema
		want               int
	}{
		{"GET", "/healthz", "", false, 200},
		{"GET", "/readyz", "", false, 200},
		{"GET", "/", "", false, 200},
		{"GET", "/api/openapi.json", "", false, 200},
		{"POST", "/api/messages", `{"id":"m-9","source_msisdn":"alice","destination_msisdn":"+4477","message_body":"hi"}`, true, 422},
		{"POST", "/api/messages", `{"source_msisdn":"alice"`, false, 400},
		{"GET", "/api/messages?state=failed&limit=10", "", false, 200},
		{"GET", "/api/messages?limit=0", "", false, 400},
		{"POST", "/api/messages/resubmit", `{"state":"forward_failed"}`, true, 200},
		{"POST", "/api/messages/resubmit", `{"state":"pending"}`, false, 400},
		{"GET", "/api/messages/m-1", "", false, 200},
		{"GET", "/api/messages/nope", "", false, 404},
		{"POST", "/api/messages/m-1/resubmit", "", false, 200},
		{"GET", "/api/status", "", false, 200},
		{"GET", "/api/peers", "", false, 200},
		{"GET", "/api/audit?actor=ops&action=message.resubmit&since=2026-01-01T00:00:00Z&limit=10", "", false, 200},
		{"GET", "/api/audit?who=ops", "", false, 400},
		{"GET", "/api/whoami", "", false, 200},
		{"GET", "/api/routes", "", false, 200},
		{"PUT", "/api/routes/44", `{"frontend":"fe-a"}`, true, 200},
		{"PUT", "/api/routes/4x", `{"frontend":"fe-a"}`, false, 400},
		{"DELETE", "/api/routes/44", "", false, 204},
		{"GET", "/api/frontends", "", false, 200},
		{"PUT", "/api/frontends/fe-c", `{"mode":"webhook","url":"https://fe.example/hook"}`, true, 200},
		{"PUT", "/api/frontends/fe-c", `{"mode":"actor"}`, false, 400},
		{"DELETE", "/api/frontends/fe-a", "", false, 409},
		{"POST", "/api/frontends/fe-a/poll", `{"max":5,"wait_ms":0,"lease_ms":1000}`, true, 200},
		{"POST", "/api/frontends/fe-a/poll", `{"max":0}`, false, 400},
		{"POST", "/api/frontends/fe-a/ack", `{"results":[{"id":"m-1","status":"delivered","attempt":1}]}`, true, 200},
		{"GET", "/api/federation/identity", "", false, 200},
		{"POST", "/api/federation/health", `{"node":"peer-a","time":` + when + `,"status":"ok","forward_queue_depth":0}`, true, 200},
		{"POST", "/api/federation/health", `{"node":"peer-b","time":` + when + `,"status":"ok","forward_queue_depth":0}`, false, 403},
		{"POST", "/api/federation/registry", `{"node":"peer-a","frontends":["fe-x"]}`, true, 200},
		{"POST", "/api/federation/forward", fwd("m-9", "fe-a"), true, 202},
		{"POST", "/api/federation/forward", fwd("m-9", "fe-z"), true, 422},
		{"POST", "/api/federation/forward_batch", `{"messages":[` + fwd("m-8", "fe-a") + `,` + fwd("m-9", "fe-z") + `]}`, true, 200},
		{"POST", "/api/federation/delivery_status", report, true, 200},
		{"POST", "/api/federation/delivery_status_batch", `{"statuses":[` + report + `]}`, true, 200},
		{"GET", "/api/ring/status", "", false, 200},
		{"POST", "/api/ring/join", `{"instance_id":"a-1","node":"peer-a","address":"10.0.0.2:8443","cluster":"c1","region":"r1","zone":"","services":["delivery"]}`, true, 200},
		{"POST", "/api/ring/join", `{"instance_id":"a-1","node":"peer-a","address":"10.0.0.2:8443","cluster":"c2","region":"r1","zone":"","services":["delivery"]}`, true, 403},
		{"POST", "/api/ring/poll", `{"instance_id":"a-1","epoch":2,"wait_ms":0}`, true, 200},
		{"POST", "/api/ring/poll", `{"epoch":2}`, false, 400},
		{"POST", "/api/ring/leave", `{"instance_id":"a-1"}`, true, 204},
	}
	for _, c := range cases {
		name := c.method + " " + c.path
		var match mux.RouteMatch
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		req.Header.Set(messages.FederationHeader, "peer-a")
		if !s.Router().Match(req, &match) || match.MatchErr != nil {
			t.Errorf("%s: no route", name)
			continue
		}
		tpl, _ := match.Route.GetPathTemplate()
		op := d.operation(c.method, tpl)
		if op == nil {
			t.Errorf("%s: %s %s is not documented", name, c.method, tpl)
			continue
		}
		if c.valid {
			rb := d.deref(op["requestBody"])
			schema := rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"]
			for _, e := range d.validate("request", schema, decodeJSON(t, []byte(c.body)), false) {
				t.Errorf("%s: %s", name, e)
			}
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: %d, want %d: %s", name, rec.Code, c.want, rec.Body)
			continue
		}
		r, ok := op["responses"].(map[string]any)[strconv.Itoa(rec.Code)]
		if !ok {
			t.Errorf("%s: status %d is not documented", name, rec.Code)
			continue
		}
		content, _ := d.deref(r)["content"].(map[string]any)
		if len(content) == 0 {
			if rec.Body.Len() != 0 {
				t.Errorf("%s: %d has a body, the document has none", name, rec.Code)
			}
			continue
		}
		ct := rec.Header().Get("Content-Type")
		mt, _ := content[strings.TrimSpace(strings.Split(ct, ";")[0])].(map[string]any)
		if mt == nil {
			t.Errorf("%s: Content-Type %q is not documented for %d", name, ct, rec.Code)
			continue
		}
		if !strings.HasPrefix(ct, "application/json") {
			continue
		}
		body, _ := io.ReadAll(rec.Body)
		for _, e := range d.validate("answer", mt["schema"], decodeJSON(t, body), false) {
			t.Errorf("%s: %s", name, e)
		}
	}
}

// TestOpenAPIFederationHeader: every federation operation but identity
// documents X-Federation-Node as required.
func TestOpenAPIFederationHeader(t *testing.T) {
	d := loadOpenAPI(t)
	for key, op := range d.operations() {
		if !strings.Contains(key, " /api/federation/") {
			continue
		}
		has := false
		params, _ := op["parameters"].([]any)
		for _, p := range params {
			p := d.deref(p)
			if p["in"] == "header" && p["name"] == messages.FederationHeader && p["required"] == true {
				has = true
			}
		}
		if want := !strings.HasSuffix(key, "/identity"); has != want {
			t.Errorf("%s: documents %s = %v, want %v", key, messages.FederationHeader, has, want)
		}
	}
}

// TestOpenAPIRoles: every guarded operation states its roles
// (x-switchboard-roles), exactly those the gateway lets in, and the
// operations without a guard (probes, the UI, federation, the ring's
// instance calls) state none.
func TestOpenAPIRoles(t *testing.T) {
	d := loadOpenAPI(t)
	s, err := New(Config{Backend: stubBackend{}, Ring: stubRing{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	guarded := s.RouteRoles()
	for key, op := range d.operations() {
		var documented []string
		if rs, ok := op["x-switchboard-roles"].([]any); ok {
			for _, r := range rs {
				documented = append(documented, r.(string))
			}
		}
		var served []string
		for _, r := range guarded[key] {
			served = append(served, string(r))
		}
		if !slices.Equal(documented, served) {
			t.Errorf("%s: the document says roles %v, the gateway lets in %v", key, documented, served)
		}
		_, has403 := op["responses"].(map[string]any)["403"]
		if want := len(served) > 0 && len(served) < len(messages.AllRoles); want && !has403 {
			t.Errorf("%s: refuses some roles but documents no 403", key)
		}
	}
	for key := range guarded {
		if _, ok := d.operations()[key]; !ok {
			t.Errorf("the gateway guards %s, which the document lacks", key)
		}
	}
}

// TestAPIDocErrorTable: docs/api.md's error-code table lists every code a
// client or operator call answers, with the status statusOf gives it (the
// federation and ring codes are left to the OpenAPI document, as the
// paragraph after the table says). 507 storage_full was missing.
func TestAPIDocErrorTable(t *testing.T) {
	table := apiDocSection(t, "Error codes")
	rows := map[string]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\|").FindAllStringSubmatch(table, -1) {
		n, _ := strconv.Atoi(m[2])
		rows[m[1]] = n
	}
	elsewhere := []string{messages.CodeFederationOff, messages.CodeUnknownPeer, messages.CodeNodeMismatch,
		messages.CodeClientCertReq, messages.CodeNotOurFrontend, messages.CodeMisdirected}
	for _, code := range slices.Sorted(maps.Keys(statusOf)) {
		if slices.Contains(elsewhere, code) || strings.HasPrefix(code, "ring_") {
			continue
		}
		if got, ok := rows[code]; !ok || got != statusOf[code] {
			t.Errorf("docs/api.md's error table: %s is %d (listed %v), want %d", code, got, ok, statusOf[code])
		}
	}
	for code := range rows {
		if _, ok := statusOf[code]; !ok {
			t.Errorf("docs/api.md's error table lists %s, which the API does not answer", code)
		}
	}
}
