package switchboard_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// TestWebhookErrorBodyCutInsideACharacter: a webhook's error body is kept
// for the reason up to 256 bytes, here cut inside a UTF-8 character.
// Postgres refused the retry's detail (SQLSTATE 22021), the round was
// retried with it for ever and the frontend's deliveries stopped: this
// message and every later one. The detail is now stored clean.
func TestWebhookErrorBodyCutInsideACharacter(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			// 255 ASCII bytes, then "é": the 256th byte is half of it.
			_, _ = io.WriteString(w, strings.Repeat("a", 255)+"é and more")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	cfg := testConfig(t)
	cfg.Postgres = pgtest.DSN(t)
	h := startNode(t, cfg)
	h.webhookFrontend("utf", srv.URL, "45")
	id := h.submit("", "45123")
	m := h.waitState(id, messages.StateDelivered)
	var retried bool
	for _, e := range m.History {
		if !utf8.ValidString(e.Detail) {
			t.Errorf("history detail %q is not UTF-8", e.Detail)
		}
		retried = retried || e.State == messages.StateRetry && strings.Contains(e.Detail, "HTTP 503: aaa")
	}
	if !retried {
		t.Errorf("no retry with the 503's body in the history: %+v", m.History)
	}
	h.waitState(h.submit("", "45124"), messages.StateDelivered)
}

// TestWebhookRedirectIsNotDelivered: a webhook behind an auth proxy
// answers 303 to its login page. The node followed it with a GET (no
// message) and recorded the login page's 200 as delivered; a 3xx now
// fails the message, naming where it pointed.
func TestWebhookRedirectIsNotDelivered(t *testing.T) {
	var gets atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	})
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	h := startNode(t, testConfig(t))
	h.webhookFrontend("redir", srv.URL+"/hook", "44")
	m := h.waitState(h.submit("", "44123"), messages.StateFailed)
	if m.Reason != "rejected: HTTP 303 to /login" || gets.Load() != 0 {
		t.Fatalf("reason %q, %d GETs of the login page; want rejected: HTTP 303 to /login, none", m.Reason, gets.Load())
	}
}

// TestWebhookBrokenConnectionIsNotAReplay: a receiver that refuses a
// signature it has seen (as docs/api.md advises) got the call net/http
// re-sent by itself, same signature, after a reused connection broke once
// the receiver had read it; it answered 401 and the message failed. The
// node's own retry, signed afresh, delivers it.
func TestWebhookBrokenConnectionIsNotAReplay(t *testing.T) {
	const secret = "whsec-6f1c0b2e9d8a4f7c"
	var mu sync.Mutex
	seen := map[string]bool{}
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		sig := r.Header.Get("X-Switchboard-Signature")
		mu.Lock()
		replay := seen[sig]
		seen[sig] = true
		mu.Unlock()
		if replay {
			http.Error(w, "replay", http.StatusUnauthorized)
			return
		}
		if n.Add(1) == 2 { // the second call: read, then the connection breaks
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	h := startNode(t, testConfig(t))
	h.must(200, "PUT", "/api/frontends/signed", map[string]string{"mode": "webhook", "url": srv.URL, "secret": secret}, nil)
	h.api().Routes("signed", "49")
	h.waitState(h.submit("", "49001"), messages.StateDelivered)
	m := h.waitState(h.submit("", "49002"), messages.StateDelivered)
	if m.Attempts != 2 {
		t.Errorf("delivered after %d attempts, want 2 (the broken call, then the node's retry)", m.Attempts)
	}
}

// TestWebhookKeyIsNeverShownWhenACallCannotConnect: a webhook URL's key
// (https://API_KEY@host/hook, the Basic user) and password are never
// shown (docs/api.md). A call that could not connect had net/http's
// error, with the whole URL, as its reason: the key was in the message's
// history and last_detail (which a client credential reads), in the
// "message failed" log line and in the call record. They show the URL as
// the API does, the key and password as xxxxx.
func TestWebhookKeyIsNeverShownWhenACallCannotConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every call is refused
	var logs logtest.Buffer
	cfg := testConfig(t)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.DeliveryMaxAttempts = 2
	cfg.ForwardMaxRetries, cfg.ForwardRetryInterval, cfg.HTTPTimeout = 2, 100*time.Millisecond, 200*time.Millisecond
	cfg.Retention, cfg.RetentionFailed = time.Second, time.Second
	cfg.CDRFile = filepath.Join(t.TempDir(), "cdr.jsonl")
	h := startNode(t, cfg)
	h.webhookFrontend("keyed", "http://SUPERSECRETAPIKEY42@"+addr+"/hook", "44")
	h.webhookFrontend("basic", "http://bob:hunter2hunter2@"+addr+"/hook", "45")
	for _, c := range []struct{ dest, shown string }{
		{"44123", "http://xxxxx@" + addr + "/hook"},
		{"45123", "http://bob:xxxxx@" + addr + "/hook"},
	} {
		id := h.submit("", c.dest)
		m := h.waitState(id, messages.StateFailed)
		// The message as a client reads it: history and last_detail.
		status, body := h.do("GET", "/api/messages/"+id, nil)
		if status != 200 || !strings.Contains(m.LastDetail, c.shown) {
			t.Errorf("%s: GET %d, last_detail %q; want it to show %s", id, status, m.LastDetail, c.shown)
		}
		for _, secret := range []string{"SUPERSECRETAPIKEY42", "hunter2hunter2", "bob:***"} {
			if strings.Contains(string(body), secret) {
				t.Errorf("the message shows %q: %s", secret, body)
			}
		}
		polltest.Eventually(t, 20*time.Second, func() error {
			if _, ok := readRecords(t, cfg.CDRFile)[id]; !ok {
				return fmt.Errorf("no call record of %s yet", id)
			}
			return nil
		})
	}
	cdr, err := os.ReadFile(cfg.CDRFile)
	if err != nil {
		t.Fatal(err)
	}
	for where, text := range map[string]string{"the logs": logs.String(), "the call records": string(cdr)} {
		for _, secret := range []string{"SUPERSECRETAPIKEY42", "hunter2hunter2", "bob:***"} {
			for line := range strings.Lines(text) {
				if strings.Contains(line, secret) {
					t.Errorf("%s show %q: %s", where, secret, line)
				}
			}
		}
	}
	if !strings.Contains(logs.String(), "message failed") {
		t.Errorf("no message failed line in the logs:\n%s", logs.String())
	}
}
