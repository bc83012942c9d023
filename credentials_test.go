package switchboard_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// status is the status of method path as token.
func (h *harness) statusAs(token, method, path string, body any) int {
	h.t.Helper()
	status, _ := h.as(token).do(method, path, body)
	return status
}

// writeCredentials writes f as the credentials file at path: aside, then
// renamed into place, as `switchboard credentials` does.
func writeCredentials(t *testing.T, path string, f auth.File) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", f.Format(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestCredentialsFileAndTokenFileReload: credentials added to or revoked
// from the --credentials file take effect within a second, each change in
// the audit trail; a file that does not parse changes nothing; the
// --api-token-file is re-read on Reload (SIGHUP), and the old token stops
// working.
func TestCredentialsFileAndTokenFileReload(t *testing.T) {
	cfg := testConfig(t)
	dir := t.TempDir()
	cfg.Credentials, cfg.APITokenFile = filepath.Join(dir, "credentials.json"), filepath.Join(dir, "token")
	rootTok, rootHash := auth.NewToken()
	file := auth.File{Credentials: []messages.Credential{{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash}}}
	writeCredentials(t, cfg.Credentials, file)
	oldAdmin := "file-token-0123456789abcdef"
	if err := os.WriteFile(cfg.APITokenFile, []byte(oldAdmin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startNode(t, cfg)
	h.token = rootTok
	if got := h.statusAs(oldAdmin, "GET", "/api/status", nil); got != 200 {
		t.Fatalf("the --api-token-file's token: %d, want 200", got)
	}

	// A new operator appears within a second; revoked, it goes as fast.
	opsTok, opsHash := auth.NewToken()
	file.Credentials = append(file.Credentials, messages.Credential{Name: "ops", Role: messages.RoleOperator, TokenHash: opsHash})
	writeCredentials(t, cfg.Credentials, file)
	polltest.Eventually(t, 5*time.Second, func() error {
		if got := h.statusAs(opsTok, "GET", "/api/status", nil); got != 200 {
			return fmt.Errorf("the new operator gets %d", got)
		}
		return nil
	})
	h.as(opsTok).apiError(403, messages.CodeForbidden, "PUT", "/api/routes/44", map[string]string{"frontend": "x"})
	file.Credentials = file.Credentials[:1]
	writeCredentials(t, cfg.Credentials, file)
	polltest.Eventually(t, 5*time.Second, func() error {
		if got := h.statusAs(opsTok, "GET", "/api/status", nil); got != 401 {
			return fmt.Errorf("the revoked operator gets %d", got)
		}
		return nil
	})
	// The record follows the change (the revocation is in force first),
	// after the start's record of root (added before the node started).
	var trail struct{ Entries []messages.AuditEntry }
	polltest.Eventually(t, 5*time.Second, func() error {
		h.must(200, "GET", "/api/audit?actor=credentials-file", nil, &trail)
		if len(trail.Entries) != 3 || trail.Entries[0].Action != messages.AuditCredentialRevoke || trail.Entries[0].Detail != "role operator" ||
			trail.Entries[1].Action != messages.AuditCredentialAdd ||
			trail.Entries[1].Target != "ops" || !strings.HasPrefix(trail.Entries[1].Remote, cfg.Credentials) || trail.Entries[2].Target != "root" {
			return fmt.Errorf("the audit trail of the file's changes: %+v", trail.Entries)
		}
		return nil
	})

	// A broken file is refused: Reload says so, and what was in force stays.
	if err := os.WriteFile(cfg.Credentials, []byte(`{"credentials":[{"name":"x","role":"root"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.node.Reload(); err == nil || !strings.HasPrefix(err.Error(), "Credentials: ") {
		t.Errorf("Reload of a broken credentials file: %v, want an error naming Credentials", err)
	}
	if got := h.statusAs(rootTok, "GET", "/api/status", nil); got != 200 {
		t.Errorf("after a broken file the admin gets %d, want 200 (the old credentials stay)", got)
	}
	writeCredentials(t, cfg.Credentials, file)

	// The token file, rotated and reloaded.
	newAdmin := "file-token-fedcba9876543210"
	if err := os.WriteFile(cfg.APITokenFile, []byte(newAdmin), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.node.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if a, b := h.statusAs(newAdmin, "GET", "/api/status", nil), h.statusAs(oldAdmin, "GET", "/api/status", nil); a != 200 || b != 401 {
		t.Errorf("after the token file's rotation: new token %d, old %d; want 200 and 401", a, b)
	}
}

// TestEachCredentialSourceLoadsOnItsOwn: a source that cannot be read
// keeps what it last gave, and the others are applied. A token file
// emptied by a rotation that failed did block every change of the
// credentials file: a revoked operator kept its access for as long as the
// token file stayed bad. A broken credentials file does not hold back a
// rotated token either.
func TestEachCredentialSourceLoadsOnItsOwn(t *testing.T) {
	cfg := testConfig(t)
	dir := t.TempDir()
	cfg.Credentials, cfg.APITokenFile = filepath.Join(dir, "credentials.json"), filepath.Join(dir, "token")
	rootTok, rootHash := auth.NewToken()
	opsTok, opsHash := auth.NewToken()
	file := auth.File{Credentials: []messages.Credential{
		{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash},
		{Name: "ops", Role: messages.RoleOperator, TokenHash: opsHash}}}
	writeCredentials(t, cfg.Credentials, file)
	oldAdmin, newAdmin := "file-token-0123456789abcdef", "file-token-fedcba9876543210"
	if err := os.WriteFile(cfg.APITokenFile, []byte(oldAdmin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startNode(t, cfg)
	h.token = rootTok
	if got := h.statusAs(opsTok, "GET", "/api/status", nil); got != 200 {
		t.Fatalf("ops: %d", got)
	}
	statuses := func() [3]int {
		return [3]int{h.statusAs(rootTok, "GET", "/api/status", nil), h.statusAs(opsTok, "GET", "/api/status", nil),
			h.statusAs(oldAdmin, "GET", "/api/status", nil)}
	}

	// The token file goes bad; ops is revoked from the credentials file.
	if err := os.WriteFile(cfg.APITokenFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	file.Credentials = file.Credentials[:1]
	writeCredentials(t, cfg.Credentials, file)
	polltest.Eventually(t, 5*time.Second, func() error {
		if got := statuses(); got != [3]int{200, 401, 200} {
			return fmt.Errorf("root, revoked ops, the bad token file's last token: %v, want 200 401 200", got)
		}
		return nil
	})
	if err := h.node.Reload(); err == nil || !strings.HasPrefix(err.Error(), "APITokenFile: ") {
		t.Errorf("Reload with an empty token file: %v, want an error naming APITokenFile", err)
	}

	// The credentials file goes bad; the token is rotated.
	if err := os.WriteFile(cfg.Credentials, []byte(`{"credentials":[`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.APITokenFile, []byte(newAdmin), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.node.Reload(); err == nil || !strings.HasPrefix(err.Error(), "Credentials: ") {
		t.Errorf("Reload with a broken credentials file: %v, want an error naming Credentials", err)
	}
	if got, n := statuses(), h.statusAs(newAdmin, "GET", "/api/status", nil); got != [3]int{200, 401, 401} || n != 200 {
		t.Errorf("root, ops, the old token: %v, the new token %d; want 200 401 401 and 200", got, n)
	}
}

// TestCredentialsChangedWhileStoppedAreRecorded: `switchboard credentials`
// edits the file with the node running or not. What the file gained or
// lost while the node was stopped (or before its first start) is recorded
// at the start, once: it was in force unrecorded (an admin added while
// the node was stopped was nowhere in the audit trail).
func TestCredentialsChangedWhileStoppedAreRecorded(t *testing.T) {
	cfg := testConfig(t)
	cfg.Credentials = filepath.Join(cfg.DataDir, "credentials.json")
	rootTok, rootHash := auth.NewToken()
	file := auth.File{Credentials: []messages.Credential{{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash}}}
	writeCredentials(t, cfg.Credentials, file)
	trail := func(h *harness) []string {
		t.Helper()
		var doc struct{ Entries []messages.AuditEntry }
		h.must(200, "GET", "/api/audit?actor=credentials-file", nil, &doc)
		var out []string
		for _, e := range doc.Entries {
			out = append(out, e.Action+" "+e.Target+" "+e.Detail)
			if !strings.HasPrefix(e.Remote, cfg.Credentials+" (start") {
				t.Errorf("%+v: want the file and the start as its remote", e)
			}
		}
		return out
	}
	h := startNode(t, cfg)
	h.token = rootTok
	if got := trail(h); !slices.Equal(got, []string{"credential.add root role admin"}) {
		t.Errorf("the first start's records: %q, want root's addition (made before it)", got)
	}
	h.stop()

	opsTok, opsHash := auth.NewToken()
	file.Credentials = []messages.Credential{{Name: "ops", Role: messages.RoleAdmin, TokenHash: opsHash}}
	writeCredentials(t, cfg.Credentials, file)
	h = startNode(t, cfg)
	h.token = opsTok
	want := []string{"credential.add ops role admin", "credential.revoke root role admin", "credential.add root role admin"}
	if got := trail(h); !slices.Equal(got, want) {
		t.Errorf("after ops replaced root while the node was stopped: %q, want %q", got, want)
	}
	h.stop()
	h = startNode(t, cfg)
	h.token = opsTok
	if got := trail(h); !slices.Equal(got, want) {
		t.Errorf("a start without a change recorded more: %q, want %q", got, want)
	}
}

// TestStoreCredentialsReachEverySite: on Postgres the credentials are the
// database's: one added there lets its holder into every instance of the
// site within a second, and one revocation shuts it out of all of them.
// (The instances share an --api-token, siteConfig's: without --tls-ca a
// site's ring calls need an admin's token, docs/ring.md.)
func TestStoreCredentialsReachEverySite(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := startNode(t, siteConfig(t, dsn, "site-a-0"))
	b := startNode(t, siteConfig(t, dsn, "site-a-1"))
	ctx := context.Background()
	audit := func(action, target string) messages.AuditEntry {
		return messages.AuditEntry{At: time.Now(), Actor: "cli:test@host", Remote: "test", Action: action, Target: target}
	}
	rootTok, rootHash := auth.NewToken()
	opsTok, opsHash := auth.NewToken()
	for _, h := range []*harness{a, b} {
		if got := h.statusAs(opsTok, "GET", "/api/status", nil); got != 401 {
			t.Fatalf("%s: a token the site does not know yet gets %d, want 401", h.cfg.InstanceID, got)
		}
	}
	for _, c := range []messages.Credential{
		{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash, CreatedAt: time.Now()},
		{Name: "ops", Role: messages.RoleOperator, TokenHash: opsHash, CreatedAt: time.Now()},
	} {
		if err := a.node.Store().AddCredential(ctx, c, audit(messages.AuditCredentialAdd, c.Name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []*harness{a, b} {
		polltest.Eventually(t, 5*time.Second, func() error {
			if got := h.statusAs(opsTok, "GET", "/api/status", nil); got != 200 {
				return fmt.Errorf("%s: the operator gets %d", h.cfg.InstanceID, got)
			}
			return nil
		})
	}
	if err := b.node.Store().RevokeCredential(ctx, "ops", audit(messages.AuditCredentialRevoke, "ops")); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*harness{a, b} {
		polltest.Eventually(t, 5*time.Second, func() error {
			if got := h.statusAs(opsTok, "GET", "/api/status", nil); got != 401 {
				return fmt.Errorf("%s: the revoked operator gets %d", h.cfg.InstanceID, got)
			}
			return nil
		})
		if got := h.statusAs(rootTok, "GET", "/api/status", nil); got != 200 {
			t.Errorf("%s: the admin gets %d", h.cfg.InstanceID, got)
		}
	}
}

// TestInvalidStoredCredentialsKeepTheNodeClosed: a stored credential row
// the node finds invalid (a newer version's role, say) is left out, but
// still makes a credential required: a node whose rows are all invalid
// lets no one in, where it was open to anyone as an admin. The store
// refuses to revoke the last valid credential with such a row left; a
// node whose last row goes after all (removed by hand) is open again, and
// says so with a warning.
func TestInvalidStoredCredentialsKeepTheNodeClosed(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := siteConfig(t, dsn, "site-a-0")
	cfg.APIToken = "" // the site keeps its credentials in the database alone
	var logs *logtest.Buffer
	cfg.Logger, logs = logtest.New()
	h := startNode(t, cfg)
	ctx := context.Background()
	rootTok, rootHash := auth.NewToken()
	if err := h.node.Store().AddCredential(ctx, messages.Credential{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash, CreatedAt: time.Now()},
		messages.AuditEntry{At: time.Now(), Actor: "cli:test@host", Remote: "test", Action: messages.AuditCredentialAdd, Target: "root"}); err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	_, otherHash := auth.NewToken()
	exec(`INSERT INTO credentials (name, role, token_sha256, created_at) VALUES ('auditor', 'auditor', $1, now())`, otherHash)
	reload := func() {
		t.Helper()
		if err := h.node.Reload(); err != nil {
			t.Fatalf("Reload: %v", err)
		}
	}
	reload()
	if a, r := h.statusAs("", "GET", "/api/status", nil), h.statusAs(rootTok, "GET", "/api/status", nil); a != 401 || r != 200 {
		t.Fatalf("without a token %d, as root %d; want 401 and 200", a, r)
	}

	err = h.node.Store().RevokeCredential(ctx, "root",
		messages.AuditEntry{At: time.Now(), Actor: "cli:test@host", Remote: "test", Action: messages.AuditCredentialRevoke, Target: "root"})
	if !errors.Is(err, persistence.ErrLastCredential) {
		t.Fatalf("revoking the last valid credential: %v, want ErrLastCredential", err)
	}
	// Removed by hand all the same: only the invalid row is left.
	exec(`DELETE FROM credentials WHERE name = 'root'`)
	reload()
	if a, r := h.statusAs("", "PUT", "/api/routes/44", map[string]string{"frontend": "x"}), h.statusAs(rootTok, "GET", "/api/status", nil); a != 401 || r != 401 {
		t.Errorf("with only an invalid credential stored: without a token %d, as the removed root %d; want 401 (the node must not fall open)", a, r)
	}
	if strings.Contains(logs.String(), "the API now answers anyone") {
		t.Errorf("a warning of an open API while it is closed:\n%s", logs.String())
	}
	// The last row gone: open, and a warning says so.
	exec(`DELETE FROM credentials`)
	reload()
	if got := h.statusAs("", "GET", "/api/status", nil); got != 200 {
		t.Errorf("without any stored credential, a call without a token: %d, want 200 (open)", got)
	}
	if !strings.Contains(logs.String(), "the API now answers anyone") {
		t.Errorf("the node opened without a warning:\n%s", logs.String())
	}
}

// TestClientSubmitRate: a client credential with a submit rate gets 429
// rate_limited with Retry-After beyond it, storing nothing; another client
// is not slowed by it.
func TestClientSubmitRate(t *testing.T) {
	cfg := testConfig(t)
	cfg.Credentials = filepath.Join(t.TempDir(), "credentials.json")
	rootTok, rootHash := auth.NewToken()
	slowTok, slowHash := auth.NewToken()
	freeTok, freeHash := auth.NewToken()
	writeCredentials(t, cfg.Credentials, auth.File{Credentials: []messages.Credential{
		{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash},
		{Name: "slow", Role: messages.RoleClient, TokenHash: slowHash, SubmitRate: 0.2},
		{Name: "free", Role: messages.RoleClient, TokenHash: freeHash},
	}})
	h := startNode(t, cfg)
	h.token = rootTok
	h.pullFrontend("fe", "44")
	slow, free := h.as(slowTok), h.as(freeTok)
	body := func(id string) map[string]string {
		return map[string]string{"id": id, "source_msisdn": "1555", "destination_msisdn": "441", "message_body": "hi"}
	}
	slow.must(202, "POST", "/api/messages", body("slow-1"), nil) // a burst of one
	before := h.snapshotWithAudit()
	req, err := http.NewRequest("POST", h.base+"/api/messages", strings.NewReader(`{"id":"slow-2","source_msisdn":"1555","destination_msisdn":"441","message_body":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+slowTok)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != 429 || ra < 4 || ra > 5 {
		t.Fatalf("over the rate: %d, Retry-After %q; want 429 and 4-5 s (one submit every 5 s)", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	slow.apiError(429, messages.CodeRateLimited, "POST", "/api/messages", body("slow-3"))
	if after := h.snapshotWithAudit(); after != before {
		t.Error("a submit refused for its rate changed the node")
	}
	for i := range 20 {
		free.must(202, "POST", "/api/messages", body(fmt.Sprintf("free-%d", i)), nil)
	}
}

// TestRefusedSubmitsDoNotUseTheSubmitRate: a submit refused as malformed
// (400: not JSON, an unknown field, a missing field, a validity_until that
// has passed, a deliver_after past the message's expiry) takes nothing
// from the client's submit rate: the next valid one is accepted. (The
// clock's checks, made by the node after the rate was taken, used it.)
func TestRefusedSubmitsDoNotUseTheSubmitRate(t *testing.T) {
	cfg := testConfig(t)
	cfg.Credentials = filepath.Join(t.TempDir(), "credentials.json")
	rootTok, rootHash := auth.NewToken()
	slowTok, slowHash := auth.NewToken()
	writeCredentials(t, cfg.Credentials, auth.File{Credentials: []messages.Credential{
		{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash},
		{Name: "slow", Role: messages.RoleClient, TokenHash: slowHash, SubmitRate: 0.1}, // a burst of one, then one every 10 s
	}})
	h := startNode(t, cfg)
	h.token = rootTok
	h.pullFrontend("fe", "44")
	slow := h.as(slowTok)
	before := h.snapshotWithAudit()
	slow.apiError(400, messages.CodeInvalidJSON, "POST", "/api/messages", `{"source_msisdn":"1555",`)
	slow.apiError(400, messages.CodeUnknownField, "POST", "/api/messages",
		map[string]string{"id": "s-1", "source_msisdn": "1555", "destination_msisdn": "441", "message_body": "hi", "priority": "high"})
	slow.apiError(400, messages.CodeInvalidRequest, "POST", "/api/messages",
		map[string]string{"id": "s-1", "source_msisdn": "1555", "message_body": "hi"})
	slow.apiError(400, messages.CodeInvalidRequest, "POST", "/api/messages",
		map[string]string{"id": "has space", "source_msisdn": "1555", "destination_msisdn": "441", "message_body": "hi"})
	slow.apiError(400, messages.CodeInvalidRequest, "POST", "/api/messages",
		map[string]string{"id": "s-1", "source_msisdn": "1555", "destination_msisdn": "441", "message_body": "hi",
			"validity_until": "2020-01-01T00:00:00Z"})
	slow.apiError(400, messages.CodeInvalidRequest, "POST", "/api/messages",
		map[string]string{"source_msisdn": "1555", "destination_msisdn": "441", "message_body": "hi",
			"deliver_after": time.Now().Add(10 * 365 * 24 * time.Hour).UTC().Format(time.RFC3339)})
	if after := h.snapshotWithAudit(); after != before {
		t.Error("a refused submit changed the node")
	}
	slow.must(202, "POST", "/api/messages", map[string]string{"id": "s-1", "source_msisdn": "1555", "destination_msisdn": "441", "message_body": "hi"}, nil)
	slow.apiError(429, messages.CodeRateLimited, "POST", "/api/messages",
		map[string]string{"id": "s-2", "source_msisdn": "1555", "destination_msisdn": "441", "message_body": "hi"})
}

// TestAuditTrailOfChanges: every change made through the API is in the
// trail with who, what, when and from where, and is logged; the trail
// filters by actor and action; reads are not recorded.
func TestAuditTrailOfChanges(t *testing.T) {
	cfg := testConfig(t)
	var logs *logtest.Buffer
	cfg.Logger, logs = logtest.New()
	cfg.APIToken = "root-token-0123456789"
	h := startNode(t, cfg)
	start := time.Now().Add(-time.Second)
	hook := newWebhook(t, 400, 400, 400, 400)
	h.must(200, "PUT", "/api/frontends/fe", map[string]string{"mode": "webhook", "url": hook.srv.URL, "secret": "0123456789abcdef0123"}, nil)
	h.must(200, "PUT", "/api/routes/44", map[string]string{"frontend": "fe"}, nil)
	id := h.submit("", "441")
	h.waitState(id, messages.StateFailed)
	h.must(200, "POST", "/api/messages/"+id+"/resubmit", nil, nil)
	h.waitState(id, messages.StateFailed)
	h.must(200, "POST", "/api/messages/resubmit", map[string]string{"state": "failed"}, nil)
	h.must(200, "GET", "/api/status", nil, nil)
	h.must(204, "DELETE", "/api/routes/44", nil, nil)
	h.must(204, "DELETE", "/api/frontends/fe", nil, nil)

	var trail struct{ Entries []messages.AuditEntry }
	h.must(200, "GET", "/api/audit", nil, &trail)
	checkChangesTrail(t, trail.Entries, id, hook.srv.URL, func(e messages.AuditEntry) bool {
		return e.Actor == messages.ReservedCredential && e.Role == messages.RoleAdmin && strings.HasPrefix(e.Remote, "127.0.0.1:") &&
			!e.At.Before(start) && !e.At.After(time.Now())
	}, "actor api-token, role admin, a loopback address and a time of this test")
	h.must(200, "GET", "/api/audit?action=route.put", nil, &trail)
	if len(trail.Entries) != 1 || trail.Entries[0].Target != "44" {
		t.Errorf("filtered by action: %+v", trail.Entries)
	}
	h.must(200, "GET", "/api/audit?actor=nobody", nil, &trail)
	if len(trail.Entries) != 0 {
		t.Errorf("filtered by an actor who did nothing: %+v", trail.Entries)
	}
	h.apiError(400, messages.CodeUnknownField, "GET", "/api/audit?who=me", nil)
	h.apiError(400, messages.CodeInvalidRequest, "GET", "/api/audit?action=route.rename", nil)
	if n := strings.Count(logs.String(), `"msg":"audit"`); n != 6 {
		t.Errorf("%d audit log lines, want one per change (6)", n)
	}
	if strings.Contains(logs.String(), "0123456789abcdef0123") {
		t.Error("the webhook secret is in the log")
	}
}

// TestChangeWhoseCallerHangsUpIsRecorded: a change whose caller hangs up
// before its answer is still made, and recorded: the handler's call ended
// with the caller's connection, after the change had gone to the intake,
// and the record (written after the answer) was never made.
func TestChangeWhoseCallerHangsUpIsRecorded(t *testing.T) {
	cfg := testConfig(t)
	cfg.APIToken = "root-token-0123456789"
	h := startNode(t, cfg)
	h.pullFrontend("fe", "1")
	const n = 5
	for i := range n {
		h.must(200, "PUT", fmt.Sprintf("/api/routes/7%d", i), map[string]string{"frontend": "fe"}, nil)
	}
	addr := strings.TrimPrefix(h.base, "https://")
	for i := range n {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "DELETE /api/routes/7%d HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", i, addr, cfg.APIToken)
		c.Close() // hang up at once
	}
	polltest.Eventually(t, 10*time.Second, func() error {
		var routes struct{ Routes []messages.Route }
		h.must(200, "GET", "/api/routes", nil, &routes)
		var trail struct{ Entries []messages.AuditEntry }
		h.must(200, "GET", "/api/audit?action=route.delete", nil, &trail)
		if len(routes.Routes) != 1 || len(trail.Entries) != n {
			return fmt.Errorf("routes %+v (want the %d deleted), %d deletes recorded", routes.Routes, n, len(trail.Entries))
		}
		return nil
	})
}

// TestAuditRetentionIsItsOwn: the cleaner purges audit entries past
// --audit-retention, and only those.
func TestAuditRetentionIsItsOwn(t *testing.T) {
	cfg := testConfig(t)
	// The cleaner passes every second (the forward flags shrunk so that the
	// start-up check of the redelivery horizon allows short retentions).
	cfg.ForwardMaxRetries, cfg.ForwardRetryInterval, cfg.HTTPTimeout = 2, 100*time.Millisecond, 200*time.Millisecond
	cfg.Retention, cfg.RetentionFailed = time.Second, time.Second
	cfg.AuditRetention = 2 * time.Second
	h := startNode(t, cfg)
	h.pullFrontend("fe", "44") // two audit entries
	var trail struct{ Entries []messages.AuditEntry }
	h.must(200, "GET", "/api/audit", nil, &trail)
	if len(trail.Entries) != 2 {
		t.Fatalf("audit trail %+v, want 2 entries", trail.Entries)
	}
	polltest.Eventually(t, 15*time.Second, func() error {
		h.must(200, "GET", "/api/audit", nil, &trail)
		if len(trail.Entries) != 0 {
			return fmt.Errorf("%d audit entries left", len(trail.Entries))
		}
		return nil
	})
	// A fresh one stays until its own time comes.
	h.must(200, "PUT", "/api/routes/45", map[string]string{"frontend": "fe"}, nil)
	h.must(200, "GET", "/api/audit", nil, &trail)
	if len(trail.Entries) != 1 {
		t.Errorf("a fresh entry: %+v", trail.Entries)
	}
}

// TestRedactedLogsAndAudit: with --redact on, numbers in the logs and the
// audit trail keep their first digits and bodies never appear; without
// it they are written as they are.
func TestRedactedLogsAndAudit(t *testing.T) {
	for _, redact := range []string{"on", "off"} {
		t.Run(redact, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Redact = redact
			var logs *logtest.Buffer
			cfg.Logger, logs = logtest.New()
			h := startNode(t, cfg)
			h.pullFrontend("fe", "44")
			// A client may choose a number as its id.
			id := h.submit("447700900123", "447700900999")
			got := h.poll("fe", 1, 2000, 30000)
			if len(got) != 1 {
				t.Fatalf("polled %v", got)
			}
			h.ack("fe", messages.DeliveryResult{ID: id, Status: messages.Failed, Reason: "unknown subscriber 447700900999", Attempt: got[0].Attempt})
			h.waitState(id, messages.StateFailed)
			h.must(200, "POST", "/api/messages/"+id+"/resubmit", nil, nil)
			var trail struct{ Entries []messages.AuditEntry }
			h.must(200, "GET", "/api/audit?action=message.resubmit", nil, &trail)
			polltest.Eventually(t, 5*time.Second, func() error {
				if !strings.Contains(logs.String(), `"msg":"message failed"`) {
					return errors.New("no message failed line yet")
				}
				return nil
			})
			out := logs.String()
			if redact == "on" {
				for _, leak := range []string{"447700900123", "447700900999", "hello " + id} {
					if strings.Contains(out, leak) {
						t.Errorf("the redacted log shows %q", leak)
					}
				}
				if !strings.Contains(out, "44770*******") {
					t.Error("the redacted log lacks the masked numbers")
				}
				if len(trail.Entries) != 1 || trail.Entries[0].Target != "44770*******" {
					t.Errorf("the audit entry: %+v, want its target masked", trail.Entries)
				}
			} else {
				if !strings.Contains(out, "unknown subscriber 447700900999") {
					t.Error("without --redact the failure's reason is not logged as it is")
				}
				if len(trail.Entries) != 1 || trail.Entries[0].Target != id {
					t.Errorf("the audit entry: %+v", trail.Entries)
				}
			}
		})
	}
}

// TestNoCredentialsWarningSaysWhatWorks: a node on the embedded store with
// neither a token nor credentials is told to give a --credentials file,
// not to add credentials to its store, which no command can do there.
func TestNoCredentialsWarningSaysWhatWorks(t *testing.T) {
	cfg := testConfig(t)
	var logs *logtest.Buffer
	cfg.Logger, logs = logtest.New()
	startNode(t, cfg)
	out := logs.String()
	if !strings.Contains(out, "the API answers anyone") {
		t.Fatalf("no warning of an open API:\n%s", out)
	}
	if strings.Contains(out, "to the store") || !strings.Contains(out, "a --credentials file") {
		t.Errorf("the warning does not point at a --credentials file:\n%s", out)
	}
}

// TestWebhookURLPasswordIsNeverShown: a webhook URL may carry a password
// (https://bob:secret@host/hook). It was answered as given by GET
// /api/frontends and GET /api/status (open to the operator role), recorded
// in the audit detail and logged. Every answer, audit record and log line
// shows it as https://bob:xxxxx@host/hook; the webhook calls still carry
// the real one; a PUT of the URL as shown (the placeholder password) is
// refused rather than storing "xxxxx" over it.
func TestWebhookURLPasswordIsNeverShown(t *testing.T) {
	const password = "hunter2secret"
	cfg := testConfig(t)
	var logs *logtest.Buffer
	cfg.Logger, logs = logtest.New()
	cfg.Credentials = filepath.Join(t.TempDir(), "credentials.json")
	rootTok, rootHash := auth.NewToken()
	opsTok, opsHash := auth.NewToken()
	writeCredentials(t, cfg.Credentials, auth.File{Credentials: []messages.Credential{
		{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash},
		{Name: "ops", Role: messages.RoleOperator, TokenHash: opsHash}}})
	h := startNode(t, cfg)
	h.token = rootTok
	got := make(chan string, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pw, _ := r.BasicAuth()
		got <- pw
	}))
	t.Cleanup(hook.Close)
	withPassword := strings.Replace(hook.URL, "http://", "http://bob:"+password+"@", 1)
	shown := strings.Replace(hook.URL, "http://", "http://bob:"+messages.RedactedPassword+"@", 1)

	_, body := h.do("PUT", "/api/frontends/hook", map[string]string{"mode": "webhook", "url": withPassword})
	if strings.Contains(string(body), password) || !strings.Contains(string(body), shown) {
		t.Errorf("the PUT's answer: %s, want the url %s", body, shown)
	}
	h.must(200, "PUT", "/api/routes/44", map[string]string{"frontend": "hook"}, nil)
	// The URL as shown, put back: refused, the stored password stays.
	h.apiError(400, "invalid_request", "PUT", "/api/frontends/hook", map[string]string{"mode": "webhook", "url": shown})
	// A frontend that cannot be reached: its failed attempt's detail.
	down := "http://carol:" + password + "@127.0.0.1:9/hook"
	h.must(200, "PUT", "/api/frontends/down", map[string]string{"mode": "webhook", "url": down}, nil)
	h.must(200, "PUT", "/api/routes/33", map[string]string{"frontend": "down"}, nil)

	h.submit("to-hook", "441")
	select {
	case pw := <-got:
		if pw != password {
			t.Errorf("the webhook call's password: %q, want the stored %q", pw, password)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook call")
	}
	h.waitState("to-hook", messages.StateDelivered)
	h.submit("to-down", "331")
	polltest.Until(t, 10*time.Second, "a failed attempt to the unreachable frontend", func() bool {
		return h.message("to-down").Attempts > 0
	})

	for _, tok := range []string{opsTok, rootTok} {
		for _, p := range []string{"/api/frontends", "/api/status", "/api/audit", "/api/messages/to-down", "/api/messages?limit=10"} {
			st, body := h.as(tok).do("GET", p, nil)
			if st != 200 || strings.Contains(string(body), password) {
				t.Errorf("GET %s: %d %s: shows the webhook password", p, st, body)
			}
		}
	}
	var fes struct{ Frontends []messages.Frontend }
	h.as(opsTok).must(200, "GET", "/api/frontends", nil, &fes)
	if len(fes.Frontends) != 2 || fes.Frontends[1].URL != shown {
		t.Errorf("GET /api/frontends: %+v, want hook's url %s", fes.Frontends, shown)
	}
	if strings.Contains(logs.String(), password) {
		t.Errorf("the logs show the webhook password:\n%s", logs.String())
	}
}

// TestTokenFileRotationIsRecorded: a new token in the --api-token-file,
// put in force by a reload (SIGHUP) or the watch, is a change of the
// admin credential api-token, recorded in the audit trail (actor
// api-token-file) like a change of the credentials file: the node logged
// it, but the trail, which holds every credential change, had no entry,
// with or without a credentials file beside it.
func TestTokenFileRotationIsRecorded(t *testing.T) {
	for _, withFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("credentials-file=%v", withFile), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.APITokenFile = filepath.Join(cfg.DataDir, "token")
			if withFile {
				cfg.Credentials = filepath.Join(cfg.DataDir, "credentials.json")
				writeCredentials(t, cfg.Credentials, auth.File{})
			}
			oldTok, newTok := "file-token-0123456789abcdef", "file-token-fedcba9876543210"
			if err := os.WriteFile(cfg.APITokenFile, []byte(oldTok+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			h := startNode(t, cfg)
			h.token = oldTok
			if err := os.WriteFile(cfg.APITokenFile, []byte(newTok+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := h.node.Reload(); err != nil {
				t.Fatalf("Reload: %v", err)
			}
			h.token = newTok
			var trail struct{ Entries []messages.AuditEntry }
			h.must(200, "GET", "/api/audit?actor=api-token-file", nil, &trail)
			var got []string
			for _, e := range trail.Entries {
				got = append(got, e.Action+" "+e.Target+" "+e.Detail)
				if e.Remote != cfg.APITokenFile+" (reload)" {
					t.Errorf("%+v: want the token file and the reload as its remote", e)
				}
			}
			if want := []string{"credential.add api-token role admin", "credential.revoke api-token role admin"}; !slices.Equal(got, want) {
				t.Errorf("the rotation's records: %q, want %q", got, want)
			}
			if h.must(200, "GET", "/api/audit?actor=credentials-file", nil, &trail); len(trail.Entries) != 0 {
				t.Errorf("the token file's rotation recorded as the credentials file's: %+v", trail.Entries)
			}
		})
	}
}

// TestEmbeddingAPIChangesAreRecorded: the changes a program embedding the
// node makes through the Go API (PutFrontend, PutRoute, Resubmit,
// ResubmitBulk, DeleteRoute, DeleteFrontend) are in the audit trail like
// the HTTP API's, actor embedding: they changed routing and resubmitted
// messages with no record at all, while operations.md says every change
// of state made by a person or a tool is recorded. A refused change is
// not recorded.
func TestEmbeddingAPIChangesAreRecorded(t *testing.T) {
	cfg := testConfig(t)
	cfg.APIToken = "root-token-0123456789"
	h := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hook := newWebhook(t, 400, 400, 400, 400)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := h.node.PutFrontend(ctx, messages.Frontend{Name: "fe", Mode: messages.ModeWebhook, URL: hook.srv.URL, Secret: "0123456789abcdef0123"})
	must(err)
	_, err = h.node.PutRoute(ctx, messages.Route{Prefix: "44", Frontend: "fe"})
	must(err)
	if _, err := h.node.PutRoute(ctx, messages.Route{Prefix: "45", Frontend: "nowhere"}); err == nil {
		t.Fatal("a route to an unknown frontend was taken")
	}
	id := h.submit("", "441")
	h.waitState(id, messages.StateFailed)
	_, err = h.node.Resubmit(ctx, id)
	must(err)
	h.waitState(id, messages.StateFailed)
	_, err = h.node.ResubmitBulk(ctx, messages.StateFailed)
	must(err)
	must(h.node.DeleteRoute(ctx, "44"))
	must(h.node.DeleteFrontend(ctx, "fe"))

	var trail struct{ Entries []messages.AuditEntry }
	h.must(200, "GET", "/api/audit", nil, &trail)
	checkChangesTrail(t, trail.Entries, id, hook.srv.URL, func(e messages.AuditEntry) bool {
		return e.Actor == "embedding" && e.Role == "" && e.Remote != ""
	}, "actor embedding, no role, a remote")
}

// checkChangesTrail checks the audit trail (newest first) of the changes
// TestAuditTrailOfChanges and TestEmbeddingAPIChangesAreRecorded make:
// webhook frontend fe at hookURL, route 44 to it, message id resubmitted
// alone and then in bulk, the route and the frontend deleted; each entry
// by whom the test made them (who, described by whoWant).
func checkChangesTrail(t *testing.T, entries []messages.AuditEntry, id, hookURL string, who func(messages.AuditEntry) bool, whoWant string) {
	t.Helper()
	var got []string
	for _, e := range entries {
		got = append(got, e.Action+" "+e.Target+" "+e.Detail)
		if !who(e) {
			t.Errorf("entry %+v: want %s", e, whoWant)
		}
	}
	want := []string{
		"frontend.delete fe ",
		"route.delete 44 ",
		"message.resubmit_bulk failed 1 resubmitted, 0 skipped",
		"message.resubmit " + id + " to frontend fe, now pending",
		"route.put 44 frontend fe",
		fmt.Sprintf("frontend.put fe mode webhook, url %q, signed true", hookURL),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the audit trail, newest first:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAuditOfALongPathIsStored: a change of a credentials file whose path
// (with the why the node adds) is longer than an audit entry's remote
// (256 bytes) is still stored: the store refused the whole batch for its
// length, and the file's changes were in the log alone (the same for a
// certificate reloaded from a long path, its target).
func TestAuditOfALongPathIsStored(t *testing.T) {
	cfg := testConfig(t)
	dir := filepath.Join(cfg.DataDir, strings.Repeat("d", 100), strings.Repeat("e", 100), strings.Repeat("f", 100))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg.Credentials = filepath.Join(dir, "credentials.json")
	rootTok, rootHash := auth.NewToken()
	writeCredentials(t, cfg.Credentials, auth.File{Credentials: []messages.Credential{{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash}}})
	h := startNode(t, cfg)
	h.token = rootTok
	var trail struct{ Entries []messages.AuditEntry }
	h.must(200, "GET", "/api/audit?actor=credentials-file", nil, &trail)
	if len(trail.Entries) != 1 || trail.Entries[0].Target != "root" || len(trail.Entries[0].Remote) > messages.MaxAuditRemote ||
		!strings.HasPrefix(trail.Entries[0].Remote, cfg.Credentials[:100]) {
		t.Errorf("the start's record of root, from a file at a path of %d bytes: %+v", len(cfg.Credentials), trail.Entries)
	}
}

// TestInvalidStoredCredentialIsLoggedOnce: a stored credential the node
// finds invalid is logged when it is first found, not at every read of
// the store's credentials: each instance reads them every second, and
// logged an error a second for each such row (86,400 lines a day) for as
// long as it stayed.
func TestInvalidStoredCredentialIsLoggedOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := siteConfig(t, dsn, "site-a-0")
	var logs *logtest.Buffer
	cfg.Logger, logs = logtest.New()
	h := startNode(t, cfg)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	_, hash := auth.NewToken()
	if _, err := db.Exec(ctx, `INSERT INTO credentials (name, role, token_sha256, created_at) VALUES ('auditor', 'auditor', $1, now())`, hash); err != nil {
		t.Fatal(err)
	}
	const line = "a stored credential is invalid and is ignored"
	for range 5 {
		if err := h.node.Reload(); err != nil {
			t.Fatalf("Reload: %v", err)
		}
	}
	if n := strings.Count(logs.String(), line); n != 1 {
		t.Errorf("%d lines %q after 5 reads of the same invalid row, want 1", n, line)
	}
	// Another invalid row is logged, once.
	if _, err := db.Exec(ctx, `INSERT INTO credentials (name, role, token_sha256, created_at) VALUES ('viewer2', 'viewer', $1, now())`, strings.Repeat("a", 64)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := h.node.Reload(); err != nil {
			t.Fatalf("Reload: %v", err)
		}
	}
	if n, viewer := strings.Count(logs.String(), line), strings.Count(logs.String(), `viewer2`); n != 2 || viewer != 1 {
		t.Errorf("%d lines %q (%d naming viewer2) after a second invalid row, want 2 (1)", n, line, viewer)
	}
}
