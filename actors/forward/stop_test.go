package forward

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
	"github.com/switchboard-dev/switchboard/polltest"
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

// stopRig is b's queue over a real SQLite store holding m1, pending with
// its forward to b due, the peer healthy.
type stopRig struct {
	base    *sqlite.Store
	sys     *actor.ActorSystem
	q       *actor.PID
	metrics *Metrics
	mu      sync.Mutex
	changes []messages.StateChanged
}

// newStopRig starts the rig; wrap wraps its store (nil: none), peer is b.
func newStopRig(t *testing.T, wrap func(persistence.Store) persistence.Store, peer transport.Peer) *stopRig {
	t.Helper()
	r := &stopRig{base: sqlitetest.Open(t)}
	if _, err := r.base.Accept(context.Background(), time.Now(), []persistence.NewMessage{{ID: "m1", SourceMSISDN: "1", DestinationMSISDN: "2",
		Body: "hi", SourceSMSC: "a", DestSMSC: "b", Frontend: "fe-b", State: messages.StatePending, Detail: "routed to b",
		Work: &persistence.WorkSpec{Kind: persistence.WorkForward, Target: "b", DueAt: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	var st persistence.Store = r.base
	if wrap != nil {
		st = wrap(st)
	}
	var err error
	if r.metrics, err = NewMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Node: "a", Peer: "b", Owner: "a-0", Store: st, Transport: peer, Clock: clock.Real{},
		Policy: DefaultPolicy(), Timeout: time.Second, Logger: slog.New(slog.DiscardHandler), Metrics: r.metrics,
		Publish: func(ch messages.StateChanged) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.changes = append(r.changes, ch)
		}}
	r.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(r.sys.Shutdown)
	r.q = r.sys.Root.Spawn(actor.PropsFromProducer(New(cfg)))
	r.sys.Root.Send(r.q, messages.PeerLink{Healthy: true, Addr: "b:1", ForwardBatch: true})
	return r
}

// wait waits for h's call to be held.
func (r *stopRig) wait(t *testing.T, h *holding, what string) {
	t.Helper()
	select {
	case <-h.inside:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never started", what)
	}
}

// stop stops the queue, then releases what h held.
func (r *stopRig) stop(t *testing.T, h *holding) {
	t.Helper()
	if err := r.sys.Root.StopFuture(r.q).Wait(); err != nil {
		t.Fatal(err)
	}
	close(h.release)
}

// published waits for m1's change to state to be published.
func (r *stopRig) published(t *testing.T, state messages.State, why string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r.mu.Lock()
		got := slices.Clone(r.changes)
		r.mu.Unlock()
		if slices.ContainsFunc(got, func(ch messages.StateChanged) bool { return ch.ID == "m1" && ch.State == state }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("m1 %s, but its change was never published (published %+v)", why, got)
		}
	}
}

// TestQueueThatStopsGivesItsWorkBack: a forward queue stopped (its peer
// gone from discovery, as when the peer's address briefly reached another
// node) while a store round that claimed work, or a request, was out:
// the result went to the dead letters and the work stayed leased to no
// one, so the queue spawned when the peer came back could not send it
// until the lease ended (2x --http-timeout + 10 s; the report a origin
// waited for stayed unsent that long). Now what the stopped queue's
// goroutines bring back is given back at once: claimable by the next
// queue straight away, its change to forward_queued published.
func TestQueueThatStopsGivesItsWorkBack(t *testing.T) {
	for _, held := range []string{"round", "request"} {
		t.Run(held, func(t *testing.T) {
			h := newHolding()
			peer := &holdingPeer{}
			wrap := func(st persistence.Store) persistence.Store { return st }
			if held == "round" {
				wrap = func(st persistence.Store) persistence.Store { return &holdingStore{Store: st, round: h} }
			} else {
				peer.forward = h
			}
			r := newStopRig(t, wrap, peer)
			r.wait(t, h, "the queue's "+held)
			r.stop(t, h)

			// The next queue's claim: at once, not a lease (12 s) later.
			ctx := context.Background()
			deadline := time.Now().Add(5 * time.Second)
			for {
				c, err := r.base.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkForward, Target: "b", Owner: "a-0",
					Limit: 10, Now: time.Now(), Lease: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if len(c.Work) == 1 {
					break
				}
				if time.Now().After(deadline) {
					msg, _ := r.base.GetMessage(ctx, "m1")
					t.Fatalf("5 s after the queue stopped with its %s out, m1's forward is still leased (m1 %s, %s)", held, msg.State, msg.History[len(msg.History)-1].Detail)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if held == "request" { // the round's own parking changed it before
				r.published(t, messages.StateForwardQueued, "went forward_queued (given back)")
			}
		})
	}
}

// secondClaimStore holds the second Write that claims.
type secondClaimStore struct {
	persistence.Store
	claims atomic.Int32
	round  *holding
}

func (s *secondClaimStore) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	if len(w.Claims) > 0 && s.claims.Add(1) == 2 {
		s.round.hold()
	}
	return s.Store.Write(ctx, now, w)
}

// firstOutcomeStore holds, once written, the first Write that records
// outcomes.
type firstOutcomeStore struct {
	persistence.Store
	held  atomic.Bool
	round *holding
}

func (s *firstOutcomeStore) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	written, err := s.Store.Write(ctx, now, w)
	if len(w.Outcomes) > 0 && s.held.CompareAndSwap(false, true) {
		s.round.hold()
	}
	return written, err
}

// TestQueueThatStopsPublishesWhatItRecords: the results a stopped queue
// records are published like any other, to Node.Subscribe, the events
// count, the failures log and the receipts: the forwarded of a result
// that waited in the flow for the next round (recorded by the give-back),
// and that of a round out at the stop (committed, its result read by no
// queue). Both were recorded and never published. Found by a review.
func TestQueueThatStopsPublishesWhatItRecords(t *testing.T) {
	t.Run("waiting in the flow", func(t *testing.T) {
		round, fwd := newHolding(), newHolding()
		r := newStopRig(t, func(st persistence.Store) persistence.Store { return &secondClaimStore{Store: st, round: round} },
			&holdingPeer{forward: fwd})
		r.wait(t, fwd, "the forward of m1")
		r.sys.Root.Send(r.q, &messages.KickPeer{Peer: "b"}) // a second round, held
		r.wait(t, round, "the second round")
		close(fwd.release) // b accepts m1: its forwarded waits for the next round
		for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(r.metrics.completedC.WithLabelValues("b")) != 1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the queue never read b's answer")
			}
		}
		r.stop(t, round)
		r.published(t, messages.StateForwarded, "recorded forwarded by the stopped queue")
	})
	t.Run("round out", func(t *testing.T) {
		round := newHolding()
		r := newStopRig(t, func(st persistence.Store) persistence.Store { return &firstOutcomeStore{Store: st, round: round} }, &holdingPeer{})
		r.wait(t, round, "the round recording m1")
		r.stop(t, round)
		if msg, err := r.base.GetMessage(context.Background(), "m1"); err != nil || msg.State != messages.StateForwarded {
			t.Fatalf("m1 %s (%v), want forwarded", msg.State, err)
		}
		r.published(t, messages.StateForwarded, "committed forwarded by the round out at the stop")
	})
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

// TestQueueThatStopsLeavesTheBoardOwingItNothing: a forward queue that
// stopped with a grant of the handover board on its way left the board
// owing it for good. Its successor used to have its PID (the peer's actor
// was named after the peer) and drop that debt at its start; the actors
// of a peer have names of their own now, so the queue drops it itself
// when it stops: the Work sent to it is gone with its mailbox, and its
// rows wait for their lease.
func TestQueueThatStopsLeavesTheBoardOwingItNothing(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	board := handover.NewBoard()
	cfg := Config{Node: "a", Peer: "b", Owner: "a-0", Store: sqlitetest.Open(t), Transport: &holdingPeer{}, Clock: clock.Real{},
		Policy: DefaultPolicy(), Timeout: time.Second, Logger: slog.New(slog.DiscardHandler), Metrics: m,
		Publish: func(messages.StateChanged) {}, Board: board}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	q := sys.Root.Spawn(actor.PropsFromProducer(New(cfg)))
	sys.Root.Send(q, messages.PeerLink{Healthy: true, Addr: "b:1", ForwardBatch: true})
	k := handover.Key{Kind: persistence.WorkForward, Target: "b"}
	polltest.Until(t, 10*time.Second, "the queue's offer", func() bool {
		n, _, _ := board.Take(k, 1) // granted: on its way to the queue
		return n == 1
	})
	if err := sys.Root.StopFuture(q).Wait(); err != nil {
		t.Fatal(err)
	}
	if n := board.Owed(k, q); n != 0 {
		t.Errorf("the board owes the stopped queue %d rows", n)
	}
	if n, _, _ := board.Take(k, 1); n != 0 {
		t.Errorf("the stopped queue's offer was taken up: %d rows granted", n)
	}
}
