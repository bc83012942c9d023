package switchboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
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
