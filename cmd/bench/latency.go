package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/messages"
)

// The latency figure (docs/performance.md, goal 6): submissions sent at a fixed rate,
// open loop (each one when it is due, whether or not the ones before it
// were answered), so that the figure is the path's latency at a light load
// and not a queue the clients built themselves.

// latencyGoal is goal 6 of docs/performance.md: the path's p99 at most 3 times the
// durable echo's.
const latencyGoal = 3.0

// latencyDrain is how long after the window the bench waits for the last
// submissions of the window to be acked at B.
const latencyDrain = 30 * time.Second

// latResult is one latency run (of the path or of the echo).
type latResult struct {
	p50, p99, max time.Duration
	samples       int // submissions of the window that completed
	sent          int // submissions of the window
	lost          int // of them not completed within latencyDrain
	// lag is the largest delay between a submission's due time and its
	// start: the pacer's own lateness.
	lag      time.Duration
	window   time.Duration
	errors   int64
	firstErr string
	note     string
	took     time.Duration
}

func (r latResult) summary() string {
	s := fmt.Sprintf("p50=%v p99=%v max=%v over %d submissions in %v (%.0f msg/s, pacer at most %v late)",
		r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.max.Round(10*time.Microsecond),
		r.samples, r.window.Round(time.Millisecond), float64(r.sent)/r.window.Seconds(), r.lag.Round(10*time.Microsecond))
	if r.note != "" {
		s += ", " + r.note
	}
	s += fmt.Sprintf(", run took %v", r.took.Round(10*time.Millisecond))
	if r.lost > 0 {
		s += fmt.Sprintf(", %d of %d FAILED to complete within %v (the quantiles leave them out)", r.lost, r.sent, latencyDrain)
	}
	if r.errors > 0 {
		s += fmt.Sprintf(", %d FAILED requests (first: %s)", r.errors, r.firstErr)
	}
	return s
}

// failures counts a run's failed requests and keeps the first.
type failures struct {
	n     atomic.Int64
	mu    sync.Mutex
	first string
}

func (f *failures) add(err error) {
	if f.n.Add(1) == 1 {
		f.mu.Lock()
		f.first = err.Error()
		f.mu.Unlock()
	}
}

func (f *failures) into(r *latResult) {
	r.errors = f.n.Load()
	f.mu.Lock()
	r.firstErr = f.first
	f.mu.Unlock()
}

// openLoop calls send(n, measured) for n = 0, 1, ..., each in a goroutine
// of its own, at rate per second from now on for warmup+window; measured
// is true for those due in the window. It returns once every send has
// returned, with the window's real length and the pacer's largest lag.
// prof (if any) covers the window: from the first measured send until
// the last is due.
func openLoop(rate float64, warmup, window time.Duration, prof *profiler, send func(n int, measured bool)) (time.Duration, time.Duration) {
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	from, until := start.Add(warmup), start.Add(warmup+window)
	var wg sync.WaitGroup
	var lag time.Duration
	for n := 0; ; n++ {
		due := start.Add(time.Duration(n) * interval)
		if !due.Before(until) {
			break
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if l := time.Since(due); l > lag {
			lag = l
		}
		measured := !due.Before(from)
		if measured {
			prof.start()
		}
		wg.Add(1)
		go pprof.Do(context.Background(), pprof.Labels("bench", "client"), func(context.Context) {
			defer wg.Done()
			send(n, measured)
		})
	}
	prof.stop()
	wg.Wait()
	return until.Sub(from), lag
}

// quantiles sets the latency quantiles of a run from its samples.
func (r *latResult) quantiles(lat []time.Duration) {
	slices.Sort(lat)
	r.samples = len(lat)
	r.p50, r.p99 = quantile(lat, 0.50), quantile(lat, 0.99)
	if len(lat) > 0 {
		r.max = lat[len(lat)-1]
	}
}

// post submits a JSON body (POST /api/messages) and returns the answer's
// body.
func post(c *apiclient.Client, body []byte) ([]byte, error) {
	return c.Send(context.Background(), http.MethodPost, "/api/messages", nil, json.RawMessage(body), nil)
}

// echoSchema is the durable echo's one table: what a node's messages row
// needs to hold a submission.
const echoSchema = `CREATE TABLE IF NOT EXISTS echo (
	seq INTEGER PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	source_msisdn TEXT NOT NULL,
	destination_msisdn TEXT NOT NULL,
	body TEXT NOT NULL,
	received_at INTEGER NOT NULL
)`

// echoHandler is the durable echo: it decodes the submission as the
// baseline does, commits it as one row in a transaction of its own (the
// pool has one connection; synchronous=FULL syncs the WAL at the commit)
// and answers 202 once the commit returned.
func echoHandler(db *sql.DB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub, ok := decodeSubmission(w, r)
		if !ok {
			return
		}
		id := uuid.Must(uuid.NewV7()).String()
		tx, err := db.BeginTx(r.Context(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO echo (id, source_msisdn, destination_msisdn, body, received_at) VALUES (?, ?, ?, ?, ?)`,
			id, sub.SourceMSISDN, sub.DestinationMSISDN, sub.Body, time.Now().UnixMicro()); err != nil {
			_ = tx.Rollback()
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if err := tx.Commit(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(baselineAck{ID: id, State: "pending"})
	})
}

// runEcho measures the durable echo at the latency figure's rate: the
// latency of each submission from its start to the 202.
func runEcho(o options, certFile, keyFile, dir string) (r latResult, err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return r, err
	}
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(dir, "echo.db")))
	if err != nil {
		return r, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(echoSchema); err != nil {
		return r, fmt.Errorf("durable echo: %w", err)
	}
	addr, shutdown, err := serveHTTPS(echoHandler(db), certFile, keyFile)
	if err != nil {
		return r, err
	}
	client, err := newClient(addr, certFile, 8)
	if err != nil {
		_ = shutdown(nil)
		return r, err
	}
	var (
		mu   sync.Mutex
		lat  []time.Duration
		sent int
		fail failures
	)
	r.window, r.lag = openLoop(o.latencyRate, o.warmup, o.window, nil, func(n int, measured bool) {
		body := newBody(n, o.bodySize)
		t := time.Now()
		_, err := post(client, body)
		d := time.Since(t)
		if err != nil {
			fail.add(err)
		}
		if !measured {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		sent++
		if err == nil {
			lat = append(lat, d)
		}
	})
	r.sent = sent
	r.lost = sent - len(lat)
	r.quantiles(lat)
	fail.into(&r)
	var rows int64
	if err := db.QueryRow(`SELECT count(*) FROM echo`).Scan(&rows); err != nil {
		return r, err
	}
	r.note = fmt.Sprintf("%d rows committed", rows)
	if err := shutdown(client); err != nil {
		return r, err
	}
	if r.samples == 0 {
		return r, fmt.Errorf("durable echo: no submission answered (%d failed; first: %s)", r.errors, r.firstErr)
	}
	return r, nil
}

// runLatency: the federated pair; the clients submit to A at the figure's
// rate, one consumer long-polls B and acks every message delivered. A
// message's latency is from the start of its submission to the return of
// the 200 of the ack that carried it. Submissions are told apart by their
// destination number.
func runLatency(o options, dir string, prof *profiler) (r latResult, err error) {
	p, err := startPair(dir, 8, 1)
	if err != nil {
		return r, err
	}
	defer func() {
		if cerr := p.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	var (
		mu      sync.Mutex
		started = map[string]time.Time{} // destination -> submission start, window only
		done    = map[string]legs{}
		submits []time.Duration              // the 202s from A, window only
		answer  = map[string]time.Duration{} // destination -> its 202 from A, window only
		fail    failures
		stop    atomic.Bool
		polls   atomic.Int64
		acked   atomic.Int64
	)
	consumed := make(chan struct{})
	go pprof.Do(context.Background(), pprof.Labels("bench", "consumer"), func(context.Context) {
		defer close(consumed)
		pollPath := "/api/frontends/" + frontendName + "/poll"
		ackPath := "/api/frontends/" + frontendName + "/ack"
		for !stop.Load() {
			var polled struct {
				Messages []messages.Outgoing `json:"messages"`
			}
			if err := send(p.b.api, http.MethodPost, pollPath, pollBody, &polled); err != nil {
				if !stop.Load() {
					fail.add(fmt.Errorf("poll: %w", err))
					time.Sleep(10 * time.Millisecond)
				}
				continue
			}
			polledAt := time.Now()
			polls.Add(1)
			if len(polled.Messages) == 0 {
				continue
			}
			type result struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			}
			ack := struct {
				Results []result `json:"results"`
			}{Results: make([]result, len(polled.Messages))}
			for i, m := range polled.Messages {
				ack.Results[i] = result{ID: m.ID, Status: string(messages.Delivered)}
			}
			body, err := json.Marshal(ack)
			if err != nil {
				fail.add(err)
				continue
			}
			if err := send(p.b.api, http.MethodPost, ackPath, body, nil); err != nil {
				fail.add(fmt.Errorf("ack: %w", err))
				continue
			}
			at := time.Now()
			acked.Add(int64(len(polled.Messages)))
			mu.Lock()
			for _, m := range polled.Messages {
				if t, ok := started[m.DestinationMSISDN]; ok {
					if _, dup := done[m.DestinationMSISDN]; !dup {
						done[m.DestinationMSISDN] = legs{total: at.Sub(t), polled: polledAt.Sub(t), acked: at.Sub(polledAt)}
					}
				}
			}
			mu.Unlock()
		}
	})

	r.window, r.lag = openLoop(o.latencyRate, o.warmup, o.window, prof, func(n int, measured bool) {
		body := newBody(n, o.bodySize)
		t := time.Now()
		if measured {
			mu.Lock()
			started[destination(n)] = t
			mu.Unlock()
		}
		_, err := post(p.submit, body)
		d := time.Since(t)
		if err != nil {
			fail.add(fmt.Errorf("submit: %w", err))
		}
		if measured {
			mu.Lock()
			if err != nil {
				delete(started, destination(n))
			} else {
				submits = append(submits, d)
				answer[destination(n)] = d
			}
			mu.Unlock()
		}
	})
	// The window's last submissions are on their way: wait for their acks.
	deadline := time.Now().Add(latencyDrain)
	for {
		mu.Lock()
		complete := len(done) >= len(started)
		mu.Unlock()
		if complete || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	<-consumed

	mu.Lock()
	lat := make([]time.Duration, 0, len(done))
	all := make([]legs, 0, len(done))
	for dest, l := range done {
		lat = append(lat, l.total)
		l.submit = answer[dest]
		all = append(all, l)
	}
	r.sent, r.lost = len(started), len(started)-len(done)
	mu.Unlock()
	r.quantiles(lat)
	fail.into(&r)
	stA, err := p.a.fullStatus()
	if err != nil {
		return r, err
	}
	stB, err := p.b.fullStatus()
	if err != nil {
		return r, err
	}
	perPoll := 0.0
	if n := polls.Load(); n > 0 {
		perPoll = float64(acked.Load()) / float64(n)
	}
	slices.Sort(submits)
	r.note = fmt.Sprintf("of which the submit (202 from A) p50=%v p99=%v; %s; %.2f msgs per poll at B; after the run A: %s, B: %s",
		quantile(submits, 0.5).Round(10*time.Microsecond), quantile(submits, 0.99).Round(10*time.Microsecond), slowest(all), perPoll, stA.counts(), stB.counts())
	if r.samples == 0 {
		return r, fmt.Errorf("no submission of the window was acked at %s (%d failed; first: %s)", nodeB, r.errors, r.firstErr)
	}
	return r, nil
}

// legs is one message's way through the latency figure's path, each part
// from the client's side: from the submission's start to the 202 from A
// (submit), to the answer of B's poll that carried it (polled; it includes
// submit), and from that answer to the 200 of its ack (acked); total is
// polled + acked.
type legs struct {
	total, submit, polled, acked time.Duration
}

// slowest says where the slowest 1% of the messages spent their time against
// all of them: the median of each leg over each set (the submit; from the
// 202 to B's poll answering, i.e. A's forward, B's accept and the poll's
// wake; the ack), so that the next lever is aimed at the leg that grows.
func slowest(all []legs) string {
	if len(all) == 0 {
		return "no legs"
	}
	slices.SortFunc(all, func(a, b legs) int { return int(a.total - b.total) })
	slow := all[len(all)-max(1, len(all)/100):]
	med := func(set []legs, leg func(legs) time.Duration) time.Duration {
		ds := make([]time.Duration, len(set))
		for i, l := range set {
			ds[i] = leg(l)
		}
		slices.Sort(ds)
		return quantile(ds, 0.5).Round(10 * time.Microsecond)
	}
	parts := func(set []legs) string {
		return fmt.Sprintf("submit %v + on to B's poll %v + ack %v",
			med(set, func(l legs) time.Duration { return l.submit }),
			med(set, func(l legs) time.Duration { return l.polled - l.submit }),
			med(set, func(l legs) time.Duration { return l.acked }))
	}
	return fmt.Sprintf("legs (medians) of all %s, of the slowest %d %s", parts(all), len(slow), parts(slow))
}
