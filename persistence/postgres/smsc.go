package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

const (
	// receiptIDsSQL finds the messages of receipts' SMSC ids ('' for an id
	// that names none), in input order.
	receiptIDsSQL = `
SELECT COALESCE(r.message_id, '') FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(frontend, smsc_message_id, ord)
LEFT JOIN smsc_refs r ON r.frontend = k.frontend AND r.smsc_message_id = k.smsc_message_id
ORDER BY k.ord`
	// refsSQL keeps SMSC refs; one of the same frontend and id is
	// replaced (its receipt with it).
	refsSQL = `
INSERT INTO smsc_refs (frontend, smsc_message_id, message_id, part, at)
SELECT frontend, smsc_message_id, message_id, part, $1
FROM unnest($2::text[], $3::text[], $4::text[], $5::int[]) AS r(frontend, smsc_message_id, message_id, part)
ON CONFLICT (frontend, smsc_message_id) DO UPDATE SET message_id = excluded.message_id, part = excluded.part,
	at = excluded.at, receipt = ''`
	receiptsSQL = `
UPDATE smsc_refs s SET receipt = r.stat
FROM unnest($1::text[], $2::text[], $3::text[]) AS r(frontend, smsc_message_id, stat)
WHERE s.frontend = r.frontend AND s.smsc_message_id = r.smsc_message_id`
	messageRefsSQL = `SELECT smsc_message_id, receipt FROM smsc_refs WHERE message_id = $1 ORDER BY at, part`
)

// RecordReceipts implements persistence.Store: the messages the receipts'
// SMSC ids name are found first (one read), then one transaction locks
// and loads them and persistence.ApplyReceipt decides each receipt (a
// message purged in between is NoWork, as an unknown id).
func (s *Store) RecordReceipts(ctx context.Context, now time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	const op = "record receipts"
	if err := s.precheck(op, persistence.ValidateReceipts(rs)); err != nil {
		return nil, err
	}
	fes, ids := make([]string, len(rs)), make([]string, len(rs))
	for i, r := range rs {
		fes[i], ids[i] = r.Frontend, r.SMSCMessageID
	}
	rows, err := s.pool.Query(ctx, receiptIDsSQL, fes, ids)
	if err != nil {
		return nil, s.fail(op, err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.fail(op, err)
	}
	if len(found) != len(rs) {
		return nil, s.fail(op, errors.New("receipt lookup returned another number of rows"))
	}
	in := make([]persistence.Receipt, len(rs))
	for i, r := range rs {
		r.MessageID = found[i]
		in[i] = r
	}
	return persistence.Each(in, func(r persistence.Receipt) string { return r.MessageID }, persistence.ApplyReceipt, s.decider(ctx, op, now))
}

// queueRefs queues the writes of c's SMSC refs and receipt stats.
func queueRefs(b *pgx.Batch, c *persistence.Changes) {
	if len(c.Refs) > 0 {
		// One row per (frontend, id): the last of a batch wins, as it
		// would one by one (ON CONFLICT cannot touch a row twice).
		last := map[[2]string]int{}
		for i, r := range c.Refs {
			last[[2]string{r.Frontend, r.SMSCMessageID}] = i
		}
		var fes, ids, msgs []string
		var parts []int32
		for i, r := range c.Refs {
			if last[[2]string{r.Frontend, r.SMSCMessageID}] != i {
				continue
			}
			fes, ids, msgs, parts = append(fes, r.Frontend), append(ids, r.SMSCMessageID), append(msgs, r.MessageID), append(parts, int32(r.Part))
		}
		b.Queue(refsSQL, c.Now, fes, ids, msgs, parts)
	}
	for _, r := range c.Receipts {
		b.Queue(receiptsSQL, []string{r.Frontend}, []string{r.SMSCMessageID}, []string{r.Stat})
	}
}

// smscRefs reads a message's SMSC refs, oldest first.
func (s *Store) smscRefs(ctx context.Context, id string) ([]messages.SMSCRef, error) {
	rows, err := s.pool.Query(ctx, messageRefsSQL, id)
	if err != nil {
		return nil, err
	}
	refs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (messages.SMSCRef, error) {
		var ref messages.SMSCRef
		err := r.Scan(&ref.MessageID, &ref.Receipt)
		return ref, err
	})
	if len(refs) == 0 {
		refs = nil
	}
	return refs, err
}
