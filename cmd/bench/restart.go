package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest/freeport"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// The restart figure (docs/performance.md, goal 5): how long the real binary takes to
// recover from kill -9 holding many queued messages, against the same with
// few. The queue is loaded straight into the embedded store (the API would
// take minutes for 1M), then the binary runs, is killed, and runs again.

// restartName is the --name (and --instance-id) of the restart node.
const restartName = "bench-restart"

// restartBatch is the fill's Accept size: one transaction per 1,000
// messages, the size of a large group commit.
const restartBatch = 1000

// restartLease is the lease of the poll before the kill: long enough that
// only the restart's ReleaseLeases can free those messages.
const restartLease = 10 * time.Minute

// restartTimeout bounds each wait of the figure (a start, a first
// delivery): far above any plausible recovery, so only a hang trips it.
const restartTimeout = 5 * time.Minute

// restartResult is one restart measurement.
type restartResult struct {
	queued  int64
	fill    time.Duration // bulk load of the store
	dbBytes int64         // database and WAL files after the fill
	// firstReady is the first start's exec -> /readyz 200 (after the
	// fill: a clean shutdown, nothing to recover).
	firstReady time.Duration
	leased     int // messages leased by a poll of the first run, not acked
	// cycles are the measured starts after a kill; ready, delivered and
	// acked are those of the median start (by delivered).
	cycles                  []restartCycle
	ready, delivered, acked time.Duration
	stop                    time.Duration // SIGTERM -> exit of the last start
	timeline                string        // the median start's log, relative to its exec
	median                  int           // which start that is (from 1)
}

func (r restartResult) summary() string {
	var cs []string
	for _, c := range r.cycles {
		cs = append(cs, fmt.Sprintf("%.0f/%.0f/%.0f", ms(c.ready), ms(c.delivered), ms(c.acked)))
	}
	return fmt.Sprintf("%d queued (filled in %v at %.0f msg/s, %.0f MB on disk); first start after the fill ready after %v (not part of the figure: the store's open runs PRAGMA optimize, whose ANALYZE of the grown tables is unbounded); then %d times: %d leased by a poll, 1 s, kill -9, start; "+
		"ready/first message polled/its ack answered (ms after exec): %s; median: %v/%v/%v; clean stop %v; the log of start %d (ms after exec): %s",
		r.queued, r.fill.Round(10*time.Millisecond), float64(r.queued)/r.fill.Seconds(), float64(r.dbBytes)/1e6,
		r.firstReady.Round(time.Millisecond), len(r.cycles), r.leased, strings.Join(cs, " "), r.ready.Round(time.Millisecond), r.delivered.Round(time.Millisecond),
		r.acked.Round(time.Millisecond), r.stop.Round(time.Millisecond), r.median, r.timeline)
}

// fillStore writes n pending messages for the bench pull frontend into a
// fresh embedded store at path, with the frontend and its route, as the
// intake would have stored them (one transaction per restartBatch).
func fillStore(path string, n int64, bodySize int) error {
	ctx := context.Background()
	cfg := sqlite.DefaultConfig()
	cfg.Path = path
	st, err := sqlite.Open(ctx, cfg)
	if err != nil {
		return err
	}
	now := time.Now()
	if err := st.PutFrontend(ctx, persistence.Frontend{Name: frontendName, Mode: persistence.ModePull, CreatedAt: now, UpdatedAt: now}); err != nil {
		return errors.Join(err, st.Close())
	}
	if err := st.PutRoute(ctx, persistence.Route{Prefix: routePrefix, Frontend: frontendName, UpdatedAt: now}); err != nil {
		return errors.Join(err, st.Close())
	}
	var sub messages.Submission
	if err := json.Unmarshal(newBody(0, bodySize), &sub); err != nil {
		return errors.Join(err, st.Close())
	}
	batch := make([]persistence.NewMessage, 0, restartBatch)
	for i := int64(0); i < n; {
		batch = batch[:0]
		now := time.Now()
		for ; i < n && len(batch) < restartBatch; i++ {
			batch = append(batch, persistence.NewMessage{
				ID: uuid.Must(uuid.NewV7()).String(), SourceMSISDN: sub.SourceMSISDN, DestinationMSISDN: destination(int(i)),
				Body: sub.Body, SourceSMSC: restartName, DestSMSC: restartName, Frontend: frontendName,
				State:  messages.StatePending,
				Detail: "accepted for frontend " + frontendName,
				Work:   &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: frontendName, DueAt: now},
			})
		}
		if _, err := st.Accept(ctx, now, batch); err != nil {
			return errors.Join(fmt.Errorf("fill: %w", err), st.Close())
		}
	}
	return st.Close()
}

// nodeProcess is one run of the binary.
type nodeProcess struct {
	cmd    *exec.Cmd
	logs   *os.File
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startProcess execs bin with args, its stderr (the JSON log) and stdout
// into logPath. The environment is the bench's without SWITCHBOARD_*
// variables, which the binary would read as flags.
func startProcess(bin string, args []string, logPath string) (*nodeProcess, error) {
	logs, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHBOARD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		logs.Close()
		return nil, err
	}
	p := &nodeProcess{cmd: cmd, logs: logs, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logs.Close()
		close(p.exited)
	}()
	return p, nil
}

// end kills the process unless it is gone, and waits until it is.
func (p *nodeProcess) end() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// tail is the end of a log file, for an error.
func tail(path string) string {
	data, _ := os.ReadFile(path)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}

// waitFor calls try every 2 ms until it reports done, the process exits
// or restartTimeout passes; it returns when try was done.
func waitFor(p *nodeProcess, what, logPath string, try func() bool) (time.Time, error) {
	deadline := time.Now().Add(restartTimeout)
	for {
		if try() {
			return time.Now(), nil
		}
		select {
		case <-p.exited:
			return time.Time{}, fmt.Errorf("the node exited (%v) before %s; its log:\n%s", p.err, what, tail(logPath))
		default:
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no %s within %v; the node's log:\n%s", what, restartTimeout, tail(logPath))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// restartClient talks to the restart node at base: a short timeout per
// call (a connection refused comes back at once; a node that accepted the
// connection answers within it).
func restartClient(base string) (*apiclient.Client, error) {
	return apiclient.NewURL(base, apiclient.Config{HTTP: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The node serves the self-signed certificate it wrote into its data
		// dir; the bench's client is local and does not verify it.
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // a local test node's self-signed certificate
		MaxIdleConnsPerHost: 4,
	}}})
}

// ready reports whether /readyz answers 200.
func ready(c *apiclient.Client) bool { return c.Ready(context.Background()) }

// pollOne polls the bench frontend for up to max messages with a lease;
// it returns their ids (none when the node is not serving yet).
func pollOne(c *apiclient.Client, max int, lease time.Duration) []string {
	msgs, err := c.Poll(context.Background(), frontendName, max, 1000, lease.Milliseconds())
	if err != nil {
		return nil
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// ackDelivered acks id delivered and checks that it applied.
func ackDelivered(c *apiclient.Client, id string) error {
	acked, err := c.Ack(context.Background(), frontendName, messages.DeliveryResult{ID: id, Status: messages.Delivered})
	if err != nil {
		return err
	}
	if len(acked) != 1 || acked[0].Outcome != "applied" {
		return fmt.Errorf("ack of %s: %+v", id, acked)
	}
	return nil
}

// restartCycles is how many times the figure kills the node and measures
// its next start: the median of three is steadier than one start on a
// noisy machine, and a cycle costs a second or two, not a fill.
const restartCycles = 3

// runRestart fills a store with n queued messages, runs the binary on it,
// and restartCycles times leases a poll's worth of messages, lets the node
// run a moment, kills it with SIGKILL and measures the next start.
func runRestart(o options, bin, dir string, n int64) (r restartResult, err error) {
	r.queued = n
	data := filepath.Join(dir, "data")
	dbPath := filepath.Join(data, "switchboard.db")
	t := time.Now()
	if err := fillStore(dbPath, n, o.bodySize); err != nil {
		return r, err
	}
	r.fill = time.Since(t)
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(dbPath + suffix); err == nil {
			r.dbBytes += fi.Size()
		}
	}
	listen, err := freeport.Loopback()
	if err != nil {
		return r, err
	}
	metrics, err := freeport.Loopback()
	if err != nil {
		return r, err
	}
	args := []string{"run", "--name", restartName, "--instance-id", restartName, "--data-dir", data,
		"--listen", listen, "--metrics-listen", metrics, "--log-format", "json", "--log-level", "info"}
	client, err := restartClient("https://" + listen)
	if err != nil {
		return r, err
	}
	defer client.Close()

	logPath := filepath.Join(dir, "first.log")
	t = time.Now()
	p, err := startProcess(bin, args, logPath)
	if err != nil {
		return r, err
	}
	defer func() { p.end() }()
	at, err := waitFor(p, "readiness of the first start", logPath, func() bool { return ready(client) })
	if err != nil {
		return r, err
	}
	r.firstReady = at.Sub(t)
	if _, err := os.Stat(filepath.Join(data, certs.SelfSignedCertName)); err != nil {
		return r, fmt.Errorf("the node wrote no certificate into its data dir: %w", err)
	}
	var timelines []string
	for cycle := range restartCycles {
		// Before the kill: a poll's worth of messages leased and not
		// acked (the next start must take them back), a moment of running.
		if _, err := waitFor(p, "message in a poll before the kill", logPath, func() bool {
			ids := pollOne(client, 100, restartLease)
			r.leased = len(ids)
			return len(ids) > 0
		}); err != nil {
			return r, err
		}
		time.Sleep(time.Second)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return r, err
		}
		<-p.exited
		client.Close()

		// The start after the kill, measured from its exec.
		logPath = filepath.Join(dir, fmt.Sprintf("restart-%d.log", cycle+1))
		t0 := time.Now()
		if p, err = startProcess(bin, args, logPath); err != nil {
			return r, err
		}
		var c restartCycle
		if c, err = measureStart(p, client, logPath, t0); err != nil {
			return r, err
		}
		r.cycles = append(r.cycles, c)
		timelines = append(timelines, timeline(logPath, t0, c.acked+time.Second))
	}
	// The start whose first delivery is the median speaks for them all.
	var ds []float64
	for _, c := range r.cycles {
		ds = append(ds, float64(c.delivered))
	}
	med := median(ds)
	for i, c := range r.cycles {
		if float64(c.delivered) == med || r.timeline == "" && i == len(r.cycles)-1 {
			r.ready, r.delivered, r.acked, r.timeline, r.median = c.ready, c.delivered, c.acked, timelines[i], i+1
			break
		}
	}
	if len(r.cycles)%2 == 0 { // no start is the median itself
		r.delivered = time.Duration(med)
	}

	ts := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return r, err
	}
	select {
	case <-p.exited:
		r.stop = time.Since(ts)
		if p.err != nil {
			return r, fmt.Errorf("the restarted node's clean stop: %v; its log:\n%s", p.err, tail(logPath))
		}
	case <-time.After(time.Minute):
		return r, fmt.Errorf("the restarted node did not stop within a minute of SIGTERM; its log:\n%s", tail(logPath))
	}
	return r, nil
}

// restartCycle is one measured start after a kill, from its exec.
type restartCycle struct {
	ready     time.Duration // /readyz answers 200
	delivered time.Duration // a poll returned a queued message
	acked     time.Duration // its ack was answered
}

// measureStart waits, from t0 on, for the node's readiness and, at the
// same time, for a poll that returns a queued message, which it acks.
func measureStart(p *nodeProcess, client *apiclient.Client, logPath string, t0 time.Time) (c restartCycle, err error) {
	var wg sync.WaitGroup
	var readyErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		at, err := waitFor(p, "readiness after the kill", logPath, func() bool { return ready(client) })
		c.ready, readyErr = at.Sub(t0), err
	}()
	defer wg.Wait()
	var id string
	at, err := waitFor(p, "message in a poll after the kill", logPath, func() bool {
		if ids := pollOne(client, 1, time.Minute); len(ids) > 0 {
			id = ids[0]
			return true
		}
		return false
	})
	if err != nil {
		return c, err
	}
	c.delivered = at.Sub(t0)
	if err := ackDelivered(client, id); err != nil {
		return c, err
	}
	c.acked = time.Since(t0)
	wg.Wait()
	return c, readyErr
}

// timeline lists the log lines of a run written within upTo of its exec
// at t0: their offset in ms and message (with a count, when it has one).
func timeline(path string, t0 time.Time, upTo time.Duration) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var parts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		ts, _ := line[slog.TimeKey].(string)
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		d := at.Sub(t0)
		if d > upTo {
			break
		}
		msg, _ := line[slog.MessageKey].(string)
		for _, k := range []string{"leases", "migrations_applied", "epoch"} {
			if v, ok := line[k]; ok {
				msg += fmt.Sprintf(" (%s %v)", k, v)
			}
		}
		parts = append(parts, fmt.Sprintf("%d %s", d.Milliseconds(), msg))
	}
	if len(parts) == 0 {
		return "(no log lines)"
	}
	return strings.Join(parts, "; ")
}

// nodeBinary returns the binary of the restart figure: --node-binary, or
// one built now from this module's cmd/node into dir (the build cache
// makes that a few seconds after `make build`).
func nodeBinary(o options, dir string) (string, time.Duration, error) {
	if o.nodeBinary != "" {
		return o.nodeBinary, 0, nil
	}
	bin := filepath.Join(dir, "switchboard")
	t := time.Now()
	out, err := exec.Command("go", "build", "-o", bin, "github.com/switchboard-dev/switchboard/cmd/node").CombinedOutput()
	if err != nil {
		return "", 0, fmt.Errorf("restart: go build of cmd/node (run from the module, or give --node-binary bin/switchboard): %v\n%s", err, out)
	}
	return bin, time.Since(t), nil
}
