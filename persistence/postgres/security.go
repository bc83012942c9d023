package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// pgUniqueViolation is unique_violation: a credential's name or token is
// taken.
const pgUniqueViolation = "23505"

// Credentials implements persistence.Store.
func (s *Store) Credentials(ctx context.Context) ([]messages.Credential, error) {
	if s.closed.Load() {
		return nil, s.fail("credentials", persistence.ErrClosed)
	}
	out, err := credentials(ctx, s.pool)
	if err != nil {
		return nil, s.fail("credentials", err)
	}
	return out, nil
}

// credentials reads every credential, ordered by name.
func credentials(ctx context.Context, c conn) ([]messages.Credential, error) {
	rows, err := c.Query(ctx, `SELECT name, role, token_sha256, frontends, submit_rate, smpp, created_at
		FROM credentials ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (messages.Credential, error) {
		var c messages.Credential
		err := row.Scan(&c.Name, &c.Role, &c.TokenHash, &c.Frontends, &c.SubmitRate, &c.SMPP, &c.CreatedAt)
		c.CreatedAt = c.CreatedAt.UTC()
		if len(c.Frontends) == 0 {
			c.Frontends = nil
		}
		return c, err
	})
}

// AddCredential implements persistence.Store.
func (s *Store) AddCredential(ctx context.Context, c messages.Credential, audit messages.AuditEntry) error {
	const op = "add credential"
	c, audit, err := persistence.ValidateAddCredential(c, audit)
	if err := s.precheck(op, err); err != nil {
		return err
	}
	fes := c.Frontends
	if fes == nil {
		fes = []string{}
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO credentials (name, role, token_sha256, frontends, submit_rate, smpp, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, c.Name, string(c.Role), c.TokenHash, fes, c.SubmitRate, c.SMPP, c.CreatedAt)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == pgUniqueViolation {
			return fmt.Errorf("credential %q: its name or token: %w", c.Name, persistence.ErrExists)
		}
		if err != nil {
			return err
		}
		return appendAudit(ctx, tx, []messages.AuditEntry{audit})
	})
	return s.fail(op, err)
}

// RevokeCredential implements persistence.Store. The table is locked for
// the transaction, so that two revocations at once cannot both see the
// other's credential left and leave none.
func (s *Store) RevokeCredential(ctx context.Context, name string, audit messages.AuditEntry) error {
	const op = "revoke credential"
	entries, err := persistence.ValidateAudit([]messages.AuditEntry{audit})
	if err := s.precheck(op, err); err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE credentials IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM credentials WHERE name = $1`, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("credential %q: %w", name, persistence.ErrNotFound)
		}
		left, err := credentials(ctx, tx)
		if err != nil {
			return err
		}
		if err := persistence.RevokeLeaves(left); err != nil {
			return fmt.Errorf("credential %q: %w", name, err)
		}
		return appendAudit(ctx, tx, entries)
	})
	return s.fail(op, err)
}

// AppendAudit implements persistence.Store.
func (s *Store) AppendAudit(ctx context.Context, entries []messages.AuditEntry) error {
	const op = "append audit"
	entries, err := persistence.ValidateAudit(entries)
	if err := s.precheck(op, err); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	return s.fail(op, pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return appendAudit(ctx, tx, entries) }))
}

// appendAuditSQL appends entries given as parallel arrays, in input order.
const appendAuditSQL = `INSERT INTO audit (at, actor, role, remote, action, target, detail)
SELECT at, actor, role, remote, action, target, detail
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
	WITH ORDINALITY AS t(at, actor, role, remote, action, target, detail, ord)
ORDER BY ord`

// appendAudit inserts validated entries.
func appendAudit(ctx context.Context, tx pgx.Tx, entries []messages.AuditEntry) error {
	n := len(entries)
	ats := make([]time.Time, n)
	actors, roles, remotes, actions, targets, details := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n)
	for i, e := range entries {
		ats[i], actors[i], roles[i], remotes[i], actions[i], targets[i], details[i] =
			e.At, e.Actor, string(e.Role), e.Remote, e.Action, e.Target, e.Detail
	}
	_, err := tx.Exec(ctx, appendAuditSQL, ats, actors, roles, remotes, actions, targets, details)
	return err
}

// ListAudit implements persistence.Store: newest first by seq, the filters
// applied to that walk (the trail is small next to messages).
func (s *Store) ListAudit(ctx context.Context, q persistence.AuditQuery) (persistence.AuditPage, error) {
	const op = "list audit"
	if err := s.precheck(op, q.Validate()); err != nil {
		return persistence.AuditPage{}, err
	}
	var conds []string
	var args []any
	for _, f := range q.Filters() {
		args = append(args, f.Value)
		conds = append(conds, f.Column+" "+f.Op+" $"+strconv.Itoa(len(args)))
	}
	query := `SELECT ` + persistence.AuditColumns + ` FROM audit`
	if len(conds) > 0 {
		query += " WHERE " + strings.Join(conds, " AND ")
	}
	args = append(args, q.Limit+1)
	query += " ORDER BY seq DESC LIMIT $" + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return persistence.AuditPage{}, s.fail(op, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (messages.AuditEntry, error) {
		var e messages.AuditEntry
		err := row.Scan(&e.Seq, &e.At, &e.Actor, &e.Role, &e.Remote, &e.Action, &e.Target, &e.Detail)
		e.At = e.At.UTC()
		return e, err
	})
	if err != nil {
		return persistence.AuditPage{}, s.fail(op, err)
	}
	return persistence.AuditPageOf(q, list), nil
}

// PurgeAudit implements persistence.Store.
func (s *Store) PurgeAudit(ctx context.Context, before time.Time, limit int) (int64, error) {
	const op = "purge audit"
	if err := s.precheck(op, persistence.ValidatePurgeAudit(before, limit)); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM audit WHERE seq IN
		(SELECT seq FROM audit WHERE at < $1 ORDER BY at, seq LIMIT $2)`, norm(before), limit)
	if err != nil {
		return 0, s.fail(op, err)
	}
	return tag.RowsAffected(), nil
}
