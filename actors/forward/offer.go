package forward

import "time"

// BoardOffer is a forward queue's standing offer on the handover board
// (see package handover): how many new forwards it takes at once (Flow's
// Offer). The board hears of it only when it changes. Not safe for
// concurrent use.
type BoardOffer struct {
	board bool // there is a board to offer on
	n     int  // what the board was last told
}

// NewBoardOffer returns the offer of a queue with a board (board true) or
// without one (it never offers).
func NewBoardOffer(board bool) BoardOffer { return BoardOffer{board: board} }

// Set returns whether to tell the board n: when it changed, and only while
// the store is this instance's alone (idlePoll, the fence's, is 0): on a
// store other instances share, a forward is its ring owner's, so only
// claims take it.
func (o *BoardOffer) Set(n int, idlePoll time.Duration) bool {
	if !o.board || idlePoll > 0 || n == o.n {
		return false
	}
	o.n = n
	return true
}

// Withdraw returns whether to tell the board the queue takes nothing (it
// stops or restarts): when it offered something.
func (o *BoardOffer) Withdraw() bool {
	if o.n == 0 {
		return false
	}
	o.n = 0
	return true
}
