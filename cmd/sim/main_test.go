package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/sim"
)

var simLine = regexp.MustCompile(`(?m)^sim: seed=\d+ nodes=\d+ accepted=\d+ delivered=\d+ lost=\d+ duplicated=\d+ unexpected=\d+ misrouted=\d+ disagreeing=\d+( [a-z_]+=\d+)*\n\z`)

func TestRunEndsWithTheSimLine(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(t, []string{"--nodes", "2", "--duration", "500ms", "--seed", "7", "--faults", "random"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !simLine.MatchString(out.String()) {
		t.Fatalf("the report does not end with the sim: line:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "fault schedule (seed 7") {
		t.Fatalf("the report lacks the schedule:\n%s", out.String())
	}
}

// TestBadFlagsExit2: bad flags make no run. --nodes, --duration,
// --clients and --frontends of 0 ran one with the default instead (5
// nodes, 5 min, 2 clients, 1 frontend), whose printed replay was another
// run: with --nodes 0 the schedule drawn for 0 nodes ("(no faults)"),
// the replay's --nodes 5 one drawn for 5.
func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{{"--faults", "nope"}, {"--nodes", "x"}, {"extra"}, {"--instances", "0"}, {"--nodes", "1", "--instances", "3,1"}, {"--seeds", "2", "--jobs", "0"},
		{"--nodes", "0", "--duration", "1s"}, {"--nodes", "-1", "--duration", "1s"}, {"--nodes", "2", "--duration", "0s"}, {"--nodes", "2", "--duration", "-1s"},
		{"--nodes", "2", "--duration", "1s", "--clients", "0"}, {"--nodes", "2", "--duration", "1s", "--frontends", "0"}} {
		var out, errb bytes.Buffer
		if code := run(t, args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

var ringLine = regexp.MustCompile(`(?m)^sim: ring checks=\d+ overlaps=0 double_claims=0\nsim: seed=\d+ nodes=2 `)

func TestRunWithAMultiInstanceSite(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(t, []string{"--nodes", "2", "--instances", "3", "--duration", "800ms", "--seed", "3", "--faults", "random"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !ringLine.MatchString(out.String()) || !simLine.MatchString(out.String()) {
		t.Fatalf("the report lacks the ring line before the sim: line:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "--instances 3") {
		t.Fatalf("the replay command lacks --instances:\n%s", out.String())
	}
}

// replayLine is the replay command of a report's first line.
var replayLine = regexp.MustCompile(`replay with: go run \./cmd/sim (.*)\):\n`)

// TestReplayMakesTheSameRun runs the command and parses the replay
// command its report prints: it must give the options the run had (the
// fault story and its schedule, the nodes and their instances, the
// duration, the clients, the frontends), whatever flags made the run.
func TestReplayMakesTheSameRun(t *testing.T) {
	for _, args := range [][]string{
		{"--faults", "none", "--nodes", "2", "--duration", "500ms"},
		{"--faults", "none", "--nodes", "2", "--instances", "2", "--duration", "500ms", "--clients", "3"},
		{"--nodes", "3", "--duration", "600ms", "--frontends", "2", "--clients", "1"},
		{"--faults", "random", "--nodes", "2", "--instances", "1,2", "--duration", "500ms"},
	} {
		args = append(args, "--seed", "7")
		var out, errb bytes.Buffer
		if code := run(t, args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out.String(), errb.String())
		}
		m := replayLine.FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("%v: no replay command in the report:\n%s", args, out.String())
		}
		want, got := runOptions(t, args), runOptions(t, strings.Fields(m[1]))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v: the replay command %q makes another run:\n got %+v\nwant %+v", args, m[1], got, want)
		}
	}
}

// runOptions are the options of the run the command line args makes (of
// its --seed), less what does not shape the run (logs, progress), with
// instances counted per node.
func runOptions(t *testing.T, args []string) sim.Options {
	t.Helper()
	cmd, code := parse(args, io.Discard)
	if cmd == nil {
		t.Fatalf("%v: exit %d", args, code)
	}
	o, err := cmd.options(cmd.seed)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	o.Logger, o.Progress = nil, nil
	if o.Tune != nil {
		t.Fatalf("%v: options with a Tune function cannot be compared", args)
	}
	var per []int
	for i := range o.Nodes {
		k := 1
		if i < len(o.Instances) && o.Instances[i] > 1 {
			k = o.Instances[i]
		}
		per = append(per, k)
	}
	o.Instances = per
	return o
}

var seedLine = regexp.MustCompile(`(?m)^sim: seed=(\d+) nodes=2 .* \([0-9.]+m?s wall\)$`)

// TestJobsRunSeedsInChildren runs three seeds two at a time in child
// processes of the built command: one line each, in seed order, and the
// summary.
func TestJobsRunSeedsInChildren(t *testing.T) {
	bin := buildSim(t)
	executable = func() (string, error) { return bin, nil }
	t.Cleanup(func() { executable = os.Executable })
	var out, errb bytes.Buffer
	code := run(t, []string{"--seeds", "3", "--seed", "5", "--nodes", "2", "--duration", "500ms", "--jobs", "2"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	var seeds []string
	for _, m := range seedLine.FindAllStringSubmatch(out.String(), -1) {
		seeds = append(seeds, m[1])
	}
	if strings.Join(seeds, ",") != "5,6,7" {
		t.Fatalf("seed lines %v, want 5,6,7 in order:\n%s", seeds, out.String())
	}
	if !strings.Contains(out.String(), "sim: 3 seeds, 0 failed") {
		t.Fatalf("no summary:\n%s", out.String())
	}
}

// buildSim builds the command into the test's temporary directory.
func buildSim(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sim")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
