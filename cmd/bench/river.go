package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // database/sql driver "sqlite": River's SQLite figure
)

// River, the Go job queue, is the yardstick of two figures: the baseline of
// postgres-site (River on Postgres, docs/performance.md, goal 4) and river-sqlite (River
// on SQLite against our delivery figure). Both run the same way as River's
// own `river bench` in its continuous mode: jobs are inserted with
// InsertMany while a client works them, the worker does nothing, and the
// figure is the jobs the client reports completed (its completer has
// committed them) per second over the window.

// submissionArgs are a River job's args: the bench's submission JSON, byte
// for byte, so that a job carries what a message does.
type submissionArgs struct{ raw json.RawMessage }

// Kind implements river.JobArgs.
func (submissionArgs) Kind() string { return "bench_submission" }

// MarshalJSON writes the submission as it is.
func (a submissionArgs) MarshalJSON() ([]byte, error) { return a.raw, nil }

// UnmarshalJSON keeps the submission River hands the worker.
func (a *submissionArgs) UnmarshalJSON(b []byte) error {
	a.raw = append(a.raw[:0], b...)
	return nil
}

// completeWorker does nothing: a job worked is a job completed.
type completeWorker struct {
	river.WorkerDefaults[submissionArgs]
}

// Work implements river.Worker.
func (completeWorker) Work(context.Context, *river.Job[submissionArgs]) error { return nil }

// riverSettings are the knobs of one River run.
type riverSettings struct {
	// schema is River's schema ("" for SQLite, whose database is its own).
	schema string
	// workers is the default queue's MaxWorkers.
	workers int
	// insertBatch is the size of one InsertMany.
	insertBatch int
	// backlog: the inserter pauses while this many jobs are inserted but not
	// completed, so the queue never runs dry nor grows without bound.
	backlog int
	// fetchCooldown and fetchPoll are River's FetchCooldown and
	// FetchPollInterval.
	fetchCooldown, fetchPoll time.Duration
	// measure runs the warm-up and the window (measure, or measureDB to
	// read the Postgres server's counters too); note describes the window
	// once its completions are counted.
	measure func(phase *atomic.Int32) (window, cpu time.Duration, note func(count int64) string)
}

// River on Postgres: the settings of River's `river bench` (fetch cooldown
// 2 ms, poll 20 ms: fetches follow the inserts closely; 2,000 workers: a
// fetch takes at most as many jobs as there are free workers, and 200 gave
// half the rate here), batches of 1,000 jobs per InsertMany (5,000 was no
// faster), kept at most 20,000 ahead of the completions. riverPGConns is
// the pool size: River's producer, completer, leader and the inserter each
// want a connection while the others hold theirs (4 to 20 made no
// difference beyond the noise).
const (
	riverPGWorkers = 2000
	riverPGBatch   = 1000
	riverPGBacklog = 20000
	riverPGConns   = 10
)

// River on SQLite: one connection, as riversqlite advises (SQLite has one
// writer; more connections only collide on SQLITE_BUSY). The inserter, the
// producer's fetches and the completer share that connection, and this
// driver inserts and completes one row per statement, so an InsertMany
// holds it for the whole batch, and a fetch takes as many jobs as there are
// free workers, which then complete together: batches of 100 at most 2,000
// ahead, 100 workers. Without -race, 100 to 1,000 workers and batches of
// 100 to 1,000 gave the same rate within this machine's noise (~1.2-2k
// jobs/s); under -race (the tests), 500 workers completed in bursts
// seconds apart and a short window could count none.
const (
	riverSQLiteWorkers = 100
	riverSQLiteBatch   = 100
	riverSQLiteBacklog = 2000
)

const (
	riverFetchCooldown = 2 * time.Millisecond
	riverFetchPoll     = 20 * time.Millisecond
)

// quietLogger logs errors only, to stderr: River's info lines (client
// started, leader elected) are not the bench's output.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// runRiverPostgres measures River on the Postgres server, in a fresh schema
// of its own (migrated by rivermigrate, dropped afterwards).
func runRiverPostgres(o options, pg *pgServer, bodies [][]byte) (r runResult, err error) {
	dsn, schema, drop, err := pg.schema("bench_river")
	if err != nil {
		return r, err
	}
	defer func() {
		if derr := drop(); derr != nil && err == nil {
			err = derr
		}
	}()
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return r, err
	}
	pcfg.MaxConns = riverPGConns
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		return r, err
	}
	defer pool.Close()
	return runRiver(o, riverpgxv5.New(pool), bodies, riverSettings{
		schema: schema, workers: riverPGWorkers, insertBatch: riverPGBatch, backlog: riverPGBacklog,
		fetchCooldown: riverFetchCooldown, fetchPoll: riverFetchPoll,
		measure: func(phase *atomic.Int32) (time.Duration, time.Duration, func(int64) string) {
			window, cpu, a, b := measureDB(pg, phase, o, nil)
			return window, cpu, func(n int64) string { return serverNote(a, b, n, window) }
		},
	})
}

// sqliteDSN is the modernc DSN of a database/sql pool on path: WAL and
// synchronous=FULL (a commit is durable when it returns), the durability
// of the node's embedded store, which syncs its WAL itself.
func sqliteDSN(path string) string {
	return path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
}

// runRiverSQLite measures River on SQLite (modernc.org/sqlite through
// database/sql) in a fresh database file under dir.
func runRiverSQLite(o options, bodies [][]byte, dir string) (r runResult, err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return r, err
	}
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(dir, "river.db")))
	if err != nil {
		return r, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		return r, err
	}
	return runRiver(o, riversqlite.New(db), bodies, riverSettings{
		workers: riverSQLiteWorkers, insertBatch: riverSQLiteBatch, backlog: riverSQLiteBacklog,
		fetchCooldown: riverFetchCooldown, fetchPoll: riverFetchPoll,
		measure: func(phase *atomic.Int32) (time.Duration, time.Duration, func(int64) string) {
			window, cpu := measure(phase, o, nil)
			return window, cpu, nil
		},
	})
}

// runRiver migrates River's schema, starts a client working the default
// queue, inserts jobs continuously and counts the completions of the
// window.
func runRiver[TTx any](o options, driver riverdriver.Driver[TTx], bodies [][]byte, s riverSettings) (r runResult, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := quietLogger()

	t := time.Now()
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: s.schema, Logger: log})
	if err != nil {
		return r, fmt.Errorf("river migrations: %w", err)
	}
	mres, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return r, fmt.Errorf("river migrations: %w", err)
	}
	migrated := time.Since(t)

	workers := river.NewWorkers()
	river.AddWorker(workers, &completeWorker{})
	client, err := river.NewClient(driver, &river.Config{
		Logger:            log,
		Schema:            s.schema,
		FetchCooldown:     s.fetchCooldown,
		FetchPollInterval: s.fetchPoll,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.workers}},
		Workers:           workers,
	})
	if err != nil {
		return r, fmt.Errorf("river client: %w", err)
	}
	// Completions are counted from the client's events, which follow the
	// completer's commit (the worker's return is not yet a completion).
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 100000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer unsubscribe()

	var (
		phase               atomic.Int32
		inserted, finished  atomic.Int64 // whole run
		completed           atomic.Int64 // in the window
		errs                atomic.Int64
		mu                  sync.Mutex
		firstErr            string
		wg                  sync.WaitGroup
		insertTime, batches atomic.Int64
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
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					return
				}
				if ev.Kind != river.EventKindJobCompleted {
					fail(fmt.Errorf("job %d: event %s", ev.Job.ID, ev.Kind))
					continue
				}
				finished.Add(1)
				if phase.Load() == measuring {
					completed.Add(1)
				}
			case <-ctx.Done():
				return
			}
		}
	}()

	params := make([]river.InsertManyParams, s.insertBatch)
	for i := range params {
		params[i].Args = submissionArgs{raw: bodies[i%len(bodies)]}
	}
	insert := func() error {
		t := time.Now()
		if _, err := client.InsertMany(ctx, params); err != nil {
			return err
		}
		insertTime.Add(int64(time.Since(t)))
		batches.Add(1)
		inserted.Add(int64(len(params)))
		return nil
	}
	// A first backlog before the client starts, as river bench does: the
	// warm-up then measures working, not an empty queue.
	for inserted.Load() < int64(s.backlog) {
		if err := insert(); err != nil {
			return r, fmt.Errorf("river insert: %w", err)
		}
	}
	if err := client.Start(ctx); err != nil {
		return r, fmt.Errorf("river start: %w", err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		return client.Stop(sctx)
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = fmt.Errorf("river stop: %w", serr)
		}
	}()
	var iwg sync.WaitGroup
	iwg.Add(1)
	go func() {
		defer iwg.Done()
		for ctx.Err() == nil && phase.Load() != over {
			if inserted.Load()-finished.Load() >= int64(s.backlog) {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			if err := insert(); err != nil {
				fail(fmt.Errorf("insert: %w", err))
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()

	// The warm-up starts once the client works: its start (leader
	// election, the producer's first fetch) is not the queue's rate.
	working := time.Now()
	for finished.Load() == 0 {
		if time.Since(working) > time.Minute {
			phase.Store(over)
			iwg.Wait()
			mu.Lock()
			defer mu.Unlock()
			return r, fmt.Errorf("River completed no job within a minute of its start (%d errors; first: %s)", errs.Load(), firstErr)
		}
		time.Sleep(time.Millisecond)
	}
	startup := time.Since(working)
	var note func(int64) string
	r.window, r.cpu, note = s.measure(&phase)
	r.count = completed.Load()
	r.rate = float64(r.count) / r.window.Seconds()
	iwg.Wait()
	serr := stop()
	cancel()
	wg.Wait()
	mu.Lock()
	r.errors, r.firstErr = errs.Load(), firstErr
	mu.Unlock()
	perBatch := time.Duration(0)
	if n := batches.Load(); n > 0 {
		perBatch = time.Duration(insertTime.Load() / n)
	}
	r.note = fmt.Sprintf("River %s driver, %d migrations in %v, first completion %v after the client's start, %d workers, InsertMany of %d (%v each), backlog <= %d; %d inserted, %d completed in the whole run",
		driver.DatabaseName(), len(mres.Versions), migrated.Round(time.Millisecond), startup.Round(time.Millisecond), s.workers, s.insertBatch, perBatch.Round(10*time.Microsecond),
		s.backlog, inserted.Load(), finished.Load())
	if note != nil {
		r.note += "; " + note(r.count)
	}
	if serr != nil {
		return r, fmt.Errorf("river stop: %w", serr)
	}
	if r.count == 0 {
		return r, fmt.Errorf("no job completed in the window (%d errors; first: %s)", r.errors, r.firstErr)
	}
	return r, nil
}
