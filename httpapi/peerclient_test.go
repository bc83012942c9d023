package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/transport"
)

// peerSetup is home's gateway over real TLS (mutual TLS unless insecure)
// with a fedBackend that knows peer-a, and a request counter in front.
type peerSetup struct {
	p    pki
	b    *fedBackend
	srv  *httptest.Server
	hits *countPaths
	addr string
	// conns counts the connections the server accepted; closed those
	// that ended since.
	conns, closed atomic.Int64
}

func newPeerSetup(t *testing.T, mtls bool) *peerSetup {
	t.Helper()
	st := &peerSetup{p: newPKI(t, homeNode, peerA, peerB), b: newFedBackend(homeNode, peerA)}
	s, err := New(Config{Backend: st.b, Logger: slog.New(slog.DiscardHandler), RequireClientCert: mtls})
	if err != nil {
		t.Fatal(err)
	}
	st.hits = &countPaths{h: s}
	st.srv = startTLS(t, st.hits, st.p.serverTLS(t, homeNode, mtls), func(srv *httptest.Server) {
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				st.conns.Add(1)
			case http.StateClosed:
				st.closed.Add(1)
			}
		}
	})
	st.addr = st.srv.Listener.Addr().String()
	return st
}

// client is peer-a's PeerClient: trusting the CA, with peer-a's
// certificate (unless noCert).
func (st *peerSetup) client(t *testing.T, noCert bool, edit ...func(*PeerClientConfig)) *PeerClient {
	t.Helper()
	cfg := PeerClientConfig{Node: peerA, RootCAs: st.p.pool}
	if !noCert {
		pair := st.p.pair(t, peerA)
		cfg.Certificate = &pair
	}
	for _, e := range edit {
		e(&cfg)
	}
	c, err := NewPeerClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// toHome is a call for home at addr.
func toHome(addr string) transport.Target { return transport.Target{Node: homeNode, Addr: addr} }

func health() messages.Health {
	return messages.Health{Node: peerA, Time: fedTime, Status: messages.HealthOK}
}

func forwards(ids ...string) []messages.Forward {
	fs := make([]messages.Forward, len(ids))
	for i, id := range ids {
		fs[i] = messages.Forward{ID: id, SourceMSISDN: "4477001", DestinationMSISDN: "+4412", Body: "hi",
			SourceSMSC: peerA, DestSMSC: homeNode, Frontend: "fe-home"}
	}
	return fs
}

func reports(ids ...string) []messages.StatusReport {
	rs := make([]messages.StatusReport, len(ids))
	for i, id := range ids {
		rs[i] = messages.StatusReport{ID: id, Node: peerA, Status: messages.ReportDelivered, At: fedTime}
	}
	return rs
}

// notCallError fails unless err is a failure to complete the call (not a
// peer's error answer).
func notCallError(t *testing.T, what string, err error) {
	t.Helper()
	var ce *transport.CallError
	if err == nil || errors.As(err, &ce) || transport.KindOf(err) != transport.Unreachable {
		t.Errorf("%s: err = %v (%T), want an error that is not a *transport.CallError (unreachable)", what, err, err)
	}
}

func wantCallError(t *testing.T, what string, err error, status int, code string, kind transport.Kind) {
	t.Helper()
	var ce *transport.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: err = %v (%T), want a *transport.CallError", what, err, err)
	}
	if ce.Status != status || ce.Code != code || ce.Message == "" || ce.Kind != kind || transport.KindOf(err) != kind {
		t.Errorf("%s: %+v, want %d %s of kind %v", what, ce, status, code, kind)
	}
}

func TestPeerClientMutualTLS(t *testing.T) {
	st := newPeerSetup(t, true)
	c := st.client(t, false)
	ctx := ctxT(t)

	id, err := c.Identity(ctx, st.addr)
	if err != nil || id.Node != homeNode || !id.Has(messages.CapForwardBatch) {
		t.Fatalf("Identity = %+v, %v", id, err)
	}
	h, err := c.Health(ctx, toHome(st.addr), health())
	if err != nil || h.Node != homeNode || h.ForwardQueueDepth != 3 {
		t.Fatalf("Health = %+v, %v", h, err)
	}
	reg, err := c.Registry(ctx, toHome(st.addr), messages.Registry{Node: peerA, Frontends: []string{"fe-a"}})
	if err != nil || reg.Node != homeNode || fmt.Sprint(reg.Frontends) != "[fe-home]" {
		t.Fatalf("Registry = %+v, %v", reg, err)
	}
	// The header named us: the backend saw peer-a, authenticated by its
	// certificate.
	st.b.mu.Lock()
	if fmt.Sprint(st.b.calls) != "[health from peer-a registry from peer-a]" {
		t.Errorf("backend calls = %q", st.b.calls)
	}
	st.b.mu.Unlock()
	if n := st.hits.count(pathIdentity); n != 1 {
		t.Errorf("identity calls = %d, want 1", n)
	}
	// Keep-alive: every call after identity (which has a connection of
	// its own) shares one connection.
	for range 5 {
		if _, err := c.Forward(ctx, toHome(st.addr), true, forwards("m-1")); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.conns.Load(); n != 2 {
		t.Errorf("the server accepted %d connections, want 2 (identity, then one kept alive)", n)
	}

	t.Run("no client certificate", func(t *testing.T) {
		c := st.client(t, true)
		_, err := c.Identity(ctx, st.addr)
		wantCallError(t, "Identity", err, 403, messages.CodeClientCertReq, transport.Forbidden)
		_, err = c.Health(ctx, toHome(st.addr), health())
		wantCallError(t, "Health", err, 403, messages.CodeClientCertReq, transport.Forbidden)
	})
	t.Run("our certificate names another node", func(t *testing.T) {
		// peer-b's certificate with peer-a in the header.
		c := st.client(t, true, func(cfg *PeerClientConfig) {
			pair := st.p.pair(t, peerB)
			cfg.Certificate = &pair
		})
		_, err := c.Health(ctx, toHome(st.addr), health())
		wantCallError(t, "Health", err, 403, messages.CodeNodeMismatch, transport.Forbidden)
	})
}

// TestPeerClientIdentityNames: the certificate must name the node the
// identity reports, whatever address was dialled (here 127.0.0.1, which
// every test certificate covers: the name check is what refuses).
func TestPeerClientIdentityNames(t *testing.T) {
	st := newPeerSetup(t, true)
	st.b.set(func(b *fedBackend) { b.node = "impostor" }) // home's certificate does not name it
	c := st.client(t, false)
	_, err := c.Identity(ctxT(t), st.addr)
	notCallError(t, "Identity", err)
	if err != nil && !strings.Contains(err.Error(), `"impostor"`) {
		t.Errorf("the error does not name the node claimed: %v", err)
	}
	// A call for the node it claims to be fails in the handshake, without
	// sending anything.
	_, err = c.Health(ctxT(t), transport.Target{Node: "impostor", Addr: st.addr}, health())
	notCallError(t, "Health", err)
	if n := st.b.callCount(); n != 0 {
		t.Errorf("backend calls = %d, want 0", n)
	}
	if n := st.hits.count(pathIdentity); n != 1 {
		t.Errorf("identity calls = %d, want 1", n)
	}
}

// TestPeerClientUntrusted: a server certificate of another CA fails every
// call, and not as a peer's answer.
func TestPeerClientUntrusted(t *testing.T) {
	st := newPeerSetup(t, false)
	c := st.client(t, false, func(cfg *PeerClientConfig) { cfg.RootCAs = newPKI(t, peerA).pool })
	_, err := c.Identity(ctxT(t), st.addr)
	notCallError(t, "Identity", err)
	_, err = c.Forward(ctxT(t), toHome(st.addr), true, forwards("m-1"))
	notCallError(t, "Forward", err)
	if n := st.b.callCount(); n != 0 {
		t.Errorf("backend calls = %d, want 0", n)
	}
}

// TestPeerClientChecksBeforeSending: the address answered identity as
// home, then presents a certificate for peer-b (same CA): the handshake of
// the next call refuses it, so the forward never leaves.
func TestPeerClientChecksBeforeSending(t *testing.T) {
	p := newPKI(t, homeNode, peerA, peerB)
	b := newFedBackend(homeNode, peerA)
	s, err := New(Config{Backend: b, Logger: slog.New(slog.DiscardHandler), RequireClientCert: true})
	if err != nil {
		t.Fatal(err)
	}
	hits := &countPaths{h: s}
	homePair, bPair := p.pair(t, homeNode), p.pair(t, peerB)
	var current atomic.Pointer[tls.Certificate]
	current.Store(&homePair)
	base := p.serverTLS(t, homeNode, true)
	cfg := base.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.Certificates = []tls.Certificate{*current.Load()}
		return c, nil
	}
	srv := startTLS(t, hits, cfg)
	addr := srv.Listener.Addr().String()

	c := p.verifyingClient(t, peerA)
	if _, err := c.Identity(ctxT(t), addr); err != nil {
		t.Fatal(err)
	}
	current.Store(&bPair)
	_, err = c.Forward(ctxT(t), toHome(addr), true, forwards("m-1"))
	notCallError(t, "Forward", err)
	if err != nil && !strings.Contains(err.Error(), `"home"`) {
		t.Errorf("the error does not name the node expected: %v", err)
	}
	if n := hits.count(pathForwardBat); n != 0 {
		t.Errorf("forward_batch reached the server %d times", n)
	}

	// The address now answers as peer-b (its identity and certificate
	// agree): calls for home still fail before they leave, even once the
	// client has identified peer-b there, and calls for peer-b go.
	b.set(func(b *fedBackend) { b.node = peerB })
	id, err := c.Identity(ctxT(t), addr)
	if err != nil || id.Node != peerB {
		t.Fatalf("Identity = %+v, %v", id, err)
	}
	_, err = c.Forward(ctxT(t), toHome(addr), true, forwards("m-1"))
	notCallError(t, "Forward for home after the new identity", err)
	if n := hits.count(pathForwardBat); n != 0 {
		t.Errorf("forward_batch for home reached peer-b %d times", n)
	}
	if _, err := c.Forward(ctxT(t), transport.Target{Node: peerB, Addr: addr}, true, forwards("m-1")); err != nil {
		t.Errorf("Forward for peer-b: %v", err)
	}
}

// TestPeerClientCallIsForItsNode: another node answers at the address a
// call for home is made to (a reused address). Without verification the
// call leaves, names home in X-Federation-To, and the node there refuses
// it as misdirected, an Unreachable error: never an answer for home, and
// nothing reaches its backend. With mutual TLS the handshake refuses the
// other node's certificate (it does not name home) before the call
// leaves, even when the client identified that node at the address last.
func TestPeerClientCallIsForItsNode(t *testing.T) {
	for _, mtls := range []bool{false, true} {
		t.Run(fmt.Sprintf("mtls=%v", mtls), func(t *testing.T) {
			// peer-b, with its own certificate, at the address.
			p := newPKI(t, homeNode, peerA, peerB)
			b := newFedBackend(peerB, peerA)
			s, err := New(Config{Backend: b, Logger: slog.New(slog.DiscardHandler), RequireClientCert: mtls})
			if err != nil {
				t.Fatal(err)
			}
			srv := startTLS(t, s, p.serverTLS(t, peerB, mtls))
			addr := srv.Listener.Addr().String()
			cfg := PeerClientConfig{Node: peerA, InsecureSkipVerify: true}
			if mtls {
				pair := p.pair(t, peerA)
				cfg = PeerClientConfig{Node: peerA, RootCAs: p.pool, Certificate: &pair}
			}
			c, err := NewPeerClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if mtls {
				// The client knows peer-b is there now: calls for home
				// must still not take it for home.
				if id, err := c.Identity(ctxT(t), addr); err != nil || id.Node != peerB {
					t.Fatalf("Identity = %+v, %v", id, err)
				}
			}
			ctx := ctxT(t)
			check := func(what string, err error) {
				t.Helper()
				if transport.KindOf(err) != transport.Unreachable {
					t.Errorf("%s: err = %v (kind %v), want unreachable", what, err, transport.KindOf(err))
				}
				if !mtls {
					wantCallError(t, what, err, http.StatusMisdirectedRequest, messages.CodeMisdirected, transport.Unreachable)
					if !transport.Misdirected(err) {
						t.Errorf("%s: Misdirected(%v) = false", what, err)
					}
				}
			}
			_, err = c.Health(ctx, toHome(addr), health())
			check("Health", err)
			_, err = c.Registry(ctx, toHome(addr), messages.Registry{Node: peerA, Frontends: []string{}})
			check("Registry", err)
			for _, batch := range []bool{true, false} {
				_, err = c.Forward(ctx, toHome(addr), batch, forwards("m-1", "m-2"))
				check(fmt.Sprintf("Forward batch=%v", batch), err)
				_, err = c.Status(ctx, toHome(addr), batch, reports("m-1", "m-2"))
				check(fmt.Sprintf("Status batch=%v", batch), err)
			}
			if n := b.callCount(); n != 0 {
				t.Errorf("backend calls = %d, want 0", n)
			}
			// Calls for the node that is there go.
			if _, err := c.Health(ctx, transport.Target{Node: peerB, Addr: addr}, health()); err != nil {
				t.Errorf("Health for peer-b: %v", err)
			}
		})
	}
}

// TestPeerClientInsecure: InsecureSkipVerify accepts a self-signed
// certificate that names nobody in particular, without identity first.
func TestPeerClientInsecure(t *testing.T) {
	b := newFedBackend(homeNode, peerA)
	s, err := New(Config{Backend: b, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := certs.EnsureSelfSigned(t.TempDir(), "somewhere-else", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := certs.ServerConfig(certFile, keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	hits := &countPaths{h: s}
	srv := startTLS(t, hits, cfg)
	addr := srv.Listener.Addr().String()

	c, err := NewPeerClient(PeerClientConfig{Node: peerA, InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if h, err := c.Health(ctxT(t), toHome(addr), health()); err != nil || h.Node != homeNode {
		t.Fatalf("Health = %+v, %v", h, err)
	}
	if hits.count(pathIdentity) != 0 {
		t.Error("insecure mode made an identity call first")
	}
	if id, err := c.Identity(ctxT(t), addr); err != nil || id.Node != homeNode {
		t.Fatalf("Identity = %+v, %v", id, err)
	}
}

func TestPeerClientForward(t *testing.T) {
	st := newPeerSetup(t, true)
	c := st.client(t, false, func(cfg *PeerClientConfig) { cfg.SingleConcurrency = 3 })
	ctx := ctxT(t)

	fs := forwards("m-1", "m-2", "m-3", "m-4", "m-5", "m-6", "m-7")
	fs[4].Frontend = "fe-elsewhere" // refused alone: unknown_frontend_here

	for _, batch := range []bool{true, false} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			res, err := c.Forward(ctx, toHome(st.addr), batch, fs)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != len(fs) {
				t.Fatalf("%d results for %d forwards", len(res), len(fs))
			}
			for i, r := range res {
				if r.ID != fs[i].ID {
					t.Errorf("result %d is for %q, want %q (input order)", i, r.ID, fs[i].ID)
				}
				if (r.Error != nil) != (i == 4) {
					t.Errorf("result %d: error %v", i, r.Error)
				}
			}
			if e := res[4].Error; e == nil || e.Code != messages.CodeNotOurFrontend || e.Message == "" {
				t.Errorf("refused message's error = %+v, want %s", e, messages.CodeNotOurFrontend)
			}
		})
	}
	if n := st.hits.count(pathForwardBat); n != 1 {
		t.Errorf("forward_batch requests = %d, want 1", n)
	}
	if n := st.hits.count(pathForward); n != int64(len(fs)) {
		t.Errorf("forward requests = %d, want %d", n, len(fs))
	}
	st.b.mu.Lock()
	if st.b.maxIn > 3 {
		t.Errorf("%d single forwards ran at once, want at most 3", st.b.maxIn)
	}
	st.b.mu.Unlock()

	t.Run("empty", func(t *testing.T) {
		res, err := c.Forward(ctx, toHome(st.addr), false, nil)
		if err != nil || len(res) != 0 {
			t.Errorf("Forward of nothing = %v, %v", res, err)
		}
	})
	t.Run("one single refused transiently fails the call", func(t *testing.T) {
		st.b.set(func(b *fedBackend) { b.refuseID["m-3"] = messages.Errorf(messages.CodeUnavailable, "store down") })
		defer st.b.set(func(b *fedBackend) { delete(b.refuseID, "m-3") })
		_, err := c.Forward(ctx, toHome(st.addr), false, forwards("m-1", "m-2", "m-3", "m-4"))
		wantCallError(t, "Forward", err, 503, messages.CodeUnavailable, transport.Unavailable)
		_, err = c.Forward(ctx, toHome(st.addr), true, forwards("m-1", "m-2", "m-3", "m-4"))
		wantCallError(t, "Forward batch", err, 503, messages.CodeUnavailable, transport.Unavailable)
	})
	t.Run("results out of input order fail the call", func(t *testing.T) {
		// Each verdict would be recorded on another message.
		st.b.set(func(b *fedBackend) { b.reorder = true })
		defer st.b.set(func(b *fedBackend) { b.reorder = false })
		_, err := c.Forward(ctx, toHome(st.addr), true, forwards("m-1", "m-2", "m-3"))
		if err == nil || !strings.Contains(err.Error(), "input order") {
			t.Errorf("Forward batch answered out of order: %v, want an error", err)
		}
	})
	t.Run("a refusal of the caller fails the call", func(t *testing.T) {
		// unknown_peer is about us, not the message: the whole call fails
		// (and is retried) rather than each message failing for good.
		st.b.set(func(b *fedBackend) { b.refuse = messages.Errorf(messages.CodeUnknownPeer, "who?") })
		defer st.b.set(func(b *fedBackend) { b.refuse = nil })
		_, err := c.Forward(ctx, toHome(st.addr), false, forwards("m-1", "m-2"))
		wantCallError(t, "Forward", err, 403, messages.CodeUnknownPeer, transport.Forbidden)
	})
}

// TestPeerClientForwardNeverSendsTextThePeerRefuses: a message holding
// bytes that are not UTF-8 (a Go string may) goes as U+FFFD, as
// encoding/json writes it, so no batch of ours is refused whole for its
// text (400 invalid_request, which the sender would retry until the
// messages waited too long).
func TestPeerClientForwardNeverSendsTextThePeerRefuses(t *testing.T) {
	st := newPeerSetup(t, true)
	c := st.client(t, false)
	for _, batch := range []bool{true, false} {
		fs := forwards("m-text-1", "m-text-2")
		fs[0].Body = "h\xffi\xed\xa0\x80" // not UTF-8; the second, a surrogate's encoding
		res, err := c.Forward(ctxT(t), toHome(st.addr), batch, fs)
		if err != nil || len(res) != 2 || res[0].Error != nil || res[1].Error != nil {
			t.Errorf("batch=%v: Forward = %+v, %v; want both accepted", batch, res, err)
		}
	}
}

// TestPeerClientForwardBatchFitsTheBodyLimit: a batch whose messages
// together pass the peer's 1 MiB request bound (bodies of 64 KiB of '<',
// six bytes each in JSON) goes in several forward_batch requests that
// each fit, and every message is accepted (one request would be refused
// whole with 413 body_too_large, and the same batch sent again and again).
func TestPeerClientForwardBatchFitsTheBodyLimit(t *testing.T) {
	st := newPeerSetup(t, true)
	c := st.client(t, false)
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = fmt.Sprintf("big-%02d", i)
	}
	fs := forwards(ids...)
	for i := range fs {
		fs[i].Body = strings.Repeat("<", messages.MaxBodyLen)
	}
	res, err := c.Forward(ctxT(t), toHome(st.addr), true, fs)
	if err != nil {
		t.Fatalf("Forward of %d messages of %d bytes: %v", len(fs), messages.MaxBodyLen, err)
	}
	for i, r := range res {
		if r.ID != fs[i].ID || r.Error != nil {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if n := st.hits.count(pathForwardBat); n < 5 {
		t.Errorf("forward_batch requests = %d: one request would be over the limit", n)
	}
	// Small messages still go in one request.
	for _, ch := range [][]messages.Forward{forwards("s-1", "s-2", "s-3")} {
		if got := forwardChunks(ch, MaxBody); len(got) != 1 || got[0] != [2]int{0, 3} {
			t.Errorf("forwardChunks of 3 small messages = %v", got)
		}
	}
	if got := forwardChunks(make([]messages.Forward, messages.MaxForwardBatch+1), MaxBody); len(got) != 2 {
		t.Errorf("forwardChunks of %d messages = %v, want 2 requests", messages.MaxForwardBatch+1, got)
	}
}

// TestPeerClientStatusBatchFitsTheBodyLimit: 256 failed reports (what the
// status lane sends at once) whose reasons are 1024 bytes of '&' (six
// bytes each in JSON) pass the peer's 1 MiB request bound together: they go
// in several delivery_status_batch requests that each fit, and every report
// is applied (one request would be refused whole with 413 body_too_large,
// for ever, and each refusal closes the lane).
func TestPeerClientStatusBatchFitsTheBodyLimit(t *testing.T) {
	st := newPeerSetup(t, true)
	c := st.client(t, false)
	rs := reports(ids("long", 256)...)
	for i := range rs {
		rs[i].Status, rs[i].Reason = messages.ReportFailed, strings.Repeat("&", messages.MaxReasonLen)
	}
	res, err := c.Status(ctxT(t), toHome(st.addr), true, rs)
	if err != nil {
		t.Fatalf("Status of %d reports with reasons of %d bytes: %v", len(rs), messages.MaxReasonLen, err)
	}
	for i, r := range res {
		if r.ID != rs[i].ID || r.Outcome != "applied" {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if n := st.hits.count(pathStatusBatch); n < 2 {
		t.Errorf("delivery_status_batch requests = %d: one request would be over the limit", n)
	}
	if got := statusChunks(reports("s-1", "s-2", "s-3"), MaxBody); len(got) != 1 || got[0] != [2]int{0, 3} {
		t.Errorf("statusChunks of 3 short reports = %v", got)
	}
	if got := statusChunks(make([]messages.StatusReport, messages.MaxStatusBatch+1), MaxBody); len(got) != 2 {
		t.Errorf("statusChunks of %d reports = %v, want 2 requests", messages.MaxStatusBatch+1, got)
	}
}

func TestPeerClientStatus(t *testing.T) {
	st := newPeerSetup(t, true)
	c := st.client(t, false)
	ctx := ctxT(t)
	rs := reports("m-1", "m-2", "m-3")
	for _, batch := range []bool{true, false} {
		res, err := c.Status(ctx, toHome(st.addr), batch, rs)
		if err != nil {
			t.Fatalf("batch=%v: %v", batch, err)
		}
		for i, r := range res {
			if r.ID != rs[i].ID || r.Outcome != "applied" {
				t.Errorf("batch=%v: result %d = %+v", batch, i, r)
			}
		}
	}
	if st.hits.count(pathStatusBatch) != 1 || st.hits.count(pathStatus) != 3 {
		t.Errorf("requests: %d batch, %d single; want 1 and 3", st.hits.count(pathStatusBatch), st.hits.count(pathStatus))
	}
	// Results that name other messages than the reports sent, in order,
	// would have their outcomes recorded on the wrong ones: the call fails.
	st.b.set(func(b *fedBackend) { b.reorder = true })
	if _, err := c.Status(ctx, toHome(st.addr), true, rs); err == nil || !strings.Contains(err.Error(), "input order") {
		t.Errorf("Status batch answered out of order: %v, want an error", err)
	}
	st.b.set(func(b *fedBackend) { b.reorder, b.misname = false, true })
	if _, err := c.Status(ctx, toHome(st.addr), true, rs); err == nil || !strings.Contains(err.Error(), "input order") {
		t.Errorf("Status batch answered for other messages: %v, want an error", err)
	}
	if _, err := c.Status(ctx, toHome(st.addr), false, rs); err == nil || !strings.Contains(err.Error(), "for message") {
		t.Errorf("Status answered for another message: %v, want an error", err)
	}
	st.b.set(func(b *fedBackend) { b.misname = false })

	st.b.set(func(b *fedBackend) { b.refuseID["m-2"] = messages.Errorf(messages.CodeOverloaded, "busy") })
	_, err := c.Status(ctx, toHome(st.addr), false, rs)
	wantCallError(t, "Status", err, 429, messages.CodeOverloaded, transport.Busy)
	if ce := (*transport.CallError)(nil); !errors.As(err, &ce) || ce.RetryAfter != time.Second {
		t.Errorf("a 429's Retry-After: %+v, want 1s", ce)
	}
}

// TestPeerClientErrorAnswers: a peer's error answer is a *transport.CallError
// with the code of its error document, or http_<status> when the body is
// not one.
func TestPeerClientErrorAnswers(t *testing.T) {
	st := newPeerSetup(t, true)
	c := st.client(t, false)
	ctx := ctxT(t)

	st.b.set(func(b *fedBackend) {
		b.refuse = messages.Errorf(messages.CodeFederationOff, "federation is off on home")
	})
	_, err := c.Health(ctx, toHome(st.addr), health())
	wantCallError(t, "federation off", err, 403, messages.CodeFederationOff, transport.Forbidden)
	st.b.set(func(b *fedBackend) { b.refuse = nil })

	_, err = c.Health(ctx, toHome(st.addr), messages.Health{Node: peerA, Time: fedTime, Status: "fine"})
	wantCallError(t, "invalid health", err, 400, messages.CodeInvalidRequest, transport.Refused)

	// A proxy or an old node answering something else than the API.
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	})
	st.hits.instead.Store(&page)
	_, err = c.Registry(ctx, toHome(st.addr), messages.Registry{Node: peerA, Frontends: []string{}})
	wantCallError(t, "502 page", err, 502, "http_502", transport.ServerError)
}

// TestPeerClientTimeout: a peer that does not answer fails the call after
// Timeout, as a failure to complete (not an answer); the caller's context
// is honoured too.
func TestPeerClientTimeout(t *testing.T) {
	st := newPeerSetup(t, true)
	block := make(chan struct{})
	st.b.set(func(b *fedBackend) { b.block = block })
	t.Cleanup(func() { close(block) }) // before the server closes
	c := st.client(t, false, func(cfg *PeerClientConfig) { cfg.Timeout = 200 * time.Millisecond })
	if _, err := c.Identity(ctxT(t), st.addr); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := c.Health(ctxT(t), toHome(st.addr), health())
	notCallError(t, "Health", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the call took %v with a 200ms timeout", d)
	}

	// The caller's context: cancelled once the peer has the request.
	entered := make(chan string, 2)
	st.b.set(func(b *fedBackend) { b.entered = entered })
	long := st.client(t, false)
	ctx, cancel := context.WithCancel(ctxT(t))
	go func() {
		<-entered
		cancel()
	}()
	_, err = long.Forward(ctx, toHome(st.addr), false, forwards("m-1", "m-2"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Forward with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestPeerClientConfig(t *testing.T) {
	err := PeerClientConfig{Node: "bad name", MaxConnsPerHost: -1, SingleConcurrency: -1}.Validate()
	for _, want := range []string{"node", "timeout", "CA pool", "max connections", "single concurrency"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to name %s", err, want)
		}
	}
	c, err := NewPeerClient(PeerClientConfig{Node: peerA, InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	def := DefaultPeerClientConfig()
	if c.cfg.Timeout != def.Timeout || c.cfg.MaxConnsPerHost != def.MaxConnsPerHost || c.cfg.SingleConcurrency != def.SingleConcurrency {
		t.Errorf("defaults not filled: %+v", c.cfg)
	}
	if _, err := c.Health(context.Background(), toHome("no-port"), health()); err == nil {
		t.Error("an address without a port was accepted")
	}
}

// TestPeerClientPooledConnectionNeverCarriesACallForAnotherNode: under
// mutual TLS a call requires, during the TLS handshake and so before any
// byte of the request leaves, a certificate naming that node (PeerClient's
// doc, docs/federation.md: protection needs the node now at the address
// upgraded, or mutual TLS at the caller). net/http pools connections by
// address: before each node had its own pool, once a call for peer-b (now
// at the address) had left an idle connection there, a call for home at
// the same address (home's old address, still listed for it) was sent
// over that connection, checked against peer-b at its handshake, and
// reached peer-b. peer-b of the
// previous version (which neither sends nor checks X-Federation-To; here
// the header is removed before the current server sees it) takes home's
// forward and stores it: the caller, which refuses the answer, sends the
// message to home again later, and it exists twice.
func TestPeerClientPooledConnectionNeverCarriesACallForAnotherNode(t *testing.T) {
	p := newPKI(t, homeNode, peerA, peerB)
	b := newFedBackend(peerB, peerA)
	s, err := New(Config{Backend: b, Logger: slog.New(slog.DiscardHandler), RequireClientCert: true})
	if err != nil {
		t.Fatal(err)
	}
	// A callee of the previous version: X-Federation-To is not known.
	old := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(messages.FederationToHeader)
		s.ServeHTTP(w, r)
	})
	hits := &countPaths{h: old}
	srv := startTLS(t, hits, p.serverTLS(t, peerB, true))
	addr := srv.Listener.Addr().String()

	c := p.verifyingClient(t, peerA)

	// peer-b is a's peer at this address: a call for it leaves an idle
	// connection (its certificate names peer-b) in the pool.
	if _, err := c.Health(ctxT(t), transport.Target{Node: peerB, Addr: addr}, health()); err != nil {
		t.Fatalf("Health for peer-b: %v", err)
	}
	// home's actor still calls home's old address, now peer-b's.
	_, err = c.Forward(ctxT(t), toHome(addr), true, forwards("m-1"))
	if err == nil {
		t.Fatal("Forward for home answered by peer-b was taken")
	}
	if n := hits.count(pathForwardBat); n != 0 {
		b.mu.Lock()
		stored := append([]string(nil), b.stored...)
		b.mu.Unlock()
		t.Errorf("a forward_batch meant for home reached peer-b %d time(s) over a connection checked for peer-b (peer-b stored %q; the caller got %v and will send it to home again)", n, stored, err)
	}
	// peer-b's own calls still go, over its pooled connection.
	if _, err := c.Health(ctxT(t), transport.Target{Node: peerB, Addr: addr}, health()); err != nil {
		t.Fatalf("Health for peer-b after the refused call for home: %v", err)
	}
}

// verifyingClient is a peer client of node that verifies its peers under
// p's CA and shows node's certificate; closed at the test's end.
func (p pki) verifyingClient(t *testing.T, node string) *PeerClient {
	t.Helper()
	pair := p.pair(t, node)
	c, err := NewPeerClient(PeerClientConfig{Node: node, RootCAs: p.pool, Certificate: &pair})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPeerClientForgetDropsTheNodesPool: with verification each node
// called gets a pool of its own (an http.Transport and its idle
// connections), and nothing dropped one: a node that left the peers kept
// it for good, so pods replaced under new names made them pile up. Forget
// drops the node's pool and closes its idle connections; the other
// nodes' pools stay, and a later call for the node makes a new one.
func TestPeerClientForgetDropsTheNodesPool(t *testing.T) {
	st := newPeerSetup(t, true)
	c := st.client(t, false)
	pools := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.pools)
	}
	before := pools()
	if _, err := c.Health(ctxT(t), toHome(st.addr), health()); err != nil {
		t.Fatal(err)
	}
	if n := pools(); n != before+1 || st.conns.Load() != 1 {
		t.Fatalf("after a call for home: %d pools (before %d), %d connections, want one more pool and one connection", n, before, st.conns.Load())
	}
	c.Forget(peerB) // not called: nothing to drop
	if n := pools(); n != before+1 {
		t.Fatalf("Forget(%s) left %d pools, want %d (home's stays)", peerB, n, before+1)
	}
	c.Forget(homeNode)
	if n := pools(); n != before {
		t.Errorf("after Forget(%s): %d pools, want %d as before its call", homeNode, n, before)
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.closed.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the idle connection of home's pool was not closed after Forget (%d of %d closed)", st.closed.Load(), st.conns.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Health(ctxT(t), toHome(st.addr), health()); err != nil {
		t.Fatalf("a call for home after Forget: %v", err)
	}
	if n := pools(); n != before+1 || st.conns.Load() != 2 {
		t.Errorf("a call for home after Forget: %d pools, %d connections; want a new pool and connection", n, st.conns.Load())
	}
}

// TestPeerClientKeepsTheAnswersOfTheRequestsThatCompleted: a call split
// into several requests (a batch over the body limit, or the single
// form) whose second request stalls past Timeout fails, and returns with
// the error the results of the request that completed (the others have
// an empty ID): the caller records those and sends only the rest again,
// instead of the same call timing out for ever.
func TestPeerClientKeepsTheAnswersOfTheRequestsThatCompleted(t *testing.T) {
	st := newPeerSetup(t, true)
	c := st.client(t, false, func(cfg *PeerClientConfig) { cfg.Timeout, cfg.SingleConcurrency = 3*time.Second, 1 })
	done := make(chan struct{})
	t.Cleanup(func() { close(done) }) // before the server closes
	var n atomic.Int64
	stall := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			st.hits.h.ServeHTTP(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body) // so that the client's giving up is seen
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
	st.hits.instead.Store(&stall)

	rs := reports(ids("long", 200)...)
	for i := range rs {
		rs[i].Status, rs[i].Reason = messages.ReportFailed, strings.Repeat("&", messages.MaxReasonLen)
	}
	fs := forwards(ids("big", 4)...)
	for i := range fs {
		fs[i].Body = strings.Repeat("<", messages.MaxBodyLen)
	}
	for _, tc := range []struct {
		name  string
		first int // the items of the first request
		call  func(context.Context) ([]string, error)
	}{
		{"status batch", statusChunks(rs, MaxBody)[0][1], func(ctx context.Context) ([]string, error) {
			res, err := c.Status(ctx, toHome(st.addr), true, rs)
			return replyIDs(res, func(r messages.StatusReply) string { return r.ID }), err
		}},
		{"forward batch", forwardChunks(fs, MaxBody)[0][1], func(ctx context.Context) ([]string, error) {
			res, err := c.Forward(ctx, toHome(st.addr), true, fs)
			return replyIDs(res, func(r messages.ForwardResult) string { return r.ID }), err
		}},
		{"status single", 1, func(ctx context.Context) ([]string, error) {
			res, err := c.Status(ctx, toHome(st.addr), false, rs[:3])
			return replyIDs(res, func(r messages.StatusReply) string { return r.ID }), err
		}},
		{"forward single", 1, func(ctx context.Context) ([]string, error) {
			res, err := c.Forward(ctx, toHome(st.addr), false, fs[:3])
			return replyIDs(res, func(r messages.ForwardResult) string { return r.ID }), err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n.Store(0)
			got, err := tc.call(ctxT(t))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want the second request's timeout", err)
			}
			if tc.first < 1 || tc.first >= len(got) {
				t.Fatalf("%d results, the first request carried %d: want a call of several requests", len(got), tc.first)
			}
			for i, id := range got {
				if answered := id != ""; answered != (i < tc.first) {
					t.Errorf("result %d = %q: want the answers of the first request's %d items only", i, id, tc.first)
				}
			}
		})
	}
}

// ids is n message ids "prefix-000"...
func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// replyIDs is the ID of each result.
func replyIDs[R any](res []R, id func(R) string) []string {
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = id(r)
	}
	return out
}

// TestAnswerThatRacedTheDeadlineIsTheCallNotCompleting: once the call's
// deadline has struck, an answer net/http still hands over may be the
// peer's reaction to our giving up. A handler that returns without a word
// then answers 200 with an empty body, and a body may be cut short: the
// call reports the deadline (so a batch is halved and the rest retried),
// not a peer that answers nonsense. A complete 2xx document is the peer's
// answer, whenever it came.
func TestAnswerThatRacedTheDeadlineIsTheCallNotCompleting(t *testing.T) {
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-expired.Done()
	answer := func(status int, body string) *http.Response {
		return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}}
	}
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"200 without a word", "", http.StatusOK},
		{"200 cut short", `[{"id":"m-1","sta`, http.StatusOK},
		{"an error answer", `{"error":{"code":"shutting_down"}}`, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out []messages.StatusReply
			if _, err := readAnswer(expired, answer(tc.status, tc.body), "POST", "/x", &out); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want the deadline", err)
			}
		})
	}
	t.Run("204 of a call without a document", func(t *testing.T) {
		if _, err := readAnswer(expired, answer(http.StatusNoContent, ""), "POST", "/x", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the deadline", err)
		}
		if _, err := readAnswer(context.Background(), answer(http.StatusNoContent, ""), "POST", "/x", nil); err != nil {
			t.Errorf("in time: err = %v, want the peer's answer", err)
		}
	})
	t.Run("a complete 200 document", func(t *testing.T) {
		var out []messages.StatusReply
		if _, err := readAnswer(expired, answer(http.StatusOK, `[{"id":"m-1"}]`), "POST", "/x", &out); err != nil || len(out) != 1 || out[0].ID != "m-1" {
			t.Errorf("got %+v, %v; want the peer's answer", out, err)
		}
	})
	t.Run("200 without a word, in time", func(t *testing.T) {
		var out []messages.StatusReply
		_, err := readAnswer(context.Background(), answer(http.StatusOK, ""), "POST", "/x", &out)
		if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not the one expected") {
			t.Errorf("err = %v, want a peer that answered a document that is not the one expected", err)
		}
	})
}
