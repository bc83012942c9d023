package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// ringSQL reads the assignment: the state row with each owner range (or
// one row of NULLs when there is none), in one statement.
const ringSQL = `SELECT s.epoch, s.master, s.master_address, s.members, s.absent, s.published_at, o.service, o.lo, o.hi, o.owner
	FROM ring_state s LEFT JOIN ring_owners o ON 1 = 1 WHERE s.id = 1`

// Ring implements persistence.RingStore.
func (s *Store) Ring(ctx context.Context) (persistence.RingState, error) {
	const op = "ring"
	var st persistence.RingState
	err := s.read(ctx, op, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, ringSQL)
		if err != nil {
			return err
		}
		var members, absent string
		err = scanEach(rows, func(r *sql.Rows) error {
			var (
				epoch          int64
				published      sql.NullInt64
				service, owner sql.NullString
				lo, hi         sql.NullInt64
			)
			if err := r.Scan(&epoch, &st.Master, &st.MasterAddress, &members, &absent, &published, &service, &lo, &hi, &owner); err != nil {
				return err
			}
			st.Epoch, st.PublishedAt = uint64(epoch), zeroIfNull(published)
			if service.Valid {
				st.Owners = append(st.Owners, persistence.RangeOwner{Service: service.String,
					Range: persistence.TokenRange{Lo: uint64(lo.Int64), Hi: uint64(hi.Int64)}, Owner: owner.String})
			}
			return nil
		})
		if err != nil {
			return err
		}
		if members != "" {
			if err := json.Unmarshal([]byte(members), &st.Members); err != nil {
				return fmt.Errorf("stored members: %w", err)
			}
		}
		st.Absent, err = persistence.AbsentOf(absent)
		return err
	})
	if err != nil {
		return persistence.RingState{}, err
	}
	persistence.SortOwners(st.Owners)
	return st, nil
}

// PublishRing implements persistence.RingStore. The store elects nothing,
// so a lead is of an elector outside it: it is confirmed by its Lost
// channel, read in the writer's transaction (no other publication can come
// between the reading and the commit).
func (s *Store) PublishRing(ctx context.Context, lead persistence.Leadership, prev uint64, st persistence.RingState) error {
	const op = "publish ring"
	if err := s.precheck(op, persistence.ValidatePublish(prev, st)); err != nil {
		return err
	}
	members, err := json.Marshal(st.Members)
	if err != nil {
		return fmt.Errorf("sqlite: %s: members: %w", op, err)
	}
	absent, err := persistence.AbsentText(st.Absent)
	if err != nil {
		return fmt.Errorf("sqlite: %s: absent: %w", op, err)
	}
	var published sql.NullInt64
	if !st.PublishedAt.IsZero() {
		published = sql.NullInt64{Int64: toDB(st.PublishedAt), Valid: true}
	}
	return s.write(ctx, op, func(tx querier) error {
		if lead != nil && persistence.LeadershipEnded(lead) {
			return persistence.ErrLeadershipLost
		}
		r, err := tx.ExecContext(ctx, `UPDATE ring_state SET epoch = ?, master = ?, master_address = ?, members = ?, absent = ?, published_at = ?
			WHERE id = 1 AND epoch = ?`, int64(st.Epoch), st.Master, st.MasterAddress, string(members), absent, published, int64(prev))
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("previous epoch %d is not the stored one: %w", prev, persistence.ErrStaleEpoch)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM ring_owners`); err != nil {
			return err
		}
		args := make([]any, 0, 4*len(st.Owners))
		for _, o := range st.Owners {
			args = append(args, o.Service, int64(o.Range.Lo), int64(o.Range.Hi), o.Owner)
		}
		return insertRows(ctx, tx, `INSERT INTO ring_owners (service, lo, hi, owner)`, 4, args)
	})
}

// ringOwnersSQL reads the ranges of a service's owner.
const ringOwnersSQL = `SELECT lo, hi FROM ring_owners WHERE service = ? AND owner = ?`

// checkFence fails with ErrStaleEpoch unless req's ring epoch is the stored
// one and each of its ranges lies inside one range its owner holds for the
// service of its kind.
func checkFence(ctx context.Context, tx querier, req persistence.ClaimRequest) error {
	var epoch int64
	if err := tx.QueryRowContext(ctx, `SELECT epoch FROM ring_state WHERE id = 1`).Scan(&epoch); err != nil {
		return err
	}
	if uint64(epoch) != req.Ring.Epoch {
		return fmt.Errorf("claim under epoch %d, the ring is at %d: %w", req.Ring.Epoch, uint64(epoch), persistence.ErrStaleEpoch)
	}
	service := persistence.ServiceOf(req.Kind)
	rows, err := tx.QueryContext(ctx, ringOwnersSQL, service, req.Owner)
	if err != nil {
		return err
	}
	var owned []messages.TokenRange
	err = scanEach(rows, func(r *sql.Rows) error {
		var lo, hi int64
		err := r.Scan(&lo, &hi)
		owned = append(owned, messages.TokenRange{Lo: uint64(lo), Hi: uint64(hi)})
		return err
	})
	if err != nil {
		return err
	}
	if !persistence.Covered(owned, req.Ring.Ranges) {
		return fmt.Errorf("%s does not own %v of %s under epoch %d: %w", req.Owner, req.Ring.Ranges, service, req.Ring.Epoch, persistence.ErrStaleEpoch)
	}
	return nil
}
