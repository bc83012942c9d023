package sim

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// testOptions adds the test's directory and, with SIM_LOG=1, the nodes'
// logs and the run's progress.
func testOptions(t *testing.T, o Options) Options {
	t.Helper()
	o.Dir = t.TempDir()
	if o.Pause == 0 {
		// A lighter load than cmd/sim's (under -race a message costs
		// a good part of a second): 2 clients, one message every 3 s each.
		o.Pause = 3 * time.Second
	}
	if os.Getenv("SIM_LOG") != "" {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.Progress = os.Stderr
	} else {
		o.Progress = io.Discard
	}
	return o
}

// run runs one sim and fails the test on any violation, printing the
// report (seed and schedule included).
func run(t *testing.T, seed int64, o Options) Report {
	t.Helper()
	rep, err, ok := RunIn(t, "run", seed, testOptions(t, o))
	if !ok {
		t.Fatalf("seed %d: the run's bubble failed", seed)
	}
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Logf("\n%s", rep)
	if !rep.OK() {
		t.Fatalf("seed %d violates the invariants:\n%s", seed, rep)
	}
	if rep.Result.Accepted == 0 {
		t.Fatalf("seed %d accepted nothing:\n%s", seed, rep)
	}
	return rep
}

// The named scenarios of the issue. Under -race on two cores a run costs
// tens of seconds, so `go test` runs the regression stories (crash
// between commit and answer with its leak check, bug 1 of docs/sim.md);
// SIM_SCENARIOS=all (make sim) or a comma-separated list of names runs
// others.

func runScenario(t *testing.T, name string, seed int64, nodes int) Report {
	t.Helper()
	sc, ok := Scenarios[name]
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	return run(t, seed, sc.Options(seed, nodes))
}

// scenarioCase is a named scenario's test: its seed, its nodes and what
// must have happened for it to have tested anything.
type scenarioCase struct {
	name  string
	seed  int64
	nodes int
	check func(t *testing.T, rep Report)
}

var scenarioCases = []scenarioCase{
	{name: "crash-receiver", seed: 14, nodes: 3, check: func(t *testing.T, rep Report) {
		if rep.Net.CrashedAfterCommit == 0 {
			t.Fatal("the receiver never crashed after a commit: the scenario tested nothing")
		}
	}},
	{name: "peer-removed-forwarded", seed: 31, nodes: 3},
	{name: "partition", seed: 11, nodes: 3},
	{name: "asymmetric", seed: 12, nodes: 3},
	{name: "answer-lost", seed: 13, nodes: 3, check: func(t *testing.T, rep Report) {
		if rep.Net.AnswersLost == 0 {
			t.Fatal("no forward answer was lost: the scenario tested nothing")
		}
	}},
	{name: "duplicate", seed: 17, nodes: 3, check: func(t *testing.T, rep Report) {
		if rep.Net.Duplicated == 0 {
			t.Fatal("no call was duplicated: the scenario tested nothing")
		}
	}},
	{name: "crash-origin", seed: 15, nodes: 3},
	{name: "peer-removed", seed: 16, nodes: 3},
	{name: "clock-skew", seed: 18, nodes: 3, check: func(t *testing.T, rep Report) {
		if rep.Faults.Skews != 2 || rep.Faults.Jumps != 3 {
			t.Fatalf("skews=%d jumps=%d, want 2 and 3: the scenario tested nothing", rep.Faults.Skews, rep.Faults.Jumps)
		}
	}},
	{name: "peer-flap", seed: 19, nodes: 3, check: func(t *testing.T, rep Report) {
		if rep.Faults.Removals != 2 || len(rep.Faults.Readded) != 2 || rep.Faults.Readded[0] <= 0 {
			t.Fatalf("removals=%d, rows waiting when added back %v: nothing waited for the removed peer", rep.Faults.Removals, rep.Faults.Readded)
		}
	}},
	{name: "drain-restart", seed: 20, nodes: 3, check: func(t *testing.T, rep Report) {
		if rep.Faults.DrainRestarts != 2 || len(rep.Faults.DrainQueued) != 2 || rep.Faults.DrainQueued[0] <= 0 || rep.Faults.DrainQueued[1] <= 0 {
			t.Fatalf("drain_restarts=%d, forward rows at each %v: no restart met a queue draining", rep.Faults.DrainRestarts, rep.Faults.DrainQueued)
		}
	}},
}

// TestScenarios runs the scenarios SIM_SCENARIOS names (default: the
// regression stories crash-receiver and peer-removed-forwarded, and
// drain-restart; "all": every one). Each must pass the checker and leave
// no goroutine behind (bug 2 of docs/sim.md).
func TestScenarios(t *testing.T) {
	want := map[string]bool{"crash-receiver": true, "peer-removed-forwarded": true, "drain-restart": true}
	if v := os.Getenv("SIM_SCENARIOS"); v != "" {
		want = map[string]bool{}
		for _, n := range strings.Split(v, ",") {
			want[strings.TrimSpace(n)] = true
		}
	}
	for n := range want {
		if _, ok := Scenarios[n]; !ok && n != "all" {
			t.Fatalf("SIM_SCENARIOS: no scenario %q", n)
		}
	}
	for _, sc := range scenarioCases {
		if !want["all"] && !want[sc.name] {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			rep := runScenario(t, sc.name, sc.seed, sc.nodes)
			if sc.check != nil {
				sc.check(t, rep)
			}
		})
	}
}

// TestCheckerCatchesDoubleDelivery: a frontend that hands every message
// over twice fails the run.
func TestCheckerCatchesDoubleDelivery(t *testing.T) {
	o := testOptions(t, Options{Nodes: 2, Duration: 500 * ms, DoubleAck: "n2-f0"})
	rep, err, ok := RunIn(t, "run", 21, o)
	if !ok {
		t.Fatal("the run's bubble failed")
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Result.OK() || rep.Result.Duplicated == 0 {
		t.Fatalf("the checker let a double delivery pass:\n%s", rep)
	}
	if rep.Result.Lost+rep.Result.Unexpected+rep.Result.Misrouted+rep.Result.Disagreeing != 0 {
		t.Fatalf("a double delivery shows as other violations too:\n%s", rep)
	}
}

// TestLeftoverWorkFailsTheRun: n2's webhook frontend takes every message
// and loses every answer, so n2 retries them minutes later; the run stops
// waiting for quiescence after 2 s. The messages left in retry (their only
// hand-over's ack unknown: not lost) are stuck, and the run fails.
func TestLeftoverWorkFailsTheRun(t *testing.T) {
	o := testOptions(t, Options{Nodes: 2, Webhooks: 1, Targets: []int{1}, Duration: 20 * time.Second, QuiesceTimeout: 2 * time.Second,
		Schedule: Schedule{At(0, FrontendFaults(1, FrontendFault{LoseAnswer: 1}))}})
	rep, err, ok := RunIn(t, "run", 5, o)
	if !ok {
		t.Fatal("the run's bubble failed")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep)
	if rep.Quiesced || rep.Result.Stuck == 0 || rep.OK() {
		t.Fatalf("messages left in retry at the end: quiesced=%v stuck=%d OK=%v, want false, > 0, false", rep.Quiesced, rep.Result.Stuck, rep.OK())
	}
	if !strings.Contains(rep.Line(), " quiesced=0 ") {
		t.Fatalf("the sim: line does not say the run did not quiesce: %s", rep.Line())
	}
}
