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
	for _, c := range cases {
		got, err := withSearchPath(c.dsn, "s1")
		if err != nil || got != c.want {
			t.Errorf("withSearchPath(%q) = %q, %v; want %q", c.dsn, got, err, c.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Errorf("pgx cannot parse %q: %v", got, err)
			continue
		}
		if sp := cfg.RuntimeParams["search_path"]; sp != "s1" {
			t.Errorf("%q: search_path run-time parameter %q, want s1", got, sp)
		}
	}
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
