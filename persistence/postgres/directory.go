package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/persistence"
)

// Routes implements persistence.Store.
func (s *Store) Routes(ctx context.Context) ([]persistence.Route, error) {
	if s.closed.Load() {
		return nil, s.fail("routes", persistence.ErrClosed)
	}
	rows, err := s.pool.Query(ctx, "SELECT prefix, frontend, updated_at FROM routes ORDER BY prefix")
	if err != nil {
		return nil, s.fail("routes", err)
	}
	routes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (persistence.Route, error) {
		var r persistence.Route
		err := row.Scan(&r.Prefix, &r.Frontend, &r.UpdatedAt)
		r.UpdatedAt = r.UpdatedAt.UTC()
		return r, err
	})
	if err != nil {
		return nil, s.fail("routes", err)
	}
	return routes, nil
}

// PutRoute implements persistence.Store. The empty prefix is a route like any
// other: it matches every destination.
func (s *Store) PutRoute(ctx context.Context, r persistence.Route) error {
	if err := s.precheck("put route", persistence.ValidateRoute(r)); err != nil {
		return err
	}
	const put = `
INSERT INTO routes (prefix, frontend, updated_at) VALUES ($1, $2, $3)
ON CONFLICT (prefix) DO UPDATE SET frontend = excluded.frontend, updated_at = excluded.updated_at`
	if !r.Local {
		_, err := s.pool.Exec(ctx, put, r.Prefix, r.Frontend, norm(r.UpdatedAt))
		return s.fail("put route", err)
	}
	// The frontend's row is share-locked until the commit: a DeleteFrontend
	// (which locks it for update) either committed before, and the row is
	// gone, or waits and then sees this route.
	b := &pgx.Batch{}
	var found bool
	b.Queue("SELECT EXISTS (SELECT 1 FROM frontends WHERE name = $1 FOR SHARE)", r.Frontend).QueryRow(func(row pgx.Row) error {
		return row.Scan(&found)
	})
	err := s.inTx(ctx, b, func(tx pgx.Tx) error {
		if !found {
			return fmt.Errorf("route %q to frontend %q: %w", r.Prefix, r.Frontend, persistence.ErrUnknownFrontend)
		}
		_, err := tx.Exec(ctx, put, r.Prefix, r.Frontend, norm(r.UpdatedAt))
		return err
	})
	return s.fail("put route", err)
}

// DeleteRoute implements persistence.Store.
func (s *Store) DeleteRoute(ctx context.Context, prefix string) error {
	if s.closed.Load() {
		return s.fail("delete route", persistence.ErrClosed)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM routes WHERE prefix = $1", prefix)
	if err != nil {
		return s.fail("delete route", err)
	}
	if tag.RowsAffected() == 0 {
		return s.fail("delete route", fmt.Errorf("route %q: %w", prefix, persistence.ErrNotFound))
	}
	return nil
}

// Frontends implements persistence.Store.
func (s *Store) Frontends(ctx context.Context) ([]persistence.Frontend, error) {
	if s.closed.Load() {
		return nil, s.fail("frontends", persistence.ErrClosed)
	}
	rows, err := s.pool.Query(ctx, "SELECT name, mode, url, secret, created_at, updated_at FROM frontends ORDER BY name")
	if err != nil {
		return nil, s.fail("frontends", err)
	}
	frontends, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (persistence.Frontend, error) {
		var f persistence.Frontend
		err := row.Scan(&f.Name, &f.Mode, &f.URL, &f.Secret, &f.CreatedAt, &f.UpdatedAt)
		f.CreatedAt, f.UpdatedAt = f.CreatedAt.UTC(), f.UpdatedAt.UTC()
		f.SecretSet = f.Secret != ""
		return f, err
	})
	if err != nil {
		return nil, s.fail("frontends", err)
	}
	return frontends, nil
}

// PutFrontend implements persistence.Store; a replace keeps created_at.
func (s *Store) PutFrontend(ctx context.Context, f persistence.Frontend) error {
	if err := s.precheck("put frontend", persistence.ValidateFrontend(f)); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `
INSERT INTO frontends (name, mode, url, secret, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (name) DO UPDATE SET mode = excluded.mode, url = excluded.url, secret = excluded.secret, updated_at = excluded.updated_at`,
		f.Name, string(f.Mode), f.URL, f.Secret, norm(f.CreatedAt), norm(f.UpdatedAt))
	return s.fail("put frontend", err)
}

// DeleteFrontend implements persistence.Store. The frontend's row is
// locked for update first; the routes are read after, in a statement of
// their own (a snapshot taken once the lock is held), so a PutRoute to it
// that committed meanwhile is seen, and one that comes later waits for the
// delete and finds no frontend (see PutRoute).
func (s *Store) DeleteFrontend(ctx context.Context, name string) error {
	if s.closed.Load() {
		return s.fail("delete frontend", persistence.ErrClosed)
	}
	b := &pgx.Batch{}
	var found bool
	b.Queue("SELECT EXISTS (SELECT 1 FROM frontends WHERE name = $1 FOR UPDATE)", name).QueryRow(func(row pgx.Row) error {
		return row.Scan(&found)
	})
	err := s.inTx(ctx, b, func(tx pgx.Tx) error {
		if !found {
			return fmt.Errorf("frontend %q: %w", name, persistence.ErrNotFound)
		}
		var named bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM routes WHERE frontend = $1)", name).Scan(&named); err != nil {
			return err
		}
		if named {
			return fmt.Errorf("frontend %q: %w", name, persistence.ErrFrontendInUse)
		}
		_, err := tx.Exec(ctx, "DELETE FROM frontends WHERE name = $1", name)
		return err
	})
	return s.fail("delete frontend", err)
}
