package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// purgeableSQL selects, for each resting state $1[i] with its cutoff
// $2[i] (in that order), up to $3 messages that came to rest before the
// cutoff and have no outbox row, oldest first; $3 in all. Each state is one
// range of the partial index messages_finalized (only resting messages are
// in it), so it costs O(limit) plus the messages skipped for their work:
// reports still owed to an origin, few.
const purgeableSQL = `
SELECT x.id FROM unnest($1::text[], $2::timestamptz[]) WITH ORDINALITY AS c(state, before, ord)
CROSS JOIN LATERAL (
	SELECT m.id FROM messages m
	WHERE m.state = c.state AND m.finalized_at < c.before
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id)
	ORDER BY m.finalized_at LIMIT $3) x
ORDER BY c.ord
LIMIT $3`

// purgeableArgs are purgeableSQL's arguments for req.
func purgeableArgs(req persistence.PurgeRequest) []any {
	states := slices.Sorted(maps.Keys(req.Before))
	names, cuts := make([]string, len(states)), make([]time.Time, len(states))
	for i, st := range states {
		names[i], cuts[i] = string(st), norm(req.Before[st])
	}
	return []any{names, cuts, req.Limit}
}

// withHistory is the statement that reads the messages whose ids keys (a
// relation with an id column, aliased k) names, each with the history
// entries its row holds (first_state, first_detail; second_state,
// second_at, second_detail, second_attempt, second_deferrals,
// second_last_at, second_resend) and its history rows as arrays, oldest first, from one
// walk of the message's history rows; scanWithHistory reads its rows.
func withHistory(keys string) string {
	return `SELECT ` + columns("m") + `, m.first_state, m.first_detail, m.second_state, m.second_at, m.second_detail,
	m.second_attempt, m.second_deferrals, m.second_last_at, m.second_resend,
	coalesce(h.states, '{}'), coalesce(h.ats, '{}'), coalesce(h.details, '{}'),
	coalesce(h.attempts, '{}'), coalesce(h.deferrals, '{}'), coalesce(h.lasts, '{}'), coalesce(h.resends, '{}')
FROM messages m JOIN ` + keys + ` ON m.id = k.id
LEFT JOIN LATERAL (SELECT array_agg(h.state ORDER BY h.ordinal) AS states, array_agg(h.at ORDER BY h.ordinal) AS ats,
	array_agg(h.detail ORDER BY h.ordinal) AS details, array_agg(h.attempt ORDER BY h.ordinal) AS attempts,
	array_agg(h.deferrals ORDER BY h.ordinal) AS deferrals, array_agg(h.last_at ORDER BY h.ordinal) AS lasts,
	array_agg(h.resend ORDER BY h.ordinal) AS resends
	FROM history h WHERE h.message_id = m.id) h ON true`
}

// scanWithHistory reads one row of withHistory, its history put together
// by persistence.HistoryOf.
func scanWithHistory(row scanner) (messages.Message, error) {
	var (
		first, second       messages.HistoryEntry
		secondAt            *time.Time
		states, details     []string
		ats                 []time.Time
		lasts               []*time.Time
		attempts, deferrals []int32
		resends             []bool
	)
	m, err := scanMessage(row, &first.State, &first.Detail, &second.State, &secondAt, &second.Detail,
		&second.Attempt, &second.Deferrals, &second.LastAt, &second.Resend, &states, &ats, &details, &attempts, &deferrals, &lasts, &resends)
	if err != nil {
		return messages.Message{}, err
	}
	if n := len(states); len(ats) != n || len(details) != n || len(attempts) != n || len(deferrals) != n || len(lasts) != n || len(resends) != n {
		return messages.Message{}, fmt.Errorf("message %q: history arrays disagree", m.ID)
	}
	first.At = m.CreatedAt
	if secondAt != nil {
		second.At = secondAt.UTC()
	}
	second.LastAt = utcOrNil(second.LastAt)
	rows := make([]messages.HistoryEntry, len(states))
	for i := range states {
		rows[i] = messages.HistoryEntry{State: messages.State(states[i]), At: ats[i].UTC(), Detail: details[i],
			Attempt: int(attempts[i]), Deferrals: int(deferrals[i]), LastAt: utcOrNil(lasts[i]), Resend: resends[i]}
	}
	m.History = persistence.HistoryOf(first, second, rows)
	return m, nil
}

// Purgeable implements persistence.Store: the candidates of a purge, read
// whole with their history, in one statement (one snapshot).
func (s *Store) Purgeable(ctx context.Context, req persistence.PurgeRequest) ([]messages.Message, error) {
	const op = "purgeable"
	if err := s.precheck(op, req.Validate()); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `WITH c AS (`+purgeableSQL+`) `+withHistory("c AS k")+` ORDER BY m.finalized_at`,
		purgeableArgs(req)...)
	if err != nil {
		return nil, s.fail(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (messages.Message, error) { return scanWithHistory(row) })
	if err != nil {
		return nil, s.fail(op, err)
	}
	return out, nil
}

// CountPurgeable implements persistence.Store: the candidates counted on
// the index, req.Limit in all.
func (s *Store) CountPurgeable(ctx context.Context, req persistence.PurgeRequest) (int64, error) {
	const op = "count purgeable"
	if err := s.precheck(op, req.Validate()); err != nil {
		return 0, err
	}
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (`+purgeableSQL+`) c`, purgeableArgs(req)...).Scan(&n); err != nil {
		return 0, s.fail(op, err)
	}
	return n, nil
}

// Purge implements persistence.Store (persistence.Purge decides).
func (s *Store) Purge(ctx context.Context, req persistence.PurgeRequest, ids []string) ([]persistence.Purged, error) {
	const op = "purge"
	if err := s.precheck(op, req.Validate()); err != nil {
		return nil, err
	}
	candidates, args := purgeableSQL, purgeableArgs(req)
	if ids != nil {
		candidates, args = `SELECT unnest($1::text[])`, []any{ids[:min(len(ids), req.Limit)]}
	}
	gone, err := s.sweep(ctx, op, req.Now, candidates, args, func(l *persistence.Loaded, c *persistence.Changes, m *persistence.Row) bool {
		return persistence.Purge(l, c, m, req)
	})
	if err != nil {
		return nil, err
	}
	out := make([]persistence.Purged, len(gone))
	for i, m := range gone {
		out[i] = persistence.Purged{ID: m.ID, State: m.State}
	}
	return out, nil
}

// queuePurge queues the deletes of purged messages with their history and
// ledger entries.
func queuePurge(b *pgx.Batch, ids []string) {
	for _, table := range []string{"history t USING unnest($1::text[]) AS p(id) WHERE t.message_id = p.id",
		"ledger t USING unnest($1::text[]) AS p(id) WHERE t.message_id = p.id",
		"smsc_refs t USING unnest($1::text[]) AS p(id) WHERE t.message_id = p.id",
		"messages t USING unnest($1::text[]) AS p(id) WHERE t.id = p.id"} {
		b.Queue(`DELETE FROM `+table, ids)
	}
}

// Compact implements persistence.Store: it folds the counters' deltas
// (autovacuum reclaims the space of purged rows; nothing to give back
// here).
func (s *Store) Compact(ctx context.Context, _ bool) (int64, error) {
	const op = "compact"
	if s.closed.Load() {
		return 0, s.fail(op, persistence.ErrClosed)
	}
	if _, err := s.pool.Exec(ctx, foldSQL); err != nil {
		return 0, s.fail(op, err)
	}
	return 0, nil
}
