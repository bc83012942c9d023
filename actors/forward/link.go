package forward

import "github.com/switchboard-dev/switchboard/messages"

// Link is the pure state of a forward queue's link to its peer: the last
// PeerLink the peer actor sent (whether the peer is healthy, and what it
// announced), and the parking of the peer's pending messages while it is
// not healthy, so that they count down to forward_failed instead of
// waiting unseen. Parking goes a page at a time (peer.Park), one page for
// each parked message the queue sends itself, each page on a goroutine of
// its own and one at a time, so that the queue's mailbox is served while
// a page runs. The methods that return park say whether to send that
// message now: only when no page is due already. Not safe for concurrent
// use.
type Link struct {
	peer messages.PeerLink
	// parking: a page is due (a parked message is on its way) or under
	// way.
	parking bool
	// running: a page is under way (Page said run, Paged has not come).
	running bool
	// rerun: the parking began again while a page was under way (the
	// peer was found healthy, then not): another page follows it.
	rerun bool
	// again: a page failed (the store was down); the next tick parks
	// again while the peer is not healthy.
	again bool
}

// Peer is the last PeerLink the peer actor sent (the zero PeerLink, not
// healthy, until it sends one).
func (l *Link) Peer() messages.PeerLink { return l.peer }

// Set takes the peer actor's verdict. A peer that turns unhealthy has its
// pending messages parked; one found healthy ends the parking (the queue
// sends them instead).
func (l *Link) Set(p messages.PeerLink) (park bool) {
	was := l.peer.Healthy
	l.peer = p
	if p.Healthy {
		l.parking = false
		return false
	}
	return was && l.start()
}

// Pending says pending messages may wait that the queue has not parked:
// those from before a restart (a queue starts with the peer not healthy),
// or one committed while the peer turned unhealthy (the intake saw it
// healthy). They are parked while the peer is not healthy.
func (l *Link) Pending() (park bool) { return !l.peer.Healthy && l.start() }

// Tick tries a failed page again while the peer is not healthy: its
// pending messages must still count down to forward_failed.
func (l *Link) Tick() (park bool) {
	if !l.again || l.peer.Healthy {
		return false
	}
	l.again = false
	return l.start()
}

// Page takes a parked message: whether to run a page now. A peer found
// healthy since ends the parking; a page under way runs alone (the
// parking goes on after it).
func (l *Link) Page() bool {
	if !l.parking || l.peer.Healthy {
		l.parking = false
		return false
	}
	if l.running {
		l.rerun = true
		return false
	}
	l.running = true
	return true
}

// Paged records the result of the page under way: whether a full page
// moved (more may wait) or the error. More, or a parking begun again
// while it ran, parks the next page at once; an error waits for the next
// tick; a peer found healthy meanwhile ends the parking.
func (l *Link) Paged(more bool, err error) (park bool) {
	rerun := l.rerun
	l.running, l.rerun = false, false
	switch {
	case err != nil:
		l.parking, l.again = false, true
	case !l.parking || l.peer.Healthy:
		l.parking = false
	case more || rerun:
		return true
	default:
		l.parking = false
	}
	return false
}

// start begins parking: whether a page is to be asked for (not when one
// is due already). While a page runs, the parking goes on after it
// instead (rerun): what asked for it (the peer found unhealthy again, a
// kick for a message committed meanwhile) may not be in that page.
func (l *Link) start() bool {
	if l.running {
		l.parking, l.rerun = true, true
		return false
	}
	if l.parking {
		return false
	}
	l.parking = true
	return true
}
