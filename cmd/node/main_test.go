package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = mainCode(args, &out, &errOut, noEnv)
	return code, out.String(), errOut.String()
}

func TestMainCommands(t *testing.T) {
	tmp := t.TempDir() // for a command that should refuse, should it not
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // substring; "" = must be empty
		stderr string // substring; "" = must be empty
	}{
		{args: nil, code: 2, stderr: "Usage: switchboard <command>"},
		{args: []string{"help"}, code: 0, stdout: "Usage: switchboard <command>"},
		{args: []string{"-h"}, code: 0, stdout: "Usage: switchboard <command>"},
		{args: []string{"--help"}, code: 0, stdout: "certs init --dir D --nodes a,b,c"},
		{args: []string{"help", "run"}, code: 0, stdout: "--delivery-max-attempts N"},
		{args: []string{"help", "certs"}, code: 0, stdout: "Usage: switchboard certs init"},
		{args: []string{"run", "-h"}, code: 0, stdout: "Usage: switchboard run [flags]"},
		{args: []string{"version"}, code: 0, stdout: "switchboard " + version + "\n"},
		{args: []string{"version", "x"}, code: 2, stderr: "takes no arguments"},
		// Two commands the general help lists: 'help version' was an unknown
		// topic and 'version -h' an argument, exit 2.
		{args: []string{"help", "version"}, code: 0, stdout: "version                            print the version"},
		{args: []string{"help", "help"}, code: 0, stdout: "help [COMMAND]"},
		{args: []string{"version", "-h"}, code: 0, stdout: "version                            print the version"},
		{args: []string{"frobnicate"}, code: 2, stderr: "switchboard: unknown command \"frobnicate\"\n\nUsage:"},
		// Was the general help, exit 0: a script's typo passed.
		{args: []string{"help", "nope"}, code: 2, stderr: "switchboard: unknown help topic \"nope\"\n\nUsage:"},
		{args: []string{"certs"}, code: 2, stderr: "Usage: switchboard certs init"},
		// Was the usage on stdout, exit 2.
		{args: []string{"credentials"}, code: 2, stderr: "Usage: switchboard credentials add NAME"},
		{args: []string{"credentials", "-h"}, code: 0, stdout: "Usage: switchboard credentials add NAME"},
		{args: []string{"certs", "burn"}, code: 2, stderr: "unknown certs command \"burn\""},
		{args: []string{"certs", "init"}, code: 2, stderr: "switchboard: --dir: required\nswitchboard: --nodes: required"},
		{args: []string{"certs", "init", "--dir", "x", "--nodes", "a,-b"}, code: 2, stderr: `switchboard: --nodes: invalid value "-b"`},
		{args: []string{"certs", "init", "--bogus"}, code: 2, stderr: "flag provided but not defined"},
		// A flag given twice took its last value: b's certificate alone, an
		// admin for an operator.
		{args: []string{"certs", "init", "--dir", tmp, "--nodes", "a", "--nodes", "b"}, code: 2, stderr: "switchboard: --nodes: given twice; it takes one value"},
		{args: []string{"backup", "--data-dir", tmp, "--to", filepath.Join(tmp, "a.db"), "--to", filepath.Join(tmp, "b.db")}, code: 2, stderr: "switchboard: --to: given twice; it takes one value"},
		{args: []string{"credentials", "add", "ops", "--role", "operator", "--role", "admin", "--credentials", filepath.Join(tmp, "c.json")}, code: 2,
			stderr: "switchboard: --role: given twice; it takes one value"},
		{args: []string{"run", "--delivery-max-attempts", "x"}, code: 2,
			stderr: "switchboard: --delivery-max-attempts: invalid value \"x\": must be an integer\n"},
	} {
		code, stdout, stderr := runMain(tc.args...)
		if code != tc.code {
			t.Errorf("%q: exit code %d, want %d (stderr %q)", tc.args, code, tc.code, stderr)
		}
		if (tc.stdout == "") != (stdout == "") || !strings.Contains(stdout, tc.stdout) {
			t.Errorf("%q: stdout %q, want it to contain %q", tc.args, stdout, tc.stdout)
		}
		if (tc.stderr == "") != (stderr == "") || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%q: stderr %q, want it to contain %q", tc.args, stderr, tc.stderr)
		}
	}
}

func TestCertsInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, stdout, stderr := runMain("certs", "init", "--dir", dir, "--nodes", "dc1, dc2")
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	var want []string
	for _, f := range []string{"ca.pem", "ca.key", "dc1.pem", "dc1.key", "dc2.pem", "dc2.key"} {
		want = append(want, filepath.Join(dir, f))
	}
	if got := strings.Fields(stdout); !slices.Equal(got, want) {
		t.Fatalf("printed %q, want %q", got, want)
	}

	// Adding a node reuses the CA and prints only the new files.
	code, stdout, stderr = runMain("certs", "init", "--dir", dir, "--nodes", "dc3")
	if code != 0 {
		t.Fatalf("adding dc3: exit code %d: %s", code, stderr)
	}
	if got := strings.Fields(stdout); !slices.Equal(got, []string{filepath.Join(dir, "dc3.pem"), filepath.Join(dir, "dc3.key")}) {
		t.Fatalf("adding dc3 printed %q", got)
	}
	if !strings.Contains(stderr, "existing CA") {
		t.Errorf("reuse of the CA not mentioned: %q", stderr)
	}

	// Re-issuing an existing node is refused.
	code, _, stderr = runMain("certs", "init", "--dir", dir, "--nodes", "dc1")
	if code != 1 || !strings.Contains(stderr, "dc1.pem already exists") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("re-issuing dc1: exit code %d, stderr %q", code, stderr)
	}
}

// TestBinary builds the real binary and checks what an operator sees.
func TestBinary(t *testing.T) {
	// go test puts its own GOROOT/bin first on PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool not found: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "switchboard")
	build := exec.Command(goTool, "build", "-ldflags", "-X main.version=v0.0.0-test", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// The environment of the test, without SWITCHBOARD_* and NO_COLOR.
	var baseEnv []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHBOARD_") && !strings.HasPrefix(kv, "NO_COLOR=") {
			baseEnv = append(baseEnv, kv)
		}
	}
	// runIn runs the binary in dir.
	runIn := func(t *testing.T, dir string, env []string, args ...string) (code int, stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(slices.Clone(baseEnv), env...)
		cmd.Dir = dir
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			code = exit.ExitCode()
		default:
			t.Fatalf("%s %q: %v", bin, args, err)
		}
		return code, out.String(), errOut.String()
	}
	run := func(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
		t.Helper()
		return runIn(t, t.TempDir(), env, args...)
	}

	t.Run("bad flag value", func(t *testing.T) {
		dir := t.TempDir()
		code, stdout, stderr := runIn(t, dir, nil, "run", "--name", "dc1", "--delivery-max-attempts", "x")
		want := "switchboard: --delivery-max-attempts: invalid value \"x\": must be an integer\n"
		if code != 2 || stderr != want || stdout != "" {
			t.Fatalf("exit code %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, want)
		}
		// Nothing was created: no data dir, no store, no certificate.
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Fatalf("a rejected start left %v in its working directory (%v)", entries, err)
		}
	})
	t.Run("listen port out of range", func(t *testing.T) {
		dir := t.TempDir()
		code, stdout, stderr := runIn(t, dir, nil, "run", "--name", "dc1", "--listen", "127.0.0.1:99999")
		want := "switchboard: --listen: \"127.0.0.1:99999\": port \"99999\" is not a number from 0 to 65535\n"
		if code != 2 || stderr != want || stdout != "" {
			t.Fatalf("exit code %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, want)
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Fatalf("a rejected start left %v in its working directory (%v)", entries, err)
		}
	})
	t.Run("certificate file missing", func(t *testing.T) {
		dir := t.TempDir()
		code, _, stderr := runIn(t, dir, nil, "run", "--name", "dc1", "--tls-cert", "nope.pem", "--tls-key", "nope.key")
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "switchboard: --tls-cert: ") {
			t.Fatalf("exit code %d, stderr %q; want 2 and one line naming --tls-cert", code, stderr)
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Fatalf("a rejected start left %v in its working directory (%v)", entries, err)
		}
	})
	// Two --frontend names that map to one delivery bus consumer ("a.b"
	// and "a_b_108bf50c"): PUT /api/frontends refuses the second, but the
	// flags were written to the store unchecked, and with the bus each
	// frontend's worker fetched the other's work.
	t.Run("frontends of one bus consumer", func(t *testing.T) {
		dir := t.TempDir()
		code, stdout, stderr := runIn(t, dir, nil, "run", "--name", "dc1", "--postgres", "postgres://sb@127.0.0.1:1/x", "--nats-url", "nats://127.0.0.1:1",
			"--frontend", "a.b=https://gw1.example/sms", "--frontend", "a_b_108bf50c=https://gw2.example/sms")
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "switchboard: --frontend: ") ||
			!strings.Contains(stderr, `"a.b"`) || !strings.Contains(stderr, `"a_b_108bf50c"`) || stdout != "" {
			t.Fatalf("exit code %d, stdout %q, stderr %q; want 2 and one line naming --frontend, a.b and a_b_108bf50c", code, stdout, stderr)
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Fatalf("a rejected start left %v in its working directory (%v)", entries, err)
		}
	})
	t.Run("listen port taken", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		dir := t.TempDir()
		code, _, stderr := runIn(t, dir, nil, "run", "--name", "dc1", "--data-dir", "data", "--log-format", "json",
			"--listen", taken.Addr().String(), "--metrics-listen", "127.0.0.1:0")
		if code != 1 || !strings.Contains(stderr, "--listen") {
			t.Fatalf("exit code %d, stderr %q; want 1 and the --listen failure", code, stderr)
		}
		// The port is tried before the store is opened: no store was made.
		if _, err := os.Stat(filepath.Join(dir, "data", "switchboard.db")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the store was opened before the port was bound: %v", err)
		}
	})
	t.Run("postgres schema the role may not create", func(t *testing.T) {
		// docs/operations.md's search_path=switchboard, a schema not made
		// yet: a role that may create it gets it (persistence/postgres's
		// tests); one that may not is told what to do, exit 2, so that the
		// unit does not restart it over and over.
		dsn, schema := pgtest.Absent(t, "")
		code, _, stderr := run(t, nil, "run", "--name", "dc1", "--log-format", "text",
			"--listen", "127.0.0.1:0", "--metrics-listen", "", "--postgres", pgtest.Role(t, dsn))
		if code != 2 || !strings.Contains(stderr, `--postgres: postgres: no schema of the search_path can hold the tables: schema \"`+schema+`\" does not exist`) ||
			!strings.Contains(stderr, `CREATE SCHEMA \"`+schema+`\"`) {
			t.Fatalf("exit code %d, stderr %q; want 2 and the schema to create", code, stderr)
		}
	})
	// A downgrade: an embedded store a newer version migrated. It was
	// refused with exit code 1 (the unit restarted it every 5 s for ever)
	// and "database is at schema version N, this binary knows up to M",
	// which says neither what happened nor what to do.
	t.Run("embedded store of a newer version", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "data", "switchboard.db")
		cfg := sqlite.DefaultConfig()
		cfg.Path = path
		st, err := sqlite.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO schema_migrations (version, name) SELECT MAX(version) + 1, 'future.sql' FROM schema_migrations`); err != nil {
			t.Fatal(err)
		}
		dump := func() string {
			t.Helper()
			var b strings.Builder
			rows, err := db.Query(`SELECT type, name, COALESCE(sql, '') FROM sqlite_schema ORDER BY name`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var kind, name, text string
				if err := rows.Scan(&kind, &name, &text); err != nil {
					t.Fatal(err)
				}
				b.WriteString(kind + " " + name + " " + text + "\n")
			}
			var n int
			if err := db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return b.String() + strings.Repeat("m", n)
		}
		before := dump()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runIn(t, dir, nil, "run", "--name", "dc1", "--log-format", "text",
			"--listen", "127.0.0.1:0", "--metrics-listen", "", "--data-dir", "data")
		if code != 2 || !strings.Contains(stderr, "a newer switchboard migrated it") || !strings.Contains(stderr, "restore the backup") {
			t.Fatalf("exit code %d, stderr %q; want 2, the cause and what to do", code, stderr)
		}
		if db, err = sql.Open("sqlite", path); err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if after := dump(); after != before {
			t.Fatalf("the refused start changed the schema:\n%s\nwas\n%s", after, before)
		}
	})
	t.Run("bad value from the environment", func(t *testing.T) {
		code, _, stderr := run(t, []string{"SWITCHBOARD_MESSAGE_VALIDITY=forever"}, "run")
		want := "switchboard: --message-validity: invalid value \"forever\": must be a duration such as 90s, 5m or 1h30m (from SWITCHBOARD_MESSAGE_VALIDITY)\n"
		if code != 2 || stderr != want {
			t.Fatalf("exit code %d, stderr %q; want 2 and %q", code, stderr, want)
		}
	})
	t.Run("invalid configuration", func(t *testing.T) {
		code, _, stderr := run(t, []string{"SWITCHBOARD_SHUTDOWN_TIMEOUT=0s"}, "run", "--name", "dc1", "--delivery-max-attempts", "0")
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 2 || len(lines) != 2 {
			t.Fatalf("exit code %d, stderr %q; want 2 and two lines", code, stderr)
		}
		if !slices.Contains(lines, "switchboard: --delivery-max-attempts: must be at least 1, got 0") ||
			!slices.Contains(lines, "switchboard: --shutdown-timeout: must be positive, got 0s (from SWITCHBOARD_SHUTDOWN_TIMEOUT)") {
			t.Fatalf("stderr %q", stderr)
		}
	})
	t.Run("unknown command", func(t *testing.T) {
		code, stdout, stderr := run(t, nil, "serve")
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "switchboard: unknown command \"serve\"\n") || !strings.Contains(stderr, "Usage:") {
			t.Fatalf("exit code %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})
	t.Run("certs init", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "pki")
		nodes := []string{"dc1", "dc2", "dc3"}
		code, stdout, stderr := run(t, nil, "certs", "init", "--dir", dir, "--nodes", strings.Join(nodes, ","))
		if code != 0 {
			t.Fatalf("exit code %d, stderr %q", code, stderr)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 2*len(nodes)+2 {
			t.Fatalf("%d files written, want %d: %v", len(entries), 2*len(nodes)+2, entries)
		}
		for _, e := range entries {
			if !strings.Contains(stdout, filepath.Join(dir, e.Name())+"\n") {
				t.Errorf("%s written but not printed: %q", e.Name(), stdout)
			}
		}
	})
	t.Run("version", func(t *testing.T) {
		code, stdout, _ := run(t, nil, "version")
		if code != 0 || stdout != "switchboard v0.0.0-test\n" {
			t.Fatalf("exit code %d, stdout %q", code, stdout)
		}
	})
}
