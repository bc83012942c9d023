package sqlite

import (
	"context"
	"fmt"
	"sort"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// expiredDetail is the history and ledger detail of an expiry.
const expiredDetail = "message validity expired"

// expirableSQL selects up to ?5 messages in state ?1 or ?2 submitted before
// ?3 without a lease live at ?4.
const expirableSQL = `SELECT ` + rowColumns + ` FROM messages m
	WHERE m.state IN (?1, ?2) AND m.submitted_at < ?3
	AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.lease_until > ?4)
	LIMIT ?5`

// ExpireMessages implements persistence.Store.
//
// A message counts as leased when any of its outbox rows holds a live lease
// (lease_until > Now): a worker may be handing it over right now, and its
// outcome will settle it. The ledger gets a failed entry for each delivery
// or forward row removed; a message without such work gets one for its
// frontend (delivery), so a late ack for it is still recognised. Status rows
// (reports owed to an origin) are not the message's own work and stay.
func (s *Store) ExpireMessages(ctx context.Context, req persistence.ExpireRequest) ([]messages.Message, error) {
	const op = "expire messages"
	if req.Limit <= 0 {
		if err := s.check(op); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("sqlite: %s: limit %d must be positive", op, req.Limit)
	}
	now := toDB(req.Now)
	out, err := s.sweep(ctx, op, now, expirableSQL,
		[]any{string(messages.StatePending), string(messages.StateRetry), toDB(req.SubmittedBefore), now, req.Limit},
		func(m *msgRow, work []workRow, c *changes) bool {
			c.failWork(m, work, messages.StateFailed, messages.ReasonExpired, expiredDetail,
				workRow{kind: persistence.WorkDelivery, target: m.Frontend}, persistence.WorkDelivery, persistence.WorkForward)
			return true
		})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SubmittedAt.Equal(out[j].SubmittedAt) {
			return out[i].Seq < out[j].Seq
		}
		return out[i].SubmittedAt.Before(out[j].SubmittedAt)
	})
	return out, nil
}
