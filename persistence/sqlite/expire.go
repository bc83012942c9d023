package sqlite

import (
	"context"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// expirableSQL selects, oldest submission first, up to ?3 messages that can
// expire (pending or retry) submitted before ?1 without a lease live at ?2.
// It walks the partial index messages_live, whose condition it repeats
// word for word (SQLite uses a partial index only for a query that names
// its condition), so it costs O(limit) whatever the store holds.
const expirableSQL = `SELECT m.id FROM messages m INDEXED BY messages_live
	WHERE m.state IN ('pending', 'retry') AND m.submitted_at < ?1
	AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.lease_until > ?2)
	ORDER BY m.submitted_at LIMIT ?3`

// ExpireMessages implements persistence.Store (persistence.Expire decides).
func (s *Store) ExpireMessages(ctx context.Context, req persistence.ExpireRequest) ([]messages.Message, error) {
	const op = "expire messages"
	if err := s.precheck(op, req.Validate()); err != nil {
		return nil, err
	}
	return s.sweep(ctx, op, req.Now, query(expirableSQL, toDB(req.SubmittedBefore), toDB(req.Now), req.Limit),
		func(l *persistence.Loaded, c *persistence.Changes, m *persistence.Row) bool {
			return persistence.Expire(l, c, m, req)
		})
}
