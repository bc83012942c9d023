package deploy

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// siteWideGauges are the gauges every instance of a site reports with the
// whole site's value (docs/metrics.md, "Site-wide gauges"): the store's
// counts, and the bus's, which every instance reads alike. The dashboard
// and the alerts take their max over a site's instances, never their sum.
var siteWideGauges = map[string]bool{
	"switchboard_messages":                  true,
	"switchboard_outbox_depth":              true,
	"switchboard_outbox_oldest_age_seconds": true,
	"switchboard_dlq_depth":                 true,
	"switchboard_forward_queue_depth":       true,
	"switchboard_store_bytes":               true,
	"switchboard_bus_relay_lag_seconds":     true,
	"switchboard_bus_consumer_pending":      true,
	"switchboard_bus_consumer_ack_pending":  true,
}

// readAtScrape are the site-wide gauges whose value depends on when an
// instance read it (an age, a size on disk): two instances' agree only
// when they read at the same moment.
var readAtScrape = map[string]bool{
	"switchboard_outbox_oldest_age_seconds": true,
	"switchboard_store_bytes":               true,
}

// TestDashboardShowsASiteOnce: a site of two instances on one Postgres
// database holds a message in each of pending, failed, forward_queued and
// forward_failed. Each instance reports the site's counts; every panel of
// the dashboard over the site-wide gauges shows the same with both
// instances scraped as with one of them, instead of adding the instances
// up (the Dead-letter queue stat read 2 for 1 message).
func TestDashboardShowsASiteOnce(t *testing.T) {
	promtool := lookPromtool(t, "test rules of the dashboard's queries")
	dsn := pgtest.DSN(t)
	s0 := startSiteNode(t, dsn, "s-0")
	s1 := startSiteNode(t, dsn, "s-1")
	seedEveryCount(t, s0)

	// Both instances report the site's counts: the premise.
	var reported []sample
	polltest.Eventually(t, 20*time.Second, func() error {
		var err error
		reported, err = siteWideSamples(s0)
		if err != nil {
			return err
		}
		other, err := siteWideSamples(s1)
		if err != nil {
			return err
		}
		counts, otherCounts := map[string]string{}, map[string]string{}
		for _, s := range reported {
			if !readAtScrape[s.name] {
				counts[seriesOf(s, nil)] = s.value
			}
		}
		for _, s := range other {
			if !readAtScrape[s.name] {
				otherCounts[seriesOf(s, nil)] = s.value
			}
		}
		for _, series := range []string{`switchboard_dlq_depth`, `switchboard_messages{state="forward_failed"}`} {
			if !slices.ContainsFunc(reported, func(s sample) bool { return matches(s, series) && s.value == "1" }) {
				return fmt.Errorf("s-0 does not report %s 1 yet: %v", series, counts)
			}
		}
		if !maps.Equal(counts, otherCounts) {
			return fmt.Errorf("the instances report different counts: s-0 %v, s-1 %v", counts, otherCounts)
		}
		return nil
	})

	// The site-wide gauges, and they alone, name the site.
	text, err := s0.scrapeText()
	if err != nil {
		t.Fatal(err)
	}
	all, err := parseSamples(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if node, ok := s.labels["node"]; ok != siteWideGauges[s.name] || ok && node != "s" {
			t.Errorf("%s: node %q; the site-wide gauges (and no other) carry node=\"s\"", seriesOf(s, nil), node)
		}
	}

	// Each panel over the site-wide gauges is evaluated by promtool on the
	// two instances' series (job "two") and on the first's alone (job
	// "one"). Both instances' series are s-0's values: s-1 reported the
	// same counts (above), and its age and size differ only by when it
	// read them.
	var input strings.Builder
	for _, s := range reported {
		for _, in := range []struct{ job, instance string }{{"one", "s-0"}, {"two", "s-0"}, {"two", "s-1"}} {
			fmt.Fprintf(&input, "      - series: %s\n        values: %s\n",
				yamlQuote(seriesOf(s, map[string]string{"job": in.job, "instance": in.instance})), yamlQuote(s.value))
		}
	}
	present := map[string]bool{}
	for _, s := range reported {
		present[s.name] = true
	}
	_, exprs := loadDashboard(t)
	checked := 0
	for _, where := range slices.Sorted(maps.Keys(exprs)) {
		expr := exprs[where]
		use, err := parseVariableQuery(expr)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if !strings.HasPrefix(where, "panel ") || !slices.ContainsFunc(use.selectors, func(s selector) bool { return siteWideGauges[s.metric] }) {
			continue
		}
		if !strings.Contains(expr, "$job") {
			t.Errorf("%s: %s does not select by $job", where, expr)
			continue
		}
		allPresent := true
		for _, s := range use.selectors {
			if !siteWideGauges[s.metric] {
				t.Errorf("%s: %s mixes site-wide gauges with %s", where, expr, s.metric)
			}
			allPresent = allPresent && present[s.metric]
		}
		if !allPresent {
			continue // the bus's gauges: a site without --nats-url has none
		}
		one, two := forJob(t, expr, "one"), forJob(t, expr, "two")
		file := fmt.Sprintf(`rule_files: []
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
%s    promql_expr_test:
      # The panel shows something for one instance...
      - expr: %s
        eval_time: 0m
        exp_samples: []
      # ...and the same for two.
      - expr: %s
        eval_time: 0m
        exp_samples: []
`, input.String(), yamlQuote("absent("+one+")"), yamlQuote("("+two+") != ignoring (job) ("+one+")"))
		path := filepath.Join(t.TempDir(), "site.yml")
		if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		checked++
		if promtool == "" {
			continue
		}
		if out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput(); err != nil {
			t.Errorf("%s: %s shows one site of two instances otherwise than the same site of one instance: %v\n%s", where, expr, err, out)
		}
	}
	if checked < 5 {
		t.Errorf("only %d panels over the site-wide gauges: the dashboard changed, or the check reads nothing", checked)
	}
}

// seedEveryCount stores, through the site's store, a message in each of
// pending (delivery work for frontend fe), failed (expired),
// forward_queued (forward work for peer-p) and forward_failed.
func seedEveryCount(t *testing.T, n *testNode) {
	t.Helper()
	n.Must(200, "PUT", "/api/frontends/fe", map[string]string{"mode": "pull"}, nil)
	st, ctx, now := n.node.Store(), t.Context(), time.Now()
	local := func(id string) persistence.NewMessage {
		return persistence.NewMessage{ID: id, SourceMSISDN: "+15550100", DestinationMSISDN: "+447700900123", Body: id,
			Frontend: "fe", State: messages.StatePending, Detail: "accepted",
			Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe", DueAt: now}}
	}
	queued := func(id string) persistence.NewMessage {
		return persistence.NewMessage{ID: id, SourceMSISDN: "+15550100", DestinationMSISDN: "+33600000001", Body: id,
			Frontend: "far", DestSMSC: "peer-p", State: messages.StateForwardQueued, Detail: "queued",
			Work: &persistence.WorkSpec{Kind: persistence.WorkForward, Target: "peer-p", DueAt: now}}
	}
	for _, b := range []struct {
		at time.Time
		m  persistence.NewMessage
	}{{now.Add(-time.Hour), local("expired")}, {now.Add(-time.Hour), queued("forward-failed")}, {now, local("pending")}, {now, queued("forward-queued")}} {
		if _, err := st.Accept(ctx, b.at, []persistence.NewMessage{b.m}); err != nil {
			t.Fatal(err)
		}
	}
	if ms, err := st.ExpireMessages(ctx, persistence.ExpireRequest{Now: now, SubmittedBefore: now.Add(-time.Minute), Limit: 10}); err != nil || len(ms) != 1 {
		t.Fatalf("expire: %d messages, %v", len(ms), err)
	}
	if ms, err := st.FailForwards(ctx, persistence.ForwardExpiry{Now: now, QueuedBefore: now.Add(-time.Minute), Limit: 10}); err != nil || len(ms) != 1 {
		t.Fatalf("fail forwards: %d messages, %v", len(ms), err)
	}
}

// siteWideSamples are the site-wide gauges' samples of n's scrape.
func siteWideSamples(n *testNode) ([]sample, error) {
	text, err := n.scrapeText()
	if err != nil {
		return nil, err
	}
	all, err := parseSamples(text)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(s sample) bool { return !siteWideGauges[s.name] }), nil
}

// seriesOf is s's series in PromQL's notation, with the labels of extra
// added, labels sorted.
func seriesOf(s sample, extra map[string]string) string {
	labels := maps.Clone(s.labels)
	maps.Copy(labels, extra)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+strconv.Quote(labels[k]))
	}
	return s.name + "{" + strings.Join(parts, ", ") + "}"
}

// matches tells whether s is the series given as name{label="value", ...}
// (its other labels aside).
func matches(s sample, series string) bool {
	name, rest, _ := strings.Cut(series, "{")
	if s.name != name {
		return false
	}
	for _, m := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
		if k, v, ok := strings.Cut(m, "="); ok && s.labels[k] != strings.Trim(v, `"`) {
			return false
		}
	}
	return true
}

// forJob is a dashboard expression as Grafana sends it with job chosen and
// every instance and peer.
func forJob(t *testing.T, expr, job string) string {
	t.Helper()
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		switch strings.Trim(v, "${}[]") {
		case "job":
			return job
		case "instance", "peer":
			return ".*"
		}
		t.Fatalf("%s: no value for the variable %s", expr, v)
		return ""
	})
}

// yamlQuote is s as a single-quoted YAML scalar.
func yamlQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
