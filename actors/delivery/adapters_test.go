package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

func TestClassify(t *testing.T) {
	cases := map[int]messages.DeliveryStatus{
		200: messages.Delivered, 201: messages.Delivered, 204: messages.Delivered,
		408: messages.Retry, 429: messages.Retry, 500: messages.Retry, 502: messages.Retry, 503: messages.Retry,
		400: messages.Failed, 401: messages.Failed, 404: messages.Failed, 410: messages.Failed, 422: messages.Failed,
		301: messages.Failed,
	}
	for code, want := range cases {
		if got := Classify(code); got != want {
			t.Errorf("Classify(%d) = %s, want %s", code, got, want)
		}
	}
}

func TestWebhookSend(t *testing.T) {
	var got messages.Outgoing
	var key, attempt, retryAfter string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, attempt = r.Header.Get("Idempotency-Key"), r.Header.Get("X-Switchboard-Attempt")
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("decode: %v", err)
		}
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("  busy  "))
	}))
	defer srv.Close()
	wh := Webhook{URL: srv.URL, Client: srv.Client()}
	out := messages.Outgoing{ID: "m-1", SourceMSISDN: "a", DestinationMSISDN: "44", Body: "hi", SourceSMSC: "n1", Attempt: 3}

	r := wh.Send(context.Background(), out)
	if r.Status != messages.Delivered || r.ID != "m-1" || r.Reason != "" {
		t.Fatalf("200: %+v", r)
	}
	if !reflect.DeepEqual(got, out) || key != "m-1" || attempt != "3" {
		t.Fatalf("frontend saw %+v key=%q attempt=%q", got, key, attempt)
	}
	status = http.StatusServiceUnavailable
	if r := wh.Send(context.Background(), out); r.Status != messages.Retry || r.Reason != "HTTP 503: busy" || r.RetryAfter != 0 || r.Deferred {
		t.Fatalf("503: %+v, want an ordinary retry", r)
	}
	// A 429 is the frontend's rate limit: the message was not taken, a
	// deferral (no attempt used), with or without Retry-After.
	status, retryAfter = http.StatusTooManyRequests, "120"
	if r := wh.Send(context.Background(), out); r.Status != messages.Retry || r.RetryAfter != 2*time.Minute || !r.Deferred {
		t.Fatalf("429 with Retry-After 120: %+v, want a deferred retry after 2m", r)
	}
	retryAfter = ""
	if r := wh.Send(context.Background(), out); r.Status != messages.Retry || r.RetryAfter != 0 || !r.Deferred || r.Reason != "HTTP 429: busy" {
		t.Fatalf("429: %+v, want a deferred retry", r)
	}
	status = http.StatusBadRequest
	if r := wh.Send(context.Background(), out); r.Status != messages.Failed || !strings.HasPrefix(r.Reason, "HTTP 400") {
		t.Fatalf("400: %+v", r)
	}
}

// TestWebhookFollowsNoRedirect: the node's webhook client followed
// redirects, so a 303 to a login page (a GET without the message,
// answered 200) was recorded delivered, and a 307 re-sent the signed
// message to another host. A 3xx is now the frontend's answer: failed.
func TestWebhookFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer other.Close()
	for _, c := range []struct {
		code int
		to   string
	}{
		{http.StatusSeeOther, other.URL + "/login"},
		{http.StatusFound, other.URL + "/login"},
		{http.StatusTemporaryRedirect, other.URL + "/hook"},
		{http.StatusPermanentRedirect, other.URL + "/hook"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, c.to, c.code)
		}))
		wh := Webhook{URL: srv.URL, Client: &http.Client{}, Secret: "whsec-0123456789abcdef"}
		r := wh.Send(context.Background(), messages.Outgoing{ID: "m-1"})
		srv.Close()
		if want := fmt.Sprintf("HTTP %d to %s", c.code, c.to); r.Status != messages.Failed || !strings.HasPrefix(r.Reason, want) {
			t.Errorf("%d: %+v, want failed %q", c.code, r, want)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirects' target got %d calls, want none", n)
	}
}

// TestWebhookTransportDoesNotResend: net/http re-sent a call on a reused
// connection that broke after the frontend read it (the body rewound by
// GetBody), with the same signature: a frontend refusing signatures it
// has seen (docs/api.md) answered 401 and the message failed. The broken
// call is now a retry verdict, and the node's retry signs afresh.
func TestWebhookTransportDoesNotResend(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if calls.Add(1) == 2 { // read, then the connection breaks
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	wh := Webhook{URL: srv.URL, Client: &http.Client{}, Secret: "whsec-0123456789abcdef"}
	if r := wh.Send(context.Background(), messages.Outgoing{ID: "m-1"}); r.Status != messages.Delivered {
		t.Fatalf("first call: %+v", r)
	}
	if r := wh.Send(context.Background(), messages.Outgoing{ID: "m-2"}); r.Status != messages.Retry {
		t.Fatalf("call on a connection that broke: %+v, want a retry", r)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the frontend got %d calls, want 2 (the transport sent the broken one again)", n)
	}
}

func TestWebhookTransportErrorsRetry(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	wh := Webhook{URL: srv.URL, Client: &http.Client{Timeout: 50 * time.Millisecond}}
	if r := wh.Send(context.Background(), messages.Outgoing{ID: "x"}); r.Status != messages.Retry {
		t.Fatalf("timeout: %+v", r)
	}
	dead := Webhook{URL: "http://127.0.0.1:1/", Client: &http.Client{}}
	if r := dead.Send(context.Background(), messages.Outgoing{ID: "x"}); r.Status != messages.Retry || r.Reason == "" {
		t.Fatalf("refused: %+v", r)
	}
}

func TestWaiters(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var w Waiters[string]
	w.Add("a", t0.Add(3*time.Second))
	w.Add("b", t0.Add(1*time.Second))
	w.Add("c", t0.Add(2*time.Second))
	if d := w.NextDeadline(); !d.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextDeadline = %v", d)
	}
	if got := w.Expire(t0.Add(2 * time.Second)); strings.Join(got, "") != "bc" {
		t.Fatalf("Expire = %v, want [b c]", got)
	}
	if p, ok := w.Peek(); !ok || p.Poll != "a" || w.Len() != 1 {
		t.Fatalf("Peek = %v %v len %d", p, ok, w.Len())
	}
	w.Pop()
	if w.Len() != 0 || !w.NextDeadline().IsZero() {
		t.Fatal("not empty after Pop")
	}
	w.Add("d", t0)
	if got := w.All(); len(got) != 1 || got[0] != "d" || w.Len() != 0 {
		t.Fatalf("All = %v", got)
	}
}

// TestWebhookFailedCallShowsNoKeyOrPassword: a call to a URL carrying a
// key as its user (https://API_KEY@host/hook) that could not connect had
// net/http's error, the whole URL with the key in it, as its reason: the
// message's history and last_detail, the "message failed" log line, the
// call record and the attempt's span all showed the key; a password came
// out as "***". The reason shows the URL as the node shows it everywhere
// else (messages.RedactURL): the key or password is xxxxx.
func TestWebhookFailedCallShowsNoKeyOrPassword(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the connection is refused
	for _, c := range []struct{ url, secret, shown string }{
		{"http://SUPERSECRETAPIKEY42@" + addr + "/hook", "SUPERSECRETAPIKEY42", "http://xxxxx@" + addr + "/hook"},
		{"http://bob:hunter2hunter2@" + addr + "/hook", "hunter2hunter2", "http://bob:xxxxx@" + addr + "/hook"},
	} {
		r := Webhook{URL: c.url, Client: &http.Client{}}.Send(context.Background(), messages.Outgoing{ID: "m-1"})
		if r.Status != messages.Retry || strings.Contains(r.Reason, c.secret) || !strings.Contains(r.Reason, c.shown) {
			t.Errorf("%s: %+v, want a retry whose reason shows %s", c.shown, r, c.shown)
		}
	}
}

// TestWebhookRedirectShowsNoKeyOrPassword: a 3xx's reason names its
// Location with the key or password there as xxxxx, a Location without
// a scheme too; the rest (path, query) as the frontend sent it.
func TestWebhookRedirectShowsNoKeyOrPassword(t *testing.T) {
	for loc, want := range map[string]string{
		"https://APIKEY1234567@other.example/login?next=%2Fhook": "HTTP 302 to https://xxxxx@other.example/login?next=%2Fhook",
		"https://bob:hunter2hunter2@other.example/login":         "HTTP 302 to https://bob:xxxxx@other.example/login",
		"//APIKEY1234567@other.example/login":                    "HTTP 302 to //xxxxx@other.example/login",
		"/login?next=%2Fhook":                                    "HTTP 302 to /login?next=%2Fhook",
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusFound)
		}))
		r := Webhook{URL: srv.URL, Client: &http.Client{}}.Send(context.Background(), messages.Outgoing{ID: "m-1"})
		srv.Close()
		if r.Status != messages.Failed || r.Reason != want {
			t.Errorf("Location %s: %+v, want failed %q", loc, r, want)
		}
	}
}
