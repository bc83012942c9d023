package switchboard_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// gatedStore holds the first Accept until released and records the size of
// every Accept batch.
type gatedStore struct {
	persistence.Store
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	batches []int
}

func (g *gatedStore) Accept(ctx context.Context, now time.Time, b []persistence.NewMessage) ([]persistence.Accepted, error) {
	g.mu.Lock()
	first := len(g.batches) == 0
	g.batches = append(g.batches, len(b))
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	return g.Store.Accept(ctx, now, b)
}

func gauge(t *testing.T, h *harness, name, kind string) float64 {
	t.Helper()
	mfs, err := h.node.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// TestConcurrentSubmitsShareOneCommit: while one commit runs, the submits
// that arrive queue in the intake's mailbox and are then committed together
// in ONE transaction, each answered only after it.
func TestConcurrentSubmitsShareOneCommit(t *testing.T) {
	fs := newFaultyStore(t)
	gs := &gatedStore{Store: fs, entered: make(chan struct{}), release: make(chan struct{})}
	cfg := testConfig(t)
	cfg.Store = gs
	h := startNode(t, cfg)
	h.pullFrontend("fe1", "44")

	const n = 40
	done := make(chan int, n+1)
	go func() {
		status, _ := h.do("POST", "/api/messages", map[string]string{"id": "first", "source_msisdn": "1", "destination_msisdn": "441", "message_body": "x"})
		done <- status
	}()
	<-gs.entered // the first commit is under way (and held)
	for i := range n {
		go func() {
			status, _ := h.do("POST", "/api/messages", map[string]string{"id": fmt.Sprintf("g%d", i), "source_msisdn": "1", "destination_msisdn": "441", "message_body": "x"})
			done <- status
		}()
	}
	// Every later submit waits in the intake's mailbox (plus the flush
	// message the first submit queued behind them, or not yet).
	eventually(t, 10*time.Second, func() error {
		if d := gauge(t, h, "switchboard_actor_mailbox_depth", "intake"); d < n {
			return fmt.Errorf("intake mailbox depth %v, want >= %d", d, n)
		}
		return nil
	})
	select {
	case s := <-done:
		t.Fatalf("a submit was answered (%d) before its commit", s)
	default:
	}
	close(gs.release)
	for range n + 1 {
		if s := <-done; s != 202 {
			t.Fatalf("status %d", s)
		}
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if fmt.Sprint(gs.batches) != fmt.Sprintf("[1 %d]", n) {
		t.Fatalf("commit batches %v, want [1 %d]: one transaction for the submits that queued", gs.batches, n)
	}
}
