package switchboard_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// signedReceiver is a webhook frontend that does what docs/api.md tells
// receivers to do, with the standard library alone: it recomputes the
// HMAC over the raw body, refuses a time off by more than 5 minutes, and
// refuses a signature it has seen (a replay).
type signedReceiver struct {
	secret string
	srv    *httptest.Server

	mu       sync.Mutex
	seen     map[string]time.Time // signature -> when it was first seen
	accepted []recordedCall
	refused  map[string]int // why -> count
	unsigned int
	fail     int // the next calls answered 503
}

type recordedCall struct {
	header http.Header
	body   []byte
}

func newSignedReceiver(t *testing.T, secret string) *signedReceiver {
	s := &signedReceiver{secret: secret, seen: map[string]time.Time{}, refused: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *signedReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	header := r.Header.Get("X-Switchboard-Signature")
	if header == "" {
		s.unsigned++
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if why := s.verify(header, body, time.Now()); why != "" {
		s.refused[why]++
		http.Error(w, why, http.StatusUnauthorized) // a 4xx: the node fails the message
		return
	}
	if s.fail > 0 {
		s.fail--
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	s.accepted = append(s.accepted, recordedCall{header: r.Header.Clone(), body: body})
	w.WriteHeader(http.StatusNoContent)
}

// verify is the receiver's check, as the docs show it.
func (s *signedReceiver) verify(header string, body []byte, now time.Time) string {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return "malformed"
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return "stale"
	}
	mac := hmac.New(sha256.New, []byte(s.secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := []byte(hex.EncodeToString(mac.Sum(nil)))
	sig := ""
	for _, s := range sigs { // any v1 that matches
		if hmac.Equal(want, []byte(s)) {
			sig = s
		}
	}
	if sig == "" {
		return "bad signature"
	}
	for old, at := range s.seen {
		if now.Sub(at) > 10*time.Minute {
			delete(s.seen, old)
		}
	}
	if _, dup := s.seen[sig]; dup {
		return "replay"
	}
	s.seen[sig] = now
	return ""
}

func (s *signedReceiver) snapshot() (accepted []recordedCall, refused map[string]int, unsigned int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := map[string]int{}
	for k, v := range s.refused {
		r[k] = v
	}
	return append([]recordedCall(nil), s.accepted...), r, s.unsigned
}

// TestSignedWebhooks: a webhook frontend with a secret gets every call
// signed; a receiver that checks as the docs say accepts each (the
// node's retries included: each attempt is signed afresh) and refuses a
// replayed call and a tampered body. The secret is never shown by the
// API or recorded in the audit trail; without it the calls are unsigned.
func TestSignedWebhooks(t *testing.T) {
	h := startNode(t, testConfig(t))
	const secret = "whsec-6f1c0b2e9d8a4f7c"
	rcv := newSignedReceiver(t, secret)
	rcv.fail = 2 // two retries, each signed anew
	h.must(200, "PUT", "/api/frontends/signed", map[string]string{"mode": "webhook", "url": rcv.srv.URL, "secret": secret}, nil)
	h.must(200, "PUT", "/api/routes/33", map[string]string{"frontend": "signed"}, nil)
	var ids []string
	for range 3 {
		ids = append(ids, h.submit("", "33123"))
	}
	for _, id := range ids {
		h.waitState(id, messages.StateDelivered)
	}
	accepted, refused, unsigned := rcv.snapshot()
	if len(accepted) != 3 || len(refused) != 0 || unsigned != 0 {
		t.Fatalf("receiver accepted %d, refused %v, unsigned %d; want 3 accepted (after 2 retries), none refused", len(accepted), refused, unsigned)
	}

	// A replay of an accepted call, byte for byte, is refused; so is a
	// tampered body under a genuine signature.
	replay := func(c recordedCall, body []byte) int {
		req, err := http.NewRequest(http.MethodPost, rcv.srv.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = c.header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := replay(accepted[0], accepted[0].body); code != http.StatusUnauthorized {
		t.Errorf("a replayed call answered %d, want 401", code)
	}
	if code := replay(accepted[1], bytes.Replace(accepted[1].body, []byte("hello"), []byte("HELLO"), 1)); code != http.StatusUnauthorized {
		t.Errorf("a tampered body answered %d, want 401", code)
	}
	if _, refused, _ := rcv.snapshot(); refused["replay"] != 1 || refused["bad signature"] != 1 {
		t.Errorf("refusals %v, want one replay and one bad signature", refused)
	}

	// The API shows that there is a secret, never the secret.
	for _, path := range []string{"/api/frontends", "/api/status", "/api/audit?limit=100"} {
		_, data := h.do("GET", path, nil)
		if strings.Contains(string(data), secret) {
			t.Errorf("GET %s shows the secret: %s", path, data)
		}
	}
	var fes struct{ Frontends []messages.Frontend }
	h.must(200, "GET", "/api/frontends", nil, &fes)
	if len(fes.Frontends) != 1 || !fes.Frontends[0].SecretSet {
		t.Errorf("frontends %+v, want signed with secret_set", fes.Frontends)
	}

	// Without a secret, calls are not signed.
	h.must(200, "PUT", "/api/frontends/signed", map[string]string{"mode": "webhook", "url": rcv.srv.URL}, nil)
	id := h.submit("", "33124")
	h.waitState(id, messages.StateDelivered)
	if _, _, unsigned := rcv.snapshot(); unsigned != 1 {
		t.Errorf("%d unsigned calls after the secret was removed, want 1", unsigned)
	}
	// A secret that is too short, or on a pull frontend, is refused.
	h.apiError(400, messages.CodeInvalidRequest, "PUT", "/api/frontends/signed", map[string]string{"mode": "webhook", "url": rcv.srv.URL, "secret": "short"})
	h.apiError(400, messages.CodeInvalidRequest, "PUT", "/api/frontends/p", map[string]string{"mode": "pull", "secret": secret})
}

// TestSignedWebhookDeferralIsNotAReplay: a signed webhook at its rate
// limit answers 429 (deferred: the next call is the same attempt, the same
// body); a call made within the second of the one before carried its very
// signature, which the receiver (remembering each signature, as
// docs/api.md says) refused as a replay: 401, the message failed.
func TestSignedWebhookDeferralIsNotAReplay(t *testing.T) {
	cfg := testConfig(t) // --delivery-retry-min 20ms, --delivery-retry-max 80ms
	h := startNode(t, cfg)
	const secret = "whsec-6f1c0b2e9d8a4f7c"
	rcv := newSignedReceiver(t, secret)
	busy := 3 // the first calls find the frontend at its rate limit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if why := rcv.verify(r.Header.Get("X-Switchboard-Signature"), body, time.Now()); why != "" {
			rcv.refused[why]++
			http.Error(w, why, http.StatusUnauthorized)
			return
		}
		if busy > 0 {
			busy--
			http.Error(w, "rate limited", http.StatusTooManyRequests)
			return
		}
		rcv.accepted = append(rcv.accepted, recordedCall{header: r.Header.Clone(), body: body})
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	h.must(200, "PUT", "/api/frontends/signed", map[string]string{"mode": "webhook", "url": srv.URL, "secret": secret}, nil)
	h.must(200, "PUT", "/api/routes/33", map[string]string{"frontend": "signed"}, nil)
	id := h.submit("", "33123")
	deadline := time.Now().Add(10 * time.Second)
	var m messages.Message
	for time.Now().Before(deadline) {
		m = h.message(id)
		if m.State.Final() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, refused, _ := rcv.snapshot()
	if m.State != messages.StateDelivered || len(refused) != 0 {
		t.Fatalf("message %s (reason %q), receiver refused %v; want delivered after the 429s, no call refused as a replay\nhistory: %+v",
			m.State, m.Reason, refused, m.History)
	}
}
