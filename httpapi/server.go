package httpapi

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/supervision/ratelog"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// Config configures the gateway.
type Config struct {
	Backend Backend
	// Credentials, when set, are the credentials in force (the node's:
	// --api-token, the --credentials file or the store), asked on every
	// call. Without it, APIToken alone: when set, it is required as a
	// Bearer token on /api/* (except the federation API, which
	// authenticates peers by certificate) and is an admin; when empty too,
	// the API is open.
	Credentials Credentials
	APIToken    string
	// Now is the clock of the submit rates (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger
	// RequestTimeout bounds a request's wait for the actors (zero:
	// DefaultRequestTimeout); a long-poll may add its own wait on top.
	RequestTimeout time.Duration
	// RequireClientCert is set with --tls-ca (mutual TLS): every
	// /api/federation/* request, identity included, must carry a client
	// certificate verified against the CA (the TLS listener verifies one
	// when given, see certs.ServerConfig), and X-Federation-Node must be
	// its CN or one of its DNS names. Without it the header is trusted
	// (--insecure-skip-verify, development only).
	RequireClientCert bool
	// ClientCAs, with RequireClientCert, is the CA pool in force (the
	// node's --tls-ca, reloaded while it runs): a client certificate
	// verified at the handshake is verified against it again on every
	// federation request (by the wall clock, as the handshake does), so
	// that a connection opened before the bundle changed, or before the
	// certificate expired, is not served for ever (403
	// client_certificate_required). Nil: the handshake's verification
	// stands for the connection's life.
	ClientCAs func() *x509.CertPool
	// Ring, when set, serves the ring API (/api/ring/...); without it those
	// paths answer 404.
	Ring RingBackend
	// Tracing makes the submit's HTTP server span (an incoming
	// traceparent is its parent); nil makes none.
	Tracing *telemetry.Tracing
}

// Server is the gateway's handler.
type Server struct {
	cfg    Config
	log    *slog.Logger
	router *mux.Router
	// handler is the router behind the cross-origin check (crossOrigin).
	handler http.Handler
	// refused logs refused API tokens at a bounded rate: someone guessing
	// tokens must not flood the log, a misconfigured client must show;
	// forbidden does the same for calls a role does not allow, crossSite
	// for browsers' cross-origin writes, and peerRefused for federation
	// and ring callers refused for who they claim to be (refuse).
	refused, forbidden, crossSite, peerRefused *ratelog.Log
	creds                                      Credentials
	limiter                                    *auth.Limiter
	// roles of each guarded route, by "METHOD /template".
	roles map[string][]messages.Role
	polls livePolls
	// clientCerts verifies federation callers against ClientCAs.
	clientCerts clientCerts
	// base is the base context of the requests of an http.Server that
	// serves s with BaseContext: it carries stop, which Stopping ends, to
	// the reading of request bodies (readUpTo).
	base       context.Context
	endReading context.CancelFunc
}

// DefaultRequestTimeout bounds a request's wait for the actors: 30 s, far
// beyond a commit; a request still waiting then gets an error instead of
// hanging on a stuck node.
const DefaultRequestTimeout = 30 * time.Second

// New builds the gateway.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil || cfg.Logger == nil {
		return nil, errors.New("httpapi: Backend and Logger are required")
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "httpapi"), creds: cfg.Credentials,
		limiter: auth.NewLimiter(), roles: map[string][]messages.Role{}}
	stop, end := context.WithCancel(context.Background())
	s.base, s.endReading = context.WithValue(context.Background(), stopKey{}, stop), end
	if s.creds == nil {
		var creds []messages.Credential
		if cfg.APIToken != "" {
			creds = append(creds, TokenCredential(cfg.APIToken))
		}
		s.creds = staticCredentials{auth.NewSet(creds, false)}
	}
	// Each kind of refusal is logged at most 10 a minute, then counted.
	for _, l := range []struct {
		to           **ratelog.Log
		msg, summary string
	}{
		{&s.refused, "api token refused", "api token refusals not logged one by one"},
		{&s.forbidden, "api call forbidden to its credential's role", "forbidden api calls not logged one by one"},
		{&s.crossSite, "cross-origin api call refused", "cross-origin api calls not logged one by one"},
		{&s.peerRefused, "federation caller refused", "federation caller refusals not logged one by one"},
	} {
		var err error
		if *l.to, err = ratelog.New(ratelog.Config{Logger: s.log, Level: slog.LevelWarn,
			Msg: l.msg, Summary: l.summary, Burst: 10, Window: time.Minute}); err != nil {
			return nil, err
		}
	}
	s.router = s.routes()
	s.handler = s.crossOrigin(s.headAsGet(s.router))
	return s, nil
}

// headAsGet serves a HEAD request of a path the router serves GET on as
// that GET, guard and all (RFC 9110: HEAD is GET without the body;
// net/http's server drops what a handler writes to a HEAD's body). The
// routes name GET alone, and a HEAD of /healthz, /readyz or / (a load
// balancer's or uptime monitor's check) was 405. A HEAD of a path served
// without GET stays a HEAD: 405, naming HEAD.
func (s *Server) headAsGet(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			get := r.WithContext(r.Context())
			get.Method = http.MethodGet
			var m mux.RouteMatch
			if s.router.Match(get, &m) && m.MatchErr == nil {
				r = get
			}
		}
		h.ServeHTTP(w, r)
	})
}

// crossOrigin refuses a browser's unsafe request (POST, PUT, DELETE) made
// by a page of another origin: a node without credentials, or a browser
// that holds a session some other way, would otherwise do what any web
// page asks, since a text/plain or form POST crosses origins without a
// CORS preflight. Go's CrossOriginProtection tells them by Sec-Fetch-Site
// (every browser since 2023), else by Origin against Host. A request with
// neither (curl, scripts, peers, frontends) is no browser's and passes, so
// no content type is refused; the node's own web UI is same-origin.
func (s *Server) crossOrigin(h http.Handler) http.Handler {
	c := http.NewCrossOriginProtection()
	c.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.crossSite.Write("remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path,
			"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "origin", r.Header.Get("Origin"))
		s.fail(w, r, messages.Errorf(messages.CodeCrossOrigin,
			"a browser page of another origin may not call this node's API (Sec-Fetch-Site %q, Origin %q, Host %q)",
			r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin"), r.Host))
	}))
	return c.Handler(h)
}

// BaseContext is the http.Server's BaseContext for a server of s: its
// requests' bodies are then read until Stopping at most.
func (s *Server) BaseContext(net.Listener) context.Context { return s.base }

// Stopping ends the reading of request bodies (the node's stop calls it
// before the server's Shutdown, which waits for the requests under way): a
// body still coming is no longer waited for (up to bodyWait, 30 s, for a
// client that stopped sending, a peer cut off mid-request), and its
// request, nothing done for it yet, is answered 503 unavailable and its
// connection closed; so is a request whose body comes from now on. A
// request whose body came goes on (a submit gets its commit and its 202).
func (s *Server) Stopping() { s.endReading() }

// Close reports what the rate-limited logs still count (the node calls it
// when it stops).
func (s *Server) Close() {
	s.refused.Close()
	s.forbidden.Close()
	s.crossSite.Close()
	s.peerRefused.Close()
}

// ServeHTTP implements http.Handler. A request with a body gets its
// bodyWait before any handler runs: net/http reads what is left of a body
// its handler did not read (a 401, 404, GET /healthz) before it writes
// the answer, with no deadline once the headers are in, so a client that
// sent a Content-Length and no body held its connection for ever. A
// handler that reads the body sets its own (readUpTo); one that does not
// leaves this one, and its answer goes out when the body came or the
// wait ran out (the connection is then closed).
//
// The answer gets answerWait from its first byte (boundedAnswer); until
// then no write deadline stands (one a previous answer on the connection
// left would fail a 100 Continue).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if r.ContentLength != 0 {
		_ = rc.SetReadDeadline(time.Now().Add(bodyWait))
	}
	_ = rc.SetWriteDeadline(time.Time{})
	s.handler.ServeHTTP(&boundedAnswer{ResponseWriter: w, rc: rc}, r)
}

// boundedAnswer sets answerWait as the write deadline when its handler
// starts the answer (its header, or its body's first bytes).
type boundedAnswer struct {
	http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (b *boundedAnswer) start() {
	if !b.started {
		b.started = true
		_ = b.rc.SetWriteDeadline(time.Now().Add(answerWait))
	}
}

func (b *boundedAnswer) WriteHeader(code int) {
	if code >= 200 { // an informational answer (1xx) is not the answer
		b.start()
	}
	b.ResponseWriter.WriteHeader(code)
}

func (b *boundedAnswer) Write(p []byte) (int, error) {
	b.start()
	return b.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushes, full duplex).
func (b *boundedAnswer) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// Router exposes the routes (for route inventory tests and the OpenAPI check).
func (s *Server) Router() *mux.Router { return s.router }

func (s *Server) routes() *mux.Router {
	// A path is matched as sent, never cleaned: gorilla/mux would answer
	// one with an empty segment or a dot segment with a bare 301 to its
	// clean form, another route (POST /api/messages//resubmit, a single
	// resubmit of no id, to the bulk resubmit's path) and no error
	// document. Such a path names nothing: 404 not_found.
	r := mux.NewRouter().SkipClean(true)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.fail(w, req, messages.Errorf(messages.CodeNotFound, "no such path: %s", req.URL.Path))
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.fail(w, req, messages.Errorf(messages.CodeMethodNotAllow, "method %s is not allowed on %s", req.Method, req.URL.Path))
	})

	r.HandleFunc("/healthz", s.healthz).Methods(http.MethodGet)
	r.HandleFunc("/readyz", s.readyz).Methods(http.MethodGet)
	r.HandleFunc("/", s.ui).Methods(http.MethodGet)
	r.HandleFunc("/ui.css", uiAsset(uiStyle, "text/css; charset=utf-8")).Methods(http.MethodGet)
	r.HandleFunc("/ui.js", uiAsset(uiScript, "text/javascript; charset=utf-8")).Methods(http.MethodGet)
	// Browsers ask for it on their own; no icon is better than a 404 in the console.
	r.HandleFunc("/favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }).Methods(http.MethodGet)

	// The API's routes sit on the main router (a gorilla/mux subrouter
	// answers a method mismatch with 404 instead of 405). Each names the
	// roles that may call it (access.go).
	api := func(path string, h http.HandlerFunc, method string, roles []messages.Role) {
		s.guarded(r, "/api"+path, h, method, roles)
	}
	api("/messages", s.submit, http.MethodPost, submitters)
	api("/messages", s.listMessages, http.MethodGet, messageReaders)
	api("/messages/resubmit", s.resubmitBulk, http.MethodPost, resubmitters)
	api("/messages/{id}", s.getMessage, http.MethodGet, messageReaders)
	api("/messages/{id}/resubmit", s.resubmit, http.MethodPost, resubmitters)
	api("/status", s.status, http.MethodGet, readers)
	api("/stats/timeline", s.timeline, http.MethodGet, readers)
	api("/routes", s.listRoutes, http.MethodGet, readers)
	api("/routes/{prefix}", s.putRoute, http.MethodPut, adminOnly)
	api("/routes/{prefix}", s.deleteRoute, http.MethodDelete, adminOnly)
	api("/frontends", s.listFrontends, http.MethodGet, readers)
	api("/frontends/{name}", s.putFrontend, http.MethodPut, frontendRoles)
	api("/frontends/{name}", s.deleteFrontend, http.MethodDelete, adminOnly)
	api("/frontends/{name}/poll", s.poll, http.MethodPost, frontendRoles)
	api("/frontends/{name}/ack", s.ack, http.MethodPost, frontendRoles)
	api("/peers", s.listPeers, http.MethodGet, readers)
	api("/audit", s.auditTrail, http.MethodGet, readers)
	api("/whoami", s.whoami, http.MethodGet, allRoles)
	api("/openapi.json", s.openAPI, http.MethodGet, allRoles)
	s.federationRoutes(r)
	s.ringRoutes(r)
	return r
}

// guarded serves h on path and method to the roles given (guard).
func (s *Server) guarded(r *mux.Router, path string, h http.Handler, method string, roles []messages.Role) {
	s.roles[method+" "+path] = roles
	if method == http.MethodPost && path == submitPath {
		// The submit starts (or continues) the message's trace; inside
		// the guard, so that only a caller let in makes a span (anyone
		// who reaches the port could otherwise fill the span queue).
		h = s.cfg.Tracing.Handler(h, submitSpan)
	}
	r.Handle(path, s.guard(roles, h)).Methods(method)
}

// submitPath is the submit's route; submitSpan names its server span.
const (
	submitPath = "/api/messages"
	submitSpan = telemetry.SpanSubmit
)

// fail answers err. A body over the limit is answered 413 and then read
// and discarded up to a bound (linger), so that a client that sends its
// whole body before it reads gets the answer instead of a reset
// connection.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, s.log, r, err)
	var e *messages.Error
	if errors.As(err, &e) && e.Code == messages.CodeBodyTooLarge {
		linger(w, r)
	}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	if err := s.cfg.Backend.Ready(ctx); err != nil {
		s.fail(w, r, messages.Errorf(messages.CodeUnavailable, "not ready: %v", err))
		return
	}
	doc := map[string]string{"status": "ready"}
	doc["storage"], doc["storage_reason"] = s.cfg.Backend.Storage()
	if doc["storage_reason"] == "" {
		delete(doc, "storage_reason")
	}
	doc["bus"], doc["bus_reason"] = s.cfg.Backend.Bus()
	if doc["bus_reason"] == "" {
		delete(doc, "bus_reason")
	}
	writeJSON(w, http.StatusOK, doc)
}
