// Package deploy holds no code: it checks the deployment files beside it
// (the Grafana dashboard, the Prometheus alert rules, the systemd unit and
// the Kubernetes manifests) against a running node and the binary's flags.
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"go.uber.org/goleak"
)

// TestMain checks that the nodes the tests start leave no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// root is the repository root (tests run in their package directory).
const root = ".."

// docsBase is how the deployment files link to the docs (runbook_url,
// dashboard links): the docs of the main branch on GitHub.
const docsBase = "https://github.com/switchboard-dev/switchboard/blob/main/"

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// dashboard is the part of Grafana's dashboard model the checks read.
type dashboard struct {
	UID           string                    `json:"uid"`
	Title         string                    `json:"title"`
	SchemaVersion int                       `json:"schemaVersion"`
	Panels        []panel                   `json:"panels"`
	Templating    struct{ List []variable } `json:"templating"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int                      `json:"id"`
	Type        string                   `json:"type"`
	Title       string                   `json:"title"`
	Description string                   `json:"description"`
	Datasource  *datasourceRef           `json:"datasource"`
	GridPos     struct{ H, W, X, Y int } `json:"gridPos"`
	Targets     []struct {
		Datasource *datasourceRef `json:"datasource"`
		Expr       string         `json:"expr"`
		RefID      string         `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *datasourceRef  `json:"datasource"`
	IncludeAll bool            `json:"includeAll"`
	// AllValue is what Grafana sends for All; empty: the values the query
	// found, as one regular expression.
	AllValue string `json:"allValue"`
}

// query returns a variable's query, in its string or object form.
func (v variable) query() (string, error) {
	var s string
	if err := json.Unmarshal(v.Query, &s); err == nil {
		return s, nil
	}
	var o struct{ Query string }
	if err := json.Unmarshal(v.Query, &o); err != nil {
		return "", fmt.Errorf("variable %s: query is neither a string nor {query}: %s", v.Name, v.Query)
	}
	return o.Query, nil
}

// loadDashboard reads the dashboard and returns it with every PromQL
// expression it holds (panel targets and variable queries), named by where
// it is.
func loadDashboard(t *testing.T) (dashboard, map[string]string) {
	t.Helper()
	raw := readFile(t, "deploy/grafana/switchboard.json")
	var d dashboard
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatalf("switchboard.json is not a dashboard: %v", err)
	}
	exprs := map[string]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs[fmt.Sprintf("panel %q target %s", p.Title, tg.RefID)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := v.query()
		if err != nil {
			t.Fatal(err)
		}
		exprs["variable "+v.Name] = q
	}
	return d, exprs
}

func TestDashboard(t *testing.T) {
	d, exprs := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 || len(d.Panels) == 0 {
		t.Fatalf("dashboard lacks uid, title, schemaVersion or panels: uid=%q title=%q schema=%d panels=%d", d.UID, d.Title, d.SchemaVersion, len(d.Panels))
	}

	// A Prometheus data source variable, used by every query.
	dsVar := ""
	for _, v := range d.Templating.List {
		if v.Type == "datasource" {
			q, err := v.query()
			if err != nil || q != "prometheus" {
				t.Errorf("data source variable %s: query %q, want prometheus", v.Name, q)
			}
			dsVar = v.Name
		}
	}
	if dsVar == "" {
		t.Fatal("no data source variable (type datasource, query prometheus)")
	}
	wantDS := "${" + dsVar + "}"
	checkDS := func(where string, ds *datasourceRef) {
		if ds == nil || ds.Type != "prometheus" || ds.UID != wantDS {
			t.Errorf("%s: datasource %+v, want {prometheus %s}", where, ds, wantDS)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			checkDS("variable "+v.Name, v.Datasource)
		}
	}

	// Panels: unique ids, inside the 24-column grid, not overlapping, each
	// with a title and a description; every query names the variable data
	// source and has an expression and a unique refId.
	ids := map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	var all []panel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...)
	}
	for _, p := range all {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panel %q overlaps panel %q at (%d,%d)", p.Title, other, x, y)
					x, y = g.X+g.W, g.Y+g.H
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d (%s) needs a title and a description", p.ID, p.Type)
		}
		checkDS(fmt.Sprintf("panel %q", p.Title), p.Datasource)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			checkDS(fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), tg.Datasource)
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: target %q needs an expression and a unique refId", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
		}
	}

	// The signals that matter are all on it.
	used := map[string]bool{}
	for where, e := range exprs {
		use, err := parseVariableQuery(e)
		if err != nil {
			t.Errorf("%s: %v", where, err)
		}
		for _, s := range use.selectors {
			used[s.metric] = true
		}
	}
	for _, m := range []string{
		"switchboard_messages",
		"switchboard_forward_queue_depth",
		"switchboard_peer_state",
		"switchboard_federation_forward_completed_total",
		"switchboard_delivery_dispositions_total",
		"switchboard_outbox_depth",
		"switchboard_outbox_oldest_age_seconds",
		"switchboard_dlq_depth",
		"switchboard_federation_health_check_seconds_bucket",
		"switchboard_actor_restarts_total",
		"switchboard_actor_mailbox_depth",
		"process_resident_memory_bytes",
		"go_goroutines",
	} {
		if !used[m] {
			t.Errorf("the dashboard does not show %s", m)
		}
	}
}

// rule is one alerting rule of alerts.yml.
type rule struct {
	group, alert, expr, forDur string
	labels, annotations        map[string]string
}

// loadRules reads alerts.yml with the YAML subset reader and checks its
// shape on the way: groups of alerting rules whose fields are strings.
func loadRules(t *testing.T) []rule {
	t.Helper()
	docs, err := parseYAML(readFile(t, "deploy/prometheus/alerts.yml"))
	if err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	if len(docs) != 1 {
		t.Fatalf("alerts.yml: %d documents, want 1", len(docs))
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("alerts.yml: "+format, args...)
	}
	top, ok := docs[0].(map[string]any)
	if !ok {
		fail("not a mapping")
	}
	groups, ok := top["groups"].([]any)
	if !ok || len(groups) == 0 {
		fail("no groups")
	}
	strMap := func(where string, v any) map[string]string {
		m, ok := v.(map[string]any)
		if !ok {
			fail("%s: not a mapping", where)
		}
		out := map[string]string{}
		for k, v := range m {
			s, ok := v.(string)
			if !ok {
				fail("%s.%s: not a string", where, k)
			}
			out[k] = s
		}
		return out
	}
	var rules []rule
	for _, g := range groups {
		gm, ok := g.(map[string]any)
		if !ok {
			fail("a group is not a mapping")
		}
		name, _ := gm["name"].(string)
		rs, ok := gm["rules"].([]any)
		if name == "" || !ok || len(rs) == 0 {
			fail("group %q needs a name and rules", name)
		}
		for _, r := range rs {
			rm, ok := r.(map[string]any)
			if !ok {
				fail("group %s: a rule is not a mapping", name)
			}
			var rl rule
			rl.group = name
			rl.alert, _ = rm["alert"].(string)
			rl.expr, _ = rm["expr"].(string)
			rl.forDur, _ = rm["for"].(string)
			if rl.alert == "" || rl.expr == "" {
				fail("group %s: every rule is an alert with an expr (%v)", name, rm)
			}
			rl.labels = strMap(rl.alert+".labels", rm["labels"])
			rl.annotations = strMap(rl.alert+".annotations", rm["annotations"])
			for k := range rm {
				if !slices.Contains([]string{"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}, k) {
					fail("%s: unknown field %q", rl.alert, k)
				}
			}
			rules = append(rules, rl)
		}
	}
	return rules
}

var promDuration = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)

func TestAlertRules(t *testing.T) {
	rules := loadRules(t)
	seen := map[string]bool{}
	for _, r := range rules {
		if seen[r.alert] {
			t.Errorf("alert %s defined twice", r.alert)
		}
		seen[r.alert] = true
		if r.forDur != "" && !promDuration.MatchString(r.forDur) {
			t.Errorf("%s: for %q is not a duration", r.alert, r.forDur)
		}
		if s := r.labels["severity"]; s != "critical" && s != "warning" && s != "info" {
			t.Errorf("%s: severity %q, want critical, warning or info", r.alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.annotations[a]) == "" {
				t.Errorf("%s: annotation %s missing", r.alert, a)
			}
		}
		if !strings.HasPrefix(r.annotations["runbook_url"], docsBase+"docs/operations.md#") &&
			!strings.HasPrefix(r.annotations["runbook_url"], docsBase+"docs/federation.md#") {
			t.Errorf("%s: runbook_url %q does not point at a section of docs/operations.md or docs/federation.md", r.alert, r.annotations["runbook_url"])
		}
		if _, err := parsePromQL(r.expr); err != nil {
			t.Errorf("%s: %v", r.alert, err)
		}
	}
	// The signals the operators asked for (issue: dashboards and alerts).
	for _, a := range []string{
		"SwitchboardNodeDown", "SwitchboardPeerUnhealthy", "SwitchboardForwardQueueHigh",
		"SwitchboardForwardQueueGrowing", "SwitchboardForwardFailed", "SwitchboardDLQGrowing",
		"SwitchboardOutboxStuck", "SwitchboardActorRestarts",
	} {
		if !seen[a] {
			t.Errorf("alert %s missing", a)
		}
	}
	for _, r := range rules {
		if r.alert == "SwitchboardPeerUnhealthy" && (r.forDur != "5m" || !strings.Contains(r.expr, `switchboard_peer_state{state="unhealthy"} == 1`)) {
			t.Errorf("SwitchboardPeerUnhealthy: %q for %q, want a peer unhealthy for 5m", r.expr, r.forDur)
		}
	}

	// promtool is the reference: the rules load, their unit tests pass and
	// the example configuration loads them.
	promtool := lookPromtool(t, "check rules, test rules and check config")
	if promtool == "" {
		return
	}
	dir := filepath.Join(root, "deploy", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// lookPromtool finds promtool (Debian's prometheus package, which
// make test installs through scripts/debian-package.sh). Without it the check is
// skipped with a line in the log, and fails in CI (CI set).
func lookPromtool(t *testing.T, what string) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("promtool %s: promtool is not on PATH (Debian package prometheus; make test installs it)", what)
	}
	t.Logf("promtool not on PATH (Debian package prometheus; make test installs it): skipping promtool %s", what)
	return ""
}

// TestMetricsExistOnARunningNode starts two federated nodes, drives
// messages through them and checks that every metric, label and label value
// that the dashboard and the alerts use is in node a's scrape.
func TestMetricsExistOnARunningNode(t *testing.T) {
	_, dashExprs := loadDashboard(t)
	exprs := map[string]string{}
	for where, e := range dashExprs {
		exprs["dashboard "+where] = e
	}
	for _, r := range loadRules(t) {
		exprs["alert "+r.alert] = r.expr
	}
	uses := map[string]promqlUse{}
	for where, e := range exprs {
		use, err := parseVariableQuery(e)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		uses[where] = use
	}

	fn := &fedNet{addrs: map[string]string{}}
	a := startFedNode(t, fn, "a", "b")
	b := startFedNode(t, fn, "b", "a")
	driveTraffic(t, a, b)
	// The delivery bus's metrics exist only on a node with --nats-url.
	c := startBusNode(t)
	driveBus(t, c)
	onBus := func(use promqlUse) bool {
		for _, s := range use.selectors {
			if strings.HasPrefix(s.metric, "switchboard_bus_") {
				return true
			}
		}
		return false
	}

	// Counters and the store gauges (cached for a second) settle quickly;
	// give them a little time before reporting what is missing.
	var problems []string
	var sc, busScrape scrape
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		sc, err = a.scrape()
		if err != nil {
			t.Fatal(err)
		}
		if busScrape, err = c.scrape(); err != nil {
			t.Fatal(err)
		}
		problems = problems[:0]
		for where, use := range uses {
			from := sc
			if onBus(use) {
				from = busScrape
			}
			for _, m := range from.missing(use) {
				problems = append(problems, where+": "+m)
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Errorf("not on a running node: %s", p)
	}

	// promtool's linter on the live scrapes (the federated node's, and the
	// bus node's with the bus metrics) reports nothing.
	if promtool := lookPromtool(t, "check metrics"); promtool != "" {
		for name, n := range map[string]*testNode{"a": a, "bus": c} {
			text, err := n.scrapeText()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = strings.NewReader(text)
			if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("promtool check metrics on node %s's scrape: %v\n%s", name, err, out)
			}
		}
	}

	// Say which of the node's own metrics no panel or alert shows, so that
	// a new metric is a conscious choice.
	shown := map[string]bool{}
	for _, use := range uses {
		for _, s := range use.selectors {
			shown[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s.metric, "_bucket"), "_sum"), "_count")] = true
		}
	}
	var unshown []string
	for name := range sc {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(name, "switchboard_") && !shown[base] && !slices.Contains(unshown, base) {
			unshown = append(unshown, base)
		}
	}
	if len(unshown) > 0 {
		sort.Strings(unshown)
		t.Logf("node metrics neither on the dashboard nor in an alert: %s", strings.Join(unshown, ", "))
	}
}

// runFlagEnv lists the environment variables of `switchboard run`'s flags,
// from its usage text.
func runFlagEnv(t *testing.T) map[string]bool {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool not found: %v", err)
	}
	cmd := exec.Command(goTool, "run", "./cmd/node", "run", "-h")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("go run ./cmd/node run -h: %v\n%s", err, out)
	}
	env := map[string]bool{}
	for _, m := range regexp.MustCompile(`\[(SWITCHBOARD_[A-Z0-9_]+)\]`).FindAllStringSubmatch(string(out), -1) {
		env[m[1]] = true
	}
	if len(env) < 10 || !env["SWITCHBOARD_NAME"] {
		t.Fatalf("could not read the flags from `switchboard run -h`:\n%s", out)
	}
	return env
}

// contractRingEnv are the ring flags of the contract (issue: multi-instance
// sites). Until they are flags of `switchboard run`, the deployment files
// may name them only in comments.
var contractRingEnv = map[string]bool{
	"SWITCHBOARD_INSTANCE_ID": true, "SWITCHBOARD_RING_ROLE": true, "SWITCHBOARD_RING_MASTER": true,
	"SWITCHBOARD_CLUSTER": true, "SWITCHBOARD_REGION": true, "SWITCHBOARD_ZONE": true,
	"SWITCHBOARD_RING_SERVICES": true, "SWITCHBOARD_RING_PUBLISH_INTERVAL": true,
	"SWITCHBOARD_RING_RECONNECT_MAX_ATTEMPTS": true, "SWITCHBOARD_RING_RECONNECT_BACKOFF_MIN": true,
	"SWITCHBOARD_RING_RECONNECT_BACKOFF_MAX": true, "SWITCHBOARD_RING_RECONNECT_JITTER": true,
}

var envRef = regexp.MustCompile(`SWITCHBOARD_[A-Z0-9_]*[A-Z0-9]`)

// checkEnvNames checks every SWITCHBOARD_* name in the files: outside
// comments it must be a flag of `switchboard run`; in a comment it may also
// be a ring flag of the contract that does not exist yet.
func checkEnvNames(t *testing.T, flags map[string]bool, files ...string) {
	t.Helper()
	for _, f := range files {
		for i, line := range strings.Split(readFile(t, f), "\n") {
			comment := strings.HasPrefix(strings.TrimSpace(line), "#")
			for _, name := range envRef.FindAllString(line, -1) {
				switch {
				case flags[name]:
				case comment && contractRingEnv[name]:
				case comment:
					t.Errorf("%s:%d: %s (in a comment) is neither a flag of `switchboard run` nor a ring flag of the contract", f, i+1, name)
				default:
					t.Errorf("%s:%d: %s is not a flag of `switchboard run`", f, i+1, name)
				}
				if comment && contractRingEnv[name] && flags[name] && strings.Contains(line, "RING") {
					t.Logf("%s:%d: %s is a flag now: the ring has landed, uncomment it", f, i+1, name)
				}
			}
		}
	}
}

// unitFile is a systemd unit: section -> key -> values (keys may repeat).
type unitFile map[string]map[string][]string

func parseUnit(text string) (unitFile, error) {
	u := unitFile{}
	section := ""
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if u[section] != nil {
				return nil, fmt.Errorf("line %d: section %s twice", i+1, section)
			}
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.HasSuffix(line, `\`) {
				return nil, fmt.Errorf("line %d: %q is not key=value in a section", i+1, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u, nil
}

func (u unitFile) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

func TestSystemdUnit(t *testing.T) {
	const unitPath = "deploy/systemd/switchboard.service"
	text := readFile(t, unitPath)
	u, err := parseUnit(text)
	if err != nil {
		t.Fatalf("%s: %v", unitPath, err)
	}
	want := map[string]string{
		"Restart": "on-failure",
		// Configuration errors exit 2: restarting cannot help.
		"RestartPreventExitStatus": "2",
		// A SIGHUP (systemctl reload) before the node's handler is
		// installed ends it, which on-failure alone takes for a clean end.
		"RestartForceExitStatus": "SIGHUP",
		"User":                   "switchboard",
		"StateDirectory":         "switchboard",
		"NoNewPrivileges":        "yes",
		"ProtectSystem":          "strict",
		"ProtectHome":            "yes",
		"PrivateTmp":             "yes",
		"EnvironmentFile":        "/etc/switchboard/switchboard.env",
		"WorkingDirectory":       "/var/lib/switchboard",
	}
	for k, v := range want {
		if got := u.get("Service", k); got != v {
			t.Errorf("[Service] %s=%q, want %q", k, got, v)
		}
	}
	if n, err := strconv.Atoi(u.get("Service", "LimitNOFILE")); err != nil || n < 65536 {
		t.Errorf("LimitNOFILE=%q, want at least 65536", u.get("Service", "LimitNOFILE"))
	}
	if start := u.get("Service", "ExecStart"); !strings.HasSuffix(start, "/switchboard run") {
		t.Errorf("ExecStart=%q, want the binary's run command (settings come from the environment)", start)
	}
	if !slices.Contains(u["Service"]["Environment"], "SWITCHBOARD_DATA_DIR=/var/lib/switchboard") {
		t.Errorf("Environment lacks SWITCHBOARD_DATA_DIR=/var/lib/switchboard (the StateDirectory)")
	}
	// The node needs up to --shutdown-timeout (30s) to drain.
	stop, err := time.ParseDuration(u.get("Service", "TimeoutStopSec"))
	if err != nil || stop <= 30*time.Second {
		t.Errorf("TimeoutStopSec=%q, want more than the 30s shutdown timeout", u.get("Service", "TimeoutStopSec"))
	}
	if u.get("Install", "WantedBy") == "" {
		t.Error("[Install] WantedBy missing")
	}
	if sysusers := readFile(t, "deploy/systemd/switchboard.sysusers"); !strings.Contains(sysusers, "u switchboard ") {
		t.Error("switchboard.sysusers does not create the switchboard user")
	}
	checkEnvNames(t, runFlagEnv(t), unitPath, "deploy/systemd/switchboard.env")

	// systemd's own reading of the unit, where systemd is installed. The
	// binary is not, so ExecStart names one that exists.
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not on PATH: skipping systemd-analyze verify")
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "switchboard.service")
	verifiable := strings.Replace(text, "ExecStart=/usr/local/bin/switchboard", "ExecStart="+self, 1)
	if err := os.WriteFile(copyPath, []byte(verifiable), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", copyPath).CombinedOutput()
	if err != nil || strings.Contains(string(out), copyPath) {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// k8sObject is one manifest, as parsed.
type k8sObject struct {
	file string
	obj  map[string]any
}

func (o k8sObject) kind() string { return str(o.obj, "kind") }
func (o k8sObject) name() string { return str(o.obj, "metadata", "name") }

// get walks maps by key and lists by decimal index.
func get(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...string) []any {
	l, _ := get(v, path...).([]any)
	return l
}

func TestKubernetesManifests(t *testing.T) {
	dir := filepath.Join(root, "deploy", "kubernetes")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files, resources []string
	var kustomization string
	var objs []k8sObject
	byKindName := map[string]map[string]any{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		path := "deploy/kubernetes/" + e.Name()
		files = append(files, path)
		docs, err := parseYAML(readFile(t, path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, d := range docs {
			m, ok := d.(map[string]any)
			if !ok {
				t.Fatalf("%s: a document is not a mapping", path)
			}
			o := k8sObject{file: path, obj: m}
			if str(m, "apiVersion") == "" || o.kind() == "" {
				t.Fatalf("%s: a document without apiVersion or kind", path)
			}
			if o.kind() == "Kustomization" {
				kustomization = e.Name()
				for _, r := range list(m, "resources") {
					resources = append(resources, r.(string))
				}
				continue
			}
			if o.name() == "" {
				t.Fatalf("%s: a %s without metadata.name", path, o.kind())
			}
			key := o.kind() + "/" + o.name()
			if byKindName[key] != nil {
				t.Fatalf("%s: %s defined twice", path, key)
			}
			byKindName[key] = m
			objs = append(objs, o)
		}
	}
	// Every manifest but the kustomization is one of its resources.
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != kustomization {
			want = append(want, b)
		}
	}
	sort.Strings(resources)
	if kustomization == "" || !slices.Equal(resources, want) {
		t.Errorf("kustomization resources %v, want every manifest %v", resources, want)
	}
	checkEnvNames(t, runFlagEnv(t), files...)

	var sts map[string]any
	for _, o := range objs {
		if o.kind() == "StatefulSet" {
			sts = o.obj
		}
	}
	if sts == nil {
		t.Fatal("no StatefulSet")
	}
	podLabels, _ := get(sts, "spec", "template", "metadata", "labels").(map[string]any)
	matches := func(sel map[string]any) bool {
		if len(sel) == 0 {
			return false
		}
		for k, v := range sel {
			if podLabels[k] != v {
				return false
			}
		}
		return true
	}
	if sel, _ := get(sts, "spec", "selector", "matchLabels").(map[string]any); !matches(sel) {
		t.Errorf("StatefulSet selector %v does not select its pods %v", sel, podLabels)
	}

	// The headless Service is the StatefulSet's serviceName; every Service
	// selects the pods and targets a port the container has.
	spec := get(sts, "spec", "template", "spec")
	containers := list(spec, "containers")
	if len(containers) != 1 {
		t.Fatalf("want one container, got %d", len(containers))
	}
	c := containers[0]
	ports := map[string]string{}
	for _, p := range list(c, "ports") {
		ports[str(p, "name")] = str(p, "containerPort")
	}
	if ports["https"] != "8443" || ports["metrics"] != "9568" {
		t.Errorf("container ports %v, want https 8443 and metrics 9568", ports)
	}
	headless := byKindName["Service/"+str(sts, "spec", "serviceName")]
	if headless == nil || str(headless, "spec", "clusterIP") != "None" {
		t.Errorf("serviceName %q is not a headless Service", str(sts, "spec", "serviceName"))
	}
	metricsService := false
	for _, o := range objs {
		if o.kind() != "Service" {
			continue
		}
		if sel, _ := get(o.obj, "spec", "selector").(map[string]any); !matches(sel) {
			t.Errorf("Service %s does not select the pods", o.name())
		}
		for _, p := range list(o.obj, "spec", "ports") {
			if _, ok := ports[str(p, "targetPort")]; !ok {
				t.Errorf("Service %s: targetPort %q is not a container port", o.name(), str(p, "targetPort"))
			}
			metricsService = metricsService || str(p, "targetPort") == "metrics"
		}
	}
	if !metricsService {
		t.Error("no Service for the metrics port")
	}

	// POD_NAME from the downward API (the ring ordinal), the instance id
	// from it.
	env := map[string]any{}
	for _, e := range list(c, "env") {
		env[str(e, "name")] = e
	}
	if str(env["POD_NAME"], "valueFrom", "fieldRef", "fieldPath") != "metadata.name" {
		t.Errorf("POD_NAME is not the pod's metadata.name from the downward API: %v", env["POD_NAME"])
	}
	if str(env["SWITCHBOARD_INSTANCE_ID"], "value") != "$(POD_NAME)" {
		t.Errorf("SWITCHBOARD_INSTANCE_ID should be $(POD_NAME): %v", env["SWITCHBOARD_INSTANCE_ID"])
	}

	// Settings: envFrom names a ConfigMap and a Secret that exist.
	settings := map[string]string{}
	for _, ef := range list(c, "envFrom") {
		switch {
		case str(ef, "configMapRef", "name") != "":
			cm := byKindName["ConfigMap/"+str(ef, "configMapRef", "name")]
			if cm == nil {
				t.Errorf("envFrom names ConfigMap %q, which is not defined", str(ef, "configMapRef", "name"))
			}
			for k, v := range get(cm, "data").(map[string]any) {
				settings[k] = v.(string)
			}
		case str(ef, "secretRef", "name") != "":
			if byKindName["Secret/"+str(ef, "secretRef", "name")] == nil {
				t.Errorf("envFrom names Secret %q, which is not defined", str(ef, "secretRef", "name"))
			}
		}
	}
	for k := range settings {
		if !strings.HasPrefix(k, "SWITCHBOARD_") {
			t.Errorf("ConfigMap key %s is not a SWITCHBOARD_* setting", k)
		}
	}
	if !strings.HasSuffix(settings["SWITCHBOARD_LISTEN"], ":"+ports["https"]) || !strings.HasSuffix(settings["SWITCHBOARD_METRICS_LISTEN"], ":"+ports["metrics"]) {
		t.Errorf("listen %q / metrics-listen %q do not match the container ports %v", settings["SWITCHBOARD_LISTEN"], settings["SWITCHBOARD_METRICS_LISTEN"], ports)
	}

	// Probes: readiness on /readyz, liveness on /healthz, over HTTPS.
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		hg := get(c, probe, "httpGet")
		if str(hg, "path") != path || str(hg, "scheme") != "HTTPS" || str(hg, "port") != "https" {
			t.Errorf("%s: %v, want GET %s over HTTPS on port https", probe, hg, path)
		}
	}
	grace, _ := strconv.Atoi(str(spec, "terminationGracePeriodSeconds"))
	shutdown, err := time.ParseDuration(settings["SWITCHBOARD_SHUTDOWN_TIMEOUT"])
	if err != nil {
		shutdown = 30 * time.Second
	}
	if time.Duration(grace)*time.Second <= shutdown {
		t.Errorf("terminationGracePeriodSeconds %d is not above the shutdown timeout %v", grace, shutdown)
	}

	// Volumes: the data dir is a claim of the template; the certificate
	// files are in a mounted Secret that has those keys.
	mounts := map[string]string{}
	for _, m := range list(c, "volumeMounts") {
		mounts[str(m, "mountPath")] = str(m, "name")
	}
	claims := map[string]bool{}
	for _, vct := range list(sts, "spec", "volumeClaimTemplates") {
		claims[str(vct, "metadata", "name")] = true
	}
	if dd := settings["SWITCHBOARD_DATA_DIR"]; !claims[mounts[dd]] {
		t.Errorf("SWITCHBOARD_DATA_DIR %q is not mounted from a volumeClaimTemplate (mounts %v, claims %v)", dd, mounts, claims)
	}
	volumes := map[string]any{}
	for _, v := range list(spec, "volumes") {
		volumes[str(v, "name")] = v
	}
	for _, k := range []string{"SWITCHBOARD_TLS_CERT", "SWITCHBOARD_TLS_KEY", "SWITCHBOARD_TLS_CA"} {
		file := settings[k]
		vol := volumes[mounts[filepath.Dir(file)]]
		secret := byKindName["Secret/"+str(vol, "secret", "secretName")]
		if secret == nil || get(secret, "stringData", filepath.Base(file)) == nil {
			t.Errorf("%s=%q is not a key of a Secret mounted at %s", k, file, filepath.Dir(file))
		}
	}

	// kubectl's own rendering, where kubectl is installed.
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not on PATH: skipping kubectl kustomize")
		return
	}
	if out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput(); err != nil {
		t.Errorf("kubectl kustomize: %v\n%s", err, out)
	}
}

// TestDocLinks checks every link from deploy/ into the docs: the file
// exists and has the section.
func TestDocLinks(t *testing.T) {
	link := regexp.MustCompile(regexp.QuoteMeta(docsBase) + `([A-Za-z0-9_./-]+)(#([A-Za-z0-9_-]+))?`)
	n := 0
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			n++
			doc, err := os.ReadFile(filepath.Join(root, m[1]))
			if err != nil {
				t.Errorf("%s links to %s, which does not exist", path, m[1])
				continue
			}
			if m[3] != "" && !slices.Contains(anchors(string(doc)), m[3]) {
				t.Errorf("%s links to %s#%s: no such section", path, m[1], m[3])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no doc links found")
	}
}

// anchors returns the GitHub anchors of a Markdown file's headings.
func anchors(md string) []string {
	var out []string
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if k := seen[a]; k > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, k)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}
