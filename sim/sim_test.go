package sim

import (
	"io"
	"log/slog"
	"os"
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
		// A lighter load than cmd/sim's (-race makes the store slow):
		// 2 messages a second of virtual time.
		o.Pause = time.Second
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

// The named scenarios of the issue, each a test.

func runScenario(t *testing.T, name string, seed int64, nodes int) Report {
	t.Helper()
	sc, ok := Scenarios[name]
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	return run(t, seed, sc.Options(seed, nodes))
}

func TestScenarioSymmetricPartition(t *testing.T) { runScenario(t, "partition", 11, 3) }

func TestScenarioAsymmetricCut(t *testing.T) { runScenario(t, "asymmetric", 12, 3) }

func TestScenarioAnswerLostOnForwards(t *testing.T) {
	rep := runScenario(t, "answer-lost", 13, 3)
	if rep.Net.AnswersLost == 0 {
		t.Fatal("no forward answer was lost: the scenario tested nothing")
	}
}

func TestScenarioDuplicatedCalls(t *testing.T) {
	rep := runScenario(t, "duplicate", 17, 3)
	if rep.Net.Duplicated == 0 {
		t.Fatal("no call was duplicated: the scenario tested nothing")
	}
}

// TestScenarioCrashReceiverBetweenCommitAndReply also checks that the
// crashes leave no goroutine behind (bug 2 of docs/sim.md).
func TestScenarioCrashReceiverBetweenCommitAndReply(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rep := runScenario(t, "crash-receiver", 14, 3)
	if rep.Net.CrashedAfterCommit == 0 {
		t.Fatal("the receiver never crashed after a commit: the scenario tested nothing")
	}
}

func TestScenarioCrashOriginWithFullForwardQueue(t *testing.T) { runScenario(t, "crash-origin", 15, 3) }

func TestScenarioStaticPeerRemovedWhileMessagesWait(t *testing.T) {
	runScenario(t, "peer-removed", 16, 3)
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

// TestScenarioPeerRemovedWithStatusesOutstanding is the regression test
// of bug 1 of docs/sim.md: a peer removed from --peers can still report
// the delivery_status of what was forwarded to it.
func TestScenarioPeerRemovedWithStatusesOutstanding(t *testing.T) {
	runScenario(t, "peer-removed-forwarded", 31, 3)
}
