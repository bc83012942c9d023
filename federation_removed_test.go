package switchboard_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/discovery/dnstest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
)

// TestReportOwedToARemovedPeerReachesIt: b forwards a message to a; then
// b's SRV record goes, so a drops b from discovery (b still finds a, and a
// still answers b: a knows b from its registry). a's frontend then
// delivers the message. The delivery_status a owes b must still reach b:
// b's copy must become delivered, not stay forwarded for ever.
func TestReportOwedToARemovedPeerReachesIt(t *testing.T) {
	z := dnstest.Start(t)
	a := startNode(t, srvConfig(t, z, "a"))
	b := startNode(t, srvConfig(t, z, "b"))
	publish(t, z, a)
	bRecords := publish(t, z, b)
	a.waitPeer("b", messages.PeerHealthy)
	b.waitPeer("a", messages.PeerHealthy)

	a.pullFrontend("fe-a", "1")
	b.routeWhenKnown("1", "fe-a")
	id := b.submit("owed-1", "1555")
	b.waitState(id, messages.StateForwarded)
	got := a.pollOne("fe-a") // leased at a, not acked yet

	// b's record goes: a no longer discovers b.
	z.Remove(t, bRecords[0])
	polltest.Eventually(t, 10*time.Second, func() error {
		if addr := a.peerAddress("b"); addr != "" {
			return fmt.Errorf("a still lists b at %s", addr)
		}
		return nil
	})
	// b still sees a healthy: a answers its health calls.
	b.waitPeer("a", messages.PeerHealthy)

	a.ack("fe-a", messages.DeliveryResult{ID: got.ID, Status: messages.Delivered, Attempt: got.Attempt})
	a.waitState(id, messages.StateDelivered)

	// The report a owes b: b's message must end delivered.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if m := b.message(id); m.State == messages.StateDelivered {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	m := b.message(id)
	t.Fatalf("b's message %s is still %s 15s after a delivered it (a's status report to the removed peer b never leaves; a outbox_depth=%d); history %+v",
		id, m.State, a.status().OutboxDepth, m.History)
}
