package switchboard_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/delivery"
)

// verify is docs/api.md's Go receiver ("Signed webhooks"), verbatim:
// TestDocsWebhookReceiversAreTheOnesTested holds the two the same.
func verify(secret string, r *http.Request, body []byte, seen map[string]time.Time) bool {
	var ts string
	var sigs []string
	for _, kv := range strings.Split(r.Header.Get("X-Switchboard-Signature"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == "t" {
			ts = v
		} else if ok && k == "v1" {
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := []byte(hex.EncodeToString(mac.Sum(nil)))
	for _, sig := range sigs { // any v1 that matches
		if !hmac.Equal(want, []byte(sig)) {
			continue
		}
		if _, replay := seen[sig]; replay { // forget entries older than 10 minutes
			return false
		}
		seen[sig] = time.Now()
		return true
	}
	return false
}

// docsBlock is the first fenced block of lang in docs/api.md after the
// heading.
func docsBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	data, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	at := strings.Index(doc, "\n"+heading+"\n")
	if at < 0 {
		t.Fatalf("docs/api.md has no %q", heading)
	}
	doc = doc[at:]
	start := strings.Index(doc, "\n```"+lang+"\n")
	if start < 0 {
		t.Fatalf("docs/api.md has no %s block after %q", lang, heading)
	}
	doc = doc[start+len("\n```"+lang+"\n"):]
	end := strings.Index(doc, "\n```\n")
	if end < 0 {
		t.Fatalf("docs/api.md: the %s block after %q does not end", lang, heading)
	}
	return doc[:end+1]
}

// TestDocsWebhookReceiversAreTheOnesTested: the Go receiver docs/api.md
// shows is verify, the one the tests here run.
func TestDocsWebhookReceiversAreTheOnesTested(t *testing.T) {
	src, err := os.ReadFile("docs_webhook_receiver_test.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	s = s[strings.Index(s, "\nfunc verify(")+1:]
	s = s[:strings.Index(s, "\n}\n")+3]
	if doc := docsBlock(t, "## Signed webhooks", "go"); doc != s {
		t.Errorf("docs/api.md's Go receiver is not verify in this file:\n%s\nhere:\n%s", doc, s)
	}
}

// rotationHeaders are X-Switchboard-Signature values of body at now: the
// node's (one v1, with secret), and ones with a v1 of another secret
// before or after it, which a receiver must accept too (docs/api.md:
// "accept the call when any v1 in it matches").
func rotationHeaders(secret string, now time.Time, body []byte) map[string]string {
	sig := delivery.Sign(secret, now, body)
	other := delivery.Sign("another-secret-0123456789", now, body)
	otherV1 := other[strings.Index(other, ",v1="):]
	return map[string]string{
		"the node's":           sig,
		"another v1 after it":  sig + otherV1,
		"another v1 before it": other + sig[strings.Index(sig, ",v1="):],
	}
}

// TestDocsGoReceiverAcceptsAnyMatchingV1: the docs' Go receiver accepts a
// header when any of its v1 matches, refuses one where none does and a
// replay; during a secret's change a receiver that tries both secrets
// accepts calls signed with either.
func TestDocsGoReceiverAcceptsAnyMatchingV1(t *testing.T) {
	const secret, oldSecret = "whsec-6f1c0b2e9d8a4f7c", "whsec-old-0a1b2c3d4e5f"
	body := []byte(`{"id":"m-1","message_body":"hi"}`)
	call := func(header string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "http://frontend/hook", nil)
		r.Header.Set(delivery.SignatureHeader, header)
		return r
	}
	for name, h := range rotationHeaders(secret, time.Now(), body) {
		seen := map[string]time.Time{}
		if !verify(secret, call(h), body, seen) {
			t.Errorf("%s (%s) refused", name, h)
		}
		if verify(secret, call(h), body, seen) {
			t.Errorf("%s (%s) accepted again: a replay", name, h)
		}
		if verify("whsec-neither-0123456789", call(h), body, map[string]time.Time{}) {
			t.Errorf("%s (%s) accepted with a secret none of its v1 is of", name, h)
		}
	}
	// A secret's change: the receiver takes either while it is under way.
	seen := map[string]time.Time{}
	for _, s := range []string{oldSecret, secret} {
		r := call(delivery.Sign(s, time.Now(), body))
		if !verify(secret, r, body, seen) && !verify(oldSecret, r, body, seen) {
			t.Errorf("a call signed with %s refused while the receiver takes both", s)
		}
	}
}

// TestDocsPythonReceiverAcceptsAnyMatchingV1: docs/api.md's Python
// receiver does as the Go one. Without python3 it skips, but fails in CI
// (make test installs it).
func TestDocsPythonReceiverAcceptsAnyMatchingV1(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the docs' Python receiver needs python3 with hashlib and hmac (Debian's python3; make test installs it): %v", err)
		}
		t.Skip("no python3: apt-get install python3; in CI this test fails instead")
	}
	const secret = "whsec-6f1c0b2e9d8a4f7c"
	body := `{"id":"m-1","message_body":"hi"}`
	script := docsBlock(t, "## Signed webhooks", "python") + `
import sys
body = sys.argv[1].encode()
for line in sys.stdin:
    header, key = line.rstrip("\n").split("\t")
    seen = {}
    print(verify(key.encode(), header, body, seen), verify(key.encode(), header, body, seen))
`
	file := filepath.Join(t.TempDir(), "verify.py")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	// Each header with the secret (accepted, then refused as a replay) and
	// with one none of its v1 is of (refused).
	type check struct{ name, header, key, want string }
	var checks []check
	for name, h := range rotationHeaders(secret, time.Now(), []byte(body)) {
		checks = append(checks, check{name, h, secret, "True False"}, check{name + ", another secret", h, "whsec-neither-0123456789", "False False"})
	}
	var in strings.Builder
	for _, c := range checks {
		in.WriteString(c.header + "\t" + c.key + "\n")
	}
	cmd := exec.Command(python, file, body)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v: %s", err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(checks) {
		t.Fatalf("python3 answered %q for %d checks", out, len(checks))
	}
	for i, c := range checks {
		if got[i] != c.want {
			t.Errorf("%s (%s): accepted, then again: %s; want %s", c.name, c.header, got[i], c.want)
		}
	}
}
