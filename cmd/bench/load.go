package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
)

// Phases of a run: clients count completions only while measuring.
const (
	warmingUp int32 = iota
	measuring
	over
)

// The pull frontend the submissions are routed to.
const (
	frontendName = "bench"
	routePrefix  = "46"
)

// runResult is one run of one subject (or of the baseline).
type runResult struct {
	rate     float64       // completions per second over the window
	count    int64         // completions in the window
	window   time.Duration // measured length of the window
	submits  int64         // submits answered 202 in the window
	p50, p99 time.Duration // submit latency in the window
	errors   int64         // failed requests (whole run, warm-up included)
	firstErr string
	note     string
	cpu      time.Duration // process CPU time (clients included) in the window
	took     time.Duration // the whole run: start, warm-up, window, stop
	// goroutines is the process's goroutine count after the run: it should
	// not grow from run to run.
	goroutines int
	// idle is the first delivery after an idle period (postgres-site runs).
	idle time.Duration
}

func (r runResult) summary(unit string) string {
	s := fmt.Sprintf("%.0f %s (%d in %v)", r.rate, unit, r.count, r.window.Round(time.Millisecond))
	if r.p99 > 0 {
		s += fmt.Sprintf(", submit p50=%v p99=%v", r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond))
	}
	s += fmt.Sprintf(", process CPU %.2f cores", r.cpu.Seconds()/r.window.Seconds())
	if r.count > 0 {
		s += fmt.Sprintf(" = %.0fµs per %s", float64(r.cpu.Microseconds())/float64(r.count), perUnit(unit))
	}
	if r.note != "" {
		s += ", " + r.note
	}
	s += fmt.Sprintf(", run took %v, %d goroutines after", r.took.Round(10*time.Millisecond), r.goroutines)
	if r.errors > 0 {
		s += fmt.Sprintf(", %d FAILED requests (first: %s)", r.errors, r.firstErr)
	}
	return s
}

// perUnit is what one of unit is ("jobs/s" -> "job").
func perUnit(unit string) string {
	u := strings.TrimSuffix(unit, "/s")
	if u == "jobs" {
		return "job"
	}
	return u
}

// newBodies returns one submission per client, each exactly size bytes of
// JSON: a destination routed to the pull frontend, and a padded body.
func newBodies(clients, size int) [][]byte {
	out := make([][]byte, clients)
	for i := range out {
		out[i] = newBody(i, size)
	}
	return out
}

// newBody is submission number n: its destination (under the bench
// route's prefix) tells it apart; it is exactly size bytes of JSON.
func newBody(n, size int) []byte {
	head := fmt.Sprintf(`{"source_msisdn":"15550001","destination_msisdn":"%s","message_body":"`, destination(n))
	const tail = `"}`
	pad := size - len(head) - len(tail)
	return []byte(head + benchText(pad) + tail)
}

// benchText is the text of the bench's messages, n characters of the GSM
// 7-bit alphabet.
func benchText(n int) string {
	return strings.Repeat("Switchboard bench message, padded to a typical submission size. ", n/64+1)[:n]
}

// destination is the destination number of submission n.
func destination(n int) string { return fmt.Sprintf("%s7%09d", routePrefix, n) }

// newClient is an API client of the server at addr over the one transport
// all clients of a run share: HTTP/1.1 keep-alive over TLS, trusting
// certFile for the name localhost.
func newClient(addr, certFile string, conns int) (*apiclient.Client, error) {
	trust, err := apiclient.TrustFile(certFile, "localhost")
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     trust,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: max(conns, 64),
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	return apiclient.NewURL("https://"+addr, apiclient.Config{HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}})
}

// send is one call of the bench: body is the request's JSON as is (nil:
// none), the answer must be 2xx and is decoded into out unless it is nil.
func send(c *apiclient.Client, method, path string, body []byte, out any) error {
	_, err := c.Send(context.Background(), method, path, nil, rawBody(body), out)
	return err
}

// rawBody is body as a request body sent as is (nil: none).
func rawBody(body []byte) any {
	if body == nil {
		return nil
	}
	return json.RawMessage(body)
}

// submitters are the clients: each POSTs its submission, waits for the 202
// and goes again, until the phase is over.
type submitters struct {
	client *apiclient.Client
	bodies [][]byte
	phase  *atomic.Int32
	wg     sync.WaitGroup
	lat    [][]time.Duration // per client, window only

	errs     atomic.Int64
	mu       sync.Mutex
	firstErr string
}

func startSubmitters(c *apiclient.Client, bodies [][]byte, phase *atomic.Int32) *submitters {
	s := &submitters{client: c, bodies: bodies, phase: phase, lat: make([][]time.Duration, len(bodies))}
	for i := range bodies {
		s.wg.Add(1)
		go pprof.Do(context.Background(), pprof.Labels("bench", "client"), func(context.Context) {
			defer s.wg.Done()
			s.loop(i)
		})
	}
	return s
}

func (s *submitters) loop(i int) {
	body := s.bodies[i]
	lat := make([]time.Duration, 0, 4096)
	for s.phase.Load() != over {
		t := time.Now()
		err := s.post(body)
		d := time.Since(t)
		if err != nil {
			s.fail(err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if s.phase.Load() == measuring {
			lat = append(lat, d)
		}
	}
	s.lat[i] = lat
}

var idField = []byte(`"id":"`)

func (s *submitters) post(body []byte) error {
	data, err := post(s.client, body)
	if err != nil {
		return err
	}
	if !bytes.Contains(data, idField) {
		return fmt.Errorf("202 without an id: %s", data)
	}
	return nil
}

func (s *submitters) fail(err error) {
	s.errs.Add(1)
	s.mu.Lock()
	if s.firstErr == "" {
		s.firstErr = err.Error()
	}
	s.mu.Unlock()
}

// wait waits for the clients to stop and fills in the submit figures.
func (s *submitters) wait(r *runResult) {
	s.wg.Wait()
	var all []time.Duration
	for _, l := range s.lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	r.submits = int64(len(all))
	r.p50, r.p99 = quantile(all, 0.50), quantile(all, 0.99)
	r.errors += s.errs.Load()
	if r.firstErr == "" {
		r.firstErr = s.firstErr
	}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)))
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// measure runs the warm-up and the window; the profiler (if any) and the
// node's actor metrics (if any) cover the window.
func measure(phase *atomic.Int32, o options, prof *profiler, nodes ...*benchNode) (window, cpu time.Duration) {
	return measureWith(phase, o, prof, nil, nodes...)
}

// measureWith is measure that also calls at(0) as the window opens and
// at(1) as it closes (at may be nil).
func measureWith(phase *atomic.Int32, o options, prof *profiler, at func(int), nodes ...*benchNode) (window, cpu time.Duration) {
	time.Sleep(o.warmup)
	prof.start()
	for _, b := range nodes {
		b.snapshot()
	}
	if at != nil {
		at(0)
	}
	c0 := processCPU()
	t0 := time.Now()
	phase.Store(measuring)
	time.Sleep(o.window)
	phase.Store(over)
	window = time.Since(t0)
	cpu = processCPU() - c0
	if at != nil {
		at(1)
	}
	for _, b := range nodes {
		b.snapshot()
	}
	prof.stop()
	return window, cpu
}

// baselineAck is the baseline server's small JSON answer.
type baselineAck struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// decodeSubmission reads a POST /api/messages body into a submission, as
// every baseline handler does; when it cannot, it answers the request and
// returns false.
func decodeSubmission(w http.ResponseWriter, r *http.Request) (messages.Submission, bool) {
	var sub messages.Submission
	if r.Method != http.MethodPost || r.URL.Path != "/api/messages" {
		http.NotFound(w, r)
		return sub, false
	}
	if err := json.NewDecoder(r.Body).Decode(&sub); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return sub, false
	}
	if sub.DestinationMSISDN == "" || sub.Body == "" {
		http.Error(w, "incomplete submission", http.StatusBadRequest)
		return sub, false
	}
	return sub, true
}

// baselineHandler decodes the submission into a struct and answers 202.
func baselineHandler() http.Handler {
	var seq atomic.Uint64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := decodeSubmission(w, r); !ok {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(baselineAck{ID: strconv.FormatUint(seq.Add(1), 10), State: "pending"})
	})
}

// serveHTTPS serves h over TLS (the baseline certificate, HTTP/1.1 only,
// as a node serves) on a free loopback port. shutdown closes the client
// side first, then the server.
func serveHTTPS(h http.Handler, certFile, keyFile string) (addr string, shutdown func(client *apiclient.Client) error, err error) {
	tc, err := certs.ServerConfig(certFile, keyFile, "")
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tc,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(tls.NewListener(ln, tc)) }()
	shutdown = func(client *apiclient.Client) error {
		// Close the client side first: the server's Shutdown waits up to
		// 5s for connections that never carried a request (spare dials).
		if client != nil {
			client.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	return ln.Addr().String(), shutdown, nil
}

// runBaseline drives a plain net/http HTTPS server with the same clients.
func runBaseline(o options, bodies [][]byte, certFile, keyFile string) (runResult, error) {
	addr, shutdown, err := serveHTTPS(baselineHandler(), certFile, keyFile)
	if err != nil {
		return runResult{}, err
	}
	client, err := newClient(addr, certFile, len(bodies))
	if err != nil {
		_ = shutdown(nil)
		return runResult{}, err
	}
	defer client.Close()

	var phase atomic.Int32
	subs := startSubmitters(client, bodies, &phase)
	var r runResult
	r.window, r.cpu = measure(&phase, o, nil)
	subs.wait(&r)
	r.count = r.submits
	r.rate = float64(r.count) / r.window.Seconds()
	if err := shutdown(client); err != nil {
		return r, err
	}
	if r.count == 0 {
		return r, fmt.Errorf("no request completed in the window (%d failed; first: %s)", r.errors, r.firstErr)
	}
	return r, nil
}

// benchNode is a node started through the embedding API with its own
// self-signed certificate, a client that trusts it, and a pull frontend
// that the submissions are routed to.
type benchNode struct {
	node *switchboard.Node
	api  *apiclient.Client
	// snaps are the actor metrics at the window's start and end.
	snaps []map[string]actorStat
}

// actorStat is the node's switchboard_actor_receive_seconds of one actor
// kind: messages handled and seconds spent handling them.
type actorStat struct {
	n   uint64
	sec float64
}

// snapshot reads the actor metrics from the node's registry.
func (b *benchNode) snapshot() {
	if b == nil {
		return
	}
	snap := map[string]actorStat{}
	mfs, err := b.node.Registry().Gather()
	if err != nil {
		b.snaps = append(b.snaps, snap)
		return
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchboard_actor_receive_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			kind := "?"
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					kind = l.GetValue()
				}
			}
			h := m.GetHistogram()
			snap[kind] = actorStat{n: h.GetSampleCount(), sec: h.GetSampleSum()}
		}
	}
	b.snaps = append(b.snaps, snap)
}

// actorLoad describes, per actor kind, how busy it was in the window: an
// actor handles one message at a time, so near 100% it is the bottleneck.
// (The intake's commits run off its goroutine, so its busy share is only
// the queueing and routing; its message count is the submits plus its own
// flush and commit-done messages, which do not tell the commits apart.)
func (b *benchNode) actorLoad(window time.Duration) string {
	if len(b.snaps) != 2 {
		return ""
	}
	var kinds []string
	for k := range b.snaps[1] {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var parts []string
	for _, k := range kinds {
		d := actorStat{n: b.snaps[1][k].n - b.snaps[0][k].n, sec: b.snaps[1][k].sec - b.snaps[0][k].sec}
		if d.n == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s busy %.0f%% (%d msgs)", k, 100*d.sec/window.Seconds(), d.n))
	}
	return strings.Join(parts, ", ")
}

// nodeConfig is the configuration of a bench node named name: embedded
// store in dir, HTTPS on a free loopback port, no metrics listener, errors
// only in the log.
func nodeConfig(name, dir string) switchboard.Config {
	cfg := switchboard.DefaultConfig()
	cfg.Name = name
	cfg.InstanceID = name + "-0"
	cfg.DataDir = dir
	cfg.Listen = "127.0.0.1:0"
	cfg.MetricsListen = ""
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	return cfg
}

// startNodeConfig starts a node and a client of conns connections that
// trusts its self-signed certificate.
func startNodeConfig(cfg switchboard.Config, conns int) (*benchNode, error) {
	n, err := switchboard.New(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	b := &benchNode{node: n}
	if b.api, err = newClient(n.Addr(), filepath.Join(cfg.DataDir, certs.SelfSignedCertName), conns); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

// counters sums the node's counters of that name by the value of the
// label by ("" sums them all under "").
func (b *benchNode) counters(name, by string) map[string]float64 {
	out := map[string]float64{}
	mfs, err := b.node.Registry().Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				if by != "" && l.GetName() == by {
					key = l.GetValue()
				}
			}
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out
}

// pullFrontend registers the bench pull frontend.
func (b *benchNode) pullFrontend() error {
	return send(b.api, http.MethodPut, "/api/frontends/"+frontendName, []byte(`{"mode":"pull"}`), nil)
}

// route routes the bench prefix to the bench frontend (local or, once the
// node knows which peer serves it, remote).
func (b *benchNode) route() error {
	return send(b.api, http.MethodPut, "/api/routes/"+routePrefix, []byte(`{"frontend":"`+frontendName+`"}`), nil)
}

func startNode(dir string, conns int) (*benchNode, error) {
	b, err := startNodeConfig(nodeConfig("bench", dir), conns)
	if err != nil {
		return nil, err
	}
	if err := b.pullFrontend(); err != nil {
		b.stop()
		return nil, err
	}
	if err := b.route(); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

func (b *benchNode) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if b.api != nil {
		b.api.Close()
	}
	return b.node.Stop(ctx)
}

// status reads the node's message counts and outbox depth.
func (b *benchNode) status() (counts map[string]int64, outbox int64, err error) {
	var doc struct {
		Counts      map[string]int64 `json:"counts"`
		OutboxDepth int64            `json:"outbox_depth"`
	}
	err = send(b.api, http.MethodGet, "/api/status", nil, &doc)
	return doc.Counts, doc.OutboxDepth, err
}

// startNodeAndClient starts a fresh node allowing conns connections and a
// client of clientConns keep-alive connections that trusts its certificate.
func startNodeAndClient(dir string, conns, clientConns int) (*benchNode, *apiclient.Client, error) {
	b, err := startNode(dir, conns)
	if err != nil {
		return nil, nil, err
	}
	client, err := newClient(b.node.Addr(), filepath.Join(dir, certs.SelfSignedCertName), clientConns)
	if err != nil {
		_ = b.stop()
		return nil, nil, err
	}
	return b, client, nil
}

// close closes the client's connections and stops the node.
func (b *benchNode) close(client *apiclient.Client) error {
	client.Close()
	if err := b.stop(); err != nil {
		return fmt.Errorf("stop node: %w", err)
	}
	return nil
}

// runIngest: the clients submit to a fresh node; nobody consumes.
func runIngest(o options, bodies [][]byte, dir string, prof *profiler) (r runResult, err error) {
	b, client, err := startNodeAndClient(dir, len(bodies), len(bodies))
	if err != nil {
		return r, err
	}
	defer func() {
		if serr := b.close(client); serr != nil && err == nil {
			err = serr
		}
	}()

	submitWindow(b, client, o, bodies, prof, nil, &r)
	counts, _, err := b.status()
	if err != nil {
		return r, err
	}
	r.note = fmt.Sprintf("%d pending in the store after the run; %s", counts[string(messages.StatePending)], b.actorLoad(r.window))
	if r.count == 0 {
		return r, fmt.Errorf("no submit completed in the window (%d failed; first: %s)", r.errors, r.firstErr)
	}
	return r, nil
}

// submitWindow runs the submitters against b through the measured window
// (at as measureWith's) and sets r's window, CPU, count and rate.
func submitWindow(b *benchNode, client *apiclient.Client, o options, bodies [][]byte, prof *profiler, at func(int), r *runResult) {
	var phase atomic.Int32
	subs := startSubmitters(client, bodies, &phase)
	r.window, r.cpu = measureWith(&phase, o, prof, at, b)
	subs.wait(r)
	r.count = r.submits
	r.rate = float64(r.count) / r.window.Seconds()
}

// consumers poll the pull frontend and ack every message as delivered.
type consumers struct {
	phase    *atomic.Int32
	wg       sync.WaitGroup
	acked    atomic.Int64 // applied acks answered in the window
	polls    atomic.Int64 // polls answered in the window
	errs     atomic.Int64
	mu       sync.Mutex
	firstErr string
}

var pollBody = []byte(`{"max":100,"wait_ms":1000,"lease_ms":30000}`)

func startConsumers(b *benchNode, n int, phase *atomic.Int32) *consumers {
	c := &consumers{phase: phase}
	for range n {
		c.wg.Add(1)
		go pprof.Do(context.Background(), pprof.Labels("bench", "consumer"), func(context.Context) {
			defer c.wg.Done()
			c.loop(b)
		})
	}
	return c
}

func (c *consumers) loop(b *benchNode) {
	pollPath := "/api/frontends/" + frontendName + "/poll"
	ackPath := "/api/frontends/" + frontendName + "/ack"
	type result struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	for c.phase.Load() != over {
		var polled struct {
			Messages []struct {
				ID string `json:"id"`
			} `json:"messages"`
		}
		if err := send(b.api, http.MethodPost, pollPath, pollBody, &polled); err != nil {
			c.fail(err)
			continue
		}
		if c.phase.Load() == measuring {
			c.polls.Add(1)
		}
		if len(polled.Messages) == 0 {
			continue
		}
		ack := struct {
			Results []result `json:"results"`
		}{Results: make([]result, len(polled.Messages))}
		for i, m := range polled.Messages {
			ack.Results[i] = result{ID: m.ID, Status: string(messages.Delivered)}
		}
		body, err := json.Marshal(ack)
		if err != nil {
			c.fail(err)
			continue
		}
		var acked struct {
			Results []messages.AckOutcome `json:"results"`
		}
		if err := send(b.api, http.MethodPost, ackPath, body, &acked); err != nil {
			c.fail(err)
			continue
		}
		applied := 0
		for _, o := range acked.Results {
			if o.Outcome == "applied" {
				applied++
			}
		}
		if applied != len(polled.Messages) {
			c.fail(fmt.Errorf("acked %d messages, %d applied", len(polled.Messages), applied))
		}
		if c.phase.Load() == measuring {
			c.acked.Add(int64(applied))
		}
	}
}

func (c *consumers) fail(err error) {
	if c.phase.Load() == over {
		return // the run is ending; the node may be going away
	}
	c.errs.Add(1)
	c.mu.Lock()
	if c.firstErr == "" {
		c.firstErr = err.Error()
	}
	c.mu.Unlock()
	time.Sleep(10 * time.Millisecond)
}

// runDelivery: the clients submit to a fresh node while the consumers poll
// and ack; the figure is the acks answered in the window.
func runDelivery(o options, bodies [][]byte, dir string, prof *profiler) (r runResult, err error) {
	b, client, err := startNodeAndClient(dir, len(bodies)+o.consumers, len(bodies))
	if err != nil {
		return r, err
	}
	defer func() {
		if serr := b.close(client); serr != nil && err == nil {
			err = serr
		}
	}()

	var phase atomic.Int32
	cons := startConsumers(b, o.consumers, &phase)
	subs := startSubmitters(client, bodies, &phase)
	r.window, r.cpu = measure(&phase, o, prof, b)
	subs.wait(&r)
	cons.wg.Wait()
	r.count = cons.acked.Load()
	r.rate = float64(r.count) / r.window.Seconds()
	r.errors += cons.errs.Load()
	if r.firstErr == "" {
		r.firstErr = cons.firstErr
	}
	counts, outbox, err := b.status()
	if err != nil {
		return r, err
	}
	polls := cons.polls.Load()
	perPoll := 0.0
	if polls > 0 {
		perPoll = float64(r.count) / float64(polls)
	}
	r.note = fmt.Sprintf("submitted %.0f msg/s in the window, %.1f msgs per poll, after the run %d delivered and %d still in the outbox; %s",
		float64(r.submits)/r.window.Seconds(), perPoll, counts[string(messages.StateDelivered)], outbox, b.actorLoad(r.window))
	if r.count == 0 {
		return r, fmt.Errorf("no ack completed in the window (%d failed; first: %s)", r.errors, r.firstErr)
	}
	return r, nil
}
