package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

// recordingBackend records the submits and changes the gateway hands the
// node.
type recordingBackend struct {
	stubBackend
	mu    sync.Mutex
	calls []string
}

func (b *recordingBackend) note(call string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, call)
}

func (b *recordingBackend) made() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

func (b *recordingBackend) Submit(ctx context.Context, sub messages.Submission) (messages.Message, bool, error) {
	b.note("submit id=" + sub.ID)
	return b.stubBackend.Submit(ctx, sub)
}

// serve answers one request of an admin on a gateway over b.
func serve(t *testing.T, b Backend, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	s, err := New(Config{Backend: b, APIToken: stubToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+stubToken)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

// TestSubmitIDGivenEmptyIsRefused: an id given as "" or null is refused
// (400 invalid_request naming id) and nothing reaches the node; it was
// read as an id left out, so the node made a new one for each retry of
// the same request, and stored each as another message. An id left out
// is still one the node makes.
func TestSubmitIDGivenEmptyIsRefused(t *testing.T) {
	const rest = `"source_msisdn":"+1","destination_msisdn":"+4488","message_body":"retry me"}`
	for _, id := range []string{`""`, `null`, ` null `} {
		b := &recordingBackend{}
		rec := serve(t, b, "POST", "/api/messages", `{"id":`+id+`,`+rest)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":"invalid_request"`) ||
			!strings.Contains(rec.Body.String(), `"message":"id `) {
			t.Errorf(`a submit with "id": %s: %d %s, want 400 invalid_request naming id`, id, rec.Code, strings.TrimSpace(rec.Body.String()))
		}
		if made := b.made(); len(made) != 0 {
			t.Errorf(`a submit with "id": %s reached the node: %v`, id, made)
		}
	}
	for body, want := range map[string]string{
		`{` + rest:                 "submit id=",
		`{"id":"order-17",` + rest: "submit id=order-17",
	} {
		b := &recordingBackend{}
		rec := serve(t, b, "POST", "/api/messages", body)
		if made := b.made(); rec.Code != http.StatusUnprocessableEntity || len(made) != 1 || made[0] != want {
			t.Errorf("%s: %d %s, node asked %v; want the stub's 422 after %q", body, rec.Code, strings.TrimSpace(rec.Body.String()), made, want)
		}
	}
	// A wrong type for id is refused as before.
	if rec := serve(t, &recordingBackend{}, "POST", "/api/messages", `{"id":5,`+rest); rec.Code != http.StatusBadRequest {
		t.Errorf(`a submit with "id": 5: %d %s, want 400`, rec.Code, rec.Body.String())
	}
}
