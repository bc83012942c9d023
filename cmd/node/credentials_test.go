package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/persistence/postgres"
)

var printedToken = regexp.MustCompile(`(?m)^token: (sbt_[A-Za-z0-9_-]{43})$`)

// TestCredentialsFile: add, list and revoke on a credentials file; the
// token is printed once and only its hash is kept; bad commands exit 2
// and refusals 1, changing nothing.
func TestCredentialsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "credentials.json")
	code, out, errOut := runMain("credentials", "add", "root", "--role", "admin", "--credentials", file)
	if code != 0 {
		t.Fatalf("add root: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "created the credentials file "+file) {
		t.Errorf("add to a new file did not say it made it: %q", errOut)
	}
	m := printedToken.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("add printed no token: %q", out)
	}
	root := m[1]
	if code, _, errOut := runMain("credentials", "add", "gw", "--credentials", file, "--role", "frontend", "--frontend", "fe-b,fe-a", "--frontend", "fe-c"); code != 0 || errOut != "" {
		t.Fatalf("add gw: exit %d: %q", code, errOut)
	}
	tokFile := filepath.Join(t.TempDir(), "shop.token")
	code, out, _ = runMain("credentials", "add", "shop", "--role", "client", "--submit-rate", "2.5", "--token-file", tokFile, "--credentials", file)
	if code != 0 || strings.Contains(out, "sbt_") {
		t.Fatalf("add shop with --token-file: exit %d, printed %q (the token must go to the file only)", code, out)
	}
	shopTok, err := os.ReadFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(tokFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), root) || strings.Contains(string(data), strings.TrimSpace(string(shopTok))) {
		t.Fatal("the credentials file holds a token")
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o640 {
		t.Errorf("credentials file mode %v, want 0640 (the node's group reads it)", fi.Mode().Perm())
	}
	f, err := auth.ParseFile(data)
	if err != nil {
		t.Fatalf("the file the command wrote does not parse: %v", err)
	}
	set := auth.NewSet(f.Credentials, true)
	for tok, want := range map[string]string{root: "root", strings.TrimSpace(string(shopTok)): "shop"} {
		if p, ok := set.Authenticate(tok); !ok || p.Name != want {
			t.Errorf("the printed token of %s authenticates as %+v, %v", want, p, ok)
		}
	}
	if c, _ := set.Credential("gw"); !slices.Equal(c.Frontends, []string{"fe-a", "fe-b", "fe-c"}) || c.Role != messages.RoleFrontend {
		t.Errorf("gw stored as %+v", c)
	}
	if c, _ := set.Credential("shop"); c.SubmitRate != 2.5 {
		t.Errorf("shop's rate %v, want 2.5", c.SubmitRate)
	}

	code, out, _ = runMain("credentials", "list", "--credentials", file)
	if code != 0 || !strings.Contains(out, "gw") || !strings.Contains(out, "fe-a,fe-b,fe-c") || !strings.Contains(out, "2.5/s") ||
		strings.Contains(out, "sbt_") || strings.Contains(out, f.Credentials[0].TokenHash) {
		t.Errorf("list: exit %d:\n%s", code, out)
	}
	code, out, _ = runMain("credentials", "list", "--json", "--credentials", file)
	var doc struct{ Credentials []map[string]any }
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Credentials) != 3 {
		t.Fatalf("list --json: exit %d: %s", code, out)
	}
	for _, c := range doc.Credentials {
		if _, ok := c["token_sha256"]; ok {
			t.Errorf("list --json shows the hash: %v", c)
		}
	}

	before, _ := os.ReadFile(file)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"add", "root", "--role", "admin"}, 1, `"root" exists already`},
		{[]string{"add", "x", "--role", "root"}, 2, `switchboard: --role: invalid value "root": want one of admin, operator, client, frontend` + "\n"},
		{[]string{"add", "x"}, 2, "switchboard: --role: required: one of admin, operator, client, frontend (or --smpp)\n"},
		// The credential's problems are named by the flags that set its
		// fields (they read 'credential "x": frontends: ...; submit_rate: ...').
		{[]string{"add", "x", "--role", "frontend"}, 2, "switchboard: --frontend: a frontend credential must be bound to at least one frontend\n"},
		{[]string{"add", "x", "--role", "operator", "--submit-rate", "5", "--frontend", "fe"}, 2,
			"switchboard: --frontend: only a frontend credential is bound to frontends\nswitchboard: --submit-rate: only a client credential has a submit rate\n"},
		{[]string{"add", "esme-with-a-long-name", "--smpp"}, 2, "switchboard: --smpp: the name is the account's system_id: at most 15 characters\n"},
		{[]string{"add", "_x", "--role", "admin"}, 2, "switchboard: NAME: 1-63 letters"},
		{[]string{"add", "x", "--role", "client", "--submit-rate", "fast"}, 2, "--submit-rate"},
		{[]string{"add", "api-token", "--role", "admin"}, 2, "--api-token credential's"},
		{[]string{"add", "--role", "admin"}, 2, "one NAME"},
		{[]string{"revoke", "nobody"}, 1, `no credential "nobody"`},
		{[]string{"revoke", "root", "--role", "admin"}, 2, "are for add"},
		{[]string{"list", "extra"}, 2, "unexpected argument"},
		{[]string{"rotate", "root"}, 2, "unknown credentials command"},
	} {
		code, _, errOut := runMain(append(append([]string{"credentials"}, c.args...), "--credentials", file)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("credentials %v: exit %d %q; want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
	if code, _, errOut := runMain("credentials", "list"); code != 2 || !strings.Contains(errOut, "--credentials: required") {
		t.Errorf("list without a source: exit %d %q", code, errOut)
	}
	// A mistyped path is not an empty file: list and revoke fail, naming
	// it, and leave nothing behind (no file, no lock).
	typo := filepath.Join(t.TempDir(), "typo.json")
	for _, args := range [][]string{{"list"}, {"list", "--json"}, {"revoke", "root"}} {
		code, out, errOut := runMain(append(append([]string{"credentials"}, args...), "--credentials", typo)...)
		if code != 1 || out != "" || !strings.Contains(errOut, typo+" does not exist") {
			t.Errorf("credentials %v on a missing file: exit %d %q %q; want 1 naming %s", args, code, out, errOut, typo)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(typo)); len(entries) != 0 {
		t.Errorf("list/revoke of a missing file left %v", entries)
	}
	// add makes a missing file, not its directory: the error named the
	// lock file ("open .../none/c.json.lock: no such file or directory").
	inNone := filepath.Join(filepath.Dir(typo), "none", "c.json")
	if code, out, errOut := runMain("credentials", "add", "x", "--role", "admin", "--credentials", inNone); code != 1 || out != "" ||
		!strings.Contains(errOut, "switchboard: --credentials: "+inNone+": the directory "+filepath.Dir(inNone)+" does not exist") {
		t.Errorf("add to a file in a missing directory: exit %d %q %q", code, out, errOut)
	}
	if after, _ := os.ReadFile(file); string(after) != string(before) {
		t.Error("a refused command changed the file")
	}

	if code, out, errOut := runMain("credentials", "revoke", "gw", "--credentials", file); code != 0 || !strings.Contains(out, "revoked gw") {
		t.Fatalf("revoke gw: exit %d %s %s", code, out, errOut)
	}
	data, _ = os.ReadFile(file)
	if f, err := auth.ParseFile(data); err != nil || len(f.Credentials) != 2 {
		t.Errorf("after revoking gw: %+v, %v", f.Credentials, err)
	}
	// A file that no longer parses is not overwritten.
	if err := os.WriteFile(file, []byte(`{"credentials":[{"name":"x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runMain("credentials", "add", "y", "--role", "admin", "--credentials", file); code != 1 || !strings.Contains(errOut, "nothing was changed") {
		t.Errorf("add to a broken file: exit %d %q", code, errOut)
	}
}

// TestCredentialsPostgresSearchPathSchema: the first add on a DSN whose
// search_path names a schema that is not there (docs/operations.md's
// search_path=switchboard) creates it, as a node does; a role that may
// not create it is told what to do, exit 2 (a configuration error).
func TestCredentialsPostgresSearchPathSchema(t *testing.T) {
	dsn, schema := pgtest.Absent(t, "")
	run := func(dsn string, args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := mainCode(append([]string{"credentials"}, append(args, "--postgres", dsn)...), &out, &errOut, envMap(nil))
		return code, out.String(), errOut.String()
	}
	id := pgx.Identifier{schema}.Sanitize()
	if code, _, errOut := run(pgtest.Role(t, dsn), "add", "root", "--role", "admin"); code != 2 ||
		!strings.Contains(errOut, "--postgres: postgres: no schema of the search_path can hold the tables: schema "+id+" does not exist") ||
		!strings.Contains(errOut, "CREATE SCHEMA "+id) {
		t.Errorf("add by a role that may not create the schema: exit %d %q", code, errOut)
	}
	if code, out, errOut := run(dsn, "add", "root", "--role", "admin"); code != 0 || printedToken.FindStringSubmatch(out) == nil {
		t.Fatalf("add root: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := run(dsn, "list"); code != 0 || !strings.Contains(out, "root") {
		t.Errorf("list: exit %d %q %q", code, out, errOut)
	}
}

// TestCredentialsPostgres: the same commands edit a node's database, each
// change recorded in its audit trail; the last credential stays.
func TestCredentialsPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	run := credentialsOn(dsn)
	// list and revoke do not migrate: a database without the schema is
	// refused, and still has none after.
	for _, args := range [][]string{{"list"}, {"revoke", "ops"}} {
		if code, _, errOut := run(args...); code != 1 || !strings.Contains(errOut, "no switchboard schema") {
			t.Errorf("%v on an empty database: exit %d %q", args, code, errOut)
		}
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(context.Background(),
		"SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()").Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("list/revoke made %d tables (%v)", tables, err)
	}
	// add makes the first credential of a database no node has opened
	// yet: it gives it its schema.
	code, out, errOut := run("add", "ops", "--role", "operator")
	if code != 0 || printedToken.FindStringSubmatch(out) == nil {
		t.Fatalf("add ops: exit %d %q %q", code, out, errOut)
	}
	if code, _, errOut := run("add", "uk-gw", "--role", "frontend", "--frontend", "sms-uk"); code != 0 {
		t.Fatalf("add uk-gw: exit %d %q", code, errOut)
	}
	if code, _, errOut := run("add", "ops", "--role", "admin"); code != 1 || !strings.Contains(errOut, "exists already") {
		t.Errorf("add ops again: exit %d %q", code, errOut)
	}
	if code, out, _ := run("list"); code != 0 || !strings.Contains(out, "uk-gw") || !strings.Contains(out, "operator") {
		t.Errorf("list: exit %d:\n%s", code, out)
	}
	if code, _, errOut := run("revoke", "uk-gw"); code != 0 {
		t.Fatalf("revoke uk-gw: exit %d %q", code, errOut)
	}
	if code, _, errOut := run("revoke", "ops"); code != 1 || !strings.Contains(errOut, "last credential") {
		t.Errorf("revoke the last: exit %d %q", code, errOut)
	}

	cfg := postgres.DefaultConfig()
	cfg.DSN = dsn
	s, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	creds, err := s.Credentials(context.Background())
	if err != nil || len(creds) != 1 || creds[0].Name != "ops" {
		t.Errorf("stored credentials %+v, %v; want ops alone", creds, err)
	}
	page, err := s.ListAudit(context.Background(), persistence.AuditQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var trail []string
	for _, e := range page.Entries {
		if !strings.HasPrefix(e.Actor, "cli:") {
			t.Errorf("audit actor %q, want the command's user", e.Actor)
		}
		trail = append(trail, e.Action+" "+e.Target)
	}
	if want := []string{"credential.revoke uk-gw", "credential.add uk-gw", "credential.add ops"}; !slices.Equal(trail, want) {
		t.Errorf("audit trail %v, want %v", trail, want)
	}

	// A schema behind this version's (older nodes run on it) is not
	// migrated under them: every command refuses it, and it stays behind.
	var latest int
	var latestName string
	if err := conn.QueryRow(context.Background(), "DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations) RETURNING version, name").Scan(&latest, &latestName); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"list"}, {"revoke", "ops"}, {"add", "late", "--role", "admin"}} {
		if code, _, errOut := run(args...); code != 1 || !strings.Contains(errOut, "schema is behind") {
			t.Errorf("%v on a schema behind: exit %d %q", args, code, errOut)
		}
	}
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM schema_migrations WHERE version = $1", latest).Scan(&n); err != nil || n != 0 {
		t.Errorf("migration %d applied again (%d, %v)", latest, n, err)
	}

	// A schema another build migrated (its own migration under one of this
	// version's numbers, as many as this version's) is refused too, naming
	// the migration: the latest number alone does not tell.
	if _, err := conn.Exec(context.Background(), "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", latest, latestName); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), "UPDATE schema_migrations SET name = 'other_build' WHERE version = 7"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"list"}, {"revoke", "ops"}, {"add", "late", "--role", "admin"}} {
		if code, _, errOut := run(args...); code != 1 || !strings.Contains(errOut, "not this switchboard's: migration 0007 is \"other_build\" there") {
			t.Errorf("%v on another build's schema: exit %d %q", args, code, errOut)
		}
	}
}

// TestTokenFileIsReplacedWithMode0600: --token-file is written mode 0600
// even over an existing file of a looser mode (os.WriteFile's mode applies
// only to a new file: the new admin token was left world-readable), and a
// symbolic link there is replaced, not followed.
func TestTokenFileIsReplacedWithMode0600(t *testing.T) {
	dir := t.TempDir()
	creds, tok, target := filepath.Join(dir, "credentials.json"), filepath.Join(dir, "gw.token"), filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(tok, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runMain("credentials", "add", "gw", "--role", "admin", "--credentials", creds, "--token-file", tok); code != 0 {
		t.Fatalf("add: exit %d: %s", code, errOut)
	}
	if st, err := os.Lstat(tok); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Errorf("the token file over a file of mode 0644: %v, %v; want a file of mode 0600", st.Mode(), err)
	}
	link := filepath.Join(dir, "ops.token")
	if err := os.WriteFile(target, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runMain("credentials", "add", "ops", "--role", "operator", "--credentials", creds, "--token-file", link); code != 0 {
		t.Fatalf("add: exit %d: %s", code, errOut)
	}
	if st, err := os.Lstat(link); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Errorf("the token file over a symbolic link: %v, %v; want a file of mode 0600", st.Mode(), err)
	}
	if data, err := os.ReadFile(target); err != nil || string(data) != "kept\n" {
		t.Errorf("the link's target: %q, %v; want it unchanged", data, err)
	}
}

// TestCLIDocCredentialsExamplesRun runs the example of docs/cli.md's
// Credentials section line by line, as an operator pasting it into a shell
// would (its paths moved to a temporary directory, and no
// SWITCHBOARD_CREDENTIALS but the one it exports): each command succeeds,
// and `list` prints the header its comment shows. Its commands without
// --credentials once exited 2, and its header lacked "(UTC)".
func TestCLIDocCredentialsExamplesRun(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Credentials\n")
	if !ok {
		t.Fatal("docs/cli.md has no section Credentials")
	}
	_, block, _ := strings.Cut(section, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	dir := t.TempDir()
	local := func(s string) string { // an absolute path of the example, here
		if strings.HasPrefix(s, "/") {
			return filepath.Join(dir, filepath.Base(s))
		}
		return s
	}
	envs := map[string]string{}
	env := func(k string) (string, bool) { v, ok := envs[k]; return v, ok }
	ran := 0
	for line := range strings.SplitSeq(block, "\n") {
		command, comment, _ := strings.Cut(line, " #")
		args := strings.Fields(command)
		switch {
		case len(args) == 0 || strings.HasPrefix(args[0], "#"):
			continue
		case args[0] == "export" && len(args) == 2:
			k, v, _ := strings.Cut(args[1], "=")
			envs[k] = local(v)
			continue
		case args[0] != "switchboard":
			t.Fatalf("docs/cli.md: a line this test cannot run: %q", line)
		}
		for i := range args {
			args[i] = local(args[i])
		}
		var stdout, stderr strings.Builder
		if code := mainCode(args[1:], &stdout, &stderr, env); code != 0 {
			t.Errorf("docs/cli.md: %s: exit %d: %s", strings.TrimSpace(command), code, stderr.String())
			continue
		}
		ran++
		if len(args) > 2 && args[2] == "list" {
			want, _, _ := strings.Cut(comment, ":")
			got, _, _ := strings.Cut(stdout.String(), "\n")
			if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(want), " ") {
				t.Errorf("docs/cli.md: list's header is %q, its comment says %q", got, strings.TrimSpace(want))
			}
		}
	}
	if ran == 0 {
		t.Fatal("docs/cli.md: no credentials command ran")
	}
}

// TestCredentialsLockFileHoldsNothing: what docs/operations.md says of
// FILE.lock: add and revoke make it beside the file, empty, and leave it;
// an edit works with it left there, and makes it again when it is gone.
func TestCredentialsLockFileHoldsNothing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "credentials.json")
	run := func(args ...string) {
		t.Helper()
		var stdout, stderr strings.Builder
		if code := mainCode(append([]string{"credentials"}, append(args, "--credentials", file)...), &stdout, &stderr,
			func(string) (string, bool) { return "", false }); code != 0 {
			t.Fatalf("credentials %v: exit %d: %s", args, code, stderr.String())
		}
	}
	empty := func() {
		t.Helper()
		if fi, err := os.Stat(file + ".lock"); err != nil || fi.Size() != 0 {
			t.Fatalf("%s.lock: %v, want an empty file", file, err)
		}
	}
	run("add", "root", "--role", "admin")
	empty()
	run("add", "ops", "--role", "operator")
	empty()
	if err := os.Remove(file + ".lock"); err != nil {
		t.Fatal(err)
	}
	run("revoke", "ops")
	empty()
}

// TestCredentialsRevokeRecordsTheRole: `credentials revoke` on a database
// records the role of the credential it revoked, as its add does and as
// api.md's table of the audit trail says (detail: its role): the entry
// said only its name, so the trail did not tell an admin's revocation
// from a client's.
func TestCredentialsRevokeRecordsTheRole(t *testing.T) {
	env := envMap(map[string]string{"SWITCHBOARD_POSTGRES": pgtest.DSN(t)})
	run := func(args ...string) {
		t.Helper()
		var out, errOut strings.Builder
		if code := mainCode(append([]string{"credentials"}, args...), &out, &errOut, env); code != 0 {
			t.Fatalf("%v: exit %d %q", args, code, errOut.String())
		}
	}
	run("add", "root", "--role", "admin")
	run("add", "gw", "--role", "frontend", "--frontend", "sms-uk")
	run("revoke", "gw")
	cfg := postgres.DefaultConfig()
	cfg.DSN, _ = env("SWITCHBOARD_POSTGRES")
	s, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	page, err := s.ListAudit(context.Background(), persistence.AuditQuery{Limit: 10, Action: messages.AuditCredentialRevoke})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 1 || page.Entries[0].Target != "gw" || page.Entries[0].Detail != "role frontend" {
		t.Errorf("the revocation's record: %+v, want gw with detail %q", page.Entries, "role frontend")
	}
}

// TestCredentialsListNamesWhatTheNodeIgnores: a row of the database that
// is not a valid credential (written by hand) is left out by the node, and
// list says so of it; its values are quoted. list printed it as any other,
// its name raw (an escape sequence reached the terminal), as if in force.
func TestCredentialsListNamesWhatTheNodeIgnores(t *testing.T) {
	dsn := pgtest.DSN(t)
	run := credentialsOn(dsn)
	if code, _, errOut := run("add", "root", "--role", "admin"); code != 0 {
		t.Fatalf("add root: exit %d %q", code, errOut)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `INSERT INTO credentials (name, role, token_sha256, created_at)
		VALUES ($1, 'superuser', 'not-a-hash', now())`, "ops\x1b[31m"); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := run("list")
	if code != 0 {
		t.Fatalf("list: exit %d %q", code, errOut)
	}
	if strings.Contains(out, "\x1b") || !strings.Contains(out, `"ops\x1b[31m"  superuser (invalid: ignored)`) {
		t.Errorf("list: the hand-written row is not quoted and marked ignored:\n%s", out)
	}
	if !strings.Contains(errOut, `switchboard: credential "ops\x1b[31m": `) || !strings.Contains(errOut, "the node ignores it") {
		t.Errorf("list: stderr %q; want the invalid row named, and why", errOut)
	}
	code, out, _ = run("list", "--json")
	var doc struct {
		Credentials []struct{ Name, Invalid string }
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(doc.Credentials) != 2 {
		t.Fatalf("list --json: exit %d, %v: %q", code, err, out)
	}
	for _, c := range doc.Credentials {
		if (c.Name == "root") != (c.Invalid == "") {
			t.Errorf("list --json: %s's invalid %q", c.Name, c.Invalid)
		}
	}
}

// credentialsOn runs 'switchboard credentials ARGS' against the database
// at dsn (SWITCHBOARD_POSTGRES) and returns its exit code, stdout and
// stderr.
func credentialsOn(dsn string) func(args ...string) (int, string, string) {
	env := envMap(map[string]string{"SWITCHBOARD_POSTGRES": dsn})
	return func(args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := mainCode(append([]string{"credentials"}, args...), &out, &errOut, env)
		return code, out.String(), errOut.String()
	}
}
