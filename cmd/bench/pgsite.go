package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-dev/switchboard/messages"
)

// The Postgres server of the postgres-site figure: the same variable and
// default as persistence/pgtest (not imported: it is for tests only).
const (
	envPostgres     = "SWITCHBOARD_TEST_POSTGRES"
	defaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// siteInstances is the size of the multi-instance site.
const siteInstances = 3

// siteName is the --name of the bench site (all its instances).
const siteName = "bench-site"

// pgServer is the bench's handle on the Postgres server: it creates a
// schema per run and drops it afterwards.
type pgServer struct {
	base string
}

// openPostgres checks that the server answers; a missing server is an
// error that says how to provide one, never a skip.
func openPostgres(dsn string) (*pgServer, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		source := "--postgres / " + envPostgres
		if os.Getenv(envPostgres) == "" {
			source = envPostgres + " is unset, so the default " + defaultPostgres
		}
		return nil, "", fmt.Errorf("postgres-site needs a Postgres server (%s): %v; start one "+
			"(Debian: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start) or set %s / --postgres, "+
			"or leave the figure out with --only", source, err, envPostgres)
	}
	defer conn.Close(context.Background())
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return nil, "", fmt.Errorf("postgres-site: %w", err)
	}
	return &pgServer{base: dsn}, version, nil
}

// isolated returns a DSN of a fresh database of its own (dropped by
// drop), when the server lets us create one and the DSN is a URL: a
// site's master is elected by the advisory lock "ring-master", which is
// per database, so a site in a schema of a shared database competes with
// every other site on it (other engineers' tests on the same server).
// Otherwise it falls back to a fresh schema.
func (s *pgServer) isolated(prefix string) (dsn string, drop func() error, err error) {
	u, perr := url.Parse(s.base)
	if perr != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return s.schema(prefix)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := prefix + "_" + hex.EncodeToString(rnd[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.base)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return s.schema(prefix)
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.base)
		if err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// schema creates a fresh schema and returns a DSN whose connections use
// it, and a function that drops it with everything in it.
func (s *pgServer) schema(prefix string) (dsn string, drop func() error, err error) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := prefix + "_" + hex.EncodeToString(rnd[:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.base)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create schema %s: %w", name, err)
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.base)
		if err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		return nil
	}
	if strings.HasPrefix(s.base, "postgres://") || strings.HasPrefix(s.base, "postgresql://") {
		u, err := url.Parse(s.base)
		if err != nil {
			_ = drop()
			return "", nil, err
		}
		q := u.Query()
		q.Set("search_path", name)
		u.RawQuery = q.Encode()
		return u.String(), drop, nil
	}
	return s.base + " search_path=" + name, drop, nil
}

// dbStats are server-wide readings taken at the window's edges: the
// database's committed transactions (pg_stat_database, all its users:
// the whole server's: other work on it counts too) and the machine's CPU.
type dbStats struct {
	commits   int64
	busy, all int64 // /proc/stat jiffies, all CPUs
}

func (s *pgServer) stats() dbStats {
	var st dbStats
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, s.base); err == nil {
		// The statistics of finished transactions reach the view within
		// about a second; at the edges of a window of seconds that is noise.
		_, _ = conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
		_ = conn.QueryRow(ctx, "SELECT sum(xact_commit)::bigint FROM pg_stat_database").Scan(&st.commits)
		conn.Close(context.Background())
	}
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		for i, f := range strings.Fields(line)[1:] {
			v, _ := strconv.ParseInt(f, 10, 64)
			st.all += v
			if i != 3 && i != 4 { // idle, iowait
				st.busy += v
			}
		}
	}
	return st
}

// serverNote describes the window from two readings.
func serverNote(a, b dbStats, count int64, window time.Duration) string {
	s := fmt.Sprintf("server commits %.0f/s", float64(b.commits-a.commits)/window.Seconds())
	if count > 0 {
		s += fmt.Sprintf(" (%.2f per message)", float64(b.commits-a.commits)/float64(count))
	}
	if b.all > a.all {
		s += fmt.Sprintf(", machine CPU busy %.0f%% (Postgres, bench and nodes together)", 100*float64(b.busy-a.busy)/float64(b.all-a.all))
	}
	return s
}

// measureDB is measure plus the server readings at the window's edges.
func measureDB(pg *pgServer, phase *atomic.Int32, o options, prof *profiler, nodes ...*benchNode) (window, cpu time.Duration, a, b dbStats) {
	time.Sleep(o.warmup)
	a = pg.stats()
	o.warmup = 0
	window, cpu = measure(phase, o, prof, nodes...)
	b = pg.stats()
	return window, cpu, a, b
}

// The river-style job queue: river's job table (the columns and indexes
// of river_job that a plain insert and work path touch), producers that
// insert batches with COPY, workers that fetch batches with FOR UPDATE
// SKIP LOCKED (marking them running, as river's JobGetAvailable does) and
// a completer that marks finished jobs completed in batches (river's
// BatchCompleter). The jobs do nothing; their args are the bench's
// submission JSON, so a job carries what a message does.
const riverSchema = `
CREATE TABLE bench_job (
	id bigserial PRIMARY KEY,
	state text NOT NULL DEFAULT 'available',
	queue text NOT NULL DEFAULT 'default',
	priority smallint NOT NULL DEFAULT 1,
	kind text NOT NULL,
	args jsonb NOT NULL DEFAULT '{}',
	metadata jsonb NOT NULL DEFAULT '{}',
	tags varchar(255)[] NOT NULL DEFAULT '{}',
	errors jsonb[],
	attempt smallint NOT NULL DEFAULT 0,
	max_attempts smallint NOT NULL DEFAULT 25,
	attempted_by text[],
	created_at timestamptz NOT NULL DEFAULT now(),
	scheduled_at timestamptz NOT NULL DEFAULT now(),
	attempted_at timestamptz,
	finalized_at timestamptz
);
CREATE INDEX bench_job_kind ON bench_job USING btree (kind);
CREATE INDEX bench_job_state_and_finalized_at_index ON bench_job USING btree (state, finalized_at) WHERE finalized_at IS NOT NULL;
CREATE INDEX bench_job_prioritized_fetching_index ON bench_job USING btree (state, queue, priority, scheduled_at, id);
CREATE INDEX bench_job_args_index ON bench_job USING gin (args);
CREATE INDEX bench_job_metadata_index ON bench_job USING gin (metadata);
`

const riverFetch = `
WITH locked AS (
	SELECT id FROM bench_job
	WHERE state = 'available' AND queue = 'default' AND scheduled_at <= now()
	ORDER BY priority, scheduled_at, id
	LIMIT $1
	FOR UPDATE SKIP LOCKED
)
UPDATE bench_job SET state = 'running', attempt = bench_job.attempt + 1, attempted_at = now(),
	attempted_by = array_append(bench_job.attempted_by, $2::text)
FROM locked WHERE bench_job.id = locked.id
RETURNING bench_job.id, bench_job.args`

const riverComplete = `UPDATE bench_job SET state = 'completed', finalized_at = now() WHERE id = any($1::bigint[])`

// River-style sizes: COPY batches of 1,000 by two producers that stop
// while 20,000 jobs are available (the queue never runs dry, nor grows
// without bound); four fetchers of up to 200 jobs each (river fetches as
// many as its free worker slots); completions flushed at 2,000 ids or
// every 50 ms (river's BatchCompleter).
const (
	riverProducers    = 2
	riverInsertBatch  = 1000
	riverBacklog      = 20000
	riverFetchers     = 4
	riverFetchLimit   = 200
	riverCompleters   = 2
	riverCompleteMax  = 2000
	riverCompleteTick = 50 * time.Millisecond
)

// runRiver measures the job queue's completed jobs per second.
func runRiver(o options, pg *pgServer, bodies [][]byte) (r runResult, err error) {
	dsn, drop, err := pg.schema("bench_river")
	if err != nil {
		return r, err
	}
	defer func() {
		if derr := drop(); derr != nil && err == nil {
			err = derr
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return r, err
	}
	pcfg.MaxConns = int32(riverProducers + riverFetchers + riverCompleters + 1)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return r, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, riverSchema); err != nil {
		return r, fmt.Errorf("job table: %w", err)
	}

	var (
		phase              atomic.Int32
		inserted, finished atomic.Int64 // whole run
		completed          atomic.Int64 // in the window
		errs               atomic.Int64
		mu                 sync.Mutex
		firstErr           string
		wg                 sync.WaitGroup
	)
	fail := func(err error) {
		if ctx.Err() != nil {
			return
		}
		errs.Add(1)
		mu.Lock()
		if firstErr == "" {
			firstErr = err.Error()
		}
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	args := make([]string, len(bodies))
	for i, b := range bodies {
		args[i] = string(b)
	}
	for p := range riverProducers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows := make([][]any, riverInsertBatch)
			for ctx.Err() == nil {
				if inserted.Load()-finished.Load() > riverBacklog {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				for i := range rows {
					rows[i] = []any{"bench", args[(p+i)%len(args)]}
				}
				n, err := pool.CopyFrom(ctx, pgx.Identifier{"bench_job"}, []string{"kind", "args"}, pgx.CopyFromRows(rows))
				if err != nil {
					fail(fmt.Errorf("insert: %w", err))
					continue
				}
				inserted.Add(n)
			}
		}()
	}
	done := make(chan int64, riverFetchers*riverFetchLimit)
	for w := range riverFetchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker := fmt.Sprintf("bench-worker-%d", w)
			for ctx.Err() == nil {
				rows, err := pool.Query(ctx, riverFetch, riverFetchLimit, worker)
				if err != nil {
					fail(fmt.Errorf("fetch: %w", err))
					continue
				}
				n := 0
				for rows.Next() {
					var id int64
					var a []byte
					if err := rows.Scan(&id, &a); err != nil {
						break
					}
					n++
					select {
					case done <- id: // the job's work: nothing
					case <-ctx.Done():
					}
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					fail(fmt.Errorf("fetch: %w", err))
				}
				if n == 0 {
					time.Sleep(10 * time.Millisecond) // river polls every 100ms and listens; the queue is never dry here
				}
			}
		}()
	}
	var cwg sync.WaitGroup
	for range riverCompleters {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			tick := time.NewTicker(riverCompleteTick)
			defer tick.Stop()
			var ids []int64
			flush := func() {
				if len(ids) == 0 {
					return
				}
				ct, err := pool.Exec(ctx, riverComplete, ids)
				if err != nil {
					fail(fmt.Errorf("complete: %w", err))
					ids = ids[:0]
					return
				}
				finished.Add(ct.RowsAffected())
				if phase.Load() == measuring {
					completed.Add(ct.RowsAffected())
				}
				ids = ids[:0]
			}
			for {
				select {
				case id := <-done:
					ids = append(ids, id)
					if len(ids) >= riverCompleteMax {
						flush()
					}
				case <-tick.C:
					flush()
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	var a, b dbStats
	r.window, r.cpu, a, b = measureDB(pg, &phase, o, nil)
	r.count = completed.Load()
	r.rate = float64(r.count) / r.window.Seconds()
	cancel()
	wg.Wait()
	cwg.Wait()
	r.errors, r.firstErr = errs.Load(), firstErr
	r.note = fmt.Sprintf("%d inserted, %d completed in the whole run; %s", inserted.Load(), finished.Load(), serverNote(a, b, r.count, r.window))
	if r.count == 0 {
		return r, fmt.Errorf("no job completed in the window (%d errors; first: %s)", r.errors, r.firstErr)
	}
	return r, nil
}

// pgSite is one site of n instances on a fresh schema.
type pgSite struct {
	nodes []*benchNode
	drop  func() error
}

func (s *pgSite) close() error {
	var errs []error
	for i := len(s.nodes) - 1; i >= 0; i-- {
		if err := s.nodes[i].stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.drop != nil {
		errs = append(errs, s.drop())
	}
	return errors.Join(errs...)
}

// startSite starts n instances of one site on a fresh schema (role auto:
// the first takes the advisory lock and is the master), waits until every
// instance holds one epoch of a ring of all n, and registers the pull
// frontend and the route through every instance. conns is the connection
// pool of each instance's client.
func startSite(o options, pg *pgServer, dir string, n, conns int) (s *pgSite, err error) {
	s = &pgSite{}
	dsn, drop, err := pg.isolated("bench_site")
	if err != nil {
		return nil, err
	}
	s.drop = drop
	defer func() {
		if err != nil {
			_ = s.close()
			s = nil
		}
	}()
	for i := range n {
		cfg := nodeConfig(siteName, filepath.Join(dir, fmt.Sprintf("i%d", i)))
		cfg.InstanceID = fmt.Sprintf("%s-%d", siteName, i)
		cfg.Postgres = dsn
		cfg.InsecureSkipVerify = true // the slaves call the master, which serves a self-signed certificate
		cfg.RingReconnectBackoffMin = 50 * time.Millisecond
		cfg.RingReconnectBackoffMax = 200 * time.Millisecond
		b, err := startNodeConfig(cfg, conns)
		if err != nil {
			return s, fmt.Errorf("start %s: %w", cfg.InstanceID, err)
		}
		s.nodes = append(s.nodes, b)
		if i == 0 {
			// The first instance must hold the lock before the others
			// look for a master.
			if err := s.waitRing(1, 20*time.Second); err != nil {
				return s, err
			}
		}
	}
	if err := s.waitRing(n, 30*time.Second); err != nil {
		return s, err
	}
	for _, b := range s.nodes {
		if err := b.pullFrontend(); err != nil {
			return s, err
		}
		if err := b.route(); err != nil {
			return s, err
		}
	}
	return s, nil
}

// waitRing waits until the first want instances hold one epoch with want
// members and the master's coverage is whole.
func (s *pgSite) waitRing(want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := s.ringFormed(want)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the ring of %d instances did not form within %v: %w "+
				"(the master is elected by the advisory lock \"ring-master\", which is per database, not per schema: "+
				"another site on the same database may hold it)", want, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *pgSite) ringFormed(want int) error {
	var epoch uint64
	masters := 0
	for i, b := range s.nodes[:want] {
		var st messages.RingStatus
		if err := call(b.client, http.MethodGet, b.base+"/api/ring/status", nil, http.StatusOK, &st); err != nil {
			return err
		}
		switch {
		case len(st.Members) != want:
			return fmt.Errorf("%s sees %d members, want %d", st.InstanceID, len(st.Members), want)
		case i > 0 && st.Epoch != epoch:
			return fmt.Errorf("%s holds epoch %d, the first %d", st.InstanceID, st.Epoch, epoch)
		case st.Role == messages.RoleMaster && st.Coverage != 1:
			return fmt.Errorf("master %s: coverage %v", st.InstanceID, st.Coverage)
		}
		if st.Role == messages.RoleMaster {
			masters++
		}
		epoch = st.Epoch
	}
	if masters != 1 {
		return fmt.Errorf("%d masters among %d instances", masters, want)
	}
	return nil
}

// runPgSite: a site of n instances on Postgres; the clients are spread
// over the instances (client i submits to instance i mod n), and every
// instance has consumersPer pull consumers (each instance offers only the
// messages of its own ranges). The figure is the acks answered in the
// window, summed over the instances.
func runPgSite(o options, pg *pgServer, bodies [][]byte, dir string, n, consumersPer int, prof *profiler) (r runResult, err error) {
	perInstance := (len(bodies) + n - 1) / n
	s, err := startSite(o, pg, dir, n, perInstance+consumersPer)
	if err != nil {
		return r, err
	}
	defer func() {
		if cerr := s.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	var phase atomic.Int32
	var cons []*consumers
	var subs []*submitters
	for _, b := range s.nodes {
		cons = append(cons, startConsumers(b, consumersPer, &phase))
	}
	for i, b := range s.nodes {
		var mine [][]byte
		for j := i; j < len(bodies); j += n {
			mine = append(mine, bodies[j])
		}
		subs = append(subs, startSubmitters(b.client, b.base+"/api/messages", mine, &phase))
	}
	window, cpu, a, z := measureDB(pg, &phase, o, prof, s.nodes...)
	r.window, r.cpu = window, cpu
	var lat []time.Duration
	var perNode []string
	for i, sb := range subs {
		var one runResult
		sb.wait(&one)
		r.errors += one.errors
		if r.firstErr == "" {
			r.firstErr = one.firstErr
		}
		r.submits += one.submits
		for _, l := range sb.lat {
			lat = append(lat, l...)
		}
		cons[i].wg.Wait()
		r.count += cons[i].acked.Load()
		r.errors += cons[i].errs.Load()
		if r.firstErr == "" {
			r.firstErr = cons[i].firstErr
		}
		perNode = append(perNode, fmt.Sprintf("%d/%d", one.submits, cons[i].acked.Load()))
	}
	slices.Sort(lat)
	r.p50, r.p99 = quantile(lat, 0.50), quantile(lat, 0.99)
	r.rate = float64(r.count) / r.window.Seconds()
	st, err := s.nodes[0].fullStatus()
	if err != nil {
		return r, err
	}
	var loads []string
	for i, b := range s.nodes {
		loads = append(loads, fmt.Sprintf("instance %d: %s", i, b.actorLoad(r.window, 0)))
	}
	r.note = fmt.Sprintf("%d instance(s), %d consumers each; submitted %.0f msg/s in the window; submitted/acked per instance %s; %s; after the run %s (outbox %d); %s",
		n, consumersPer, float64(r.submits)/r.window.Seconds(), strings.Join(perNode, " "), serverNote(a, z, r.count, r.window),
		st.counts(), st.OutboxDepth, strings.Join(loads, "; "))
	if r.count == 0 {
		return r, fmt.Errorf("no ack completed in the window (%d failed; first: %s)", r.errors, r.firstErr)
	}
	return r, nil
}
