package switchboard_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/actors/discovery/dnstest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
)

const srvName = "_switchboard._tcp.sites.test."

// srvConfig is a federated node found through the test's DNS zone.
func srvConfig(t *testing.T, z *dnstest.Zone, name string) switchboard.Config {
	cfg := testConfig(t)
	cfg.Name, cfg.InstanceID = name, name+"-0"
	cfg.Federation, cfg.InsecureSkipVerify = true, true
	cfg.DNSSRV, cfg.DNSServer = srvName, z.Addr
	cfg.DNSPollInterval = 300 * time.Millisecond
	cfg.HealthInterval = 100 * time.Millisecond
	cfg.RegistryInterval = 100 * time.Millisecond
	cfg.HTTPTimeout = 2 * time.Second
	return cfg
}

// publish adds a node's SRV record and its target's A record.
func publish(t *testing.T, z *dnstest.Zone, h *harness) []string {
	_, port, err := net.SplitHostPort(h.node.Addr())
	if err != nil {
		t.Fatal(err)
	}
	target := h.cfg.Name + ".sites.test."
	rrs := []string{
		fmt.Sprintf("%s 5 IN SRV 10 10 %s %s", srvName, port, target),
		fmt.Sprintf("%s 5 IN A 127.0.0.1", target),
	}
	for _, rr := range rrs {
		z.Add(t, rr)
	}
	return rrs
}

// peerAddress is the address h lists for peer ("" when it is not
// discovered now).
func (h *harness) peerAddress(peerName string) string {
	var peers []messages.PeerInfo
	h.must(200, "GET", "/api/peers", nil, &peers)
	for _, p := range peers {
		if p.Node == peerName {
			return p.Address
		}
	}
	return ""
}

// TestDiscoveryBySRV: nodes find each other through SRV records served by
// a DNS server in the test; a record added later is picked up, a record
// removed drops the peer, and forwarding works between nodes found so.
func TestDiscoveryBySRV(t *testing.T) {
	z := dnstest.Start(t)
	a := startNode(t, srvConfig(t, z, "a"))
	b := startNode(t, srvConfig(t, z, "b"))
	publish(t, z, a)
	publish(t, z, b)
	a.waitPeer("b", messages.PeerHealthy)
	b.waitPeer("a", messages.PeerHealthy)

	c := startNode(t, srvConfig(t, z, "c"))
	cRecords := publish(t, z, c)
	a.waitPeer("c", messages.PeerHealthy)
	c.waitPeer("b", messages.PeerHealthy)
	if got, want := a.peerAddress("c"), c.node.Addr(); got != want {
		t.Fatalf("a lists c at %q, want %q", got, want)
	}

	// Forwarding between peers found by SRV.
	c.pullFrontend("fe-c", "3")
	a.routeWhenKnown("3", "fe-c")
	id := a.submit("srv-1", "3555")
	got := c.pollOne("fe-c")
	c.ack("fe-c", messages.DeliveryResult{ID: got.ID, Status: messages.Delivered, Attempt: got.Attempt})
	a.waitState(id, messages.StateDelivered)

	// c's SRV record goes: a drops c (its registry stays, so messages for
	// fe-c would still queue for it).
	z.Remove(t, cRecords[0])
	polltest.Eventually(t, 10*time.Second, func() error {
		if addr := a.peerAddress("c"); addr != "" {
			return fmt.Errorf("a still lists c at %s", addr)
		}
		return nil
	})
	a.submitAs("srv-2", "3555", messages.StateForwardQueued)
	// c reads removed (not unknown) while a message waits for it.
	gone := a.waitPeer("c", messages.PeerRemoved)
	if gone.ForwardQueueDepth != 1 || gone.Address != "" {
		t.Fatalf("a lists the removed c as %+v", gone)
	}
	if m := scrape(t, a); !strings.Contains(m, `switchboard_peer_state{peer="c",state="removed"} 1`) {
		t.Fatalf("metrics do not show c removed:\n%s", m)
	}
}

// TestAddressThatNeverAnsweredIsAPeer: a configured address that is down
// from the start is listed under its address at once, its failed checks
// counted from the first, so it goes degraded then unhealthy (and the
// unhealthy alert's series exists); once it answers, its name replaces it.
func TestAddressThatNeverAnsweredIsAPeer(t *testing.T) {
	fn := newFedNet()
	a := startFed(t, fn, fedConfig(t, fn, "a", "b"))
	addr := symbolic("b")
	p := a.waitPeer(addr, messages.PeerUnhealthy)
	if p.Address != addr || p.ConsecutiveFailures < 3 || p.LastError == "" || p.LastSuccess != nil {
		t.Fatalf("a lists the silent address as %+v", p)
	}
	if m := scrape(t, a); !strings.Contains(m, `switchboard_peer_state{peer="`+addr+`",state="unhealthy"} 1`) {
		t.Fatalf("metrics do not show the address unhealthy:\n%s", m)
	}
	startFed(t, fn, fedConfig(t, fn, "b", "a"))
	a.waitPeer("b", messages.PeerHealthy)
	polltest.Eventually(t, 10*time.Second, func() error {
		var peers []messages.PeerInfo
		a.must(200, "GET", "/api/peers", nil, &peers)
		if len(peers) != 1 || peers[0].Node != "b" {
			return fmt.Errorf("a lists %+v, want b alone", peers)
		}
		return nil
	})
}
