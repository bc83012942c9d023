package pgtest

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestWithSearchPath(t *testing.T) {
	cases := []struct{ dsn, want string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
			"postgres://postgres@127.0.0.1:5432/test?search_path=s1&sslmode=disable"},
		{"postgresql://u:p@h/db", "postgresql://u:p@h/db?search_path=s1"},
		{"postgres://u@h/db?search_path=other", "postgres://u@h/db?search_path=s1"},
		{"host=127.0.0.1 user=postgres dbname=test", "host=127.0.0.1 user=postgres dbname=test search_path=s1"},
	}
	check := func(dsn, path, want string) {
		t.Helper()
		got, err := withSearchPath(dsn, path)
		if err != nil || got != want {
			t.Errorf("withSearchPath(%q, %q) = %q, %v; want %q", dsn, path, got, err, want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Errorf("pgx cannot parse %q: %v", got, err)
			return
		}
		if sp := cfg.RuntimeParams["search_path"]; sp != path {
			t.Errorf("%q: search_path run-time parameter %q, want %q", got, sp, path)
		}
	}
	for _, c := range cases {
		check(c.dsn, "s1", c.want)
	}
	quoted := `"It's \ Ops"`
	check("postgres://u@h/db", quoted, "postgres://u@h/db?search_path=%22It%27s%20%5C%20Ops%22")
	check("host=h dbname=db", quoted, `host=h dbname=db search_path='"It\'s \\ Ops"'`)
}

func TestSchemaNames(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	seen := map[string]bool{}
	for _, test := range []string{"TestStore/Accept/StoresEveryField", strings.Repeat("Ü", 100), ""} {
		for range 100 {
			s := schemaName(test)
			if !valid.MatchString(s) || len(s) > 63 {
				t.Fatalf("schemaName(%q) = %q: not a plain identifier of at most 63 bytes", test, s)
			}
			if seen[s] {
				t.Fatalf("schemaName(%q) repeated %q", test, s)
			}
			seen[s] = true
		}
	}
}

// TestDSNIsolatesAndDrops checks that the DSN's connections land in a schema
// of their own, and that the schema is gone once the test has ended.
func TestDSNIsolatesAndDrops(t *testing.T) {
	var schema string
	t.Run("inner", func(t *testing.T) {
		dsn := DSN(t)
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(context.Background()) }()
		if err := conn.QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(schema, "t_testdsnisolatesanddrops_inner_") {
			t.Fatalf("current_schema() = %q, want the test's schema", schema)
		}
		if _, err := conn.Exec(t.Context(), "CREATE TABLE made_here (x int)"); err != nil {
			t.Fatal(err)
		}
	})
	conn, err := pgx.Connect(t.Context(), BaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("schema %q still exists after its test ended", schema)
	}
}

// TestAbsentNamesAMissingSchemaAndDropsIt: Absent's DSN names a schema
// that is not there (quoted when its name needs it), and the schema is
// gone once the test has ended, whoever made it.
func TestAbsentNamesAMissingSchemaAndDropsIt(t *testing.T) {
	conn, err := pgx.Connect(t.Context(), BaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	exists := func(schema string) bool {
		t.Helper()
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	for _, suffix := range []string{"", "_Ops Room"} {
		var schema string
		t.Run("inner", func(t *testing.T) {
			var dsn string
			dsn, schema = Absent(t, suffix)
			if !strings.HasPrefix(schema, "t_testabsentnamesamissingschem") || !strings.HasSuffix(schema, suffix) {
				t.Fatalf("schema %q, want the test's name and %q", schema, suffix)
			}
			if exists(schema) {
				t.Fatalf("schema %q exists already", schema)
			}
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			want := schema
			if suffix != "" {
				want = pgx.Identifier{schema}.Sanitize()
			}
			if sp := cfg.RuntimeParams["search_path"]; sp != want {
				t.Fatalf("search_path %q, want %q", sp, want)
			}
			if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
				t.Fatal(err)
			}
			other, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = other.Close(context.Background()) }()
			var current string
			if err := other.QueryRow(t.Context(), "SELECT current_schema()").Scan(&current); err != nil || current != schema {
				t.Fatalf("current_schema() = %q, %v; want %q", current, err, schema)
			}
		})
		if exists(schema) {
			t.Errorf("schema %q still exists after its test ended", schema)
		}
	}
}

// fatalTB records Fatalf and ends its goroutine, like testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestUnreachableServerFailsNamingTheVariable(t *testing.T) {
	t.Setenv(EnvDSN, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		DSN(tb)
	}()
	<-done
	if tb.msg == "" {
		t.Fatal("DSN returned for an unreachable server")
	}
	for _, want := range []string{EnvDSN, "pg_ctlcluster", "127.0.0.1:1"} {
		if !strings.Contains(tb.msg, want) {
			t.Errorf("failure message %q does not mention %q", tb.msg, want)
		}
	}
}

// TestRoleConnectsAsARoleWithoutRights: Role's DSN connects as a role of
// the test's own that may not create a schema, and the role is gone once
// the test has ended.
func TestRoleConnectsAsARoleWithoutRights(t *testing.T) {
	var role string
	t.Run("inner", func(t *testing.T) {
		conn, err := pgx.Connect(t.Context(), Role(t, BaseDSN()))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(context.Background()) }()
		if err := conn.QueryRow(t.Context(), "SELECT current_user").Scan(&role); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(role, "t_testroleconnectsasarolewitho") {
			t.Fatalf("current_user %q, want the test's role", role)
		}
		if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{role}.Sanitize()); err == nil {
			t.Fatal("the role created a schema")
		}
	})
	conn, err := pgx.Connect(t.Context(), BaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_roles WHERE rolname = $1", role).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("role %q still exists after its test ended", role)
	}
}
