package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

// seen is one request as the server got it.
type seen struct {
	method, uri, auth, contentType, body string
}

// server answers every request with status and body, and records it.
func server(t *testing.T, status int, body string) (*Client, *[]seen) {
	t.Helper()
	var got []seen
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		got = append(got, seen{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(data)})
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := NewURL(srv.URL+"/prefix/", Config{Token: "tok", HTTP: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return c, &got
}

func TestSendSendsJSONWithTheToken(t *testing.T) {
	c, got := server(t, 200, `{"id":"m1","state":"pending"}`)
	ctx := context.Background()
	a, err := c.Submit(ctx, messages.Submission{ID: "m1", SourceMSISDN: "1", DestinationMSISDN: "2", Body: "hi"})
	if err != nil || a.ID != "m1" || a.State != messages.StatePending {
		t.Fatalf("Submit: %+v, %v", a, err)
	}
	if _, err := c.Submit(ctx, json.RawMessage(`{"raw":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "/api/messages?limit=2", url.Values{"cursor": {"c 1"}}, nil); err != nil {
		t.Fatal(err)
	}
	want := []seen{
		{"POST", "/prefix/api/messages", "Bearer tok", "application/json",
			`{"id":"m1","source_msisdn":"1","destination_msisdn":"2","message_body":"hi"}`},
		{"POST", "/prefix/api/messages", "Bearer tok", "application/json", `{"raw":true}`},
		{"GET", "/prefix/api/messages?limit=2&cursor=c+1", "Bearer tok", "", ""},
	}
	if len(*got) != len(want) {
		t.Fatalf("requests %+v, want %+v", *got, want)
	}
	for i := range want {
		if (*got)[i] != want[i] {
			t.Errorf("request %d: %+v, want %+v", i, (*got)[i], want[i])
		}
	}
}

func TestPollLeavesTheLeaseToTheNode(t *testing.T) {
	c, got := server(t, 200, `{"messages":[{"id":"a","attempt":2}]}`)
	ms, err := c.Poll(context.Background(), "fe", 10, 500, 0)
	if err != nil || len(ms) != 1 || ms[0].ID != "a" || ms[0].Attempt != 2 {
		t.Fatalf("Poll: %+v, %v", ms, err)
	}
	if r := (*got)[0]; r.uri != "/prefix/api/frontends/fe/poll" || r.body != `{"max":10,"wait_ms":500}` {
		t.Fatalf("poll request %+v", r)
	}
}

func TestErrorDocumentIsAnError(t *testing.T) {
	c, _ := server(t, 422, `{"error":{"code":"no_route","message":"no route for 99"}}`)
	_, err := c.Message(context.Background(), "x")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err %v (%T), want an *Error", err, err)
	}
	if e.Status != 422 || e.Code != "no_route" || e.Message != "no route for 99" || e.Method != "GET" || !strings.HasSuffix(e.URL, "/prefix/api/messages/x") {
		t.Fatalf("error %+v", e)
	}
	if err.Error() != "no_route: no route for 99" {
		t.Fatalf("Error() %q", err.Error())
	}
	if StatusOf(err) != 422 || CodeOf(err) != "no_route" {
		t.Fatalf("StatusOf %d, CodeOf %q", StatusOf(err), CodeOf(err))
	}
}

func TestOtherAnswerIsQuoted(t *testing.T) {
	c, _ := server(t, 502, "bad gateway\x1b[31m\n")
	_, err := c.Status(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Status != 502 || e.Code != "" {
		t.Fatalf("err %v, want an *Error of 502 without a code", err)
	}
	if e.Message != `"bad gateway\x1b[31m"` {
		t.Fatalf("message %q: control characters must be quoted", e.Message)
	}
	if !strings.HasPrefix(err.Error(), "HTTP 502 Bad Gateway (not a Switchboard error document): GET ") {
		t.Fatalf("Error() %q", err.Error())
	}
}

func TestNoAnswer(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	c, err := NewURL(srv.URL, Config{HTTP: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	_, err = c.Peers(context.Background())
	var ne *NoAnswerError
	if !errors.As(err, &ne) || ne.Method != "GET" || !strings.HasSuffix(ne.URL, "/api/peers") || ne.Err == nil {
		t.Fatalf("err %v (%T), want a *NoAnswerError of GET /api/peers", err, err)
	}
	var e *Error
	if errors.As(err, &e) || StatusOf(err) != 0 {
		t.Fatal("a call without an answer is no *Error")
	}
}

func TestDoReturnsAnyAnswer(t *testing.T) {
	c, _ := server(t, 409, `{"error":{"code":"frontend_in_use","message":"m"}}`)
	a, err := c.Do(context.Background(), "DELETE", "/api/frontends/fe", nil, nil)
	if err != nil || a.Status != 409 || !strings.Contains(string(a.Body), "frontend_in_use") {
		t.Fatalf("Do: %+v, %v", a, err)
	}
	if err := c.DeleteFrontend(context.Background(), "fe"); CodeOf(err) != "frontend_in_use" {
		t.Fatalf("DeleteFrontend: %v", err)
	}
}
