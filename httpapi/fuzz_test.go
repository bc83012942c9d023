package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// fuzzRequest feeds body to one endpoint and checks what any client may
// rely on: no panic, a status docs/api.md lists, and for every error the
// JSON error document with a code and a message.
func fuzzRequest(t *testing.T, method, path string, body []byte, allowed ...int) *httptest.ResponseRecorder {
	return fuzzServe(t, httptest.NewRequest(method, path, bytes.NewReader(body)), body, allowed...)
}

// fuzzServe serves req (whose body is body) and checks the answer as
// fuzzRequest says.
func fuzzServe(t *testing.T, req *http.Request, body []byte, allowed ...int) *httptest.ResponseRecorder {
	method, path := req.Method, req.URL.Path
	s, err := New(Config{Backend: stubBackend{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
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
	return rec
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

// submissionNames are the JSON names of a submission, as docs/api.md
// lists them.
var submissionNames = []string{"id", "source_msisdn", "destination_msisdn", "message_body",
	"data_coding", "message_body_base64", "validity_until", "deliver_after"}

// FuzzExactKeys holds decode to a reference model: it accepts a
// submission exactly when encoding/json does (unknown fields refused) and
// every name of the object is a field's exact name, given once; it refuses
// the others with unknown_field (a name in another case) or invalid_json
// (a name twice).
func FuzzExactKeys(f *testing.F) {
	for _, seed := range []string{
		`{"id":"x2","source_msisdn":"1","destination_msisdn":"4412","message_body":"hi","ID":"zzz"}`,
		`{"Source_MSISDN":"1","destination_msisdn":"4412","message_body":"hi"}`,
		`{"id":"a","id":"b"}`, `{"\u0069d":"a"}`, `{"\u0069d":"a","id":"b"}`, `{"i\u0044":"a"}`,
		`{"validity_until":"2026-01-01T00:00:00Z","VALIDITY_UNTIL":null}`, `{"message_body":"\"id\":{}"}`,
		`null`, `{}`, ` { "id" : "a" , "data_coding" : "gsm7" } `, `{"message_body_base64":"AAE=","message_body_base64":"AAE="}`,
		`{"id":"\u212a"}`, `{"\u212ad":1}`, // KELVIN SIGN folds to k in encoding/json
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var sub messages.Submission
		req := httptest.NewRequest(http.MethodPost, "/api/messages", bytes.NewReader(body))
		err := decode(httptest.NewRecorder(), req, &sub)

		var ref messages.Submission
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if len(body) > MaxBody || len(bytes.TrimSpace(body)) == 0 || textError(body) != nil || decodeOne(body, dec, &ref) != nil {
			if err == nil {
				t.Fatalf("decode accepted %q, which encoding/json refuses", body)
			}
			return
		}
		if string(bytes.TrimSpace(body)) == "null" { // which encoding/json takes for {}
			var e *messages.Error
			if !errors.As(err, &e) || e.Code != messages.CodeInvalidJSON {
				t.Fatalf("decode of %q: %v, want invalid_json", body, err)
			}
			return
		}
		exact := namesExactOnce(t, body, submissionNames)
		var e *messages.Error
		switch {
		case exact && err != nil:
			t.Fatalf("decode refused %q (exact names, each once): %v", body, err)
		case !exact && err == nil:
			t.Fatalf("decode accepted %q: a name in another case or twice", body)
		case err != nil && (!errors.As(err, &e) || (e.Code != messages.CodeUnknownField && e.Code != messages.CodeInvalidJSON)):
			t.Fatalf("decode refused %q with %v, want unknown_field or invalid_json", body, err)
		}
	})
}

// namesExactOnce reads the names of the object body holds (a document
// encoding/json decoded) with the decoder's own tokens, and reports
// whether each is one of names and appears once.
func namesExactOnce(t *testing.T, body []byte, names []string) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		t.Fatalf("%q: %v", body, err)
	}
	if tok != json.Delim('{') {
		return true // null: no names
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		name := tok.(string)
		if seen[name] || !slices.Contains(names, name) {
			return false
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("%q: %v", body, err)
		}
	}
	return true
}

// BenchmarkDecodeSubmit measures decode of a typical submission, and
// exactKeys alone (its share of it).
func BenchmarkDecodeSubmit(b *testing.B) {
	body := []byte(`{"id":"order-12345","source_msisdn":"BANK","destination_msisdn":"+447700900123",` +
		`"message_body":"Your code is 123456. It expires in 10 minutes.","data_coding":"gsm7",` +
		`"validity_until":"2026-05-01T12:00:00Z"}`)
	b.Run("decode", func(b *testing.B) {
		req := httptest.NewRequest(http.MethodPost, "/api/messages", nil)
		w := httptest.NewRecorder()
		b.ReportAllocs()
		for b.Loop() {
			req.Body = io.NopCloser(bytes.NewReader(body))
			var sub messages.Submission
			if err := decode(w, req, &sub); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exactKeys", func(b *testing.B) {
		t := reflect.TypeFor[*messages.Submission]()
		b.ReportAllocs()
		for b.Loop() {
			if err := exactKeys(body, t); err != nil {
				b.Fatal(err)
			}
		}
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

// fuzzFederation posts body to a federation path as peer-a (the gateway
// without RequireClientCert, so the header is trusted; the stub node knows
// every caller). Besides 400 and 413, a body naming another node is 403.
func fuzzFederation(t *testing.T, path string, body []byte, allowed ...int) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set(messages.FederationHeader, peerA)
	return fuzzServe(t, req, body, append(allowed, http.StatusForbidden)...)
}

// fedSeeds are the valid bodies of the federation endpoints and some
// near misses, as the seed corpus of every federation fuzz target.
func fedSeeds(f *testing.F) {
	for _, b := range validBodies() {
		f.Add([]byte(b))
	}
	for _, seed := range []string{
		``, `null`, `[]`, `{}`, `{"node":"peer-b"}`, `{"node":"peer-a","time":"yesterday"}`,
		`{"node":"peer-a","frontends":null}`, `{"node":"peer-a","frontends":["a b"]}`,
		`{"messages":[{}]}`, `{"messages":[null,{"id":"x"}]}`, `{"statuses":[{"id":"m","node":"peer-a","status":"failed","at":"2026-01-01T00:00:00Z","reason":"` + "\xff" + `"}]}`,
		`{"id":"m-1","node":"peer-a","status":"delivered","at":"0001-01-01T00:00:00Z"}`,
		`{"node":"peer-a","time":"2026-03-04T05:06:07Z","status":"stopping","forward_queue_depth":-1}`,
		`{"id":"m-1","source_msisdn":"1","destination_msisdn":"+1","message_body":"\u0000","source_smsc":"a","dest_smsc":"b","frontend":"fe-a"}`,
	} {
		f.Add([]byte(seed))
	}
}

func FuzzFederationHealth(f *testing.F) {
	fedSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzFederation(t, pathHealth, body, http.StatusOK)
		fuzzFederation(t, pathRegistry, body, http.StatusOK)
	})
}

func FuzzFederationForward(f *testing.F) {
	fedSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		// The stub serves fe-a only: another frontend is 422.
		fuzzFederation(t, pathForward, body, http.StatusAccepted, http.StatusUnprocessableEntity)
		rec := fuzzFederation(t, pathForwardBat, body, http.StatusOK)
		if rec.Code != http.StatusOK {
			return
		}
		// One result per message, in order; each either accepted or
		// refused with a code.
		var in messages.ForwardBatch
		var out messages.ForwardBatchReply
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatalf("a body that is not a batch was answered 200: %q", body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Results) != len(in.Messages) {
			t.Fatalf("%d messages answered %q", len(in.Messages), rec.Body.String())
		}
		for i, r := range out.Results {
			if r.ID != in.Messages[i].ID || (r.Error != nil && (r.Error.Code == "" || r.Error.Message == "")) {
				t.Fatalf("result %d = %+v for %+v", i, r, in.Messages[i])
			}
		}
	})
}

func FuzzFederationStatus(f *testing.F) {
	fedSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzFederation(t, pathStatus, body, http.StatusOK)
		fuzzFederation(t, pathStatusBatch, body, http.StatusOK)
	})
}

// FuzzFederationErrorDocument: whatever a peer answers with an error
// status, the client makes a CallError with a sane code and a bounded,
// valid UTF-8 message.
func FuzzFederationErrorDocument(f *testing.F) {
	for _, seed := range []string{
		`{"error":{"code":"unknown_peer","message":"who?"}}`, `{"error":{"code":"Bad Code","message":"x"}}`,
		`{"error":{"code":"x"}}`, `{"error":null}`, `<html>502</html>`, ``, "\xff\xfe", strings.Repeat("a", 2000),
	} {
		f.Add(502, []byte(seed))
		f.Add(403, []byte(seed))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 300 || status > 599 {
			return
		}
		ce := callError(status, body)
		if ce.Status != status || (!codeRE.MatchString(ce.Code) && ce.Code != fmt.Sprintf("http_%d", status)) {
			t.Fatalf("callError(%d, %q) = %+v", status, body, ce)
		}
		if ce.Message == "" || !utf8.ValidString(ce.Message) || len(ce.Message) > maxCallMessage+len("...") {
			t.Fatalf("callError(%d, %q): message %q", status, body, ce.Message)
		}
	})
}

// FuzzTextError: the strict decoder's text scan never panics, refuses
// every body that is not UTF-8, and lets through no JSON whose decoding
// would invent a U+FFFD (a lone surrogate escape): what it passes decodes
// to the same text a strict reader would see.
func FuzzTextError(f *testing.F) {
	for _, seed := range []string{
		`{"message_body":"hi"}`, `{"message_body":"\ud83d\ude00"}`, `{"message_body":"\ud800"}`,
		`{"message_body":"\udc00x"}`, `{"message_body":"a\\ud800"}`, `{"message_body":"\ud800\u0041"}`,
		"{\"message_body\":\"\xff\xfe\"}", `{"message_body":"\ufffd"}`, `{"message_body":"\u00e9\u20ac"}`, `"\`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		err := textError(raw)
		if !utf8.Valid(raw) {
			if err == nil {
				t.Fatalf("%q: invalid UTF-8 passed", raw)
			}
			return
		}
		var s string
		if err != nil || json.Unmarshal(raw, &s) != nil {
			return
		}
		// The decoder invented a U+FFFD only from a lone surrogate; the
		// input spelled every U+FFFD the text holds.
		spelled := strings.Count(string(raw), "\ufffd") + strings.Count(strings.ToLower(string(raw)), `\ufffd`)
		if n := strings.Count(s, "\ufffd"); n > spelled {
			t.Fatalf("%q passed, and decodes to %q with %d U+FFFD the input did not spell", raw, s, n)
		}
	})
}

// FuzzAuditQuery: any query string of GET /api/audit is a 200 or a 400
// error document, and what the parser lets through is a query the store
// accepts (its Validate finds nothing).
func FuzzAuditQuery(f *testing.F) {
	for _, seed := range []string{
		"", "actor=ops", "action=message.resubmit&since=2026-01-01T00:00:00Z&until=2026-02-01T00:00:00Z",
		"limit=1000&cursor=17", "limit=0", "cursor=-1", "action=route.rename", "who=me", "since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z",
		"actor=%00", "actor=a&actor=b", "since=2026-01-01T00:00:00 01:00", "%zz",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		fuzzQuery(t, raw, "/api/audit", auditQueryOf)
	})
}

// fuzzQuery checks one fuzzed query string raw of the listing at path:
// one that does not parse is answered 400 (net/http hands it to the
// handler as it came); parse refuses the rest with a 400 of the API, or
// lets through a query the store accepts, which the server answers 200.
func fuzzQuery[Q interface{ Validate() error }](t *testing.T, raw, path string, parse func(url.Values) (Q, error)) {
	t.Helper()
	v, err := url.ParseQuery(raw)
	if err != nil {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.URL.RawQuery = raw
		fuzzServe(t, req, nil)
		return
	}
	q, err := parse(v)
	if err != nil {
		var e *messages.Error
		if !errors.As(err, &e) || (e.Code != messages.CodeInvalidRequest && e.Code != messages.CodeUnknownField) {
			t.Fatalf("%q: %v is not a 400 of the API", raw, err)
		}
		return
	}
	if err := q.Validate(); err != nil {
		t.Fatalf("%q: the parser let through a query the store refuses: %v", raw, err)
	}
	req := httptest.NewRequest(http.MethodGet, path+"?"+v.Encode(), nil)
	fuzzServe(t, req, nil, http.StatusOK)
}

// FuzzListQuery: any query string of GET /api/messages is a 200 or a 400
// error document, and what the parser lets through is a query the store
// accepts (its Validate finds nothing). A number key that is not its own
// messages.NumberKey ("+ +5" is " +5") once passed the parser, and the
// store's refusal was answered 503.
func FuzzListQuery(f *testing.F) {
	for _, seed := range []string{
		"", "state=failed&limit=10", "destination=%2B4477*", "source=ACME*", "source=+15550100",
		"since=2026-01-01T00:00:00Z&until=2026-02-01T00:00:00Z&cursor=5@1700000000000000", "cursor=17",
		"source=%2B%20%2B5", "source=%2B%20%2BACME*", "source=%20%2B%20x", "destination=%2B%2B44", "source=%2B%20*",
		"state=failed&state=delivered", "frontend=-x", "peer=a&peer=b", "limit=0", "cursor=-1", "%zz",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		fuzzQuery(t, raw, "/api/messages", func(v url.Values) (persistence.ListQuery, error) { return listQueryOf(v, "") })
	})
}
