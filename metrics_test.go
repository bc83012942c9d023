package switchboard_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// documentedKinds reads the actor kinds of the paragraph of docs/metrics.md
// that starts with intro (every `name` up to the paragraph's end).
func documentedKinds(t *testing.T, intro string) []string {
	t.Helper()
	doc, err := os.ReadFile("docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(doc), "\n"+intro)
	if !ok {
		t.Fatalf("docs/metrics.md has no paragraph %q", intro)
	}
	para, _, _ = strings.Cut(para, "\n\n")
	para = regexp.MustCompile(`\[[^]]*\]\([^)]*\)`).ReplaceAllString(para, "") // links
	var kinds []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(para, -1) {
		kinds = append(kinds, m[1])
	}
	slices.Sort(kinds)
	return kinds
}

// TestActorKindsAreDocumented: the actor kinds on /metrics of a node with
// a frontend are those docs/metrics.md lists.
func TestActorKindsAreDocumented(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe", "1")
	doc := documentedKinds(t, "Actor kinds of a node:")
	// The frontend's worker (kind delivery) is spawned after the PUT's answer.
	polltest.Eventually(t, 10*time.Second, func() error {
		var kinds []string
		for l := range strings.SplitSeq(scrape(t, h), "\n") {
			if rest, ok := strings.CutPrefix(l, `switchboard_actor_restarts_total{kind="`); ok {
				kinds = append(kinds, rest[:strings.IndexByte(rest, '"')])
			}
		}
		slices.Sort(kinds)
		if !slices.Equal(kinds, doc) {
			return fmt.Errorf("actor kinds on /metrics %v, docs/metrics.md lists %v", kinds, doc)
		}
		return nil
	})
}

// documentedMetrics reads the metric names of the table of docs/metrics.md
// that follows the paragraph starting with intro.
func documentedMetrics(t *testing.T, intro string) []string {
	t.Helper()
	doc, err := os.ReadFile("docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "\n"+intro)
	if !ok {
		t.Fatalf("docs/metrics.md has no paragraph %q", intro)
	}
	_, table, _ := strings.Cut(rest, "\n\n") // the paragraph's end
	table, _, _ = strings.Cut(table, "\n\n")
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(switchboard_[a-z_]+)`").FindAllStringSubmatch(table, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatalf("no metric in the table after docs/metrics.md's %q", intro)
	}
	return names
}

// TestFederationOnlyMetricsNeedFederation: the metrics docs/metrics.md
// says are registered only with --federation are not on a node without
// it, and the ring's, which it says every node has, are. (The ring's were
// once listed as federation metrics, so an operator without federation
// did not expect them on /metrics.)
func TestFederationOnlyMetricsNeedFederation(t *testing.T) {
	h := startNode(t, testConfig(t))
	text := scrape(t, h)
	for _, name := range documentedMetrics(t, "Federation metrics (registered only with `--federation`") {
		if strings.Contains(text, "\n# TYPE "+name+" ") {
			t.Errorf("%s is on /metrics of a node without federation; docs/metrics.md lists it as registered only with --federation", name)
		}
	}
	// switchboard_ring_ranges has its series once the first assignment is made.
	ring := documentedMetrics(t, "Ring metrics (every node")
	polltest.Eventually(t, 10*time.Second, func() error {
		text := scrape(t, h)
		for _, name := range ring {
			if !strings.Contains(text, "\n# TYPE "+name+" ") {
				return fmt.Errorf("%s is not on /metrics of a node without federation; docs/metrics.md says every node has it", name)
			}
		}
		return nil
	})
}

// shiftedNode is a node on a shiftedClock moved by by, with the pull
// frontend fe for prefix 44 (retryBody's destination).
func shiftedNode(t *testing.T, by time.Duration) (*harness, *shiftedClock) {
	t.Helper()
	clk := &shiftedClock{}
	clk.by.Store(int64(by))
	cfg := testConfig(t)
	cfg.Clock = clk
	h := startNode(t, cfg)
	h.pullFrontend("fe", "44")
	return h, clk
}

// TestOutboxOldestAgeIsHowLongDueWorkHasWaited: the outbox's age is how
// long its oldest due work has waited, on the node's clock. A message
// submitted with deliver_after an hour ahead (scheduled delivery,
// docs/api.md) waits in the outbox, but none of it is due: the age is 0,
// however long ago it was accepted (it read the half hour since then, the
// node's clock being half an hour behind the wall clock, and
// SwitchboardOutboxStuck held until the message's time). With the node's
// clock 15 minutes past its deliver_after and nobody polling, it has
// waited 15 minutes.
func TestOutboxOldestAgeIsHowLongDueWorkHasWaited(t *testing.T) {
	h, clk := shiftedNode(t, -30*time.Minute)
	start := time.Now()
	due := clk.Now().Add(time.Hour)
	h.must(202, "POST", "/api/messages", retryBody("later", "deliver_after", due.Format(time.RFC3339Nano)), nil)

	const age, depth = `switchboard_outbox_oldest_age_seconds{node="test-node"}`, `switchboard_outbox_depth{node="test-node"}`
	var text string
	polltest.Eventually(t, 10*time.Second, func() error { // the store's gauges are cached for a second
		if text = scrape(t, h); metricValue(t, text, depth) != 1 {
			return fmt.Errorf("outbox depth %v, want the scheduled message's row", metricValue(t, text, depth))
		}
		return nil
	})
	if got := metricValue(t, text, age); got != 0 {
		t.Errorf("%s = %v with nothing due (the one row is due in an hour), want 0", age, got)
	}

	clk.by.Store(int64(45 * time.Minute))
	var got float64
	polltest.Eventually(t, 10*time.Second, func() error {
		if got = metricValue(t, scrape(t, h), age); got < 15*60 {
			return fmt.Errorf("%s = %v, want the 15 minutes since deliver_after", age, got)
		}
		return nil
	})
	if most := 15*60 + time.Since(start).Seconds(); got > most {
		t.Errorf("%s = %v, want the 15 minutes (and the test's %.1fs) since deliver_after on the node's clock", age, got, time.Since(start).Seconds())
	}
}

// TestStatusOutboxOldestIsSinceDueWorkHasWaited: /api/status's
// outbox_oldest (the web UI's "oldest waits", the CLI's "outbox oldest") is
// what switchboard_outbox_oldest_age_seconds counts from: since when the
// oldest work that is due and not being done has waited, on the node's
// clock. A message scheduled an hour ahead (deliver_after) is not due:
// there is none (it read the message's acceptance, so the UI had it waiting
// since then). With the node's clock past its deliver_after and nobody
// polling, it has waited since its deliver_after.
func TestStatusOutboxOldestIsSinceDueWorkHasWaited(t *testing.T) {
	h, clk := shiftedNode(t, -30*time.Minute)
	due := clk.Now().Add(time.Hour).Truncate(time.Second)
	h.must(202, "POST", "/api/messages", retryBody("later", "deliver_after", due.Format(time.RFC3339)), nil)

	var st httpapi.Status
	polltest.Eventually(t, 10*time.Second, func() error { // the store's counts are cached for a second
		if h.must(200, "GET", "/api/status", nil, &st); st.OutboxDepth != 1 {
			return fmt.Errorf("outbox_depth %d, want the scheduled message's row", st.OutboxDepth)
		}
		return nil
	})
	if st.OutboxOldest != nil {
		t.Errorf("outbox_oldest = %v with nothing due (the one row is due at %v), want none", *st.OutboxOldest, due)
	}

	clk.by.Store(int64(45 * time.Minute))
	polltest.Eventually(t, 10*time.Second, func() error {
		st = httpapi.Status{}
		if h.must(200, "GET", "/api/status", nil, &st); st.OutboxOldest == nil {
			return fmt.Errorf("no outbox_oldest with the node's clock past deliver_after")
		}
		return nil
	})
	if !st.OutboxOldest.Equal(due) {
		t.Errorf("outbox_oldest = %v, want the message's deliver_after %v", *st.OutboxOldest, due)
	}
	// now is the node's clock (15 minutes ahead of this process's now),
	// what outbox_oldest's age is measured against.
	if after := clk.Now(); st.Now.After(after) || st.Now.Before(after.Add(-10*time.Second)) {
		t.Errorf("now = %v, want the node's clock (%v, a moment after the answer)", st.Now, after)
	}
}

// TestNodeOnARegistryAnotherNodeLeft: a node never took its collectors
// off the Config.Registry it was given, so an embedder restarting a node
// in the same process on that registry (after a Stop, or after a Start
// that failed) had the new node's Start fail with a duplicate
// registration. Now both leave the registry as they found it, and the
// next node registers and serves its metrics there.
func TestNodeOnARegistryAnotherNodeLeft(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	switchboardSeries := func() []string {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "switchboard_") {
				names = append(names, mf.GetName())
			}
		}
		return names
	}

	// A Start that fails after the listeners and the store's first steps:
	// another node holds the data directory.
	holder := testConfig(t)
	nodetest.Embedded(t, holder)
	cfg := testConfig(t)
	cfg.DataDir, cfg.Registry = holder.DataDir, reg
	failed, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := failed.Start(ctx); err == nil {
		t.Fatal("Start on a data directory another node holds succeeded")
	}
	if got := switchboardSeries(); len(got) != 0 {
		t.Errorf("after a failed Start the registry still has %v", got)
	}

	for round := 1; round <= 2; round++ {
		cfg := testConfig(t)
		cfg.Registry = reg
		n, err := switchboard.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(ctx); err != nil {
			t.Fatalf("round %d: Start on a registry a node left: %v", round, err)
		}
		if got := switchboardSeries(); !slices.Contains(got, "switchboard_messages") {
			t.Errorf("round %d: the running node's registry has %v, no switchboard_messages", round, got)
		}
		nodetest.StopEmbedded(t, n)
		if got := switchboardSeries(); len(got) != 0 {
			t.Errorf("round %d: after Stop the registry still has %v", round, got)
		}
	}
}
