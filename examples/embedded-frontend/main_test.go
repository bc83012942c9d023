package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestMain checks that a stopped node leaves no goroutine behind: an
// embedder's process outlives its node.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// deadLetterThrottle keeps the dead-letter throttle's goroutine, which
// outlives a stop by its interval (1s by default), within goleak's wait.
const deadLetterThrottle = 10 * time.Millisecond

// demoTimeout bounds a whole demo run; a hang is a failure, not a CI timeout.
const demoTimeout = time.Minute

func TestDemoDeliversEveryMessage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listen string
	}{
		{"no listeners", ""},
		{"https on loopback", "127.0.0.1:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
			defer cancel()
			var out lockedBuffer
			sum, err := run(ctx, options{
				DataDir:  t.TempDir(),
				Listen:   tc.listen,
				RetryMin: 20 * time.Millisecond,
				Once:     true,
				Out:      &out,
				Logger:   testLogger(t),

				DeadLetterThrottle: deadLetterThrottle,
			})
			if err != nil {
				t.Fatalf("run: %v\noutput:\n%s", err, out.String())
			}
			checkSummary(t, sum, out.String())
			if got := sum.Addr != ""; got != (tc.listen != "") {
				t.Errorf("Addr = %q with Listen %q", sum.Addr, tc.listen)
			}
		})
	}
}

// TestDemoServesUntilCancelled runs the demo without Once: it must keep the
// node up after the summary and stop it cleanly when ctx ends, as on SIGINT.
func TestDemoServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	serveCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	out := &lockedBuffer{}
	out.when("destination without a route", interrupt) // the summary's last line

	done := make(chan struct{})
	var (
		sum summary
		err error
	)
	go func() {
		defer close(done)
		sum, err = run(serveCtx, options{
			DataDir: t.TempDir(), RetryMin: 20 * time.Millisecond, Out: out, Logger: testLogger(t),
			DeadLetterThrottle: deadLetterThrottle,
		})
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("run did not return after the interrupt\noutput:\n%s", out.String())
	}
	if err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	checkSummary(t, sum, out.String())
}

// checkSummary checks what every complete demo run must show.
func checkSummary(t *testing.T, sum summary, out string) {
	t.Helper()
	want := demoSubmissions("x")
	if len(sum.Messages) != len(want) {
		t.Fatalf("summary has %d messages, want %d: %+v", len(sum.Messages), len(want), sum.Messages)
	}
	deliveries := 0
	for i, m := range sum.Messages {
		if m.Body != want[i].Body {
			t.Errorf("message %d: body %q, want %q", i, m.Body, want[i].Body)
		}
		if m.State != messages.StateDelivered {
			t.Errorf("%s (%q): state %s, want delivered", m.ID, m.Body, m.State)
		}
		busy := strings.Contains(m.Body, "busy")
		switch {
		case busy && m.Attempts < 2:
			t.Errorf("%s (%q): %d attempts; the busy message must be retried", m.ID, m.Body, m.Attempts)
		case !busy && m.Attempts != 1:
			t.Errorf("%s (%q): %d attempts, want 1", m.ID, m.Body, m.Attempts)
		}
		deliveries += m.Attempts
		// The subscription must have seen the whole life: pending,
		// delivered, and a retry for the busy one. Order is not checked
		// across actors (see recorder.allFinal).
		for _, s := range []messages.State{messages.StatePending, messages.StateDelivered} {
			if !slices.Contains(m.Seen, s) {
				t.Errorf("%s (%q): subscription saw %v, want %s among them", m.ID, m.Body, m.Seen, s)
			}
		}
		if busy && !slices.Contains(m.Seen, messages.StateRetry) {
			t.Errorf("%s (%q): subscription saw %v, want a retry", m.ID, m.Body, m.Seen)
		}
		if !strings.Contains(out, m.ID) {
			t.Errorf("output does not mention %s:\n%s", m.ID, out)
		}
	}
	if sum.Sent != len(want) {
		t.Errorf("carrier sent %d messages, want each of the %d exactly once", sum.Sent, len(want))
	}
	if !sum.Duplicate {
		t.Error("submitting the same id again created a second message")
	}
	if sum.NoRouteCode != messages.CodeNoRoute {
		t.Errorf("destination without a route: code %q, want %q", sum.NoRouteCode, messages.CodeNoRoute)
	}
	// Every attempt is one Delivery the gateway received, plus Started.
	if sum.GatewayReceives < float64(deliveries+1) {
		t.Errorf("switchboard_actor_messages_total{kind=%q} = %v, want at least %d", actorKind, sum.GatewayReceives, deliveries+1)
	}
}

// lockedBuffer is the demo's Out: the gateway writes to it from its actor
// while the test reads it. when runs f once, the first time s is written.
type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	needle string
	f      func()
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.f != nil && strings.Contains(b.buf.String(), b.needle) {
		b.f()
		b.f = nil
	}
	return n, err
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) when(s string, f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.needle, b.f = s, f
}

// testLogger writes the node's logs to the test log only when
// SWITCHBOARD_TEST_LOG is set, as the node's own tests do.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("SWITCHBOARD_TEST_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
