package peer

// Parking is the rule by which an actor parks a peer's pending messages
// (Park) while the peer is not healthy or gone: a page at a time, each on
// a goroutine of the actor's own so that its mailbox is served meanwhile,
// one page at a time, and another after it when one is asked for while it
// runs. The forward queue parks its peer's messages by it (forward.Link),
// and the peers actor a gone peer's; each is its shell: it calls Park when
// Page says run, and feeds the page's result back in (Paged). It is pure:
// no actor, no store, no time. Not safe for concurrent use.
//
// States (the zero Parking is idle):
//
//	idle    --Start-->  due      (ask: the shell asks for a page)
//	due     --Page--->  running  (run: the shell runs Park)
//	running --Start-->  running, another page due after it (rerun)
//	running --Paged-->  due      (ask) after a full page or a rerun,
//	                    idle     otherwise
//	any     --End---->  nothing more is asked for (the peer is healthy or
//	                    back); a page under way runs to its end
//
// A failed page (the store down): a parker that ticks (the forward queue)
// ends the parking and tries again at its next tick (Retry), even when a
// parking began again while the page ran, so a store that is down is not
// asked again at once; one that does not (NoTick: the peers actor) leaves
// the failed page's messages for the next start (which parks every
// pending message), but a parking begun again while it ran pages at once:
// without a tick nothing else would.
type Parking struct {
	// NoTick: the parker has no tick (Retry is never called); see the
	// type's doc for what a failed page does then.
	NoTick bool
	// parking: a page is due (asked for) or under way.
	parking bool
	// running: a page is under way (Page said run, Paged has not come).
	running bool
	// rerun: the parking began again while a page was under way:
	// another page follows it.
	rerun bool
	// again: a page failed; the next Retry parks again.
	again bool
}

// Start begins parking (the peer turned unhealthy or went, or pending
// messages may wait): whether to ask for a page now (not when one is due
// already). While a page runs, the parking goes on after it instead: what
// asked for it (the peer found unhealthy again, a message committed
// meanwhile) may not be in that page.
func (p *Parking) Start() (ask bool) {
	if p.running {
		p.parking, p.rerun = true, true
		return false
	}
	if p.parking {
		return false
	}
	p.parking = true
	return true
}

// End ends the parking (the peer is healthy, or back): no page is asked
// for or run after the one under way. A failed page is still tried again
// at a Retry (the shell calls it only while the peer is not healthy).
func (p *Parking) End() { p.parking = false }

// Page takes a page asked for: whether to run it now. A parking ended
// since runs nothing; a page under way runs alone (the parking goes on
// after it).
func (p *Parking) Page() (run bool) {
	if !p.parking {
		return false
	}
	if p.running {
		p.rerun = true
		return false
	}
	p.running = true
	return true
}

// Paged records the result of the page under way: whether a full page
// moved (more may wait) or the error, and says whether to ask for the
// next page at once: after a full page, or when the parking began again
// while it ran, unless the parking ended meanwhile. A failed page waits
// for the next Retry (or, NoTick, see the type's doc).
func (p *Parking) Paged(more bool, err error) (ask bool) {
	rerun := p.rerun
	p.running, p.rerun = false, false
	switch {
	case err != nil && !p.NoTick:
		p.parking, p.again = false, true
	case !p.parking:
	case rerun || (more && err == nil):
		return true
	}
	p.parking = false
	return false
}

// Retry tries a failed page again (the parker's tick; the shell calls it
// only while the peer is not healthy, the pending messages must still
// count down to forward_failed): whether to ask for a page.
func (p *Parking) Retry() (ask bool) {
	if !p.again {
		return false
	}
	p.again = false
	return p.Start()
}

// Idle says nothing is due, under way or to be tried again: the shell may
// forget this Parking.
func (p *Parking) Idle() bool { return !p.parking && !p.running && !p.again }
