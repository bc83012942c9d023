package forward

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
	"github.com/switchboard-dev/switchboard/transport"
)

// holding holds the calls of one kind (a store round that claims, or a
// forward to the peer) until release is closed, telling inside when one
// waits.
type holding struct {
	inside  chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHolding() *holding {
	return &holding{inside: make(chan struct{}, 1), release: make(chan struct{})}
}

func (h *holding) hold() {
	h.once.Do(func() { h.inside <- struct{}{} })
	<-h.release
}

// holdingStore holds its Writes that claim (round).
type holdingStore struct {
	persistence.Store
	round *holding
}

func (s *holdingStore) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	written, err := s.Store.Write(ctx, now, w)
	if len(w.Claims) > 0 && s.round != nil {
		s.round.hold()
	}
	return written, err
}

// holdingPeer accepts every forward, once forward is released.
type holdingPeer struct {
	transport.Peer
	forward *holding
}

func (p *holdingPeer) Forward(_ context.Context, _ transport.Target, _ bool, fs []messages.Forward) ([]messages.ForwardResult, error) {
	if p.forward != nil {
		p.forward.hold()
	}
	out := make([]messages.ForwardResult, len(fs))
	for i, f := range fs {
		out[i].ID = f.ID
	}
	return out, nil
}

// TestQueueThatStopsGivesItsWorkBack: a forward queue stopped (its peer
// gone from discovery, as when the peer's address briefly reached another
// node) while a store round that claimed work, or a request, was out:
// the result went to the dead letters and the work stayed leased to no
// one, so the queue spawned when the peer came back could not send it
// until the lease ended (2x --http-timeout + 10 s; the report a origin
// waited for stayed unsent that long). Now what the stopped queue's
// goroutines bring back is given back at once: claimable by the next
// queue straight away.
func TestQueueThatStopsGivesItsWorkBack(t *testing.T) {
	for _, held := range []string{"round", "request"} {
		t.Run(held, func(t *testing.T) {
			ctx := context.Background()
			base := sqlitetest.Open(t)
			if _, err := base.Accept(ctx, time.Now(), []persistence.NewMessage{{ID: "m1", SourceMSISDN: "1", DestinationMSISDN: "2",
				Body: "hi", SourceSMSC: "a", DestSMSC: "b", Frontend: "fe-b", State: messages.StatePending, Detail: "routed to b",
				Work: &persistence.WorkSpec{Kind: persistence.WorkForward, Target: "b", DueAt: time.Now()}}}); err != nil {
				t.Fatal(err)
			}
			h := newHolding()
			st, peer := &holdingStore{Store: base}, &holdingPeer{}
			if held == "round" {
				st.round = h
			} else {
				peer.forward = h
			}
			m, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Node: "a", Peer: "b", Owner: "a-0", Store: st, Transport: peer, Clock: clock.Real{},
				Policy: DefaultPolicy(), Timeout: time.Second, Logger: slog.New(slog.DiscardHandler), Metrics: m,
				Publish: func(messages.StateChanged) {}}
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
			defer sys.Shutdown()
			q := sys.Root.Spawn(actor.PropsFromProducer(New(cfg)))
			sys.Root.Send(q, messages.PeerLink{Healthy: true, Addr: "b:1", ForwardBatch: true})
			select {
			case <-h.inside:
			case <-time.After(10 * time.Second):
				t.Fatalf("the queue's %s never started", held)
			}
			if err := sys.Root.StopFuture(q).Wait(); err != nil {
				t.Fatal(err)
			}
			close(h.release)

			// The next queue's claim: at once, not a lease (12 s) later.
			deadline := time.Now().Add(5 * time.Second)
			for {
				c, err := base.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkForward, Target: "b", Owner: "a-0",
					Limit: 10, Now: time.Now(), Lease: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if len(c.Work) == 1 {
					break
				}
				if time.Now().After(deadline) {
					msg, _ := base.GetMessage(ctx, "m1")
					t.Fatalf("5 s after the queue stopped with its %s out, m1's forward is still leased (m1 %s, %s)", held, msg.State, msg.History[len(msg.History)-1].Detail)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestGateHandsOverWhatTheQueueDidNotRead: a result sent before the queue
// stopped and not read by it (the mailbox is dropped) is handed over by
// stop; one read is not; a goroutine ending after the stop is told.
func TestGateHandsOverWhatTheQueueDidNotRead(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return actorFunc(func(actor.Context) {}) }))
	g := newGate()
	read, unread, late := &sent{}, &roundDone{}, &sent{}
	for _, r := range []result{read, unread} {
		if !g.deliver(sys.Root, pid, r) {
			t.Fatal("a result of a running queue was not delivered")
		}
	}
	g.read(read)
	if left := g.stop(); len(left) != 1 || left[0] != result(unread) {
		t.Fatalf("stop handed over %v, want the unread round only", left)
	}
	if g.deliver(sys.Root, pid, late) {
		t.Fatal("a result after the stop was delivered: it goes to the dead letters, its work leased to no one")
	}
}

type actorFunc func(actor.Context)

func (f actorFunc) Receive(c actor.Context) { f(c) }
