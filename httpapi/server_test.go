package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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

// TestSlowBodyIsCutOff: a request whose body does not come within
// bodyWait (a client that sends less than its Content-Length, or trickles
// it) is answered 400 invalid_json saying so, and its connection let go;
// it held its connection and handler for ever (the server bounds only
// the headers). A body that came in time leaves no deadline behind: the
// next request on the connection, after a pause longer than bodyWait, is
// served.
func TestSlowBodyIsCutOff(t *testing.T) {
	defer func(d time.Duration) { bodyWait = d }(bodyWait)
	bodyWait = 300 * time.Millisecond
	s, err := New(Config{Backend: stubBackend{}, APIToken: stubToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	send := func(c net.Conn, body string, length int) {
		t.Helper()
		if _, err := fmt.Fprintf(c, "POST /api/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			stubToken, length, body); err != nil {
			t.Fatal(err)
		}
	}
	read := func(br *bufio.Reader) (*http.Response, string) {
		t.Helper()
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	send(c, `{"source_msisdn":`, 200) // and no more
	if res, body := read(br); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "did not come within 300ms") {
		t.Fatalf("a body that never came: %d %s, want 400 saying it did not come", res.StatusCode, body)
	}

	c2, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(10 * time.Second))
	br2 := bufio.NewReader(c2)
	whole := `{"source_msisdn":"1555","destination_msisdn":"4471","message_body":"x"}`
	for range 2 {
		send(c2, whole, len(whole))
		if res, body := read(br2); res.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("a whole body: %d %s, want the stub's 422 no_route", res.StatusCode, body)
		}
		time.Sleep(2 * bodyWait)
	}
}
