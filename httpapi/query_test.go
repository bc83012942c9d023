package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/persistence"
)

// queryBackend records the list queries the gateway hands it.
type queryBackend struct {
	stubBackend
	lists  []persistence.ListQuery
	audits []persistence.AuditQuery
}

func (b *queryBackend) Messages(_ context.Context, q persistence.ListQuery) (persistence.Page, error) {
	b.lists = append(b.lists, q)
	return persistence.Page{}, nil
}

func (b *queryBackend) AuditTrail(_ context.Context, q persistence.AuditQuery) (persistence.AuditPage, error) {
	b.audits = append(b.audits, q)
	return persistence.AuditPage{}, nil
}

// TestMalformedQueryIsRefused: a query string that does not parse
// (a bad %-escape, a ';' separator) must be refused like an unknown or
// repeated parameter (docs/api.md, "Strict client and directory calls"),
// not have its parameters dropped in silence: a filtered list would
// answer 200 with every message, a pager would start over from the newest.
func TestMalformedQueryIsRefused(t *testing.T) {
	for _, path := range []string{
		"/api/messages?state=failed&cursor=%zz",
		"/api/messages?state=failed;limit=5",
		"/api/audit?action=route.put;actor=bob",
		"/api/audit?actor=%zz",
	} {
		t.Run(path, func(t *testing.T) {
			b := &queryBackend{}
			s, err := New(Config{Backend: b, APIToken: stubToken, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", path, nil)
			req.Header.Set("Authorization", "Bearer "+stubToken)
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":"invalid_request"`) {
				t.Errorf("GET %s: %d %s; want 400 invalid_request (list queries made: %+v %+v)",
					path, rec.Code, strings.TrimSpace(rec.Body.String()), b.lists, b.audits)
			}
		})
	}
}

// TestEmptyQueryValueIsRefused: a parameter given empty ("?state=",
// "?limit=", "?destination=", "?cursor=") is refused with the code a bad
// value of it gets (400 invalid_request), not read as left out: a
// filtered list was answered 200 with every message. Both listings.
func TestEmptyQueryValueIsRefused(t *testing.T) {
	for _, path := range []string{
		"/api/messages?state=", "/api/messages?limit=", "/api/messages?destination=", "/api/messages?cursor=",
		"/api/messages?source=", "/api/messages?since=", "/api/messages?until=", "/api/messages?frontend=",
		"/api/messages?peer=", "/api/messages?state=failed&limit", "/api/audit?actor=", "/api/audit?action=",
		"/api/audit?limit=", "/api/audit?cursor=", "/api/audit?since=",
	} {
		b := &queryBackend{}
		rec := serve(t, b, "GET", path, "")
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":"invalid_request"`) {
			t.Errorf("GET %s: %d %s; want 400 invalid_request (list queries made: %+v %+v)",
				path, rec.Code, strings.TrimSpace(rec.Body.String()), b.lists, b.audits)
		}
	}
}
