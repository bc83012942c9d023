package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// acceptSQL inserts a batch given as parallel arrays in one statement: the
// messages in id order (the deterministic lock order) with seq drawn in input
// order, each with its first history entry in the row (first_state,
// first_detail), and their outbox work (leased when a lease owner is
// given). It returns the created messages, each with the id of its outbox
// row when that was written relayed (leased, or to publish); the caller reads the others (already stored) afterwards,
// in a statement of their own, which also sees those that a concurrent Accept
// committed while this one waited on their ids. A message for local
// delivery is inserted only if its frontend exists
// (persistence.LocalFrontend): an index probe of the frontends' primary
// key, without a lock (FOR SHARE from every instance's commits would make
// the frontend's row a MultiXact hot spot). A delete that commits while
// this statement runs can still leave a message for the frontend, as a
// delete just after the commit would.
var acceptSQL = `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
			$7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::timestamptz[], $15::text[],
			$16::int[], $17::text[], $18::timestamptz[], $19::text[], $20::bytea[], $21::timestamptz[], $22::timestamptz[],
			$23::bool[], $24::text[], $25::text[], $26::int[])
		WITH ORDINALITY AS t(id, token, source_msisdn, destination_msisdn, body, state,
			source_smsc, dest_smsc, frontend, detail, work_kind, work_target, work_due, report_to,
			attempts, lease_owner, lease_until, data_coding, body_binary, validity_until, deliver_after, relayed, submitted_by, traceparent, message_class, ord)
),
numbered AS (
	-- Postgres evaluates a volatile output expression after ORDER BY, so
	-- seq follows input order.
	SELECT input.*, nextval('messages_seq_seq') AS seq FROM input ORDER BY ord
),
created AS (
	INSERT INTO messages (id, seq, token, source_msisdn, destination_msisdn, body, state,
		source_smsc, dest_smsc, frontend, attempts, reason, created_at, updated_at, submitted_at, history_len,
		queued_at, report_to, first_state, first_detail, data_coding, body_binary, validity_until, deliver_after, submitted_by, traceparent, message_class)
	SELECT id, seq, token, source_msisdn, destination_msisdn, body, state,
		source_smsc, dest_smsc, frontend, attempts, '', $14, $14, $14, 1,
		CASE WHEN state = 'forward_queued' THEN $14::timestamptz END, report_to, state, detail,
		data_coding, body_binary, validity_until, deliver_after, submitted_by, traceparent, message_class
	FROM numbered n
	WHERE n.work_kind <> 'delivery' OR EXISTS (SELECT 1 FROM frontends f WHERE f.name = n.work_target)
	ORDER BY id COLLATE "C"
	ON CONFLICT (id) DO NOTHING
	RETURNING ` + columns("") + `
),
work AS (
	INSERT INTO outbox (kind, target, message_id, token, due_at, created_at, lease_owner, lease_until, relayed)
	SELECT i.work_kind, i.work_target, c.id, c.token, i.work_due, $14, NULLIF(i.lease_owner, ''), i.lease_until, i.relayed
	FROM created c JOIN input i ON i.id = c.id
	WHERE i.work_kind <> ''
	ORDER BY i.ord
	RETURNING id, message_id, kind, target, relayed
),
counted AS (
	-- The counters' deltas (see counts.go), in the same statement.
	INSERT INTO counter_deltas (of, key, n)
	SELECT 'state', state, count(*) FROM created GROUP BY state
	UNION ALL
	SELECT kind, target, count(*) FROM work GROUP BY kind, target
)
SELECT ` + columns("c") + `, w.id FROM created c LEFT JOIN work w ON w.message_id = c.id AND w.relayed`

// acceptPart stores the new messages of a Write (Accept) in one statement
// (its first round trip), and one more that reads the stored messages when
// some ids were taken. It fills *out.
func (s *Store) acceptPart(now time.Time, batch []persistence.NewMessage, out *[]persistence.Accepted) part {
	plan := persistence.PlanAccept(batch)
	uniq, lookups := plan.Firsts, plan.Lookups
	n := len(uniq)
	var (
		ids, srcs, dsts, bodies, states = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		srcSMSCs, dstSMSCs, frontends   = make([]string, n), make([]string, n), make([]string, n)
		details, kinds, targets         = make([]string, n), make([]string, n), make([]string, n)
		reportTo, leaseOwners           = make([]string, n), make([]string, n)
		tokens                          = make([]int64, n)
		attempts                        = make([]int32, n)
		dues                            = make([]time.Time, n)
		leaseUntils                     = make([]*time.Time, n)
		codings                         = make([]string, n)
		binaries                        = make([][]byte, n)
		validities, delivers            = make([]*time.Time, n), make([]*time.Time, n)
		relayed                         = make([]bool, n)
		submitters                      = make([]string, n)
		traces                          = make([]string, n)
		classes                         = make([]*int, n)
	)
	for k, i := range uniq {
		m := batch[i]
		r := persistence.NewRow(m, now)
		codings[k], binaries[k], validities[k], delivers[k] = string(r.DataCoding), r.Binary, r.ValidityUntil, r.DeliverAfter
		submitters[k], traces[k], classes[k] = r.SubmittedBy, r.Trace, r.MessageClass
		attempts[k] = int32(r.Attempts)
		ids[k], tokens[k], srcs[k], dsts[k], bodies[k], states[k] = m.ID, tokenOf(m.ID), m.SourceMSISDN, m.DestinationMSISDN, m.Body, string(m.State)
		srcSMSCs[k], dstSMSCs[k], frontends[k], details[k], reportTo[k] = m.SourceSMSC, m.DestSMSC, m.Frontend, m.Detail, m.ReportTo
		dues[k] = now
		if m.Work != nil {
			w := persistence.NewWork(m, now)
			kinds[k], targets[k], dues[k] = string(w.Spec.Kind), w.Spec.Target, w.Spec.DueAt
			if w.Lease != nil {
				until := norm(w.Lease.Until)
				leaseOwners[k], leaseUntils[k] = w.Lease.Owner, &until
			}
			relayed[k] = w.Relayed()
		}
	}
	created := make(map[string]messages.Message, n)
	relayedRows := map[string]int64{}
	// insert queues the statement for the entries at idx, all of them when
	// idx is nil.
	insert := func(b *pgx.Batch, idx []int) {
		b.Queue(acceptSQL, pick(ids, idx), pick(tokens, idx), pick(srcs, idx), pick(dsts, idx), pick(bodies, idx), pick(states, idx),
			pick(srcSMSCs, idx), pick(dstSMSCs, idx), pick(frontends, idx), pick(details, idx), pick(kinds, idx), pick(targets, idx),
			pick(dues, idx), now, pick(reportTo, idx), pick(attempts, idx), pick(leaseOwners, idx), pick(leaseUntils, idx),
			pick(codings, idx), pick(binaries, idx), pick(validities, idx), pick(delivers, idx), pick(relayed, idx),
			pick(submitters, idx), pick(traces, idx), pick(classes, idx)).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var row *int64
				m, err := scanMessage(rows, &row)
				if err != nil {
					return err
				}
				created[m.ID] = m
				if row != nil {
					relayedRows[m.ID] = *row
				}
			}
			return rows.Err()
		})
	}
	// run reads the messages whose ids were taken, and those of StoredOnly
	// submissions (an absent one is Absent, not inserted), and whether the
	// frontends of those for local delivery exist, in one round trip. One
	// that is not stored and whose frontend is not registered was not
	// inserted for that (FrontendGone). Any other one that is gone by
	// then was purged between the insert and the read (its retention
	// ended; on one instance of a site while another accepted its id
	// again): it is inserted again, as a submission after its idempotency
	// window is, and read again if its id was taken once more. After
	// acceptRounds of that, AcceptResults reports what is still missing.
	// When it fails, *out holds what it knows (persistence.KnownResults):
	// outside a transaction the insert has committed, and Write reports
	// it (persistence.Partial).
	run := func(ctx context.Context, q conn) (err error) {
		stored := map[string]messages.Message{}
		reportTo := map[string]string{} // of the stored ones
		unknown := map[string]bool{}
		defer func() {
			if err != nil {
				*out = persistence.KnownResults(plan, batch, created, stored, reportTo, relayedRows, unknown)
			}
		}()
		// missing are the entries neither created nor read yet.
		missing := func() (at []int, of []string) {
			for k, id := range ids {
				_, made := created[id]
				if fe, ok := persistence.LocalFrontend(batch[uniq[k]]); ok && unknown[fe] {
					continue
				}
				if _, ok := stored[id]; !made && !ok {
					at, of = append(at, k), append(of, id)
				}
			}
			return at, of
		}
		for round := range acceptRounds {
			at, taken := missing()
			if round == 0 {
				// StoredOnly submissions are read, never inserted.
				taken = append(taken, lookups...)
			}
			if len(taken) == 0 {
				break
			}
			fes := persistence.LocalFrontends(batch, pick(uniq, at))
			found, to, known, err := s.readTaken(ctx, q, taken, fes)
			if err != nil {
				return err
			}
			for _, m := range found {
				stored[m.ID] = m
			}
			maps.Copy(reportTo, to)
			for _, fe := range fes {
				unknown[fe] = !known[fe]
			}
			gone, _ := missing()
			if len(gone) == 0 {
				break
			}
			b := &pgx.Batch{}
			insert(b, gone)
			if err := q.SendBatch(ctx, b).Close(); err != nil {
				// What it returned may not have committed.
				for _, k := range gone {
					delete(created, ids[k])
					delete(relayedRows, ids[k])
				}
				return err
			}
		}
		*out, err = persistence.AcceptResults(plan, batch, created, stored, reportTo, relayedRows, unknown)
		return err
	}
	return part{queue: func(b *pgx.Batch) { insert(b, nil) }, run: run}
}

// knownFrontendsSQL reads which of the names given are registered
// frontends (a join on the primary key; see messagesByIDSQL).
const knownFrontendsSQL = "SELECT f.name FROM frontends f JOIN unnest($1::text[]) AS k(name) ON f.name = k.name"

// readTaken reads the messages with the ids given (those stored) and
// which of the frontends fes are registered, in one round trip.
func (s *Store) readTaken(ctx context.Context, q conn, ids, fes []string) ([]messages.Message, map[string]string, map[string]bool, error) {
	var found []messages.Message
	reportTo := make(map[string]string, len(ids))
	known := make(map[string]bool, len(fes))
	b := &pgx.Batch{}
	b.Queue(messagesByIDSQL, ids).Query(func(rows pgx.Rows) error {
		var err error
		found, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (messages.Message, error) { return scanMessage(row) })
		return err
	})
	b.Queue(reportToByIDSQL, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id, to string
			if err := rows.Scan(&id, &to); err != nil {
				return err
			}
			reportTo[id] = to
		}
		return rows.Err()
	})
	if len(fes) > 0 {
		b.Queue(knownFrontendsSQL, fes).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var name string
				if err := rows.Scan(&name); err != nil {
					return err
				}
				known[name] = true
			}
			return rows.Err()
		})
	}
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, nil, err
	}
	return found, reportTo, known, nil
}

// acceptRounds bounds the reads (and inserts again) of an Accept's ids that
// were taken when it inserted them.
const acceptRounds = 3

// pick is xs at the indexes idx, in their order; all of xs when idx is nil.
func pick[T any](xs []T, idx []int) []T {
	if idx == nil {
		return xs
	}
	out := make([]T, len(idx))
	for i, k := range idx {
		out[i] = xs[k]
	}
	return out
}

// messagesByIDSQL reads messages by id.
//
// Lookups by a list of keys join the unnested list rather than filter with
// = ANY($1): in a cached generic plan = ANY compares every row of a scan with
// every element of the array, while a join hashes the list or looks each key
// up in the index.
// reportToByIDSQL reads whom the messages' reports go to (Accepted.ReportTo).
var reportToByIDSQL = "SELECT m.id, m.report_to FROM messages m JOIN unnest($1::text[]) AS k(id) ON m.id = k.id"

var messagesByIDSQL = "SELECT " + columns("m") + " FROM messages m JOIN unnest($1::text[]) AS k(id) ON m.id = k.id"

// messagesByID reads messages (without history) in no particular order.
func (s *Store) messagesByID(ctx context.Context, q conn, ids []string) ([]messages.Message, error) {
	rows, err := q.Query(ctx, messagesByIDSQL, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (messages.Message, error) { return scanMessage(row) })
}

// GetMessage implements persistence.Store: the message and its history in
// one statement, so both come from one snapshot.
func (s *Store) GetMessage(ctx context.Context, id string) (messages.Message, error) {
	if s.closed.Load() {
		return messages.Message{}, s.fail("get message", persistence.ErrClosed)
	}
	m, err := scanWithHistory(s.pool.QueryRow(ctx, withHistory("unnest($1::text[]) AS k(id)"), []string{id}))
	if errors.Is(err, pgx.ErrNoRows) {
		return messages.Message{}, s.fail("get message", fmt.Errorf("message %q: %w", id, persistence.ErrNotFound))
	}
	if err != nil {
		return messages.Message{}, s.fail("get message", err)
	}
	// The API's extras (see apiColumns): the last entry's detail, and when
	// its work is due next.
	if n := len(m.History); n > 0 {
		m.LastDetail = m.History[n-1].Detail
	}
	refs, err := s.smscRefs(ctx, id)
	if err != nil {
		return messages.Message{}, s.fail("get message", err)
	}
	m.SetSMSC(refs)
	var due *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT min(due_at) FROM outbox WHERE message_id = $1 AND kind <> 'status'`, id).Scan(&due); err != nil {
		return messages.Message{}, s.fail("get message", err)
	}
	if due != nil {
		t := due.UTC()
		m.NextAttemptAt = &t
	}
	return m, nil
}

// seqBoundsSQL reads the smallest and largest seq: two lookups at the ends
// of the seq index.
const seqBoundsSQL = `SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM messages`

// ListMessages implements persistence.Store. It reads one row more than the
// page to know whether another page follows, and for a Windowed query first
// the seq bounds its window is cut from. The two statements see two
// snapshots: messages accepted in between are read too on a first page
// (its window has no upper end) and are above the window of a later one,
// and messages purged in between only make the page shorter.
func (s *Store) ListMessages(ctx context.Context, q persistence.ListQuery) (persistence.Page, error) {
	if err := s.precheck("list messages", q.Validate()); err != nil {
		return persistence.Page{}, err
	}
	var w persistence.Window
	if q.Windowed() {
		var b persistence.SeqBounds
		if err := s.pool.QueryRow(ctx, seqBoundsSQL).Scan(&b.Min, &b.Max); err != nil {
			return persistence.Page{}, s.fail("list messages", err)
		}
		w = persistence.ListWindow(q, b)
	}
	query, args := listQuery(q, w)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return persistence.Page{}, s.fail("list messages", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (messages.Message, error) { return scanAPIMessage(row) })
	if err != nil {
		return persistence.Page{}, s.fail("list messages", err)
	}
	return persistence.PageOf(q, w, list), nil
}

// listQuery is the statement of ListMessages for q and its arguments, with
// only the conditions in use, so that the planner picks the matching
// index: a number's (messages_destination, messages_source: the number
// without its '+' in byte order, then seq; a prefix is a LIKE the index
// serves as a range), a client's own (messages_submitted_by, in seq order
// also with a time range: ByTime is false for it), created_at's for a time
// range alone (messages_created), (state, seq) for a state, or seq. A
// Windowed query (frontend or peer alone, which filter the rows of that
// walk) is bounded by the window w: seq >= w.Lo, a range of the seq or the
// (state, seq) index.
func listQuery(q persistence.ListQuery, w persistence.Window) (string, []any) {
	var (
		conds []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	number := func(col string, m persistence.NumberMatch) {
		expr := "(ltrim(" + col + ", '+') COLLATE \"C\")"
		switch {
		case m.Key == "":
		case m.Prefix:
			conds = append(conds, expr+" LIKE "+arg(likePrefix(m.Key)))
		default:
			conds = append(conds, expr+" = "+arg(m.Key))
		}
	}
	number("destination_msisdn", q.Destination)
	number("source_msisdn", q.Source)
	if q.State != "" {
		conds = append(conds, "state = "+arg(string(q.State)))
	}
	if !q.Since.IsZero() {
		conds = append(conds, "created_at >= "+arg(norm(q.Since)))
	}
	if !q.Until.IsZero() {
		conds = append(conds, "created_at < "+arg(norm(q.Until)))
	}
	if q.Frontend != "" {
		conds = append(conds, "frontend = "+arg(q.Frontend))
	}
	if q.Peer != "" {
		p := arg(q.Peer)
		conds = append(conds, "(source_smsc = "+p+" OR dest_smsc = "+p+")")
	}
	if q.SubmittedBy != "" {
		// The second term is the partial index's own condition.
		conds = append(conds, "submitted_by = "+arg(q.SubmittedBy)+" AND submitted_by <> ''")
	}
	order := " ORDER BY seq DESC"
	switch {
	case q.ByTime():
		order = " ORDER BY created_at DESC, seq DESC"
		if q.Before > 0 {
			conds = append(conds, "(created_at, seq) < ("+arg(norm(q.BeforeAt))+", "+arg(q.Before)+")")
		}
	case q.Before > 0:
		conds = append(conds, "seq < "+arg(q.Before))
	}
	if w.Lo > 0 {
		conds = append(conds, "seq >= "+arg(w.Lo))
	}
	sql := "SELECT " + columns("") + ", " + apiColumns("messages") + " FROM messages"
	if len(conds) > 0 {
		sql += " WHERE " + strings.Join(conds, " AND ")
	}
	return sql + order + " LIMIT " + arg(q.Limit+1), args
}

// likePrefix is a LIKE pattern matching every string that starts with p
// (its own % _ and \ escaped).
func likePrefix(p string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p) + "%"
}

// oldestDueSQL reads the earliest due time of the work claimable at $1:
// for each kind and target of work (the counters and their deltas name
// them), the first row of outbox_claim in due order that is due and not
// leased. A seek per target, skipping only the rows leased now (work in
// flight): the cost grows with the targets and the leases, not with the
// rows waiting.
const oldestDueSQL = `SELECT min((SELECT o.due_at FROM outbox o
		WHERE o.kind = t.of AND o.target = t.key AND o.due_at <= $1
			AND (o.lease_until IS NULL OR o.lease_until <= $1)
		ORDER BY o.due_at, o.id LIMIT 1))
	FROM (SELECT of, key FROM counters UNION SELECT of, key FROM counter_deltas) t WHERE t.of <> 'state'`

// OldestDue implements persistence.Store.
func (s *Store) OldestDue(ctx context.Context, now time.Time) (time.Time, error) {
	const op = "oldest due"
	if err := s.precheck(op, nil); err != nil {
		return time.Time{}, err
	}
	var due *time.Time
	if err := s.pool.QueryRow(ctx, oldestDueSQL, norm(now)).Scan(&due); err != nil {
		return time.Time{}, s.fail(op, err)
	}
	return utcOrZero(due), nil
}

// storeBytesSQL is the size on disk of the schema's tables, with their
// indexes and TOAST.
const storeBytesSQL = `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
	WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'`

// Stats implements persistence.Store: the maintained counters and the
// schema's size, in one round trip.
func (s *Store) Stats(ctx context.Context) (persistence.Stats, error) {
	if s.closed.Load() {
		return persistence.Stats{}, s.fail("stats", persistence.ErrClosed)
	}
	totals := persistence.Counts{}
	var bytes int64
	b := &pgx.Batch{}
	b.Queue(readCountsSQL).Query(scanCounts(totals))
	b.Queue(storeBytesSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&bytes) })
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return persistence.Stats{}, s.fail("stats", err)
	}
	return persistence.StatsOf(totals, bytes), nil
}
