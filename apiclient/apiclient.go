// Package apiclient is a client of a node's HTTPS client API (docs/api.md):
// the base URL, the TLS trust, the bearer token, JSON requests and answers,
// and the API's error document as one error type. The admin CLI, the bench
// and the tests that start nodes all call the API through it.
//
// Get and Send return the body of a 2xx answer as received, for a caller
// that prints documents as the node sent them (the CLI's --json); the typed
// calls (Submit, Message, Poll, Status, ...) decode it.
//
// A call that got an answer other than 2xx fails with an *Error (the HTTP
// status and, when the answer was the API's error document, its code and
// message); a call that got no answer fails with a *NoAnswerError.
package apiclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"unicode"
)

// Config is what a Client needs to reach one node.
type Config struct {
	// Base is the API's base URL: scheme, host, port and an optional path
	// prefix (a proxy's), e.g. https://localhost:8443.
	Base *url.URL
	// Token, when set, is sent as "Authorization: Bearer TOKEN".
	Token string
	// HTTP is the client the calls go through; nil: a clone of
	// http.DefaultTransport with TLS.
	HTTP *http.Client
	// TLS is the trust of the default client (ignored when HTTP is set);
	// nil: the system roots. TrustFile builds one from a PEM file.
	TLS *tls.Config
}

// Client calls one node's API. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// New returns a client of the node at cfg.Base.
func New(cfg Config) *Client {
	base := *cfg.Base
	base.Path = strings.TrimSuffix(base.Path, "/")
	base.RawPath = ""
	c := &Client{base: &base, token: cfg.Token, http: cfg.HTTP}
	if c.http == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = cfg.TLS
		c.http = &http.Client{Transport: tr}
	}
	return c
}

// NewURL is New with the base URL as a string, e.g. "https://" + node.Addr().
func NewURL(base string, cfg Config) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	cfg.Base = u
	return New(cfg), nil
}

// TrustFile is a TLS configuration that trusts the certificates of the PEM
// file (a CA bundle or a node's self-signed certificate) instead of the
// system roots. serverName, when set, is the name the certificate must be
// for (a node's self-signed certificate is for "localhost").
func TrustFile(file, serverName string) (*tls.Config, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}, nil
}

// Base is the API's base URL.
func (c *Client) Base() *url.URL { u := *c.base; return &u }

// HTTP is the client the calls go through.
func (c *Client) HTTP() *http.Client { return c.http }

// Close closes the idle connections of the client.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// URL is the absolute URL of an API path ("/api/messages") and query; a
// query in path ("/api/messages?limit=2") comes first.
func (c *Client) URL(path string, query url.Values) string {
	u := *c.base
	path, raw, _ := strings.Cut(path, "?")
	u.Path = c.base.Path + path
	if len(query) > 0 {
		if raw != "" {
			raw += "&"
		}
		raw += query.Encode()
	}
	u.RawQuery = raw
	return u.String()
}

// Error is an answer of the node other than 2xx. Code and Message are the
// API's error document ({"error":{"code","message"}}); Code is empty when
// the answer was not such a document (a proxy's error page), and Message
// then quotes the start of the body.
type Error struct {
	Method, URL string
	Status      int
	Code        string
	Message     string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d %s (not a Switchboard error document): %s %s: %s",
			e.Status, http.StatusText(e.Status), e.Method, e.URL, e.Message)
	}
	return e.Code + ": " + e.Message
}

// NoAnswerError is a call that got no answer: the node could not be
// reached, the connection broke, or the context ended first.
type NoAnswerError struct {
	Method, URL string
	Err         error // the transport's error, without the URL
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Method, e.URL, e.Err)
}

func (e *NoAnswerError) Unwrap() error { return e.Err }

// maxAnswer bounds the body read of one answer.
const maxAnswer = 64 << 20

// Answer is an answer of the node as received, whatever its status.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends one request and returns the node's answer whatever its status,
// for a caller that checks the status itself; it fails only when there was
// no answer (a *NoAnswerError). body is sent as JSON: a []byte or a
// json.RawMessage as is, anything else but nil encoded. path may carry a
// query ("/api/messages?limit=2"); query's values are added to it.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body any) (Answer, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case json.RawMessage:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(body)
		if err != nil {
			return Answer{}, err
		}
		rd = bytes.NewReader(data)
	}
	target := c.URL(path, query)
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return Answer{}, &NoAnswerError{Method: method, URL: target, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Answer{}, &NoAnswerError{Method: method, URL: target, Err: err}
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// Send sends one request (as Do) and returns the body of a 2xx answer as
// received, decoded into out too unless out is nil; any other answer is
// an *Error.
func (c *Client) Send(ctx context.Context, method, path string, query url.Values, body, out any) ([]byte, error) {
	a, err := c.Do(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	if a.Status < 200 || a.Status > 299 {
		return nil, answerError(method, c.URL(path, query), a.Status, a.Body)
	}
	if out != nil {
		if err := json.Unmarshal(a.Body, out); err != nil {
			return a.Body, fmt.Errorf("%s %s: the answer is not the document expected: %v", method, c.URL(path, query), err)
		}
	}
	return a.Body, nil
}

// Get is Send of a GET.
func (c *Client) Get(ctx context.Context, path string, query url.Values, out any) ([]byte, error) {
	return c.Send(ctx, http.MethodGet, path, query, nil, out)
}

// answerError is the *Error of a non-2xx answer with body data.
func answerError(method, target string, status int, data []byte) *Error {
	e := &Error{Method: method, URL: target, Status: status}
	var doc struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &doc) == nil && doc.Error != nil && doc.Error.Code != "" {
		e.Code, e.Message = doc.Error.Code, doc.Error.Message
		return e
	}
	snippet := strings.TrimSpace(string(data))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "..."
	}
	// The body goes to a terminal: control characters are quoted.
	if strings.ContainsFunc(snippet, unicode.IsControl) {
		snippet = strconv.Quote(snippet)
	}
	if snippet == "" {
		snippet = "-"
	}
	e.Message = snippet
	return e
}

// StatusOf is the HTTP status of err's answer (0 when err is no *Error).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// CodeOf is the API error code of err's answer ("" when err is no *Error
// or the answer was not the API's error document).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
