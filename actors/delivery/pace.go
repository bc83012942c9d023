package delivery

import (
	"time"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
)

// pace is the part of a worker's step that is not its dispatcher's: whether
// its frontend can take deliveries now (else claims are held), how soon it
// looks for work without being kicked, when it wakes up next, and whether
// it offers its room on the handover board. Pure: the shell reads what
// these rest on into a reading at each step and carries out the answers.
type pace struct {
	mode messages.FrontendMode
}

// reading is what a worker's step reads of the world.
type reading struct {
	// fenceIdle is the ring fence's idle poll (ring.Fence.IdlePoll): how
	// often to look for work other instances of the site committed; zero
	// without a fence, or when the store is this instance's alone.
	fenceIdle time.Duration
	// busUp: the delivery bus is up.
	busUp bool
	// waiting: polls wait (Dispatcher.Waiting).
	waiting bool
	// registered: the in-process frontend's actor is registered.
	registered bool
	// client: the smpp frontend's client started; bound: it is bound.
	client, bound bool
	// pacedUntil is until when the smpp frontend takes no new message:
	// its submit rate leaves no slot in time to one claimed now, or its
	// SMSC throttled it (smppout.Client.PacedUntil; zero: it takes one).
	pacedUntil time.Time
	// inFlight, when positive, is the most deliveries the frontend may
	// have under way now (Dispatcher.Limit): an smpp frontend's, what its
	// submit rate sends in time (smppout.Client.InFlight).
	inFlight int
}

// held reports whether claims wait (Dispatcher.Hold) because the frontend
// cannot take deliveries now: an in-process frontend that is not
// registered (yet: its registration kicks the worker), an smpp frontend
// that is not bound (messages wait in the outbox instead of using up their
// attempts; the bind kicks the worker) or whose submit rate leaves no slot
// in time, or whose SMSC throttled it (the same: a message claimed would
// wait, or be a retry without being sent; the worker wakes up when the
// pace lets one go).
func (p pace) held(r reading) bool {
	switch p.mode {
	case messages.ModeActor:
		return !r.registered
	case messages.ModeSMPP:
		return !r.client || !r.bound || !r.pacedUntil.IsZero()
	}
	return false
}

// idle is how soon to look for work again without being kicked (zero: not
// at all): in a site of several instances the one that commits work we may
// take cannot kick us. A pull worker looks only while polls wait; with the
// bus up the bus hands the work out.
func (p pace) idle(r reading) time.Duration {
	if (p.mode == messages.ModePull && !r.waiting) || r.busUp {
		return 0
	}
	return r.fenceIdle
}

// next is when the worker wakes up next (zero: not until a message comes):
// the earliest of due (what its dispatcher, bus link and spans ask for),
// its idle poll, while an smpp client is not bound a look whether it
// bound should the bind's kick be lost, and while its submit rate leaves
// no slot in time, when it leaves one.
func (p pace) next(now time.Time, r reading, due ...time.Time) time.Time {
	var next time.Time
	for _, t := range due {
		next = clock.Earliest(next, t)
	}
	if i := p.idle(r); i > 0 {
		next = clock.Earliest(next, now.Add(i))
	}
	if r.client && !r.bound {
		next = clock.Earliest(next, now.Add(smppHeldPoll))
	}
	return clock.Earliest(next, r.pacedUntil)
}

// offers reports whether the worker puts its room on the handover board:
// a pull worker always; a push worker when the store is this instance's
// alone, or with the bus up: on a shared store a push delivery is the ring
// owner's, unless the bus is up, when it is the bus's, and this instance's
// commits may hand it over too.
func (p pace) offers(r reading) bool {
	return p.mode == messages.ModePull || r.fenceIdle == 0 || r.busUp
}
