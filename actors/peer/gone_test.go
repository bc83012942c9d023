package peer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/transport"
)

// firstDownNet: beta's first instance (beta-0:8443) does not answer, its
// second (beta-1:8443) does.
type firstDownNet struct{ transport.Peer }

// identityAt counts the identity calls per address.
var identityAt sync.Map

func called(addr string) int64 {
	v, _ := identityAt.LoadOrStore(addr, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func (firstDownNet) Identity(_ context.Context, addr string) (messages.Identity, error) {
	v, _ := identityAt.LoadOrStore(addr, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	if addr == "beta-0:8443" {
		return messages.Identity{}, errors.New("connection refused")
	}
	return messages.Identity{Node: "beta", InstanceID: "beta-1", ProtocolVersion: messages.ProtocolVersion}, nil
}

func (firstDownNet) Health(_ context.Context, to transport.Target, _ messages.Health) (messages.Health, error) {
	if to.Addr == "beta-0:8443" {
		return messages.Health{}, errors.New("connection refused")
	}
	return messages.Health{Node: "beta", Status: messages.HealthOK}, nil
}

func (firstDownNet) Registry(context.Context, transport.Target, messages.Registry) (messages.Registry, error) {
	return messages.Registry{}, errors.New("not now")
}

// TestGonePeerReportsReachItsAnsweringInstance: beta (a site of two
// instances) is gone from discovery; its first instance is down, its
// second up and calling us. The gone-mode actor is spawned at the
// instances discovery last listed, starting with the first; it stopped at
// its first failed check there without trying the second, and the next
// call spawned it at the first again: the reports owed to beta never
// left, however often beta-1 called. It tries each instance now. (And a
// check that passed in gone mode forgot the identity and moved on, as a
// failed one does: the link carried no capability.)
func TestGonePeerReportsReachItsAnsweringInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, sys, sup, rec := startRecordingSupervisor(t, firstDownNet{}, new(atomic.Pointer[actor.PID]))
		inst := []messages.PeerInstance{{Address: "beta-0:8443", InstanceID: "beta-0"}, {Address: "beta-1:8443", InstanceID: "beta-1"}}
		healthyAt := func() (bool, bool) { // healthy ordinary link, healthy gone link
			rec.mu.Lock()
			defer rec.mu.Unlock()
			var ord, gone bool
			for _, l := range rec.all {
				if l.Healthy && l.Addr == "beta-1:8443" {
					if l.Gone {
						gone = true
					} else {
						ord = true
					}
				}
			}
			return ord, gone
		}

		sys.Root.Send(sup, &messages.PeerUp{Node: "beta", Instances: inst})
		time.Sleep(3 * cfg.HealthInterval)
		synctest.Wait()
		if ord, _ := healthyAt(); !ord {
			t.Fatal("the ordinary actor never reached beta-1")
		}
		sys.Root.Send(sup, &messages.PeerGone{Node: "beta"})
		synctest.Wait()

		at0, at1 := called("beta-0:8443"), called("beta-1:8443")
		// beta-1 calls us every health interval for ten minutes.
		for range 60 {
			sys.Root.Send(sup, &messages.PeerContact{Peer: "beta"})
			time.Sleep(cfg.HealthInterval)
			synctest.Wait()
		}
		if _, gone := healthyAt(); !gone {
			rec.mu.Lock()
			n := len(rec.all)
			rec.mu.Unlock()
			t.Errorf("beta gone from discovery called us 60 times from beta-1, which answers, yet its queue never got a healthy link (%d links sent; identity calls meanwhile: beta-0 %d, beta-1 %d): the gone-mode actor checks beta-0 first each time and stops there, so the delivery_status reports owed to beta never leave", n, called("beta-0:8443")-at0, called("beta-1:8443")-at1)
		}
		_ = sys.Root.StopFuture(sup).Wait()
		sys.Shutdown()
	})
}

// TestGoneModeActorIgnoresARegistryAnswer: a gone-mode actor exchanges no
// registry, yet one could get an answer (the exchange of an actor of the
// peer before it, that answered to a PID it had come to hold): it wrote
// the peer's frontends to the entry of the book it does not have, and
// panicked. It ignores it now: the peer reads removed, claiming nothing.
func TestGoneModeActorIgnoresARegistryAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &links{}
		st := &regStore{}
		cfg := testConfig(t, &versionNet{}, NewBook())
		cfg.Store = st
		cfg.Queue = func(string) *actor.Props { return actor.PropsFromProducer(func() actor.Actor { return rec }) }
		cfg.Peer, cfg.Instances, cfg.Gone = "beta", []messages.PeerInstance{{Address: "beta:8443", InstanceID: "beta-0"}}, true
		sys := newSystem()
		var failures atomic.Int64
		sys.EventStream.Subscribe(func(ev any) {
			if _, ok := ev.(*actor.SupervisorEvent); ok {
				failures.Add(1)
			}
		})
		pid := sys.Root.Spawn(actor.PropsFromProducer(New(cfg)))
		synctest.Wait()
		if l := rec.last(); !l.Healthy || !l.Gone {
			t.Fatalf("first link %+v, want healthy, gone", l)
		}
		sys.Root.Send(pid, &exchanged{addr: "beta:8443", reg: messages.Registry{Node: "beta", Frontends: []string{"fe-beta"}}})
		synctest.Wait()
		if n := failures.Load(); n > 0 {
			t.Errorf("the gone-mode actor failed %d times on a registry answer", n)
		}
		if fe, ok := cfg.Book.Frontends("beta"); ok {
			t.Errorf("the gone peer's frontends were learned: %q", fe)
		}
		if got := st.stored(); len(got) > 0 {
			t.Errorf("the gone peer's registry was stored: %+v", got)
		}
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
	})
}
