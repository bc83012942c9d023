package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// benchLine is the format docs/performance.md describes.
var benchLine = regexp.MustCompile(`^bench: (\S+) (\S+) (\S+) baseline=(\S+) ratio=(\S+)$`)

// units are the unit of each bench: line.
var units = map[string]string{
	"ingest": "msg/s", "delivery": "msg/s", "river-sqlite": "jobs/s", "federated": "msg/s", "drain": "msg/s",
	"latency": "ms", "memory": "MB/100k", "restart": "ms", "postgres-site": "msg/s", "postgres-site-vs-single": "msg/s",
	"search": "ms", "search-sqlite": "ms", "search-prefix-sqlite": "ms", "search-time-sqlite": "ms", "search-ingest-sqlite": "rows/s",
	"search-postgres": "ms", "search-prefix-postgres": "ms", "search-time-postgres": "ms", "search-ingest-postgres": "rows/s",
	"ingest-retention": "msg/s", "storage": "B/msg", "ingest-traced": "msg/s", "smpp-ingest": "msg/s",
	"postgres-site-nats": "msg/s",
}

// The figures each output-shape test runs: together every figure, so that
// no figure's line can rot silently (TestEveryFigureChecked).
var (
	shortRunFigures   = []string{"ingest", "delivery", "federated", "drain", "memory", "postgres-site"}
	riverSQLiteFigure = []string{"river-sqlite"} // brings delivery, its baseline
	latencyFigure     = []string{"latency"}
	restartFigure     = []string{"restart"}
	searchFigure      = []string{"search"}
	storageFigures    = []string{"ingest-retention", "storage"} // ingest-retention brings ingest
	tracedFigure      = []string{"ingest-traced"}               // brings ingest
	smppFigure        = []string{"smpp-ingest"}                 // brings ingest
)

// checkShape runs the benchmark with args and checks that it prints
// exactly one parseable bench: line for each figure of want (and no other),
// nothing outside # lines, and no failed request.
func checkShape(t *testing.T, args []string, want []string) {
	t.Helper()
	var out, errOut bytes.Buffer
	start := time.Now()
	if err := run(args, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	t.Logf("took %v:\n%s", time.Since(start).Round(time.Millisecond), &out)
	seen := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimRight(out.Bytes(), "\n"), []byte("\n")) {
		if bytes.HasPrefix(line, []byte("#")) {
			continue
		}
		m := benchLine.FindSubmatch(line)
		if m == nil {
			t.Errorf("line is neither a comment nor a bench: line: %q", line)
			continue
		}
		name := string(m[1])
		seen[name]++
		if unit := units[name]; string(m[3]) != unit {
			t.Errorf("%s: unit %q, want %q", name, m[3], unit)
		}
		for _, f := range []struct{ what, s string }{{"value", string(m[2])}, {"baseline", string(m[4])}, {"ratio", string(m[5])}} {
			v, err := strconv.ParseFloat(f.s, 64)
			// RSS may even shrink over a short fill: the memory figure
			// and its ratio need only be numbers.
			if err != nil || !(v > 0 || name == "memory" && f.what != "baseline") {
				t.Errorf("%s: %s %q is not a positive number", name, f.what, f.s)
			}
		}
	}
	for _, fig := range want {
		if seen[fig] != 1 {
			t.Errorf("figure %s printed %d times, want once", fig, seen[fig])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("figures printed: %v, want %v", seen, want)
	}
	if bytes.Contains(out.Bytes(), []byte("FAILED")) {
		t.Errorf("requests failed during the run:\n%s", &out)
	}
}

// TestShortRun runs the throughput, federation and Postgres figures with
// --short. It uses 8 clients: under -race on 2 shared cores, 64 TLS
// clients spend the short window in handshakes. A 2s window keeps a stall
// of the shared machine from leaving a figure without a single completion.
// 500 queued messages (the drain's bound is 1 min + 4 ms a message) leave
// room for a machine loaded by the other packages' -race tests: one such
// run drained at 6 msg/s. postgres-site needs the Postgres server of
// persistence/pgtest ($SWITCHBOARD_TEST_POSTGRES): without one the test
// fails, as the store's tests do.
func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real nodes for a few seconds")
	}
	checkShape(t, []string{"--short", "--window", "2s", "--clients", "8", "--consumers", "2", "--queued", "500", "--memory-queued", "500",
		"--only", strings.Join(shortRunFigures, ",")}, append(slices.Clone(shortRunFigures), "postgres-site-vs-single", "postgres-site-nats"))
}

// TestRiverSQLiteLine: River on SQLite and the delivery figure, its
// baseline. Under -race River on SQLite completes ~50 jobs/s in bursts of
// a fetch (100) each ~2 s; on a machine loaded by the other packages' -race
// tests a burst took more than 3 s (a run counted none), so the window is
// 10 s.
func TestRiverSQLiteLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node and River for a few seconds")
	}
	checkShape(t, []string{"--short", "--window", "10s", "--clients", "8", "--consumers", "2", "--only", strings.Join(riverSQLiteFigure, ",")},
		[]string{"delivery", "river-sqlite"})
}

// TestLatencyLine: the federated pair and the durable echo at 100 msg/s
// for a 2 s window (200 submissions each).
func TestLatencyLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a federated pair for a few seconds")
	}
	checkShape(t, []string{"--short", "--window", "2s", "--only", strings.Join(latencyFigure, ",")}, latencyFigure)
}

// TestRestartLine: the real binary (built by the figure) killed and
// restarted on stores of 2,000 and 200 queued messages.
func TestRestartLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	checkShape(t, []string{"--only", strings.Join(restartFigure, ","), "--restart-queued", "2000", "--restart-small", "200"}, restartFigure)
}

// TestSearchLines: the search figures on a few thousand messages in each
// store (the figure's point is 10 million: make bench).
func TestSearchLines(t *testing.T) {
	if testing.Short() {
		t.Skip("fills two stores")
	}
	var lines []string
	for _, store := range []string{"sqlite", "postgres"} {
		lines = append(lines, "search-"+store, "search-prefix-"+store, "search-time-"+store, "search-ingest-"+store)
	}
	checkShape(t, []string{"--only", strings.Join(searchFigure, ","), "--search-rows", "3000", "--window", "300ms"}, lines)
}

// TestStorageLines: ingest while the cleaner purges at its rate (with
// ingest, its baseline), and the bytes on disk of 2,000 delivered
// messages.
func TestStorageLines(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node for a few seconds")
	}
	checkShape(t, []string{"--short", "--window", "2s", "--clients", "8", "--storage-messages", "2000", "--only", strings.Join(storageFigures, ",")},
		[]string{"ingest", "ingest-retention", "storage"})
}

// TestTracedLine: ingest on a node exporting over OTLP, with ingest, its
// baseline.
func TestTracedLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two nodes for a few seconds")
	}
	checkShape(t, []string{"--short", "--window", "2s", "--clients", "8", "--only", strings.Join(tracedFigure, ",")},
		[]string{"ingest", "ingest-traced"})
}

// TestSMPPLine: ingest over SMPP, with ingest over HTTPS, its baseline.
func TestSMPPLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two nodes for a few seconds")
	}
	checkShape(t, []string{"--short", "--window", "2s", "--clients", "8", "--only", strings.Join(smppFigure, ",")},
		[]string{"ingest", "smpp-ingest"})
}

// TestEveryFigureChecked: the shape tests above run every figure.
func TestEveryFigureChecked(t *testing.T) {
	var checked []string
	for _, l := range [][]string{shortRunFigures, riverSQLiteFigure, latencyFigure, restartFigure, storageFigures, searchFigure, tracedFigure, smppFigure} {
		checked = append(checked, l...)
	}
	for _, f := range figures {
		if !slices.Contains(checked, f) {
			t.Errorf("figure %s: no test checks its line", f)
		}
		if units[f] == "" {
			t.Errorf("figure %s: no unit in the test's table", f)
		}
	}
}

// TestBodies: each submission is exactly the asked size, valid, and routed
// to the bench frontend's prefix.
func TestBodies(t *testing.T) {
	for _, size := range []int{160, 321, 1000} {
		for i, b := range newBodies(3, size) {
			if len(b) != size {
				t.Errorf("size %d: body %d is %d bytes", size, i, len(b))
			}
			var s messages.Submission
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("body %q: %v", b, err)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("body %q: %v", b, err)
			}
			if s.DestinationMSISDN[:len(routePrefix)] != routePrefix {
				t.Errorf("destination %q is not under the route %q", s.DestinationMSISDN, routePrefix)
			}
		}
	}
}

func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{"--short", "--window", "3s", "--only", "delivery"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.window != 3*time.Second || o.warmup != 500*time.Millisecond || o.repeat != 1 || o.only != "delivery" || o.clients != 64 {
		t.Errorf("options %+v", o)
	}
	o, err = parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.window != 10*time.Second || o.warmup != 2*time.Second || o.repeat != 3 || o.clients != 64 {
		t.Errorf("defaults %+v", o)
	}
	if o.queued != 100000 || o.memQueued != 1000000 || o.restartQueued != 1000000 || !slices.Equal(o.selected, figures) {
		t.Errorf("defaults: queued %d, memory-queued %d, figures %v", o.queued, o.memQueued, o.selected)
	}
	o, err = parseFlags([]string{"--short", "--only", "memory,drain"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	// drain implies federated (its baseline); the order is figures' order.
	if want := []string{"federated", "drain", "memory"}; !slices.Equal(o.selected, want) || o.queued != 10000 || o.memQueued != 100000 {
		t.Errorf("--short --only memory,drain: figures %v, queued %d, memory-queued %d; want %v, 10000, 100000", o.selected, o.queued, o.memQueued, want)
	}
	o, err = parseFlags([]string{"--only", "river-sqlite,latency"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	// river-sqlite implies delivery (its baseline).
	if want := []string{"delivery", "river-sqlite", "latency"}; !slices.Equal(o.selected, want) {
		t.Errorf("--only river-sqlite,latency: figures %v, want %v", o.selected, want)
	}
	o, err = parseFlags([]string{"--short"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.restartQueued != 100000 || o.restartSmall != 1000 || o.latencyRate != 100 {
		t.Errorf("--short: restart-queued %d, restart-small %d, latency-rate %v; want 100000, 1000, 100", o.restartQueued, o.restartSmall, o.latencyRate)
	}
	o, err = parseFlags([]string{"--only", "ingest", "--profile-figure", "drain"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ingest", "federated", "drain"}; !slices.Equal(o.selected, want) {
		t.Errorf("--only ingest --profile-figure drain: figures %v, want %v", o.selected, want)
	}
	o, err = parseFlags([]string{"--only", "ingest", "--profile-figure", "postgres-site-nats"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ingest", "postgres-site"}; !slices.Equal(o.selected, want) {
		t.Errorf("--only ingest --profile-figure postgres-site-nats: figures %v, want %v", o.selected, want)
	}
	o, err = parseFlags([]string{"--only", "postgres-site", "--postgres", "postgres://x@h/db"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"postgres-site"}; !slices.Equal(o.selected, want) || o.postgres != "postgres://x@h/db" {
		t.Errorf("--only postgres-site --postgres: figures %v, postgres %q", o.selected, o.postgres)
	}
	for _, bad := range [][]string{{"--profile-figure", "memory"}, {"--profile-figure", "restart"}, {"--profile-figure", "nope"}, {"--restart-queued", "10"}, {"--latency-rate", "0"}, {"--only", "nope"}, {"--only", "ingest,nope"}, {"--queued", "10"}, {"--memory-queued", "10"}, {"--repeat", "0"}, {"--clients", "0"}, {"extra"}} {
		if _, err := parseFlags(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestNoPostgres: a server that cannot be reached is a clear error, not a
// silent skip of the figure.
func TestNoPostgres(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"--short", "--only", "postgres-site", "--postgres", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}, &out, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "needs a Postgres server") {
		t.Fatalf("run without a server: %v\n%s", err, &out)
	}
	if bytes.Contains(out.Bytes(), []byte("\nbench: ")) {
		t.Errorf("a figure was printed without a server:\n%s", &out)
	}
}

// TestRateText: a bench line keeps a small rate (a loaded test run's River
// on SQLite did 1 job in 3 s, which "%.0f" printed as 0).
func TestRateText(t *testing.T) {
	for v, want := range map[float64]string{0.333: "0.333", 12.34: "12.3", 99.4: "99.4", 100: "100", 7425.4: "7425", 0: "0"} {
		if got := rateText(v); got != want {
			t.Errorf("rateText(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestSlowestNamesTheTailsLegs: the latency note's legs are the medians
// over all messages and over the slowest 1%, each leg apart.
func TestSlowestNamesTheTailsLegs(t *testing.T) {
	ms := time.Millisecond
	var all []legs
	for i := range 198 {
		d := time.Duration(i%3) * 10 * time.Microsecond
		all = append(all, legs{submit: ms + d, polled: 2*ms + d, acked: ms, total: 3*ms + d})
	}
	// The two slowest: one slow at A's submit, one slow between the 202
	// and B's poll; both acked in 5 ms.
	all = append(all, legs{submit: 9 * ms, polled: 10 * ms, acked: 5 * ms, total: 15 * ms},
		legs{submit: ms, polled: 12 * ms, acked: 5 * ms, total: 17 * ms})
	got := slowest(all)
	want := "legs (medians) of all submit 1.01ms + on to B's poll 1ms + ack 1ms, of the slowest 2 submit 9ms + on to B's poll 11ms + ack 5ms"
	if got != want {
		t.Errorf("slowest:\n got %s\nwant %s", got, want)
	}
	if got := slowest(nil); got != "no legs" {
		t.Errorf("slowest(nil) = %q", got)
	}
}
