package httpapi

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/supervision/ratelog"
)

// Config configures the gateway.
type Config struct {
	Backend Backend
	// APIToken, when set, is required as a Bearer token on /api/* (except
	// the federation API, which authenticates peers by certificate).
	APIToken string
	Logger   *slog.Logger
	// RequestTimeout bounds a request's wait for the actors (default 30s);
	// a long-poll may add its own wait on top.
	RequestTimeout time.Duration
	// RequireClientCert is set with --tls-ca (mutual TLS): every
	// /api/federation/* request, identity included, must carry a client
	// certificate verified against the CA (the TLS listener verifies one
	// when given, see certs.ServerConfig), and X-Federation-Node must be
	// its CN or one of its DNS names. Without it the header is trusted
	// (--insecure-skip-verify, development only).
	RequireClientCert bool
	// Ring, when set, serves the ring API (/api/ring/...); without it those
	// paths answer 404.
	Ring RingBackend
}

// Server is the gateway's handler.
type Server struct {
	cfg    Config
	log    *slog.Logger
	router *mux.Router
	// refused logs refused API tokens at a bounded rate: someone guessing
	// tokens must not flood the log, a misconfigured client must show.
	refused *ratelog.Log
}

// New builds the gateway.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil || cfg.Logger == nil {
		return nil, errors.New("httpapi: Backend and Logger are required")
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "httpapi")}
	var err error
	if s.refused, err = ratelog.New(ratelog.Config{Logger: s.log, Level: slog.LevelWarn,
		Msg: "api token refused", Summary: "api token refusals not logged one by one",
		Burst: 10, Window: time.Minute}); err != nil {
		return nil, err
	}
	s.router = s.routes()
	return s, nil
}

// Close reports what the rate-limited logs still count (the node calls it
// when it stops).
func (s *Server) Close() { s.refused.Close() }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Router exposes the routes (for route inventory tests and the OpenAPI check).
func (s *Server) Router() *mux.Router { return s.router }

func (s *Server) routes() *mux.Router {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.fail(w, req, messages.Errorf(messages.CodeNotFound, "no such path: %s", req.URL.Path))
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.fail(w, req, messages.Errorf(messages.CodeMethodNotAllow, "method %s is not allowed on %s", req.Method, req.URL.Path))
	})

	r.HandleFunc("/healthz", s.healthz).Methods(http.MethodGet)
	r.HandleFunc("/readyz", s.readyz).Methods(http.MethodGet)
	r.HandleFunc("/", s.ui).Methods(http.MethodGet)
	// Browsers ask for it on their own; no icon is better than a 404 in the console.
	r.HandleFunc("/favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }).Methods(http.MethodGet)

	// The API's routes sit on the main router (a gorilla/mux subrouter
	// answers a method mismatch with 404 instead of 405).
	api := func(path string, h http.HandlerFunc, method string) {
		r.Handle("/api"+path, s.auth(h)).Methods(method)
	}
	api("/messages", s.submit, http.MethodPost)
	api("/messages", s.listMessages, http.MethodGet)
	api("/messages/resubmit", s.resubmitBulk, http.MethodPost)
	api("/messages/{id}", s.getMessage, http.MethodGet)
	api("/messages/{id}/resubmit", s.resubmit, http.MethodPost)
	api("/status", s.status, http.MethodGet)
	api("/stats/timeline", s.timeline, http.MethodGet)
	api("/routes", s.listRoutes, http.MethodGet)
	api("/routes/{prefix}", s.putRoute, http.MethodPut)
	api("/routes/{prefix}", s.deleteRoute, http.MethodDelete)
	api("/frontends", s.listFrontends, http.MethodGet)
	api("/frontends/{name}", s.putFrontend, http.MethodPut)
	api("/frontends/{name}", s.deleteFrontend, http.MethodDelete)
	api("/frontends/{name}/poll", s.poll, http.MethodPost)
	api("/frontends/{name}/ack", s.ack, http.MethodPost)
	api("/peers", s.listPeers, http.MethodGet)
	api("/openapi.json", s.openAPI, http.MethodGet)
	s.federationRoutes(r)
	s.ringRoutes(r)
	return r
}

// auth requires the API token on every /api/* path but the federation API.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.APIToken == "" {
		return next
	}
	want := []byte("Bearer " + s.cfg.APIToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/federation/") {
			next.ServeHTTP(w, r)
			return
		}
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			// Missing and wrong are told apart (the caller knows which it
			// sent); the log names the caller's address, never a token.
			why, msg := "wrong", "the API token is not valid (Authorization: Bearer <token> must carry the node's --api-token)"
			if len(got) == 0 {
				why, msg = "missing", "an API token is required: Authorization: Bearer <token>"
			}
			s.refused.Write("token", why, "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
			s.fail(w, r, messages.Errorf(messages.CodeUnauthorized, "%s", msg))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, s.log, r, err)
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
