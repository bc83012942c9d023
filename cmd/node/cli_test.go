package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// The admin CLI against a real node: switchboard.Node started through the
// embedding API on a random loopback port with its self-signed certificate
// and an API token; the CLI runs in-process through mainCode.

const cliTestToken = "cli-secret-0123456789"

type cliNode struct {
	t    *testing.T
	addr string // host:port of the HTTPS API
	ca   string // the node's selfsigned.pem
	c    *nodetest.Client
}

// startCLINode starts the node; each of opts may change its configuration
// first.
func startCLINode(t *testing.T, opts ...func(*switchboard.Config)) *cliNode {
	t.Helper()
	cfg := switchboard.DefaultConfig()
	cfg.Name = "cli-node"
	cfg.InstanceID = "cli-node-0"
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.MetricsListen = ""
	cfg.APIToken = cliTestToken
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.ShutdownTimeout = 10 * time.Second
	for _, o := range opts {
		o(&cfg)
	}
	n := nodetest.Embedded(t, cfg)
	cn := &cliNode{t: t, addr: n.Addr(), ca: filepath.Join(cfg.DataDir, "selfsigned.pem")}
	trust, err := apiclient.TrustFile(cn.ca, "")
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = trust
	api, err := apiclient.NewURL("https://"+n.Addr(), apiclient.Config{Token: cliTestToken, HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	cn.c = nodetest.NewClient(t, api)
	t.Cleanup(tr.CloseIdleConnections)
	return cn
}

// env is the environment the CLI sees: the node's address, CA and token.
func (n *cliNode) env(extra ...string) lookupEnv {
	m := map[string]string{
		"SWITCHBOARD_ADDR":      n.addr,
		"SWITCHBOARD_CA":        n.ca,
		"SWITCHBOARD_API_TOKEN": cliTestToken,
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return envMap(m)
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// run runs the CLI with env and checks the exit code.
func (n *cliNode) runEnv(env lookupEnv, want int, args ...string) cliResult {
	n.t.Helper()
	var out, errOut bytes.Buffer
	code := mainCode(args, &out, &errOut, env)
	r := cliResult{code, out.String(), errOut.String()}
	if code != want {
		n.t.Fatalf("switchboard %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, r.stdout, r.stderr)
	}
	return r
}

func (n *cliNode) run(want int, args ...string) cliResult {
	n.t.Helper()
	return n.runEnv(n.env(), want, args...)
}

// api calls the API directly and returns the body of a 2xx answer.
func (n *cliNode) api(method, path string, body any) []byte {
	n.t.Helper()
	status, data := n.c.Do(method, path, body)
	if status/100 != 2 {
		n.t.Fatalf("%s %s: %d %s", method, path, status, data)
	}
	return data
}

func (n *cliNode) submit(id, dest string) {
	n.t.Helper()
	n.api("POST", "/api/messages", map[string]string{
		"id": id, "source_msisdn": "+15550001", "destination_msisdn": dest, "message_body": "hello " + id,
	})
}

// pollAck polls the pull frontend fe until every id of verdicts has been
// offered, then acks them with their verdicts. Other messages offered stay
// leased for an hour (they keep their state for the test).
func (n *cliNode) pollAck(verdicts map[string]messages.DeliveryStatus) {
	n.t.Helper()
	attempt := make(map[string]int)
	deadline := time.Now().Add(10 * time.Second)
	for len(attempt) < len(verdicts) {
		if time.Now().After(deadline) {
			n.t.Fatalf("poll: offered only %v of %v", attempt, verdicts)
		}
		var doc struct{ Messages []messages.Outgoing }
		data := n.api("POST", "/api/frontends/fe/poll", map[string]int{"max": 100, "wait_ms": 1000, "lease_ms": 3600000})
		if err := json.Unmarshal(data, &doc); err != nil {
			n.t.Fatal(err)
		}
		for _, m := range doc.Messages {
			if _, ok := verdicts[m.ID]; ok {
				attempt[m.ID] = m.Attempt
			}
		}
	}
	var results []messages.DeliveryResult
	for id, st := range verdicts {
		results = append(results, messages.DeliveryResult{ID: id, Status: st, Reason: "test verdict", Attempt: attempt[id]})
	}
	n.api("POST", "/api/frontends/fe/ack", map[string]any{"results": results})
	for id, st := range verdicts {
		want := messages.StateDelivered
		if st == messages.Failed {
			want = messages.StateFailed
		}
		n.waitState(id, want)
	}
}

// waitState polls the message until it is in state (with a deadline).
func (n *cliNode) waitState(id string, state messages.State) {
	n.t.Helper()
	polltest.Eventually(n.t, 10*time.Second, func() error {
		var m messages.Message
		if err := json.Unmarshal(n.api("GET", "/api/messages/"+id, nil), &m); err != nil {
			n.t.Fatal(err)
		}
		if m.State != state {
			return fmt.Errorf("message %s is %s, want %s", id, m.State, state)
		}
		return nil
	})
}

// cliTableRows splits a table into the fields of each line; row 0 is the
// header.
func cliTableRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

// cliRow finds the row whose first field is key.
func cliRow(t *testing.T, rows [][]string, key string) []string {
	t.Helper()
	for _, r := range rows {
		if len(r) > 0 && r[0] == key {
			return r
		}
	}
	t.Fatalf("no cliRow %q in %q", key, rows)
	return nil
}

// cliRoundTrip checks that out is one JSON document (one line) that decodes
// into T with no unknown field and encodes back to the same document.
func cliRoundTrip[T any](t *testing.T, out string) T {
	t.Helper()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("--json output is not one line: %q", out)
	}
	var v T
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("--json output %s does not decode into %T: %v", out, v, err)
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%T does not round-trip:\n got  %s\n sent %s", v, again, out)
	}
	return v
}

// cliSameDoc checks that the CLI printed exactly the API's document.
func cliSameDoc(t *testing.T, what, cliOut string, api []byte) {
	t.Helper()
	if cliOut != string(api) {
		t.Fatalf("%s: --json printed\n%s\nthe API answers\n%s", what, cliOut, api)
	}
}

// cliListDoc is the document of GET /api/messages (docs/api.md).
type cliListDoc struct {
	Messages   []messages.Message `json:"messages"`
	NextCursor string             `json:"next_cursor"`
}

func TestCLIAgainstNode(t *testing.T) {
	t.Parallel()
	n := startCLINode(t)

	// Frontends and routes through the CLI.
	fe := cliRoundTrip[messages.Frontend](t, n.run(0, "frontends", "set", "fe", "pull", "--json").stdout)
	if fe.Name != "fe" || fe.Mode != messages.ModePull {
		t.Fatalf("frontends set: %+v", fe)
	}
	if out := n.run(0, "frontends", "set", "hook", "webhook", "http://127.0.0.1:9/sms").stdout; out != "frontend hook: webhook http://127.0.0.1:9/sms\n" {
		t.Fatalf("frontends set: %q", out)
	}
	rows := cliTableRows(n.run(0, "frontends").stdout)
	if !slices.Equal(rows[0], []string{"NAME", "MODE", "URL", "UPDATED"}) || len(rows) != 3 {
		t.Fatalf("frontends table: %q", rows)
	}
	if r := cliRow(t, rows, "fe"); r[1] != "pull" || r[2] != "-" {
		t.Fatalf("frontends cliRow fe: %q", r)
	}
	if r := cliRow(t, rows, "hook"); r[1] != "webhook" || r[2] != "http://127.0.0.1:9/sms" {
		t.Fatalf("frontends cliRow hook: %q", r)
	}
	n.run(0, "frontends", "delete", "hook")
	out := n.run(0, "frontends", "list", "--json").stdout
	cliSameDoc(t, "frontends", out, n.api("GET", "/api/frontends", nil))
	if doc := cliRoundTrip[cliFrontendList](t, out); len(doc.Frontends) != 1 || doc.Frontends[0] != fe {
		t.Fatalf("frontends after delete: %+v, want only %+v", doc, fe)
	}

	if out := n.run(0, "routes", "set", "4470", "fe").stdout; out != "route 4470 -> fe\n" {
		t.Fatalf("routes set: %q", out)
	}
	rt := cliRoundTrip[messages.Route](t, n.run(0, "routes", "set", "4471", "fe", "--json").stdout)
	if rt.Prefix != "4471" || rt.Frontend != "fe" || rt.UpdatedAt.IsZero() {
		t.Fatalf("routes set --json: %+v", rt)
	}
	rows = cliTableRows(n.run(0, "routes").stdout)
	if !slices.Equal(rows[0], []string{"PREFIX", "FRONTEND", "UPDATED"}) || len(rows) != 3 {
		t.Fatalf("routes table: %q", rows)
	}
	if r := cliRow(t, rows, "4471"); r[1] != "fe" || r[2] != rt.UpdatedAt.UTC().Format(time.RFC3339) {
		t.Fatalf("routes cliRow 4471: %q (route %+v)", r, rt)
	}
	if out := n.run(0, "routes", "delete", "4471").stdout; out != "route 4471 deleted\n" {
		t.Fatalf("routes delete: %q", out)
	}
	out = n.run(0, "routes", "list", "--json").stdout
	cliSameDoc(t, "routes", out, n.api("GET", "/api/routes", nil))
	if doc := cliRoundTrip[cliRouteList](t, out); len(doc.Routes) != 1 || doc.Routes[0].Prefix != "4470" {
		t.Fatalf("routes after delete: %+v", doc)
	}

	// Messages in several states, submitted over HTTP.
	n.submit("m1", "447001")
	n.submit("m2", "447002")
	n.pollAck(map[string]messages.DeliveryStatus{"m1": messages.Delivered, "m2": messages.Failed})
	n.submit("m3", "447003")
	n.submit("m4", "+447004")

	rows = cliTableRows(n.run(0, "messages", "list").stdout)
	if !slices.Equal(rows[0], []string{"ID", "STATE", "DESTINATION", "FRONTEND", "DEST_SMSC", "ATTEMPTS", "UPDATED", "REASON"}) || len(rows) != 5 {
		t.Fatalf("messages table: %q", rows)
	}
	for id, want := range map[string][]string{
		"m1": {"m1", "delivered", "447001", "fe", "cli-node", "1"},
		"m2": {"m2", "failed", "447002", "fe", "cli-node", "1"},
		"m3": {"m3", "pending", "447003", "fe", "cli-node", "0"},
		"m4": {"m4", "pending", "+447004", "fe", "cli-node", "0"},
	} {
		if r := cliRow(t, rows, id); !slices.Equal(r[:6], want) {
			t.Errorf("messages cliRow %s: %q, want %q...", id, r, want)
		}
	}
	// The node lists newest first; the table keeps its order.
	if got := []string{rows[1][0], rows[2][0], rows[3][0], rows[4][0]}; !slices.Equal(got, []string{"m4", "m3", "m2", "m1"}) {
		t.Errorf("messages order %q", got)
	}

	out = n.run(0, "messages", "list", "--json").stdout
	cliSameDoc(t, "messages list", out, n.api("GET", "/api/messages", nil))
	all := cliRoundTrip[cliListDoc](t, out)
	if len(all.Messages) != 4 || all.NextCursor != "" {
		t.Fatalf("messages list --json: %+v", all)
	}

	// --state filters; a page announces the next one's cursor on stderr.
	rows = cliTableRows(n.run(0, "messages", "list", "--state", "failed").stdout)
	if len(rows) != 2 || rows[1][0] != "m2" {
		t.Fatalf("messages list --state failed: %q", rows)
	}
	r := n.run(0, "messages", "list", "--limit", "2", "--json")
	page1 := cliRoundTrip[cliListDoc](t, r.stdout)
	cliSameDoc(t, "messages page 1", r.stdout, n.api("GET", "/api/messages?limit=2", nil))
	if len(page1.Messages) != 2 || page1.NextCursor == "" || !strings.Contains(r.stderr, "--cursor "+page1.NextCursor) {
		t.Fatalf("page 1: %+v, stderr %q", page1, r.stderr)
	}
	out = n.run(0, "messages", "list", "--limit", "2", "--cursor", page1.NextCursor, "--json").stdout
	cliSameDoc(t, "messages page 2", out, n.api("GET", "/api/messages?limit=2&cursor="+page1.NextCursor, nil))
	// --all follows the cursor and prints one document equal to the
	// whole list.
	r = n.run(0, "messages", "list", "--all", "--limit", "1", "--json")
	if got := cliRoundTrip[cliListDoc](t, r.stdout); !reflect.DeepEqual(got, all) || r.stderr != "" {
		t.Fatalf("--all --json: %+v (stderr %q), want %+v", got, r.stderr, all)
	}
	if rows := cliTableRows(n.run(0, "messages", "list", "--all", "--limit", "1").stdout); len(rows) != 5 {
		t.Fatalf("--all table: %q", rows)
	}

	// The search: --to with or without '+', a prefix, a time range.
	for _, to := range []string{"447004", "+447004"} {
		if rows := cliTableRows(n.run(0, "messages", "list", "--to", to).stdout); len(rows) != 2 || rows[1][0] != "m4" {
			t.Errorf("messages list --to %s: %q", to, rows)
		}
	}
	if rows := cliTableRows(n.run(0, "messages", "list", "--to", "44700*", "--state", "pending").stdout); len(rows) != 3 ||
		rows[1][0] != "m4" || rows[2][0] != "m3" {
		t.Errorf("messages list --to 44700* --state pending: %q", rows)
	}
	if rows := cliTableRows(n.run(0, "messages", "list", "--since", "1h", "--all").stdout); len(rows) != 5 {
		t.Errorf("messages list --since 1h: %q", rows)
	}
	if rows := cliTableRows(n.run(0, "messages", "list", "--until", "1h").stdout); len(rows) != 1 {
		t.Errorf("messages list --until 1h: %q", rows)
	}

	// show: the fields and the history.
	out = n.run(0, "messages", "show", "m2").stdout
	for _, want := range []string{"id:", "m2", "state:", "failed", "frontend:", "dest_smsc:", "cli-node", "History:", "AT", "DETAIL"} {
		if !strings.Contains(out, want) {
			t.Errorf("messages show m2: no %q in\n%s", want, out)
		}
	}
	hist := strings.SplitN(out, "History:\n", 2)[1]
	if hrows := cliTableRows(hist); len(hrows) != 3 || hrows[1][1] != "pending" || hrows[2][1] != "failed" {
		t.Errorf("history of m2: %q", hrows)
	}
	out = n.run(0, "messages", "show", "--json", "--", "m2").stdout
	cliSameDoc(t, "messages show", out, n.api("GET", "/api/messages/m2", nil))
	if m := cliRoundTrip[messages.Message](t, out); m.ID != "m2" || m.State != messages.StateFailed || len(m.History) != 2 {
		t.Fatalf("show --json: %+v", m)
	}

	// resubmit: one, then in bulk.
	r = n.runEnv(n.env(), 1, "messages", "resubmit", "m1")
	if !strings.Contains(r.stderr, "invalid_state") {
		t.Errorf("resubmit of a delivered message: %q", r.stderr)
	}
	m := cliRoundTrip[messages.Message](t, n.run(0, "messages", "resubmit", "m2", "--json").stdout)
	if m.ID != "m2" || m.State.Resubmittable() {
		t.Fatalf("resubmit --json: %+v", m)
	}
	n.waitState("m2", m.State)
	n.pollAck(map[string]messages.DeliveryStatus{"m2": messages.Failed})
	if out := n.run(0, "messages", "resubmit", "--state", "failed").stdout; out != "resubmitted 1 failed message(s)\n" {
		t.Fatalf("bulk resubmit: %q", out)
	}
	if b := cliRoundTrip[messages.BulkReply](t, n.run(0, "messages", "resubmit", "--state", "forward_failed", "--json").stdout); b.Resubmitted != 0 || b.Skipped != 0 {
		t.Fatalf("bulk resubmit --json: %+v", b)
	}

	// peers: none without federation, and it says why.
	if out := n.run(0, "peers").stdout; !strings.Contains(out, "federation is off on") || strings.Contains(out, "NODE") {
		t.Fatalf("peers without federation: %q", out)
	}
	out = n.run(0, "peers", "--json").stdout
	cliSameDoc(t, "peers", out, n.api("GET", "/api/peers", nil))
	if p := cliRoundTrip[[]messages.PeerInfo](t, out); len(p) != 0 {
		t.Fatalf("peers: %+v", p)
	}

	// ring: a single instance is its own master over the whole ring.
	out = n.run(0, "ring", "--json").stdout
	cliSameDoc(t, "ring", out, n.api("GET", "/api/ring/status", nil))
	if rs := cliRoundTrip[messages.RingStatus](t, out); rs.Role != "master" || rs.Coverage != 1 || len(rs.Members) != 1 {
		t.Fatalf("ring --json: %+v", rs)
	}
	out = n.run(0, "ring").stdout
	rows = cliTableRows(out)
	if r := cliRow(t, rows, "role:"); len(r) != 2 || r[1] != "master" {
		t.Errorf("ring role row: %q in\n%s", r, out)
	}
	if !strings.Contains(out, "coverage:  100.0%") || !strings.Contains(out, "100.0%\n") {
		t.Errorf("ring: no full coverage or share in\n%s", out)
	}

	// status: counts and depths.
	out = n.run(0, "status", "--json").stdout
	st := cliRoundTrip[httpapi.Status](t, out)
	// The two answers differ in now alone: the node's clock as each was
	// made.
	if st.Now.IsZero() {
		t.Fatalf("status --json has no now: %s", out)
	}
	now := regexp.MustCompile(`"now":"[^"]*"`)
	cliSameDoc(t, "status", now.ReplaceAllString(out, `"now":""`), now.ReplaceAll(n.api("GET", "/api/status", nil), []byte(`"now":""`)))
	if st.Node != "cli-node" || st.Counts["delivered"] != 1 || st.Counts["pending"] != 3 {
		t.Fatalf("status: %+v", st)
	}
	out = n.run(0, "status").stdout
	rows = cliTableRows(out)
	for _, s := range messages.AllStates {
		if r := cliRow(t, rows, string(s)); len(r) != 2 || r[1] != cliInt(st.Counts[string(s)]) {
			t.Errorf("status cliRow %s: %q, counts %v", s, r, st.Counts)
		}
	}
	for _, want := range []string{"node:", "cli-node", "forward queue depth:", "outbox depth:", "dlq depth:", "frontends:", "fe (pull)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status: no %q in\n%s", want, out)
		}
	}
}

func cliInt(n int64) string {
	data, _ := json.Marshal(n)
	return string(data)
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	n := startCLINode(t)

	// Usage errors: exit 2, naming the flag or argument at fault.
	for _, tc := range []struct {
		args   []string
		env    []string
		stderr string
	}{
		{args: []string{"messages", "list", "--limit", "0"}, stderr: `--limit: invalid value "0"`},
		{args: []string{"messages", "list", "--limit", "x", "--state", "lost"}, stderr: "--state: invalid value \"lost\": must be one of pending"},
		{args: []string{"messages", "list", "--bogus"}, stderr: "--bogus: unknown flag"},
		{args: []string{"messages", "list", "--since", "yesterday"}, stderr: `--since: invalid value "yesterday": must be an RFC 3339 time`},
		{args: []string{"messages", "list", "--to", ""}, stderr: "--to: must not be empty"},
		// Was the node's invalid_request, exit 1.
		{args: []string{"messages", "list", "--since", "1h", "--until", "2h"}, stderr: "--since: "},
		{args: []string{"messages", "list", "--since", "2026-05-01T12:00:00Z", "--until", "2026-05-01T13:00:00+01:00"},
			stderr: "--since: 2026-05-01T12:00:00Z is not before --until 2026-05-01T12:00:00Z"},
		{args: []string{"messages", "list", "--cursor"}, stderr: "--cursor: needs a value"},
		{args: []string{"messages", "list", "--all=maybe"}, stderr: `--all: invalid value "maybe"`},
		{args: []string{"messages", "list", "extra"}, stderr: `unexpected argument "extra"`},
		{args: []string{"messages", "frob"}, stderr: `unknown messages command "frob"`},
		{args: []string{"messages", "show"}, stderr: "give the id"},
		{args: []string{"messages", "show", "a/b"}, stderr: `message id "a/b" is not valid`},
		{args: []string{"messages", "resubmit"}, stderr: "give the ids of the messages to resubmit, or --state failed|forward_failed"},
		{args: []string{"messages", "resubmit", "--state", "pending"}, stderr: `--state: invalid value "pending": must be failed or forward_failed`},
		{args: []string{"messages", "resubmit", "m1", "--state", "failed"}, stderr: "--state: give message ids or --state, not both"},
		{args: []string{"routes", "set", "4470"}, stderr: "routes set takes PREFIX FRONTEND"},
		{args: []string{"routes", "set", "44x", "fe"}, stderr: `prefix "44x" must be 1-20 digits`},
		{args: []string{"frontends", "set", "fe", "smtp"}, stderr: "frontends set takes NAME pull, NAME webhook URL or NAME smpp URL"},
		{args: []string{"status", "now"}, stderr: `unexpected argument "now"`},
		{args: []string{"status", "--timeout", "0"}, stderr: `--timeout: invalid value "0"`},
		{args: []string{"status"}, env: []string{"SWITCHBOARD_TIMEOUT", "soon"}, stderr: `--timeout: invalid value "soon": must be a positive duration such as 10s or 2m (from SWITCHBOARD_TIMEOUT)`},
		{args: []string{"status", "--addr", "ftp://x"}, stderr: `--addr: invalid value "ftp://x": scheme "ftp"`},
		{args: []string{"status"}, env: []string{"SWITCHBOARD_ADDR", "host:99999"}, stderr: `--addr: invalid value "host:99999": port "99999" must be from 1 to 65535 (from SWITCHBOARD_ADDR)`},
		{args: []string{"status", "--ca", filepath.Join(t.TempDir(), "none.pem")}, stderr: "--ca: cannot read"},
		{args: []string{"peers", "--json=maybe"}, stderr: `--json: invalid value "maybe": must be true or false`},
		// The first value was dropped in silence: only the retry messages were listed.
		{args: []string{"messages", "list", "--state", "failed", "--state", "retry"}, stderr: "--state: given twice; it takes one value"},
		{args: []string{"messages", "list", "--to", "4470", "extra", "--to", "4471"}, stderr: "--to: given twice; it takes one value"},
		{args: []string{"status", "--timeout", "5s", "--timeout", "10s"}, stderr: "--timeout: given twice; it takes one value"},
	} {
		r := n.runEnv(n.env(tc.env...), 2, tc.args...)
		if !strings.Contains(r.stderr, "switchboard: "+tc.stderr) || r.stdout != "" {
			t.Errorf("%q: stderr %q (stdout %q), want %q", tc.args, r.stderr, r.stdout, tc.stderr)
		}
	}

	// Help is no error.
	for _, args := range [][]string{{"messages", "-h"}, {"messages", "list", "-h"}, {"status", "--help"}, {"help", "routes"}, {"help", "admin"}} {
		if r := n.run(0, args...); !strings.Contains(r.stdout, "Usage: switchboard") || r.stderr != "" {
			t.Errorf("%q: %q %q", args, r.stdout, r.stderr)
		}
	}

	// The node's refusals: exit 1 with the error code and message.
	r := n.run(1, "messages", "show", "no-such-id")
	if !strings.Contains(r.stderr, "switchboard: not_found: ") || !strings.Contains(r.stderr, "no-such-id") || r.stdout != "" {
		t.Errorf("unknown id: %q", r.stderr)
	}
	// A wrong token and none get different words.
	r = n.run(1, "status", "--token", "wrong")
	if !strings.Contains(r.stderr, "switchboard: unauthorized: the API token is not valid") ||
		!strings.Contains(r.stderr, "the token given (--token or SWITCHBOARD_API_TOKEN) is not the node's --api-token nor a credential's token") {
		t.Errorf("wrong token: %q", r.stderr)
	}
	if r := n.runEnv(n.env("SWITCHBOARD_API_TOKEN", ""), 1, "peers", "--json"); !strings.Contains(r.stderr, "unauthorized: an API token is required") ||
		!strings.Contains(r.stderr, "give the node's API token with --token or SWITCHBOARD_API_TOKEN") || r.stdout != "" {
		t.Errorf("no token: %q %q", r.stdout, r.stderr)
	}
	// Plain HTTP to the HTTPS API: a hint to use https.
	if r := n.run(1, "status", "--addr", "http://"+n.addr); !strings.Contains(r.stderr, "the node speaks HTTPS: use --addr https://"+n.addr) {
		t.Errorf("http:// against https: %q", r.stderr)
	}
	if r := n.run(1, "routes", "set", "4470", "nobody"); !strings.Contains(r.stderr, "switchboard: unknown_frontend: ") {
		t.Errorf("route to an unknown frontend: %q", r.stderr)
	}

	// Reaching the node: the address that failed is named.
	env := envMap(map[string]string{"SWITCHBOARD_ADDR": n.addr, "SWITCHBOARD_API_TOKEN": cliTestToken})
	r = n.runEnv(env, 1, "status")
	if !strings.Contains(r.stderr, "cannot reach the node at "+n.addr) || !strings.Contains(r.stderr, "--ca FILE") {
		t.Errorf("untrusted certificate: %q", r.stderr)
	}
	n.runEnv(env, 0, "status", "--insecure")
	n.runEnv(env, 0, "status", "--ca", n.ca)
	n.runEnv(env, 0, "status", "--addr", "https://"+n.addr+"/", "--ca", n.ca)
	// A plain HTTP server (the node's metrics port) gets a hint too.
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	plainAddr := strings.TrimPrefix(plain.URL, "http://")
	if r := n.run(1, "status", "--addr", plainAddr); !strings.Contains(r.stderr, "server gave HTTP response to HTTPS client (the address speaks plain HTTP, not TLS: is it the node's --metrics-listen?") {
		t.Errorf("plain HTTP server: %q", r.stderr)
	}
	closed := cliClosedAddr(t)
	r = n.run(1, "peers", "--addr", closed)
	if !strings.Contains(r.stderr, "cannot reach the node at "+closed) {
		t.Errorf("closed port: %q", r.stderr)
	}
}

// cliClosedAddr is a loopback address nothing listens on.
func cliClosedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestCLIParseAddr(t *testing.T) {
	for addr, want := range map[string]string{
		"localhost":                       "https://localhost:8443",
		"localhost:9443":                  "https://localhost:9443",
		"10.0.0.1":                        "https://10.0.0.1:8443",
		"::1":                             "https://[::1]:8443",
		"[::1]:9443":                      "https://[::1]:9443",
		"https://sb.example.com":          "https://sb.example.com",
		"https://sb.example.com:8443/":    "https://sb.example.com:8443",
		"http://proxy.local/switchboard/": "http://proxy.local/switchboard",
	} {
		u, err := parseCLIAddr(addr)
		if err != nil || u.String() != want {
			t.Errorf("parseAddr(%q) = %v, %v; want %s", addr, u, err, want)
		}
	}
	for _, addr := range []string{"", "ftp://x", "https://", "https://u:p@x", "https://x?q=1", "x:0", "x:http",
		// An empty port dialled 443 (the URL's scheme's), not 8443.
		"localhost:", "https://localhost:", "[::1]:"} {
		if u, err := parseCLIAddr(addr); err == nil {
			t.Errorf("parseAddr(%q) = %v, want an error", addr, u)
		}
	}
}

// TestCLISynopsesNameEveryFlag: each admin command's synopsis, the line
// 'switchboard help admin' shows, names each of its flags ("messages
// list" left out --frontend and --peer).
func TestCLISynopsesNameEveryFlag(t *testing.T) {
	for _, topic := range cliTopics {
		cmds := topic.verbs
		if topic.cmd != nil {
			cmds = []*cliCommand{topic.cmd}
		}
		for _, c := range cmds {
			for _, f := range c.flags {
				if !strings.Contains(c.synopsis+" ", "--"+f.name+" ") && !strings.Contains(c.synopsis, "--"+f.name+"]") {
					t.Errorf("%s: the synopsis %q does not name --%s", c.name, c.synopsis, f.name)
				}
			}
		}
	}
}

// frontend is the frontend name as GET /api/frontends shows it.
func (n *cliNode) frontend(name string) messages.Frontend {
	n.t.Helper()
	var doc cliFrontendList
	if err := json.Unmarshal(n.api("GET", "/api/frontends", nil), &doc); err != nil {
		n.t.Fatal(err)
	}
	for _, f := range doc.Frontends {
		if f.Name == name {
			return f
		}
	}
	n.t.Fatalf("no frontend %s in %+v", name, doc)
	return messages.Frontend{}
}

// TestCLIFrontendsSetKeepsTheSecret: a PUT without a secret removes a
// webhook frontend's secret, so 'frontends set NAME webhook URL' on a signed
// frontend is refused unless --secret-file gives a secret or --no-secret
// says to remove it ('frontends set' had no way to give a secret, and turned
// the signing off in silence).
func TestCLIFrontendsSetKeepsTheSecret(t *testing.T) {
	t.Parallel()
	n := startCLINode(t)
	const secret = "0123456789abcdef0123456789abcdef"
	n.api("PUT", "/api/frontends/hook", map[string]string{"mode": "webhook", "url": "http://127.0.0.1:9/a", "secret": secret})

	r := n.run(1, "frontends", "set", "hook", "webhook", "http://127.0.0.1:9/b")
	if !strings.Contains(r.stderr, "switchboard: frontend hook is a signed webhook") ||
		!strings.Contains(r.stderr, "--secret-file FILE") || !strings.Contains(r.stderr, "--no-secret") || r.stdout != "" {
		t.Errorf("re-pointing a signed webhook without a secret: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if f := n.frontend("hook"); f.URL != "http://127.0.0.1:9/a" || !f.SecretSet {
		t.Fatalf("after the refusal: %+v, want it unchanged", f)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "hook.secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := n.run(0, "frontends", "set", "hook", "webhook", "http://127.0.0.1:9/b", "--secret-file", file).stdout; out != "frontend hook: webhook http://127.0.0.1:9/b (signed)\n" {
		t.Errorf("--secret-file: %q", out)
	}
	if f := n.frontend("hook"); f.URL != "http://127.0.0.1:9/b" || !f.SecretSet {
		t.Fatalf("after --secret-file: %+v", f)
	}
	if out := n.run(0, "frontends", "set", "hook", "webhook", "http://127.0.0.1:9/c", "--no-secret").stdout; out != "frontend hook: webhook http://127.0.0.1:9/c\n" {
		t.Errorf("--no-secret: %q", out)
	}
	if f := n.frontend("hook"); f.URL != "http://127.0.0.1:9/c" || f.SecretSet {
		t.Fatalf("after --no-secret: %+v", f)
	}
	// Unsigned now: no flag is needed.
	n.run(0, "frontends", "set", "hook", "webhook", "http://127.0.0.1:9/d")
	// A secret the node refuses: exit 1 with its words, nothing changed.
	short := filepath.Join(dir, "short.secret")
	if err := os.WriteFile(short, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := n.run(1, "frontends", "set", "hook", "webhook", "http://127.0.0.1:9/e", "--secret-file", short); !strings.Contains(r.stderr, "switchboard: invalid_request: secret: 16-256") {
		t.Errorf("short secret: %q", r.stderr)
	}
	if err := os.WriteFile(short+"-blank", []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// An smpp frontend's password may come from the file.
	pw := filepath.Join(dir, "smsc.pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.run(0, "frontends", "set", "smsc", "smpp", "smpp://acme@127.0.0.1:9", "--secret-file", pw)
	if f := n.frontend("smsc"); !f.SecretSet || f.URL != "smpp://acme@127.0.0.1:9" {
		t.Fatalf("smpp with --secret-file: %+v", f)
	}

	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"hook", "webhook", "http://127.0.0.1:9/f", "--secret-file", file, "--no-secret"}, "--secret-file and --no-secret: give one"},
		{[]string{"fe", "pull", "--secret-file", file}, "--secret-file: a pull frontend has no secret"},
		{[]string{"smsc", "smpp", "smpp://acme@127.0.0.1:9", "--no-secret"}, "--no-secret is for webhook frontends"},
		{[]string{"hook", "webhook", "http://127.0.0.1:9/f", "--secret-file", filepath.Join(dir, "none")}, "--secret-file: cannot read " + filepath.Join(dir, "none")},
		{[]string{"hook", "webhook", "http://127.0.0.1:9/f", "--secret-file", short + "-blank"}, "--secret-file: " + short + "-blank is empty"},
	} {
		r := n.run(2, append([]string{"frontends", "set"}, tc.args...)...)
		if !strings.Contains(r.stderr, "switchboard: "+tc.stderr) {
			t.Errorf("%q: stderr %q, want %q", tc.args, r.stderr, tc.stderr)
		}
	}
	if f := n.frontend("hook"); f.URL != "http://127.0.0.1:9/d" || f.SecretSet {
		t.Fatalf("after the refusals: %+v, want it unchanged", f)
	}
}

// TestCLIFrontendsSetAsAFrontend: a frontend credential may change its
// frontend but not read GET /api/frontends, so 'frontends set NAME webhook
// URL' cannot tell whether the frontend is signed: it is refused, naming
// the ways out, unless --secret-file or --no-secret says what to do.
func TestCLIFrontendsSetAsAFrontend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	creds, tokFile := filepath.Join(dir, "credentials.json"), filepath.Join(dir, "gw.token")
	if code, _, errOut := runMain("credentials", "add", "gw", "--role", "frontend", "--frontend", "hook",
		"--token-file", tokFile, "--credentials", creds); code != 0 {
		t.Fatalf("credentials add: exit %d: %s", code, errOut)
	}
	tok, err := os.ReadFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	n := startCLINode(t, func(cfg *switchboard.Config) { cfg.Credentials = creds })
	const secret = "0123456789abcdef0123456789abcdef"
	n.api("PUT", "/api/frontends/hook", map[string]string{"mode": "webhook", "url": "http://127.0.0.1:9/a", "secret": secret})
	env := n.env("SWITCHBOARD_API_TOKEN", strings.TrimSpace(string(tok)))

	r := n.runEnv(env, 1, "frontends", "set", "hook", "webhook", "http://127.0.0.1:9/b")
	if !strings.Contains(r.stderr, "switchboard: cannot tell whether frontend hook is signed") ||
		!strings.Contains(r.stderr, "forbidden") || !strings.Contains(r.stderr, "--secret-file FILE, or --no-secret") {
		t.Errorf("a frontend credential re-pointing its webhook: %q", r.stderr)
	}
	if f := n.frontend("hook"); f.URL != "http://127.0.0.1:9/a" || !f.SecretSet {
		t.Fatalf("after the refusal: %+v, want it unchanged", f)
	}
	file := filepath.Join(dir, "hook.secret")
	if err := os.WriteFile(file, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	n.runEnv(env, 0, "frontends", "set", "hook", "webhook", "http://127.0.0.1:9/b", "--secret-file", file)
	if f := n.frontend("hook"); f.URL != "http://127.0.0.1:9/b" || !f.SecretSet {
		t.Fatalf("after --secret-file: %+v", f)
	}
	n.runEnv(env, 0, "frontends", "set", "hook", "webhook", "http://127.0.0.1:9/c", "--no-secret")
	if f := n.frontend("hook"); f.URL != "http://127.0.0.1:9/c" || f.SecretSet {
		t.Fatalf("after --no-secret: %+v", f)
	}
}

// TestCLISeveralIDs: 'messages resubmit' and 'messages show' with several
// ids try each of them: a refused id is a line on stderr naming it and the
// error code, the others are done, and the exit code is 1 (resubmit
// stopped at the first refused id, and nothing said the later ones were
// not tried).
func TestCLISeveralIDs(t *testing.T) {
	t.Parallel()
	n := startCLINode(t)
	n.run(0, "frontends", "set", "fe", "pull")
	n.run(0, "routes", "set", "4470", "fe")
	n.submit("m1", "447001")
	n.submit("m2", "447002")
	n.pollAck(map[string]messages.DeliveryStatus{"m1": messages.Delivered, "m2": messages.Failed})

	r := n.run(1, "messages", "resubmit", "m1", "nope", "m2")
	if !strings.HasPrefix(r.stdout, "resubmitted m2: now ") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("resubmit m1 nope m2: stdout %q, want m2 resubmitted", r.stdout)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "switchboard: m1: invalid_state: ") ||
		!strings.HasPrefix(lines[1], "switchboard: nope: not_found: ") ||
		lines[2] != "switchboard: 2 of 3 messages not resubmitted: m1 nope" {
		t.Errorf("resubmit m1 nope m2: stderr %q", r.stderr)
	}
	if m := n.message("m2"); m.State.Resubmittable() {
		t.Errorf("m2 after the resubmit: %s", m.State)
	}

	r = n.run(1, "messages", "show", "nope", "m1", "m2", "--json")
	if got := strings.Count(r.stdout, "\n"); got != 2 || !strings.Contains(r.stdout, `"id":"m1"`) || !strings.Contains(r.stdout, `"id":"m2"`) {
		t.Errorf("show nope m1 m2 --json: stdout %q", r.stdout)
	}
	lines = strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "switchboard: nope: not_found: ") ||
		lines[1] != "switchboard: 1 of 3 messages not shown: nope" {
		t.Errorf("show nope m1 m2: stderr %q", r.stderr)
	}
	r = n.run(1, "messages", "show", "m1", "nope", "m2")
	if len(regexp.MustCompile(`(?m)^id:`).FindAllString(r.stdout, -1)) != 2 || !strings.Contains(r.stdout, "m2\n") || !strings.Contains(r.stderr, "switchboard: nope: not_found: ") {
		t.Errorf("show m1 nope m2: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	// With a bad token every id fails; the hint comes once.
	r = n.run(1, "messages", "show", "m1", "m2", "--token", "wrong")
	if strings.Count(r.stderr, "unauthorized") != 2 || strings.Count(r.stderr, "is not the node's --api-token") != 1 || r.stdout != "" {
		t.Errorf("show with a wrong token: %q", r.stderr)
	}
}

// message is message id as the API shows it.
func (n *cliNode) message(id string) messages.Message {
	n.t.Helper()
	var m messages.Message
	if err := json.Unmarshal(n.api("GET", "/api/messages/"+id, nil), &m); err != nil {
		n.t.Fatal(err)
	}
	return m
}

// TestCLIShowsEveryField: 'messages show' prints a binary message's body
// (base64) and each optional field that is set (it printed 'body: -' for
// a binary message and left out data_coding, message_class,
// validity_until, deliver_after, the next attempt and the trace id).
func TestCLIShowsEveryField(t *testing.T) {
	t.Parallel()
	n := startCLINode(t)
	n.run(0, "frontends", "set", "fe", "pull")
	n.run(0, "routes", "set", "4470", "fe")
	now := time.Now().UTC().Truncate(time.Second)
	after, until := now.Add(time.Hour), now.Add(2*time.Hour)
	n.api("POST", "/api/messages", map[string]any{
		"id": "bin", "source_msisdn": "+15550001", "destination_msisdn": "447001",
		"data_coding": "binary", "message_body_base64": "AAH/Cg==", "message_class": 1,
		"deliver_after": after, "validity_until": until,
	})
	m := n.message("bin")
	if m.NextAttemptAt == nil {
		t.Fatalf("the node gives no next_attempt_at for a scheduled message: %+v", m)
	}
	out := n.run(0, "messages", "show", "bin").stdout
	fields := map[string]string{}
	for _, line := range strings.Split(strings.SplitN(out, "\nHistory:", 2)[0], "\n") {
		name, value, _ := strings.Cut(line, ":")
		fields[name] = strings.TrimSpace(value)
	}
	for name, want := range map[string]string{
		"body":           "binary (base64): AAH/Cg==",
		"data_coding":    "binary",
		"message_class":  "1",
		"deliver_after":  after.Format(time.RFC3339),
		"validity_until": until.Format(time.RFC3339),
		"next_attempt":   m.NextAttemptAt.UTC().Format(time.RFC3339),
	} {
		if fields[name] != want {
			t.Errorf("messages show: %s %q, want %q in\n%s", name, fields[name], want, out)
		}
	}
	if _, ok := fields["trace_id"]; ok {
		t.Errorf("messages show: a trace_id row for a message without one:\n%s", out)
	}

	// A text message shows none of the optional rows; a trace id is shown
	// when there is one.
	var buf bytes.Buffer
	printMessage(&cliInvocation{stdout: &buf}, messages.Message{ID: "t", Body: "hi", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"})
	out = buf.String()
	if !regexp.MustCompile(`(?m)^body: +hi$`).MatchString(out) || !regexp.MustCompile(`(?m)^trace_id: +4bf92f3577b34da6a3ce929d0e0e4736$`).MatchString(out) {
		t.Errorf("printMessage of a text message with a trace id:\n%s", out)
	}
	for _, name := range []string{"data_coding", "message_class", "validity_until", "deliver_after", "next_attempt"} {
		if strings.Contains(out, name+":") {
			t.Errorf("printMessage of a text message: a %s row:\n%s", name, out)
		}
	}
}

// TestCLIHelpSaysWhatDocsSay: the -h texts say what docs/cli.md says: a
// --token may be a credential's, and 'frontends set' takes smpp URLs and
// the secret flags (--token's help named only the node's --api-token, and
// 'frontends set -h' described pull and webhook only).
func TestCLIHelpSaysWhatDocsSay(t *testing.T) {
	for args, wants := range map[string][]string{
		"status -h":            {"the node's --api-token, or a credential's token"},
		"frontends set -h":     {"the node's --api-token, or a credential's token", "NAME smpp URL", "an smpp frontend binds", "--secret-file FILE", "--no-secret"},
		"messages show -h":     {"With several ids each is tried"},
		"messages resubmit -h": {"Each id named is tried"},
	} {
		var out, errOut bytes.Buffer
		if code := mainCode(strings.Fields(args), &out, &errOut, envMap(nil)); code != 0 {
			t.Fatalf("%s: exit %d: %s", args, code, errOut.String())
		}
		for _, want := range wants {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: no %q in\n%s", args, want, out.String())
			}
		}
	}
}

// TestCLIDocFlagPlacement: docs/cli.md says where flags go as the parser
// takes them: after the command and its verb (it said "before or after
// the arguments", and a flag before the verb is refused).
func TestCLIDocFlagPlacement(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	if !strings.Contains(text, "Flags come after the command and its verb") {
		t.Errorf("docs/cli.md does not say that flags come after the command and its verb")
	}
	for _, tc := range []struct {
		args   string
		stderr string
	}{
		// Before the verb: the verb is an argument.
		{"messages --limit 1 list", `unexpected argument "list"`},
		// After it, before and after an argument: the flag is read.
		{"messages list --limit 0", `--limit: invalid value "0"`},
		{"routes set --timeout 0 4470 fe", `--timeout: invalid value "0"`},
		{"routes set 4470 fe --timeout 0", `--timeout: invalid value "0"`},
	} {
		var out, errOut bytes.Buffer
		if code := mainCode(strings.Fields(tc.args), &out, &errOut, envMap(nil)); code != 2 || !strings.Contains(errOut.String(), "switchboard: "+tc.stderr) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.stderr)
		}
	}
}

// fullDisk is stdout redirected to a file on a full disk (or /dev/full):
// every write fails.
type fullDisk struct{}

func (fullDisk) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// A command whose output could not be written fails: a script running
// 'switchboard messages list --all --json > ids.json' on a full disk got
// exit 0 and an empty file, and 'credentials add ... > token.txt' lost the
// only copy of the token with exit 0.
func TestCLIOutputNotWrittenFails(t *testing.T) {
	t.Parallel()
	n := startCLINode(t)
	n.run(0, "frontends", "set", "fe", "pull")
	n.run(0, "routes", "set", "44", "fe")
	n.submit("m-1", "+447700900001")
	for _, args := range [][]string{
		{"messages", "list", "--all", "--json"},
		{"messages", "list"},
		{"messages", "show", "m-1"},
		{"status"},
		{"routes", "list", "--json"},
		{"version"},
		{"help", "admin"},
	} {
		var errOut bytes.Buffer
		code := mainCode(args, fullDisk{}, &errOut, n.env())
		if code != 1 || !strings.Contains(errOut.String(), "switchboard: the output could not be written: no space left on device") {
			t.Errorf("switchboard %s with stdout on a full disk: exit %d, stderr %q; want 1 and the write error", strings.Join(args, " "), code, errOut.String())
		}
	}

	file := filepath.Join(t.TempDir(), "credentials.json")
	for _, args := range [][]string{
		{"credentials", "add", "root", "--role", "admin", "--credentials", file},
		{"credentials", "add", "ops", "--role", "operator", "--json", "--credentials", file},
	} {
		var errOut bytes.Buffer
		code := mainCode(args, fullDisk{}, &errOut, noEnv)
		want := fmt.Sprintf("the credential %s was added and its token is lost: revoke it, or add another", args[2])
		if code != 1 || !strings.Contains(errOut.String(), want) {
			t.Errorf("switchboard %s with stdout on a full disk: exit %d, stderr %q; want 1 and %q", strings.Join(args, " "), code, errOut.String(), want)
		}
	}
	// What the error says is so: both were added.
	out := n.runEnv(noEnv, 0, "credentials", "list", "--credentials", file).stdout
	if rows := cliTableRows(out); len(rows) != 3 {
		t.Errorf("credentials list after the two adds: %q, want root and ops", out)
	}
}

// TestCLIQuotesWhatWouldFoolTheTerminal: a value the node stores as sent
// (a body, a frontend's answer in the reason) is printed quoted when it
// holds characters a terminal acts on: control characters, and the
// bidirectional controls (U+202E drew the rest of the line right to left:
// 'messages show' printed the body raw).
func TestCLIQuotesWhatWouldFoolTheTerminal(t *testing.T) {
	t.Parallel()
	n := startCLINode(t)
	n.run(0, "frontends", "set", "fe", "pull")
	n.run(0, "routes", "set", "4470", "fe")
	for id, body := range map[string]string{
		"crlf":     "line one\r\nline two",
		"override": "pay 10 EUR to \u202e0001 tnuocca",
		"isolate":  "from \u2067evil\u2069 ok",
	} {
		n.api("POST", "/api/messages", map[string]string{
			"id": id, "source_msisdn": "+15550001", "destination_msisdn": "447001", "message_body": body,
		})
		out := n.run(0, "messages", "show", id).stdout
		if want := `(?m)^body: +` + regexp.QuoteMeta(strconv.Quote(body)) + `$`; !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("messages show %s: want the body quoted, %s, in\n%s", id, strconv.Quote(body), out)
		}
	}
}
