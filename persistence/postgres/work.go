package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// customPlansSQL makes the rest of a transaction plan every statement for
// its arguments. The transactions' statements look rows up by arrays of 1 to
// thousands of keys in tables that grow from empty: no one cached generic
// plan suits them all, and one made while a table was small (or its
// statistics stale) keeps scanning the whole table long after it has grown.
// Planning each time costs a fraction of a millisecond. Accept, a single
// insert statement whose plan does not depend on table sizes, and the
// single-key reads keep the session's cached plans.
const customPlansSQL = "SET LOCAL plan_cache_mode = force_custom_plan"

// inTx runs first in the round trip that begins a transaction, then fn, then
// commits. first's queued queries carry their own result callbacks; fn runs
// only when they all succeeded. A transaction that does not commit is rolled
// back.
func (s *Store) inTx(ctx context.Context, first *pgx.Batch, fn func(tx pgx.Tx) error) error {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	if s.customPlans {
		b.Queue(customPlansSQL)
	}
	b.QueuedQueries = append(b.QueuedQueries, first.QueuedQueries...)
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	defer func() { _ = tx.Rollback(ctx) }() // a no-op once committed
	if err := br.Close(); err != nil {
		return err
	}
	if fn != nil {
		if err := fn(tx); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// claimSQL leases up to $4 due rows of one kind and target, with lease
// epoch $7. Rows locked by another claimer are skipped, never waited for.
// Rows whose outcome the ledger holds are deleted instead (removed = true).
// A ring-fenced claim (ranges > 0) takes only rows whose token is in its
// ranges ($8 on, see tokenFilter), and only while $7 is the stored epoch,
// so that a claim whose fence fails locks no row. A claim of named
// messages (ids) takes only their rows ($8, an array; never fenced).
func claimSQL(ranges int, ids bool) string {
	fenced := ""
	if ids {
		fenced = `
		AND o.message_id = ANY($8)`
	}
	if ranges > 0 {
		fenced = `
		AND EXISTS (SELECT 1 FROM ring_state s WHERE s.id = 1 AND s.epoch = $7)` + tokenFilter("o.token", 8, ranges)
	}
	return `
WITH candidates AS (
	SELECT o.id,
		EXISTS (SELECT 1 FROM ledger l
			WHERE l.message_id = o.message_id AND l.kind = o.kind AND l.target = o.target) AS recorded
	FROM outbox o
	WHERE o.kind = $1 AND o.target = $2 AND o.due_at <= $3
		AND (o.lease_until IS NULL OR o.lease_until <= $3)` + fenced + `
	ORDER BY o.due_at, o.id
	LIMIT $4
	FOR UPDATE OF o SKIP LOCKED
),
removed AS (
	DELETE FROM outbox o USING candidates c WHERE o.id = c.id AND c.recorded
	RETURNING o.id
),
leased AS (
	UPDATE outbox o SET lease_owner = $5, lease_until = $6, lease_epoch = $7
	FROM candidates c WHERE o.id = c.id AND NOT c.recorded
	RETURNING o.id, o.message_id, o.token, o.due_at, o.created_at
)
SELECT false, id, message_id, token, due_at, created_at FROM leased
UNION ALL
SELECT true, id, NULL, NULL, NULL, NULL FROM removed`
}

// claimAttemptSQL counts a delivery attempt on each claimed message, locked
// in id order first (see the package doc). updated_at stays: it tells when
// the message last changed state, and a claim is no transition.
var claimAttemptSQL = `
WITH locked AS (` + lockMessages("m.id", "") + `)
UPDATE messages m SET attempts = m.attempts + 1
FROM locked l WHERE m.id = l.id
RETURNING ` + columns("m")

// nextDueSQL is the earliest time a row of one kind and target (and, for a
// ring-fenced claim, in its token ranges, $4 on) that this claim did not
// take becomes claimable: the first unleased row by due time (read from the
// claim index), or the end of a lease (few rows, partial index). A row
// leased by this claim has lease_until set in the transaction's view and is
// excluded by id.
func nextDueSQL(ranges int) string {
	tokens := tokenFilter("o.token", 4, ranges)
	return `
SELECT LEAST(
	(SELECT o.due_at FROM outbox o
		WHERE o.kind = $1 AND o.target = $2 AND o.lease_until IS NULL` + tokens + `
		ORDER BY o.due_at, o.id LIMIT 1),
	(SELECT min(GREATEST(o.due_at, o.lease_until)) FROM outbox o
		WHERE o.kind = $1 AND o.target = $2 AND o.lease_until IS NOT NULL AND o.id <> ALL($3)` + tokens + `))`
}

// claimPart makes one claim of a Write (ClaimWork) in two round trips of
// the transaction: lease (its first); count attempts and find the next due
// time. A ring-fenced claim reads its fence (fenceSQL) in the first round
// trip, before it leases, inside a savepoint: when the fence fails the
// savepoint is rolled back (a lease under ranges its owner does not hold is
// undone) and the claim comes back Refused. It fills *out.
func (s *Store) claimPart(req persistence.ClaimRequest, out *persistence.Claim) part {
	now := norm(req.Now)
	until := norm(req.Now.Add(req.Lease))
	var (
		epoch  uint64
		ranges []any // the signed ranges' ends, lo and hi in turn
	)
	if req.Ring != nil {
		epoch = req.Ring.Epoch
		for _, r := range persistence.SignedRanges(req.Ring.Ranges) {
			ranges = append(ranges, r[0], r[1])
		}
	}
	n := len(ranges) / 2
	named := req.IDs != nil
	claimStatement := claimSQL(n, named)
	if named {
		ranges = []any{req.IDs}
	}

	var (
		work    []persistence.Work
		removed int // by the last claim statement
		dropped int // by all of them
		next    *time.Time
		f       fence
	)
	// claim queues one leasing statement whose rows fill work and removed.
	claim := func(b *pgx.Batch, limit int) {
		removed = 0
		args := append([]any{string(req.Kind), req.Target, now, limit, req.Owner, until, int64(epoch)}, ranges...)
		b.Queue(claimStatement, args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var (
					gone      bool
					id        int64
					messageID *string
					token     *int64
					due, at   *time.Time
				)
				if err := rows.Scan(&gone, &id, &messageID, &token, &due, &at); err != nil {
					return err
				}
				if gone {
					removed++
					dropped++
					continue
				}
				work = append(work, persistence.Work{
					ID: id, Kind: req.Kind, Target: req.Target, MessageID: *messageID,
					Token: uint64(*token), DueAt: due.UTC(), LeaseOwner: req.Owner,
					LeaseUntil: until, LeaseEpoch: epoch, CreatedAt: at.UTC(),
				})
			}
			return rows.Err()
		})
	}
	// A fenced claim without ranges has nothing to claim, but its fence is
	// still checked.
	nothing := req.Ring != nil && n == 0
	queue := func(b *pgx.Batch) {
		if req.Ring != nil {
			b.Queue("SAVEPOINT claim")
			f.queue(b, req)
		}
		if !nothing {
			claim(b, req.Limit)
		}
	}
	run := func(ctx context.Context, tx conn) error {
		*out = persistence.Claim{Work: []persistence.Work{}}
		if req.Ring != nil && f.check(req) != nil {
			out.Refused = true
			_, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT claim")
			return err
		}
		if nothing {
			return nil
		}
		// Rows removed for their ledger entry left room: claim again until
		// the limit is reached or nothing more was removed.
		for removed > 0 && len(work) < req.Limit {
			b := &pgx.Batch{}
			claim(b, req.Limit-len(work))
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
		}

		ids := make([]string, 0, len(work))
		rowIDs := make([]int64, 0, len(work))
		seen := make(map[string]bool, len(work))
		for _, w := range work {
			rowIDs = append(rowIDs, w.ID)
			if !seen[w.MessageID] {
				seen[w.MessageID] = true
				ids = append(ids, w.MessageID)
			}
		}
		byID := make(map[string]messages.Message, len(ids))
		collect := func(rows pgx.Rows) error {
			for rows.Next() {
				m, err := scanMessage(rows)
				if err != nil {
					return err
				}
				byID[m.ID] = m
			}
			return rows.Err()
		}
		b := &pgx.Batch{}
		gone := persistence.Counts{}
		gone.Work(req.Kind, req.Target, -int64(dropped))
		queueCounts(b, gone)
		if len(ids) > 0 {
			if req.Kind == persistence.WorkDelivery {
				b.Queue(claimAttemptSQL, ids).Query(collect)
			} else {
				b.Queue(messagesByIDSQL, ids).Query(collect)
			}
		}
		if named {
			if persistence.LaterNeeded(req.IDs, work) {
				queueLater(b, req, rowIDs, out)
			}
		} else {
			b.Queue(nextDueSQL(n), append([]any{string(req.Kind), req.Target, rowIDs}, ranges...)...).QueryRow(func(row pgx.Row) error {
				return row.Scan(&next)
			})
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		for i := range work {
			m, ok := byID[work[i].MessageID]
			if !ok {
				m = messages.Message{ID: work[i].MessageID, Token: work[i].Token}
			}
			work[i].Message = m
		}
		if dropped > 0 {
			// Nothing through the interface leaves such rows behind: worth a
			// look when it happens.
			s.log.Warn("removed outbox work whose outcome the ledger holds",
				"kind", string(req.Kind), "target", req.Target, "rows", dropped)
		}
		sort.Slice(work, func(i, j int) bool {
			if !work[i].DueAt.Equal(work[j].DueAt) {
				return work[i].DueAt.Before(work[j].DueAt)
			}
			return work[i].ID < work[j].ID
		})
		if work != nil {
			out.Work = work
		}
		out.NextDue = utcOrZero(next)
		return nil
	}
	return part{queue: queue, run: run}
}

// laterSQL reads the rows of named messages ($3) that a claim did not take
// (ids $4), from the index of a message's work.
const laterSQL = `
SELECT message_id, due_at, lease_until FROM outbox
WHERE message_id = ANY($3) AND kind = $1 AND target = $2 AND id <> ALL($4)`

// queueLater fills out.Later for a claim of named messages: when each row
// it did not take becomes claimable.
func queueLater(b *pgx.Batch, req persistence.ClaimRequest, taken []int64, out *persistence.Claim) {
	now := norm(req.Now)
	b.Queue(laterSQL, string(req.Kind), req.Target, req.IDs, taken).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				id    string
				due   time.Time
				until *time.Time
			)
			if err := rows.Scan(&id, &due, &until); err != nil {
				return err
			}
			if out.Later == nil {
				out.Later = map[string]time.Time{}
			}
			out.Later[id] = persistence.ClaimableAt(due.UTC(), utcOrZero(until), now)
		}
		return rows.Err()
	})
}

// ReleaseLeases implements persistence.Store. The rows are locked in id order
// (see the package doc) before they are updated.
func (s *Store) ReleaseLeases(ctx context.Context, owner string) (int64, error) {
	if err := s.precheck("release leases", persistence.ValidateOwner(owner)); err != nil {
		return 0, err
	}
	// The leased rows are few (bounded by the work in flight) and
	// outbox_leased holds them alone.
	tag, err := s.pool.Exec(ctx, `
UPDATE outbox SET lease_owner = NULL, lease_until = NULL, lease_epoch = 0
WHERE id IN (SELECT id FROM outbox WHERE lease_until IS NOT NULL AND lease_owner = $1 ORDER BY id FOR UPDATE)`, owner)
	if err != nil {
		return 0, s.fail("release leases", err)
	}
	return tag.RowsAffected(), nil
}

// Ledger implements persistence.Store.
func (s *Store) Ledger(ctx context.Context, kind persistence.WorkKind, messageID, target string) (persistence.LedgerEntry, error) {
	if s.closed.Load() {
		return persistence.LedgerEntry{}, s.fail("ledger", persistence.ErrClosed)
	}
	e := persistence.LedgerEntry{MessageID: messageID, Kind: kind, Target: target}
	err := s.pool.QueryRow(ctx, "SELECT result, at, detail FROM ledger WHERE message_id = $1 AND kind = $2 AND target = $3",
		messageID, string(kind), target).Scan(&e.Result, &e.At, &e.Detail)
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.LedgerEntry{}, s.fail("ledger", fmt.Errorf("ledger %q/%s/%q: %w", messageID, kind, target, persistence.ErrNotFound))
	}
	if err != nil {
		return persistence.LedgerEntry{}, s.fail("ledger", err)
	}
	e.At = e.At.UTC()
	return e, nil
}
