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
// so that a claim whose fence fails locks no row.
func claimSQL(ranges int) string {
	fenced := ""
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
WITH locked AS (` + lockMessagesSQL + `)
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

// ClaimWork implements persistence.Store in three round trips: begin and
// lease; count attempts and find the next due time; commit. A ring-fenced
// claim reads its fence (fenceSQL) in the first round trip, before it
// leases; when the fence fails the transaction is rolled back.
func (s *Store) ClaimWork(ctx context.Context, req persistence.ClaimRequest) (persistence.Claim, error) {
	if s.closed.Load() {
		return persistence.Claim{}, s.fail("claim work", persistence.ErrClosed)
	}
	if err := req.Validate(); err != nil {
		return persistence.Claim{}, err
	}
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
	claimStatement := claimSQL(n)

	var (
		work    []persistence.Work
		removed int // by the last claim statement
		dropped int // by all of them
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

	var (
		next *time.Time
		f    fence
	)
	// A fenced claim without ranges has nothing to claim, but its fence is
	// still checked.
	nothing := req.Ring != nil && n == 0
	first := &pgx.Batch{}
	if req.Ring != nil {
		f.queue(first, req)
	}
	if !nothing {
		claim(first, req.Limit)
	}
	err := s.inTx(ctx, first, func(tx pgx.Tx) error {
		if req.Ring != nil {
			if err := f.check(req); err != nil {
				return err
			}
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
		if len(ids) > 0 {
			if req.Kind == persistence.WorkDelivery {
				b.Queue(claimAttemptSQL, ids).Query(collect)
			} else {
				b.Queue(messagesByIDSQL, ids).Query(collect)
			}
		}
		b.Queue(nextDueSQL(n), append([]any{string(req.Kind), req.Target, rowIDs}, ranges...)...).QueryRow(func(row pgx.Row) error {
			return row.Scan(&next)
		})
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
		return nil
	})
	if err != nil {
		return persistence.Claim{}, s.fail("claim work", err)
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
	if work == nil {
		work = []persistence.Work{}
	}
	return persistence.Claim{Work: work, NextDue: utcOrZero(next)}, nil
}

// rounds splits the indexes 0..n-1 so that no round holds two with the same
// key: the k-th occurrence of a key goes to round k. A batch statement then
// changes each row at most once, and later occurrences see the earlier ones,
// as if the batch were applied one item at a time.
func rounds(n int, key func(i int) string) [][]int {
	var out [][]int
	seen := make(map[string]int, n)
	for i := 0; i < n; i++ {
		k := seen[key(i)]
		seen[key(i)] = k + 1
		if k == len(out) {
			out = append(out, nil)
		}
		out[k] = append(out[k], i)
	}
	return out
}

// inRounds runs the n items keyed by message id in rounds (see rounds), in
// one transaction: each round's reads are queued on a batch (the first one
// together with BEGIN) with the round's ids, then the round is applied.
func (s *Store) inRounds(ctx context.Context, n int, id func(i int) string,
	read func(b *pgx.Batch, round []int, ids []string), apply func(pgx.Tx, []int) error) error {
	all := rounds(n, id)
	queue := func(b *pgx.Batch, round []int) {
		ids := make([]string, len(round))
		for j, i := range round {
			ids[j] = id(i)
		}
		read(b, round, ids)
	}
	first := &pgx.Batch{}
	queue(first, all[0])
	return s.inTx(ctx, first, func(tx pgx.Tx) error {
		for k, round := range all {
			if k > 0 {
				b := &pgx.Batch{}
				queue(b, round)
				if err := tx.SendBatch(ctx, b).Close(); err != nil {
					return err
				}
			}
			if err := apply(tx, round); err != nil {
				return err
			}
		}
		return nil
	})
}

// batch is a call that decides items about messages one by one.
type batch struct {
	op string
	n  int
	id func(i int) string // the message item i is about
	// read, when set, queues more reads of a round into b.
	read func(b *pgx.Batch, round []int, ids []string)
	// decide records what item i does to m (nil when it does not exist),
	// whose locked outbox rows are work.
	decide func(i int, m *message, work []workRow, c *changes) persistence.Completion
}

// decideBatch runs b's items in rounds (one item per message a round):
// each round locks the messages' outbox rows and then them, reads what
// b.read adds, decides its items in memory and applies the changes in one
// statement. Each round takes two round trips; the first shares its round
// trip with BEGIN.
func (s *Store) decideBatch(ctx context.Context, now time.Time, b batch) ([]persistence.Completion, error) {
	out := make([]persistence.Completion, b.n)
	if b.n == 0 {
		return out, nil
	}
	now = norm(now)
	var l locked
	read := func(pb *pgx.Batch, round []int, ids []string) {
		l.queue(pb, ids)
		if b.read != nil {
			b.read(pb, round, ids)
		}
	}
	apply := func(tx pgx.Tx, round []int) error {
		c := newChanges(now)
		for _, i := range round {
			out[i] = b.decide(i, l.msgs[b.id(i)], l.work[b.id(i)], c)
		}
		return c.apply(ctx, tx)
	}
	if err := s.inRounds(ctx, b.n, b.id, read, apply); err != nil {
		return nil, s.fail(b.op, err)
	}
	return out, nil
}

// completeLedgerSQL reads which (message, kind, target) triples have a
// recorded outcome, by primary key.
const completeLedgerSQL = `
SELECT l.message_id, l.kind, l.target
FROM ledger l JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(message_id, kind, target)
	ON l.message_id = k.message_id AND l.kind = k.kind AND l.target = k.target`

// ledgerKey names a ledger entry.
type ledgerKey struct {
	message string
	kind    persistence.WorkKind
	target  string
}

// CompleteWork implements persistence.Store (see decideBatch).
func (s *Store) CompleteWork(ctx context.Context, now time.Time, outcomes []persistence.Outcome) ([]persistence.Completion, error) {
	if s.closed.Load() {
		return nil, s.fail("complete work", persistence.ErrClosed)
	}
	if err := validateOutcomes(outcomes); err != nil {
		return nil, err
	}
	var recorded map[ledgerKey]bool
	return s.decideBatch(ctx, now, batch{
		op: "complete work", n: len(outcomes),
		id: func(i int) string { return outcomes[i].MessageID },
		read: func(b *pgx.Batch, round []int, ids []string) {
			recorded = map[ledgerKey]bool{}
			kinds, targets := make([]string, len(round)), make([]string, len(round))
			for j, i := range round {
				kinds[j], targets[j] = string(outcomes[i].Kind), outcomes[i].Target
			}
			b.Queue(completeLedgerSQL, ids, kinds, targets).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var k ledgerKey
					if err := rows.Scan(&k.message, &k.kind, &k.target); err != nil {
						return err
					}
					recorded[k] = true
				}
				return rows.Err()
			})
		},
		decide: func(i int, m *message, work []workRow, c *changes) persistence.Completion {
			o := outcomes[i]
			rows, leases := rowsOf(work, o.Kind, o.Target)
			var state messages.State
			if m != nil {
				state = m.State
			}
			done := recorded[ledgerKey{o.MessageID, o.Kind, o.Target}]
			if got := persistence.CompletionOf(o, m != nil, state, done, leases); got != persistence.Applied {
				return got
			}
			if o.Result == persistence.ResultRetry {
				retryAt := c.now
				if !o.RetryAt.IsZero() {
					retryAt = norm(o.RetryAt)
				}
				c.reschedule(retryAt, rows...)
			} else {
				c.record(o.MessageID, o.Kind, o.Target, o.Result, o.Detail)
				c.finish(rows...)
			}
			next := persistence.StateAfter(o.Kind, o.Result)
			// A forward that stays queued is no transition.
			if next == "" || (o.Kind == persistence.WorkForward && next == m.State) {
				return persistence.Applied
			}
			if o.Result == persistence.ResultFailed {
				m.Reason = o.Reason // a failure sets the reason; other outcomes keep it
			}
			c.move(m, next, o.Detail)
			return persistence.Applied
		},
	})
}

func validateOutcomes(outcomes []persistence.Outcome) error {
	var errs []error
	for i, o := range outcomes {
		if !o.Kind.Valid() {
			errs = append(errs, fmt.Errorf("complete work: outcome %d: unknown kind %q", i, o.Kind))
		}
		if o.Target == "" {
			errs = append(errs, fmt.Errorf("complete work: outcome %d: empty target", i))
		}
		if o.MessageID == "" {
			errs = append(errs, fmt.Errorf("complete work: outcome %d: empty message id", i))
		}
		switch o.Result {
		case persistence.ResultDelivered, persistence.ResultFailed, persistence.ResultRetry:
		default:
			errs = append(errs, fmt.Errorf("complete work: outcome %d: unknown result %q", i, o.Result))
		}
	}
	return errors.Join(errs...)
}

// ReleaseLeases implements persistence.Store. The rows are locked in id order
// (see the package doc) before they are updated.
func (s *Store) ReleaseLeases(ctx context.Context, owner string) (int64, error) {
	if s.closed.Load() {
		return 0, s.fail("release leases", persistence.ErrClosed)
	}
	if owner == "" {
		return 0, errors.New("release leases: empty owner")
	}
	tag, err := s.pool.Exec(ctx, `
UPDATE outbox SET lease_owner = NULL, lease_until = NULL, lease_epoch = 0
WHERE id IN (SELECT id FROM outbox WHERE lease_owner = $1 ORDER BY id FOR UPDATE)`, owner)
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

// expiredDetail is the history and ledger detail of an expiry.
const expiredDetail = "message validity expired"

// expireCandidatesSQL finds messages to expire, oldest first.
const expireCandidatesSQL = `
SELECT m.id FROM messages m
WHERE m.state IN ('pending', 'retry') AND m.submitted_at < $1
	AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.lease_until > $2)
ORDER BY m.submitted_at, m.id
LIMIT $3`

// ExpireMessages implements persistence.Store in four round trips: begin and
// find candidates; lock their work and then them; apply those that still
// qualify; commit.
//
// A message counts as leased when any of its outbox rows holds a live lease.
// The ledger gets a failed entry for each delivery or forward row removed; a
// message without such work gets one for its frontend (delivery), so a late
// ack for it is still recognised. Status rows (reports owed to an origin)
// are not the message's own work and stay.
func (s *Store) ExpireMessages(ctx context.Context, req persistence.ExpireRequest) ([]messages.Message, error) {
	if req.Limit <= 0 {
		if s.closed.Load() {
			return nil, s.fail("expire messages", persistence.ErrClosed)
		}
		return nil, fmt.Errorf("expire messages: limit %d must be positive", req.Limit)
	}
	now, cutoff := norm(req.Now), norm(req.SubmittedBefore)
	return s.sweep(ctx, "expire messages", now, expireCandidatesSQL, []any{cutoff, now, req.Limit},
		func(m *message, work []workRow, c *changes) bool {
			if (m.State != messages.StatePending && m.State != messages.StateRetry) || !m.SubmittedAt.Before(cutoff) ||
				leased(work, "", now) {
				return false
			}
			c.failWork(m, work, messages.StateFailed, messages.ReasonExpired, expiredDetail,
				workRow{kind: persistence.WorkDelivery, target: m.Frontend}, persistence.WorkDelivery, persistence.WorkForward)
			return true
		})
}

// leased reports whether a row of kind (any kind when empty) holds a lease
// live at now.
func leased(work []workRow, kind persistence.WorkKind, now time.Time) bool {
	for _, w := range work {
		if (kind == "" || w.kind == kind) && w.leased(now) {
			return true
		}
	}
	return false
}

// resubmitApplySQL moves locked, resubmittable messages (one row each) back
// to work.
const resubmitApplySQL = `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[])
		WITH ORDINALITY AS t(id, frontend, dest_smsc, state, detail, work_kind, work_target, work_due, ord)
),
moved AS (
	UPDATE messages m SET state = i.state, frontend = i.frontend, dest_smsc = i.dest_smsc,
		queued_at = CASE WHEN i.state = 'forward_queued' THEN $9::timestamptz END,
		attempts = 0, reason = '', submitted_at = $9, updated_at = $9, history_len = m.history_len + 1
	FROM input i WHERE m.id = i.id
	RETURNING m.id, m.token, m.history_len
),
transitions AS (
	INSERT INTO history (message_id, ordinal, state, at, detail)
	SELECT mv.id, mv.history_len, i.state, $9, i.detail FROM moved mv JOIN input i ON i.id = mv.id
),
cleared AS (
	DELETE FROM ledger l USING moved mv WHERE l.message_id = mv.id
),
work AS (
	INSERT INTO outbox (kind, target, message_id, token, due_at, created_at)
	SELECT i.work_kind, i.work_target, mv.id, mv.token, i.work_due, $9
	FROM moved mv JOIN input i ON i.id = mv.id
	WHERE i.work_kind <> ''
	ORDER BY i.ord
)
SELECT count(*) FROM moved`

// Resubmit implements persistence.Store. Each round (one reroute per
// message) locks the messages, then applies those that may be resubmitted.
func (s *Store) Resubmit(ctx context.Context, now time.Time, reroutes []persistence.Reroute) ([]persistence.ResubmitResult, error) {
	if s.closed.Load() {
		return nil, s.fail("resubmit", persistence.ErrClosed)
	}
	if err := validateReroutes(reroutes); err != nil {
		return nil, err
	}
	out := make([]persistence.ResubmitResult, len(reroutes))
	if len(reroutes) == 0 {
		return out, nil
	}
	now = norm(now)

	var l locked
	read := func(b *pgx.Batch, _ []int, ids []string) { l.queueMessages(b, ids) }
	apply := func(tx pgx.Tx, round []int) error {
		var ids, frontends, dests, newStates, details, kinds, targets []string
		var dues []time.Time
		for _, i := range round {
			r := reroutes[i]
			m, found := l.msgs[r.ID]
			if !found {
				out[i] = persistence.ResubmitResult{ID: r.ID}
				continue
			}
			out[i] = persistence.ResubmitResult{ID: r.ID, Found: true, State: m.State}
			if !m.State.Resubmittable() {
				continue
			}
			out[i].Applied, out[i].State = true, r.State
			kind, target, due := workColumns(r.Work, now)
			ids = append(ids, r.ID)
			frontends = append(frontends, r.Frontend)
			dests = append(dests, r.DestSMSC)
			newStates = append(newStates, string(r.State))
			details = append(details, r.Detail)
			kinds = append(kinds, kind)
			targets = append(targets, target)
			dues = append(dues, due)
		}
		if len(ids) == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, resubmitApplySQL, ids, frontends, dests, newStates, details, kinds, targets, dues, now)
		return err
	}

	if err := s.inRounds(ctx, len(reroutes), func(i int) string { return reroutes[i].ID }, read, apply); err != nil {
		return nil, s.fail("resubmit", err)
	}
	return out, nil
}

func validateReroutes(reroutes []persistence.Reroute) error {
	var errs []error
	for i, r := range reroutes {
		if r.ID == "" {
			errs = append(errs, fmt.Errorf("resubmit: reroute %d: empty id", i))
		}
		if !r.State.Valid() {
			errs = append(errs, fmt.Errorf("resubmit: reroute %d (%q): unknown state %q", i, r.ID, r.State))
		}
		if err := validateWork(r.Work); err != nil {
			errs = append(errs, fmt.Errorf("resubmit: reroute %d (%q): %w", i, r.ID, err))
		}
	}
	return errors.Join(errs...)
}
