package forward

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
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

// startQueue spawns the forward queue of peer b on st, with clk, in a
// system of its own (stopped when the test ends), in a synctest bubble.
func startQueue(t *testing.T, st persistence.Store, clk clock.Clock) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Node: "a", Peer: "b", Owner: "a-0", Store: st, Transport: &recordingTransport{}, Clock: clk,
		Policy: DefaultPolicy(), Timeout: time.Second, StoreTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler), Metrics: m,
		Publish: func(messages.StateChanged) {}}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	t.Cleanup(sys.Shutdown)
	return sys, sys.Root.Spawn(actor.PropsFromProducer(New(cfg)))
}

// TestQueueParksAgainAfterAFailure: a park that failed (the store was
// down) is tried again at the next tick while the peer is not healthy, so
// that its pending messages still count down to forward_failed; it was
// left until the link changed again.
func TestQueueParksAgainAfterAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &parkStore{}
		sys, pid := startQueue(t, st, clock.Real{})
		synctest.Wait()
		if n := st.count(); n != 1 {
			t.Fatalf("%d parks at start, want 1 (the peer is not healthy yet)", n)
		}
		time.Sleep(DefaultPolicy().RetryInterval)
		synctest.Wait()
		if n := st.count(); n != 2 {
			t.Fatalf("%d parks a tick after the failed one, want 2", n)
		}
		time.Sleep(3 * DefaultPolicy().RetryInterval)
		synctest.Wait()
		if n := st.count(); n != 2 {
			t.Fatalf("%d parks after one that worked, want 2 (nothing new to park)", n)
		}
		_ = sys.Root.StopFuture(pid).Wait()
	})
}

// gateStore holds each QueueForwards until the test lets one through
// (pass), and counts them; its writes claim nothing.
type gateStore struct {
	persistence.Store
	pass  chan struct{}
	mu    sync.Mutex
	calls int
}

func (s *gateStore) QueueForwards(ctx context.Context, _ time.Time, _, _ string, _ int) ([]string, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	select {
	case <-s.pass:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *gateStore) Write(_ context.Context, _ time.Time, w persistence.Write) (persistence.Written, error) {
	return persistence.Written{Completions: make([]persistence.Completion, len(w.Outcomes)),
		Reported: make([]persistence.Completion, len(w.Statuses)), Claims: make([]persistence.Claim, len(w.Claims))}, nil
}

// stop lets the page under way (if one is) through and stops the queue,
// waiting out its last result's dead letter.
func (s *gateStore) stop(sys *actor.ActorSystem, pid *actor.PID) {
	select {
	case s.pass <- struct{}{}:
	default:
	}
	synctest.Wait()
	sys.Root.Stop(pid)
	time.Sleep(time.Second)
	synctest.Wait()
}

func (s *gateStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// TestQueueServesItsMailboxWhileAPageParks: a parking page ran on the
// queue's mailbox, so a slow one (a store under load, a page of 512
// messages) held up everything else the queue does, its stop included,
// for as long as the store took. The page runs on a goroutine of its own
// now, one at a time: the queue takes its link changes meanwhile, a
// parking begun again waits for the page under way, and it stops at once.
func TestQueueServesItsMailboxWhileAPageParks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gateStore{pass: make(chan struct{})}
		sys, pid := startQueue(t, st, clock.Real{})
		synctest.Wait()
		if n := st.count(); n != 1 {
			t.Fatalf("%d parks at start, want 1 (the peer is not healthy yet)", n)
		}
		// Found healthy, then not: the parking begins again while the
		// first page is held.
		sys.Root.Send(pid, messages.PeerLink{Healthy: true, Addr: "b:1"})
		sys.Root.Send(pid, messages.PeerLink{Addr: "b:1"})
		synctest.Wait()
		if n := st.count(); n != 1 {
			t.Fatalf("%d parks with the first page held, want 1 (one page at a time)", n)
		}
		st.pass <- struct{}{}
		synctest.Wait()
		if n := st.count(); n != 2 {
			t.Fatalf("%d parks after the held page, want 2 (the parking begun again runs after it)", n)
		}
		// The second page is held: the queue stops all the same.
		stopped := sys.Root.StopFuture(pid)
		synctest.Wait()
		if err := stopped.Wait(); err != nil {
			t.Fatalf("the queue did not stop while a page was held: %v", err)
		}
		synctest.Wait()
		if n := st.count(); n != 2 {
			t.Fatalf("%d parks after the stop, want 2", n)
		}
		time.Sleep(time.Second) // the held page's result, a dead letter, and its throttle
		synctest.Wait()
	})
}

// gateClock blocks Now while a gate is armed (holds the queue's mailbox).
type gateClock struct {
	clock.Real
	gate atomic.Pointer[chan struct{}]
}

func (g *gateClock) Now() time.Time {
	if ch := g.gate.Load(); ch != nil {
		<-*ch
	}
	return time.Now().UTC()
}

// TestQueueParksAgainWhenAPageEndsBeforeItsParkedMessage: the peer found
// healthy, then not, while a page runs, the page's result queued before
// the queue took the second link: the parking it began again was lost
// (the page's short result ended it, its parked message then found none),
// and the peer's pending messages waited unseen until a kick.
func TestQueueParksAgainWhenAPageEndsBeforeItsParkedMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gateStore{pass: make(chan struct{})}
		ck := &gateClock{}
		sys, pid := startQueue(t, st, ck)
		synctest.Wait()
		if n := st.count(); n != 1 {
			t.Fatalf("%d parks at start, want 1", n)
		}
		gate := make(chan struct{})
		ck.gate.Store(&gate)
		sys.Root.Send(pid, messages.PeerLink{Healthy: true, Addr: "b:1"}) // queue blocks in step's Now
		synctest.Wait()
		sys.Root.Send(pid, messages.PeerLink{Addr: "b:1"}) // down, queued
		st.pass <- struct{}{}                              // page 1 ends: pageDone queued after down
		synctest.Wait()
		ck.gate.Store(nil)
		close(gate)
		synctest.Wait()
		if n := st.count(); n != 2 {
			t.Errorf("%d parks, want 2: the parking begun again by the second link was lost", n)
		}
		st.stop(sys, pid)
	})
}

// TestQueueParksAfterAPageAKickCameDuring: a kick (the intake committed a
// message for the unhealthy peer) while a page runs may name a message
// the page did not see: another page follows it.
func TestQueueParksAfterAPageAKickCameDuring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gateStore{pass: make(chan struct{})}
		sys, pid := startQueue(t, st, clock.Real{})
		synctest.Wait()
		sys.Root.Send(pid, &messages.KickPeer{Peer: "b"})
		synctest.Wait()
		st.pass <- struct{}{} // the first page ends
		synctest.Wait()
		if n := st.count(); n != 2 {
			t.Errorf("%d parks, want 2: the kick that came while the page ran parks nothing", n)
		}
		st.stop(sys, pid)
	})
}
