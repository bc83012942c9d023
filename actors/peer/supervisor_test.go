package peer

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/transport"
)

// gateStore holds each QueueForwards until the test lets one through
// (pass), and records whose messages each was for; each moves moved.
type gateStore struct {
	persistence.Store
	pass  chan struct{}
	moved []string
	mu    sync.Mutex
	peers []string
}

func (s *gateStore) QueueForwards(ctx context.Context, _ time.Time, peer, _ string, _ int) ([]string, error) {
	s.mu.Lock()
	s.peers = append(s.peers, peer)
	s.mu.Unlock()
	select {
	case <-s.pass:
		return s.moved, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *gateStore) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.peers)
}

// started is a peer actor that does nothing but count its starts.
type started struct{ n *atomic.Int64 }

func (a started) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		a.n.Add(1)
	}
}

// startSupervisor spawns a peers actor on st, whose peer actors do
// nothing (each start counted in spawns), in a system of its own (stopped when
// the test ends), in a synctest bubble.
func startSupervisor(t *testing.T, st persistence.Store, spawns *atomic.Int64) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	cfg := testConfig(t, &peerNet{}, NewBook())
	cfg.Store = st
	cfg.Timeout = time.Hour
	props := func(string, actor.Producer) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor { return started{spawns} })
	}
	var discovery atomic.Pointer[actor.PID]
	prod, err := NewSupervisor(cfg, props, &discovery)
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	t.Cleanup(sys.Shutdown)
	return sys, sys.Root.Spawn(actor.PropsFromProducer(prod))
}

// TestSupervisorServesPeersWhileAGonePeerParks: the pages that park a
// gone peer's pending messages ran on the supervisor's mailbox, so a slow
// one held up the routing of every peer (kicks, PeerUp, the forward
// queues' PeerLinks), its stop included, for as long as the store took.
// They run on a goroutine of their own now, one at a time per peer: the
// supervisor spawns another peer meanwhile, a peer gone again while its
// page runs is parked again after it, and it stops at once.
func TestSupervisorServesPeersWhileAGonePeerParks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gateStore{pass: make(chan struct{})}
		var spawns atomic.Int64
		sys, sup := startSupervisor(t, st, &spawns)
		sys.Root.Send(sup, &messages.PeerUp{Node: "beta"})
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		synctest.Wait()
		if n := st.calls(); n != 1 {
			t.Fatalf("%d parks after beta went, want 1", n)
		}
		// beta's page is held: gamma is spawned meanwhile, and beta,
		// back and gone again, waits for the page under way.
		sys.Root.Send(sup, &messages.PeerUp{Node: "gamma"})
		sys.Root.Send(sup, &messages.PeerUp{Node: "beta"})
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		synctest.Wait()
		if n := spawns.Load(); n != 3 {
			t.Fatalf("%d peer actors spawned while beta's page was held, want 3 (beta, gamma, beta)", n)
		}
		if n := st.calls(); n != 1 {
			t.Fatalf("%d parks with beta's page held, want 1 (one page a peer at a time)", n)
		}
		st.pass <- struct{}{}
		synctest.Wait()
		if n := st.calls(); n != 2 {
			t.Fatalf("%d parks after the held page, want 2 (beta went again meanwhile)", n)
		}
		// The second page is held: the supervisor stops all the same.
		stopped := sys.Root.StopFuture(sup)
		synctest.Wait()
		if err := stopped.Wait(); err != nil {
			t.Fatalf("the supervisor did not stop while a page was held: %v", err)
		}
		time.Sleep(time.Second) // the held page's result, a dead letter, and its throttle
		synctest.Wait()
	})
}

// TestSupervisorEndsTheParkingOfAPeerBack: beta goes, its page (a full
// one: more may wait) is held, and beta comes back meanwhile: its own
// forward queue parks its messages now, so no page of the peers actor
// follows the held one.
func TestSupervisorEndsTheParkingOfAPeerBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &gateStore{pass: make(chan struct{}), moved: make([]string, ParkPage)}
		var spawns atomic.Int64
		sys, sup := startSupervisor(t, st, &spawns)
		sys.Root.Send(sup, &messages.PeerUp{Node: "beta"})
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		synctest.Wait()
		sys.Root.Send(sup, &messages.PeerUp{Node: "beta"})
		synctest.Wait()
		if n := spawns.Load(); n != 2 {
			t.Fatalf("%d starts of beta's actor, want 2 (back after it went)", n)
		}
		st.pass <- struct{}{}
		synctest.Wait()
		if n := st.calls(); n != 1 {
			t.Errorf("%d parks, want 1: beta is back, its queue parks its messages", n)
		}
		if err := sys.Root.StopFuture(sup).Wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// failFirstStore holds the first QueueForwards and fails it; the others pass.
type failFirstStore struct {
	persistence.Store
	release chan struct{}
	mu      sync.Mutex
	calls   int
}

func (s *failFirstStore) QueueForwards(ctx context.Context, _ time.Time, _, _ string, _ int) ([]string, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if n == 1 {
		<-s.release
		return nil, errors.New("store down")
	}
	return nil, nil
}

func (s *failFirstStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// TestSupervisorParksAPeerGoneAgainAfterAFailedPage: beta goes, its page
// is held, beta comes back and goes again, then the first page fails:
// beta's second going must still be parked (each was, when the pages ran
// on the mailbox), not left until the next start.
func TestSupervisorParksAPeerGoneAgainAfterAFailedPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &failFirstStore{release: make(chan struct{})}
		var spawns atomic.Int64
		sys, sup := startSupervisor(t, st, &spawns)
		sys.Root.Send(sup, &messages.PeerUp{Node: "beta"})
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		synctest.Wait() // beta's actor has stopped: its name is free again
		sys.Root.Send(sup, &messages.PeerUp{Node: "beta"})
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		synctest.Wait()
		close(st.release)
		synctest.Wait()
		if n := st.count(); n != 2 {
			t.Errorf("%d parks, want 2: beta's second going is never parked", n)
		}
		if err := sys.Root.StopFuture(sup).Wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSupervisorSpawnsAPeerBackWhoseLastActorIsStopping: a peer back
// (PeerUp) while the actor of its going (PeerGone) was still stopping was
// not spawned ("spawn: name exists": the actor was named after the peer),
// and discovery announces a peer only when it changes, so it had no actor,
// and its messages no forward queue, until its next change. It is spawned
// once the stopping one has stopped, unless it went again meanwhile.
func TestSupervisorSpawnsAPeerBackWhoseLastActorIsStopping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var spawns atomic.Int64
		sys, sup := startSupervisor(t, &gateStore{pass: make(chan struct{})}, &spawns)
		sys.Root.Send(sup, &messages.PeerUp{Node: "beta"})
		synctest.Wait()
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		sys.Root.Send(sup, &messages.PeerUp{Node: "beta"})
		synctest.Wait()
		if n := spawns.Load(); n != 2 {
			t.Fatalf("%d starts of beta's actor, want 2 (back after it went)", n)
		}
		// Back and gone again while its actor stops (whether the one back
		// started before it went again depends on how soon the stopping
		// actor stopped): in the end beta has no actor, none started late.
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		sys.Root.Send(sup, &messages.PeerUp{Node: "beta"})
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		synctest.Wait()
		if alive := actorsOf(sys, sup, "beta"); len(alive) > 0 {
			t.Fatalf("beta has an actor after it went again (%q, %d starts)", alive, spawns.Load())
		}
		if err := sys.Root.StopFuture(sup).Wait(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the held pages' results, dead letters, and their throttle
		synctest.Wait()
	})
}

// emptyStore has no pending message to park.
type emptyStore struct{ persistence.Store }

func (emptyStore) QueueForwards(context.Context, time.Time, string, string, int) ([]string, error) {
	return nil, nil
}

// countingNet is a versionNet that counts its health calls.
type countingNet struct {
	*versionNet
	health atomic.Int64
}

func (p *countingNet) Health(ctx context.Context, to transport.Target, h messages.Health) (messages.Health, error) {
	p.health.Add(1)
	return p.versionNet.Health(ctx, to, h)
}

// startRecordingSupervisor spawns a peers actor over tr on an empty store,
// its peers' queues recording the links they are sent (rec), discovery
// (unset: none) where it sends discovery's messages; edit changes the
// config first.
func startRecordingSupervisor(t *testing.T, tr transport.Peer, discovery *atomic.Pointer[actor.PID], edit ...func(*Config)) (Config, *actor.ActorSystem, *actor.PID, *links) {
	t.Helper()
	rec := &links{}
	cfg := testConfig(t, tr, NewBook())
	cfg.Store = emptyStore{}
	cfg.Queue = func(string) *actor.Props { return actor.PropsFromProducer(func() actor.Actor { return rec }) }
	for _, e := range edit {
		e(&cfg)
	}
	props := func(_ string, p actor.Producer) *actor.Props { return actor.PropsFromProducer(p) }
	prod, err := NewSupervisor(cfg, props, discovery)
	if err != nil {
		t.Fatal(err)
	}
	sys := newSystem()
	return cfg, sys, sys.Root.Spawn(actor.PropsFromProducer(prod)), rec
}

// TestSupervisorCallsAGonePeerBackForItsReports: a peer gone from
// discovery had its actor, and with it its queue, the only sender of the
// delivery_status reports owed to it, stopped: the reports never left
// although the peer still called us. A call from it now brings back an
// actor in gone mode at the instance discovery last listed: its queue
// gets a healthy link for the reports only (Gone), and the book keeps the
// peer removed. The actor stops at its first failed check (and calls
// nothing more), the peer's next call brings it back, and discovery
// listing the peer again ends the mode.
func TestSupervisorCallsAGonePeerBackForItsReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &countingNet{versionNet: &versionNet{}}
		cfg, sys, sup, rec := startRecordingSupervisor(t, tr, new(atomic.Pointer[actor.PID]))
		book := cfg.Book
		inst := []messages.PeerInstance{{Address: "beta:8443", InstanceID: "beta-0"}}
		linkIs := func(when string, healthy, gone bool) {
			t.Helper()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.all) == 0 {
				t.Fatalf("%s: the queue got no link", when)
			}
			if l := rec.all[len(rec.all)-1]; l.Healthy != healthy || l.Gone != gone || l.Addr != "beta:8443" {
				t.Fatalf("%s: the queue got %+v, want healthy %v, gone %v at beta:8443", when, l, healthy, gone)
			}
		}

		sys.Root.Send(sup, &messages.PeerUp{Node: "beta", Instances: inst})
		synctest.Wait()
		linkIs("discovered", true, false)
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		synctest.Wait()

		sys.Root.Send(sup, &messages.PeerContact{Peer: "beta"})
		synctest.Wait()
		linkIs("gone, after its call", true, true)
		if book.Healthy("beta") {
			t.Error("the gone peer's actor wrote it healthy in the book: it must read removed")
		}

		tr.set(true, false) // beta stops answering
		time.Sleep(cfg.HealthInterval)
		synctest.Wait()
		calls := tr.health.Load()
		time.Sleep(3 * cfg.HealthInterval)
		synctest.Wait()
		if n := tr.health.Load(); n != calls {
			t.Errorf("%d more health calls after a failed one: the gone peer's actor did not stop", n-calls)
		}

		tr.set(false, false)
		sys.Root.Send(sup, &messages.PeerContact{Peer: "beta"})
		synctest.Wait()
		linkIs("gone, after its next call", true, true)

		sys.Root.Send(sup, &messages.PeerUp{Node: "beta", Instances: inst})
		synctest.Wait()
		linkIs("discovered again", true, false)
		if !book.Healthy("beta") {
			t.Error("discovered again, beta is not healthy in the book")
		}
		_ = sys.Root.StopFuture(sup).Wait()
		sys.Shutdown()
	})
}

// TestSupervisorForgetsAPeerWhoseActorStopped: the transport kept what it
// made for a peer (the HTTPS client's pool of connections) after the peer
// left discovery, for good. Now each stop of a peer's actor, once its
// queue has stopped, tells Config.Forget: a peer gone from discovery, and
// a gone peer's actor that ended after its first failed check; nothing is
// forgotten while an actor of the peer runs.
func TestSupervisorForgetsAPeerWhoseActorStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var forgotten []string
		forgot := func(when string, want ...string) {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(forgotten, want) {
				t.Fatalf("%s: forgotten %q, want %q", when, forgotten, want)
			}
		}
		tr := &countingNet{versionNet: &versionNet{}}
		cfg, sys, sup, _ := startRecordingSupervisor(t, tr, new(atomic.Pointer[actor.PID]), func(c *Config) {
			c.Forget = func(peer string) {
				mu.Lock()
				forgotten = append(forgotten, peer)
				mu.Unlock()
			}
		})
		inst := []messages.PeerInstance{{Address: "beta:8443", InstanceID: "beta-0"}}

		sys.Root.Send(sup, &messages.PeerUp{Node: "beta", Instances: inst})
		sys.Root.Send(sup, &messages.PeerUp{Node: "gamma", Instances: []messages.PeerInstance{{Address: "gamma:8443"}}})
		synctest.Wait()
		forgot("discovered")
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		synctest.Wait()
		forgot("beta gone from discovery", "beta")

		// beta calls us: an actor in gone mode for its reports, which
		// stops at its first failed check.
		sys.Root.Send(sup, &messages.PeerContact{Peer: "beta"})
		synctest.Wait()
		forgot("beta's gone-mode actor running", "beta")
		tr.set(true, false)
		time.Sleep(cfg.HealthInterval)
		synctest.Wait()
		forgot("beta's gone-mode actor stopped", "beta", "beta")
		_ = sys.Root.StopFuture(sup).Wait()
		sys.Shutdown()
	})
}

// elsewhereNet is versionNet whose identity and health answers name the
// node in as (beta when unset): another node holding beta's address.
type elsewhereNet struct {
	*versionNet
	as atomic.Pointer[string]
}

func (p *elsewhereNet) rename(node string) string {
	if as := p.as.Load(); as != nil {
		return *as
	}
	return node
}

func (p *elsewhereNet) Identity(ctx context.Context, addr string) (messages.Identity, error) {
	id, err := p.versionNet.Identity(ctx, addr)
	id.Node = p.rename(id.Node)
	return id, err
}

func (p *elsewhereNet) Health(ctx context.Context, to transport.Target, h messages.Health) (messages.Health, error) {
	got, err := p.versionNet.Health(ctx, to, h)
	got.Node = p.rename(got.Node)
	return got, err
}

// rediscovers counts the PeerRediscovers discovery is sent.
type rediscovers struct{ n *atomic.Int64 }

func (r rediscovers) Receive(c actor.Context) {
	if _, ok := c.Message().(*messages.PeerRediscover); ok {
		r.n.Add(1)
	}
}

// TestSupervisorAsksDiscoveryToLookAgainWhenAnotherNodeAnswers: another
// node answering at a peer's address (the address reused, or given back
// to its owner) left discovery's view stale until its next poll, up to
// --dns-poll-interval later: meanwhile the peer's actor failed every
// check, and the peer that was at the address (or is back at it) stayed
// unknown. The actor asks discovery to poll now, once per node found
// there, and again after the peer answered in between.
func TestSupervisorAsksDiscoveryToLookAgainWhenAnotherNodeAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &elsewhereNet{versionNet: &versionNet{batch: true}}
		var asked atomic.Int64
		var discovery atomic.Pointer[actor.PID]
		cfg, sys, sup, rec := startRecordingSupervisor(t, tr, &discovery)
		discovery.Store(sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rediscovers{&asked} })))
		sys.Root.Send(sup, &messages.PeerUp{Node: "beta", Instances: []messages.PeerInstance{{Address: "beta:8443", InstanceID: "beta-0"}}})
		synctest.Wait()
		if l := rec.last(); !l.Healthy {
			t.Fatalf("first link %+v, want healthy", l)
		}
		if n := asked.Load(); n != 0 {
			t.Fatalf("discovery asked to poll %d times while beta answers as itself", n)
		}

		gamma := "gamma"
		tr.as.Store(&gamma)
		time.Sleep(3 * cfg.HealthInterval) // checks (health, then identity) find gamma
		synctest.Wait()
		if rec.last().Healthy {
			t.Fatalf("link %+v after gamma answered at beta's address, want unhealthy", rec.last())
		}
		if n := asked.Load(); n != 1 {
			t.Fatalf("discovery asked to poll %d times after gamma answered at beta's address for three checks, want once", n)
		}

		tr.as.Store(nil)
		time.Sleep(cfg.HealthInterval)
		synctest.Wait()
		if !rec.last().Healthy {
			t.Fatalf("link %+v after beta answered again, want healthy", rec.last())
		}
		tr.as.Store(&gamma)
		time.Sleep(cfg.HealthInterval)
		synctest.Wait()
		if n := asked.Load(); n != 2 {
			t.Fatalf("discovery asked to poll %d times after gamma came back at beta's address, want twice", n)
		}
		_ = sys.Root.StopFuture(sup).Wait()
		sys.Shutdown()
	})
}

// heldRegistryNet is beta at one address, healthy; its registry calls
// wait until release is closed (the first one closes asked), then answer
// beta's registry.
type heldRegistryNet struct {
	*versionNet
	release, asked chan struct{}
	once           sync.Once
}

func (p *heldRegistryNet) Registry(context.Context, transport.Target, messages.Registry) (messages.Registry, error) {
	p.once.Do(func() { close(p.asked) })
	<-p.release
	return messages.Registry{Node: "beta", Frontends: []string{"fe-beta"}}, nil
}

// actorsOf lists the live peer actors of peer under the peers actor sup
// (not their forward queues).
func actorsOf(sys *actor.ActorSystem, sup *actor.PID, peer string) []string {
	var ids []string
	for _, bucket := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, id := range bucket.Keys() {
			if name, ok := strings.CutPrefix(id, sup.Id+"/"); ok && !strings.Contains(name, "/") && peerOf(sup, actor.NewPID(sup.Address, id)) == peer {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// TestSupervisorLateAnswerToAStoppedPeerActorReachesNoOther: beta's actor
// has a registry exchange out when beta leaves discovery; beta then calls
// us, and its gone-mode actor was spawned under the same name, beta: the
// stopped actor's exchange answered to its PID, which now named the new
// actor. That one took an answer it never asked for and panicked (a
// gone-mode actor has no entry of the book to write), and a send racing
// with its start could panic the answering goroutine and end the node.
// Each actor of a peer has a name of its own now: the late answer goes to
// the dead letters, and the gone-mode actor ignores a registry answer
// anyway.
func TestSupervisorLateAnswerToAStoppedPeerActorReachesNoOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &heldRegistryNet{versionNet: &versionNet{}, release: make(chan struct{}), asked: make(chan struct{})}
		_, sys, sup, _ := startRecordingSupervisor(t, tr, new(atomic.Pointer[actor.PID]))
		var mu sync.Mutex
		var failures []any
		sys.EventStream.Subscribe(func(ev any) {
			if se, ok := ev.(*actor.SupervisorEvent); ok {
				mu.Lock()
				failures = append(failures, se.Reason)
				mu.Unlock()
			}
		})
		inst := []messages.PeerInstance{{Address: "beta:8443", InstanceID: "beta-0"}}
		sys.Root.Send(sup, &messages.PeerUp{Node: "beta", Instances: inst})
		<-tr.asked // healthy: its first registry exchange is out
		synctest.Wait()
		first := actorsOf(sys, sup, "beta")
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		synctest.Wait()
		sys.Root.Send(sup, &messages.PeerContact{Peer: "beta"}) // beta calls us: gone mode
		synctest.Wait()
		next := actorsOf(sys, sup, "beta")
		if len(first) != 1 || len(next) != 1 || next[0] == first[0] {
			t.Errorf("beta's actors: %q while discovered, %q in gone mode: want one each, the second not under the first one's name (its goroutines still send to it)", first, next)
		}
		close(tr.release) // the stopped actor's exchange answers
		synctest.Wait()
		time.Sleep(time.Second) // the dead letter's throttle
		synctest.Wait()
		mu.Lock()
		if len(failures) > 0 {
			t.Errorf("beta's gone-mode actor failed %d times after the answer to the registry exchange of the actor before it: %v", len(failures), failures)
		}
		mu.Unlock()
		_ = sys.Root.StopFuture(sup).Wait()
		sys.Shutdown()
	})
}
