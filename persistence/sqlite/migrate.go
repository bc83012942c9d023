package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
)

//go:embed migrations/*.sql
var embedded embed.FS

// migrationFiles is the schema history this binary knows.
func migrationFiles() fs.FS {
	sub, err := fs.Sub(embedded, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// migrationName is NNNN_what.sql; NNNN is the version.
var migrationName = regexp.MustCompile(`^([0-9]+)_[a-z0-9_]+\.sql$`)

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads every *.sql file of fsys, ordered by version.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := map[int]string{}
	for _, name := range names {
		m := migrationName.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("sqlite: migration %q: name must be NNNN_what.sql", name)
		}
		v, err := strconv.Atoi(m[1])
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("sqlite: migration %q: bad version", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("sqlite: migrations %q and %q share version %d", other, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// ErrSchemaNewer is Open's error for a database a newer version of the
// store migrated (a downgrade): its schema records migrations this binary
// does not have, and it is left as it is. A restart does not change that;
// running that version again, or restoring the backup taken before the
// upgrade, does.
var ErrSchemaNewer = errors.New("sqlite: the database's schema is newer than this switchboard's")

// migrate applies, in version order, each migration of fsys that
// schema_migrations does not record, each in its own transaction together
// with its record. It returns the versions it applied. A database that
// records a version this binary does not know was written by a newer one,
// and is refused rather than guessed at.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS, log *slog.Logger) ([]int, error) {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name    TEXT    NOT NULL
	) STRICT`); err != nil {
		return nil, fmt.Errorf("sqlite: migrate: %v", flatten(err))
	}
	var newest int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&newest); err != nil {
		return nil, fmt.Errorf("sqlite: migrate: %v", flatten(err))
	}
	if len(ms) > 0 && newest > ms[len(ms)-1].version {
		return nil, fmt.Errorf("%w: it is at schema version %d, this binary knows up to %d: a newer switchboard migrated it; run that version (or a later one) on it, or restore the backup taken before the upgrade",
			ErrSchemaNewer, newest, ms[len(ms)-1].version)
	}
	var applied []int
	for _, m := range ms {
		done, err := applyMigration(ctx, db, m)
		if err != nil {
			return applied, fmt.Errorf("sqlite: migration %s: %v", m.name, flatten(err))
		}
		if done {
			applied = append(applied, m.version)
			log.Info("migration applied", "version", m.version, "name", m.name)
		}
	}
	return applied, nil
}

// applyMigration applies m unless it is recorded; the check is inside the
// write transaction, so two processes opening one file cannot both apply it.
func applyMigration(ctx context.Context, db *sql.DB, m migration) (applied bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES (?, ?)`, m.version, m.name); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	return true, nil
}
