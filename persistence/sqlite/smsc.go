package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// RecordReceipts implements persistence.Store: the messages the receipts'
// SMSC ids name are found first (a read), then one write transaction
// loads them and persistence.ApplyReceipt decides each receipt (a message
// purged in between is NoWork, as an unknown id).
func (s *Store) RecordReceipts(ctx context.Context, now time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	const op = "record receipts"
	if err := s.precheck(op, persistence.ValidateReceipts(rs)); err != nil {
		return nil, err
	}
	found := make([]persistence.Receipt, len(rs))
	copy(found, rs)
	err := s.read(ctx, op, func(tx *sql.Tx) error {
		for i, r := range found {
			err := tx.QueryRowContext(ctx, `SELECT message_id FROM smsc_refs WHERE frontend = ? AND smsc_message_id = ?`,
				r.Frontend, r.SMSCMessageID).Scan(&found[i].MessageID)
			if err != nil && err != sql.ErrNoRows {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return persistence.Each(found, func(r persistence.Receipt) string { return r.MessageID }, persistence.ApplyReceipt, s.decider(ctx, op, now))
}

// writeRefs writes the SMSC refs and receipt stats of c.
func writeRefs(ctx context.Context, tx querier, c *persistence.Changes) error {
	args := make([]any, 0, 5*len(c.Refs))
	for _, r := range c.Refs {
		args = append(args, r.Frontend, r.SMSCMessageID, r.MessageID, r.Part, toDB(c.Now))
	}
	if err := insertRows(ctx, tx, `INSERT OR REPLACE INTO smsc_refs (frontend, smsc_message_id, message_id, part, at)`, 5, args); err != nil {
		return err
	}
	for _, r := range c.Receipts {
		if _, err := tx.ExecContext(ctx, `UPDATE smsc_refs SET receipt = ? WHERE frontend = ? AND smsc_message_id = ?`,
			r.Stat, r.Frontend, r.SMSCMessageID); err != nil {
			return err
		}
	}
	return nil
}

// smscRefs reads a message's SMSC refs, oldest first.
func smscRefs(ctx context.Context, q querier, id string) ([]messages.SMSCRef, error) {
	rows, err := q.QueryContext(ctx, `SELECT smsc_message_id, receipt FROM smsc_refs INDEXED BY smsc_refs_message
		WHERE message_id = ? ORDER BY at, part`, id)
	if err != nil {
		return nil, err
	}
	var out []messages.SMSCRef
	err = scanEach(rows, func(r *sql.Rows) error {
		var ref messages.SMSCRef
		err := r.Scan(&ref.MessageID, &ref.Receipt)
		out = append(out, ref)
		return err
	})
	return out, err
}
