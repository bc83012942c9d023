// Command bench measures a Switchboard node against a baseline measured by
// the same process in the same run (see docs/performance.md: the machines are noisy, so
// every figure is a ratio). For each figure it prints exactly one line
//
//	bench: <name> <value> <unit> baseline=<value> ratio=<value>
//
// and human context on lines starting with '#'.
//
// The goals (goal 1 to 7) are listed in docs/performance.md.
//
// Figures:
//
//	ingest    64 keep-alive HTTPS clients POST ~321-byte submissions to a node
//	          (embedded SQLite: its WAL synced before an answer) and wait
//	          for the 202; accepted msg/s over the window.
//	ingest-retention
//	          the ingest figure on a node whose cleaner purges at the
//	          intake's rate meanwhile: its store is bulk-loaded with
//	          delivered messages that come to the end of their retention,
//	          one after the other, at the rate of the ingest run of the
//	          same repeat, through the warm-up and the window (a short
//	          retention, so that the cleaner's passes come often; the #
//	          line tells how fast it purged). Its baseline is the ingest
//	          figure of the same run (--only ingest-retention runs ingest
//	          too); goal 7: ratio >= 0.9.
//	ingest-traced
//	          the ingest figure on a node that pushes its metrics and
//	          traces over OTLP (--otlp-endpoint) to a collector in this
//	          process, with the default sampler (1% of new traces; the
//	          clients send no traceparent). Its baseline is the ingest
//	          figure of the same run; goal 7: ratio >= 0.95.
//	smpp-ingest
//	          the ingest figure over SMPP: 4 ESMEs bound as transmitters
//	          to the node's --smpp-listen (plain TCP) keep --clients
//	          submit_sm in flight in all (a window of 16 each), each the
//	          first 160 characters of the ingest body (one GSM 7-bit SMS);
//	          submit_sm answered ESME_ROK (after the commit) per second.
//	          Its baseline is the ingest figure (HTTPS) of the same run
//	          (--only smpp-ingest runs ingest too). No goal: the ratio
//	          says what SMPP costs or saves against HTTPS on the same
//	          intake.
//	delivery  the same submitters plus pull consumers (poll max 100, ack all
//	          as delivered); acked msg/s over the window. Goal
//	          (docs/performance.md, goal 1): >= 0.50 of the raw HTTPS baseline (ingest: 0.60).
//	river-sqlite
//	          River (github.com/riverqueue/river) on its SQLite driver
//	          (modernc.org/sqlite, WAL, synchronous=FULL, one connection)
//	          in the bench process: jobs carrying the same submission JSON
//	          inserted with InsertMany (batches of 100, at most 2,000
//	          ahead) while 100 workers that only complete work them;
//	          completed jobs/s over the window. Its baseline is the
//	          delivery figure of the same run (--only river-sqlite runs
//	          delivery too): the ratio is what a user who picked River on
//	          SQLite instead would move per second against what our
//	          delivery path moves (above 1 River is faster). No goal.
//	federated two federated nodes A and B (embedded SQLite each, real HTTPS
//	          between them): the clients submit to A, the consumers poll
//	          and ack on B; acked msg/s at B over the window.
//	drain     the link A<->B cut, --queued messages (100,000) submitted to
//	          A wait forward_queued; the link heals; msg/s from the heal
//	          until B's consumers have acked them all. Its baseline is the
//	          federated figure of the same run.
//	latency   the federated pair A and B; clients submit to A at a fixed
//	          open-loop rate (--latency-rate, 100 msg/s: each submission
//	          starts when it is due, answered or not), one pull consumer
//	          long-polls B and acks each message delivered. A message's
//	          latency runs from the start of its submission to the 200 of
//	          the ack that carried it; the figure is the p99 over the
//	          window's submissions (ms). Its baseline, measured just before
//	          in the same repeat at the same rate and window, is the p99 of
//	          a durable echo: an HTTPS JSON handler (the raw baseline's TLS,
//	          HTTP/1.1 keep-alive) that decodes the same submission,
//	          commits it as one row in its own transaction (modernc SQLite
//	          through database/sql, WAL, synchronous=FULL) and answers 202.
//	          Goal 6: ratio <= 3, lower is better. Its note splits the
//	          path into legs (the submit, on to B's poll, the ack): their
//	          medians over all messages and over the slowest 1%.
//	memory    growth of the process's VmRSS while A queues
//	          --memory-queued messages (1,000,000) for the cut-off B (after
//	          a full GC at each reading), in MB per 100,000 queued
//	          messages; its baseline is the goal (5 MB per 100k = 50 MB
//	          per 1M, goal 5), so ratio <= 1 meets it. Measured once
//	          (first repeat only): a fill of 1M takes about 100 s.
//	restart   time for the real binary holding --restart-queued messages
//	          (1,000,000) to recover from kill -9, against the same with
//	          --restart-small (1,000), in ms; ratio <= 2 meets
//	          goal 5 (lower is better). The messages are loaded straight
//	          into an embedded store (persistence/sqlite, Accept batches
//	          of 1,000 pending messages with delivery work for the pull
//	          frontend, which is registered with its route); then the
//	          binary (--node-binary, else built from ./cmd/node into the
//	          temp dir) runs on that data dir until /readyz answers, and
//	          three times: a poll leases 100 messages (not acked), the
//	          node runs a second, is killed with SIGKILL and started
//	          again. Each start after a kill is timed from its exec until
//	          /readyz answers 200 and until a poll returns a queued
//	          message (which is acked); the figure is the median of the
//	          latter. The # lines give the node's JSON log of the median
//	          start, in ms after its exec. Measured once (first repeat
//	          only): the fill of 1M takes about 30-40 s.
//	storage   bytes on disk per message kept for its retention: an
//	          embedded store bulk-loaded with --storage-messages (100,000)
//	          delivered messages (each with two history entries and a
//	          ledger entry), its write-ahead log checkpointed; the baseline
//	          is a message's raw content (id, numbers, body). Reported, no
//	          goal; measured once.
//	postgres-site
//	          a site of three instances (switchboard.Node, real HTTPS,
//	          --ring-role auto) on one fresh Postgres schema: the clients
//	          spread over the instances, --consumers pull consumers per
//	          instance poll and ack; acked msg/s over the window, summed.
//	          Its baseline is River itself (github.com/riverqueue/river with
//	          its pgx v5 driver) on the same server, in a schema of its own
//	          migrated by rivermigrate: one client inserting the same
//	          submission JSON as job args with InsertMany (batches of
//	          1,000, at most 20,000 ahead) while working them with a worker
//	          that only completes (2,000 workers), as river bench does
//	          continuously; completed jobs/s over the same window in the
//	          same repeat (goal 4: >= 0.50). A second
//	          line, postgres-site-vs-single, prints the same site figure
//	          against ONE instance on Postgres (same clients, the same
//	          total of consumers): does adding instances scale? The server
//	          is --postgres (default $SWITCHBOARD_TEST_POSTGRES, else the
//	          local test server pgtest uses); each run creates and drops a
//	          schema of its own. No server is an error, not a skip.
//	postgres-site-nats
//	          the same site with the delivery bus (--nats-url, a JetStream
//	          server run in this process with its store in the temp dir),
//	          against the postgres-site run of the same repeat (docs/performance.md
//	          goal 7: >= 1.0, the bus must not slow a site). Part of the
//	          postgres-site figure. Both runs also time the first delivery
//	          after an idle period: 7 times, after a second of rest, a
//	          poll waits at one instance and a message is submitted at the
//	          next; the p50 from the submit to the poll's answer (printed
//	          as a # line, with and without the bus).
//
//	search    (measured once, on each store) a search by destination on a
//	          store holding --search-rows messages (10,000,000, filled in
//	          bulk with the rows Accept writes: searchfill.go), against
//	          the same search without its index; and what the search
//	          indexes cost ingest (search.go).
//
// The baseline of ingest, delivery and federated is a plain net/http HTTPS
// server (same TLS, HTTP/1.1 only) that decodes the same JSON into a struct
// and answers 202, driven by the same clients for the same window. Each
// repeat runs the baseline before each such subject run (fresh nodes and
// data directories per run); the figures and the baseline are the medians
// over the repeats.
//
// Usage: go run ./cmd/bench [--window 10s] [--warmup 2s] [--clients 64]
// [--repeat 3] [--only FIG[,FIG...]] [--queued 100000] [--latency-rate 100]
// [--memory-queued 1000000] [--restart-queued 1000000] [--restart-small 1000]
// [--node-binary FILE] [--search-rows 10000000] [--postgres DSN] [--short]
// [--cpuprofile FILE] [--trace FILE] [--profile-figure FIG]
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
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
	profileFig string
	dir        string
	bodySize   int
	queued     int64
	memQueued  int64
	postgres   string
	// latencyRate is the latency figure's open-loop rate (msg/s).
	latencyRate float64
	// restartQueued and restartSmall are the queues of the restart figure
	// and of its baseline; nodeBinary is its binary ("" = build one).
	restartQueued, restartSmall int64
	nodeBinary                  string
	// searchRows is how many messages the search figures store.
	searchRows int64
	// storageCount is the delivered messages the storage figure stores.
	storageCount int64
	// selected are the figures to run, in the order of figures.
	selected []string
}

// figures in the order they are run and printed.
var figures = []string{"ingest", "ingest-retention", "ingest-traced", "smpp-ingest", "delivery", "river-sqlite", "federated", "drain", "latency", "memory", "restart", "storage", "postgres-site", "search"}

// once are the figures measured in the first repeat only: each takes
// minutes of filling.
var once = map[string]bool{"memory": true, "restart": true, "storage": true, "search": true}

// implies maps a figure to the figure that is its baseline: --only runs
// that one too.
var implies = map[string]string{"drain": "federated", "river-sqlite": "delivery", "ingest-retention": "ingest", "ingest-traced": "ingest", "smpp-ingest": "ingest"}

// httpsBaseline are the figures measured against the raw HTTPS baseline.
var httpsBaseline = map[string]bool{"ingest": true, "delivery": true, "federated": true}

// profiled are the figures --profile-figure can cover: those with a window
// of the node in this process.
var profiled = map[string]bool{"ingest": true, "ingest-retention": true, "ingest-traced": true, "smpp-ingest": true, "delivery": true, "federated": true, "drain": true, "latency": true, "postgres-site": true, "postgres-site-nats": true}

// runBy maps a figure that is no entry of figures to the one whose run
// measures it too (--only takes that one).
var runBy = map[string]string{"postgres-site-nats": "postgres-site"}

// profiledFigures lists the figures --profile-figure can cover, in the
// order they run.
func profiledFigures() []string {
	var out []string
	for _, f := range figures {
		if profiled[f] {
			out = append(out, f)
		}
		for _, sub := range slices.Sorted(maps.Keys(runBy)) {
			if runBy[sub] == f && profiled[sub] {
				out = append(out, sub)
			}
		}
	}
	return out
}

// httpsGoals are the goals of the figures measured against the raw HTTPS
// baseline (goals 1 and 2), as ratios: the figure passes at or
// above it.
var httpsGoals = map[string]struct {
	min  float64
	goal int
}{"ingest": {0.60, 1}, "delivery": {0.50, 1}, "federated": {0.50, 2}}

// memoryGoal is goal 5 (<= 50 MB per 1M queued messages) in the
// memory figure's unit, MB per 100,000 queued messages.
const memoryGoal = 5.0

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
	fs.StringVar(&o.only, "only", "", "run only these figures, comma-separated, of: "+strings.Join(figures, ",")+" (drain implies federated and river-sqlite implies delivery, their baselines)")
	fs.Int64Var(&o.queued, "queued", 100000, "messages queued during the cut and drained after the heal (drain figure)")
	fs.Int64Var(&o.memQueued, "memory-queued", 1000000, "messages queued during the cut for the memory figure (the goal is per 1M)")
	fs.BoolVar(&short, "short", false, "quick check: --window 1s --warmup 0.5s --repeat 1 --queued 10000 --memory-queued 100000 --restart-queued 100000 --search-rows 100000 (explicit flags win)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the first subject window (node + clients; clients carry the pprof label bench=client) to FILE")
	fs.StringVar(&o.trace, "trace", "", "write a runtime/trace execution trace of the first subject window to FILE (go tool trace -pprof=syscall|sched|sync FILE shows where wall time waits)")
	fs.StringVar(&o.profileFig, "profile-figure", "", "the figure whose first window --cpuprofile/--trace cover (default: the first figure run; memory has no window; postgres-site-nats is the bus run of postgres-site)")
	fs.StringVar(&o.dir, "dir", "", "parent of the temporary data directories (default: the system temp dir)")
	fs.IntVar(&o.bodySize, "body-size", 321, "bytes of each submission's JSON request body")
	fs.Int64Var(&o.restartQueued, "restart-queued", 1000000, "messages queued in the store of the restart figure (the goal is for 1M)")
	fs.Int64Var(&o.restartSmall, "restart-small", 1000, "messages queued in the store of the restart figure's baseline")
	fs.Int64Var(&o.searchRows, "search-rows", 10_000_000, "messages stored for the search figures (the goal: milliseconds on 10 million)")
	fs.StringVar(&o.nodeBinary, "node-binary", "", "the switchboard binary of the restart figure (default: go build ./cmd/node into the bench's temp dir)")
	fs.Int64Var(&o.storageCount, "storage-messages", 100000, "delivered messages stored for the storage figure")
	fs.Float64Var(&o.latencyRate, "latency-rate", 100, "open-loop submission rate of the latency figure and its durable echo (msg/s; goal 6 is at 100)")
	defPG := os.Getenv(envPostgres)
	if defPG == "" {
		defPG = defaultPostgres
	}
	fs.StringVar(&o.postgres, "postgres", defPG, "Postgres server of the postgres-site figure (default $"+envPostgres+", else "+defaultPostgres+"); the bench creates and drops schemas of its own there")
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
		if !set["queued"] {
			o.queued = 10000
		}
		if !set["memory-queued"] {
			o.memQueued = 100000
		}
		if !set["search-rows"] {
			o.searchRows = 100000
		}
		if !set["restart-queued"] {
			o.restartQueued = 100000
		}
		if !set["storage-messages"] {
			o.storageCount = 10000
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
	case o.bodySize < 160:
		return o, errors.New("--body-size must be at least 160")
	case o.latencyRate <= 0 || o.latencyRate > 10000:
		return o, errors.New("--latency-rate must be in (0, 10000]")
	case o.queued < 100:
		return o, errors.New("--queued must be at least 100")
	case o.memQueued < 100:
		return o, errors.New("--memory-queued must be at least 100")
	case o.restartSmall < 1:
		return o, errors.New("--restart-small must be at least 1")
	case o.restartQueued < o.restartSmall:
		return o, errors.New("--restart-queued must be at least --restart-small")
	case o.storageCount < 100:
		return o, errors.New("--storage-messages must be at least 100")
	case o.profileFig != "" && !profiled[o.profileFig]:
		return o, fmt.Errorf("--profile-figure %q: want one of %s", o.profileFig, strings.Join(profiledFigures(), ", "))
	}
	o.selected = figures
	if o.profileFig != "" && o.only != "" {
		o.only += "," + cmp.Or(runBy[o.profileFig], o.profileFig)
	}
	if o.only != "" {
		want := map[string]bool{}
		for _, f := range strings.Split(o.only, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(figures, f) {
				return o, fmt.Errorf("--only %q: %q is not a figure; want some of %s", o.only, f, strings.Join(figures, ", "))
			}
			want[f] = true
		}
		for f, base := range implies {
			if want[f] {
				want[base] = true
			}
		}
		o.selected = nil
		for _, f := range figures {
			if want[f] {
				o.selected = append(o.selected, f)
			}
		}
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
	selected := o.selected
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
	fmt.Fprintf(out, "# clients=%d consumers=%d window=%v warmup=%v repeat=%d body=%dB queued=%d memory-queued=%d data=%s\n",
		o.clients, o.consumers, o.window, o.warmup, o.repeat, o.bodySize, o.queued, o.memQueued, root)
	fmt.Fprintf(out, "# figures: %s\n", strings.Join(selected, ", "))
	var pg *pgServer
	if slices.Contains(selected, "postgres-site") || slices.Contains(selected, "search") {
		var version string
		if pg, version, err = openPostgres(o.postgres); err != nil {
			return err
		}
		fmt.Fprintf(out, "# postgres-site: Postgres %s; site of %d instances with %d consumers each, single instance with %d consumers\n",
			version, siteInstances, o.consumers, siteInstances*o.consumers)
	}

	var prof *profiler
	profFig := o.profileFig
	if o.cpuprofile != "" || o.trace != "" {
		prof = &profiler{path: o.cpuprofile, tracePath: o.trace}
		if profFig == "" {
			profFig = selected[0]
		}
	}
	body := newBodies(o.clients, o.bodySize)
	// base are all raw HTTPS baseline runs; baseOf[fig][i] is the one run
	// just before fig's i-th run.
	var base []runResult
	baseOf := map[string][]runResult{}
	subj := map[string][]runResult{}
	var mems []memResult
	var river, single, onBus []runResult
	var lats, echos []latResult
	var restarts []restartResult // [small, big]
	var searches []searchResult
	var storages []storageResult
	for rep := 1; rep <= o.repeat; rep++ {
		for _, fig := range selected {
			if httpsBaseline[fig] {
				t := time.Now()
				b, err := runBaseline(o, body, certFile, keyFile)
				b.took = time.Since(t)
				b.goroutines = runtime.NumGoroutine()
				if err != nil {
					return fmt.Errorf("repeat %d: baseline: %w", rep, err)
				}
				base = append(base, b)
				baseOf[fig] = append(baseOf[fig], b)
				fmt.Fprintf(out, "# repeat %d/%d baseline: %s\n", rep, o.repeat, b.summary("req/s"))
			}
			if once[fig] && rep > 1 {
				continue // measured once
			}

			dir := filepath.Join(root, fmt.Sprintf("%s-%d", fig, rep))
			var r runResult
			var m memResult
			prof, busProf := prof, prof
			if fig != profFig {
				prof = nil
			}
			if fig != runBy[profFig] {
				busProf = nil
			}
			t := time.Now()
			switch fig {
			case "ingest":
				r, err = runIngest(o, body, dir, prof)
			case "ingest-retention":
				var rate float64
				if runs := subj["ingest"]; len(runs) > 0 {
					rate = runs[len(runs)-1].rate
				}
				r, err = runIngestRetention(o, body, dir, prof, rate)
			case "ingest-traced":
				r, err = runIngestTraced(o, body, dir, prof)
			case "smpp-ingest":
				r, err = runSMPPIngest(o, dir, prof)
			case "storage":
				sr, err := runStorage(o, dir)
				if err != nil {
					return fmt.Errorf("storage: %w", err)
				}
				storages = append(storages, sr)
				fmt.Fprintf(out, "# repeat %d/%d storage: %s\n", rep, o.repeat, sr.summary())
				if err := os.RemoveAll(dir); err != nil {
					return err
				}
				continue
			case "delivery":
				r, err = runDelivery(o, body, dir, prof)
			case "river-sqlite":
				r, err = runRiverSQLite(o, body, dir)
			case "federated":
				r, err = runFederated(o, body, dir, prof)
			case "drain":
				r, err = runDrain(o, body, dir, prof)
			case "memory":
				m, err = runMemory(o, body, dir)
			case "restart":
				bin, built, err := nodeBinary(o, root)
				if err != nil {
					return err
				}
				if built > 0 {
					fmt.Fprintf(out, "# restart: built %s from ./cmd/node in %v\n", bin, built.Round(100*time.Millisecond))
				}
				for _, n := range []int64{o.restartSmall, o.restartQueued} {
					t0 := time.Now()
					rr, err := runRestart(o, bin, fmt.Sprintf("%s-%d", dir, n), n)
					if err != nil {
						return fmt.Errorf("restart with %d queued: %w", n, err)
					}
					restarts = append(restarts, rr)
					fmt.Fprintf(out, "# repeat %d/%d restart: %s; run took %v\n", rep, o.repeat, rr.summary(), time.Since(t0).Round(100*time.Millisecond))
					if err := os.RemoveAll(fmt.Sprintf("%s-%d", dir, n)); err != nil {
						return err
					}
				}
				continue
			case "search":
				if searches, err = runSearch(o, dir, pg, out); err != nil {
					return fmt.Errorf("search: %w", err)
				}
				if err := os.RemoveAll(dir); err != nil {
					return err
				}
				continue
			case "latency":
				var e, l latResult
				t0 := time.Now()
				if e, err = runEcho(o, certFile, keyFile, dir+"-echo"); err != nil {
					return fmt.Errorf("repeat %d: durable echo: %w", rep, err)
				}
				e.took = time.Since(t0)
				echos = append(echos, e)
				fmt.Fprintf(out, "# repeat %d/%d durable echo: %s\n", rep, o.repeat, e.summary())
				t1 := time.Now()
				if l, err = runLatency(o, dir, prof); err != nil {
					return fmt.Errorf("repeat %d: latency: %w", rep, err)
				}
				l.took = time.Since(t1)
				lats = append(lats, l)
				fmt.Fprintf(out, "# repeat %d/%d latency: %s\n", rep, o.repeat, l.summary())
				if err := os.RemoveAll(dir); err != nil {
					return err
				}
				if err := os.RemoveAll(dir + "-echo"); err != nil {
					return err
				}
				continue
			case "postgres-site":
				var rv, sg runResult
				t0 := time.Now()
				rv, err = runRiverPostgres(o, pg, body)
				rv.took = time.Since(t0)
				if err != nil {
					return fmt.Errorf("repeat %d: River baseline: %w", rep, err)
				}
				rv.goroutines = runtime.NumGoroutine()
				river = append(river, rv)
				fmt.Fprintf(out, "# repeat %d/%d River baseline: %s\n", rep, o.repeat, rv.summary("jobs/s"))
				t1 := time.Now()
				if sg, err = runPgSite(o, pg, body, dir+"-single", 1, siteInstances*o.consumers, "", nil); err != nil {
					return fmt.Errorf("repeat %d: postgres single instance: %w", rep, err)
				}
				sg.took, sg.goroutines = time.Since(t1), runtime.NumGoroutine()
				single = append(single, sg)
				fmt.Fprintf(out, "# repeat %d/%d postgres-single: %s\n", rep, o.repeat, sg.summary("msg/s"))
				var nr runResult
				t2 := time.Now()
				if nr, err = runPgSiteNATS(o, pg, body, dir+"-nats", busProf); err != nil {
					return fmt.Errorf("repeat %d: postgres-site-nats: %w", rep, err)
				}
				nr.took, nr.goroutines = time.Since(t2), runtime.NumGoroutine()
				onBus = append(onBus, nr)
				fmt.Fprintf(out, "# repeat %d/%d postgres-site-nats: %s; first delivery after %v idle (p50 of %d): %v\n",
					rep, o.repeat, nr.summary("msg/s"), idlePause, idleSamples, nr.idle.Round(100*time.Microsecond))
				t = time.Now()
				r, err = runPgSite(o, pg, body, dir, siteInstances, o.consumers, "", prof)
			}
			if err != nil {
				return fmt.Errorf("repeat %d: %s: %w", rep, fig, err)
			}
			r.took = time.Since(t)
			r.goroutines = runtime.NumGoroutine()
			if fig == "memory" {
				mems = append(mems, m)
				fmt.Fprintf(out, "# repeat %d/%d memory: %s, run took %v, %d goroutines after\n", rep, o.repeat, m.summary(),
					r.took.Round(10*time.Millisecond), r.goroutines)
			} else {
				subj[fig] = append(subj[fig], r)
				unit := "msg/s"
				if fig == "river-sqlite" {
					unit = "jobs/s"
				}
				fmt.Fprintf(out, "# repeat %d/%d %s: %s\n", rep, o.repeat, fig, r.summary(unit))
			}
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			if err := os.RemoveAll(dir + "-single"); err != nil {
				return err
			}
			if err := os.RemoveAll(dir + "-nats"); err != nil {
				return err
			}
		}
	}
	if prof != nil && prof.err != nil {
		return fmt.Errorf("--cpuprofile/--trace: %w", prof.err)
	}

	bm := median(rates(base))
	if len(base) > 0 {
		fmt.Fprintf(out, "# baseline runs (req/s): %s; median %.0f; %s\n", list(rates(base)), bm, latencies(base))
	}
	for _, fig := range selected {
		switch fig {
		case "memory":
			var vs []float64
			for _, m := range mems {
				vs = append(vs, m.perHundredK)
			}
			m := median(vs)
			fmt.Fprintf(out, "# memory (MB of VmRSS growth per 100k queued messages, %d queued, measured once): %s; goal <= %.0f (ratio <= 1 meets it)\n",
				o.memQueued, listf(vs, "%.2f"), memoryGoal)
			fmt.Fprintf(out, "bench: memory %.2f MB/100k baseline=%.0f ratio=%.3f\n", m, memoryGoal, m/memoryGoal)
			continue
		case "search":
			printSearch(out, searches)
			continue
		case "restart":
			small, big := restarts[0], restarts[1]
			ratio := 0.0
			if small.delivered > 0 {
				ratio = float64(big.delivered) / float64(small.delivered)
			}
			fmt.Fprintf(out, "# restart (ms from the exec after kill -9, measured once): %d queued: ready %.0f, first message polled %.0f; %d queued: ready %.0f, first message polled %.0f; "+
				"ratio of the first deliveries %.3f, of the readiness %.3f; goal <= 2 (lower is better, goal 5)\n",
				small.queued, ms(small.ready), ms(small.delivered), big.queued, ms(big.ready), ms(big.delivered), ratio, float64(big.ready)/float64(max(small.ready, 1)))
			fmt.Fprintf(out, "bench: restart %.0f ms baseline=%.0f ratio=%.3f\n", ms(big.delivered), ms(small.delivered), ratio)
			continue
		case "latency":
			var p50, p99, e50, e99, paired []float64
			for i, l := range lats {
				p50, p99 = append(p50, ms(l.p50)), append(p99, ms(l.p99))
				e50, e99 = append(e50, ms(echos[i].p50)), append(e99, ms(echos[i].p99))
				if echos[i].p99 > 0 {
					paired = append(paired, float64(l.p99)/float64(echos[i].p99))
				}
			}
			m, em := median(p99), median(e99)
			ratio := ratioOf(m, em)
			fmt.Fprintf(out, "# latency (ms, at %.0f msg/s open loop, client -> A -> B -> pull consumer's ack answered): p50 %s, p99 %s; "+
				"durable echo (HTTPS JSON, one SQLite row per commit, synchronous=FULL): p50 %s, p99 %s; "+
				"medians p50=%.2f p99=%.2f, echo p50=%.2f p99=%.2f; ratio of the p99s per repeat %s; goal <= %.0f (lower is better, goal 6)\n",
				o.latencyRate, listf(p50, "%.2f"), listf(p99, "%.2f"), listf(e50, "%.2f"), listf(e99, "%.2f"),
				median(p50), m, median(e50), em, listf(paired, "%.2f"), latencyGoal)
			fmt.Fprintf(out, "bench: latency %.2f ms baseline=%.2f ratio=%.3f\n", m, em, ratio)
			continue
		case "storage":
			sr := storages[0]
			fmt.Fprintf(out, "# storage (bytes on disk per delivered message kept for its retention, measured once): %s; no goal (reported, goal 7)\n", sr.summary())
			fmt.Fprintf(out, "bench: storage %.0f B/msg baseline=%.0f ratio=%.3f\n", sr.perMessage, sr.rawPerMsg, sr.perMessage/sr.rawPerMsg)
			continue
		case "ingest-retention":
			againstIngest(out, fig, subj[fig], subj["ingest"], "msg/s", "the ingest run of the same repeat", "goal >= 0.90 of ingest (goal 7)")
			continue
		case "ingest-traced":
			againstIngest(out, fig, subj[fig], subj["ingest"], "msg/s, OTLP metrics and traces to a collector in this process, default sampler",
				"the ingest run of the same repeat", "goal >= 0.95 of ingest (goal 7)")
			continue
		case "smpp-ingest":
			againstIngest(out, fig, subj[fig], subj["ingest"],
				fmt.Sprintf("submit_sm answered ESME_ROK after the commit /s; %d ESMEs, --clients in flight in all", smppESMEs),
				"the ingest run (HTTPS) of the same repeat", "no goal")
			continue
		case "river-sqlite":
			rs, ds := subj[fig], subj["delivery"]
			m, dm := median(rates(rs)), median(rates(ds))
			paired := pairedRatios(rs, ds)
			ratio := ratioOf(m, dm)
			fmt.Fprintf(out, "# river-sqlite runs (jobs/s): %s; median %.0f; ratio to the delivery run of the same repeat: %s (median %.3f)\n",
				list(rates(rs)), m, listf(paired, "%.3f"), median(paired))
			fmt.Fprintf(out, "# river-sqlite: River on its SQLite driver (one process, one connection, synchronous=FULL) inserting and working jobs carrying the same submissions; "+
				"baseline = our delivery figure (submit -> poll -> ack on one node, embedded SQLite). The ratio is River's completed jobs/s over our acked msg/s: "+
				"above 1 a user picking River on SQLite instead would move more jobs per second than our delivery path moves messages, below 1 ours is faster (by 1/ratio = %.2fx); "+
				"no goal (River does no HTTPS, polls or acks over the network)\n", safeInv(ratio))
			fmt.Fprintf(out, "bench: river-sqlite %s jobs/s baseline=%s ratio=%.3f\n", rateText(m), rateText(dm), ratio)
			continue
		case "drain":
			rs, fs := subj[fig], subj["federated"]
			m, fm := median(rates(rs)), median(rates(fs))
			paired := pairedRatios(rs, fs)
			fmt.Fprintf(out, "# drain runs (msg/s): %s; median %.0f; ratio to the federated run of the same repeat: %s (median %.3f)\n",
				list(rates(rs)), m, listf(paired, "%.3f"), median(paired))
			ratio := ratioOf(m, fm)
			fmt.Fprintf(out, "bench: drain %s msg/s baseline=%s ratio=%.3f\n", rateText(m), rateText(fm), ratio)
			continue
		case "postgres-site":
			rs := subj[fig]
			m, rm, sm := median(rates(rs)), median(rates(river)), median(rates(single))
			pr, ps := pairedRatios(rs, river), pairedRatios(rs, single)
			fmt.Fprintf(out, "# River baseline runs (jobs/s): %s; median %.0f\n", list(rates(river)), rm)
			fmt.Fprintf(out, "# postgres single-instance runs (msg/s): %s; median %.0f; %s\n", list(rates(single)), sm, latencies(single))
			fmt.Fprintf(out, "# postgres-site runs (msg/s): %s; median %.0f; ratio to the River run of the same repeat: %s (median %.3f; goal >= 0.50, goal 4); to the single instance: %s (median %.3f); %s\n",
				list(rates(rs)), m, listf(pr, "%.3f"), median(pr), listf(ps, "%.3f"), median(ps), latencies(rs))
			ratio, ratioS := ratioOf(m, rm), ratioOf(m, sm)
			fmt.Fprintf(out, "bench: postgres-site %s msg/s baseline=%s ratio=%.3f\n", rateText(m), rateText(rm), ratio)
			fmt.Fprintf(out, "bench: postgres-site-vs-single %s msg/s baseline=%s ratio=%.3f\n", rateText(m), rateText(sm), ratioS)
			nm := median(rates(onBus))
			pn := pairedRatios(onBus, rs)
			fmt.Fprintf(out, "# postgres-site-nats runs (msg/s): %s; median %.0f; ratio to the postgres-site run of the same repeat: %s (median %.3f; goal >= 1.0, docs/performance.md goal 7); %s\n",
				list(rates(onBus)), nm, listf(pn, "%.3f"), median(pn), latencies(onBus))
			fmt.Fprintf(out, "# first delivery after %v idle, p50 of %d per run (submit at one instance, the poll waiting at the next): with the bus %s, without %s\n",
				idlePause, idleSamples, idleList(onBus), idleList(rs))
			ratioN := ratioOf(nm, m)
			fmt.Fprintf(out, "bench: postgres-site-nats %s msg/s baseline=%s ratio=%.3f\n", rateText(nm), rateText(m), ratioN)
			continue
		}
		rs := subj[fig]
		m := median(rates(rs))
		// Each subject run's ratio to the baseline run just before it.
		paired := pairedRatios(rs, baseOf[fig])
		g := httpsGoals[fig]
		fmt.Fprintf(out, "# %s runs (msg/s): %s; median %.0f; ratio to the baseline run before each: %s (median %.3f); goal >= %.2f of the raw HTTPS baseline (goal %d); %s\n",
			fig, list(rates(rs)), m, listf(paired, "%.3f"), median(paired), g.min, g.goal, latencies(rs))
		ratio := ratioOf(m, bm)
		fmt.Fprintf(out, "bench: %s %s msg/s baseline=%s ratio=%.3f\n", fig, rateText(m), rateText(bm), ratio)
	}
	if prof != nil && prof.started && o.cpuprofile != "" {
		fmt.Fprintf(out, "# cpu profile of the first %s window: %s (go tool pprof -top -tagignore bench=client FILE for the node alone)\n", profFig, o.cpuprofile)
	}
	if prof != nil && prof.started && o.trace != "" {
		fmt.Fprintf(out, "# execution trace of the first %s window: %s\n", profFig, o.trace)
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

// pairedRatios is each run's rate over the rate of the run of base from
// the same repeat (a cross-check of the median ratio when the machine's
// speed drifts).
// againstIngest prints the # line and the bench: line of figure fig, whose
// runs rs are rated against the ingest runs is of the same repeats: unit
// and goal describe them, against names the baseline.
func againstIngest(out io.Writer, fig string, rs, is []runResult, unit, against, goal string) {
	m, im := median(rates(rs)), median(rates(is))
	paired := pairedRatios(rs, is)
	ratio := ratioOf(m, im)
	fmt.Fprintf(out, "# %s runs (%s): %s; median %.0f; ratio to %s: %s (median %.3f); %s; %s\n",
		fig, unit, list(rates(rs)), m, against, listf(paired, "%.3f"), median(paired), goal, latencies(rs))
	fmt.Fprintf(out, "bench: %s %s msg/s baseline=%s ratio=%.3f\n", fig, rateText(m), rateText(im), ratio)
}

func pairedRatios(rs, base []runResult) []float64 {
	var out []float64
	for i, r := range rs {
		if i < len(base) && base[i].rate > 0 {
			out = append(out, r.rate/base[i].rate)
		}
	}
	return out
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

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// safeInv is 1/x, or 0 for 0.
func safeInv(x float64) float64 {
	if x == 0 {
		return 0
	}
	return 1 / x
}

func list(xs []float64) string { return listf(xs, "%.0f") }

func listf(xs []float64, format string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, " ")
}

// rateText prints a rate of a bench line: whole numbers from 100 up, three
// significant digits below (a loaded test run's 0.33 jobs/s is not 0).
func rateText(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
