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

// claimSQL leases up to $4 due rows of one kind and target. Rows locked by
// another claimer are skipped, never waited for. Rows whose outcome the
// ledger holds are deleted instead (removed = true).
const claimSQL = `
WITH candidates AS (
	SELECT o.id,
		EXISTS (SELECT 1 FROM ledger l WHERE l.message_id = o.message_id AND l.target = o.target) AS recorded
	FROM outbox o
	WHERE o.kind = $1 AND o.target = $2 AND o.due_at <= $3
		AND (o.lease_until IS NULL OR o.lease_until <= $3)
	ORDER BY o.due_at, o.id
	LIMIT $4
	FOR UPDATE OF o SKIP LOCKED
),
removed AS (
	DELETE FROM outbox o USING candidates c WHERE o.id = c.id AND c.recorded
	RETURNING o.id
),
leased AS (
	UPDATE outbox o SET lease_owner = $5, lease_until = $6
	FROM candidates c WHERE o.id = c.id AND NOT c.recorded
	RETURNING o.id, o.message_id, o.token, o.due_at, o.created_at
)
SELECT false, id, message_id, token, due_at, created_at FROM leased
UNION ALL
SELECT true, id, NULL, NULL, NULL, NULL FROM removed`

// claimAttemptSQL counts a delivery attempt on each claimed message, locked
// in id order first (see the package doc). updated_at stays: it tells when
// the message last changed state, and a claim is no transition.
var claimAttemptSQL = `
WITH locked AS (` + lockMessagesSQL + `)
UPDATE messages m SET attempts = m.attempts + 1
FROM locked l WHERE m.id = l.id
RETURNING ` + columns("m")

// nextDueSQL is the earliest time a row of one kind and target that this
// claim did not take becomes claimable: the first unleased row by due time
// (read from the claim index), or the end of a lease (few rows, partial
// index). A row leased by this claim has lease_until set in the transaction's
// view and is excluded by id.
const nextDueSQL = `
SELECT LEAST(
	(SELECT o.due_at FROM outbox o
		WHERE o.kind = $1 AND o.target = $2 AND o.lease_until IS NULL
		ORDER BY o.due_at, o.id LIMIT 1),
	(SELECT min(GREATEST(o.due_at, o.lease_until)) FROM outbox o
		WHERE o.kind = $1 AND o.target = $2 AND o.lease_until IS NOT NULL AND o.id <> ALL($3)))`

// ClaimWork implements persistence.Store in three round trips: begin and
// lease; count attempts and find the next due time; commit.
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
		work    []persistence.Work
		removed int // by the last claim statement
		dropped int // by all of them
	)
	// claim queues one leasing statement whose rows fill work and removed.
	claim := func(b *pgx.Batch, limit int) {
		removed = 0
		b.Queue(claimSQL, string(req.Kind), req.Target, now, limit, req.Owner, until).Query(func(rows pgx.Rows) error {
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
					LeaseUntil: until, CreatedAt: at.UTC(),
				})
			}
			return rows.Err()
		})
	}

	var next *time.Time
	first := &pgx.Batch{}
	claim(first, req.Limit)
	err := s.inTx(ctx, first, func(tx pgx.Tx) error {
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
		b.Queue(nextDueSQL, string(req.Kind), req.Target, rowIDs).QueryRow(func(row pgx.Row) error {
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

// inRounds runs the rounds in one transaction: each round's reads are
// queued on a batch (the first one together with BEGIN), then the round is
// applied.
func (s *Store) inRounds(ctx context.Context, all [][]int, read func(*pgx.Batch, []int), apply func(pgx.Tx, []int) error) error {
	first := &pgx.Batch{}
	read(first, all[0])
	return s.inTx(ctx, first, func(tx pgx.Tx) error {
		for k, round := range all {
			if k > 0 {
				b := &pgx.Batch{}
				read(b, round)
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

const (
	// completeLockWorkSQL locks the outbox rows of the messages, in id order.
	// It selects by message alone (the caller matches kind and target): a
	// condition on kind and target too would let the planner pick
	// outbox_claim, whose (kind, target) prefix can match a whole queue.
	completeLockWorkSQL = `
SELECT o.id, o.kind, o.target, o.message_id
FROM outbox o JOIN unnest($1::text[]) AS k(id) ON o.message_id = k.id
ORDER BY o.id
FOR UPDATE OF o`
	// lockMessagesSQL locks messages (a list of distinct ids) in id order.
	// FOR NO KEY UPDATE, not FOR UPDATE: it is what an UPDATE that keeps the
	// key takes anyway.
	lockMessagesSQL = `
SELECT m.id, m.state FROM messages m JOIN unnest($1::text[]) AS k(id) ON m.id = k.id
ORDER BY m.id
FOR NO KEY UPDATE OF m`
	// completeLedgerSQL reads which (message, target) pairs have a recorded
	// outcome, by primary key.
	completeLedgerSQL = `
SELECT l.message_id, l.target
FROM ledger l JOIN unnest($1::text[], $2::text[]) AS k(message_id, target)
	ON l.message_id = k.message_id AND l.target = k.target`
	// completeApplySQL records outcomes already decided (one per message);
	// the outbox rows are named by id ($10 finished, $11 rescheduled to $12).
	completeApplySQL = `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
		AS t(message_id, kind, target, result, state, reason, detail)
),
moved AS (
	UPDATE messages m SET state = i.state,
		reason = CASE WHEN i.result = 'failed' THEN i.reason ELSE m.reason END,
		updated_at = $8, history_len = m.history_len + 1
	FROM input i WHERE m.id = i.message_id AND i.state <> ''
	RETURNING m.id, m.history_len, m.state
),
transitions AS (
	INSERT INTO history (message_id, ordinal, state, at, detail)
	SELECT mv.id, mv.history_len, mv.state, $8, i.detail FROM moved mv JOIN input i ON i.message_id = mv.id
),
recorded AS (
	INSERT INTO ledger (message_id, target, result, at, detail)
	SELECT message_id, target, result, $8, detail FROM input WHERE result <> 'retry'
	ON CONFLICT (message_id, target) DO NOTHING
),
finished AS (
	DELETE FROM outbox o USING unnest($9::bigint[]) AS f(id) WHERE o.id = f.id
),
rescheduled AS (
	UPDATE outbox o SET due_at = r.due_at, lease_owner = NULL, lease_until = NULL
	FROM unnest($10::bigint[], $11::timestamptz[]) AS r(id, due_at)
	WHERE o.id = r.id
)
SELECT count(*) FROM input`
)

// CompleteWork implements persistence.Store. Each round (one outcome per
// message) takes two round trips: lock and read, then apply; the first
// shares its round trip with BEGIN.
func (s *Store) CompleteWork(ctx context.Context, now time.Time, outcomes []persistence.Outcome) ([]persistence.Completion, error) {
	if s.closed.Load() {
		return nil, s.fail("complete work", persistence.ErrClosed)
	}
	if err := validateOutcomes(outcomes); err != nil {
		return nil, err
	}
	out := make([]persistence.Completion, len(outcomes))
	if len(outcomes) == 0 {
		return out, nil
	}
	now = norm(now)
	type workKey struct {
		kind            persistence.WorkKind
		target, message string
	}
	type ledgerKey struct{ message, target string }

	// read queues the locking reads of one round into b; apply decides and
	// writes it.
	var (
		work     map[workKey][]int64 // outbox row ids
		states   map[string]messages.State
		recorded map[ledgerKey]bool
	)
	read := func(b *pgx.Batch, round []int) {
		work, states, recorded = map[workKey][]int64{}, map[string]messages.State{}, map[ledgerKey]bool{}
		targets, ids := make([]string, len(round)), make([]string, len(round))
		for j, i := range round {
			targets[j], ids[j] = outcomes[i].Target, outcomes[i].MessageID
		}
		b.Queue(completeLockWorkSQL, ids).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id int64
				var k workKey
				if err := rows.Scan(&id, &k.kind, &k.target, &k.message); err != nil {
					return err
				}
				work[k] = append(work[k], id)
			}
			return rows.Err()
		})
		b.Queue(lockMessagesSQL, ids).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				var st messages.State
				if err := rows.Scan(&id, &st); err != nil {
					return err
				}
				states[id] = st
			}
			return rows.Err()
		})
		b.Queue(completeLedgerSQL, ids, targets).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k ledgerKey
				if err := rows.Scan(&k.message, &k.target); err != nil {
					return err
				}
				recorded[k] = true
			}
			return rows.Err()
		})
	}
	apply := func(tx pgx.Tx, round []int) error {
		var ids, kinds, targets, results, newStates, reasons, details []string
		var finished, retried []int64
		var retryAts []time.Time
		for _, i := range round {
			o := outcomes[i]
			state, found := states[o.MessageID]
			switch {
			case !found:
				out[i] = persistence.NoWork
				continue
			case recorded[ledgerKey{o.MessageID, o.Target}]:
				out[i] = persistence.AlreadyRecorded
				continue
			case o.Kind != persistence.WorkStatus && state.Final():
				// A status report is written for a message that is final
				// already; only its own ledger entry ends it.
				out[i] = persistence.AlreadyRecorded
				continue
			case len(work[workKey{o.Kind, o.Target, o.MessageID}]) == 0:
				out[i] = persistence.NoWork
				continue
			}
			out[i] = persistence.Applied
			rows := work[workKey{o.Kind, o.Target, o.MessageID}]
			if o.Result == persistence.ResultRetry {
				retryAt := now
				if !o.RetryAt.IsZero() {
					retryAt = norm(o.RetryAt)
				}
				for _, id := range rows {
					retried = append(retried, id)
					retryAts = append(retryAts, retryAt)
				}
			} else {
				finished = append(finished, rows...)
			}
			ids = append(ids, o.MessageID)
			kinds = append(kinds, string(o.Kind))
			targets = append(targets, o.Target)
			results = append(results, string(o.Result))
			newStates = append(newStates, string(persistence.StateAfter(o.Kind, o.Result)))
			reasons = append(reasons, o.Reason)
			details = append(details, o.Detail)
		}
		if len(ids) == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, completeApplySQL, ids, kinds, targets, results, newStates, reasons, details, now,
			finished, retried, retryAts)
		return err
	}

	all := rounds(len(outcomes), func(i int) string { return outcomes[i].MessageID })
	if err := s.inRounds(ctx, all, read, apply); err != nil {
		return nil, s.fail("complete work", err)
	}
	return out, nil
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
UPDATE outbox SET lease_owner = NULL, lease_until = NULL
WHERE id IN (SELECT id FROM outbox WHERE lease_owner = $1 ORDER BY id FOR UPDATE)`, owner)
	if err != nil {
		return 0, s.fail("release leases", err)
	}
	return tag.RowsAffected(), nil
}

// Ledger implements persistence.Store.
func (s *Store) Ledger(ctx context.Context, messageID, target string) (persistence.LedgerEntry, error) {
	if s.closed.Load() {
		return persistence.LedgerEntry{}, s.fail("ledger", persistence.ErrClosed)
	}
	e := persistence.LedgerEntry{MessageID: messageID, Target: target}
	err := s.pool.QueryRow(ctx, "SELECT result, at, detail FROM ledger WHERE message_id = $1 AND target = $2",
		messageID, target).Scan(&e.Result, &e.At, &e.Detail)
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.LedgerEntry{}, s.fail("ledger", fmt.Errorf("ledger %q/%q: %w", messageID, target, persistence.ErrNotFound))
	}
	if err != nil {
		return persistence.LedgerEntry{}, s.fail("ledger", err)
	}
	e.At = e.At.UTC()
	return e, nil
}

const (
	// expireCandidatesSQL finds messages to expire, oldest first.
	expireCandidatesSQL = `
SELECT m.id FROM messages m
WHERE m.state IN ('pending', 'retry') AND m.submitted_at < $1
	AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.lease_until > $2)
ORDER BY m.submitted_at, m.id
LIMIT $3`
	// expireLockWorkSQL locks the candidates' outbox rows in id order.
	expireLockWorkSQL = `
SELECT o.id FROM outbox o JOIN unnest($1::text[]) AS k(id) ON o.message_id = k.id
ORDER BY o.id
FOR UPDATE OF o`
)

// expireApplySQL fails the locked candidates that still qualify, with
// history, ledger entries (each removed row's target and the message's
// frontend) and their work removed.
var expireApplySQL = `
WITH expired AS (
	UPDATE messages m SET state = 'failed', reason = $4, updated_at = $3, history_len = m.history_len + 1
	FROM unnest($1::text[]) AS k(id)
	WHERE m.id = k.id AND m.state IN ('pending', 'retry') AND m.submitted_at < $2
		AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id AND o.lease_until > $3)
	RETURNING ` + columns("m") + `, m.history_len
),
transitions AS (
	INSERT INTO history (message_id, ordinal, state, at, detail)
	SELECT id, history_len, state, $3, $4 FROM expired
),
removed AS (
	DELETE FROM outbox o USING expired e WHERE o.message_id = e.id
	RETURNING o.message_id, o.target
),
recorded AS (
	INSERT INTO ledger (message_id, target, result, at, detail)
	SELECT message_id, target, 'failed', $3, $4 FROM (
		SELECT message_id, target FROM removed
		UNION
		SELECT id, frontend FROM expired WHERE frontend <> ''
	) t
	ON CONFLICT (message_id, target) DO NOTHING
)
SELECT ` + columns("") + ` FROM expired ORDER BY submitted_at, id`

// ExpireMessages implements persistence.Store in three round trips: begin and
// find candidates; lock their work and then them, and apply; commit.
func (s *Store) ExpireMessages(ctx context.Context, req persistence.ExpireRequest) ([]messages.Message, error) {
	if s.closed.Load() {
		return nil, s.fail("expire messages", persistence.ErrClosed)
	}
	if req.Limit <= 0 {
		return nil, fmt.Errorf("expire messages: limit %d must be positive", req.Limit)
	}
	now, cutoff := norm(req.Now), norm(req.SubmittedBefore)

	var ids []string
	first := &pgx.Batch{}
	first.Queue(expireCandidatesSQL, cutoff, now, req.Limit).Query(func(rows pgx.Rows) error {
		var err error
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	expired := []messages.Message{}
	err := s.inTx(ctx, first, func(tx pgx.Tx) error {
		if len(ids) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		b.Queue(expireLockWorkSQL, ids)
		b.Queue(lockMessagesSQL, ids)
		b.Queue(expireApplySQL, ids, cutoff, now, messages.ReasonExpired).Query(func(rows pgx.Rows) error {
			var err error
			expired, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (messages.Message, error) { return scanMessage(row) })
			return err
		})
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, s.fail("expire messages", err)
	}
	return expired, nil
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
		attempts = 0, reason = '', submitted_at = $9, updated_at = $9, history_len = m.history_len + 1
	FROM input i WHERE m.id = i.id
	RETURNING m.id, m.token, m.history_len
),
transitions AS (
	INSERT INTO history (message_id, ordinal, state, at, detail)
	SELECT mv.id, mv.history_len, i.state, $9, i.detail FROM moved mv JOIN input i ON i.id = mv.id
),
cleared AS (
	DELETE FROM ledger l USING moved mv WHERE l.message_id = mv.id AND l.result = 'failed'
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

	var states map[string]messages.State
	read := func(b *pgx.Batch, round []int) {
		states = map[string]messages.State{}
		ids := make([]string, len(round))
		for j, i := range round {
			ids[j] = reroutes[i].ID
		}
		b.Queue(lockMessagesSQL, ids).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				var st messages.State
				if err := rows.Scan(&id, &st); err != nil {
					return err
				}
				states[id] = st
			}
			return rows.Err()
		})
	}
	apply := func(tx pgx.Tx, round []int) error {
		var ids, frontends, dests, newStates, details, kinds, targets []string
		var dues []time.Time
		for _, i := range round {
			r := reroutes[i]
			state, found := states[r.ID]
			out[i] = persistence.ResubmitResult{ID: r.ID, Found: found, State: state}
			if !found || !state.Resubmittable() {
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

	all := rounds(len(reroutes), func(i int) string { return reroutes[i].ID })
	if err := s.inRounds(ctx, all, read, apply); err != nil {
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
