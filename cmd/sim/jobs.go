package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// executable is this program's path (a test points it at a built binary:
// a test binary is not the command).
var executable = os.Executable

// A seed's outcome from a child process (see runJobs).
type seedResult struct {
	seed   int64
	code   int    // the child's exit code: 0 pass, 1 violation, 2 no run
	out    []byte // its standard output: the full report
	errOut []byte // its standard error
	wall   time.Duration
}

// childArgs is the command line of a child that runs seed alone: the flags
// set on fs, less the ones of the parent's loop, and --seed.
func childArgs(fs *flag.FlagSet, seed int64) []string {
	var args []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "seeds", "seed", "jobs", "cpuprofile":
			return
		}
		args = append(args, "-"+f.Name+"="+f.Value.String())
	})
	return append(args, "-seed="+strconv.FormatInt(seed, 10))
}

// runJobs runs seeds first .. first+n-1, each in a child process of this
// program, jobs at a time, and prints what the sequential loop prints, in
// seed order: a passing seed's lines, a failing seed's whole report, the
// summary. Processes, not goroutines: a run's bubble and its nodes share
// nothing with another run's, whatever package state a library keeps. A
// child that could not make its run (exit 2) stops the launching of new
// seeds; the command then exits 2.
// With -v each seed's standard error (its nodes' logs) comes before its
// lines.
func runJobs(fs *flag.FlagSet, first int64, n, jobs int, stdout, stderr io.Writer) int {
	verbose := fs.Lookup("v").Value.String() == "true"
	self, err := executable()
	if err != nil {
		fmt.Fprintf(stderr, "sim: --jobs: %v\n", err)
		return 2
	}
	begin := time.Now()
	seeds := make(chan int64)
	results := make(chan seedResult)
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for range jobs {
		workers.Go(func() {
			for s := range seeds {
				results <- runChild(self, childArgs(fs, s), s)
			}
		})
	}
	go func() {
		defer close(seeds)
		for s := first; s < first+int64(n); s++ {
			select {
			case seeds <- s:
			case <-stop:
				return
			}
		}
	}()
	go func() {
		workers.Wait()
		close(results)
	}()
	// Results are printed in seed order as the gaps close.
	pending := map[int64]seedResult{}
	next, ran, failed, code := first, 0, 0, 0
	print := func(r seedResult) {
		ran++
		if verbose {
			stderr.Write(r.errOut)
		}
		switch r.code {
		case 0:
			for _, line := range strings.Split(string(r.out), "\n") {
				switch {
				case strings.HasPrefix(line, "sim: seed="):
					fmt.Fprintf(stdout, "%s (%v wall)\n", line, r.wall.Round(time.Millisecond))
				case strings.HasPrefix(line, "sim: "):
					fmt.Fprintln(stdout, line)
				}
			}
		case 1:
			failed++
			stdout.Write(r.out)
		default:
			stdout.Write(r.out)
			if !verbose {
				stderr.Write(r.errOut)
			}
			fmt.Fprintf(stderr, "sim: seed %d: the run could not be made (above)\n", r.seed)
		}
	}
	for r := range results {
		if r.code != 0 && r.code != 1 && code == 0 {
			code = 2
			close(stop)
		}
		pending[r.seed] = r
		for r, ok := pending[next]; ok; r, ok = pending[next] {
			delete(pending, next)
			next++
			print(r)
		}
	}
	// After a stop, the seeds that ran beyond a gap.
	for _, s := range slices.Sorted(maps.Keys(pending)) {
		print(pending[s])
	}
	fmt.Fprintf(stdout, "sim: %d seeds, %d failed, %v\n", ran, failed, time.Since(begin).Round(time.Second))
	switch {
	case code != 0:
		return code
	case failed > 0:
		return 1
	}
	return 0
}

// runChild runs one seed in a child process.
func runChild(self string, args []string, seed int64) seedResult {
	var out, errOut bytes.Buffer
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	wait, err := startChild(cmd)
	if err == nil {
		err = wait()
	}
	r := seedResult{seed: seed, out: out.Bytes(), errOut: errOut.Bytes(), wall: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		r.code = 2
		r.errOut = append(r.errOut, err.Error()+"\n"...)
	}
	return r
}
