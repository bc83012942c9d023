package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the environment variable with the base DSN of the test server.
const EnvDSN = "SWITCHBOARD_TEST_POSTGRES"

// DefaultDSN is the base DSN when EnvDSN is unset: the local development
// server with trust authentication.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// setupTimeout bounds connecting and creating or dropping a schema: a server
// that takes longer is as good as absent.
const setupTimeout = 10 * time.Second

// BaseDSN returns the DSN of the test server, without a schema.
func BaseDSN() string {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// DSN creates a schema for this test, drops it (with everything in it) when
// the test ends, and returns a DSN whose connections have that schema as
// their search_path. Stores opened with it are isolated from every other
// test, including parallel ones. It fails the test when the server cannot be
// reached.
func DSN(t testing.TB) string {
	t.Helper()
	base := BaseDSN()
	schema := schemaName(t.Name())

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		// The DSN itself is not printed: it may hold a password.
		source := "the DSN in " + EnvDSN
		if os.Getenv(EnvDSN) == "" {
			source = EnvDSN + " is unset, so the default " + DefaultDSN
		}
		t.Fatalf("pgtest: cannot reach the test Postgres server (%s): %v\n"+
			"Start it (Debian: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start) "+
			"or set %s to the DSN of a reachable server. A missing server fails the tests; they are never skipped.",
			source, err, EnvDSN)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() { drop(t, base, schema) })

	dsn, err := withSearchPath(base, schema)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvDSN, err)
	}
	return dsn
}

// Absent returns a DSN whose search_path names a schema of this test's
// own that does not exist, and the schema's name: the test's schema name
// (as DSN's) followed by suffix. A suffix that an unquoted identifier
// cannot hold (upper case, a space) puts the name in search_path as a
// quoted identifier. Whatever makes the schema, it is dropped (with
// everything in it) when the test ends.
func Absent(t testing.TB, suffix string) (dsn, schema string) {
	t.Helper()
	base := BaseDSN()
	schema = schemaName(t.Name()) + suffix
	if len(schema) > maxIdentifier {
		t.Fatalf("pgtest: schema name %q is longer than Postgres's %d bytes", schema, maxIdentifier)
	}
	t.Cleanup(func() { drop(t, base, schema) })
	path := schema
	if !plainIdentifier.MatchString(schema) {
		path = pgx.Identifier{schema}.Sanitize()
	}
	dsn, err := withSearchPath(base, path)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvDSN, err)
	}
	return dsn, schema
}

// Role returns dsn with a login role of this test's own as its user, one
// with no privilege beyond PUBLIC's: it may connect, and neither create a
// schema nor use one it was not granted. The role is dropped, with what it
// owns and was granted in the database, when the test ends.
func Role(t testing.TB, dsn string) string {
	t.Helper()
	base := BaseDSN()
	role := schemaName(t.Name())
	id := pgx.Identifier{role}.Sanitize()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: create role %s: %v", role, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "CREATE ROLE "+id+" LOGIN"); err != nil {
		t.Fatalf("pgtest: create role %s: %v", role, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("pgtest: drop role %s: %v", role, err)
			return
		}
		defer func() { _ = conn.Close(context.Background()) }()
		for _, q := range []string{"DROP OWNED BY " + id, "DROP ROLE " + id} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Errorf("pgtest: %s: %v", q, err)
			}
		}
	})
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		u.User = url.User(role)
		return u.String()
	}
	return dsn + " user=" + role
}

// maxIdentifier is Postgres's longest identifier, in bytes (NAMEDATALEN-1):
// a longer one is cut short.
const maxIdentifier = 63

// plainIdentifier matches the names that search_path holds unquoted.
var plainIdentifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// drop removes the test's schema, if it is there (Absent's may never have
// been made). It runs after the test's own cleanups (registered later, run
// earlier), so the stores are closed by then.
func drop(t testing.TB, base, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
		return
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}

// schemaName is "t_", up to 30 characters of the test name (lower-case
// letters, digits and underscores, for finding a leftover schema) and 16
// random hex digits, which keep parallel and repeated tests apart. It stays
// under Postgres's 63-byte identifier limit.
func schemaName(test string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(test) {
		if b.Len() == 30 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	var random [8]byte
	_, _ = rand.Read(random[:]) // crypto/rand.Read never fails
	return "t_" + b.String() + "_" + hex.EncodeToString(random[:])
}

// withSearchPath adds search_path (its value as the server reads it) to a
// URL or keyword/value DSN; pgx sends unknown DSN settings to the server
// as run-time parameters.
func withSearchPath(dsn, path string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		q := u.Query()
		q.Set("search_path", path)
		// pgx reads a query's '+' as itself, not a space: spaces go as %20
		// (Encode writes a '+' of the value as %2B).
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
		return u.String(), nil
	}
	if plainIdentifier.MatchString(path) {
		return dsn + " search_path=" + path, nil
	}
	quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(path)
	return dsn + " search_path='" + quoted + "'", nil
}

// Sessions is a connection of a test's own to the database at a DSN, to
// find and end the sessions that hold advisory locks (a store's Elector's:
// postgres.LockKey(Schema, name) is a lock's key). Closed when the test
// ends.
type Sessions struct {
	t      testing.TB
	db     *pgx.Conn
	Schema string
}

// WatchSessions connects to dsn for t.
func WatchSessions(t testing.TB, dsn string) *Sessions {
	t.Helper()
	db, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	s := &Sessions{t: t, db: db}
	if err := db.QueryRow(context.Background(), "SELECT current_schema()").Scan(&s.Schema); err != nil {
		t.Fatal(err)
	}
	return s
}

// Holder is the pid of the session that holds the advisory lock of key
// (0: none does).
func (s *Sessions) Holder(key int64) int32 {
	var pid int32
	if err := s.db.QueryRow(context.Background(), `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = $1`, key).Scan(&pid); err != nil {
		return 0
	}
	return pid
}

// End ends the session pid, as the server does to a connection it drops.
func (s *Sessions) End(pid int32) {
	s.t.Helper()
	if _, err := s.db.Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid); err != nil {
		s.t.Fatal(err)
	}
}
