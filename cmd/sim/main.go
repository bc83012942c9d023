// Command sim runs Switchboard nodes in one process over the sim
// package's in-memory network, injects faults from a seeded schedule,
// checks the delivery invariants and prints a report ending with the
// sim: line docs/sim.md describes. It exits 1 on any violation or a run
// that did not quiesce, 2 when the run could not be made.
//
//	go run ./cmd/sim --nodes 5 --duration 30s --seed 42 --faults random
//	go run ./cmd/sim --seeds 20                # seeds 1..20, one line each
//	go run ./cmd/sim --seeds 200 --jobs 4      # four seeds at a time, in child processes
//	go run ./cmd/sim --faults crash-origin     # a named scenario
//	go run ./cmd/sim --nodes 2 --instances 3   # n1 is a site of three instances (the ring)
//	go run ./cmd/sim --faults ring-failover --seeds 50
//
// A run is replayed with the same --seed, --nodes, --instances,
// --duration, --faults, --clients and --frontends (the report prints the
// command): the schedule is drawn from the seed alone.
// With a multi-instance site the report also prints the ring's line
// (sim: ring checks=.. overlaps=.. double_claims=..) before the sim:
// line; a ring violation exits 1 too.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/sim"
)

func main() {
	os.Exit(sim.Main(os.Stdout, func(t *testing.T, stdout io.Writer) int {
		return run(t, os.Args[1:], stdout, os.Stderr)
	}))
}

// command is a parsed command line.
type command struct {
	fs         *flag.FlagSet
	seed       int64
	seeds      int
	jobs       int
	cpuprofile string
	// options are the options of the run of a seed.
	options func(seed int64) (sim.Options, error)
}

// parse reads the command line; a nil command means the command ends with
// code (0 for --help, 2 for bad flags).
func parse(args []string, stderr io.Writer) (*command, int) {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 5, "nodes in the full mesh")
	duration := fs.Duration("duration", 5*time.Minute, "load and faults last this long on the virtual clock with random and none (a scenario sets its own)")
	seed := fs.Int64("seed", 1, "seed of the fault schedule and the workload")
	seeds := fs.Int("seeds", 0, "run seeds --seed .. --seed+N-1 and print one sim: line each (0: one run, full report)")
	faults := fs.String("faults", "random", "random, none, or a scenario: "+strings.Join(sim.ScenarioNames(), ", "))
	frontends := fs.Int("frontends", 1, "pull frontends per node")
	clients := fs.Int("clients", 2, "concurrent submitting clients")
	instancesFlag := fs.String("instances", "", "instances per node, comma-separated (\"3\": n1 is a site of three instances sharing one store and a ring; \"3,1,2\"); empty: one each")
	verbose := fs.Bool("v", false, "print the nodes' logs (debug) and the run's progress to stderr")
	jobs := fs.Int("jobs", 1, "with --seeds, run this many seeds at a time, each in a child process of this program (the lines still come in seed order)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole command to `FILE` (go tool pprof FILE)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sim [flags]\n\nscenarios:\n")
		for _, n := range sim.ScenarioNames() {
			fmt.Fprintf(stderr, "  %-15s %s\n", n, sim.Scenarios[n].Doc)
		}
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sim: unexpected argument %q\n", fs.Arg(0))
		return nil, 2
	}
	// 0 would be the library's default (sim.Options) and a run other than
	// the one asked for, with a replay command that names the default.
	for _, f := range []struct {
		name string
		bad  bool
	}{{"nodes", *nodes < 1}, {"duration", *duration <= 0}, {"clients", *clients < 1}, {"frontends", *frontends < 1}} {
		if f.bad {
			fmt.Fprintf(stderr, "sim: --%s: must be positive, got %s\n", f.name, fs.Lookup(f.name).Value)
			return nil, 2
		}
	}
	var instances []int
	multi := false
	if *instancesFlag != "" {
		for _, f := range strings.Split(*instancesFlag, ",") {
			k, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || k < 1 || k > 9 {
				fmt.Fprintf(stderr, "sim: --instances: %q is not a list of counts 1-9\n", *instancesFlag)
				return nil, 2
			}
			instances = append(instances, k)
			multi = multi || k > 1
		}
		if len(instances) > *nodes {
			fmt.Fprintf(stderr, "sim: --instances names %d nodes, --nodes is %d\n", len(instances), *nodes)
			return nil, 2
		}
	}
	options := func(s int64) (sim.Options, error) {
		var o sim.Options
		switch *faults {
		case "random":
			if multi {
				o = sim.RingOptions(s, *nodes, instances, *duration)
			} else {
				o = sim.RandomOptions(s, *nodes, *duration)
			}
		case "none":
			o = sim.QuietOptions(*nodes, instances, *duration)
		default:
			sc, ok := sim.Scenarios[*faults]
			if !ok {
				return o, fmt.Errorf("--faults: %q is not random, none or a scenario (%s)", *faults, strings.Join(sim.ScenarioNames(), ", "))
			}
			o = sc.Options(s, *nodes)
			if instances != nil {
				o.Instances = instances
			}
		}
		o.FrontendsPerNode, o.Clients = *frontends, *clients
		if *verbose {
			o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
			o.Progress = stderr
		}
		return o, nil
	}
	return &command{fs: fs, seed: *seed, seeds: *seeds, jobs: *jobs, cpuprofile: *cpuprofile, options: options}, 0
}

// run is the command; every sim runs in a synctest bubble as a subtest of
// t (virtual time: see sim.Main).
func run(t *testing.T, args []string, stdout, stderr io.Writer) int {
	cmd, code := parse(args, stderr)
	if cmd == nil {
		return code
	}
	if cmd.cpuprofile != "" {
		f, err := os.Create(cmd.cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "sim: --cpuprofile: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "sim: --cpuprofile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if cmd.jobs < 1 {
		fmt.Fprintf(stderr, "sim: --jobs: must be at least 1, got %d\n", cmd.jobs)
		return 2
	}
	if cmd.seeds > 0 && cmd.jobs > 1 {
		if _, err := cmd.options(cmd.seed); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		return runJobs(cmd.fs, cmd.seed, cmd.seeds, cmd.jobs, stdout, stderr)
	}
	if cmd.seeds > 0 {
		failed := 0
		begin := time.Now()
		for s := cmd.seed; s < cmd.seed+int64(cmd.seeds); s++ {
			o, err := cmd.options(s)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 2
			}
			rep, err, ok := sim.RunIn(t, fmt.Sprintf("seed=%d", s), s, o)
			if !ok {
				fmt.Fprintf(stderr, "sim: seed %d: the run's bubble failed (above); replay: %s\n", s, rep.Replay())
				return 2
			}
			if err != nil {
				fmt.Fprintf(stderr, "sim: seed %d: %v\n", s, err)
				return 2
			}
			if !rep.OK() {
				failed++
				fmt.Fprint(stdout, rep)
				continue
			}
			if rep.Ring.Sites > 0 {
				fmt.Fprintln(stdout, rep.Ring.Line())
			}
			fmt.Fprintf(stdout, "%s (%v wall)\n", rep.Line(), rep.Wall.Round(time.Millisecond))
		}
		fmt.Fprintf(stdout, "sim: %d seeds, %d failed, %v\n", cmd.seeds, failed, time.Since(begin).Round(time.Second))
		if failed > 0 {
			return 1
		}
		return 0
	}
	o, err := cmd.options(cmd.seed)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	rep, err, ok := sim.RunIn(t, fmt.Sprintf("seed=%d", cmd.seed), cmd.seed, o)
	if !ok {
		fmt.Fprintf(stderr, "sim: the run's bubble failed (above)\n")
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "sim: %v\n", err)
		return 2
	}
	fmt.Fprint(stdout, rep)
	if !rep.OK() {
		return 1
	}
	return 0
}
