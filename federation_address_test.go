package switchboard_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// TestAddressNowHoldingAnotherNode: b's
// address comes to be served by another node, c (a host or pod IP reused;
// here the test's name resolution points b's address at c). Until a's
// checks notice, a's queue for b keeps calling that address: c is a peer
// of a, so it answers. The delivery_status a owes b is answered no_work by
// c and a settles it: the report is lost (b's copy stays forwarded for
// ever, and a keeps no work to send again). A new message for b's frontend
// is refused by c (dest_smsc is b) and a fails it for good (peer_rejected)
// instead of keeping it for b.
func TestAddressNowHoldingAnotherNode(t *testing.T) {
	fn := newFedNet()
	ca := fedConfig(t, fn, "a", "b", "c")
	// Production-like check and poll intervals on a: the address change is
	// noticed at a's next check, seconds later.
	ca.HealthInterval, ca.DNSPollInterval = 10*time.Second, 30*time.Second
	ca.ForwardMaxRetries = patientForwards
	a := startFed(t, fn, ca)
	b := startFed(t, fn, fedConfig(t, fn, "b", "a"))
	c := startFed(t, fn, fedConfig(t, fn, "c", "a"))
	addressMoves(t, fn, a, b, c, func() { fn.set("b", c.node.Addr()) })
}

// addressMoves is the scenario of the tests here, on a (a peer of b and
// c), b and c (peers of a): b forwards a message to a, whose frontend
// takes it; b's address comes to reach c (move, in effect when it
// returns); a's frontend acks the message, and a takes one for b's
// frontend; then b's address reaches b again. a's message must not have
// failed (c refused it: dest_smsc is b), and b's must be delivered (the
// report a owed b reached b, not c).
func addressMoves(t *testing.T, fn *fedNet, a, b, c *harness, move func()) {
	t.Helper()
	a.pullFrontend("fe-a", "1")
	b.pullFrontend("fe-b", "2")
	a.waitPeer("b", messages.PeerHealthy)
	a.waitPeer("c", messages.PeerHealthy)
	c.waitPeer("a", messages.PeerHealthy)
	a.routeWhenKnown("2", "fe-b")
	b.routeWhenKnown("1", "fe-a")

	id := b.submit("moved-1", "1555")
	b.waitState(id, messages.StateForwarded)
	got := a.pollOne("fe-a")

	bReal := b.node.Addr()
	move()
	a.ack("fe-a", messages.DeliveryResult{ID: got.ID, Status: messages.Delivered, Attempt: got.Attempt})
	a.waitState(id, messages.StateDelivered)
	// Accepted for b's frontend: pending, or forward_queued when a has
	// already found b unreachable at its address (c refuses calls for b).
	fwd := a.api().Submit("moved-2", "2555").ID
	time.Sleep(2 * time.Second)

	// b is back at its address: whatever a still owes it can go now.
	fn.set("b", bReal)
	a.waitPeer("b", messages.PeerHealthy)
	var m messages.Message
	polltest.Eventually(t, time.Minute, func() error {
		if m = a.message(fwd); m.State != messages.StateForwarded && m.State != messages.StateForwardFailed {
			return fmt.Errorf("a's message for b's frontend is %s", m.State)
		}
		return nil
	})
	if m.State == messages.StateForwardFailed {
		t.Errorf("a's message for b's frontend ended forward_failed (%s) because b's address briefly reached c; history %+v", m.Reason, m.History)
	}
	polltest.Eventually(t, 20*time.Second, func() error {
		if m := b.message(id); m.State != messages.StateDelivered {
			return fmt.Errorf("b's message %s is %s although a delivered it; a's outbox_depth=%d (the report was settled by c's no_work: lost)",
				id, m.State, a.status().OutboxDepth)
		}
		return nil
	})
}

// patientForwards is a's --forward-max-retries in these tests: with the
// harness's 100 ms interval, a minute in forward_queued before
// forward_timeout. The tests are about whom a's calls reach, not about
// that limit; with the harness's 50 (5 s), a loaded machine's slower
// health checks and TLS handshakes after b's return failed a's message
// for taking too long.
const patientForwards = 600

// dialHook, when set, hears every dial of the mtlsNode nodes.
var dialHook atomic.Pointer[func(from, addr string)]

// mtlsNode starts a node with mutual TLS (certificates of the CA in dir),
// its peers' symbolic addresses resolved by fn when it dials.
func mtlsNode(t *testing.T, fn *fedNet, dir, name string, set func(*switchboard.Config), others ...string) *harness {
	t.Helper()
	cfg := fedBase(t, name, others...)
	cfg.TLSCert, cfg.TLSKey = certs.NodeFiles(dir, name)
	cfg.TLSCA, _ = certs.CAFiles(dir)
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if f := dialHook.Load(); f != nil {
			(*f)(name, addr)
		}
		real, err := fn.resolve(name, addr)
		if err != nil {
			return nil, err
		}
		var d net.Dialer
		return d.DialContext(ctx, network, real)
	}
	if set != nil {
		set(&cfg)
	}
	n := nodetest.Embedded(t, cfg)
	h := &harness{t: t, node: n, cfg: cfg, base: "https://" + n.Addr(), client: trustingClient(t, cfg.TLSCA)}
	t.Cleanup(func() { h.stop() })
	fn.set(name, n.Addr())
	return h
}

// TestAddressNowHoldingAnotherNodeUnderMutualTLS: the same as
// TestAddressNowHoldingAnotherNode with
// certificates checked. a lists a fourth address that never answers (its
// identity calls take --http-timeout), so a discovery poll takes that
// long; the poll that finds c at b's address makes the peer client expect
// c there at once, while b's queue runs until the poll ends.
func TestAddressNowHoldingAnotherNodeUnderMutualTLS(t *testing.T) {
	dir := t.TempDir()
	if err := certs.InitCA(dir, []string{"a", "b", "c"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hole.Close() })
	go func() { // accepts, never answers
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	fn := newFedNet()
	fn.set("d", hole.Addr().String())
	a := mtlsNode(t, fn, dir, "a", func(c *switchboard.Config) {
		c.HealthInterval, c.DNSPollInterval, c.HTTPTimeout = 10*time.Second, time.Second, 5*time.Second
		c.ForwardMaxRetries = patientForwards
	}, "b", "c", "d")
	b := mtlsNode(t, fn, dir, "b", nil, "a")
	c := mtlsNode(t, fn, dir, "c", nil, "a")
	addressMoves(t, fn, a, b, c, func() {
		asked := make(chan struct{})
		var once sync.Once
		hook := func(from, addr string) {
			if from == "a" && addr == symbolic("b") {
				once.Do(func() { close(asked) })
			}
		}
		dialHook.Store(&hook)
		t.Cleanup(func() { dialHook.Store(nil) })
		fn.set("b", c.node.Addr())
		// a's next new connection to b's address is discovery's identity
		// call (calls to b reuse their kept-alive connection).
		select {
		case <-asked:
		case <-time.After(15 * time.Second):
			t.Fatal("a never dialled b's address again")
		}
		time.Sleep(300 * time.Millisecond)
	})
}
