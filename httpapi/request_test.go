package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
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

func (b *recordingBackend) PutFrontend(ctx context.Context, f messages.Frontend) (messages.Frontend, error) {
	b.note(fmt.Sprintf("put frontend %s %s secret=%q", f.Name, f.Mode, f.Secret))
	return b.stubBackend.PutFrontend(ctx, f)
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

// TestFrontendSecretGivenEmptyIsRefused: a frontend's secret given as ""
// or null (what "secret":"'$(openssl rand -hex 32)'" sends when the
// command fails) is refused, 400 invalid_request naming secret, and
// nothing reaches the node, whatever the mode; it was read as a secret
// left out, and the webhook frontend was stored unsigned. A secret left
// out is still a frontend without one.
func TestFrontendSecretGivenEmptyIsRefused(t *testing.T) {
	for _, mode := range []string{
		`"mode":"webhook","url":"https://sms.example/in"`,
		`"mode":"smpp","url":"smpp://acme@smsc.example:2775"`,
		`"mode":"pull"`,
	} {
		for _, secret := range []string{`""`, `null`, ` null `} {
			b := &recordingBackend{}
			rec := serve(t, b, "PUT", "/api/frontends/fe", `{`+mode+`,"secret":`+secret+`}`)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":"invalid_request"`) ||
				!strings.Contains(rec.Body.String(), `"message":"secret `) {
				t.Errorf(`{%s, "secret": %s}: %d %s, want 400 invalid_request naming secret`, mode, secret, rec.Code, strings.TrimSpace(rec.Body.String()))
			}
			if made := b.made(); len(made) != 0 {
				t.Errorf(`{%s, "secret": %s} reached the node: %v`, mode, secret, made)
			}
		}
	}
	for body, want := range map[string]string{
		`{"mode":"webhook","url":"https://sms.example/in"}`:                                   `put frontend fe webhook secret=""`,
		`{"mode":"webhook","url":"https://sms.example/in","secret":"whsec-6f1c0b2e9d8a4f7c"}`: `put frontend fe webhook secret="whsec-6f1c0b2e9d8a4f7c"`,
	} {
		b := &recordingBackend{}
		rec := serve(t, b, "PUT", "/api/frontends/fe", body)
		if made := b.made(); rec.Code != http.StatusOK || len(made) != 1 || made[0] != want {
			t.Errorf("%s: %d %s, node asked %v; want 200 after %s", body, rec.Code, strings.TrimSpace(rec.Body.String()), made, want)
		}
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

// TestBodyOfTheWrongShapeIsNamedInJSONTerms: a body of null is refused
// where an object is expected (a poll of null polled with the defaults),
// and a value of the wrong JSON type is refused with a message naming the
// field and the JSON type it takes, not the decoder's Go types ("cannot
// unmarshal array into Go value of type struct { Max *int ...}", "Go
// struct field Submission.destination_msisdn").
func TestBodyOfTheWrongShapeIsNamedInJSONTerms(t *testing.T) {
	for _, c := range []struct{ method, path, body, message string }{
		{"POST", "/api/frontends/fa/poll", `null`, "the request body is null; a JSON object is required"},
		{"POST", "/api/frontends/fa/poll", " null\n", "the request body is null; a JSON object is required"},
		{"POST", "/api/messages", `null`, "the request body is null; a JSON object is required"},
		{"PUT", "/api/routes/44", `null`, "the request body is null; a JSON object is required"},
		{"POST", "/api/messages/r1/resubmit", `null`, "the request body is null; a JSON object is required"},
		{"POST", "/api/frontends/fa/poll", `[]`, "the request body is an array; a JSON object is required"},
		{"POST", "/api/frontends/fa/poll", `"x"`, "the request body is a string; a JSON object is required"},
		{"POST", "/api/frontends/fa/poll", `{"max":"10"}`, "max must be an integer, not a string"},
		{"POST", "/api/frontends/fa/poll", `{"wait_ms":1.5}`, "wait_ms must be an integer, not the number 1.5"},
		{"POST", "/api/messages", `{"source_msisdn":"1","destination_msisdn":4477,"message_body":"x"}`, "destination_msisdn must be a string, not a number"},
		{"POST", "/api/messages", `{"id":["a"],"source_msisdn":"1","destination_msisdn":"4477","message_body":"x"}`, "id must be a string, not an array"},
		{"POST", "/api/messages", `{"source_msisdn":"1","destination_msisdn":"4477","message_body":"x","validity_until":5}`, "a time is not a JSON string"},
		{"POST", "/api/frontends/fa/ack", `{"results":[{"id":"a","status":true}]}`, "results.status must be a string, not a boolean"},
		{"POST", "/api/frontends/fa/ack", `{"results":{}}`, "results must be an array, not an object"},
		{"PUT", "/api/frontends/fa", `{"mode":"pull","url":{}}`, "url must be a string, not an object"},
	} {
		rec := serve(t, stubBackend{}, c.method, c.path, c.body)
		var doc errorDoc
		_ = json.Unmarshal(rec.Body.Bytes(), &doc)
		if rec.Code != http.StatusBadRequest || doc.Error.Code != messages.CodeInvalidJSON || !strings.Contains(doc.Error.Message, c.message) ||
			strings.Contains(doc.Error.Message, "Go ") {
			t.Errorf("%s %s with %s: %d %s, want 400 invalid_json saying %q", c.method, c.path, c.body, rec.Code, strings.TrimSpace(rec.Body.String()), c.message)
		}
	}
}

// TestATimeThatDoesNotParseIsNamedByItsField: a time that is a string but
// not RFC 3339 is refused 400 invalid_request naming its field, as every
// other bad value is: the decoder's error gives the value alone, and the
// answer said "a time is not RFC 3339", leaving a client with two time
// fields to guess. When the same bad value stands in two fields, neither
// is named.
func TestATimeThatDoesNotParseIsNamedByItsField(t *testing.T) {
	const sub = `{"source_msisdn":"1","destination_msisdn":"4477","message_body":"x",`
	for _, c := range []struct{ body, message string }{
		{sub + `"validity_until":"tomorrow"}`, `validity_until is not RFC 3339 (e.g. 2026-05-01T12:00:00Z): "tomorrow"`},
		{sub + `"validity_until":"2026-05-01T12:00:00Z","deliver_after":"2026-05-01 11:00"}`, `deliver_after is not RFC 3339 (e.g. 2026-05-01T12:00:00Z): "2026-05-01 11:00"`},
		{sub + `"deliver_after":"soon","validity_until":"soon"}`, `a time is not RFC 3339 (e.g. 2026-05-01T12:00:00Z): "soon"`},
	} {
		rec := serve(t, stubBackend{}, "POST", "/api/messages", c.body)
		var doc errorDoc
		_ = json.Unmarshal(rec.Body.Bytes(), &doc)
		if rec.Code != http.StatusBadRequest || doc.Error.Code != messages.CodeInvalidRequest || doc.Error.Message != c.message {
			t.Errorf("POST /api/messages with %s: %d %s, want 400 invalid_request saying %q", c.body, rec.Code, strings.TrimSpace(rec.Body.String()), c.message)
		}
	}
}
