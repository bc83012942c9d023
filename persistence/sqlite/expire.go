package sqlite

import (
	"context"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// expirableSQL selects, oldest submission first, up to ?3 messages that can
// expire (pending or retry) without a lease live at ?2: those submitted
// before ?1, from the partial index messages_live, and those whose own
// validity_until is at or before ?2, from messages_valid_until. Each
// query repeats its index's condition word for word (SQLite uses a partial
// index only for a query that names its condition), so the sweep costs
// O(limit) whatever the store holds.
const expirableSQL = `SELECT id FROM (
	SELECT id, submitted_at FROM (SELECT m.id, m.submitted_at FROM messages m INDEXED BY messages_live
		WHERE m.state IN ('pending', 'retry') AND m.submitted_at < ?1
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.lease_until > ?2)
		ORDER BY m.submitted_at LIMIT +?3)
	UNION
	SELECT id, submitted_at FROM (SELECT m.id, m.submitted_at FROM messages m INDEXED BY messages_valid_until
		WHERE m.validity_until IS NOT NULL AND m.state IN ('pending', 'retry') AND m.validity_until <= ?2
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.lease_until > ?2)
		ORDER BY m.validity_until LIMIT +?3)
) ORDER BY submitted_at LIMIT +?3`

// ExpireMessages implements persistence.Store (persistence.Expire decides).
func (s *Store) ExpireMessages(ctx context.Context, req persistence.ExpireRequest) ([]messages.Message, error) {
	const op = "expire messages"
	if err := s.precheck(op, req.Validate()); err != nil {
		return nil, err
	}
	return s.sweep(ctx, op, s.write, req.Now, query(expirableSQL, toDB(req.SubmittedBefore), toDB(req.Now), req.Limit),
		func(l *persistence.Loaded, c *persistence.Changes, m *persistence.Row) bool {
			return persistence.Expire(l, c, m, req)
		})
}
