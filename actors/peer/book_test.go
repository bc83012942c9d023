package peer

import (
	"errors"
	"reflect"
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

// TestBookOwnerPrefersDiscoveredHealthyClaims: among several peers claiming
// a frontend, a discovered healthy one serves it, then a discovered one,
// then any; by name among equals.
func TestBookOwnerPrefersDiscoveredHealthyClaims(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	healthy, down := &Health{}, &Health{}
	healthy.Observe(t0, nil)
	for range 3 {
		down.Observe(t0, errors.New("refused"))
	}
	// kind of each claimant: "stored" (known from a stored registry only),
	// "removed" (discovered, then gone), "down" (discovered, unhealthy),
	// "healthy" (discovered, healthy).
	cases := []struct {
		name    string
		peers   [][2]string // {name, kind}, in setup order
		owner   string
		healthy bool
	}{
		{"one claim", [][2]string{{"a", "removed"}}, "a", false},
		{"removed first by name loses to a healthy one", [][2]string{{"a", "removed"}, {"c", "healthy"}}, "c", true},
		{"stored first by name loses to a healthy one", [][2]string{{"a", "stored"}, {"c", "healthy"}}, "c", true},
		{"removed loses to a discovered unhealthy one", [][2]string{{"a", "removed"}, {"c", "down"}}, "c", false},
		{"healthy beats discovered unhealthy", [][2]string{{"a", "down"}, {"c", "healthy"}}, "c", true},
		{"two healthy: by name", [][2]string{{"c", "healthy"}, {"b", "healthy"}}, "b", true},
		{"two removed: by name", [][2]string{{"c", "removed"}, {"b", "stored"}}, "b", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBook()
			for _, p := range tc.peers {
				name, kind := p[0], p[1]
				if kind == "stored" {
					b.SetRegistry(name, []string{"fe-x"})
					continue
				}
				w := b.Entry(name)
				w.Discovered([]messages.PeerInstance{{Address: name + ":8443"}})
				w.SetRegistry([]string{"fe-x"})
				switch kind {
				case "removed":
					b.Gone(name)
				case "down":
					w.SetHealth(down)
				case "healthy":
					w.SetHealth(healthy)
				}
			}
			peer, ok, known := b.Owner("fe-x")
			if peer != tc.owner || ok != tc.healthy || !known {
				t.Errorf("Owner(fe-x) = %q healthy=%v known=%v, want %q healthy=%v", peer, ok, known, tc.owner, tc.healthy)
			}
		})
	}
}

// TestBookClaimDropsClaimsOfPeersNotDiscovered: a discovered peer's Claim
// takes its frontends from the peers not discovered now (gone, or known
// only from a stored registry), who keep the frontends no one else claims;
// it leaves discovered peers' claims alone, and a peer that comes back
// claims its frontends again.
func TestBookClaimDropsClaimsOfPeersNotDiscovered(t *testing.T) {
	b := NewBook()
	a := b.Entry("a")
	a.Discovered([]messages.PeerInstance{{Address: "a:8443"}})
	a.SetRegistry([]string{"fe-x", "fe-y"})
	b.Gone("a")                                  // a decommissioned: its registry stays
	b.SetRegistry("b", []string{"fe-x", "fe-z"}) // b only stored (down since start)
	d := b.Entry("d")
	d.Discovered([]messages.PeerInstance{{Address: "d:8443"}})
	d.SetRegistry([]string{"fe-x"})

	c := b.Entry("c")
	if took := c.Claim(); took != nil {
		t.Fatalf("a peer not discovered claimed: %+v", took)
	}
	c.Discovered([]messages.PeerInstance{{Address: "c:8443"}})
	c.SetRegistry([]string{"fe-x"})
	want := []Takeover{
		{Peer: "a", Taken: []string{"fe-x"}, Left: []string{"fe-y"}},
		{Peer: "b", Taken: []string{"fe-x"}, Left: []string{"fe-z"}},
	}
	if took := c.Claim(); !reflect.DeepEqual(took, want) {
		t.Fatalf("Claim = %+v, want %+v", took, want)
	}
	if took := c.Claim(); took != nil {
		t.Fatalf("second Claim = %+v, want nothing", took)
	}
	if fs, _ := b.Frontends("a"); !reflect.DeepEqual(fs, []string{"fe-y"}) {
		t.Errorf("a's frontends %v, want [fe-y]", fs)
	}
	if peer, _, _ := b.Owner("fe-y"); peer != "a" {
		t.Errorf("Owner(fe-y) = %q: a gone peer keeps what no one else claims", peer)
	}
	if peer, _, _ := b.Owner("fe-x"); peer != "c" {
		t.Errorf("Owner(fe-x) = %q, want c (d, discovered, keeps its claim; c is first by name)", peer)
	}
	if fs, _ := b.Frontends("d"); !reflect.DeepEqual(fs, []string{"fe-x"}) {
		t.Errorf("d's frontends %v: a discovered peer's claim was dropped", fs)
	}

	// a comes back and claims fe-x again: both claim it, by name a.
	a = b.Entry("a")
	a.Discovered([]messages.PeerInstance{{Address: "a:8443"}})
	if conflicts := a.SetRegistry([]string{"fe-x", "fe-y"}); !reflect.DeepEqual(conflicts, []string{"fe-x"}) {
		t.Errorf("conflicts %v, want [fe-x]", conflicts)
	}
	if peer, _, _ := b.Owner("fe-x"); peer != "a" {
		t.Errorf("Owner(fe-x) = %q after a came back, want a", peer)
	}
}
