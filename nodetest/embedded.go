package nodetest

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
)

// Embedded starts a node through the embedding API with cfg (it must be
// ready within 30s) and stops it when the test ends (within 20s: a failed
// stop fails the test). Stopping it earlier with StopEmbedded is fine:
// a node stops once. A cfg without a DeadLetterThrottle gets 10ms: the
// throttle's goroutine outlives a stop by its interval (protoactor's 1s by
// default), longer than a leak check after the test waits.
func Embedded(t testing.TB, cfg switchboard.Config) *switchboard.Node {
	t.Helper()
	if cfg.DeadLetterThrottle == 0 {
		cfg.DeadLetterThrottle = 10 * time.Millisecond
	}
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { StopEmbedded(t, n) })
	return n
}

// StopEmbedded stops n within 20s; a failure fails the test.
func StopEmbedded(t testing.TB, n *switchboard.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Stop(ctx); err != nil {
		t.Errorf("Stop %s: %v", n.Addr(), err)
	}
}
