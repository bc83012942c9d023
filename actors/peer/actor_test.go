package peer

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
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
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/transport"
)

// peerNet is a transport to one healthy peer, beta, that records the
// registries sent to it and answers them with an error (so that nothing
// is learned or stored).
type peerNet struct {
	transport.Peer
	mu   sync.Mutex
	sent []messages.Registry
}

func (p *peerNet) Identity(context.Context, string) (messages.Identity, error) {
	return messages.Identity{Node: "beta", InstanceID: "beta-0", ProtocolVersion: messages.ProtocolVersion}, nil
}

func (p *peerNet) Health(context.Context, transport.Target, messages.Health) (messages.Health, error) {
	return messages.Health{Node: "beta", Status: messages.HealthOK}, nil
}

func (p *peerNet) Registry(_ context.Context, _ transport.Target, r messages.Registry) (messages.Registry, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent = append(p.sent, r)
	return messages.Registry{}, errors.New("not now")
}

func (p *peerNet) registries() []messages.Registry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]messages.Registry(nil), p.sent...)
}

// noStore is a store the tests' peer actors never call.
type noStore struct{ persistence.Store }

// idle is an actor that ignores what it is sent (a peer's forward queue).
type idle struct{}

func (idle) Receive(actor.Context) {}

func testConfig(t *testing.T, tr transport.Peer, book *Book) Config {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry(), book)
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Node: "alpha", Transport: tr, Store: noStore{}, Book: book, Clock: clock.Real{},
		Logger: slog.New(slog.DiscardHandler), Metrics: m,
		HealthInterval: 10 * time.Second, RegistryInterval: time.Minute, Timeout: time.Second,
		LocalHealth: func() messages.Health { return messages.Health{Node: "alpha", Status: messages.HealthOK} },
		Publish:     func(messages.StateChanged) {},
		Queue:       func(string) *actor.Props { return actor.PropsFromProducer(func() actor.Actor { return idle{} }) },
	}
}

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}

// TestActorSendsTheBooksLocalFrontends: the registry a peer actor sends
// its peer names the frontends the book holds as ours at each exchange
// (the intake keeps them there).
func TestActorSendsTheBooksLocalFrontends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, book := &peerNet{}, NewBook()
		book.SetLocal([]string{"fe-a", "fe-b"})
		cfg := testConfig(t, tr, book)
		cfg.Peer, cfg.Instances = "beta", []messages.PeerInstance{{Address: "beta:8443"}}
		sys := newSystem()
		pid := sys.Root.Spawn(actor.PropsFromProducer(New(cfg)))
		synctest.Wait() // healthy: the first exchange
		want := []messages.Registry{{Node: "alpha", Frontends: []string{"fe-a", "fe-b"}}}
		if got := tr.registries(); !reflect.DeepEqual(got, want) {
			t.Fatalf("registries sent once healthy: %+v", got)
		}
		book.SetLocal([]string{"fe-c"})
		time.Sleep(cfg.RegistryInterval)
		synctest.Wait()
		want = append(want, messages.Registry{Node: "alpha", Frontends: []string{"fe-c"}})
		if got := tr.registries(); !reflect.DeepEqual(got, want) {
			t.Fatalf("registries sent after a change and a registry interval: %+v", got)
		}
		if err := sys.Root.StopFuture(pid).Wait(); err != nil {
			t.Fatal(err)
		}
		sys.Shutdown()
	})
}

// probe passes on every message it is sent but the actor system's own.
type probe chan any

func (p probe) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		p <- c.Message()
	}
}

// TestSupervisorRestartAsksDiscoveryForEveryPeer: the peers actor sends
// discovery a PeerResync when it restarted (it lost its children), not at
// its first start, and none while discovery is not spawned yet.
func TestSupervisorRestartAsksDiscoveryForEveryPeer(t *testing.T) {
	sys := newSystem()
	defer sys.Shutdown()
	got := make(chan any, 4)
	disc := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return probe(got) }))
	var discovery atomic.Pointer[actor.PID]
	var spawns atomic.Int64
	props := func(kind string, p actor.Producer) *actor.Props {
		if spawns.Add(1)%2 == 1 {
			panic("spawn failed") // the supervisor panics: its parent restarts it
		}
		return actor.PropsFromProducer(func() actor.Actor { return idle{} })
	}
	prod, err := NewSupervisor(testConfig(t, &peerNet{}, NewBook()), props, &discovery)
	if err != nil {
		t.Fatal(err)
	}
	sup := sys.Root.Spawn(actor.PropsFromProducer(prod))

	// A restart before discovery is spawned sends nothing; gamma is
	// spawned by the restarted actor.
	sys.Root.Send(sup, &messages.PeerUp{Node: "beta"})
	sys.Root.Send(sup, &messages.PeerUp{Node: "gamma"})
	polltest.Until(t, 10*time.Second, "gamma spawned", func() bool { return spawns.Load() == 2 })
	discovery.Store(disc)
	// A restart once it is.
	sys.Root.Send(sup, &messages.PeerUp{Node: "delta"})
	select {
	case m := <-got:
		if _, ok := m.(*messages.PeerResync); !ok {
			t.Fatalf("discovery got %T, want *messages.PeerResync", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no PeerResync after the restart")
	}
	if n := spawns.Load(); n != 3 {
		t.Fatalf("%d spawns, want 3", n)
	}
	select {
	case m := <-got:
		t.Fatalf("discovery got %+v as well: one restart, one resync", m)
	case <-time.After(100 * time.Millisecond):
	}
}

// regStore records the registries a peer actor stores.
type regStore struct {
	persistence.Store
	mu   sync.Mutex
	regs []persistence.PeerRegistry
}

func (s *regStore) PutPeerRegistry(_ context.Context, r persistence.PeerRegistry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.UpdatedAt = time.Time{}
	s.regs = append(s.regs, r)
	return nil
}

func (s *regStore) stored() []persistence.PeerRegistry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]persistence.PeerRegistry(nil), s.regs...)
}

// TestActorTakesFrontendsFromPeersGoneFromDiscovery: a frontend moved from
// alpha-old (decommissioned: known only from its stored registry) to beta;
// once beta's registry names it, alpha-old's claim is dropped in the book
// and in the store, so that it is not routed to alpha-old after a restart
// either. alpha-old keeps the frontend no one else claims.
func TestActorTakesFrontendsFromPeersGoneFromDiscovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		book, st := NewBook(), &regStore{}
		book.SetRegistry("a-old", []string{"fe-kept", "fe-moved"})
		cfg := testConfig(t, &peerNet{}, book)
		cfg.Store = st
		cfg.Peer, cfg.Instances = "beta", []messages.PeerInstance{{Address: "beta:8443"}}
		sys := newSystem()
		pid := sys.Root.Spawn(actor.PropsFromProducer(New(cfg)))
		synctest.Wait()
		sys.Root.Send(pid, &messages.PeerRegistryFrom{Peer: "beta", Frontends: []string{"fe-moved"}})
		synctest.Wait()
		want := []persistence.PeerRegistry{
			{Peer: "beta", Frontends: []string{"fe-moved"}},
			{Peer: "a-old", Frontends: []string{"fe-kept"}},
		}
		if got := st.stored(); !reflect.DeepEqual(got, want) {
			t.Errorf("stored registries %+v, want %+v", got, want)
		}
		if peer, healthy, _ := book.Owner("fe-moved"); peer != "beta" || !healthy {
			t.Errorf("Owner(fe-moved) = %q healthy=%v, want beta, healthy", peer, healthy)
		}
		if peer, _, _ := book.Owner("fe-kept"); peer != "a-old" {
			t.Errorf("Owner(fe-kept) = %q, want a-old", peer)
		}
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
	})
}

// versionNet is beta at one address that can go down and whose version
// (announcing forward_batch or not) can change.
type versionNet struct {
	transport.Peer
	mu          sync.Mutex
	down, batch bool
}

func (p *versionNet) set(down, batch bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down, p.batch = down, batch
}

func (p *versionNet) Identity(context.Context, string) (messages.Identity, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return messages.Identity{}, errors.New("connection refused")
	}
	id := messages.Identity{Node: "beta", InstanceID: "beta-0", ProtocolVersion: messages.ProtocolVersion}
	if p.batch {
		id.Capabilities = []string{messages.CapForwardBatch}
	}
	return id, nil
}

func (p *versionNet) Health(context.Context, transport.Target, messages.Health) (messages.Health, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return messages.Health{}, errors.New("connection refused")
	}
	return messages.Health{Node: "beta", Status: messages.HealthOK}, nil
}

func (p *versionNet) Registry(context.Context, transport.Target, messages.Registry) (messages.Registry, error) {
	return messages.Registry{}, errors.New("not now")
}

// links records the PeerLinks a peer actor sends its forward queue.
type links struct {
	mu  sync.Mutex
	all []messages.PeerLink
}

func (l *links) Receive(c actor.Context) {
	if m, ok := c.Message().(messages.PeerLink); ok {
		l.mu.Lock()
		l.all = append(l.all, m)
		l.mu.Unlock()
	}
}

func (l *links) last() messages.PeerLink {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all[len(l.all)-1]
}

// startBeta spawns, in a synctest bubble, the actor of peer beta (one
// instance, beta:8443) over tr, its queue recording the links it is sent,
// and waits for the first: healthy, with forward_batch.
func startBeta(t *testing.T, tr transport.Peer) (Config, *actor.ActorSystem, *actor.PID, *links) {
	t.Helper()
	rec := &links{}
	cfg := testConfig(t, tr, NewBook())
	cfg.Queue = func(string) *actor.Props { return actor.PropsFromProducer(func() actor.Actor { return rec }) }
	cfg.Peer, cfg.Instances = "beta", []messages.PeerInstance{{Address: "beta:8443", InstanceID: "beta-0"}}
	sys := newSystem()
	pid := sys.Root.Spawn(actor.PropsFromProducer(New(cfg)))
	synctest.Wait()
	if l := rec.last(); !l.Healthy || !l.ForwardBatch {
		t.Fatalf("first link %+v, want healthy with forward_batch", l)
	}
	return cfg, sys, pid, rec
}

// TestActorRereadsASingleInstancePeersCapabilitiesAfterAFailure: a peer
// with one instance that comes back as an older version (no
// forward_batch), after failed checks or after a request it refused, is
// not sent forward_batch on the identity read before.
func TestActorRereadsASingleInstancePeersCapabilitiesAfterAFailure(t *testing.T) {
	cases := []struct {
		name string
		// fail makes the actor see the failure; the peer is back (without
		// forward_batch) after it.
		fail func(tr *versionNet, pid *actor.PID, sys *actor.ActorSystem, cfg Config)
	}{
		{"failed checks", func(tr *versionNet, pid *actor.PID, sys *actor.ActorSystem, cfg Config) {
			tr.set(true, false)
			for range 3 {
				time.Sleep(cfg.HealthInterval)
				synctest.Wait()
			}
			tr.set(false, false)
		}},
		{"a failed request", func(tr *versionNet, pid *actor.PID, sys *actor.ActorSystem, cfg Config) {
			tr.set(false, false) // restarted between two checks
			sys.Root.Send(pid, messages.PeerContactFailed{Err: errors.New("404 Not Found")})
			synctest.Wait()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &versionNet{batch: true}
				cfg, sys, pid, rec := startBeta(t, tr)
				tc.fail(tr, pid, sys, cfg)
				time.Sleep(cfg.HealthInterval)
				synctest.Wait()
				if l := rec.last(); !l.Healthy || l.ForwardBatch {
					t.Errorf("link after the peer came back without forward_batch: %+v", l)
				}
				_ = sys.Root.StopFuture(pid).Wait()
				sys.Shutdown()
			})
		})
	}
}

// panicStore panics in its first PutPeerRegistry (its actor restarts).
type panicStore struct {
	persistence.Store
	panicked atomic.Bool
}

func (s *panicStore) PutPeerRegistry(context.Context, persistence.PeerRegistry) error {
	if s.panicked.CompareAndSwap(false, true) {
		panic("store")
	}
	return nil
}

// TestActorRestartKeepsTheLatestInstances: a peer actor restarted by its
// supervisor goes on with the instances discovery last announced, not
// with those it was spawned with.
func TestActorRestartKeepsTheLatestInstances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		book := NewBook()
		cfg := testConfig(t, &peerNet{}, book)
		cfg.Store = &panicStore{}
		cfg.Peer, cfg.Instances = "beta", []messages.PeerInstance{{Address: "beta-old:8443"}}
		sys := newSystem()
		pid := sys.Root.Spawn(actor.PropsFromProducer(New(cfg)))
		synctest.Wait()
		moved := []messages.PeerInstance{{Address: "beta-new:8443"}}
		sys.Root.Send(pid, &messages.PeerUp{Node: "beta", Instances: moved})
		sys.Root.Send(pid, &messages.PeerRegistryFrom{Peer: "beta", Frontends: []string{"fe"}}) // panics: restart
		synctest.Wait()
		if !cfg.Store.(*panicStore).panicked.Load() {
			t.Fatal("the store was not called: no restart")
		}
		if got := book.List(); len(got) != 1 || !reflect.DeepEqual(got[0].Instances, moved) {
			t.Fatalf("book after the restart: %+v, want instances %+v", got, moved)
		}
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
	})
}

// heldNet is a versionNet whose health calls wait while held is set.
type heldNet struct {
	*versionNet
	held   atomic.Pointer[chan struct{}]
	inside chan struct{}
}

func (p *heldNet) Health(ctx context.Context, to transport.Target, h messages.Health) (messages.Health, error) {
	if g := p.held.Swap(nil); g != nil {
		p.inside <- struct{}{}
		<-*g
	}
	return p.versionNet.Health(ctx, to, h)
}

// TestActorCheckPassingAfterItsIdentityWasForgotten: a health check under
// way (with no identity call: the peer's was known) when a request fails,
// or when discovery moves the peer to another address, passed and made
// the peer healthy with its identity forgotten meanwhile: the queue got a
// healthy link announcing no capability, opened its lanes and failed every
// message that needs one for good (peer_unsupported). Such a check says
// nothing of the capabilities now: the actor checks again, with the
// identity call, and every healthy link announces what the peer does.
func TestActorCheckPassingAfterItsIdentityWasForgotten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forget func(sys *actor.ActorSystem, pid *actor.PID)
	}{
		{"a failed request", func(sys *actor.ActorSystem, pid *actor.PID) {
			sys.Root.Send(pid, messages.PeerContactFailed{Err: errors.New("connection reset")})
		}},
		{"another address", func(sys *actor.ActorSystem, pid *actor.PID) {
			sys.Root.Send(pid, &messages.PeerUp{Node: "beta", Instances: []messages.PeerInstance{{Address: "beta-new:8443", InstanceID: "beta-0"}}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &heldNet{versionNet: &versionNet{batch: true}, inside: make(chan struct{})}
				cfg, sys, pid, rec := startBeta(t, tr)
				release := make(chan struct{})
				tr.held.Store(&release)
				time.Sleep(cfg.HealthInterval) // the next check starts, and waits in its health call
				<-tr.inside
				rec.mu.Lock()
				from := len(rec.all)
				rec.mu.Unlock()
				tc.forget(sys, pid)
				synctest.Wait()
				close(release)
				synctest.Wait()
				rec.mu.Lock()
				after := append([]messages.PeerLink(nil), rec.all[from:]...)
				rec.mu.Unlock()
				for _, l := range after {
					if l.Healthy && !l.ForwardBatch {
						t.Errorf("the queue got %+v: healthy, announcing no capability (links since the identity was forgotten %+v)", l, after)
					}
				}
				if len(after) == 0 || !after[len(after)-1].Healthy {
					t.Errorf("links after the held check %+v, want the peer healthy again", after)
				}
				_ = sys.Root.StopFuture(pid).Wait()
				sys.Shutdown()
			})
		})
	}
}

// movedNet is beta at one address, but its registry exchanges are
// answered by another node that holds the address now (answer): a
// misdirected refusal, or that node's own registry (a node of an earlier
// version, which does not check X-Federation-To). It records whom each
// call was for.
type movedNet struct {
	*versionNet
	answer func() (messages.Registry, error)
	mu     sync.Mutex
	to     []transport.Target
}

func (p *movedNet) record(to transport.Target) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.to = append(p.to, to)
}

func (p *movedNet) targets() []transport.Target {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]transport.Target(nil), p.to...)
}

func (p *movedNet) Health(ctx context.Context, to transport.Target, h messages.Health) (messages.Health, error) {
	p.record(to)
	return p.versionNet.Health(ctx, to, h)
}

func (p *movedNet) Registry(_ context.Context, to transport.Target, _ messages.Registry) (messages.Registry, error) {
	p.record(to)
	return p.answer()
}

// TestActorRegistryAnsweredByAnotherNodeFailsTheCheck: a registry
// exchange answered by another node (the peer's address reused) is a
// failed check at once: the queue's lanes close and the peer is degraded,
// rather than the answer only being logged while the queue goes on
// sending to whoever holds the address until the next health check. Every
// call names the peer it is for.
func TestActorRegistryAnsweredByAnotherNodeFailsTheCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func() (messages.Registry, error)
	}{
		{"refused as misdirected", func() (messages.Registry, error) {
			return messages.Registry{}, &transport.CallError{Kind: transport.Unreachable, Status: 421,
				Code: messages.CodeMisdirected, Message: `the call is for node "beta"; this is node "gamma"`}
		}},
		{"answered by an earlier version", func() (messages.Registry, error) {
			return messages.Registry{Node: "gamma", Frontends: []string{"fe-g"}}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr, book, rec := &movedNet{versionNet: &versionNet{}, answer: tc.answer}, NewBook(), &links{}
				cfg := testConfig(t, tr, book)
				cfg.Queue = func(string) *actor.Props { return actor.PropsFromProducer(func() actor.Actor { return rec }) }
				cfg.Peer, cfg.Instances = "beta", []messages.PeerInstance{{Address: "beta:8443", InstanceID: "beta-0"}}
				sys := newSystem()
				pid := sys.Root.Spawn(actor.PropsFromProducer(New(cfg)))
				synctest.Wait() // healthy, then the first exchange
				rec.mu.Lock()
				all := append([]messages.PeerLink(nil), rec.all...)
				rec.mu.Unlock()
				if len(all) < 2 || !all[0].Healthy || all[len(all)-1].Healthy {
					t.Errorf("links %+v, want healthy, then closed by the exchange", all)
				}
				if got := book.List(); len(got) != 1 || got[0].State != messages.PeerDegraded {
					t.Errorf("book %+v, want beta degraded", got)
				}
				if _, ok := book.Frontends("beta"); ok {
					t.Error("another node's registry was learned as beta's")
				}
				for _, to := range tr.targets() {
					if to != (transport.Target{Node: "beta", Addr: "beta:8443"}) {
						t.Errorf("a call was for %+v, want beta at beta:8443", to)
					}
				}
				_ = sys.Root.StopFuture(pid).Wait()
				sys.Shutdown()
			})
		})
	}
}
