package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

func TestSearchPathSchema(t *testing.T) {
	long := strings.Repeat("x", 62) + "é" // 64 bytes: cut before the é
	for _, c := range []struct {
		path  string
		names []string // nil with ok: an empty list
		ok    bool
		want  string // searchPathSchema's; "" when it names none
	}{
		{"switchboard", []string{"switchboard"}, true, "switchboard"},
		{"SwitchBoard", []string{"switchboard"}, true, "switchboard"},
		{`"SwitchBoard"`, []string{"SwitchBoard"}, true, "SwitchBoard"},
		{` "Ops ""Room""" , public `, []string{`Ops "Room"`, "public"}, true, `Ops "Room"`},
		{`"$user", public`, []string{"$user", "public"}, true, "public"},
		{`$user,pg_catalog,pg_temp,pg_temp_3,"Review Ops"`, []string{"$user", "pg_catalog", "pg_temp", "pg_temp_3", "Review Ops"}, true, "Review Ops"},
		{"pg_temp_x, a", []string{"pg_temp_x", "a"}, true, "a"},
		{"Ünïcode", []string{"Ünïcode"}, true, "Ünïcode"},
		{long, []string{strings.Repeat("x", 62)}, true, strings.Repeat("x", 62)},
		{`"$user"`, []string{"$user"}, true, ""},
		{"", nil, true, ""},
		{"  ", nil, true, ""},
		{"a,", nil, false, ""},
		{"a,,b", nil, false, ""},
		{`""`, nil, false, ""},
		{`"open`, nil, false, ""},
		{"a b", nil, false, ""},
		{`"a"b`, nil, false, ""},
	} {
		names, ok := splitIdentifiers(c.path)
		if ok != c.ok || !slices.Equal(names, c.names) {
			t.Errorf("splitIdentifiers(%q) = %q, %v; want %q, %v", c.path, names, ok, c.names, c.ok)
		}
		got, ok := searchPathSchema(c.path)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("searchPathSchema(%q) = %q, %v; want %q", c.path, got, ok, c.want)
		}
	}
}

// A DSN whose search_path names a schema that does not exist yet (as in
// docs/operations.md's search_path=switchboard) gets it: Open creates it
// and migrates into it, its name quoted or not.
func TestOpenCreatesTheSearchPathSchema(t *testing.T) {
	for _, c := range []struct{ name, suffix string }{{"plain", ""}, {"quoted", "_Ops Room"}} {
		t.Run(c.name, func(t *testing.T) {
			dsn, schema := pgtest.Absent(t, c.suffix)
			s := withFE(t, open(t, dsn))
			wantAllVersions(t, s)
			var current string
			if err := s.pool.QueryRow(t.Context(), "SELECT current_schema()").Scan(&current); err != nil || current != schema {
				t.Fatalf("current_schema() = %q, %v; want %q", current, err, schema)
			}
			if _, err := s.Accept(t.Context(), t0, []persistence.NewMessage{delivery("in-new-schema", "fe")}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Opened again, it finds the schema and the message.
			s = open(t, dsn)
			wantAllVersions(t, s)
			if _, err := s.GetMessage(t.Context(), "in-new-schema"); err != nil {
				t.Fatalf("after re-open: %v", err)
			}
		})
	}
}

// A role that may not create the missing schema, or may not use the one
// that is there, or whose search_path names no schema but $user (which
// the store does not create), is refused with ErrSearchPath, naming the
// schema or the search_path and what to do; nothing is made.
func TestOpenRefusesASearchPathSchemaItMayNotMakeOrUse(t *testing.T) {
	// check wants Open refused with ErrSearchPath saying says, and
	// naming schema unless it is "".
	check := func(t *testing.T, dsn, schema string, says ...string) {
		t.Helper()
		cfg := DefaultConfig()
		cfg.DSN = dsn
		s, err := Open(t.Context(), cfg)
		if err == nil {
			_ = s.Close()
			t.Fatal("Open succeeded")
		}
		if !errors.Is(err, ErrSearchPath) {
			t.Fatalf("Open: %v, want ErrSearchPath", err)
		}
		if schema != "" {
			says = append(says, pgx.Identifier{schema}.Sanitize())
		}
		for _, w := range says {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("the error %q does not say %s", err, w)
			}
		}
	}
	t.Run("missing", func(t *testing.T) {
		dsn, schema := pgtest.Absent(t, "_Ops Room")
		check(t, pgtest.Role(t, dsn), schema, "does not exist", "may not create it", "CREATE SCHEMA", "grant the role CREATE")
		conn, err := pgx.Connect(t.Context(), pgtest.BaseDSN())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil || n != 0 {
			t.Errorf("%d schemas %q (%v), want none", n, schema, err)
		}
	})
	t.Run("only $user", func(t *testing.T) {
		// The role's own search_path (ALTER ROLE ... SET), the DSN's
		// naming none: the server's setting is what counts.
		dsn := pgtest.Role(t, pgtest.BaseDSN())
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		var role string
		if err := conn.QueryRow(t.Context(), "SELECT current_user").Scan(&role); err != nil {
			t.Fatal(err)
		}
		_ = conn.Close(t.Context())
		admin, err := pgx.Connect(t.Context(), pgtest.BaseDSN())
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(t.Context())
		if _, err := admin.Exec(t.Context(), "ALTER ROLE "+pgx.Identifier{role}.Sanitize()+` SET search_path = "$user"`); err != nil {
			t.Fatal(err)
		}
		check(t, dsn, "", `search_path "$user" exists`) // no schema to name
	})
	t.Run("not usable", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		var schema string
		if err := conn.QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
			t.Fatal(err)
		}
		check(t, pgtest.Role(t, dsn), schema, "may not use it", "GRANT USAGE, CREATE ON SCHEMA")
	})
}

// A migration that alters a table waits for the transactions using it to
// end, and every later statement on that table queues behind it: those of
// the instances of the earlier version that still run in a rolling
// upgrade. One long transaction (a pg_dump of the site) held the upgraded
// instance's migration, and so the whole site, until it ended: a submit
// to an instance of the earlier version hung for as long as the dump ran.
// The migration's waits are bounded now: it gives way and tries again,
// and the site's statements go on meanwhile.
func TestMigrationDoesNotStallTheSiteBehindALongTransaction(t *testing.T) {
	dsn := pgtest.DSN(t)
	open(t, dsn)
	ctx := t.Context()
	dump, err := pgx.Connect(ctx, dsn) // a pg_dump: a read transaction on every table
	if err != nil {
		t.Fatal(err)
	}
	defer dump.Close(context.Background())
	tx, err := dump.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT count(*) FROM messages"); err != nil {
		t.Fatal(err)
	}

	all, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	next := migration{version: all[len(all)-1].version + 1, name: "lock_test", sql: "ALTER TABLE messages ADD COLUMN lock_test integer"}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	migrating, cancel := context.WithCancel(ctx)
	defer cancel()
	log, logs := logtest.New()
	applied := make(chan error, 1)
	go func() { applied <- applyMigrations(migrating, cfg, append(all, next), log) }()

	// Wait until the migration has asked for the table's lock.
	site, err := pgx.Connect(ctx, dsn) // an instance of the earlier version
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close(context.Background())
	polltest.Until(t, 30*time.Second, "the migration asks for the lock of messages", func() bool {
		var waits bool
		err := site.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_locks WHERE relation = 'messages'::regclass AND NOT granted)").Scan(&waits)
		return err == nil && waits || len(logs.Records(t, "migration waits for a table another session's transaction holds (a long transaction or a pg_dump); trying again")) > 0
	})
	// The site's statements on the table are not held up by it for as
	// long as the dump runs.
	reading, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	var n int
	if err := site.QueryRow(reading, "SELECT count(*) FROM messages").Scan(&n); err != nil {
		t.Fatalf("a statement of the site on messages, while the migration waits for the dump: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-applied; err != nil {
		t.Fatalf("the migration, once the dump ended: %v", err)
	}
	var recorded bool
	if err := site.QueryRow(ctx, "SELECT EXISTS (SELECT FROM schema_migrations WHERE version = $1)", next.version).Scan(&recorded); err != nil || !recorded {
		t.Fatalf("migration %d recorded: %v, %v", next.version, recorded, err)
	}
}
