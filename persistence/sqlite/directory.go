package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/switchboard-dev/switchboard/persistence"
)

// Routes implements persistence.Store. Prefixes sort bytewise (BINARY).
func (s *Store) Routes(ctx context.Context) ([]persistence.Route, error) {
	const op = "routes"
	var out []persistence.Route
	err := s.read(ctx, op, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT prefix, frontend, updated_at FROM routes ORDER BY prefix`)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			var rt persistence.Route
			var updated int64
			if err := r.Scan(&rt.Prefix, &rt.Frontend, &updated); err != nil {
				return err
			}
			rt.UpdatedAt = fromDB(updated)
			out = append(out, rt)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PutRoute implements persistence.Store.
func (s *Store) PutRoute(ctx context.Context, r persistence.Route) error {
	const op = "put route"
	if err := s.precheck(op, persistence.ValidateRoute(r)); err != nil {
		return err
	}
	return s.write(ctx, op, func(tx querier) error {
		if r.Local {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM frontends WHERE name = ?`, r.Frontend).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("route %q to frontend %q: %w", r.Prefix, r.Frontend, persistence.ErrUnknownFrontend)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO routes (prefix, frontend, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (prefix) DO UPDATE SET frontend = excluded.frontend, updated_at = excluded.updated_at`,
			r.Prefix, r.Frontend, toDB(r.UpdatedAt))
		return err
	})
}

// DeleteRoute implements persistence.Store.
func (s *Store) DeleteRoute(ctx context.Context, prefix string) error {
	return s.deleteOne(ctx, "delete route", `DELETE FROM routes WHERE prefix = ?`, prefix)
}

// Frontends implements persistence.Store. Names sort bytewise (BINARY).
func (s *Store) Frontends(ctx context.Context) ([]persistence.Frontend, error) {
	const op = "frontends"
	var out []persistence.Frontend
	err := s.read(ctx, op, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT name, mode, url, secret, created_at, updated_at FROM frontends ORDER BY name`)
		if err != nil {
			return err
		}
		return scanEach(rows, func(r *sql.Rows) error {
			var f persistence.Frontend
			var mode string
			var created, updated int64
			if err := r.Scan(&f.Name, &mode, &f.URL, &f.Secret, &created, &updated); err != nil {
				return err
			}
			f.Mode, f.CreatedAt, f.UpdatedAt = persistence.FrontendMode(mode), fromDB(created), fromDB(updated)
			f.SecretSet = f.Secret != ""
			out = append(out, f)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PutFrontend implements persistence.Store.
func (s *Store) PutFrontend(ctx context.Context, f persistence.Frontend) error {
	const op = "put frontend"
	if err := s.precheck(op, persistence.ValidateFrontend(f)); err != nil {
		return err
	}
	return s.write(ctx, op, func(tx querier) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO frontends (name, mode, url, secret, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET mode = excluded.mode, url = excluded.url, secret = excluded.secret, updated_at = excluded.updated_at`,
			f.Name, string(f.Mode), f.URL, f.Secret, toDB(f.CreatedAt), toDB(f.UpdatedAt))
		return err
	})
}

// DeleteFrontend implements persistence.Store: the check that no route
// names it and the delete are one transaction (the writer's: one at a time).
func (s *Store) DeleteFrontend(ctx context.Context, name string) error {
	return s.write(ctx, "delete frontend", func(tx querier) error {
		var frontends, routes int
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM frontends WHERE name = ?),
			(SELECT count(*) FROM routes WHERE frontend = ?)`, name, name).Scan(&frontends, &routes); err != nil {
			return err
		}
		switch {
		case frontends == 0:
			return fmt.Errorf("frontend %q: %w", name, persistence.ErrNotFound)
		case routes > 0:
			return fmt.Errorf("frontend %q: %w", name, persistence.ErrFrontendInUse)
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM frontends WHERE name = ?`, name)
		return err
	})
}

// deleteOne runs a DELETE by key and reports ErrNotFound when it removed
// nothing.
func (s *Store) deleteOne(ctx context.Context, op, query, key string) error {
	return s.write(ctx, op, func(tx querier) error {
		r, err := tx.ExecContext(ctx, query, key)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%q: %w", key, persistence.ErrNotFound)
		}
		return nil
	})
}
