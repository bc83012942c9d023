package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The statements of ClaimWork. Parameters: ?1 kind, ?2 target, ?3 now,
// ?4 limit, ?5 owner, ?6 lease end, ?7 lease epoch, then a ring-fenced
// claim's token ranges as stored (see tokenFilter). Every statement is
// given them all. TestHotQueriesUseIndexes checks their plans.

// claimable is the condition on outbox rows (alias o) a claim may take:
// in ranges ranges of tokens, or anywhere when ranges is 0.
func claimable(ranges int) string {
	return `o.kind = ?1 AND o.target = ?2 AND o.due_at <= ?3
		AND (o.lease_until IS NULL OR o.lease_until <= ?3)` + tokenFilter("o.token", ranges)
}

// tokenFilter is " AND (col BETWEEN ?8 AND ?9 OR ...)" for n signed
// ranges, "" for none. The claim index is read in claim order and each row
// checked: a filter, not a separate index, so the claim keeps its order and
// its LIMIT.
func tokenFilter(col string, n int) string {
	if n == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" AND (")
	for i := range n {
		if i > 0 {
			b.WriteString(" OR ")
		}
		fmt.Fprintf(&b, "%s BETWEEN ?%d AND ?%d", col, 8+2*i, 9+2*i)
	}
	b.WriteString(")")
	return b.String()
}

// leaseEndSQL finds the earliest end of a live lease.
func leaseEndSQL(ranges int) string {
	return `SELECT o.lease_until FROM outbox o
		WHERE o.kind = ?1 AND o.target = ?2 AND o.lease_until > ?3` + tokenFilter("o.token", ranges) + `
		ORDER BY o.lease_until LIMIT 1`
}

// claimSQL leases the first ?4 claimable rows and tells, for each, whether
// the ledger holds its outcome (the ledger barrier: such a row is deleted
// instead of handed out; nothing through the interface leaves one behind).
// One walk of the claim index does both.
func claimSQL(ranges int) string {
	return `UPDATE outbox SET lease_owner = ?5, lease_until = ?6, lease_epoch = ?7
		WHERE id IN (SELECT o.id FROM outbox o WHERE ` + claimable(ranges) + `
			ORDER BY o.due_at, o.id LIMIT +?4)
		RETURNING id, message_id, token, due_at, created_at, EXISTS (SELECT 1 FROM ledger l
			WHERE l.message_id = outbox.message_id AND l.kind = outbox.kind AND l.target = outbox.target)`
}

// claimNamedSQL is claimSQL for a claim of named messages (?8, a JSON
// array of ids): their rows are found by message (outbox_message), not by
// walking the target's queue.
const claimNamedSQL = `UPDATE outbox SET lease_owner = ?5, lease_until = ?6, lease_epoch = ?7
		WHERE id IN (SELECT o.id FROM outbox o INDEXED BY outbox_message
			WHERE o.message_id IN (SELECT value FROM json_each(?8)) AND ` + `o.kind = ?1 AND o.target = ?2 AND o.due_at <= ?3
			AND (o.lease_until IS NULL OR o.lease_until <= ?3)
			ORDER BY o.due_at, o.id LIMIT +?4)
		RETURNING id, message_id, token, due_at, created_at, EXISTS (SELECT 1 FROM ledger l
			WHERE l.message_id = outbox.message_id AND l.kind = outbox.kind AND l.target = outbox.target)`

// laterSQL reads the rows of named messages (?8) that a claim could not
// take (leased now: the claim's own rows are leased past ?3 as well, and
// are left out by the caller).
const laterSQL = `SELECT o.message_id, o.due_at, o.lease_until FROM outbox o INDEXED BY outbox_message
	WHERE o.message_id IN (SELECT value FROM json_each(?8)) AND o.kind = ?1 AND o.target = ?2`

// nextDueSQL finds the earliest row without a live lease.
func nextDueSQL(ranges int) string {
	return `SELECT o.due_at FROM outbox o
		WHERE o.kind = ?1 AND o.target = ?2 AND (o.lease_until IS NULL OR o.lease_until <= ?3)` +
		tokenFilter("o.token", ranges) + `
		ORDER BY o.due_at, o.id LIMIT 1`
}

// claim makes one claim of a Write (ClaimWork) in four statements,
// whatever the limit: find the earliest live lease, lease the rows (and
// learn which the ledger holds: they are deleted, and the claim goes on for
// as many), count the attempts (returning the messages), find the earliest
// unleased row left. A ring-fenced claim first checks its
// fence (see checkFence) and comes back Refused when it fails; the writer is
// the only one, so nothing can publish between the check and the claim.
func claim(ctx context.Context, tx querier, req persistence.ClaimRequest) (persistence.Claim, error) {
	kind, now, until := string(req.Kind), toDB(req.Now), toDB(req.Now.Add(req.Lease))
	var (
		epoch  uint64
		ranges [][2]int64
	)
	if req.Ring != nil {
		epoch, ranges = req.Ring.Epoch, persistence.SignedRanges(req.Ring.Ranges)
	}
	args := []any{kind, req.Target, now, req.Limit, req.Owner, until, int64(epoch)}
	for _, r := range ranges {
		args = append(args, r[0], r[1])
	}
	n := len(ranges)
	claimStatement := claimSQL(n)
	named := req.IDs != nil
	if named {
		ids, err := json.Marshal(req.IDs)
		if err != nil {
			return persistence.Claim{}, err
		}
		args = append(args, string(ids))
		claimStatement = claimNamedSQL
	}
	var claim persistence.Claim
	err := func() error {
		if req.Ring != nil {
			err := checkFence(ctx, tx, req)
			if errors.Is(err, persistence.ErrStaleEpoch) {
				claim.Refused = true
				return nil
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return nil // no tokens, nothing to claim or wait for
			}
		}
		// Rows leased now are not claimable now, so this is read before the
		// claim adds leases of its own.
		var leaseEnd sql.NullInt64
		if !named {
			err := tx.QueryRowContext(ctx, leaseEndSQL(n), args...).Scan(&leaseEnd)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}

		leaseUntil := fromDB(until)
		var ids []string
		var ledgered []any // rows the claim took whose outcome the ledger holds
		take := func(limit int) error {
			args[3] = limit
			rows, err := tx.QueryContext(ctx, claimStatement, args...)
			if err != nil {
				return err
			}
			return scanEach(rows, func(r *sql.Rows) error {
				w := persistence.Work{Kind: req.Kind, Target: req.Target, LeaseOwner: req.Owner, LeaseUntil: leaseUntil, LeaseEpoch: epoch}
				var token, due, created int64
				var recorded bool
				if err := r.Scan(&w.ID, &w.MessageID, &token, &due, &created, &recorded); err != nil {
					return err
				}
				if recorded {
					ledgered = append(ledgered, w.ID)
					return nil
				}
				w.Token, w.DueAt, w.CreatedAt = uint64(token), fromDB(due), fromDB(created)
				claim.Work = append(claim.Work, w)
				ids = append(ids, w.MessageID)
				return nil
			})
		}
		// The ledger barrier: ledgered rows left room; claim on (the ones
		// taken are leased now) until the limit is reached or none came.
		for {
			before := len(ledgered)
			if err := take(req.Limit - len(claim.Work)); err != nil {
				return err
			}
			if len(ledgered) == before || len(claim.Work) >= req.Limit {
				break
			}
		}
		if err := chunks(len(ledgered), func(lo, hi int) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE id IN (`+params(hi-lo)+`)`, ledgered[lo:hi]...)
			return err
		}); err != nil {
			return err
		}
		gone := persistence.Counts{}
		gone.Work(req.Kind, req.Target, -int64(len(ledgered)))
		if err := writeCounts(ctx, tx, gone); err != nil {
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
		err := chunks(len(ids), func(lo, hi int) error {
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

		if named {
			if !persistence.LaterNeeded(req.IDs, claim.Work) {
				return nil
			}
			return later(ctx, tx, args, &claim, req.Now)
		}
		var nextDue sql.NullInt64
		err = tx.QueryRowContext(ctx, nextDueSQL(n), args...).Scan(&nextDue)
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
	}()
	if err != nil {
		return persistence.Claim{}, err
	}
	return claim, nil
}

// later fills claim.Later for a claim of named messages: when each of
// their rows it did not take becomes claimable.
func later(ctx context.Context, tx querier, args []any, claim *persistence.Claim, now time.Time) error {
	taken := make(map[string]bool, len(claim.Work))
	for _, w := range claim.Work {
		taken[w.MessageID] = true
	}
	rows, err := tx.QueryContext(ctx, laterSQL, args...)
	if err != nil {
		return err
	}
	return scanEach(rows, func(r *sql.Rows) error {
		var (
			id    string
			due   int64
			until sql.NullInt64
		)
		if err := r.Scan(&id, &due, &until); err != nil {
			return err
		}
		if taken[id] {
			return nil
		}
		if claim.Later == nil {
			claim.Later = map[string]time.Time{}
		}
		claim.Later[id] = persistence.ClaimableAt(fromDB(due), zeroIfNull(until), now)
		return nil
	})
}

// releaseSQL ends the leases of owner ?.
const releaseSQL = `UPDATE outbox SET lease_owner = NULL, lease_until = NULL, lease_epoch = 0
	WHERE id IN (SELECT id FROM outbox INDEXED BY outbox_lease WHERE lease_until IS NOT NULL AND lease_owner = ?)`

// ReleaseLeases implements persistence.Store. It walks the leased rows
// (outbox_lease), few however large the outbox: ReleaseLeases runs once per
// start.
func (s *Store) ReleaseLeases(ctx context.Context, owner string) (int64, error) {
	const op = "release leases"
	if err := s.precheck(op, persistence.ValidateOwner(owner)); err != nil {
		return 0, err
	}
	var n int64
	err := s.write(ctx, op, func(tx querier) error {
		r, err := tx.ExecContext(ctx, releaseSQL, owner)
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
func (s *Store) Ledger(ctx context.Context, kind persistence.WorkKind, messageID, target string) (persistence.LedgerEntry, error) {
	const op = "ledger"
	e := persistence.LedgerEntry{MessageID: messageID, Kind: kind, Target: target}
	err := s.read(ctx, op, func(tx *sql.Tx) error {
		var at int64
		err := tx.QueryRowContext(ctx, `SELECT result, at, detail FROM ledger WHERE message_id = ? AND kind = ? AND target = ?`,
			messageID, string(kind), target).Scan(&e.Result, &at, &e.Detail)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("message %q %s %q: %w", messageID, kind, target, persistence.ErrNotFound)
		}
		e.At = fromDB(at)
		return err
	})
	if err != nil {
		return persistence.LedgerEntry{}, err
	}
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
