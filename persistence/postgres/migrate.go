package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the session advisory lock held while migrating: the
// ASCII bytes "swbdmigr". It is database-wide, so stores in different schemas
// of one database also migrate one at a time; migrations are short.
const migrationLockKey int64 = 0x737762646d696772

// migration is one embedded SQL file, NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the embedded files in version order.
func loadMigrations() ([]migration, error) {
	entries, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	seen := map[int]string{}
	for _, file := range entries {
		base := strings.TrimSuffix(path.Base(file), ".sql")
		num, name, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", file)
		}
		if other, dup := seen[version]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, file, version)
		}
		seen[version] = file
		body, err := migrationFiles.ReadFile(file)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: version, name: name, sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// Open's errors with NoMigrate: the database has no schema of a node at
// all, one that lacks migrations this package has, or one that another
// build migrated (another migration recorded under one of this package's
// versions).
var (
	ErrNoSchema      = errors.New("postgres: the database has no switchboard schema")
	ErrSchemaBehind  = errors.New("postgres: the database's schema is behind this switchboard's")
	ErrSchemaForeign = errors.New("postgres: the database's schema is not this switchboard's")
)

// checkSchema reports ErrNoSchema, ErrSchemaForeign or ErrSchemaBehind
// unless every migration this package has is recorded in the database
// under its version and name. The latest version alone does not tell: a
// database another build migrated may record as many migrations and not
// these, or lack one in the middle. Migrations this package does not have
// (after its latest) are a newer node's: nodes of this version run on
// that schema (in a rolling upgrade), so it is taken.
func checkSchema(ctx context.Context, pool *pgxpool.Pool) error {
	all, err := loadMigrations()
	if err != nil {
		return err
	}
	rows, err := pool.Query(ctx, "SELECT version, name FROM schema_migrations ORDER BY version")
	var recorded []migration
	if err == nil {
		recorded, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (migration, error) {
			var m migration
			return m, row.Scan(&m.version, &m.name)
		})
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		return fmt.Errorf("%w (start a node on it first: the node makes it)", ErrNoSchema)
	case err != nil:
		return fmt.Errorf("postgres: schema migrations: %w", driverError(err))
	}
	return compareMigrations(all, recorded)
}

// compareMigrations checks the migrations recorded in a database against
// all of this package's (see checkSchema).
func compareMigrations(all, recorded []migration) error {
	ours := make(map[int]migration, len(all))
	for _, m := range all {
		ours[m.version] = m
	}
	var foreign, missing []string
	have := make(map[int]bool, len(recorded))
	for _, r := range recorded {
		have[r.version] = true
		if m, ok := ours[r.version]; ok && m.name != r.name {
			foreign = append(foreign, fmt.Sprintf("%04d is %q there, %q here", r.version, r.name, m.name))
		}
	}
	for _, m := range all {
		if !have[m.version] {
			missing = append(missing, fmt.Sprintf("%04d_%s", m.version, m.name))
		}
	}
	var errs []error
	if len(foreign) > 0 {
		errs = append(errs, fmt.Errorf("%w: migration %s (another build migrated it: run the switchboard version its nodes run)",
			ErrSchemaForeign, strings.Join(foreign, ", migration ")))
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("%w: it lacks %s (start a node of this version on it first: the node migrates it)",
			ErrSchemaBehind, strings.Join(missing, ", ")))
	}
	return errors.Join(errs...)
}

// migrate applies the migrations not yet recorded, on a connection of its
// own that holds migrationLockKey throughout. Closing that connection ends
// the session and with it the lock, whatever happened before.
func migrate(ctx context.Context, cfg *pgx.ConnConfig, log *slog.Logger) (err error) {
	all, err := loadMigrations()
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		return fmt.Errorf("advisory lock: %w", err)
	}
	defer func() {
		unlockCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(unlockCtx, "SELECT pg_advisory_unlock($1)", migrationLockKey); uerr != nil && err == nil {
			err = fmt.Errorf("advisory unlock: %w", uerr)
		}
	}()

	var done []migration
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return fmt.Errorf("schema_migrations: %w", err)
		}
		rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations")
		if err != nil {
			return err
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return err
		}
		applied := make(map[int]bool, len(versions))
		for _, v := range versions {
			applied[int(v)] = true
		}
		for _, m := range all {
			if applied[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return err
			}
			done = append(done, m)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range done {
		log.Info("applied migration", "version", m.version, "name", m.name)
	}
	return nil
}
