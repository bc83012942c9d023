package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// fakeNode records what runNode does with a node.
type fakeNode struct {
	// Start: when startRelease is nil it returns startErr at once; otherwise
	// it waits for startRelease (then returns startErr) or for its context
	// to end (then returns the context's error).
	startErr     error
	startRelease chan struct{}
	startCalled  chan struct{}
	// Stop: when stopRelease is nil it returns stopErr at once; otherwise it
	// waits for stopRelease and ignores its context.
	stopErr     error
	stopRelease chan struct{}
	stopCalled  chan struct{}

	fatal   chan error
	waiting chan struct{} // closed when runNode waits on Fatal()
	once    sync.Once
}

func newFakeNode() *fakeNode {
	return &fakeNode{
		startCalled: make(chan struct{}),
		stopCalled:  make(chan struct{}),
		fatal:       make(chan error, 1),
		waiting:     make(chan struct{}),
	}
}

func (f *fakeNode) Start(ctx context.Context) error {
	close(f.startCalled)
	if f.startRelease == nil {
		return f.startErr
	}
	select {
	case <-f.startRelease:
		return f.startErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeNode) Stop(ctx context.Context) error {
	close(f.stopCalled)
	if f.stopRelease != nil {
		<-f.stopRelease
	}
	return f.stopErr
}

func (f *fakeNode) Fatal() <-chan error {
	f.once.Do(func() { close(f.waiting) })
	return f.fatal
}

func (f *fakeNode) Addr() string        { return "127.0.0.1:18443" }
func (f *fakeNode) MetricsAddr() string { return "127.0.0.1:19568" }

func (f *fakeNode) stopWasCalled() bool {
	select {
	case <-f.stopCalled:
		return true
	default:
		return false
	}
}

// logRecords decodes the JSON log lines in s.
func logRecords(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func findRecord(records []map[string]any, msg string) map[string]any {
	for _, r := range records {
		if r["msg"] == msg {
			return r
		}
	}
	return nil
}

type runHarness struct {
	node *fakeNode
	// sigs is unbuffered: a send returns once runNode has taken the signal.
	sigs chan os.Signal
	logs *logtest.Buffer
	code chan int
	// clock is what runNode takes for the time (nanoseconds from t0): it
	// moves only when a test moves it.
	clock atomic.Int64
}

func startRun(t *testing.T, n *fakeNode, cfg switchboard.Config) *runHarness {
	t.Helper()
	h := &runHarness{node: n, sigs: make(chan os.Signal), logs: &logtest.Buffer{}, code: make(chan int, 1)}
	logger := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0.Add(time.Duration(h.clock.Load())) }
	go func() { h.code <- runNode(n, cfg, logger, h.sigs, now) }()
	return h
}

// advance moves the harness's clock on by d.
func (h *runHarness) advance(d time.Duration) { h.clock.Add(int64(d)) }

// wait waits for ch with a deadline, so a hang fails instead of timing out
// the whole test binary.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func testConfig() switchboard.Config {
	cfg := switchboard.DefaultConfig()
	cfg.Name = "dc1"
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

func TestRunNodeSignalStops(t *testing.T) {
	n := newFakeNode()
	h := startRun(t, n, testConfig())
	wait(t, n.waiting, "runNode to wait")
	h.sigs <- syscall.SIGTERM
	if code := wait(t, h.code, "exit code"); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	if !n.stopWasCalled() {
		t.Fatal("Stop was not called")
	}
	records := logRecords(t, h.logs.String())
	started := findRecord(records, "node started")
	if started == nil {
		t.Fatalf("no 'node started' log in %s", h.logs)
	}
	for k, want := range map[string]string{
		"name": "dc1", "addr": "127.0.0.1:18443", "metrics_addr": "127.0.0.1:19568", "store": "sqlite:./data",
	} {
		if started[k] != want {
			t.Errorf("node started: %s = %v, want %q", k, started[k], want)
		}
	}
	if findRecord(records, "node stopped") == nil {
		t.Errorf("no 'node stopped' log in %s", h.logs)
	}
}

func TestRunNodeFatalStopsWithCode1(t *testing.T) {
	n := newFakeNode()
	h := startRun(t, n, testConfig())
	wait(t, n.waiting, "runNode to wait")
	n.fatal <- errors.New("intake restart budget exhausted")
	if code := wait(t, h.code, "exit code"); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if !n.stopWasCalled() {
		t.Fatal("Stop was not called after a fatal error")
	}
	r := findRecord(logRecords(t, h.logs.String()), "node failed; stopping")
	if r == nil || r["err"] != "intake restart budget exhausted" {
		t.Fatalf("fatal error not logged: %s", h.logs)
	}
}

// TestRunNodeFatalOfTheConfigurationExits2: a fatal error of a
// configuration that cannot work (an auto ring instance that found a
// master it has no way to call) exits 2, which systemd does not restart,
// as for a refused flag; it exited 1, restarted every few seconds to fail
// the same way.
func TestRunNodeFatalOfTheConfigurationExits2(t *testing.T) {
	n := newFakeNode()
	h := startRun(t, n, testConfig())
	wait(t, n.waiting, "runNode to wait")
	n.fatal <- fmt.Errorf("ring: %w", switchboard.ErrConfig)
	if code := wait(t, h.code, "exit code"); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !n.stopWasCalled() {
		t.Fatal("Stop was not called after a fatal error")
	}
}

func TestRunNodeStartFails(t *testing.T) {
	n := newFakeNode()
	n.startErr = errors.New("open store: disk full")
	h := startRun(t, n, testConfig())
	if code := wait(t, h.code, "exit code"); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	r := findRecord(logRecords(t, h.logs.String()), "node failed to start")
	if r == nil || r["err"] != "open store: disk full" {
		t.Fatalf("start error not logged: %s", h.logs)
	}
	if n.stopWasCalled() {
		t.Fatal("Stop called after a failed Start")
	}
}

func TestRunNodeSignalDuringStart(t *testing.T) {
	n := newFakeNode()
	n.startRelease = make(chan struct{}) // never released: only the signal ends Start
	h := startRun(t, n, testConfig())
	wait(t, n.startCalled, "Start")
	h.sigs <- os.Interrupt
	if code := wait(t, h.code, "exit code"); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	if n.stopWasCalled() {
		t.Fatal("Stop called although Start was interrupted")
	}
}

func TestRunNodeSecondSignalExitsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second os.Signal
		after  time.Duration
	}{
		{"same signal a second later", syscall.SIGTERM, time.Second},
		{"Ctrl-C after SIGTERM at once", os.Interrupt, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode()
			n.stopRelease = make(chan struct{})
			defer close(n.stopRelease)
			h := startRun(t, n, testConfig())
			wait(t, n.waiting, "runNode to wait")
			h.sigs <- syscall.SIGTERM
			wait(t, n.stopCalled, "Stop")
			h.advance(tc.after)
			h.sigs <- tc.second
			if code := wait(t, h.code, "exit code"); code != 1 {
				t.Fatalf("exit code %d, want 1", code)
			}
		})
	}
}

// TestRunNodeRepeatedSignalIsOne: coreutils timeout sends SIGTERM to the
// process and then to its group, so the node gets it twice at once: the
// repeat does not cut the graceful stop short (it exited 1).
func TestRunNodeRepeatedSignalIsOne(t *testing.T) {
	n := newFakeNode()
	n.stopRelease = make(chan struct{})
	h := startRun(t, n, testConfig())
	wait(t, n.waiting, "runNode to wait")
	h.sigs <- syscall.SIGTERM
	wait(t, n.stopCalled, "Stop")
	h.advance(999 * time.Millisecond)
	h.sigs <- syscall.SIGTERM // taken by runNode when the send returns
	close(n.stopRelease)
	if code := wait(t, h.code, "exit code"); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	if findRecord(logRecords(t, h.logs.String()), "node stopped") == nil {
		t.Errorf("no 'node stopped' log in %s", h.logs)
	}
}

func TestRunNodeStopFails(t *testing.T) {
	n := newFakeNode()
	n.stopErr = context.DeadlineExceeded
	h := startRun(t, n, testConfig())
	wait(t, n.waiting, "runNode to wait")
	h.sigs <- syscall.SIGTERM
	if code := wait(t, h.code, "exit code"); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
}

func TestRunNodeStuckStopGivesUp(t *testing.T) {
	old := stopGrace
	stopGrace = time.Millisecond
	defer func() { stopGrace = old }()

	n := newFakeNode()
	n.stopRelease = make(chan struct{}) // Stop ignores its deadline
	defer close(n.stopRelease)
	cfg := testConfig()
	cfg.ShutdownTimeout = 10 * time.Millisecond
	h := startRun(t, n, cfg)
	wait(t, n.waiting, "runNode to wait")
	h.sigs <- syscall.SIGTERM
	if code := wait(t, h.code, "exit code"); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if findRecord(logRecords(t, h.logs.String()), "node did not stop in time; exiting") == nil {
		t.Fatalf("no give-up log in %s", h.logs)
	}
}

func TestStoreKindHidesDSN(t *testing.T) {
	cfg := testConfig()
	cfg.Postgres = "postgres://user:secret@db/sb"
	if got := storeKind(cfg); got != "postgres" {
		t.Fatalf("storeKind = %q", got)
	}
}

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		name              string
		lo                logOptions
		terminal, noColor bool
		json, colour      bool
	}{
		{"auto, not a terminal", logOptions{slog.LevelInfo, "auto"}, false, false, true, false},
		{"auto, terminal", logOptions{slog.LevelInfo, "auto"}, true, false, false, true},
		{"auto, terminal, NO_COLOR", logOptions{slog.LevelInfo, "auto"}, true, true, false, false},
		{"text on a terminal", logOptions{slog.LevelInfo, "text"}, true, false, false, false},
		{"text", logOptions{slog.LevelInfo, "text"}, false, false, false, false},
		{"json on a terminal", logOptions{slog.LevelInfo, "json"}, true, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			logger := newLogger(&b, tc.lo, tc.terminal, tc.noColor)
			logger.Debug("hidden")
			logger.Info("node started", "name", "dc1")
			out := b.String()
			if strings.Contains(out, "hidden") {
				t.Errorf("debug record logged at info: %q", out)
			}
			if !strings.Contains(out, "node started") || !strings.Contains(out, "dc1") {
				t.Errorf("record missing: %q", out)
			}
			var m map[string]any
			if isJSON := json.Unmarshal(b.Bytes(), &m) == nil; isJSON != tc.json {
				t.Errorf("JSON = %v, want %v: %q", isJSON, tc.json, out)
			}
			if hasColour := strings.Contains(out, "\x1b["); hasColour != tc.colour {
				t.Errorf("colour = %v, want %v: %q", hasColour, tc.colour, out)
			}
		})
	}

	var b bytes.Buffer
	newLogger(&b, logOptions{slog.LevelDebug, "json"}, false, false).Debug("shown")
	if !strings.Contains(b.String(), "shown") {
		t.Errorf("debug level dropped a debug record: %q", b.String())
	}

	// Durations read as durations, not nanoseconds, in JSON too.
	b.Reset()
	newLogger(&b, logOptions{slog.LevelInfo, "json"}, false, false).Info("stopping", "timeout", 30*time.Second,
		slog.Group("retry", "wait", 1500*time.Millisecond))
	var rec struct {
		Timeout string `json:"timeout"`
		Retry   struct {
			Wait string `json:"wait"`
		} `json:"retry"`
	}
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec.Timeout != "30s" || rec.Retry.Wait != "1.5s" {
		t.Errorf("JSON durations: %q (%v), want \"30s\" and \"1.5s\"", b.String(), err)
	}

	// An error about a Config field names its flag, in every format (the
	// end-to-end test is TestRunningNodeWarningsNameTheFlag).
	for _, format := range []string{"json", "text"} {
		b.Reset()
		newLogger(&b, logOptions{slog.LevelInfo, format}, false, false).Warn("cannot check",
			"err", fmt.Errorf("the credentials: %w", field.Errorf("APITokenFile", "given with %s", field.Ref("APIToken"))))
		if out := b.String(); !strings.Contains(out, "the credentials: --api-token-file: given with --api-token") {
			t.Errorf("%s: %q names Config fields, not the flags", format, out)
		}
	}
}

func TestNoColor(t *testing.T) {
	if noColor(noEnv) || noColor(envMap(map[string]string{"NO_COLOR": ""})) {
		t.Error("NO_COLOR unset or empty disables colour")
	}
	if !noColor(envMap(map[string]string{"NO_COLOR": "1"})) {
		t.Error("NO_COLOR=1 keeps colour")
	}
}
