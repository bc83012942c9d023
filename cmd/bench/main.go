// Command bench measures a Switchboard node against a baseline measured by
// the same process in the same run (see BENCH.md: the machines are noisy, so
// every figure is a ratio). For each figure it prints exactly one line
//
//	bench: <name> <value> <unit> baseline=<value> ratio=<value>
//
// and human context on lines starting with '#'.
//
// Figures:
//
//	ingest    64 keep-alive HTTPS clients POST ~321-byte submissions to a node
//	          (embedded SQLite, synchronous=FULL) and wait for the 202;
//	          accepted msg/s over the window.
//	delivery  the same submitters plus pull consumers (poll max 100, ack all
//	          as delivered); acked msg/s over the window.
//
// The baseline of both is a plain net/http HTTPS server (same TLS, HTTP/1.1
// only) that decodes the same JSON into a struct and answers 202, driven by
// the same clients for the same window. Each repeat runs the baseline before
// each subject run (fresh node and data directory per run); the figures and
// the baseline are the medians over the repeats.
//
// Usage: go run ./cmd/bench [--window 10s] [--warmup 2s] [--clients 64]
// [--repeat 3] [--only ingest|delivery] [--short] [--cpuprofile FILE]
// [--trace FILE]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/certs"
)

// options are the command line.
type options struct {
	window     time.Duration
	warmup     time.Duration
	clients    int
	consumers  int
	repeat     int
	only       string
	cpuprofile string
	trace      string
	dir        string
	bodySize   int
}

// figures in the order they are run and printed.
var figures = []string{"ingest", "delivery"}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var short bool
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.window, "window", 10*time.Second, "measured window of each run")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up before each window")
	fs.IntVar(&o.clients, "clients", 64, "concurrent submitting clients (one keep-alive connection each)")
	fs.IntVar(&o.consumers, "consumers", 4, "pull consumers of the delivery figure")
	fs.IntVar(&o.repeat, "repeat", 3, "repeats; the median of each figure and of the baseline is reported")
	fs.StringVar(&o.only, "only", "", "run one figure only: "+strings.Join(figures, "|"))
	fs.BoolVar(&short, "short", false, "quick check: --window 1s --warmup 0.5s --repeat 1 (explicit flags win)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the first subject window (node + clients; clients carry the pprof label bench=client) to FILE")
	fs.StringVar(&o.trace, "trace", "", "write a runtime/trace execution trace of the first subject window to FILE (go tool trace -pprof=syscall|sched|sync FILE shows where wall time waits)")
	fs.StringVar(&o.dir, "dir", "", "parent of the temporary data directories (default: the system temp dir)")
	fs.IntVar(&o.bodySize, "body-size", 321, "bytes of each submission's JSON request body")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if short {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["window"] {
			o.window = time.Second
		}
		if !set["warmup"] {
			o.warmup = 500 * time.Millisecond
		}
		if !set["repeat"] {
			o.repeat = 1
		}
	}
	switch {
	case o.window <= 0:
		return o, errors.New("--window must be positive")
	case o.warmup < 0:
		return o, errors.New("--warmup must not be negative")
	case o.clients < 1:
		return o, errors.New("--clients must be at least 1")
	case o.consumers < 1:
		return o, errors.New("--consumers must be at least 1")
	case o.repeat < 1:
		return o, errors.New("--repeat must be at least 1")
	case o.only != "" && !slices.Contains(figures, o.only):
		return o, fmt.Errorf("--only %q: want one of %s", o.only, strings.Join(figures, ", "))
	case o.bodySize < 160:
		return o, errors.New("--body-size must be at least 160")
	}
	return o, nil
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "cmd/bench:", err)
		}
		os.Exit(2)
	}
}

// run is the whole benchmark; the bench: and # lines go to out.
func run(args []string, out, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	begin := time.Now()
	selected := figures
	if o.only != "" {
		selected = []string{o.only}
	}
	root, err := os.MkdirTemp(o.dir, "switchboard-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	certFile, keyFile, err := certs.EnsureSelfSigned(filepath.Join(root, "baseline-tls"), "bench-baseline", time.Now())
	if err != nil {
		return fmt.Errorf("baseline certificate: %w", err)
	}

	fmt.Fprintf(out, "# switchboard bench: %s, GOMAXPROCS=%d, NumCPU=%d, %s/%s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(out, "# clients=%d consumers=%d window=%v warmup=%v repeat=%d body=%dB data=%s\n",
		o.clients, o.consumers, o.window, o.warmup, o.repeat, o.bodySize, root)

	var prof *profiler
	if o.cpuprofile != "" || o.trace != "" {
		prof = &profiler{path: o.cpuprofile, tracePath: o.trace}
	}
	body := newBodies(o.clients, o.bodySize)
	var base []runResult
	subj := map[string][]runResult{}
	for rep := 1; rep <= o.repeat; rep++ {
		for _, fig := range selected {
			t := time.Now()
			b, err := runBaseline(o, body, certFile, keyFile)
			b.took = time.Since(t)
			b.goroutines = runtime.NumGoroutine()
			if err != nil {
				return fmt.Errorf("repeat %d: baseline: %w", rep, err)
			}
			base = append(base, b)
			fmt.Fprintf(out, "# repeat %d/%d baseline: %s\n", rep, o.repeat, b.summary("req/s"))

			dir := filepath.Join(root, fmt.Sprintf("%s-%d", fig, rep))
			var r runResult
			t = time.Now()
			switch fig {
			case "ingest":
				r, err = runIngest(o, body, dir, prof)
			case "delivery":
				r, err = runDelivery(o, body, dir, prof)
			}
			if err != nil {
				return fmt.Errorf("repeat %d: %s: %w", rep, fig, err)
			}
			r.took = time.Since(t)
			r.goroutines = runtime.NumGoroutine()
			subj[fig] = append(subj[fig], r)
			fmt.Fprintf(out, "# repeat %d/%d %s: %s\n", rep, o.repeat, fig, r.summary("msg/s"))
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
	}
	if prof != nil && prof.err != nil {
		return fmt.Errorf("--cpuprofile/--trace: %w", prof.err)
	}

	bm := median(rates(base))
	fmt.Fprintf(out, "# baseline runs (req/s): %s; median %.0f; %s\n", list(rates(base)), bm, latencies(base))
	for _, fig := range selected {
		rs := subj[fig]
		m := median(rates(rs))
		// Each subject run's ratio to the baseline run just before it: a
		// cross-check of the median ratio when the machine's speed drifts.
		var paired []float64
		for i, r := range rs {
			if b := base[i*len(selected)+slices.Index(selected, fig)].rate; b > 0 {
				paired = append(paired, r.rate/b)
			}
		}
		fmt.Fprintf(out, "# %s runs (msg/s): %s; median %.0f; ratio to the baseline run before each: %s (median %.3f); %s\n",
			fig, list(rates(rs)), m, listf(paired, "%.3f"), median(paired), latencies(rs))
		ratio := 0.0
		if bm > 0 {
			ratio = m / bm
		}
		fmt.Fprintf(out, "bench: %s %.0f msg/s baseline=%.0f ratio=%.3f\n", fig, m, bm, ratio)
	}
	if prof != nil && prof.started && o.cpuprofile != "" {
		fmt.Fprintf(out, "# cpu profile of the first %s window: %s (go tool pprof -top -tagignore bench=client FILE for the node alone)\n", selected[0], o.cpuprofile)
	}
	if prof != nil && prof.started && o.trace != "" {
		fmt.Fprintf(out, "# execution trace of the first %s window: %s\n", selected[0], o.trace)
	}
	fmt.Fprintf(out, "# total time %v\n", time.Since(begin).Round(100*time.Millisecond))
	return nil
}

// profiler writes one CPU profile and/or execution trace covering the first
// subject window.
type profiler struct {
	path      string // CPU profile ("" for none)
	tracePath string // execution trace ("" for none)
	started   bool
	stopped   bool
	files     []*os.File
	cpu, tr   bool
	err       error
}

func (p *profiler) start() {
	if p == nil || p.started {
		return
	}
	p.started = true
	open := func(path string) *os.File {
		f, err := os.Create(path)
		if err != nil {
			p.err = errors.Join(p.err, err)
			return nil
		}
		p.files = append(p.files, f)
		return f
	}
	if p.path != "" {
		if f := open(p.path); f != nil {
			if err := pprof.StartCPUProfile(f); err != nil {
				p.err = errors.Join(p.err, err)
			} else {
				p.cpu = true
			}
		}
	}
	if p.tracePath != "" {
		if f := open(p.tracePath); f != nil {
			if err := trace.Start(f); err != nil {
				p.err = errors.Join(p.err, err)
			} else {
				p.tr = true
			}
		}
	}
}

func (p *profiler) stop() {
	if p == nil || !p.started || p.stopped {
		return
	}
	p.stopped = true
	if p.cpu {
		pprof.StopCPUProfile()
	}
	if p.tr {
		trace.Stop()
	}
	for _, f := range p.files {
		if err := f.Close(); err != nil {
			p.err = errors.Join(p.err, err)
		}
	}
}

func rates(rs []runResult) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = r.rate
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// latencies is the median over the runs of their submit p50 and p99.
func latencies(rs []runResult) string {
	var p50, p99 []float64
	for _, r := range rs {
		p50 = append(p50, float64(r.p50))
		p99 = append(p99, float64(r.p99))
	}
	return fmt.Sprintf("submit latency p50=%v p99=%v (medians over the runs)",
		time.Duration(median(p50)).Round(10*time.Microsecond), time.Duration(median(p99)).Round(10*time.Microsecond))
}

func list(xs []float64) string { return listf(xs, "%.0f") }

func listf(xs []float64, format string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, " ")
}
