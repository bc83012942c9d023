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

func (b *recordingBackend) Resubmit(ctx context.Context, id string) (messages.Message, error) {
	b.note("resubmit " + id)
	return b.stubBackend.Resubmit(ctx, id)
}

func (b *recordingBackend) DeleteRoute(_ context.Context, prefix string) error {
	b.note("delete route " + prefix)
	return nil
}

func (b *recordingBackend) DeleteFrontend(_ context.Context, name string) error {
	b.note("delete frontend " + name)
	return nil
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

// TestBodylessCallsRefuseABody: a single resubmit and the DELETEs take no
// body; one that is not empty nor {} is refused as every strict call
// refuses it (an unknown field: 400 unknown_field) and nothing changes.
// They ignored it and acted: {"msg_id":"other","bogus":true} resubmitted
// the path's message.
func TestBodylessCallsRefuseABody(t *testing.T) {
	for _, c := range []struct{ method, path, change string }{
		{"POST", "/api/messages/r1/resubmit", "resubmit r1"},
		{"DELETE", "/api/routes/4412", "delete route 4412"},
		{"DELETE", "/api/frontends/fa", "delete frontend fa"},
	} {
		for body, code := range map[string]string{
			`{"msg_id":"other","bogus":true}`: "unknown_field",
			`{"Bogus":1}`:                     "unknown_field",
			`[]`:                              "invalid_json",
			`{} x`:                            "invalid_json",
			`"x"`:                             "invalid_json",
		} {
			b := &recordingBackend{}
			rec := serve(t, b, c.method, c.path, body)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":"`+code+`"`) {
				t.Errorf("%s %s with %s: %d %s, want 400 %s", c.method, c.path, body, rec.Code, strings.TrimSpace(rec.Body.String()), code)
			}
			if made := b.made(); len(made) != 0 {
				t.Errorf("%s %s with %s changed %v", c.method, c.path, body, made)
			}
		}
		for _, body := range []string{"", " ", "{}", " { } "} {
			b := &recordingBackend{}
			rec := serve(t, b, c.method, c.path, body)
			if made := b.made(); rec.Code >= 300 || len(made) != 1 || made[0] != c.change {
				t.Errorf("%s %s with %q: %d %s, changed %v; want %q done", c.method, c.path, body, rec.Code, strings.TrimSpace(rec.Body.String()), made, c.change)
			}
		}
	}
}
