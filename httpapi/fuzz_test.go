package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// fuzzRequest feeds body to one endpoint and checks what any client may
// rely on: no panic, a status from the contract, and for every error the
// JSON error document with a code and a message.
func fuzzRequest(t *testing.T, method, path string, body []byte, allowed ...int) {
	s, err := New(Config{Backend: stubBackend{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(method, path, bytes.NewReader(body)))
	ok := false
	for _, a := range append(allowed, http.StatusBadRequest, http.StatusRequestEntityTooLarge) {
		ok = ok || rec.Code == a
	}
	if !ok {
		t.Fatalf("%s %s with %q: status %d not in %v", method, path, body, rec.Code, allowed)
	}
	if rec.Code >= 400 {
		var doc errorDoc
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Error.Code == "" || doc.Error.Message == "" {
			t.Fatalf("%s %s with %q: %d with body %q, not an error document", method, path, body, rec.Code, rec.Body.String())
		}
	}
}

func FuzzSubmit(f *testing.F) {
	for _, seed := range []string{
		`{"source_msisdn":"1","destination_msisdn":"4412","message_body":"hi"}`,
		`{"id":"a:b-c.d_e","source_msisdn":"BANK","destination_msisdn":"+4412","message_body":"\u00e9"}`,
		`{"source_msisdn":1}`, `[]`, `null`, `{}`, `{"message_body":"` + "\xff" + `"}`, ``, `{"a":1} x`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// The stub answers no_route for any valid submission.
		fuzzRequest(t, "POST", "/api/messages", body, http.StatusUnprocessableEntity)
	})
}

func FuzzPoll(f *testing.F) {
	for _, seed := range []string{`{}`, `{"max":10,"wait_ms":100,"lease_ms":1000}`, `{"max":-1}`, `{"wait_ms":1e30}`, `{"lease_ms":"x"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzRequest(t, "POST", "/api/frontends/fe-a/poll", body, http.StatusOK)
	})
}

func FuzzAck(f *testing.F) {
	for _, seed := range []string{
		`{"results":[{"id":"m-1","status":"delivered"}]}`,
		`{"results":[{"id":"m-1","status":"retry","reason":"busy"},{"id":"m-2","status":"failed"}]}`,
		`{"results":[]}`, `{"results":[{}]}`, `{"results":null}`, `{"results":[{"id":"x","status":"maybe"}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzRequest(t, "POST", "/api/frontends/fe-a/ack", body, http.StatusOK)
	})
}

func FuzzDirectory(f *testing.F) {
	for _, seed := range []string{`{"mode":"pull"}`, `{"mode":"webhook","url":"https://x.example/in"}`, `{"mode":"actor"}`, `{"frontend":"fe-a"}`, `{"state":"failed"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzRequest(t, "PUT", "/api/frontends/fe-z", body, http.StatusOK)
		fuzzRequest(t, "PUT", "/api/routes/44", body, http.StatusOK)
		fuzzRequest(t, "POST", "/api/messages/resubmit", body, http.StatusOK)
	})
}
