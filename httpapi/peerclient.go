package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/transport"
)

var _ transport.Peer = (*PeerClient)(nil)

// PeerClientConfig configures a PeerClient.
//
// Verification: with RootCAs, a peer's server certificate chain is verified
// against RootCAs, and the certificate must name the peer NODE (its CN or a
// DNS SAN), not the address dialled: peers are dialled by address, often
// an IP address from a DNS SRV target, which says nothing about who should
// answer there. Which node that is, every call says (transport.Target; see
// PeerClient). With InsecureSkipVerify instead, nothing is
// verified. RootCAs wins when both are set (--tls-ca given with
// --insecure-skip-verify verifies).
type PeerClientConfig struct {
	// Node is our federation name (--name), sent as X-Federation-Node on
	// every call. Required.
	Node string
	// Timeout bounds every HTTP request: a peer that does not answer
	// within it counts as failed. A Forward or Status call of several
	// requests (a batch split to fit MaxBody, or the single form) gives
	// each its own bound; the caller's context bounds the whole call.
	Timeout time.Duration
	// RootCAs verifies peers' certificate chains (the node's CA bundle).
	RootCAs *x509.CertPool
	// Certificate is presented as our client certificate (the node's
	// own); a peer with a CA bundle refuses calls without one
	// (client_certificate_required).
	Certificate *tls.Certificate
	// TLS, when set, stands for RootCAs and Certificate: its CA pool and
	// certificate in force are read at each handshake, so a certificate
	// or CA reloaded while the node runs is used by the next connection
	// (connections already open keep theirs).
	TLS *certs.Reloader
	// InsecureSkipVerify accepts any server certificate (development only).
	// Required when RootCAs is nil.
	InsecureSkipVerify bool
	// MaxConnsPerHost bounds the connections to one peer address (with
	// verification, those of the calls for one node: each node has its own
	// pool). Idle connections are kept up to the same number, so a steady
	// flow never redials.
	MaxConnsPerHost int
	// SingleConcurrency is how many single-form requests one Forward or
	// Status call without batch runs at once.
	SingleConcurrency int
	// Dial, when set, opens the connection TLS runs over instead of a
	// TCP dial (an embedder's in-memory network).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// RingToken, when set, is the API token the ring's calls to the site's
	// master carry (Authorization: Bearer), and only they: a master without
	// --tls-ca requires an admin's token on them (docs/ring.md). Federation
	// calls never carry it, since they go to other sites. It is asked at
	// each call, so a token file reloaded is followed; "" sends none.
	RingToken func() string
	// Logger receives the client's few logs (an address that now answers
	// as another node). Nil discards them.
	Logger *slog.Logger
}

// DefaultPeerClientConfig returns the defaults; Node and one of RootCAs
// or InsecureSkipVerify must be set.
func DefaultPeerClientConfig() PeerClientConfig {
	return PeerClientConfig{
		// 5s: a peer slower than this is treated as down.
		Timeout: 5 * time.Second,
		// 64: a forward queue has up to 4 requests in flight per peer, and
		// one call in single form runs up to SingleConcurrency requests,
		// so 64 leaves room for the queue, the status lane, health and
		// registry without a call waiting for a connection.
		MaxConnsPerHost: 64,
		// 8: enough to hide the round trip and the peer's commit, few
		// enough not to flood a peer that lacks the batch form (an older
		// or foreign implementation).
		SingleConcurrency: 8,
	}
}

// Validate reports every problem of c.
func (c PeerClientConfig) Validate() error {
	var errs []error
	if !messages.ValidName(c.Node) {
		errs = append(errs, fmt.Errorf("peer client: node %q is not a valid node name", c.Node))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("peer client: timeout %v must be positive", c.Timeout))
	}
	if c.RootCAs == nil && (c.TLS == nil || c.TLS.Pool() == nil) && !c.InsecureSkipVerify {
		errs = append(errs, errors.New("peer client: a CA pool (RootCAs or TLS) or InsecureSkipVerify is required"))
	}
	if c.MaxConnsPerHost < 1 {
		errs = append(errs, fmt.Errorf("peer client: max connections per host %d must be at least 1", c.MaxConnsPerHost))
	}
	if c.SingleConcurrency < 1 {
		errs = append(errs, fmt.Errorf("peer client: single concurrency %d must be at least 1", c.SingleConcurrency))
	}
	if c.Certificate != nil && len(c.Certificate.Certificate) == 0 {
		errs = append(errs, errors.New("peer client: the client certificate is empty"))
	}
	return errors.Join(errs...)
}

// PeerClient is the HTTPS implementation of transport.Peer: every call to
// a peer goes through it.
//
// Who is at an address: every federation call but the identity call is
// for one node (transport.Target): it carries X-Federation-To naming it,
// and a callee that is another node refuses it (421 misdirected, an
// Unreachable error here). With verification the call also requires,
// during the TLS handshake and so before any byte of the request leaves,
// a certificate naming that node: not the node last identified at the
// address, which another node may have taken since (a reused pod IP, an
// SRV record moved), and whose answers would be taken for the peer's.
// Identity verifies the certificate chain and checks that the certificate
// names the node the identity document reports; on success it remembers
// address -> node, which the ring's calls (for no node named) require.
// Identity calls use a connection of their own (closed after the call):
// the name check of a pooled connection is the one made when it was
// opened, so only connections checked against a node are pooled. With
// verification each node has its own pool (net/http pools connections by
// address, and an address listed for one node may now be another's, which
// a call for that other node left a connection to): a call for a node only
// ever goes over a connection checked against that node, and its
// certificate is checked again after the call all the same (the answer of
// another node is not taken). When an address starts answering as another
// node the idle connections are closed.
//
// Connections are HTTP/1.1 with keep-alive (HTTP/2 measured slower for
// these small requests, docs/performance.md) and never go through a proxy: the
// verification above lives in the dialer, which a proxy would bypass.
type PeerClient struct {
	cfg    PeerClientConfig
	log    *slog.Logger
	verify bool
	base   *tls.Config
	calls  *http.Client // keep-alive, without verification: checks no node
	ident  *http.Client // identity calls; one connection each

	mu    sync.Mutex
	nodes map[string]string       // canonical address -> node its certificate must name
	pools map[string]*http.Client // with verification: node -> its calls' pool (callsFor), until Forget
}

// NewPeerClient fills the zero fields of cfg from DefaultPeerClientConfig
// and validates it.
func NewPeerClient(cfg PeerClientConfig) (*PeerClient, error) {
	def := DefaultPeerClientConfig()
	if cfg.Timeout == 0 {
		cfg.Timeout = def.Timeout
	}
	if cfg.MaxConnsPerHost == 0 {
		cfg.MaxConnsPerHost = def.MaxConnsPerHost
	}
	if cfg.SingleConcurrency == 0 {
		cfg.SingleConcurrency = def.SingleConcurrency
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &PeerClient{cfg: cfg, verify: cfg.RootCAs != nil || (cfg.TLS != nil && cfg.TLS.Pool() != nil), nodes: map[string]string{}, pools: map[string]*http.Client{}}
	if cfg.Logger != nil {
		c.log = cfg.Logger.With("component", "peer-client")
	} else {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.base = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is ours (verifyPeer): the chain against RootCAs and
		// the certificate's names against the peer node, never against the
		// dialled address. Without RootCAs nothing is verified.
		InsecureSkipVerify: true,
		NextProtos:         []string{"http/1.1"},
	}
	switch {
	case cfg.TLS != nil:
		c.base.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cfg.TLS.Certificate(), nil }
	case cfg.Certificate != nil:
		c.base.Certificates = []tls.Certificate{*cfg.Certificate}
	}
	c.calls = c.pool("")
	c.ident = &http.Client{CheckRedirect: noRedirect, Transport: &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return c.dial(ctx, network, addr, "")
		},
		ForceAttemptHTTP2: false,
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableKeepAlives: true,
	}}
	return c, nil
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// pool is a keep-alive client whose connections' certificates must name
// want ("" checks no node: without verification).
func (c *PeerClient) pool(want string) *http.Client {
	return &http.Client{CheckRedirect: noRedirect, Transport: &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return c.dial(ctx, network, addr, want)
		},
		ForceAttemptHTTP2:   false,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxConnsPerHost:     c.cfg.MaxConnsPerHost,
		MaxIdleConnsPerHost: c.cfg.MaxConnsPerHost,
		// 90s, as net/http's default transport: longer than the health
		// interval, so the connection of the last check serves the next.
		IdleConnTimeout: 90 * time.Second,
	}}
}

// callsFor is the client of the calls whose certificate must name want:
// with verification, want's own pool (made at its first call), whose
// connections were all checked against want when they were opened; a
// connection checked against another node at the same address is in that
// node's pool. Without verification (want "") the one pool, which checks
// no node.
func (c *PeerClient) callsFor(want string) (*http.Client, error) {
	if !c.verify {
		return c.calls, nil
	}
	if want == "" {
		// target and identified always name a node with verification: this
		// is a bug, not a peer's doing.
		return nil, errors.New("a verified call names no node its certificate must name")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pools[want]
	if !ok {
		p = c.pool(want)
		c.pools[want] = p
	}
	return p, nil
}

// closeIdle closes the idle connections of every pool.
func (c *PeerClient) closeIdle() {
	c.mu.Lock()
	pools := make([]*http.Client, 0, len(c.pools)+1)
	pools = append(pools, c.calls)
	for _, p := range c.pools {
		pools = append(pools, p)
	}
	c.mu.Unlock()
	for _, p := range pools {
		p.CloseIdleConnections()
	}
}

// Forget drops what the client keeps for node: its pool, whose idle
// connections it closes, and the addresses last identified as node's.
// The node's owner calls it when nothing calls node any more (its peer
// actor stopped: the peer left discovery, or a gone peer's actor ended),
// so that a node that ever was a peer does not keep a transport and its
// connections for good (pods replaced under new names). A later call for
// node makes a new pool; a call under way keeps its connection, which
// the dropped pool closes when it has been idle for IdleConnTimeout.
func (c *PeerClient) Forget(node string) {
	c.mu.Lock()
	p := c.pools[node]
	delete(c.pools, node)
	for addr, n := range c.nodes {
		if n == node {
			delete(c.nodes, addr)
		}
	}
	c.mu.Unlock()
	if p != nil {
		p.CloseIdleConnections()
	}
}

// Renew drops every node's pool, closing its idle connections, so that
// the next call of every node opens a new connection with the TLS
// material in force (TLS): the node calls it when it reloaded its
// certificate or CA bundle, so that a peer the new bundle does not trust
// is not called over a connection verified before, and peers are shown
// the new certificate. A call under way keeps its connection, which the
// dropped pool closes once it is idle (IdleConnTimeout).
func (c *PeerClient) Renew() {
	c.mu.Lock()
	pools := c.pools
	c.pools = map[string]*http.Client{}
	c.mu.Unlock()
	for _, p := range pools {
		p.CloseIdleConnections()
	}
	c.calls.CloseIdleConnections()
}

// Close closes the idle connections. Calls under way finish; the client
// may still be used (it opens new connections).
func (c *PeerClient) Close() {
	c.closeIdle()
	c.ident.CloseIdleConnections()
}

// canonAddr is the key of an address: "host:port" as net/http dials it,
// host lower-cased.
func canonAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return "", fmt.Errorf("peer address %q is not host:port", addr)
	}
	return net.JoinHostPort(strings.ToLower(host), port), nil
}

func (c *PeerClient) nodeAt(key string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[key]
	return n, ok
}

// dial opens a TLS connection to addr, verifying as PeerClient describes;
// want is the node the certificate must name ("" for an identity call).
func (c *PeerClient) dial(ctx context.Context, network, addr, want string) (net.Conn, error) {
	cfg := c.base.Clone()
	if c.verify {
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return c.verifyPeer(cs, want) }
	}
	if c.cfg.Dial == nil {
		d := tls.Dialer{NetDialer: &net.Dialer{KeepAlive: 30 * time.Second}, Config: cfg}
		return d.DialContext(ctx, network, addr)
	}
	raw, err := c.cfg.Dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	return conn, nil
}

// verifyPeer verifies the peer's chain against RootCAs and, when want is
// set, that the certificate names that node.
func (c *PeerClient) verifyPeer(cs tls.ConnectionState, want string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("peer presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots: c.roots(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return fmt.Errorf("peer certificate not trusted by --tls-ca: %w", err)
	}
	if want != "" && !certs.Names(leaf, want) {
		return fmt.Errorf("peer certificate (%s) does not name node %q", certs.NamesOf(leaf), want)
	}
	return nil
}

// roots is the CA pool peers are verified against now.
func (c *PeerClient) roots() *x509.CertPool {
	if c.cfg.TLS != nil {
		return c.cfg.TLS.Pool()
	}
	return c.cfg.RootCAs
}

// maxReply bounds a peer's answer: the largest document (a registry of
// MaxRegistryFrontends names, a batch reply of 1000 results with reasons)
// is well under it.
const maxReply = 8 << 20

// do runs one request and decodes a 2xx answer into out. An error answer
// is a *transport.CallError; anything else is a failure to complete the call.
// It returns the connection's TLS state for the caller's name checks. node
// is the node the call is for, sent as X-Federation-To ("" for a call for
// whoever answers: the identity call, and the ring's).
func (c *PeerClient) do(ctx context.Context, client *http.Client, timeout time.Duration, key, node, method, path string, in, out any) (*tls.ConnectionState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+key+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set(messages.FederationHeader, c.cfg.Node)
	if node != "" {
		req.Header.Set(messages.FederationToHeader, node)
	}
	req.Header.Set("Accept", "application/json")
	if c.cfg.RingToken != nil && ringMemberPath(path) {
		if token := c.cfg.RingToken(); token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	return readAnswer(ctx, res, method, path, out)
}

// readAnswer reads res, the answer to a call bounded by ctx, and decodes a
// 2xx answer into out, as do describes.
func readAnswer(ctx context.Context, res *http.Response, method, path string, out any) (*tls.ConnectionState, error) {
	// The call ended (Timeout or the caller) as the answer came. net/http
	// hands over an answer that raced the cancellation, and closing the
	// connection ends the request at the peer too, so the answer may be the
	// peer's reaction to our giving up, not its answer to the call: an
	// error status, or a handler that returned without a word (net/http
	// answers 200 with an empty body for it). Only a complete 2xx document
	// is the peer's answer; anything else is the call not completing.
	gaveUp := func() error { return fmt.Errorf("%s %s: %w", method, path, context.Cause(ctx)) }
	if (res.StatusCode < 200 || res.StatusCode > 299) && ctx.Err() != nil {
		res.Body.Close()
		return nil, gaveUp()
	}
	defer func() {
		// Read what is left (bounded) so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
	}()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxReply+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, gaveUp() // cut short by the deadline
		}
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if len(raw) > maxReply {
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", method, path, maxReply)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		ce := callError(res.StatusCode, raw)
		ce.RetryAfter = transport.RetryAfterHeader(res.Header)
		return res.TLS, ce
	}
	if out == nil {
		if len(raw) == 0 && ctx.Err() != nil {
			// A call answered without a document (the ring's leave) has
			// no document to tell the peer's answer from its handler
			// returning once we gave up: taken as not completed (the
			// caller tries again).
			return nil, gaveUp()
		}
		return res.TLS, nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		if ctx.Err() != nil {
			return nil, gaveUp()
		}
		return nil, fmt.Errorf("%s %s: the peer answered %d with a document that is not the one expected: %w", method, path, res.StatusCode, err)
	}
	return res.TLS, nil
}

// codeRE is what a peer's error code may look like; anything else is
// replaced by http_<status> (the code ends up in logs and metrics).
var codeRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// maxCallMessage bounds the peer's error message kept in a CallError
// (it is logged and shown as a peer's last_error).
const maxCallMessage = 512

// callError turns an error answer into a *transport.CallError: the code and
// message of its error document, or http_<status> and the start of the
// body when it is not one (a proxy's page, say); its kind from both.
func callError(status int, body []byte) *transport.CallError {
	var doc errorDoc
	ce := &transport.CallError{Status: status, Code: fmt.Sprintf("http_%d", status)}
	if json.Unmarshal(body, &doc) == nil && codeRE.MatchString(doc.Error.Code) {
		ce.Code, ce.Message = doc.Error.Code, orStatus(clip(doc.Error.Message), status)
	} else {
		ce.Message = orStatus(clip(strings.TrimSpace(string(body))), status)
	}
	ce.Kind = kindOf(status, ce.Code)
	return ce
}

// orStatus is msg, or the status's text when msg is empty.
func orStatus(msg string, status int) string {
	if msg != "" {
		return msg
	}
	if t := http.StatusText(status); t != "" {
		return t
	}
	return fmt.Sprintf("HTTP status %d", status)
}

// clip makes s valid UTF-8 of at most maxCallMessage bytes (plus "...").
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxCallMessage {
		return s
	}
	cut := maxCallMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Identity implements transport.Peer. With verification, the certificate
// must name the node the document reports (else an error that is not a
// *transport.CallError: the call did not reach the node it claims); the
// address is then remembered as that node's. The document itself is
// returned as sent: judging it (protocol version, names) is discovery's.
func (c *PeerClient) Identity(ctx context.Context, addr string) (messages.Identity, error) {
	key, err := canonAddr(addr)
	if err != nil {
		return messages.Identity{}, err
	}
	var id messages.Identity
	ts, err := c.do(ctx, c.ident, c.cfg.Timeout, key, "", http.MethodGet, pathIdentity, nil, &id)
	if err != nil {
		return messages.Identity{}, err
	}
	if !c.verify {
		return id, nil
	}
	if ts == nil || len(ts.PeerCertificates) == 0 {
		return messages.Identity{}, fmt.Errorf("%s: no peer certificate", addr)
	}
	if leaf := ts.PeerCertificates[0]; !messages.ValidName(id.Node) || !certs.Names(leaf, id.Node) {
		return messages.Identity{}, fmt.Errorf("%s answers as node %q but its certificate (%s) does not name it", addr, id.Node, certs.NamesOf(leaf))
	}
	c.mu.Lock()
	old, had := c.nodes[key]
	c.nodes[key] = id.Node
	c.mu.Unlock()
	if had && old != id.Node {
		// Connections were checked against the node they are pooled for,
		// so none carries a call for another; the idle ones go all the
		// same (those to addr reach a node no longer listed there).
		c.log.Warn("peer address answers as another node", "addr", addr, "was", old, "now", id.Node)
		c.closeIdle()
	}
	return id, nil
}

// target is the address key of a federation call for to.Node and the node
// its certificate must name: to.Node itself ("" without verification),
// not whoever was identified at the address last.
func (c *PeerClient) target(to transport.Target) (key, want string, err error) {
	if !messages.ValidName(to.Node) {
		return "", "", fmt.Errorf("a call to %s names no valid node (%q)", to.Addr, to.Node)
	}
	if key, err = canonAddr(to.Addr); err != nil || !c.verify {
		return key, "", err
	}
	return key, to.Node, nil
}

// identified is the address key of a call for whoever answers at addr
// (the ring's) and the node its certificate must name ("" without
// verification): the node last identified there, identifying the address
// first when no node is known there.
func (c *PeerClient) identified(ctx context.Context, addr string) (key, want string, err error) {
	if key, err = canonAddr(addr); err != nil || !c.verify {
		return key, "", err
	}
	if node, ok := c.nodeAt(key); ok {
		return key, node, nil
	}
	id, err := c.Identity(ctx, addr)
	if err != nil {
		return "", "", fmt.Errorf("identity of %s: %w", addr, err)
	}
	return key, id.Node, nil
}

// call POSTs in to path at key for node (X-Federation-To; see do) and
// decodes the answer into out, over a connection of want's pool
// (callsFor), whose handshake checked the certificate against want. The
// check here makes sure of it again: no answer of another node is taken.
func (c *PeerClient) call(ctx context.Context, key, node, want, path string, in, out any) error {
	return c.callWithin(ctx, c.cfg.Timeout, key, node, want, path, in, out)
}

// callWithin is call with its own bound on the request (a long-poll's).
// A nil out ignores the answer's body.
func (c *PeerClient) callWithin(ctx context.Context, timeout time.Duration, key, node, want, path string, in, out any) error {
	client, err := c.callsFor(want)
	if err != nil {
		return err
	}
	ts, err := c.do(ctx, client, timeout, key, node, http.MethodPost, path, in, out)
	if want != "" && ts != nil && (len(ts.PeerCertificates) == 0 || !certs.Names(ts.PeerCertificates[0], want)) {
		return fmt.Errorf("%s: the connection's certificate does not name node %q", key, want)
	}
	return err
}

// Health implements transport.Peer.
func (c *PeerClient) Health(ctx context.Context, to transport.Target, h messages.Health) (messages.Health, error) {
	key, want, err := c.target(to)
	if err != nil {
		return messages.Health{}, err
	}
	var out messages.Health
	if err := c.call(ctx, key, to.Node, want, pathHealth, h, &out); err != nil {
		return messages.Health{}, err
	}
	if err := out.Validate(); err != nil {
		return messages.Health{}, fmt.Errorf("%s answered an invalid health document: %v", to.Addr, err)
	}
	return out, nil
}

// Registry implements transport.Peer.
func (c *PeerClient) Registry(ctx context.Context, to transport.Target, r messages.Registry) (messages.Registry, error) {
	key, want, err := c.target(to)
	if err != nil {
		return messages.Registry{}, err
	}
	var out messages.Registry
	if err := c.call(ctx, key, to.Node, want, pathRegistry, r, &out); err != nil {
		return messages.Registry{}, err
	}
	if err := out.Validate(); err != nil {
		return messages.Registry{}, fmt.Errorf("%s answered an invalid registry document: %v", to.Addr, err)
	}
	return out, nil
}

// messageRefusal reports whether err is the peer refusing the one message
// of a single-form forward: an error document (not a proxy's page) that
// refuses the call (the message) or finds it in conflict with what the
// peer holds. A refusal of the caller (Forbidden) or of the path
// (UnknownTarget) fails the whole Forward instead (the caller retries it,
// like a refused batch), and so does anything transient.
func messageRefusal(err error) (*messages.Error, bool) {
	var ce *transport.CallError
	if !errors.As(err, &ce) || (ce.Kind != transport.Refused && ce.Kind != transport.Conflict) || strings.HasPrefix(ce.Code, "http_") {
		return nil, false
	}
	return &messages.Error{Code: ce.Code, Message: ce.Message}, true
}

// Forward implements transport.Peer. With batch it sends forward_batch
// requests of at most MaxForwardBatch messages and MaxBody bytes (the
// peer's bound on a request, forwardChunks), one after another; without,
// one forward request per message, SingleConcurrency at a time. Each
// request has its own Timeout; ctx bounds the whole call. A message the
// peer refuses (a 4xx about the message) gets its result's Error; any
// other failure of a request fails the call, and the requests not yet
// started are not sent. The results of the requests that completed are
// returned with the error (the others' have an empty ID): the caller
// records them and sends only the rest again (forwards are idempotent
// all the same).
func (c *PeerClient) Forward(ctx context.Context, to transport.Target, batch bool, fs []messages.Forward) ([]messages.ForwardResult, error) {
	addr := to.Addr
	key, want, err := c.target(to)
	if err != nil {
		return nil, err
	}
	results := make([]messages.ForwardResult, len(fs))
	if batch {
		for _, ch := range forwardChunks(fs, MaxBody) {
			lo, hi := ch[0], ch[1]
			var out messages.ForwardBatchReply
			if err := c.call(ctx, key, to.Node, want, pathForwardBat, messages.ForwardBatch{Messages: fs[lo:hi]}, &out); err != nil {
				var ce *transport.CallError
				if plantedBug && !errors.As(err, &ce) {
					// The planted bug (build tag simbug only): a batch whose
					// answer never came is taken as accepted by the peer.
					for i, f := range fs[lo:hi] {
						results[lo+i] = messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: f.ID, Duplicate: true}}
					}
					continue
				}
				return results, err
			}
			if err := inInputOrder(addr, "forwards", out.Results, fs[lo:hi],
				func(r messages.ForwardResult) string { return r.ID }, func(f messages.Forward) string { return f.ID }); err != nil {
				return results, err
			}
			copy(results[lo:hi], out.Results)
		}
		return results, nil
	}
	err = c.each(ctx, len(fs), func(ctx context.Context, i int) error {
		var out messages.ForwardReply
		err := c.call(ctx, key, to.Node, want, pathForward, fs[i], &out)
		if e, ok := messageRefusal(err); ok {
			results[i] = messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: fs[i].ID}, Error: e}
			return nil
		}
		if err == nil && out.ID != fs[i].ID {
			return fmt.Errorf("%s answered the forward of %q for message %q", addr, fs[i].ID, out.ID)
		}
		if err == nil {
			results[i] = messages.ForwardResult{ForwardReply: out}
		}
		return err
	})
	return results, err
}

// inInputOrder checks a batch's answer: one result per item sent, in the
// order sent (the protocol). A result that names another message would
// have its outcome recorded on the wrong one, so the whole call fails.
func inInputOrder[R, S any](addr, items string, results []R, sent []S, resultID func(R) string, sentID func(S) string) error {
	if len(results) != len(sent) {
		return fmt.Errorf("%s answered %d results for %d %s", addr, len(results), len(sent), items)
	}
	for i, r := range results {
		if got, want := resultID(r), sentID(sent[i]); got != want {
			return fmt.Errorf("%s answered result %d for message %q, want %q (results must be in input order)", addr, i, got, want)
		}
	}
	return nil
}

// forwardChunks splits fs into the [lo, hi) ranges of forward_batch
// requests (bodyChunks): at most MaxForwardBatch messages and limit bytes.
// A message's document besides its body is well within rest; one message
// always fits: a body is at most 64 KiB.
func forwardChunks(fs []messages.Forward, limit int) [][2]int {
	return bodyChunks(fs, limit, messages.MaxForwardBatch, len(`{"messages":[]}`),
		func(f messages.Forward) int { return len(f.Body) + len(f.Binary) })
}

// statusChunks splits rs into the [lo, hi) ranges of delivery_status_batch
// requests (bodyChunks): at most MaxStatusBatch reports and limit bytes. A
// report's free text is its reason (at most MaxReasonLen bytes).
func statusChunks(rs []messages.StatusReport, limit int) [][2]int {
	return bodyChunks(rs, limit, messages.MaxStatusBatch, len(`{"statuses":[]}`),
		func(r messages.StatusReport) int { return len(r.Reason) })
}

// bodyChunks splits items into the [lo, hi) ranges of batch requests: at
// most maxItems items, and a request body of at most limit bytes (envelope is
// the document around the items), so that the peer does not refuse it
// (413 body_too_large: a batch refused whole would be sent again whole,
// and fail for good). An item's size is bounded without encoding it (its
// free text, text(item) bytes, written as escapes, six bytes a byte, and
// the rest of the document); only when the bounds of a batch could pass
// the limit are its items encoded and measured.
func bodyChunks[T any](items []T, limit, maxItems, envelope int, text func(T) int) [][2]int {
	const rest = 2048 // an item's document besides its free text, more than enough
	bound := envelope
	for _, it := range items {
		bound += 6*text(it) + rest + 1
	}
	size := func(int) int { return 0 } // all of items fits: only the count splits
	if bound > limit {
		sizes := make([]int, len(items))
		for i, it := range items {
			b, err := json.Marshal(it)
			if err != nil {
				sizes[i] = bound // not encodable: its own request, which reports the error
				continue
			}
			sizes[i] = len(b) + 1 // and a comma
		}
		size = func(i int) int { return sizes[i] }
	}
	var out [][2]int
	for lo := 0; lo < len(items); {
		hi, n := lo, envelope
		for hi < len(items) && hi-lo < maxItems && (hi == lo || n+size(hi) <= limit) {
			n += size(hi)
			hi++
		}
		out = append(out, [2]int{lo, hi})
		lo = hi
	}
	return out
}

// Status implements transport.Peer: delivery_status_batch requests of at
// most MaxStatusBatch reports and MaxBody bytes (the peer's bound on a
// request, statusChunks) one after another with batch, else one
// delivery_status request per report, SingleConcurrency at a time. Each
// request has its own Timeout; ctx bounds the whole call. A StatusReply
// has no room for an error, so a refused or failed request fails the
// call, and the requests not yet started are not sent; the results of
// those that completed are returned with the error (the others' have an
// empty ID), so that only the rest is sent again.
func (c *PeerClient) Status(ctx context.Context, to transport.Target, batch bool, rs []messages.StatusReport) ([]messages.StatusReply, error) {
	addr := to.Addr
	key, want, err := c.target(to)
	if err != nil {
		return nil, err
	}
	results := make([]messages.StatusReply, len(rs))
	if batch {
		for _, ch := range statusChunks(rs, MaxBody) {
			lo, hi := ch[0], ch[1]
			var out messages.StatusBatchReply
			if err := c.call(ctx, key, to.Node, want, pathStatusBatch, messages.StatusBatch{Statuses: rs[lo:hi]}, &out); err != nil {
				return results, err
			}
			if err := inInputOrder(addr, "reports", out.Results, rs[lo:hi],
				func(r messages.StatusReply) string { return r.ID }, func(r messages.StatusReport) string { return r.ID }); err != nil {
				return results, err
			}
			copy(results[lo:hi], out.Results)
		}
		return results, nil
	}
	err = c.each(ctx, len(rs), func(ctx context.Context, i int) error {
		var out messages.StatusReply
		err := c.call(ctx, key, to.Node, want, pathStatus, rs[i], &out)
		if err == nil && out.ID != rs[i].ID {
			return fmt.Errorf("%s answered the report of %q for message %q", addr, rs[i].ID, out.ID)
		}
		if err == nil {
			results[i] = out
		}
		return err
	})
	return results, err
}

// each runs fn for 0..n-1, SingleConcurrency at a time. The first error
// cancels the calls not yet finished and is returned.
func (c *PeerClient) each(ctx context.Context, n int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	sem := make(chan struct{}, c.cfg.SingleConcurrency)
	stopped := false
	for i := 0; i < n && !stopped; i++ {
		select {
		case sem <- struct{}{}:
			wg.Go(func() {
				defer func() { <-sem }()
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			})
		case <-ctx.Done():
			stopped = true
		}
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if stopped {
		return ctx.Err()
	}
	return nil
}
