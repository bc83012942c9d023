package switchboard_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/polltest"
)

// gatedStore holds every write of new messages until released and records
// the size of each.
type gatedStore struct {
	persistence.Store
	release chan struct{}
	mu      sync.Mutex
	batches []int
}

func (g *gatedStore) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	if len(w.Accept) > 0 {
		g.mu.Lock()
		g.batches = append(g.batches, len(w.Accept))
		g.mu.Unlock()
		<-g.release
	}
	return g.Store.Write(ctx, now, w)
}

func (g *gatedStore) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.batches)
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

func overloaded(err error) bool {
	var me *messages.Error
	return errors.As(err, &me) && me.Code == messages.CodeOverloaded
}

// TestConcurrentSubmitsShareOneCommit: while the intake's commits are out
// (its pipeline holds a few at once), the submits that arrive queue and are
// then committed together in ONE transaction, each answered only after its
// commit.
func TestConcurrentSubmitsShareOneCommit(t *testing.T) {
	const n = 40
	fs := newFaultyStore(t)
	gs := &gatedStore{Store: fs, release: make(chan struct{})}
	cfg := testConfig(t)
	cfg.Store = gs
	// Admission control tells when every submit waits for its commit: the
	// next one is refused.
	cfg.MaxPendingSubmits = n + 1
	h := startNode(t, cfg)
	h.pullFrontend("fe1", "44")

	done := make(chan int, n+1)
	go func() {
		status, _ := h.do("POST", "/api/messages", map[string]string{"id": "first", "source_msisdn": "1", "destination_msisdn": "441", "message_body": "x"})
		done <- status
	}()
	polltest.Eventually(t, 10*time.Second, func() error {
		if gs.held() == 0 {
			return fmt.Errorf("the first commit has not started")
		}
		return nil
	})
	for i := range n {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for {
				_, _, err := h.node.Submit(ctx, messages.Submission{ID: fmt.Sprintf("g%d", i), SourceMSISDN: "1", DestinationMSISDN: "441", Body: "x"})
				if overloaded(err) {
					continue // a probe held the last place: it leaves at once
				}
				status := 202
				if err != nil {
					status = 500
				}
				done <- status
				return
			}
		}()
	}
	// A probe that is let in waits for its commit like the others (past
	// its short deadline): it is counted with them.
	probes := 0
	polltest.Eventually(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, _, err := h.node.Submit(ctx, messages.Submission{ID: fmt.Sprint("probe", probes), SourceMSISDN: "1", DestinationMSISDN: "441", Body: "probe"})
		if !overloaded(err) {
			probes++
			return fmt.Errorf("probe submit: %v, want overloaded (all waiting)", err)
		}
		if d := gauge(t, h, "switchboard_actor_mailbox_depth", "intake"); d != 0 {
			return fmt.Errorf("intake mailbox depth %v, want every submit taken", d)
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
	sum := 0
	for _, b := range gs.batches {
		sum += b
	}
	// The first commit, the ones the pipeline started while it was held,
	// then one for everything that queued behind them.
	if sum != n+1+probes || len(gs.batches) > 4 || gs.batches[0] != 1 {
		t.Fatalf("commit batches %v: want [1 ...] of at most 4 commits for %d submits", gs.batches, n+1+probes)
	}
}
