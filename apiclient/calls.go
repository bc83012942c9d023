package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
)

// The typed calls of docs/api.md. Each decodes the answer's document.

// Accepted is the 202 document of a submission.
type Accepted struct {
	ID    string         `json:"id"`
	State messages.State `json:"state"`
}

// MessageList is a page of GET /api/messages; NextCursor is empty on the
// last page, and only there: a page of a frontend or peer search may hold
// fewer messages than its limit, even none, and have a NextCursor.
type MessageList struct {
	Messages   []messages.Message `json:"messages"`
	NextCursor string             `json:"next_cursor"`
}

// Submit is POST /api/messages. body is a messages.Submission, or the
// submission's JSON as a json.RawMessage (sent as is).
func (c *Client) Submit(ctx context.Context, body any) (Accepted, error) {
	var a Accepted
	_, err := c.Send(ctx, http.MethodPost, "/api/messages", nil, body, &a)
	return a, err
}

// Message is GET /api/messages/{id}.
func (c *Client) Message(ctx context.Context, id string) (messages.Message, error) {
	var m messages.Message
	_, err := c.Get(ctx, "/api/messages/"+id, nil, &m)
	return m, err
}

// Messages is GET /api/messages with the query's filters (docs/api.md).
func (c *Client) Messages(ctx context.Context, query url.Values) (MessageList, error) {
	var l MessageList
	_, err := c.Get(ctx, "/api/messages", query, &l)
	return l, err
}

// PutFrontend is PUT /api/frontends/{name}: f's mode, URL and secret.
func (c *Client) PutFrontend(ctx context.Context, name string, f messages.Frontend) (messages.Frontend, error) {
	body := map[string]string{"mode": string(f.Mode)}
	if f.URL != "" {
		body["url"] = f.URL
	}
	if f.Secret != "" {
		body["secret"] = f.Secret
	}
	var got messages.Frontend
	_, err := c.Send(ctx, http.MethodPut, "/api/frontends/"+name, nil, body, &got)
	return got, err
}

// DeleteFrontend is DELETE /api/frontends/{name}.
func (c *Client) DeleteFrontend(ctx context.Context, name string) error {
	_, err := c.Send(ctx, http.MethodDelete, "/api/frontends/"+name, nil, nil, nil)
	return err
}

// PutRoute is PUT /api/routes/{prefix}: prefix to frontend.
func (c *Client) PutRoute(ctx context.Context, prefix, frontend string) (messages.Route, error) {
	var r messages.Route
	_, err := c.Send(ctx, http.MethodPut, "/api/routes/"+prefix, nil, map[string]string{"frontend": frontend}, &r)
	return r, err
}

// DeleteRoute is DELETE /api/routes/{prefix}.
func (c *Client) DeleteRoute(ctx context.Context, prefix string) error {
	_, err := c.Send(ctx, http.MethodDelete, "/api/routes/"+prefix, nil, nil, nil)
	return err
}

// Poll is POST /api/frontends/{name}/poll: up to max messages, waiting up
// to waitMS for the first, leased for leaseMS (0: the node's default).
func (c *Client) Poll(ctx context.Context, frontend string, max int, waitMS, leaseMS int64) ([]messages.Outgoing, error) {
	body := map[string]any{"max": max, "wait_ms": waitMS}
	if leaseMS != 0 {
		body["lease_ms"] = leaseMS
	}
	var r struct {
		Messages []messages.Outgoing `json:"messages"`
	}
	_, err := c.Send(ctx, http.MethodPost, "/api/frontends/"+frontend+"/poll", nil, body, &r)
	return r.Messages, err
}

// Ack is POST /api/frontends/{name}/ack with the delivery results.
func (c *Client) Ack(ctx context.Context, frontend string, results ...messages.DeliveryResult) ([]messages.AckOutcome, error) {
	var r struct {
		Results []messages.AckOutcome `json:"results"`
	}
	_, err := c.Send(ctx, http.MethodPost, "/api/frontends/"+frontend+"/ack", nil,
		map[string]any{"results": results}, &r)
	return r.Results, err
}

// Status is GET /api/status.
func (c *Client) Status(ctx context.Context) (httpapi.Status, error) {
	var s httpapi.Status
	_, err := c.Get(ctx, "/api/status", nil, &s)
	return s, err
}

// Peers is GET /api/peers.
func (c *Client) Peers(ctx context.Context) ([]messages.PeerInfo, error) {
	var p []messages.PeerInfo
	_, err := c.Get(ctx, "/api/peers", nil, &p)
	return p, err
}

// RingStatus is GET /api/ring/status.
func (c *Client) RingStatus(ctx context.Context) (messages.RingStatus, error) {
	var s messages.RingStatus
	_, err := c.Get(ctx, "/api/ring/status", nil, &s)
	return s, err
}

// Ready is GET /readyz: whether the node answers it 200.
func (c *Client) Ready(ctx context.Context) bool {
	_, err := c.Get(ctx, "/readyz", nil, nil)
	return err == nil
}

// Document is a call's answer decoded into T, for a caller that names the
// document it expects of a path the typed calls do not cover.
func Document[T any](ctx context.Context, c *Client, method, path string, body any) (T, error) {
	var v T
	_, err := c.Send(ctx, method, path, nil, body, &v)
	return v, err
}
