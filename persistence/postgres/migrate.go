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
	"unicode/utf8"

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

// migrationLockTimeout bounds each wait of a migration for a table's lock
// (lock_timeout), and migrationRetry is the pause before it tries again.
// A migration that alters a table waits for every transaction using it
// to end, and while it waits every later statement on that table, those
// of the instances of the earlier version still running in a rolling
// upgrade included, queues behind it: without a bound, one long read (a
// pg_dump) stopped the whole site until it ended. Bounded, the site's
// statements wait at most migrationLockTimeout at a time, and the
// starting instance tries again until its start is called off.
var (
	migrationLockTimeout = time.Second
	migrationRetry       = 2 * time.Second
)

// migrate applies the migrations not yet recorded, on a connection of its
// own that holds migrationLockKey throughout. Closing that connection ends
// the session and with it the lock, whatever happened before.
func migrate(ctx context.Context, cfg *pgx.ConnConfig, log *slog.Logger) error {
	all, err := loadMigrations()
	if err != nil {
		return err
	}
	return applyMigrations(ctx, cfg, all, log)
}

// applyMigrations is migrate of the migrations all. When a migration
// cannot take a table's lock within migrationLockTimeout (another
// session's transaction holds it), the transaction is rolled back and
// tried again after migrationRetry, until ctx ends.
func applyMigrations(ctx context.Context, cfg *pgx.ConnConfig, all []migration, log *slog.Logger) (err error) {
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
	var created string
	for {
		done, created, err = applyOnce(ctx, conn, all)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" { // lock_not_available
			break
		}
		log.Warn("migration waits for a table another session's transaction holds (a long transaction or a pg_dump); trying again",
			"err", err, "in", migrationRetry)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (while waiting: %w)", ctx.Err(), err)
		case <-time.After(migrationRetry):
		}
	}
	if err != nil {
		return err
	}
	if created != "" {
		log.Info("created schema", "schema", created)
	}
	for _, m := range done {
		log.Info("applied migration", "version", m.version, "name", m.name)
	}
	return nil
}

// applyOnce applies, in one transaction on conn, the migrations of all not
// yet recorded, each lock wait bounded by migrationLockTimeout. It returns
// those it applied and the schema it created ("" for none).
func applyOnce(ctx context.Context, conn *pgx.Conn, all []migration) (done []migration, created string, err error) {
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", migrationLockTimeout.Milliseconds())); err != nil {
			return err
		}
		schema, err := ensureSchema(ctx, tx)
		if err != nil {
			return err
		}
		created = schema
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
		return nil, "", err
	}
	return done, created, nil
}

// ErrSearchPath is Open's error when no schema of the session's search_path
// exists for the tables and the store may not make one: the schema it names
// does not exist and the role may not create it, the role may not use it,
// or it names none the store creates. A restart does not change that; the
// database's owner does (or another DSN).
var ErrSearchPath = errors.New("postgres: no schema of the search_path can hold the tables")

// ensureSchema creates the schema that the session's search_path names
// (searchPathSchema) when none of its schemas exists, which is when
// Postgres has nowhere to create the tables (SQLSTATE 3F000), and returns
// its name ("" when it made none). It runs in the migrations' transaction,
// under their lock: instances that start at once on a new schema create it
// once, and a migration that fails takes the schema back with it. A
// search_path with a schema that exists is left alone, even when an earlier
// one does not: the tables are where they were.
func ensureSchema(ctx context.Context, tx pgx.Tx) (string, error) {
	var current *string
	var path, role string
	if err := tx.QueryRow(ctx, "SELECT current_schema(), current_setting('search_path'), current_user").
		Scan(&current, &path, &role); err != nil {
		return "", err
	}
	if current != nil {
		return "", nil
	}
	schema, ok := searchPathSchema(path)
	if !ok {
		return "", fmt.Errorf("%w: no schema of search_path %s exists, and it names none but $user, pg_catalog or temp schemas, which the store does not create: create one, or name a schema in the DSN's search_path",
			ErrSearchPath, path)
	}
	id, roleID := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{role}.Sanitize()
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		// A schema the role may not use is not in its search path.
		return "", fmt.Errorf("%w: schema %s exists, but the role %s may not use it: GRANT USAGE, CREATE ON SCHEMA %s TO %s",
			ErrSearchPath, id, roleID, id, roleID)
	}
	if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+id); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			return "", fmt.Errorf("%w: schema %s does not exist, and the role %s may not create it (%s, SQLSTATE %s): create it first (CREATE SCHEMA %s AUTHORIZATION %s) or grant the role CREATE on the database",
				ErrSearchPath, id, roleID, pgErr.Message, pgErr.Code, id, roleID)
		}
		return "", fmt.Errorf("create schema %s: %w", id, err)
	}
	return schema, nil
}

// searchPathSchema is the schema search_path (the setting, as the server
// holds it) names for the store to create: its first name that is not
// $user, pg_catalog or a temp schema (pg_temp, pg_temp_N). ok is false
// when it names none, or is not a list the server reads.
func searchPathSchema(path string) (schema string, ok bool) {
	names, ok := splitIdentifiers(path)
	if !ok {
		return "", false
	}
	for _, name := range names {
		if name == "$user" || name == "pg_catalog" || name == "pg_temp" || strings.HasPrefix(name, "pg_temp_") {
			continue
		}
		return name, true
	}
	return "", false
}

// identifierBlanks are the bytes the server's scanner takes for blanks.
const identifierBlanks = " \t\n\r\f"

// maxIdentifier is the server's longest identifier in bytes (NAMEDATALEN-1):
// a longer one is cut short.
const maxIdentifier = 63

// splitIdentifiers splits a list of identifiers separated by commas as the
// server does (SplitIdentifierString): blanks around a name are skipped; a
// quoted name keeps its case and reads "" as "; an unquoted one runs to a
// blank or a comma and has its ASCII letters folded to lower case (as the
// server folds them in a UTF-8 database); each is cut to maxIdentifier
// bytes. ok is false for an empty name or anything else the server refuses.
func splitIdentifiers(list string) (names []string, ok bool) {
	s := strings.TrimLeft(list, identifierBlanks)
	if s == "" {
		return nil, true
	}
	for {
		var name string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			rest := s[1:]
			for {
				end := strings.IndexByte(rest, '"')
				if end < 0 {
					return nil, false
				}
				b.WriteString(rest[:end])
				rest = rest[end+1:]
				if !strings.HasPrefix(rest, `"`) {
					break
				}
				b.WriteByte('"')
				rest = rest[1:]
			}
			name, s = b.String(), rest
		} else {
			end := strings.IndexAny(s, identifierBlanks+",")
			if end < 0 {
				end = len(s)
			}
			name = strings.Map(func(r rune) rune {
				if r >= 'A' && r <= 'Z' {
					return r + 'a' - 'A'
				}
				return r
			}, s[:end])
			s = s[end:]
		}
		if name == "" {
			return nil, false
		}
		names = append(names, cutIdentifier(name))
		s = strings.TrimLeft(s, identifierBlanks)
		if s == "" {
			return names, true
		}
		if s[0] != ',' {
			return nil, false
		}
		s = strings.TrimLeft(s[1:], identifierBlanks)
	}
}

// cutIdentifier cuts name to maxIdentifier bytes, not within a character.
func cutIdentifier(name string) string {
	if len(name) <= maxIdentifier {
		return name
	}
	end := maxIdentifier
	for end > 0 && !utf8.RuneStart(name[end]) {
		end--
	}
	return name[:end]
}
