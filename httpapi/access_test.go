package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
)

// setCredentials are credentials a test replaces.
type setCredentials struct{ set atomic.Pointer[auth.Set] }

func (c *setCredentials) Current() *auth.Set { return c.set.Load() }

// waitingBackend's polls wait until their context ends (answered
// unavailable, as the node answers a poll that left) or release closes.
type waitingBackend struct {
	stubBackend
	entered chan string
	release chan struct{}
}

func (b *waitingBackend) Poll(ctx context.Context, fe string, _ int, _, _ time.Duration) ([]messages.Outgoing, error) {
	b.entered <- fe
	select {
	case <-ctx.Done():
		return nil, messages.Errorf(messages.CodeUnavailable, "the poll ended")
	case <-b.release:
		return []messages.Outgoing{{ID: "m-" + fe}}, nil
	}
}

// TestChangeCredentialsEndsPollsItNoLongerAllows: new credentials end the
// long-polls under way whose caller they would not let poll, before they
// are in force, and those are answered as the guard answers now: 401 for
// a credential gone, 403 for one no longer bound to the frontend. A poll
// they still allow goes on.
func TestChangeCredentialsEndsPollsItNoLongerAllows(t *testing.T) {
	tok := map[string]string{}
	cred := func(name string, fes ...string) messages.Credential {
		t, hash := auth.NewToken()
		tok[name] = t
		return messages.Credential{Name: name, Role: messages.RoleFrontend, TokenHash: hash, Frontends: fes}
	}
	gone, moved, kept := cred("gone", "fe-a"), cred("moved", "fe-b"), cred("kept", "fe-c")
	creds := &setCredentials{}
	creds.set.Store(auth.NewSet([]messages.Credential{gone, moved, kept}, true))
	b := &waitingBackend{entered: make(chan string, 3), release: make(chan struct{})}
	s, err := New(Config{Backend: b, Credentials: creds, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]chan *httptest.ResponseRecorder{}
	for name, fe := range map[string]string{"gone": "fe-a", "moved": "fe-b", "kept": "fe-c"} {
		answer := make(chan *httptest.ResponseRecorder, 1)
		answers[fe] = answer
		go func() {
			req := httptest.NewRequest("POST", "/api/frontends/"+fe+"/poll", strings.NewReader(`{"wait_ms": 60000}`))
			req.Header.Set("Authorization", "Bearer "+tok[name])
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			answer <- rec
		}()
	}
	for range 3 {
		<-b.entered
	}
	moved.Frontends = []string{"fe-x"}
	next := auth.NewSet([]messages.Credential{moved, kept}, true)
	s.ChangeCredentials(next, func() { creds.set.Store(next) })
	for fe, want := range map[string]int{"fe-a": http.StatusUnauthorized, "fe-b": http.StatusForbidden} {
		if rec := <-answers[fe]; rec.Code != want {
			t.Errorf("the poll of %s: %d %s, want %d", fe, rec.Code, rec.Body, want)
		}
	}
	close(b.release)
	if rec := <-answers["fe-c"]; rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "m-fe-c") {
		t.Errorf("the poll the change still allows: %d %s, want its messages", rec.Code, rec.Body)
	}
}

// TestBearerSchemeIsCaseInsensitive: the authentication scheme of an
// Authorization header is case-insensitive (RFC 9110 11.1, RFC 6750
// uses it as such), and one or more spaces part it from the token; a
// client or proxy that sends "bearer <token>" with the right token must
// not be answered 401 "the API token is not valid".
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	s := stubServer(t)
	for scheme, want := range map[string]int{
		"bearer ": http.StatusOK, "BEARER ": http.StatusOK, "Bearer   ": http.StatusOK,
		// Another scheme, or none parted from the token, is no Bearer token.
		"Basic ": http.StatusUnauthorized, "Bearer": http.StatusUnauthorized, "Bearer-": http.StatusUnauthorized,
	} {
		req := httptest.NewRequest("GET", "/api/whoami", nil)
		req.Header.Set("Authorization", scheme+stubToken)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Authorization: %q<the right token>: %d %s, want %d", scheme, rec.Code, strings.TrimSpace(rec.Body.String()), want)
		}
	}
}
