package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sort"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// expiredDetail is the history and ledger detail of an expiry.
const expiredDetail = "message validity expired"

// expirableSQL selects up to ?5 messages in state ?1 or ?2 submitted before
// ?3 without a lease live at ?4.
const expirableSQL = `SELECT m.id FROM messages m
	WHERE m.state IN (?1, ?2) AND m.submitted_at < ?3
	AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.lease_until > ?4)
	LIMIT ?5`

// ExpireMessages implements persistence.Store.
//
// A message counts as leased when any of its outbox rows holds a live lease
// (lease_until > Now): a worker may be handing it over right now, and its
// outcome will settle it. The ledger gets a failed entry for the target of
// each delivery or forward row removed; a message without such work gets one
// for its frontend, so a late ack for it is still recognised.
func (s *Store) ExpireMessages(ctx context.Context, req persistence.ExpireRequest) ([]messages.Message, error) {
	const op = "expire messages"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if req.Limit <= 0 {
		return nil, fmt.Errorf("sqlite: %s: limit %d must be positive", op, req.Limit)
	}
	now, cutoff := toDB(req.Now), toDB(req.SubmittedBefore)
	var out []messages.Message
	err := s.write(ctx, op, func(tx querier) error {
		rows, err := tx.QueryContext(ctx, expirableSQL,
			string(messages.StatePending), string(messages.StateRetry), cutoff, now, req.Limit)
		if err != nil {
			return err
		}
		var ids []string
		if err := scanEach(rows, func(r *sql.Rows) error {
			var id string
			if err := r.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		}); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}

		msgs := make(map[string]messages.Message, len(ids))
		targets := map[string][]string{}
		err = chunks(len(ids), func(lo, hi int) error {
			in := params(hi - lo)
			args := append([]any{string(messages.StateFailed), messages.ReasonExpired, now}, anys(ids[lo:hi])...)
			rows, err := tx.QueryContext(ctx, `UPDATE messages SET state = ?, reason = ?, updated_at = ?
				WHERE id IN (`+in+`) RETURNING `+messageColumns, args...)
			if err != nil {
				return err
			}
			if err := collectMessages(rows, msgs); err != nil {
				return err
			}
			rows, err = tx.QueryContext(ctx, `DELETE FROM outbox WHERE message_id IN (`+in+`)
				RETURNING message_id, kind, target`, anys(ids[lo:hi])...)
			if err != nil {
				return err
			}
			return scanEach(rows, func(r *sql.Rows) error {
				var id, kind, target string
				if err := r.Scan(&id, &kind, &target); err != nil {
					return err
				}
				if k := persistence.WorkKind(kind); k == persistence.WorkDelivery || k == persistence.WorkForward {
					targets[id] = append(targets[id], target)
				}
				return nil
			})
		})
		if err != nil {
			return err
		}

		var (
			ledger []persistence.LedgerEntry
			hist   []historyEntry
		)
		for _, id := range ids {
			m := msgs[id]
			out = append(out, m)
			hist = append(hist, historyEntry{messageID: id, state: messages.StateFailed, at: now, detail: expiredDetail})
			ts := targets[id]
			if len(ts) == 0 && m.Frontend != "" {
				ts = []string{m.Frontend}
			}
			for _, t := range ts {
				ledger = append(ledger, persistence.LedgerEntry{MessageID: id, Target: t, Result: persistence.ResultFailed, At: req.Now, Detail: expiredDetail})
			}
		}
		if err := insertLedger(ctx, tx, ledger); err != nil {
			return err
		}
		return appendHistory(ctx, tx, hist)
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
