package delivery

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
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

// seatOf is the seat on board (nil: none) of fe's worker, self.
func seatOf(board *handover.Board, fe messages.Frontend, self *actor.PID) seat {
	return seat{board: board, key: handover.Key{Kind: persistence.WorkDelivery, Target: fe.Name}, self: self,
		push: fe.Mode != messages.ModePull}
}

type offered struct {
	n     int
	lease time.Duration
}

// owe tells a push frontend's dispatcher what the board owes it, before
// its round (Next). When the round may claim its free slots
// (Dispatcher.ClaimsRoom) the worker's offer is withdrawn in the same lock
// as the debt is read (handover.Board.Withdraw): a grant then comes
// either before, and the claim leaves its rows their slots, or after, and
// finds no offer. The offer that follows the round (offer) offers again
// what the claim left. Reading the debt and withdrawing after the round
// let a grant fall between them, counted by neither the claim nor the
// debt (a claim of 5 and a grant of 5: 10 of 5 under way).
//
// A pull worker spares the board's lock: only a push frontend's room
// counts what is owed (pushRoom). Its offer may be granted while its
// claim is made too, as before: its room is the waiting polls, not a
// bound, it never counted what it is owed, and rows beyond the polls wait
// at hand for the next (Dispatcher.serve). A retiring one reads it: it
// waits for those rows before it stops (Dispatcher.Owe).
func (s *seat) owe(d *Dispatcher, now time.Time) {
	if s.board == nil || !s.push && !d.Retiring() {
		return
	}
	if d.ClaimsRoom(now) {
		s.offered = offered{}
		d.Owe(s.board.Withdraw(s.key, s.self))
		return
	}
	d.Owe(s.board.Owed(s.key, s.self))
}

// started is the start of an incarnation of the worker, restarted being
// whether one started before it. A new worker drops what an earlier one
// with its PID offered and was owed (handover.Board.Forget: a worker of a
// restarted supervisor gets the name, hence the PID, of one stopped with
// the supervisor, whose Work went with its mailbox): it starts with
// nothing under way. A restarted one keeps what it is owed: it has its
// predecessor's mailbox, so the rows granted to it still come
// (handover.Work, whose grant it settles first thing, Work.Arrived, even
// if handling it then panics) or are refunded by the intake (a commit
// that failed or stored none of them, or gave up). Dropped, its room did
// not count them: its first claim took MaxInFlight and the rows came on
// top of it. Its offer was withdrawn as it stopped (stopping).
func (s *seat) started(restarted bool) {
	if s.board != nil && !restarted {
		s.board.Forget(s.key, s.self)
	}
}

// retire withdraws the worker's offer as it retires and tells its
// dispatcher what the board owes it, in one call (handover.Board.Withdraw):
// a grant comes before, and the dispatcher waits for its Work before it
// stops (Dispatcher.Owe), or after, and finds no offer. With the debt of
// its last step, a grant made since was not counted: the worker stopped at
// once, and the Work came to a dead mailbox.
func (s *seat) retire(d *Dispatcher) {
	if s.board == nil {
		return
	}
	s.offered = offered{}
	d.Owe(s.board.Withdraw(s.key, s.self))
}

// stopped is the end of the worker for good (not a restart): its offer is
// withdrawn, and what the board owes it dropped (handover.Board.Forget):
// Work that comes now goes to a dead mailbox, and its debt would never be
// settled.
func (s *seat) stopped() {
	s.offered = offered{}
	if s.board != nil {
		s.board.Forget(s.key, s.self)
	}
}

// offer puts what the worker can take on the board, when it changed.
func (s *seat) offer(o offered) {
	if s.board == nil || o == s.offered {
		return
	}
	s.offered = o
	s.board.Offer(s.key, o.n, o.lease, s.self)
}
