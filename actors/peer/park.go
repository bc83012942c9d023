package peer

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// pageTokens numbers the parking pages of every actor that parks (a
// peer's forward queue, the peers actor for a gone peer) and of every
// incarnation of one, so that an actor tells its own page's result from
// that of a page an incarnation before its restart started.
var pageTokens atomic.Uint64

// PageToken is the token of a new parking page (never 0).
func PageToken() uint64 { return pageTokens.Add(1) }

// ParkPage bounds one page of Park.
const ParkPage = 512

// Park moves one page of peer's pending messages (forward work not yet
// sent) to forward_queued with detail, publishes each move, and reports
// whether a full page moved (call again: there may be more). Messages for a
// peer that is not healthy, gone from discovery, or not yet found after a
// start are parked so they count down to forward_failed instead of
// waiting unseen. Callers page through it between other work.
func Park(ctx context.Context, store persistence.Store, now time.Time, peer, detail string,
	publish func(messages.StateChanged)) (more bool, err error) {
	ids, err := store.QueueForwards(ctx, now, peer, detail, ParkPage)
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		publish(messages.StateChanged{ID: id, State: messages.StateForwardQueued, At: now, Detail: detail})
	}
	return len(ids) == ParkPage, nil
}
