package delivery

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
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
	var key, attempt string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, attempt = r.Header.Get("Idempotency-Key"), r.Header.Get("X-Switchboard-Attempt")
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("decode: %v", err)
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
	if r := wh.Send(context.Background(), out); r.Status != messages.Retry || r.Reason != "HTTP 503: busy" {
		t.Fatalf("503: %+v", r)
	}
	status = http.StatusBadRequest
	if r := wh.Send(context.Background(), out); r.Status != messages.Failed || !strings.HasPrefix(r.Reason, "HTTP 400") {
		t.Fatalf("400: %+v", r)
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
