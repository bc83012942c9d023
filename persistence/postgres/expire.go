package postgres

import (
	"context"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// expireCandidatesSQL finds messages that can expire, oldest submission
// first: those submitted before $1, from the partial index messages_live
// (pending and retry messages only), and those whose own validity_until
// is at or before $2, from messages_valid_until; so it costs O(limit)
// whatever the store holds.
const expireCandidatesSQL = `
SELECT id FROM (
	(SELECT m.id, m.submitted_at, m.seq FROM messages m
	WHERE m.state IN ('pending', 'retry') AND m.submitted_at < $1
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.lease_until > $2)
	ORDER BY m.submitted_at, m.seq
	LIMIT $3)
	UNION
	(SELECT m.id, m.submitted_at, m.seq FROM messages m
	WHERE m.validity_until IS NOT NULL AND m.state IN ('pending', 'retry') AND m.validity_until <= $2
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.lease_until > $2)
	ORDER BY m.validity_until, m.seq
	LIMIT $3)
) c
ORDER BY submitted_at, seq
LIMIT $3`

// ExpireMessages implements persistence.Store in four round trips: begin and
// find candidates; lock their work and then them; write the changes of
// those that still qualify (persistence.Expire decides); commit.
func (s *Store) ExpireMessages(ctx context.Context, req persistence.ExpireRequest) ([]messages.Message, error) {
	if err := s.precheck("expire messages", req.Validate()); err != nil {
		return nil, err
	}
	return s.sweep(ctx, "expire messages", req.Now, expireCandidatesSQL, []any{norm(req.SubmittedBefore), norm(req.Now), req.Limit},
		func(l *persistence.Loaded, c *persistence.Changes, m *persistence.Row) bool {
			return persistence.Expire(l, c, m, req)
		})
}
