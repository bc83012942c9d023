package forward

import (
	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/messages"
)

// Link is the pure state of a forward queue's link to its peer: the last
// PeerLink the peer actor sent (whether the peer is healthy, and what it
// announced), and, while the peer is not healthy, the parking of its
// pending messages (peer.Parking: to forward_queued, a page at a time),
// so that they count down to forward_failed instead of waiting unseen. A
// page is asked for by a parked message the queue sends itself; the
// methods that return park say whether to send it now. Not safe for
// concurrent use.
type Link struct {
	peer    messages.PeerLink
	parking peer.Parking
}

// Peer is the last PeerLink the peer actor sent (the zero PeerLink, not
// healthy, until it sends one).
func (l *Link) Peer() messages.PeerLink { return l.peer }

// forwards reports whether forwards go to the peer of p: it is healthy
// and discovered (a peer gone from discovery gets only its reports).
func forwards(p messages.PeerLink) bool { return p.Healthy && !p.Gone }

// Set takes the peer actor's verdict. A peer that turns unhealthy (or is
// gone from discovery) has its pending messages parked; one found healthy
// ends the parking (the queue sends them instead).
func (l *Link) Set(p messages.PeerLink) (park bool) {
	was := forwards(l.peer)
	l.peer = p
	if forwards(p) {
		l.parking.End()
		return false
	}
	return was && l.parking.Start()
}

// Pending says pending messages may wait that the queue has not parked:
// those from before a restart (a queue starts with the peer not healthy),
// or one committed while the peer turned unhealthy (the intake saw it
// healthy). They are parked while the peer is not healthy.
func (l *Link) Pending() (park bool) { return !forwards(l.peer) && l.parking.Start() }

// Tick tries a failed page again while the peer is not healthy: its
// pending messages must still count down to forward_failed.
func (l *Link) Tick() (park bool) { return !forwards(l.peer) && l.parking.Retry() }

// Page takes a parked message: whether to run a page now (peer.Parking's
// Page; a peer found healthy since has ended the parking).
func (l *Link) Page() bool { return l.parking.Page() }

// Paged records the result of the page under way (peer.Parking's Paged):
// whether to park the next page at once.
func (l *Link) Paged(more bool, err error) (park bool) { return l.parking.Paged(more, err) }
