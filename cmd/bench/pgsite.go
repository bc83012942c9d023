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
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

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
		dsn, _, drop, err := s.schema(prefix)
		return dsn, drop, err
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
		dsn, _, drop, err := s.schema(prefix)
		return dsn, drop, err
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
// it, its name, and a function that drops it with everything in it.
func (s *pgServer) schema(prefix string) (dsn, name string, drop func() error, err error) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name = prefix + "_" + hex.EncodeToString(rnd[:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.base)
	if err != nil {
		return "", "", nil, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", nil, fmt.Errorf("create schema %s: %w", name, err)
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
			return "", "", nil, err
		}
		q := u.Query()
		q.Set("search_path", name)
		u.RawQuery = q.Encode()
		return u.String(), name, drop, nil
	}
	return s.base + " search_path=" + name, name, drop, nil
}

// dbStats are server-wide readings taken at the window's edges: the
// database's committed transactions (pg_stat_database, all its users:
// the whole server's: other work on it counts too) and the machine's CPU.
type dbStats struct {
	commits   int64
	busy, all int64 // /proc/stat jiffies, all CPUs
	// postgres is the jiffies of the processes named postgres (a server on
	// this machine: its backends, and in the postmaster's children's
	// times those that ended); 0 when there is none.
	postgres int64
}

// postgresJiffies sums the CPU time of the processes named postgres.
func postgresJiffies() int64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var sum int64
	for _, d := range dirs {
		data, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15) cutime(16) cstime(17)
		stat := string(data)
		open, close := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
		if open < 0 || close < open || stat[open+1:close] != "postgres" {
			continue
		}
		f := strings.Fields(stat[close+1:])
		if len(f) < 15 {
			continue
		}
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(v, 10, 64)
			sum += n
		}
	}
	return sum
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
	st.postgres = postgresJiffies()
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
	if b.postgres > a.postgres {
		pg := time.Duration(b.postgres-a.postgres) * time.Second / userHZ
		s += fmt.Sprintf(", Postgres CPU %.2f cores", pg.Seconds()/window.Seconds())
		if count > 0 {
			s += fmt.Sprintf(" = %.0fµs per message", float64(pg.Microseconds())/float64(count))
		}
	}
	if b.all > a.all {
		s += fmt.Sprintf(", machine CPU busy %.0f%% (Postgres, bench and nodes together)", 100*float64(b.busy-a.busy)/float64(b.all-a.all))
	}
	return s
}

// userHZ is the unit of the times in /proc (USER_HZ: 100 on Linux).
const userHZ = 100

// measureDB is measure plus the server readings at the window's edges.
func measureDB(pg *pgServer, phase *atomic.Int32, o options, prof *profiler, nodes ...*benchNode) (window, cpu time.Duration, a, b dbStats) {
	time.Sleep(o.warmup)
	a = pg.stats()
	o.warmup = 0
	window, cpu = measure(phase, o, prof, nodes...)
	b = pg.stats()
	return window, cpu, a, b
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
// pool of each instance's client; natsURL, when set, puts delivery on the
// bus there (postgres-site-nats).
func startSite(o options, pg *pgServer, dir string, n, conns int, natsURL string) (s *pgSite, err error) {
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
		cfg.NatsURL = natsURL
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
		if err := send(b.api, http.MethodGet, "/api/ring/status", nil, &st); err != nil {
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
// window, summed over the instances. With natsURL the site's delivery is on
// the bus there; the run also measures the first delivery after an idle
// period (r.idle).
func runPgSite(o options, pg *pgServer, bodies [][]byte, dir string, n, consumersPer int, natsURL string, prof *profiler) (r runResult, err error) {
	perInstance := (len(bodies) + n - 1) / n
	s, err := startSite(o, pg, dir, n, perInstance+consumersPer, natsURL)
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
		subs = append(subs, startSubmitters(b.api, mine, &phase))
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
		loads = append(loads, fmt.Sprintf("instance %d: %s", i, b.actorLoad(r.window)))
	}
	r.note = fmt.Sprintf("%d instance(s), %d consumers each; submitted %.0f msg/s in the window; submitted/acked per instance %s; %s; after the run %s (outbox %d)%s; %s",
		n, consumersPer, float64(r.submits)/r.window.Seconds(), strings.Join(perNode, " "), serverNote(a, z, r.count, r.window),
		st.counts(), st.OutboxDepth, busNote(natsURL, s.nodes), strings.Join(loads, "; "))
	if r.count == 0 {
		return r, fmt.Errorf("no ack completed in the window (%d failed; first: %s)", r.errors, r.firstErr)
	}
	if n > 1 {
		if r.idle, err = s.firstDelivery(idleSamples, idlePause); err != nil {
			return r, err
		}
	}
	return r, nil
}

// busNote tells what went through the bus in the whole run, all
// instances: published, and settled by action ("" without the bus).
func busNote(natsURL string, nodes []*benchNode) string {
	if natsURL == "" {
		return ""
	}
	var published float64
	settled := map[string]float64{}
	for _, b := range nodes {
		published += b.counters("switchboard_bus_published_total", "")[""]
		for action, v := range b.counters("switchboard_bus_settled_total", "action") {
			settled[action] += v
		}
	}
	return fmt.Sprintf("; the bus in the whole run: published %.0f, acked %.0f, naked %.0f, termed %.0f",
		published, settled["acked"], settled["naked"], settled["termed"])
}

// The first delivery after an idle period: idleSamples times, the site
// rests idlePause, a poll waits at one instance and a message is submitted
// at the next; the time from the submit to the poll's answer. The messages
// go to a frontend of their own (the load's backlog is not in the way).
const (
	idleSamples  = 7
	idlePause    = time.Second
	idleFrontend = "bench-idle"
	idlePrefix   = "47"
)

// firstDelivery is the median of those times.
func (s *pgSite) firstDelivery(samples int, pause time.Duration) (time.Duration, error) {
	b0 := s.nodes[0]
	if err := send(b0.api, http.MethodPut, "/api/frontends/"+idleFrontend, []byte(`{"mode":"pull"}`), nil); err != nil {
		return 0, err
	}
	if err := send(b0.api, http.MethodPut, "/api/routes/"+idlePrefix, []byte(`{"frontend":"`+idleFrontend+`"}`), nil); err != nil {
		return 0, err
	}
	// Every instance knows the frontend once the ring spread the change (a
	// poll of an unknown frontend is 404).
	for _, b := range s.nodes {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := send(b.api, http.MethodPost, "/api/frontends/"+idleFrontend+"/poll", []byte(`{"max":1,"wait_ms":0}`), nil)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return 0, err
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var got []time.Duration
	for i := range samples {
		time.Sleep(pause)
		poller, submitter := s.nodes[(i+1)%len(s.nodes)], s.nodes[i%len(s.nodes)]
		var p struct {
			Messages []struct {
				ID string `json:"id"`
			} `json:"messages"`
		}
		answer := make(chan error, 1)
		var at time.Time
		go func() {
			err := send(poller.api, http.MethodPost, "/api/frontends/"+idleFrontend+"/poll",
				[]byte(`{"max":1,"wait_ms":5000,"lease_ms":30000}`), &p)
			at = time.Now()
			answer <- err
		}()
		time.Sleep(100 * time.Millisecond) // the poll is waiting
		body := fmt.Sprintf(`{"id":"idle-%d-%d","source_msisdn":"15550001","destination_msisdn":"%s%09d","message_body":"idle"}`,
			time.Now().UnixNano(), i, idlePrefix, i)
		t0 := time.Now()
		if err := send(submitter.api, http.MethodPost, "/api/messages", []byte(body), nil); err != nil {
			return 0, fmt.Errorf("first delivery: %w", err)
		}
		if err := <-answer; err != nil {
			return 0, fmt.Errorf("first delivery: %w", err)
		}
		if len(p.Messages) != 1 {
			return 0, fmt.Errorf("first delivery: the poll answered %d messages within 5s", len(p.Messages))
		}
		got = append(got, at.Sub(t0))
		ack := fmt.Sprintf(`{"results":[{"id":%q,"status":"delivered"}]}`, p.Messages[0].ID)
		if err := send(poller.api, http.MethodPost, "/api/frontends/"+idleFrontend+"/ack", []byte(ack), nil); err != nil {
			return 0, fmt.Errorf("first delivery: %w", err)
		}
	}
	slices.Sort(got)
	return quantile(got, 0.5), nil
}

// runPgSiteNATS is runPgSite with the delivery bus: a JetStream server in
// this process, its store under dir (postgres-site-nats).
func runPgSiteNATS(o options, pg *pgServer, bodies [][]byte, dir string, prof *profiler) (runResult, error) {
	url, stop, err := startNATS(filepath.Join(dir, "nats"))
	if err != nil {
		return runResult{}, err
	}
	defer stop()
	return runPgSite(o, pg, bodies, dir, siteInstances, o.consumers, url, prof)
}

// idleList lists the runs' first deliveries after an idle period.
func idleList(rs []runResult) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.idle.Round(100*time.Microsecond).String())
	}
	return strings.Join(out, ", ")
}
