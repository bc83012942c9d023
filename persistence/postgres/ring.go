package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// ringSQL reads the assignment: the state row with each owner range (or
// one row of NULLs when there is none), in one statement, so one snapshot.
const ringSQL = `
SELECT s.epoch, s.master, s.master_address, s.members, s.absent, s.published_at, o.service, o.lo, o.hi, o.owner
FROM ring_state s LEFT JOIN ring_owners o ON true WHERE s.id = 1`

// Ring implements persistence.RingStore. A read on a session the server
// had ended (sessionEnded) is made again, once, on a fresh one: a node
// reads the assignment when it has just taken the master lock, and cannot
// lead without it; when the lock was lost because the server ended the
// node's sessions (pg_terminate_backend, a failover), the pool's were
// ended too, and the one it handed out failed the read.
func (s *Store) Ring(ctx context.Context) (persistence.RingState, error) {
	if s.closed.Load() {
		return persistence.RingState{}, s.fail("ring", persistence.ErrClosed)
	}
	st, err := s.ring(ctx)
	if err != nil && sessionEnded(err) && ctx.Err() == nil {
		s.pool.Reset() // its other sessions were most likely ended with it
		st, err = s.ring(ctx)
	}
	if err != nil {
		return persistence.RingState{}, s.fail("ring", err)
	}
	return st, nil
}

// sessionEnded reports whether err is the server's end of the session it
// ran on (a FATAL error: pg_terminate_backend's 57P01, a shutdown, an idle
// transaction's timeout), or the loss of its connection: a statement that
// failed so may run again on another session.
func sessionEnded(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Severity == "FATAL"
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// ring reads the assignment (Ring) and returns the driver's error.
func (s *Store) ring(ctx context.Context) (persistence.RingState, error) {
	var (
		st              persistence.RingState
		members, absent string
	)
	rows, err := s.pool.Query(ctx, ringSQL)
	if err != nil {
		return persistence.RingState{}, err
	}
	for rows.Next() {
		var (
			epoch          int64
			published      *time.Time
			service, owner *string
			lo, hi         *int64
		)
		if err := rows.Scan(&epoch, &st.Master, &st.MasterAddress, &members, &absent, &published, &service, &lo, &hi, &owner); err != nil {
			rows.Close()
			return persistence.RingState{}, err
		}
		st.Epoch, st.PublishedAt = uint64(epoch), utcOrZero(published)
		if service != nil {
			st.Owners = append(st.Owners, persistence.RangeOwner{Service: *service,
				Range: persistence.TokenRange{Lo: uint64(*lo), Hi: uint64(*hi)}, Owner: *owner})
		}
	}
	if err := rows.Err(); err != nil {
		return persistence.RingState{}, err
	}
	if err := json.Unmarshal([]byte(members), &st.Members); err != nil {
		return persistence.RingState{}, fmt.Errorf("stored members: %w", err)
	}
	if st.Absent, err = persistence.AbsentOf(absent); err != nil {
		return persistence.RingState{}, err
	}
	persistence.SortOwners(st.Owners)
	return st, nil
}

// publishSQL is the compare-and-set of PublishRing. An UPDATE waits for the
// fenced claims that hold the row FOR SHARE (see fenceSQL), and a claim
// that comes later waits for it: claims under the old epoch either commit
// before the new one does or fail.
const publishSQL = `
UPDATE ring_state SET epoch = $2, master = $3, master_address = $4, members = $5, published_at = $6, absent = $7
WHERE id = 1 AND epoch = $1`

// insertOwnersSQL writes owner ranges (after every old one is deleted, by
// a statement of its own: a DELETE in a WITH runs after the INSERT it is
// attached to, which would then meet the old keys).
const insertOwnersSQL = `
INSERT INTO ring_owners (service, lo, hi, owner)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[])`

// heldSQL tells whether the session named by its backend's process id $2
// and start $3 holds the advisory lock of key $1 in this database now: a
// lock is the server's, not a snapshot's, so this is as of the statement,
// whatever the transaction saw before.
const heldSQL = `
SELECT EXISTS (
	SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
	WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
	AND ((l.classid::bigint << 32) | l.objid::bigint) = $1
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.pid = $2 AND a.backend_start = $3)`

// PublishRing implements persistence.RingStore in three round trips: begin,
// compare-and-set and confirm the lead's lock; replace the owners; commit.
// The lock is confirmed after the compare-and-set, which holds the state
// row until the commit: a holder that lost its lock before the check
// stores nothing, and one that loses it after has its publication ordered
// before any of the next holder's (whose compare-and-set then fails: under
// its lock, it publishes again from what this one stored).
func (s *Store) PublishRing(ctx context.Context, lead persistence.Leadership, prev uint64, st persistence.RingState) error {
	const op = "publish ring"
	if s.closed.Load() {
		return s.fail(op, persistence.ErrClosed)
	}
	if err := persistence.ValidatePublish(prev, st); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	members, err := json.Marshal(st.Members)
	if err != nil {
		return fmt.Errorf("postgres: %s: members: %w", op, err)
	}
	absent, err := persistence.AbsentText(st.Absent)
	if err != nil {
		return fmt.Errorf("postgres: %s: absent: %w", op, err)
	}
	var published *time.Time
	if !st.PublishedAt.IsZero() {
		t := norm(st.PublishedAt)
		published = &t
	}
	services, owners := make([]string, len(st.Owners)), make([]string, len(st.Owners))
	los, his := make([]int64, len(st.Owners)), make([]int64, len(st.Owners))
	for i, o := range st.Owners {
		services[i], los[i], his[i], owners[i] = o.Service, int64(o.Range.Lo), int64(o.Range.Hi), o.Owner
	}

	var swapped int64
	first := &pgx.Batch{}
	first.Queue(publishSQL, int64(prev), int64(st.Epoch), st.Master, st.MasterAddress, string(members), published, absent).
		Exec(func(tag pgconn.CommandTag) error {
			swapped = tag.RowsAffected()
			return nil
		})
	// held is what the database says of the lock of a lead of this
	// store's kind; another lead has only its Lost channel to go by.
	var held bool
	own, _ := lead.(*leadership)
	if own != nil {
		first.Queue(heldSQL, own.key, own.pid, own.started).QueryRow(func(row pgx.Row) error {
			return row.Scan(&held)
		})
	}
	err = s.inTx(ctx, first, func(tx pgx.Tx) error {
		if lead != nil && (persistence.LeadershipEnded(lead) || own != nil && !held) {
			return persistence.ErrLeadershipLost
		}
		if swapped == 0 {
			return fmt.Errorf("previous epoch %d is not the stored one: %w", prev, persistence.ErrStaleEpoch)
		}
		b := &pgx.Batch{}
		b.Queue("DELETE FROM ring_owners")
		b.Queue(insertOwnersSQL, services, los, his, owners)
		return tx.SendBatch(ctx, b).Close()
	})
	return s.fail(op, err)
}

// fenceSQL reads, with BEGIN, the stored epoch and the ranges a claim's
// owner holds for a service. FOR SHARE holds the state row until the claim
// commits, so that a publish (an UPDATE of it) cannot commit in between.
const fenceSQL = `
SELECT s.epoch, o.lo, o.hi
FROM ring_state s LEFT JOIN ring_owners o ON o.service = $1 AND o.owner = $2
WHERE s.id = 1
FOR SHARE OF s`

// fence is what fenceSQL read.
type fence struct {
	epoch uint64
	owned []messages.TokenRange
}

// queue queues fenceSQL for req into b.
func (f *fence) queue(b *pgx.Batch, req persistence.ClaimRequest) {
	b.Queue(fenceSQL, persistence.ServiceOf(req.Kind), req.Owner).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				epoch  int64
				lo, hi *int64
			)
			if err := rows.Scan(&epoch, &lo, &hi); err != nil {
				return err
			}
			f.epoch = uint64(epoch)
			if lo != nil {
				f.owned = append(f.owned, messages.TokenRange{Lo: uint64(*lo), Hi: uint64(*hi)})
			}
		}
		return rows.Err()
	})
}

// check fails with ErrStaleEpoch unless req's epoch is the stored one and
// each of its ranges lies inside one range its owner holds.
func (f *fence) check(req persistence.ClaimRequest) error {
	if f.epoch != req.Ring.Epoch {
		return fmt.Errorf("claim under epoch %d, the ring is at %d: %w", req.Ring.Epoch, f.epoch, persistence.ErrStaleEpoch)
	}
	if !persistence.Covered(f.owned, req.Ring.Ranges) {
		return fmt.Errorf("%s does not own %v of %s under epoch %d: %w",
			req.Owner, req.Ring.Ranges, persistence.ServiceOf(req.Kind), req.Ring.Epoch, persistence.ErrStaleEpoch)
	}
	return nil
}

// tokenFilter is " AND (col BETWEEN $first AND $first+1 OR ...)" for n
// signed ranges, "" for none. It filters the rows the claim index yields in
// claim order, so the claim keeps its order and its LIMIT.
func tokenFilter(col string, first, n int) string {
	if n == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" AND (")
	for i := range n {
		if i > 0 {
			b.WriteString(" OR ")
		}
		fmt.Fprintf(&b, "%s BETWEEN $%d AND $%d", col, first+2*i, first+2*i+1)
	}
	b.WriteString(")")
	return b.String()
}
