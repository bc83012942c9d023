package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Resubmit implements persistence.Store.
//
// Besides what the interface says, the message's remaining delivery and
// forward rows are removed: they belong to the route it failed on. Status
// rows (reports owed to another node) stay; every ledger entry goes (status
// included), so the message's work starts afresh and the next final state
// is reported again.
func (s *Store) Resubmit(ctx context.Context, now time.Time, reroutes []persistence.Reroute) ([]persistence.ResubmitResult, error) {
	const op = "resubmit"
	if err := s.check(op); err != nil {
		return nil, err
	}
	for i, r := range reroutes {
		if err := validReroute(r); err != nil {
			return nil, fmt.Errorf("sqlite: %s: reroute %d: %w", op, i, err)
		}
	}
	res := make([]persistence.ResubmitResult, len(reroutes))
	if len(reroutes) == 0 {
		return res, nil
	}
	at := toDB(now)
	var ids []string
	seen := map[string]bool{}
	for _, r := range reroutes {
		if !seen[r.ID] {
			seen[r.ID] = true
			ids = append(ids, r.ID)
		}
	}
	err := s.write(ctx, op, func(tx querier) error {
		states := make(map[string]messages.State, len(ids))
		err := chunks(len(ids), func(lo, hi int) error {
			rows, err := tx.QueryContext(ctx, `SELECT id, state FROM messages WHERE id IN (`+params(hi-lo)+`)`, anys(ids[lo:hi])...)
			if err != nil {
				return err
			}
			return scanEach(rows, func(r *sql.Rows) error {
				var id, state string
				err := r.Scan(&id, &state)
				states[id] = messages.State(state)
				return err
			})
		})
		if err != nil {
			return err
		}

		var (
			applied []string
			upd     []any
			work    []newWork
			hist    []historyEntry
		)
		for i, r := range reroutes {
			st, ok := states[r.ID]
			switch {
			case !ok:
				res[i] = persistence.ResubmitResult{ID: r.ID}
			case !st.Resubmittable():
				res[i] = persistence.ResubmitResult{ID: r.ID, Found: true, State: st}
			default:
				// r.State is not resubmittable (validReroute), so a repeat of
				// this id later in the batch is left alone.
				states[r.ID] = r.State
				res[i] = persistence.ResubmitResult{ID: r.ID, Applied: true, Found: true, State: r.State}
				applied = append(applied, r.ID)
				upd = append(upd, r.ID, string(r.State), r.Frontend, r.DestSMSC, queuedAt(r.State, sql.NullInt64{}, at))
				hist = append(hist, historyEntry{messageID: r.ID, state: r.State, at: at, detail: r.Detail})
				if r.Work != nil {
					work = append(work, newWork{messageID: r.ID, spec: *r.Work})
				}
			}
		}
		if len(applied) == 0 {
			return nil
		}
		err = chunks(len(applied), func(lo, hi int) error {
			args := append([]any{at, at}, upd[5*lo:5*hi]...)
			if _, err := tx.ExecContext(ctx, restartSQL(hi-lo), args...); err != nil {
				return err
			}
			in, idArgs := params(hi-lo), anys(applied[lo:hi])
			if _, err := tx.ExecContext(ctx, `DELETE FROM ledger WHERE message_id IN (`+in+`)`, idArgs...); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE kind IN (?, ?) AND message_id IN (`+in+`)`,
				append([]any{string(persistence.WorkDelivery), string(persistence.WorkForward)}, idArgs...)...)
			return err
		})
		if err != nil {
			return err
		}
		if err := insertWork(ctx, tx, at, work); err != nil {
			return err
		}
		return appendHistory(ctx, tx, hist)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// restartSQL sets n messages' (id, state, frontend, dest_smsc, queued_at),
// submitted and updated at the first two parameters.
func restartSQL(n int) string {
	return `UPDATE messages SET state = v.column2, frontend = v.column3, dest_smsc = v.column4,
		queued_at = v.column5, attempts = 0, reason = '', submitted_at = ?, updated_at = ?
		FROM (VALUES ` + tuples(n, 5) + `) AS v WHERE messages.id = v.column1`
}

func validReroute(r persistence.Reroute) error {
	switch {
	case r.ID == "":
		return errors.New("empty id")
	case !r.State.Valid():
		return fmt.Errorf("id %q: unknown state %q", r.ID, r.State)
	case r.State.Final():
		return fmt.Errorf("id %q: cannot restart in final state %q", r.ID, r.State)
	}
	if msg := validWork(r.Work); msg != "" {
		return fmt.Errorf("id %q: %s", r.ID, msg)
	}
	return nil
}
