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
	s := stubServer(t)
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
	s := stubServer(t)
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

// TestHeadIsServedWhereGetIs: HEAD of a path served on GET answers as the
// GET does (status, type, token check) without a body; it was 405 on
// every route, /healthz, /readyz and / included. A HEAD of a path served
// without GET is 405 naming HEAD; of no path, 404.
func TestHeadIsServedWhereGetIs(t *testing.T) {
	srv := uiServer(t)
	for _, c := range []struct {
		path, token string
		status      int
	}{
		{"/healthz", "", 200}, {"/readyz", "", 200}, {"/", "", 200}, {"/ui.js", "", 200},
		{"/api/messages/m-1", stubToken, 200}, {"/api/messages?state=failed", stubToken, 200},
		{"/api/openapi.json", stubToken, 200},
		{"/api/messages/m-1", "", 401}, {"/api/messages/nope", stubToken, 404},
		{"/api/routes/44", stubToken, 405}, {"/api/frontends/fa/poll", stubToken, 405}, {"/no/such", stubToken, 404},
	} {
		do := func(method string) (*http.Response, []byte) {
			req, err := http.NewRequest(method, srv.URL+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			return res, body
		}
		head, body := do(http.MethodHead)
		if head.StatusCode != c.status || len(body) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes of body, want %d and none", c.path, head.StatusCode, len(body), c.status)
		}
		if c.status == http.StatusMethodNotAllowed {
			continue
		}
		get, _ := do(http.MethodGet)
		if get.StatusCode != head.StatusCode || get.Header.Get("Content-Type") != head.Header.Get("Content-Type") {
			t.Errorf("HEAD %s: %d %q, GET: %d %q; want the same", c.path, head.StatusCode, head.Header.Get("Content-Type"),
				get.StatusCode, get.Header.Get("Content-Type"))
		}
	}
	// The 405 names the method asked.
	s := stubServer(t)
	req := httptest.NewRequest(http.MethodHead, "/api/routes/44", nil)
	req.Header.Set("Authorization", "Bearer "+stubToken)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed || !strings.Contains(rec.Body.String(), "method HEAD is not allowed") {
		t.Errorf("HEAD /api/routes/44: %d %s, want 405 naming HEAD", rec.Code, rec.Body.String())
	}
}

// TestUnreadBodyIsCutOff: a request whose body does not come, on a path
// whose handler never reads it (an unauthenticated POST answered 401, a
// GET /healthz, an unknown path), is answered within bodyWait and its
// connection let go. net/http reads what is left of such a body before it
// writes the answer, with no deadline once the headers are in: a client
// that sent a Content-Length and no body got no answer and held its
// connection, and a goroutine, for ever, without a token (a few hundred
// of them used up the node's file descriptors).
func TestUnreadBodyIsCutOff(t *testing.T) {
	defer func(d time.Duration) { bodyWait = d }(bodyWait)
	bodyWait = 300 * time.Millisecond
	s := stubServer(t)
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		chunked      bool
		status       int
	}{
		{"POST", "/api/messages", false, http.StatusUnauthorized},
		{"POST", "/api/messages", true, http.StatusUnauthorized},
		{"GET", "/healthz", false, http.StatusOK},
		{"POST", "/no/such", false, http.StatusNotFound},
	} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		framing := "Content-Length: 200"
		if c.chunked {
			framing = "Transfer-Encoding: chunked"
		}
		if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n", c.method, c.path, framing); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%s %s (%s) and no body: no answer: %v", c.method, c.path, framing, err)
		} else if res.StatusCode != c.status || !res.Close {
			t.Errorf("%s %s (%s) and no body: %d (close %v), want %d and the connection closed", c.method, c.path, framing, res.StatusCode, res.Close, c.status)
		}
		conn.Close()
	}
}

// TestUnreadAnswerIsCutOff: a client that asks and never reads the answer
// (here: the public /ui.js, asked 200 times on one connection, more than
// the kernel's buffers hold) loses its connection once an answer has
// waited answerWait to be written. The node bounded no write: the
// handler's write blocked for ever, holding the connection, a goroutine
// and megabytes of socket buffer past the idle timeout, without a token.
func TestUnreadAnswerIsCutOff(t *testing.T) {
	defer func(d time.Duration) { answerWait = d }(answerWait)
	answerWait = 300 * time.Millisecond
	s := stubServer(t)
	srv := httptest.NewUnstartedServer(s)
	closed := make(chan struct{})
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			close(closed)
		}
	}
	srv.Start()
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprint(conn, strings.Repeat("GET /ui.js HTTP/1.1\r\nHost: x\r\n\r\n", 200)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the node still holds a connection whose answers were not read 10 s on, want it closed after answerWait")
	}
}

// stubServer is a Server on stubBackend, admitting stubToken, its logs
// discarded.
func stubServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(Config{Backend: stubBackend{}, APIToken: stubToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
