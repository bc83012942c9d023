package delivery

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
)

// seat is a worker's place on the handover board: where it offers the room
// its dispatcher has, and from where it learns what the board granted it
// that has not come (see package handover). The worker's step calls owe
// before the dispatcher's round and offer after it. Its methods do nothing
// without a board.
type seat struct {
	board *handover.Board
	key   handover.Key
	self  *actor.PID
	// push: the worker's room counts what it is owed (a push frontend's
	// MaxInFlight); a pull worker's room is its waiting polls.
	push bool
	// offered is what the worker last put on the board.
	offered offered
}

type offered struct {
	n     int
	lease time.Duration
}

// owe tells a push frontend's dispatcher what the board owes it, before
// its round (Next). A pull worker spares the board's lock: only a push
// frontend's room counts what is owed (pushRoom).
func (s *seat) owe(d *Dispatcher, now time.Time) {
	if s.board == nil || !s.push {
		return
	}
	d.Owe(s.board.Owed(s.key, s.self))
}

// offer puts what the worker can take on the board, when it changed.
func (s *seat) offer(o offered) {
	if s.board == nil || o == s.offered {
		return
	}
	s.offered = o
	s.board.Offer(s.key, o.n, o.lease, s.self)
}
