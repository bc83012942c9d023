package switchboard_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
)

// snapshot is everything a rejected request must leave unchanged.
func (h *harness) snapshot() string {
	h.t.Helper()
	var msgs struct{ Messages []messages.Message }
	h.must(200, "GET", "/api/messages?limit=1000", nil, &msgs)
	var routes, fes json.RawMessage
	h.must(200, "GET", "/api/routes", nil, &routes)
	h.must(200, "GET", "/api/frontends", nil, &fes)
	type row struct {
		ID       string
		State    messages.State
		Attempts int
		History  int
	}
	var rows []row
	for _, m := range msgs.Messages {
		full := h.message(m.ID)
		rows = append(rows, row{m.ID, m.State, m.Attempts, len(full.History)})
	}
	data, _ := json.Marshal(map[string]any{"messages": rows, "routes": routes, "frontends": fes})
	return string(data)
}

func TestBadInputIsRejectedAndStoresNothing(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("pullfe", "44")
	wh := newWebhook(t)
	h.webhookFrontend("hookfe", wh.srv.URL, "33")
	delivered := h.submit("kept", "441")
	h.poll("pullfe", 1, 1000, 30000)
	h.ack("pullfe", messages.DeliveryResult{ID: delivered, Status: messages.Delivered})
	before := h.snapshot()

	valid := func(mut func(map[string]any)) map[string]any {
		m := map[string]any{"source_msisdn": "1555", "destination_msisdn": "4412", "message_body": "hi"}
		mut(m)
		return m
	}
	big := `{"source_msisdn":"1","destination_msisdn":"441","message_body":"` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"malformed json", "POST", "/api/messages", `{"source_msisdn": "1",`, 400, "invalid_json"},
		{"not an object", "POST", "/api/messages", `[1,2]`, 400, "invalid_json"},
		{"wrong type", "POST", "/api/messages", `{"source_msisdn": 5, "destination_msisdn": "441", "message_body": "x"}`, 400, "invalid_json"},
		{"trailing garbage", "POST", "/api/messages", `{"source_msisdn":"1","destination_msisdn":"441","message_body":"x"} {}`, 400, "invalid_json"},
		{"empty body", "POST", "/api/messages", nil, 400, "invalid_json"},
		{"missing source", "POST", "/api/messages", valid(func(m map[string]any) { delete(m, "source_msisdn") }), 400, "invalid_request"},
		{"missing destination", "POST", "/api/messages", valid(func(m map[string]any) { delete(m, "destination_msisdn") }), 400, "invalid_request"},
		{"missing body", "POST", "/api/messages", valid(func(m map[string]any) { delete(m, "message_body") }), 400, "invalid_request"},
		{"bad destination", "POST", "/api/messages", valid(func(m map[string]any) { m["destination_msisdn"] = "44-12" }), 400, "invalid_request"},
		{"bad id", "POST", "/api/messages", valid(func(m map[string]any) { m["id"] = "has space" }), 400, "invalid_request"},
		{"no route", "POST", "/api/messages", valid(func(m map[string]any) { m["destination_msisdn"] = "9912" }), 422, "no_route"},
		{"oversize body", "POST", "/api/messages", big, 413, "body_too_large"},
		{"unknown message", "GET", "/api/messages/nope", nil, 404, "not_found"},
		{"bad state filter", "GET", "/api/messages?state=lost", nil, 400, "invalid_request"},
		{"bad limit", "GET", "/api/messages?limit=0", nil, 400, "invalid_request"},
		{"bad cursor", "GET", "/api/messages?cursor=abc", nil, 400, "invalid_request"},
		{"search: bad destination", "GET", "/api/messages?destination=44-12", nil, 400, "invalid_request"},
		{"search: only a star", "GET", "/api/messages?destination=*", nil, 400, "invalid_request"},
		{"search: source too long", "GET", "/api/messages?source=" + strings.Repeat("x", 33), nil, 400, "invalid_request"},
		{"search: bad time", "GET", "/api/messages?since=yesterday", nil, 400, "invalid_request"},
		{"search: since after until", "GET", "/api/messages?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z", nil, 400, "invalid_request"},
		{"search: bad frontend", "GET", "/api/messages?frontend=-x", nil, 400, "invalid_request"},
		{"search: unknown parameter", "GET", "/api/messages?to=44", nil, 400, "unknown_field"},
		{"search: a seq cursor for a time range", "GET", "/api/messages?since=2026-01-01T00:00:00Z&cursor=5", nil, 400, "invalid_request"},
		{"search: a time cursor without one", "GET", "/api/messages?cursor=5@1700000000000000", nil, 400, "invalid_request"},
		// A repeated parameter would otherwise be read as its first value
		// in silence (GET /api/audit refused it already).
		{"search: a parameter given twice", "GET", "/api/messages?state=failed&state=delivered", nil, 400, "invalid_request"},
		{"search: a number given twice", "GET", "/api/messages?destination=441&destination=442", nil, 400, "invalid_request"},
		{"audit: a parameter given twice", "GET", "/api/audit?action=route.put&action=route.delete", nil, 400, "invalid_request"},
		// A query that does not parse was read without the pairs it could
		// not: answered 200 without its filter (every message for
		// state=delivered) or from the newest page (a cursor lost).
		{"search: a ';' between parameters", "GET", "/api/messages?state=delivered;limit=5", nil, 400, "invalid_request"},
		{"search: a bad %-escape", "GET", "/api/messages?state=delivered&cursor=%zz", nil, 400, "invalid_request"},
		{"audit: a ';' between parameters", "GET", "/api/audit?action=route.put;actor=bob", nil, 400, "invalid_request"},
		{"resubmit unknown", "POST", "/api/messages/nope/resubmit", nil, 404, "not_found"},
		{"resubmit delivered", "POST", "/api/messages/kept/resubmit", nil, 409, "invalid_state"},
		{"bulk resubmit bad state", "POST", "/api/messages/resubmit", `{"state":"pending"}`, 400, "invalid_request"},
		{"route to unknown frontend", "PUT", "/api/routes/55", `{"frontend":"ghost"}`, 422, "unknown_frontend"},
		{"route without frontend", "PUT", "/api/routes/55", `{}`, 400, "invalid_request"},
		{"bad route prefix", "PUT", "/api/routes/5a", `{"frontend":"pullfe"}`, 400, "invalid_request"},
		{"delete unknown route", "DELETE", "/api/routes/77", nil, 404, "not_found"},
		{"frontend bad mode", "PUT", "/api/frontends/x", `{"mode":"carrier-pigeon"}`, 400, "invalid_request"},
		{"frontend actor mode over http", "PUT", "/api/frontends/x", `{"mode":"actor"}`, 400, "invalid_request"},
		{"webhook without url", "PUT", "/api/frontends/x", `{"mode":"webhook"}`, 400, "invalid_request"},
		{"webhook bad url", "PUT", "/api/frontends/x", `{"mode":"webhook","url":"ftp://x"}`, 400, "invalid_request"},
		{"frontend bad name", "PUT", "/api/frontends/-x", `{"mode":"pull"}`, 400, "invalid_request"},
		{"delete frontend in use", "DELETE", "/api/frontends/pullfe", nil, 409, "frontend_in_use"},
		{"delete unknown frontend", "DELETE", "/api/frontends/ghost", nil, 404, "not_found"},
		{"poll unknown frontend", "POST", "/api/frontends/ghost/poll", `{}`, 404, "not_found"},
		{"poll webhook frontend", "POST", "/api/frontends/hookfe/poll", `{}`, 409, "not_pull_frontend"},
		{"poll bad max", "POST", "/api/frontends/pullfe/poll", `{"max":0}`, 400, "invalid_request"},
		{"poll bad wait", "POST", "/api/frontends/pullfe/poll", `{"wait_ms":600000}`, 400, "invalid_request"},
		{"poll bad lease", "POST", "/api/frontends/pullfe/poll", `{"lease_ms":5}`, 400, "invalid_request"},
		// Milliseconds whose nanoseconds wrap around past 2^63 into the range
		// (to 0.45 ms and 1.0004 s): refused as the numbers they are.
		{"poll wait overflowing a duration", "POST", "/api/frontends/pullfe/poll", `{"wait_ms":18446744073710}`, 400, "invalid_request"},
		{"poll lease overflowing a duration", "POST", "/api/frontends/pullfe/poll", `{"lease_ms":18446744074710}`, 400, "invalid_request"},
		{"poll largest wait", "POST", "/api/frontends/pullfe/poll", `{"wait_ms":9223372036854775807}`, 400, "invalid_request"},
		{"ack unknown frontend", "POST", "/api/frontends/ghost/ack", `{"results":[{"id":"kept","status":"delivered"}]}`, 404, "not_found"},
		{"ack bad status", "POST", "/api/frontends/pullfe/ack", `{"results":[{"id":"kept","status":"maybe"}]}`, 400, "invalid_request"},
		{"ack without id", "POST", "/api/frontends/pullfe/ack", `{"results":[{"status":"delivered"}]}`, 400, "invalid_request"},
		{"ack without results", "POST", "/api/frontends/pullfe/ack", `{}`, 400, "invalid_request"},
		{"ack reason with a control character", "POST", "/api/frontends/pullfe/ack", `{"results":[{"id":"kept","status":"failed","reason":"bad\u0007bell"}]}`, 400, "invalid_request"},

		// Strict intake: unknown fields, text a decoder would change, the
		// optional fields' rules, an id reused with other content.
		{"unknown field (typo of id)", "POST", "/api/messages", valid(func(m map[string]any) { m["msg_id"] = "retry-me" }), 400, "unknown_field"},
		{"unknown field priority", "POST", "/api/messages", valid(func(m map[string]any) { m["priority"] = 1 }), 400, "unknown_field"},
		{"unknown field in a route", "PUT", "/api/routes/55", `{"frontend":"pullfe","weight":2}`, 400, "unknown_field"},
		{"unknown field in a frontend", "PUT", "/api/frontends/x", `{"mode":"pull","password":"s"}`, 400, "unknown_field"},
		{"unknown field in a poll", "POST", "/api/frontends/pullfe/poll", `{"max":1,"timeout_ms":5}`, 400, "unknown_field"},
		{"unknown field in an ack", "POST", "/api/frontends/pullfe/ack", `{"results":[{"id":"kept","status":"delivered","code":0}]}`, 400, "unknown_field"},
		{"unknown field in a bulk resubmit", "POST", "/api/messages/resubmit", `{"state":"failed","limit":5}`, 400, "unknown_field"},
		// Names are exact and appear once: encoding/json alone would fold
		// case ("ID" would fill id) and keep the last of two.
		{"a field name in another case", "POST", "/api/messages", `{"id":"x2","source_msisdn":"1555","destination_msisdn":"4412","message_body":"hi","ID":"zzz"}`, 400, "unknown_field"},
		{"a field name in another case alone", "POST", "/api/messages", `{"Source_MSISDN":"1555","destination_msisdn":"4412","message_body":"hi"}`, 400, "unknown_field"},
		{"an optional field in another case", "POST", "/api/messages", `{"source_msisdn":"1555","destination_msisdn":"4412","message_body":"hi","Data_Coding":"ucs2"}`, 400, "unknown_field"},
		{"a field named twice", "POST", "/api/messages", `{"id":"x3","source_msisdn":"1555","destination_msisdn":"4412","message_body":"hi","id":"x4"}`, 400, "invalid_json"},
		{"a field named twice, once escaped", "POST", "/api/messages", `{"id":"x3","source_msisdn":"1555","destination_msisdn":"4412","message_body":"hi","\u0069d":"x4"}`, 400, "invalid_json"},
		{"a route's field in another case", "PUT", "/api/routes/55", `{"Frontend":"pullfe"}`, 400, "unknown_field"},
		{"a frontend's field named twice", "PUT", "/api/frontends/x", `{"mode":"pull","mode":"webhook"}`, 400, "invalid_json"},
		{"a poll's field in another case", "POST", "/api/frontends/pullfe/poll", `{"MAX":1}`, 400, "unknown_field"},
		{"an ack's verdict field in another case", "POST", "/api/frontends/pullfe/ack", `{"results":[{"id":"kept","Status":"failed"}]}`, 400, "unknown_field"},
		{"an ack's verdict field named twice", "POST", "/api/frontends/pullfe/ack", `{"results":[{"id":"kept","status":"delivered"},{"id":"kept","status":"delivered","status":"failed"}]}`, 400, "invalid_json"},
		{"a bulk resubmit's field in another case", "POST", "/api/messages/resubmit", `{"STATE":"failed"}`, 400, "unknown_field"},
		{"invalid utf-8 in the body", "POST", "/api/messages", []byte("{\"source_msisdn\":\"1\",\"destination_msisdn\":\"441\",\"message_body\":\"\xff\xfe\"}"), 400, "invalid_request"},
		{"lone surrogate escape", "POST", "/api/messages", `{"source_msisdn":"1","destination_msisdn":"441","message_body":"a\ud800b"}`, 400, "invalid_request"},
		{"lone low surrogate escape", "POST", "/api/messages", `{"source_msisdn":"1","destination_msisdn":"441","message_body":"\udc00"}`, 400, "invalid_request"},
		{"NUL in the body", "POST", "/api/messages", valid(func(m map[string]any) { m["message_body"] = "a\x00b" }), 400, "invalid_request"},
		{"escape character in the body", "POST", "/api/messages", valid(func(m map[string]any) { m["message_body"] = "\x1b[31mred" }), 400, "invalid_request"},
		{"tab in the body", "POST", "/api/messages", valid(func(m map[string]any) { m["message_body"] = "a\tb" }), 400, "invalid_request"},
		{"C1 control in the body", "POST", "/api/messages", valid(func(m map[string]any) { m["message_body"] = "a\u0085b" }), 400, "invalid_request"},
		{"control character in the source", "POST", "/api/messages", valid(func(m map[string]any) { m["source_msisdn"] = "AC\nME" }), 400, "invalid_request"},
		{"unknown data coding", "POST", "/api/messages", valid(func(m map[string]any) { m["data_coding"] = "latin1" }), 400, "invalid_request"},
		{"gsm7 text outside the alphabet", "POST", "/api/messages", valid(func(m map[string]any) { m["data_coding"], m["message_body"] = "gsm7", "emoji 🙂" }), 400, "invalid_request"},
		{"gsm7 backtick", "POST", "/api/messages", valid(func(m map[string]any) { m["data_coding"], m["message_body"] = "gsm7", "`x`" }), 400, "invalid_request"},
		{"binary with text", "POST", "/api/messages", valid(func(m map[string]any) { m["data_coding"], m["message_body_base64"] = "binary", "AAE=" }), 400, "invalid_request"},
		{"binary without bytes", "POST", "/api/messages", valid(func(m map[string]any) { m["data_coding"] = "binary"; delete(m, "message_body") }), 400, "invalid_request"},
		{"bytes without binary coding", "POST", "/api/messages", valid(func(m map[string]any) { m["message_body_base64"] = "AAE="; delete(m, "message_body") }), 400, "invalid_request"},
		{"bad base64", "POST", "/api/messages", valid(func(m map[string]any) {
			m["data_coding"], m["message_body_base64"] = "binary", "not base64!"
			delete(m, "message_body")
		}), 400, "invalid_request"},
		{"validity in the past", "POST", "/api/messages", valid(func(m map[string]any) { m["validity_until"] = "2001-01-01T00:00:00Z" }), 400, "invalid_request"},
		{"validity beyond the node's", "POST", "/api/messages", valid(func(m map[string]any) {
			m["validity_until"] = time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
		}), 400, "invalid_request"},
		{"validity not RFC 3339", "POST", "/api/messages", valid(func(m map[string]any) { m["validity_until"] = "tomorrow" }), 400, "invalid_request"},
		{"scheduled after expiry", "POST", "/api/messages", valid(func(m map[string]any) { m["deliver_after"] = time.Now().Add(25 * time.Hour).UTC().Format(time.RFC3339) }), 400, "invalid_request"},
		{"scheduled after its validity", "POST", "/api/messages", valid(func(m map[string]any) {
			m["validity_until"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
			m["deliver_after"] = time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
		}), 400, "invalid_request"},
		{"id reused with another body", "POST", "/api/messages", map[string]string{"id": "kept", "source_msisdn": "15550001", "destination_msisdn": "441", "message_body": "another body"}, 409, "id_conflict"},
		{"id reused with another destination", "POST", "/api/messages", map[string]string{"id": "kept", "source_msisdn": "15550001", "destination_msisdn": "4412", "message_body": "hello kept"}, 409, "id_conflict"},
		{"id reused with another source", "POST", "/api/messages", map[string]string{"id": "kept", "source_msisdn": "15550002", "destination_msisdn": "441", "message_body": "hello kept"}, 409, "id_conflict"},
		{"id reused with a data coding", "POST", "/api/messages", map[string]string{"id": "kept", "source_msisdn": "15550001", "destination_msisdn": "441", "message_body": "hello kept", "data_coding": "ucs2"}, 409, "id_conflict"},
		{"id reused with a message class", "POST", "/api/messages", map[string]any{"id": "kept", "source_msisdn": "15550001", "destination_msisdn": "441", "message_body": "hello kept", "message_class": 0}, 409, "id_conflict"},
		{"message class out of range", "POST", "/api/messages", valid(func(m map[string]any) { m["message_class"] = 4 }), 400, "invalid_request"},
		{"unknown path", "GET", "/api/nothing-here", nil, 404, "not_found"},
		{"wrong method", "DELETE", "/api/messages", nil, 405, "method_not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			h.apiError(c.status, c.code, c.method, c.path, c.body)
			if after := h.snapshot(); after != before {
				t.Fatalf("a rejected request changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestBadBytesInPathsAndAckIDsAreNotUnavailable: an id, prefix or
// frontend name holding NUL or a byte that is not UTF-8 (%-escaped in the
// path, or \u0000 in an ack's id) is the request's fault: answered as the
// docs say (404 for what does not exist, 400 for a malformed verdict),
// never 503 unavailable, which tells the caller to repeat the same
// request. On Postgres, which refuses such text, it was 503 (the ack's
// message even said "ack again": repeated, its valid verdicts were never
// recorded). The path is sent as written: the API client would escape
// its '%'.
func TestBadBytesInPathsAndAckIDsAreNotUnavailable(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		h.pullFrontend("pullfe", "44")
		h.submit("kept", "441")
		if got := h.poll("pullfe", 1, 1000, 30000); len(got) != 1 {
			t.Fatalf("polled %d messages, want 1", len(got))
		}
		raw := func(method, path, body string) (int, string) {
			t.Helper()
			req, err := http.NewRequest(method, h.base+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			var doc struct{ Error struct{ Code string } }
			_ = json.Unmarshal(b, &doc)
			return res.StatusCode, doc.Error.Code + " " + strings.TrimSpace(string(b))
		}
		for _, c := range []struct {
			method, path, body string
			status             int
		}{
			{"GET", "/api/messages/a%00b", "", 404},
			{"GET", "/api/messages/a%ffb", "", 404},
			{"POST", "/api/messages/a%00b/resubmit", "", 404},
			{"POST", "/api/messages/a%ffb/resubmit", "", 404},
			{"DELETE", "/api/routes/4%004", "", 404},
			{"DELETE", "/api/routes/4%ff", "", 404},
			{"DELETE", "/api/frontends/a%00b", "", 404},
			{"DELETE", "/api/frontends/a%ffb", "", 404},
			{"POST", "/api/frontends/pullfe/ack", `{"results":[{"id":"kept","status":"delivered"},{"id":"a\u0000b","status":"delivered"}]}`, 400},
		} {
			if status, doc := raw(c.method, c.path, c.body); status != c.status {
				t.Errorf("%s %s %s: %d %s, want %d", c.method, c.path, c.body, status, doc, c.status)
			}
		}
	})
}

// TestCrossSiteWritesAreRefused: a web page of another origin can make a
// browser POST a text/plain or form body to the node without a CORS
// preflight, and a node without credentials would do what it asks. So a
// browser's write (POST, PUT, DELETE) whose Sec-Fetch-Site is cross-site or
// same-site, or without one an Origin that is not the node, is refused
// with 403 cross_origin and changes nothing. What browsers send from the
// node's own UI (Sec-Fetch-Site same-origin; its Referrer-Policy
// no-referrer makes Origin null), an Origin naming the node, and requests
// without either header (curl -d, scripts) pass, whatever their content
// type.
func TestCrossSiteWritesAreRefused(t *testing.T) {
	h := startNode(t, testConfig(t)) // no credentials: the page would act as an admin
	h.pullFrontend("fe", "44")
	h.submit("dead", "441")
	for _, m := range h.poll("fe", 10, 1000, 60000) {
		h.ack("fe", messages.DeliveryResult{ID: m.ID, Status: messages.Failed, Reason: "barred", Attempt: m.Attempt})
	}
	h.waitState("dead", messages.StateFailed)
	leased := h.submit("leased", "442")
	if got := h.poll("fe", 10, 1000, 60000); len(got) != 1 || got[0].ID != leased {
		t.Fatalf("poll: %+v", got)
	}
	before := h.snapshot()

	send := func(t *testing.T, method, path, ctype, body string, headers map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, h.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		res, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var doc struct{ Error struct{ Code string } }
		_ = json.NewDecoder(res.Body).Decode(&doc)
		return res.StatusCode, doc.Error.Code
	}
	crossSite := map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}
	sameSite := map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "https://evil.example.net"}
	foreignOrigin := map[string]string{"Origin": "https://evil.example"} // an older browser: no Sec-Fetch-Site
	submit := func(id string) string {
		return `{"id":"` + id + `","source_msisdn":"1555","destination_msisdn":"441","message_body":"hi"}`
	}
	for _, c := range []struct {
		name, method, path, ctype, body string
		headers                         map[string]string
	}{
		{"submit as text/plain", "POST", "/api/messages", "text/plain", submit("csrf-1"), crossSite},
		{"submit as a form", "POST", "/api/messages", "application/x-www-form-urlencoded", submit("csrf-2"), foreignOrigin},
		{"bulk resubmit", "POST", "/api/messages/resubmit", "text/plain", `{"state":"failed"}`, crossSite},
		{"bulk resubmit from a sibling site", "POST", "/api/messages/resubmit", "text/plain", `{"state":"failed"}`, sameSite},
		{"resubmit", "POST", "/api/messages/dead/resubmit", "", "", foreignOrigin},
		{"ack", "POST", "/api/frontends/fe/ack", "text/plain", `{"results":[{"id":"leased","status":"delivered"}]}`, crossSite},
		{"ack, old browser", "POST", "/api/frontends/fe/ack", "text/plain", `{"results":[{"id":"leased","status":"delivered"}]}`, foreignOrigin},
		{"route", "PUT", "/api/routes/55", "text/plain", `{"frontend":"fe"}`, crossSite},
		{"route delete", "DELETE", "/api/routes/44", "", "", crossSite},
		{"frontend", "PUT", "/api/frontends/evil", "text/plain", `{"mode":"webhook","url":"https://evil.example/hook"}`, foreignOrigin},
	} {
		t.Run(c.name, func(t *testing.T) {
			if status, code := send(t, c.method, c.path, c.ctype, c.body, c.headers); status != 403 || code != messages.CodeCrossOrigin {
				t.Errorf("%s %s with %v: %d %q, want 403 %s", c.method, c.path, c.headers, status, code, messages.CodeCrossOrigin)
			}
			h.t = t
			if after := h.snapshot(); after != before {
				t.Fatalf("a cross-origin request changed the node:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	h.t = t
	// Reads are safe methods: a page cannot read the answer anyway (CORS).
	if status, _ := send(t, "GET", "/api/status", "", "", crossSite); status != 200 {
		t.Errorf("a cross-site GET: %d, want 200", status)
	}
	for i, headers := range []map[string]string{
		{"Sec-Fetch-Site": "same-origin", "Origin": "null"}, // the node's UI (Referrer-Policy no-referrer)
		{"Sec-Fetch-Site": "none"},                          // typed by the user, a bookmark
		{"Origin": h.base},                                  // an older browser on the node's own page
		{},                                                  // curl -d, a script
	} {
		id := fmt.Sprintf("ok-%d", i)
		if status, code := send(t, "POST", "/api/messages", "application/x-www-form-urlencoded", submit(id), headers); status != 202 {
			t.Errorf("submit with %v: %d %s, want 202", headers, status, code)
		}
	}
	if status, code := send(t, "POST", "/api/frontends/fe/ack", "", `{"results":[{"id":"leased","status":"delivered"}]}`,
		map[string]string{"Sec-Fetch-Site": "same-origin"}); status != 200 {
		t.Errorf("a same-origin ack: %d %s", status, code)
	}
	h.waitState(leased, messages.StateDelivered)
}

func TestAPIToken(t *testing.T) {
	cfg := testConfig(t)
	cfg.APIToken = "s3cret-0123456789"
	h := startNode(t, cfg)
	h.pullFrontend("fe1", "44")
	before := h.snapshot()
	for _, tok := range []string{"", "wrong", "s3cret-but-longer"} {
		h.token = tok
		h.apiError(401, "unauthorized", "POST", "/api/messages", `{"source_msisdn":"1","destination_msisdn":"441","message_body":"x"}`)
		h.apiError(401, "unauthorized", "GET", "/api/status", nil)
		h.apiError(401, "unauthorized", "PUT", "/api/routes/55", `{"frontend":"fe1"}`)
	}
	// Health endpoints stay open for probes.
	if status, _ := h.do("GET", "/healthz", nil); status != 200 {
		t.Fatalf("healthz without token: %d", status)
	}
	if status, _ := h.do("GET", "/readyz", nil); status != 200 {
		t.Fatalf("readyz without token: %d", status)
	}
	h.token = cfg.APIToken
	if after := h.snapshot(); after != before {
		t.Fatalf("rejected requests changed the store")
	}
	h.submit("", "441")
}

func TestHealthAndStatus(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	h.submit("s1", "441")
	st := h.status()
	if st.Node != "test-node" || st.Store != "sqlite" || st.Counts["pending"] < 0 || len(st.Frontends) != 1 {
		t.Fatalf("status %+v", st)
	}
	for _, s := range messages.AllStates {
		if _, ok := st.Counts[string(s)]; !ok {
			t.Fatalf("status counts lack %s: %+v", s, st.Counts)
		}
	}
	h.must(200, "GET", "/healthz", nil, nil)
	h.must(200, "GET", "/readyz", nil, nil)
	if status, body := h.do("GET", "/", nil); status != 200 || !strings.Contains(string(body), "Switchboard") {
		t.Fatalf("web UI: %d %.80s", status, body)
	}
}

func TestMetricsAreCompleteAndLintClean(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	id := h.submit("", "441")
	h.poll("fe1", 1, 2000, 30000)
	h.ack("fe1", messages.DeliveryResult{ID: id, Status: messages.Delivered})

	problems, err := testutil.GatherAndLint(h.node.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	text := scrape(t, h)
	for _, want := range []string{
		// The store's gauges name the site (docs/metrics.md).
		`switchboard_messages{node="test-node",state="delivered"} 1`,
		`switchboard_messages{node="test-node",state="forward_failed"} 0`,
		`switchboard_outbox_depth{node="test-node"} 0`,
		`switchboard_dlq_depth{node="test-node"} 0`,
		`switchboard_outbox_oldest_age_seconds{node="test-node"} 0`,
		`switchboard_delivery_dispositions_total{frontend="fe1",outcome="delivered"} 1`,
		`switchboard_actor_messages_total{kind="intake"}`,
		`switchboard_actor_receive_seconds_bucket{kind="delivery"`,
		`switchboard_actor_mailbox_depth{kind="frontends"}`,
		`switchboard_actor_restarts_total{kind="intake"} 0`,
		"go_goroutines",
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestMessageNotFoundQuotesTheID: the not-found answers for a message id
// differed: GET /api/messages/nope said no message with id nope, its
// resubmit no message with id "nope" (quoted, as the API's messages name
// what the caller gave). Each now quotes it, and a client asking for
// another client's message gets the very answer of a missing one.
func TestMessageNotFoundQuotesTheID(t *testing.T) {
	cfg := testConfig(t)
	cfg.Credentials = filepath.Join(cfg.DataDir, "credentials.json")
	rootTok, rootHash := auth.NewToken()
	shopTok, shopHash := auth.NewToken()
	writeCredentials(t, cfg.Credentials, auth.File{Credentials: []messages.Credential{
		{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash},
		{Name: "shop", Role: messages.RoleClient, TokenHash: shopHash},
	}})
	h := startNode(t, cfg)
	h.token = rootTok
	h.pullFrontend("pf", "44")
	h.submit("theirs", "441")
	for _, c := range []struct {
		as, method, path, want string
	}{
		{rootTok, "GET", "/api/messages/nope", `no message with id "nope"`},
		{rootTok, "POST", "/api/messages/nope/resubmit", `no message with id "nope"`},
		{shopTok, "GET", "/api/messages/nope", `no message with id "nope"`},
		{shopTok, "GET", "/api/messages/theirs", `no message with id "theirs"`},
	} {
		if got := h.as(c.as).apiError(404, messages.CodeNotFound, c.method, c.path, nil); got != c.want {
			t.Errorf("%s %s: message %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

// TestFrontendNamesOfOneBusConsumerAreRefused: "a.b" and "a_b_108bf50c"
// are valid frontend names that map to one delivery bus consumer
// (bus.ConsumerName); both were taken, and on a site with the bus each
// frontend's worker fetched the other's work while its own piled up. The
// second is refused, naming the first, and nothing is stored.
func TestFrontendNamesOfOneBusConsumerAreRefused(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.must(200, "PUT", "/api/frontends/a.b", map[string]string{"mode": "pull"}, nil)
	status, raw := h.do("PUT", "/api/frontends/a_b_108bf50c", map[string]string{"mode": "pull"})
	body := string(raw)
	if status != http.StatusBadRequest || !strings.Contains(body, `frontend name \"a_b_108bf50c\" would share its delivery bus consumer`) || !strings.Contains(body, `\"a.b\"`) {
		t.Fatalf("PUT of a frontend whose bus consumer is a.b's: %d %s, want 400 naming a.b", status, body)
	}
	var list struct{ Frontends []messages.Frontend }
	h.must(200, "GET", "/api/frontends", nil, &list)
	for _, f := range list.Frontends {
		if f.Name == "a_b_108bf50c" {
			t.Errorf("the refused frontend was stored: %+v", list.Frontends)
		}
	}
}
