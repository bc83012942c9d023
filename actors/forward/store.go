package forward

import (
	"context"
	"errors"

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
func (q *Queue) run(g *gate, r *FlowRound) {
	defer supervision.CarryPanic(q.sys.Root, q.self, nil)
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
	defer cancel()
	res := &roundDone{round: r}
	res.written, res.claims, res.err = ring.Write(ctx, q.cfg.Store, q.cfg.Fence, q.cfg.Clock.Now(),
		persistence.Write{Outcomes: r.Outcomes, Statuses: r.Updates, Claims: r.Claims}, nil)
	q.deliver(g, res)
}

// pageDone is a parking page's result, sent back by its goroutine.
type pageDone struct {
	token uint64
	more  bool
	err   error
}

// parkPage moves one page of the peer's pending messages to
// forward_queued (at most peer.ParkPage rows), on a goroutine of its own:
// the queue's mailbox is served meanwhile.
func (q *Queue) parkPage(ctx context.Context, token uint64) {
	defer supervision.CarryPanic(q.sys.Root, q.self, nil)
	more, err := peer.Park(ctx, q.cfg.Store, q.cfg.Clock.Now(), q.cfg.Peer, "peer "+q.cfg.Peer+" is not healthy", q.cfg.Publish)
	if err != nil && !errors.Is(ctx.Err(), context.Canceled) { // not the queue stopping
		q.log.Error("queueing pending forwards failed; trying again at the next tick", "err", err)
	}
	q.sys.Root.Send(q.self, &pageDone{token: token, more: more, err: err})
}
