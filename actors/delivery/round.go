package delivery

import (
	"errors"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/supervision"
)

// roundDone is a store round's result, sent to its worker.
type roundDone struct {
	round       *Round
	completions []persistence.Completion
	claimed     *persistence.Claim
	err         error
}

// errRoundPanicked is the result of a store round that panicked (run).
var errRoundPanicked = errors.New("the store round panicked")

// run does one store round: the verdicts and the claim in one Write. A
// push frontend's claim is the ring's (this instance delivers its own
// tokens); a pull frontend's poll takes due messages of the whole ring,
// whichever instance it reached: the consumer's lease is the ownership (the
// store leases each row to one poll at a time), and a consumer connected to
// one instance of the site must still get every message.
//
// A round that panics reports too, failed, after the panic (which
// restarts the worker): its result comes to the next incarnation, whose
// drain or retirement waits for it (Dispatcher.Inherit), and whose
// bus link lets go the messages held for it (busLink.earlierDone). Left
// without a result, it kept them until its store call's timeout
// (persistence.CallTimeout, 30 s), past the node's drain.
func (w *Worker) run(r *Round) {
	reported := false
	defer func() {
		if !reported { // it panicked: CarryPanic (deferred after, so run before) sent the panic first
			w.sys.Root.Send(w.self, &roundDone{round: r, err: errRoundPanicked})
		}
	}()
	defer supervision.CarryPanic(w.sys.Root, w.self, nil)
	wr := persistence.Write{Outcomes: r.Outcomes}
	if r.Claim != nil {
		wr.Claims = []persistence.ClaimRequest{*r.Claim} // the round is the actor's: its claim is read, not changed
	}
	ctx, cancel := w.d.storeCtx()
	defer cancel()
	// A claim of what the bus named is the bus's share, not the ring's.
	written, claims, err := ring.Write(ctx, w.d.Store, w.d.Fence, w.d.Clock.Now(), wr, func(req persistence.ClaimRequest) bool {
		return w.fe.Mode != messages.ModePull && req.IDs == nil
	})
	res := &roundDone{round: r, completions: written.Completions, err: err}
	if len(claims) > 0 {
		res.claimed = claims[0]
	}
	reported = true
	w.sys.Root.Send(w.self, res)
}
