package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The statements of ClaimWork. Parameters: ?1 kind, ?2 target, ?3 now,
// ?4 limit, ?5 owner, ?6 lease end. TestHotQueriesUseIndexes checks their
// plans.
const (
	// claimable is the condition on outbox rows (alias o) a claim may take.
	claimable = `o.kind = ?1 AND o.target = ?2 AND o.due_at <= ?3
		AND (o.lease_until IS NULL OR o.lease_until <= ?3)`

	// sweepLedgeredSQL removes ledgered rows among the first ?4 claimable.
	sweepLedgeredSQL = `DELETE FROM outbox WHERE id IN (
		SELECT w.id FROM (SELECT o.id, o.message_id, o.target FROM outbox o
			WHERE ` + claimable + ` ORDER BY o.due_at, o.id LIMIT ?4) AS w
		WHERE EXISTS (SELECT 1 FROM ledger l WHERE l.message_id = w.message_id AND l.target = w.target))`

	// leaseEndSQL finds the earliest end of a live lease.
	leaseEndSQL = `SELECT lease_until FROM outbox
		WHERE kind = ?1 AND target = ?2 AND lease_until > ?3 ORDER BY lease_until LIMIT 1`

	// claimSQL leases the first ?4 claimable rows without a ledger entry.
	claimSQL = `UPDATE outbox SET lease_owner = ?5, lease_until = ?6
		WHERE id IN (SELECT o.id FROM outbox o WHERE ` + claimable + `
			AND NOT EXISTS (SELECT 1 FROM ledger l WHERE l.message_id = o.message_id AND l.target = o.target)
			ORDER BY o.due_at, o.id LIMIT ?4)
		RETURNING id, message_id, token, due_at, created_at`

	// nextDueSQL finds the earliest row without a live lease.
	nextDueSQL = `SELECT o.due_at FROM outbox o
		WHERE o.kind = ?1 AND o.target = ?2 AND (o.lease_until IS NULL OR o.lease_until <= ?3)
		ORDER BY o.due_at, o.id LIMIT 1`
)

// ClaimWork implements persistence.Store in one transaction of five
// statements, whatever the limit: drop ledgered rows in the window, find the
// earliest live lease, lease the rows, count the attempts (returning the
// messages), find the earliest unleased row left.
func (s *Store) ClaimWork(ctx context.Context, req persistence.ClaimRequest) (persistence.Claim, error) {
	const op = "claim work"
	if err := s.check(op); err != nil {
		return persistence.Claim{}, err
	}
	if err := req.Validate(); err != nil {
		return persistence.Claim{}, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	kind, now, until := string(req.Kind), toDB(req.Now), toDB(req.Now.Add(req.Lease))
	var claim persistence.Claim
	err := s.write(ctx, op, func(tx querier) error {
		// The ledger barrier. Only the window this claim looks at is checked,
		// so a claim costs O(limit), not O(outbox); the claim below skips any
		// ledgered row beyond it, and a later claim removes it.
		if _, err := tx.ExecContext(ctx, sweepLedgeredSQL, kind, req.Target, now, req.Limit); err != nil {
			return err
		}

		// Rows leased now are not claimable now, so this is read before the
		// claim adds leases of its own.
		var leaseEnd sql.NullInt64
		err := tx.QueryRowContext(ctx, leaseEndSQL, kind, req.Target, now).Scan(&leaseEnd)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}

		rows, err := tx.QueryContext(ctx, claimSQL, kind, req.Target, now, req.Limit, req.Owner, until)
		if err != nil {
			return err
		}
		leaseUntil := fromDB(until)
		var ids []string
		err = func() error {
			defer rows.Close()
			for rows.Next() {
				w := persistence.Work{Kind: req.Kind, Target: req.Target, LeaseOwner: req.Owner, LeaseUntil: leaseUntil}
				var token, due, created int64
				if err := rows.Scan(&w.ID, &w.MessageID, &token, &due, &created); err != nil {
					return err
				}
				w.Token, w.DueAt, w.CreatedAt = uint64(token), fromDB(due), fromDB(created)
				claim.Work = append(claim.Work, w)
				ids = append(ids, w.MessageID)
			}
			return rows.Err()
		}()
		if err != nil {
			return err
		}
		// RETURNING comes in no particular order.
		sort.Slice(claim.Work, func(i, j int) bool {
			a, b := claim.Work[i], claim.Work[j]
			if a.DueAt.Equal(b.DueAt) {
				return a.ID < b.ID
			}
			return a.DueAt.Before(b.DueAt)
		})

		msgs := make(map[string]messages.Message, len(ids))
		err = chunks(len(ids), func(lo, hi int) error {
			var rows *sql.Rows
			var err error
			if req.Kind == persistence.WorkDelivery {
				rows, err = tx.QueryContext(ctx, `UPDATE messages SET attempts = attempts + 1
					WHERE id IN (`+params(hi-lo)+`) RETURNING `+messageColumns, anys(ids[lo:hi])...)
			} else {
				rows, err = tx.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages
					WHERE id IN (`+params(hi-lo)+`)`, anys(ids[lo:hi])...)
			}
			if err != nil {
				return err
			}
			return collectMessages(rows, msgs)
		})
		if err != nil {
			return err
		}
		for i := range claim.Work {
			m, ok := msgs[claim.Work[i].MessageID]
			if !ok {
				return fmt.Errorf("work %d: message %q missing", claim.Work[i].ID, claim.Work[i].MessageID)
			}
			claim.Work[i].Message = m
		}

		var nextDue sql.NullInt64
		err = tx.QueryRowContext(ctx, nextDueSQL, kind, req.Target, now).Scan(&nextDue)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		switch {
		case !nextDue.Valid:
			claim.NextDue = zeroIfNull(leaseEnd)
		case leaseEnd.Valid && leaseEnd.Int64 < nextDue.Int64:
			claim.NextDue = fromDB(leaseEnd.Int64)
		default:
			claim.NextDue = fromDB(nextDue.Int64)
		}
		return nil
	})
	if err != nil {
		return persistence.Claim{}, err
	}
	return claim, nil
}

// rescheduleSQL makes n outbox rows (id, due_at) due again, unleased.
func rescheduleSQL(n int) string {
	return `UPDATE outbox SET due_at = v.column2, lease_owner = NULL, lease_until = NULL
		FROM (VALUES ` + tuples(n, 2) + `) AS v WHERE outbox.id = v.column1`
}

// settleSQL sets n messages' (id, state, reason), all updated at the first
// parameter.
func settleSQL(n int) string {
	return `UPDATE messages SET state = v.column2, reason = v.column3, updated_at = ?
		FROM (VALUES ` + tuples(n, 3) + `) AS v WHERE messages.id = v.column1`
}

func validOutcome(o persistence.Outcome) error {
	switch {
	case !o.Kind.Valid():
		return fmt.Errorf("unknown work kind %q", o.Kind)
	case o.Target == "":
		return errors.New("empty target")
	case o.MessageID == "":
		return errors.New("empty message id")
	case o.Result != persistence.ResultDelivered && o.Result != persistence.ResultFailed && o.Result != persistence.ResultRetry:
		return fmt.Errorf("unknown result %q", o.Result)
	}
	return nil
}

// CompleteWork implements persistence.Store. It reads what the batch touches
// (messages, ledger entries, outbox rows), decides every outcome in input
// order in memory, so that later outcomes see earlier ones, then writes the
// changes with one statement per table.
func (s *Store) CompleteWork(ctx context.Context, now time.Time, outcomes []persistence.Outcome) ([]persistence.Completion, error) {
	const op = "complete work"
	if err := s.check(op); err != nil {
		return nil, err
	}
	for i, o := range outcomes {
		if err := validOutcome(o); err != nil {
			return nil, fmt.Errorf("sqlite: %s: outcome %d: %w", op, i, err)
		}
	}
	res := make([]persistence.Completion, len(outcomes))
	if len(outcomes) == 0 {
		return res, nil
	}
	at := toDB(now)

	type ledgerKey struct{ id, target string }
	type workKey struct {
		kind       persistence.WorkKind
		target, id string
	}
	type msgState struct {
		state  messages.State
		reason string
	}
	var ids []string
	seen := map[string]bool{}
	for _, o := range outcomes {
		if !seen[o.MessageID] {
			seen[o.MessageID] = true
			ids = append(ids, o.MessageID)
		}
	}

	err := s.write(ctx, op, func(tx querier) error {
		states := make(map[string]msgState, len(ids))
		ledgered := map[ledgerKey]bool{}
		rowOf := map[workKey]int64{}
		err := chunks(len(ids), func(lo, hi int) error {
			in, args := params(hi-lo), anys(ids[lo:hi])
			rows, err := tx.QueryContext(ctx, `SELECT id, state, reason FROM messages WHERE id IN (`+in+`)`, args...)
			if err != nil {
				return err
			}
			if err := scanEach(rows, func(r *sql.Rows) error {
				var id, state, reason string
				err := r.Scan(&id, &state, &reason)
				states[id] = msgState{messages.State(state), reason}
				return err
			}); err != nil {
				return err
			}
			rows, err = tx.QueryContext(ctx, `SELECT message_id, target FROM ledger WHERE message_id IN (`+in+`)`, args...)
			if err != nil {
				return err
			}
			if err := scanEach(rows, func(r *sql.Rows) error {
				var k ledgerKey
				err := r.Scan(&k.id, &k.target)
				ledgered[k] = true
				return err
			}); err != nil {
				return err
			}
			rows, err = tx.QueryContext(ctx, `SELECT id, kind, target, message_id FROM outbox WHERE message_id IN (`+in+`)`, args...)
			if err != nil {
				return err
			}
			return scanEach(rows, func(r *sql.Rows) error {
				var rowID int64
				var k workKey
				var kind string
				err := r.Scan(&rowID, &kind, &k.target, &k.id)
				k.kind = persistence.WorkKind(kind)
				rowOf[k] = rowID
				return err
			})
		})
		if err != nil {
			return err
		}

		var (
			ledger    []persistence.LedgerEntry
			hist      []historyEntry
			deleted   []any
			retryAt   = map[int64]int64{} // outbox id -> new due_at
			changed   []string            // messages whose state changed, in order
			isChanged = map[string]bool{}
		)
		for i, o := range outcomes {
			st, ok := states[o.MessageID]
			if !ok {
				res[i] = persistence.NoWork
				continue
			}
			lk := ledgerKey{o.MessageID, o.Target}
			if ledgered[lk] || (o.Kind != persistence.WorkStatus && st.state.Final()) {
				res[i] = persistence.AlreadyRecorded
				continue
			}
			wk := workKey{o.Kind, o.Target, o.MessageID}
			rowID, ok := rowOf[wk]
			if !ok {
				res[i] = persistence.NoWork
				continue
			}
			res[i] = persistence.Applied
			if o.Result == persistence.ResultRetry {
				retryAt[rowID] = toDB(o.RetryAt)
			} else {
				ledgered[lk] = true
				ledger = append(ledger, persistence.LedgerEntry{MessageID: o.MessageID, Target: o.Target, Result: o.Result, At: now, Detail: o.Detail})
				delete(rowOf, wk)
				delete(retryAt, rowID)
				deleted = append(deleted, rowID)
			}
			if next := persistence.StateAfter(o.Kind, o.Result); next != "" {
				if o.Result == persistence.ResultFailed {
					st.reason = o.Reason // a failure sets the reason; other outcomes keep it
				}
				if !isChanged[o.MessageID] {
					isChanged[o.MessageID] = true
					changed = append(changed, o.MessageID)
				}
				st.state = next
				states[o.MessageID] = st
				hist = append(hist, historyEntry{messageID: o.MessageID, state: next, at: at, detail: o.Detail})
			}
		}

		if err := insertLedger(ctx, tx, ledger); err != nil {
			return err
		}
		if err := chunks(len(deleted), func(lo, hi int) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE id IN (`+params(hi-lo)+`)`, deleted[lo:hi]...)
			return err
		}); err != nil {
			return err
		}
		retryArgs := make([]any, 0, 2*len(retryAt))
		for id, due := range retryAt {
			retryArgs = append(retryArgs, id, due)
		}
		if err := chunks(len(retryAt), func(lo, hi int) error {
			_, err := tx.ExecContext(ctx, rescheduleSQL(hi-lo), retryArgs[2*lo:2*hi]...)
			return err
		}); err != nil {
			return err
		}
		msgArgs := make([]any, 0, 3*len(changed))
		for _, id := range changed {
			msgArgs = append(msgArgs, id, string(states[id].state), states[id].reason)
		}
		if err := chunks(len(changed), func(lo, hi int) error {
			_, err := tx.ExecContext(ctx, settleSQL(hi-lo), append([]any{at}, msgArgs[3*lo:3*hi]...)...)
			return err
		}); err != nil {
			return err
		}
		return appendHistory(ctx, tx, hist)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ReleaseLeases implements persistence.Store.
func (s *Store) ReleaseLeases(ctx context.Context, owner string) (int64, error) {
	const op = "release leases"
	if owner == "" {
		if err := s.check(op); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("sqlite: %s: empty owner", op)
	}
	var n int64
	err := s.write(ctx, op, func(tx querier) error {
		r, err := tx.ExecContext(ctx, `UPDATE outbox SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?`, owner)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		s.log.Info("leases released", "owner", owner, "rows", n)
	}
	return n, nil
}

// Ledger implements persistence.Store.
func (s *Store) Ledger(ctx context.Context, messageID, target string) (persistence.LedgerEntry, error) {
	const op = "ledger"
	if err := s.check(op); err != nil {
		return persistence.LedgerEntry{}, err
	}
	e := persistence.LedgerEntry{MessageID: messageID, Target: target}
	var result string
	var at int64
	err := s.rdb.QueryRowContext(ctx, `SELECT result, at, detail FROM ledger WHERE message_id = ? AND target = ?`,
		messageID, target).Scan(&result, &at, &e.Detail)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.LedgerEntry{}, fmt.Errorf("sqlite: %s: message %q target %q: %w", op, messageID, target, persistence.ErrNotFound)
	}
	if err != nil {
		return persistence.LedgerEntry{}, s.fail(ctx, op, err)
	}
	e.Result, e.At = persistence.Result(result), fromDB(at)
	return e, nil
}

// scanEach calls fn for every row and closes rows.
func scanEach(rows *sql.Rows, fn func(*sql.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
