package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// ErrStaleEpoch: a ring-fenced claim named an epoch that is not the stored
// ring epoch, or ranges its owner does not hold under it; or a PublishRing
// named a previous epoch that is no longer the stored one. Nothing changed.
var ErrStaleEpoch = errors.New("stale ring epoch")

// ErrLeadershipLost: a PublishRing made under a Leadership whose lock is
// not held any more (released, or its session ended). Nothing changed.
var ErrLeadershipLost = errors.New("the publisher does not hold the leader lock")

// TokenRange is an inclusive range of ring tokens (defined in messages).
type TokenRange = messages.TokenRange

// ServiceOf is the ring service whose owner works outbox rows of kind:
// delivery work is the delivery service's; forward and status work (both
// peer traffic) are the forward service's.
func ServiceOf(k WorkKind) string {
	if k == WorkDelivery {
		return messages.ServiceDelivery
	}
	return messages.ServiceForward
}

// RingClaim fences a claim by the ring: Epoch must be the stored ring epoch
// and every range must lie inside one range stored for (the claim's Owner,
// the service of the claim's kind) under it; else the claim fails with
// ErrStaleEpoch. Only rows whose token is in Ranges are claimed (and
// NextDue only considers those). Claimed rows record Epoch as their lease
// epoch.
type RingClaim struct {
	Epoch  uint64
	Ranges []TokenRange
}

// RangeOwner says who works one range of one service.
type RangeOwner struct {
	Service string
	Range   TokenRange
	Owner   string
}

// RingState is the ring assignment as stored: the fencing reference of
// every ring-fenced claim. Epoch 0 with no owners means none was published.
type RingState struct {
	Epoch uint64
	// Master is the publishing master's instance id, MasterAddress where
	// its slaves reach it (host:port).
	Master        string
	MasterAddress string
	// Owners: for each service, ranges that do not overlap (together they
	// usually cover the ring; a gap is a range nobody may claim).
	Owners []RangeOwner
	// Members is the published assignment's member list, kept as it was
	// given (for the status page, and so that a new master rebalances from
	// the last assignment instead of from scratch).
	Members []messages.RingMember
	// Absent are members a master saw lately that its assignment no
	// longer lists (dropped after a pause, say: they may be alive and join
	// again), with what they announced, kept so that an instance that
	// starts meanwhile knows them too (ring.Roster). None from a master
	// of an earlier version.
	Absent      []AbsentMember
	PublishedAt time.Time
}

// AbsentMember is a member missing from a stored assignment
// (RingState.Absent): its id, the capabilities it announced, and when a
// master last saw it in an assignment.
type AbsentMember struct {
	InstanceID   string    `json:"instance_id"`
	Capabilities []string  `json:"capabilities,omitempty"`
	LastSeen     time.Time `json:"last_seen"`
}

// RingStore is the ring part of a Store.
type RingStore interface {
	// Ring returns the stored assignment (the zero RingState when none).
	Ring(ctx context.Context) (RingState, error)
	// PublishRing replaces the stored assignment with s if, and only if,
	// the stored epoch is prev (compare-and-set; s.Epoch must be above
	// prev). Otherwise it returns ErrStaleEpoch and changes nothing: an old
	// master that is still talking cannot overwrite a newer assignment.
	//
	// lead, when not nil, is the publisher's leader lock: the store
	// confirms in the transaction that writes s, while it holds the stored
	// assignment against every other publication, that lead still holds
	// its lock, else it returns ErrLeadershipLost and changes nothing. A
	// Leadership of the store's own Elector is confirmed by the database
	// (a lock whose session ended counts as lost before its Lost channel
	// says so); any other (an elector outside the store) by its Lost
	// channel. So under lead, ErrStaleEpoch comes with the lock confirmed:
	// the stored epoch moved on under the publisher's view (its own earlier
	// publication whose answer was lost, or a former holder's that
	// confirmed its lock before lead was taken and committed after the
	// publisher read the store), and publishing again from the stored
	// epoch under the same lead is safe while every publisher names its
	// lock: no former holder can store anything more.
	PublishRing(ctx context.Context, lead Leadership, prev uint64, s RingState) error
}

// Leadership is a held leader lock (see Elector).
type Leadership interface {
	// Lost is closed when the lock is lost (the connection that holds it
	// broke) or released.
	Lost() <-chan struct{}
	// Release gives the lock up.
	Release(ctx context.Context) error
}

// LeadershipEnded reports whether l's Lost channel is closed: the lock
// was released, or its holder learnt that it was lost.
func LeadershipEnded(l Leadership) bool {
	select {
	case <-l.Lost():
		return true
	default:
		return false
	}
}

// Elector is implemented by stores that several instances share (Postgres:
// a session advisory lock on a connection of its own). The holder of name
// is the ring master of role auto; when its process dies the database ends
// its session and the lock is free for the next TryLead.
type Elector interface {
	// TryLead takes the lock name if it is free and returns it; it returns
	// (nil, nil) when another session holds it.
	TryLead(ctx context.Context, name string) (Leadership, error)
}

// ServerClock is a store shared by the instances of a site whose server
// keeps a clock of its own: the one clock they all reach, which each
// instance's clock is checked against at start.
type ServerClock interface {
	// ServerNow is the server's clock now.
	ServerNow(ctx context.Context) (time.Time, error)
}

// AbsentText is how a store keeps RingState.Absent: JSON, "" for none,
// each time as a store keeps times (Normalize).
func AbsentText(abs []AbsentMember) (string, error) {
	if len(abs) == 0 {
		return "", nil
	}
	kept := make([]AbsentMember, len(abs))
	for i, a := range abs {
		a.LastSeen = Normalize(a.LastSeen)
		kept[i] = a
	}
	b, err := json.Marshal(kept)
	return string(b), err
}

// AbsentOf reads what AbsentText wrote ("" is none).
func AbsentOf(text string) ([]AbsentMember, error) {
	if text == "" {
		return nil, nil
	}
	var abs []AbsentMember
	if err := json.Unmarshal([]byte(text), &abs); err != nil {
		return nil, fmt.Errorf("stored absent members: %w", err)
	}
	return abs, nil
}
