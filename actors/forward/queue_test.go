package forward

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// parkStore fails its first QueueForwards and counts them all.
type parkStore struct {
	persistence.Store
	mu    sync.Mutex
	calls int
}

func (s *parkStore) QueueForwards(context.Context, time.Time, string, string, int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls == 1 {
		return nil, errors.New("store down")
	}
	return nil, nil
}

func (s *parkStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// TestQueueParksAgainAfterAFailure: a park that failed (the store was
// down) is tried again at the next tick while the peer is not healthy, so
// that its pending messages still count down to forward_failed; it was
// left until the link changed again.
func TestQueueParksAgainAfterAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := NewMetrics(prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		st := &parkStore{}
		cfg := Config{Node: "a", Peer: "b", Owner: "a-0", Store: st, Transport: &recordingTransport{}, Clock: clock.Real{},
			Policy: DefaultPolicy(), Timeout: time.Second, Logger: slog.New(slog.DiscardHandler), Metrics: m,
			Publish: func(messages.StateChanged) {}}
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
		pid := sys.Root.Spawn(actor.PropsFromProducer(New(cfg)))
		synctest.Wait()
		if n := st.count(); n != 1 {
			t.Fatalf("%d parks at start, want 1 (the peer is not healthy yet)", n)
		}
		time.Sleep(cfg.Policy.RetryInterval)
		synctest.Wait()
		if n := st.count(); n != 2 {
			t.Fatalf("%d parks a tick after the failed one, want 2", n)
		}
		time.Sleep(3 * cfg.Policy.RetryInterval)
		synctest.Wait()
		if n := st.count(); n != 2 {
			t.Fatalf("%d parks after one that worked, want 2 (nothing new to park)", n)
		}
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
	})
}
