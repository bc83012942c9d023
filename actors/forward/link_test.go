package forward

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestLink drives a Link through events (up and down: the peer actor's
// verdicts; pending: a pending message may wait; tick; page: a parked
// message arrives; more, last and fail: a page moved a full page, moved
// the last, or failed) and checks what each asks for: when the peer's
// health starts, ends or holds back a parking. The paging itself is
// peer.Parking's (TestParking).
func TestLink(t *testing.T) {
	storeDown := errors.New("store down")
	do := func(l *Link, ev string) bool {
		switch ev {
		case "up":
			return l.Set(messages.PeerLink{Healthy: true, Addr: "b:1"})
		case "down":
			return l.Set(messages.PeerLink{Addr: "b:1"})
		case "gone": // gone from discovery, still answering
			return l.Set(messages.PeerLink{Healthy: true, Addr: "b:1", Gone: true})
		case "pending":
			return l.Pending()
		case "tick":
			return l.Tick()
		case "page":
			return l.Page()
		case "more":
			return l.Paged(true, nil)
		case "last":
			return l.Paged(false, nil)
		case "fail":
			return l.Paged(false, storeDown)
		}
		t.Fatalf("unknown event %q", ev)
		return false
	}
	cases := []struct {
		name string
		// steps are "event=want", want 1 when the event asks for a page.
		steps string
	}{
		{"a start parks once until the parking ends",
			"pending=1 pending=0 page=1 last=0 page=0 tick=0 pending=1"},
		{"a healthy peer parks nothing",
			"up=0 pending=0 up=0 tick=0"},
		{"a peer turning unhealthy parks; staying so parks nothing more",
			"up=0 down=1 down=0 pending=0 page=1 last=0 down=0"},
		{"a peer found healthy ends the parking under way",
			"pending=1 page=1 more=1 up=0 page=0 down=1 page=1 last=0"},
		{"a failed page waits while the peer is healthy",
			"pending=1 page=1 fail=0 up=0 tick=0 tick=0 down=1 tick=0 page=1 last=0 tick=0"},
		{"a peer found healthy while a page runs ends the parking after it",
			"pending=1 page=1 up=0 more=0 page=0 tick=0"},
		{"a parking begun again while a page runs pages after it, not beside it",
			"pending=1 page=1 up=0 down=0 page=0 last=1 page=1 last=0 page=0"},
		{"a page that fails after the parking began again parks at the next tick",
			"pending=1 page=1 up=0 down=0 fail=0 page=0 tick=1 page=1 last=0"},
		{"a peer gone from discovery parks as one turning unhealthy, though it answers",
			"up=0 gone=1 gone=0 pending=0 page=1 last=0 tick=0 up=0 gone=1"},
		{"a kick while a page runs pages after it",
			"pending=1 page=1 pending=0 last=1 page=1 last=0 pending=1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var l Link
			for i, s := range strings.Fields(tc.steps) {
				ev, want, _ := strings.Cut(s, "=")
				if got := do(&l, ev); got != (want == "1") {
					t.Fatalf("step %d (%s): asked for a page %v, want %v", i, ev, got, want == "1")
				}
			}
		})
	}
}

func TestLinkKeepsThePeersLink(t *testing.T) {
	var l Link
	if l.Peer().Healthy {
		t.Fatal("a new link is healthy")
	}
	p := messages.PeerLink{Healthy: true, Addr: "b:1", ForwardBatch: true, TraceContext: true}
	l.Set(p)
	if l.Peer() != p {
		t.Fatalf("peer %+v, want %+v", l.Peer(), p)
	}
}
