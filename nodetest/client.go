// Package nodetest starts and drives real nodes in tests, as
// net/http/httptest does servers: the switchboard binary built once per
// test binary and run with flags (Node: start and wait for /readyz, stop,
// kill, restart, its logs), and a test's client of a node's API (Client:
// requests whose failures fail the test, on top of package apiclient).
// Waiting for a condition is package polltest's.
//
// Only tests import it.
package nodetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
)

// WaitTimeout bounds the waits of Client (a message's state, a peer's).
const WaitTimeout = 20 * time.Second

// Client is a test's client of one node's API: a request that gets no
// answer fails the test.
type Client struct {
	t   testing.TB
	API *apiclient.Client
}

// NewClient is a test's client that calls through api.
func NewClient(t testing.TB, api *apiclient.Client) *Client {
	return &Client{t: t, API: api}
}

// Do sends a request and returns the status and the body of the answer,
// whatever the status. body is sent as JSON: nil none, a []byte or string
// as is, anything else encoded.
func (c *Client) Do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	a, err := c.Answer(method, path, body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return a.Status, a.Body
}

// Answer sends a request and returns the answer whatever its status; the
// error is that there was none (a node that is down), for the caller to
// judge.
func (c *Client) Answer(method, path string, body any) (apiclient.Answer, error) {
	if s, ok := body.(string); ok {
		body = []byte(s)
	}
	return c.API.Do(context.Background(), method, path, nil, body)
}

// Call sends a request and returns the status; a 2xx answer is decoded
// into out unless out is nil. The error is that there was no answer, or a
// 2xx answer that does not decode.
func (c *Client) Call(method, path string, body, out any) (int, error) {
	a, err := c.Answer(method, path, body)
	if err != nil {
		return 0, err
	}
	if out != nil && a.Status < 300 {
		if err := json.Unmarshal(a.Body, out); err != nil {
			return a.Status, fmt.Errorf("decode %s: %w", a.Body, err)
		}
	}
	return a.Status, nil
}

// Must sends a request, checks its status and decodes the answer into out
// unless out is nil.
func (c *Client) Must(want int, method, path string, body, out any) {
	c.t.Helper()
	status, data := c.Do(method, path, body)
	if status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

// APIError checks that a request fails with status and the API error code,
// with a message, and returns the message.
func (c *Client) APIError(status int, code, method, path string, body any) string {
	c.t.Helper()
	got, data := c.Do(method, path, body)
	var doc struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		c.t.Fatalf("%s %s: error body %q is not the JSON error document: %v", method, path, data, err)
	}
	if got != status || doc.Error.Code != code || doc.Error.Message == "" {
		c.t.Fatalf("%s %s: got %d %q (%s), want %d %q", method, path, got, doc.Error.Code, doc.Error.Message, status, code)
	}
	return doc.Error.Message
}

// PullFrontend registers the pull frontend name and routes prefixes to it.
func (c *Client) PullFrontend(name string, prefixes ...string) {
	c.t.Helper()
	c.Must(200, "PUT", "/api/frontends/"+name, map[string]string{"mode": "pull"}, nil)
	c.Routes(name, prefixes...)
}

// Routes routes each prefix to frontend.
func (c *Client) Routes(frontend string, prefixes ...string) {
	c.t.Helper()
	for _, p := range prefixes {
		c.Must(200, "PUT", "/api/routes/"+p, map[string]string{"frontend": frontend}, nil)
	}
}

// Submit submits a text "hello ID" from 15550001 to dest and returns the
// 202's document. An empty id is left out: the node makes one (an id
// given empty is refused).
func (c *Client) Submit(id, dest string) apiclient.Accepted {
	c.t.Helper()
	var a apiclient.Accepted
	sub := map[string]string{"source_msisdn": "15550001", "destination_msisdn": dest, "message_body": "hello " + id}
	if id != "" {
		sub["id"] = id
	}
	c.Must(202, "POST", "/api/messages", sub, &a)
	return a
}

// Message is GET /api/messages/{id}, which must answer 200.
func (c *Client) Message(id string) messages.Message {
	c.t.Helper()
	var m messages.Message
	c.Must(200, "GET", "/api/messages/"+id, nil, &m)
	return m
}

// WaitState polls the message until it is in state (or fails after
// WaitTimeout) and returns it.
func (c *Client) WaitState(id string, state messages.State) messages.Message {
	c.t.Helper()
	var m messages.Message
	polltest.Eventually(c.t, WaitTimeout, func() error {
		m = c.Message(id)
		if m.State != state {
			return fmt.Errorf("message %s is %s, want %s", id, m.State, state)
		}
		return nil
	})
	return m
}

// Poll polls the pull frontend fe once.
func (c *Client) Poll(fe string, max int, waitMS, leaseMS int64) []messages.Outgoing {
	c.t.Helper()
	var r struct {
		Messages []messages.Outgoing `json:"messages"`
	}
	c.Must(200, "POST", "/api/frontends/"+fe+"/poll", map[string]any{"max": max, "wait_ms": waitMS, "lease_ms": leaseMS}, &r)
	return r.Messages
}

// PollOne long-polls fe until a message comes (or fails after
// WaitTimeout).
func (c *Client) PollOne(fe string) messages.Outgoing {
	c.t.Helper()
	var got messages.Outgoing
	polltest.Eventually(c.t, WaitTimeout, func() error {
		ms := c.Poll(fe, 1, 500, 30000)
		if len(ms) != 1 {
			return fmt.Errorf("no message at %s", fe)
		}
		got = ms[0]
		return nil
	})
	return got
}

// Ack acks results at fe and returns the outcomes.
func (c *Client) Ack(fe string, results ...messages.DeliveryResult) []messages.AckOutcome {
	c.t.Helper()
	var r struct {
		Results []messages.AckOutcome `json:"results"`
	}
	c.Must(200, "POST", "/api/frontends/"+fe+"/ack", map[string]any{"results": results}, &r)
	return r.Results
}

// WaitPeer polls GET /api/peers until it lists the peer name in state (or
// fails after WaitTimeout).
func (c *Client) WaitPeer(name string, state messages.PeerState) {
	c.t.Helper()
	polltest.Eventually(c.t, WaitTimeout, func() error {
		var peers []messages.PeerInfo
		c.Must(200, "GET", "/api/peers", nil, &peers)
		for _, p := range peers {
			if p.Node == name && p.State == state {
				return nil
			}
		}
		return fmt.Errorf("peer %s not %s in %+v", name, state, peers)
	})
}
