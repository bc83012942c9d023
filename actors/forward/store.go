package forward

import (
	"context"

	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/supervision"
)

// roundDone is a store round's result, sent back by its goroutine.
type roundDone struct {
	round   *FlowRound
	written persistence.Written
	claims  []*persistence.Claim
	err     error
}

// run does one store round: the results and the claims in one Write, each
// claim fenced by the ring.
func (q *Queue) run(r *FlowRound) {
	defer supervision.CarryPanic(q.sys.Root, q.self, nil)
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
	defer cancel()
	res := &roundDone{round: r}
	res.written, res.claims, res.err = ring.Write(ctx, q.cfg.Store, q.cfg.Fence, q.cfg.Clock.Now(),
		persistence.Write{Outcomes: r.Outcomes, Statuses: r.Updates, Claims: r.Claims}, nil)
	q.sys.Root.Send(q.self, res)
}

// parkPage moves one page of the peer's pending messages to
// forward_queued, on Receive (a page is at most peer.ParkPage rows; the
// mailbox is served between pages).
func (q *Queue) parkPage() (more bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
	defer cancel()
	more, err = peer.Park(ctx, q.cfg.Store, q.cfg.Clock.Now(), q.cfg.Peer, "peer "+q.cfg.Peer+" is not healthy", q.cfg.Publish)
	if err != nil {
		q.log.Error("queueing pending forwards failed; trying again at the next tick", "err", err)
	}
	return more, err
}
