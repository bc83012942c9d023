package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUncleanPathsAreNotFoundNotRedirected: a path that names nothing (an
// empty id or prefix: POST /api/messages//resubmit, DELETE
// /api/routes//44; a dot segment) is 404 not_found with the error
// document (CONTRACT.md: unknown paths 404; docs/api.md: every 4xx is the
// error document), not a bare 301 to another route: the empty id's
// single resubmit was sent to the bulk resubmit's path.
func TestUncleanPathsAreNotFoundNotRedirected(t *testing.T) {
	s, err := New(Config{Backend: stubBackend{}, APIToken: stubToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/messages//resubmit"},
		{"DELETE", "/api/routes//44"},
		{"POST", "/api/messages/x/../resubmit"},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Header.Set("Authorization", "Bearer "+stubToken)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"code":"not_found"`) {
			t.Errorf("%s %s: %d (Location %q) %q, want 404 not_found", c.method, c.path, rec.Code, rec.Header().Get("Location"), rec.Body.String())
		}
	}
}
