package peer

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

func TestBookAddressesAndRemovedPeers(t *testing.T) {
	b := NewBook()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := &Health{}
	b.SetAddress("10.0.0.9:8443", h)
	list := b.List()
	if len(list) != 1 || list[0].Node != "10.0.0.9:8443" || list[0].Address != "10.0.0.9:8443" || list[0].State != messages.PeerUnknown {
		t.Fatalf("an address not asked yet: %+v", list)
	}
	for range 3 {
		h.Observe(t0, errors.New("connection refused"))
	}
	b.SetAddress("10.0.0.9:8443", h)
	if p := b.List()[0]; p.State != messages.PeerUnhealthy || p.ConsecutiveFailures != 3 || p.LastError != "connection refused" {
		t.Fatalf("after 3 failed calls: %+v", p)
	}
	b.ForgetAddress("10.0.0.9:8443")
	if list := b.List(); len(list) != 0 {
		t.Fatalf("a forgotten address is listed: %+v", list)
	}

	// A removed peer is listed while messages wait for it.
	b.Entry("c").Discovered([]messages.PeerInstance{{Address: "10.0.0.3:8443", InstanceID: "c-0"}})
	b.ForgetAddress("c") // a name is not an address: kept
	b.Gone("c")
	b.SetQueueDepths(map[string]int64{"c": 2})
	if list := b.List(); len(list) != 1 || list[0].State != messages.PeerRemoved || list[0].ForwardQueueDepth != 2 || !b.Knows("c") {
		t.Fatalf("a removed peer with messages waiting: %+v", list)
	}
	b.SetQueueDepths(map[string]int64{})
	if list := b.List(); len(list) != 0 || !b.Knows("c") {
		t.Fatalf("a removed peer without messages: listed %+v (still known: %v)", list, b.Knows("c"))
	}
	b.Entry("c").Discovered([]messages.PeerInstance{{Address: "10.0.0.3:8443", InstanceID: "c-0"}})
	if list := b.List(); len(list) != 1 || list[0].State != messages.PeerUnknown {
		t.Fatalf("a removed peer discovered again: %+v", list)
	}
}

// TestBookDropsAStoppedActorsWrites: a peer actor's health check that
// completes while the actor is being stopped (its peer removed) writes
// after the supervisor's Gone; it must not make the peer read healthy
// again, or a message for its frontends would be taken as deliverable
// now (pending) instead of queued.
func TestBookDropsAStoppedActorsWrites(t *testing.T) {
	b := NewBook()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := b.Entry("c")
	old.Discovered([]messages.PeerInstance{{Address: "10.0.0.3:8443"}})
	old.SetRegistry([]string{"fe-c"})
	b.Gone("c")
	healthy := &Health{}
	healthy.Observe(t0, nil)
	old.SetHealth(healthy)
	old.Discovered([]messages.PeerInstance{{Address: "10.0.0.3:8443"}})
	if conflicts := old.SetRegistry([]string{"fe-c", "fe-x"}); conflicts != nil {
		t.Fatalf("a stale registry write reported conflicts %v", conflicts)
	}
	if peer, ok, known := b.Owner("fe-c"); peer != "c" || ok || !known {
		t.Fatalf("after a stale write, Owner(fe-c) = %q healthy=%v known=%v; want c, not healthy", peer, ok, known)
	}
	if _, _, known := b.Owner("fe-x"); known {
		t.Fatal("a stale registry write was recorded")
	}
	b.SetQueueDepths(map[string]int64{"c": 1})
	if p := b.List()[0]; p.State != messages.PeerRemoved || p.Address != "" {
		t.Fatalf("the removed peer after a stale write: %+v", p)
	}

	// The peer comes back: a new actor's entry writes, the old one's
	// still not.
	cur := b.Entry("c")
	cur.Discovered([]messages.PeerInstance{{Address: "10.0.0.3:8443"}})
	cur.SetHealth(healthy)
	down := &Health{}
	for range 3 {
		down.Observe(t0, errors.New("refused"))
	}
	old.SetHealth(down)
	if _, ok, _ := b.Owner("fe-c"); !ok {
		t.Fatal("the current actor's health was overwritten by a stale one")
	}
}

// TestBookLocal: our registry is empty (not nil) until set, and what
// Local returns is a copy.
func TestBookLocal(t *testing.T) {
	b := NewBook()
	if got := b.Local(); got == nil || len(got) != 0 {
		t.Fatalf("before SetLocal: %#v", got)
	}
	names := []string{"fe-a", "fe-b"}
	b.SetLocal(names)
	names[0] = "changed"
	got := b.Local()
	got[1] = "changed"
	if got := b.Local(); len(got) != 2 || got[0] != "fe-a" || got[1] != "fe-b" {
		t.Fatalf("after SetLocal: %v", got)
	}
}
