package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	sqlitedriver "modernc.org/sqlite"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Credentials implements persistence.Store.
func (s *Store) Credentials(ctx context.Context) ([]messages.Credential, error) {
	var out []messages.Credential
	err := s.read(ctx, "credentials", func(tx *sql.Tx) error {
		var err error
		out, err = credentials(ctx, tx)
		return err
	})
	return out, err
}

// credentials reads every credential, ordered by name.
func credentials(ctx context.Context, q querier) ([]messages.Credential, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, role, token_sha256, frontends, submit_rate, smpp, created_at
		FROM credentials ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var out []messages.Credential
	err = scanEach(rows, func(r *sql.Rows) error {
		var (
			c         messages.Credential
			role, fes string
			created   int64
		)
		if err := r.Scan(&c.Name, &role, &c.TokenHash, &fes, &c.SubmitRate, &c.SMPP, &created); err != nil {
			return err
		}
		c.Role, c.CreatedAt = messages.Role(role), fromDB(created)
		if fes != "" {
			c.Frontends = strings.Split(fes, ",")
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// AddCredential implements persistence.Store.
func (s *Store) AddCredential(ctx context.Context, c messages.Credential, audit messages.AuditEntry) error {
	const op = "add credential"
	c, audit, err := persistence.ValidateAddCredential(c, audit)
	if err := s.precheck(op, err); err != nil {
		return err
	}
	return s.write(ctx, op, func(tx querier) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO credentials (name, role, token_sha256, frontends, submit_rate, smpp, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, c.Name, string(c.Role), c.TokenHash, strings.Join(c.Frontends, ","), c.SubmitRate, c.SMPP, toDB(c.CreatedAt))
		var se *sqlitedriver.Error
		if errors.As(err, &se) && (se.Code() == sqliteConstraintUnique || se.Code() == sqliteConstraintPrimaryKey) {
			return fmt.Errorf("credential %q: its name or token: %w", c.Name, persistence.ErrExists)
		}
		if err != nil {
			return err
		}
		return appendAudit(ctx, tx, []messages.AuditEntry{audit})
	})
}

// The extended result codes of a taken name (the primary key) and a taken
// token (its UNIQUE column).
const (
	sqliteConstraintPrimaryKey = 1555
	sqliteConstraintUnique     = 2067
)

// RevokeCredential implements persistence.Store.
func (s *Store) RevokeCredential(ctx context.Context, name string, audit messages.AuditEntry) error {
	const op = "revoke credential"
	entries, err := persistence.ValidateAudit([]messages.AuditEntry{audit})
	if err := s.precheck(op, err); err != nil {
		return err
	}
	return s.write(ctx, op, func(tx querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM credentials WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("credential %q: %w", name, persistence.ErrNotFound))
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
	return s.write(ctx, op, func(tx querier) error { return appendAudit(ctx, tx, entries) })
}

// appendAudit inserts validated entries.
func appendAudit(ctx context.Context, tx querier, entries []messages.AuditEntry) error {
	args := make([]any, 0, 7*len(entries))
	for _, e := range entries {
		args = append(args, toDB(e.At), e.Actor, string(e.Role), e.Remote, e.Action, e.Target, e.Detail)
	}
	return insertRows(ctx, tx, `INSERT INTO audit (at, actor, role, remote, action, target, detail)`, 7, args)
}

// ListAudit implements persistence.Store: newest first by seq, the
// filters applied to that walk (the trail is small next to messages).
func (s *Store) ListAudit(ctx context.Context, q persistence.AuditQuery) (persistence.AuditPage, error) {
	const op = "list audit"
	if err := s.precheck(op, q.Validate()); err != nil {
		return persistence.AuditPage{}, err
	}
	var conds []string
	var args []any
	for _, f := range q.Filters() {
		conds = append(conds, f.Column+" "+f.Op+" ?")
		if t, ok := f.Value.(time.Time); ok {
			args = append(args, toDB(t))
		} else {
			args = append(args, f.Value)
		}
	}
	query := `SELECT ` + persistence.AuditColumns + ` FROM audit`
	if len(conds) > 0 {
		query += " WHERE " + strings.Join(conds, " AND ")
	}
	query += " ORDER BY seq DESC LIMIT +?"
	args = append(args, q.Limit+1)
	var rows []messages.AuditEntry
	err := s.read(ctx, op, func(tx *sql.Tx) error {
		res, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		return scanEach(res, func(r *sql.Rows) error {
			var e messages.AuditEntry
			var at int64
			var role string
			err := r.Scan(&e.Seq, &at, &e.Actor, &role, &e.Remote, &e.Action, &e.Target, &e.Detail)
			e.At, e.Role = fromDB(at), messages.Role(role)
			rows = append(rows, e)
			return err
		})
	})
	if err != nil {
		return persistence.AuditPage{}, err
	}
	return persistence.AuditPageOf(q, rows), nil
}

// PurgeAudit implements persistence.Store.
func (s *Store) PurgeAudit(ctx context.Context, before time.Time, limit int) (int64, error) {
	const op = "purge audit"
	if err := s.precheck(op, persistence.ValidatePurgeAudit(before, limit)); err != nil {
		return 0, err
	}
	var n int64
	err := s.write(ctx, op, func(tx querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM audit WHERE seq IN
			(SELECT seq FROM audit WHERE at < ? ORDER BY at, seq LIMIT +?)`, toDB(before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
