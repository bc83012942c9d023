package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
)

// Who may call what. Every client and operator route names the roles that
// may call it (routes, below; the OpenAPI document states the same as
// x-switchboard-roles on each operation, docs/api.md in its table of calls
// and roles, and tests hold the gateway to both for every route and
// role). A call is let in, in order:
//
//  1. Authentication: the Bearer token names a credential of the current
//     Set (401 unauthorized otherwise). A node without any credential is
//     open: every caller is Anonymous, an admin.
//  2. The route's roles: the credential's role must be one of them (403
//     forbidden, naming the roles the call needs).
//  3. In the handler, what the role may touch: a frontend credential only
//     its bound frontends (403 forbidden); a client only the messages it
//     submitted (another's reads as not_found, so that ids of others'
//     messages are not revealed), at its submit rate (429 rate_limited).
//
// A refused call reaches no backend call: it changes nothing.

// Roles of the routes, from the widest grant down.
var (
	allRoles       = messages.AllRoles
	adminOnly      = []messages.Role{messages.RoleAdmin}
	readers        = []messages.Role{messages.RoleAdmin, messages.RoleOperator}
	resubmitters   = []messages.Role{messages.RoleAdmin, messages.RoleOperator}
	submitters     = []messages.Role{messages.RoleAdmin, messages.RoleClient}
	messageReaders = []messages.Role{messages.RoleAdmin, messages.RoleOperator, messages.RoleClient}
	frontendRoles  = []messages.Role{messages.RoleAdmin, messages.RoleFrontend}
)

// Credentials gives the gateway the credentials in force now: the node
// replaces its Set when the credentials file or the store changes.
type Credentials interface {
	Current() *auth.Set
}

// staticCredentials is Config.APIToken alone (or nothing: open).
type staticCredentials struct{ set *auth.Set }

func (c staticCredentials) Current() *auth.Set { return c.set }

// TokenCredential is the credential --api-token stands for: one admin.
func TokenCredential(token string) messages.Credential {
	return messages.Credential{Name: messages.ReservedCredential, Role: messages.RoleAdmin, TokenHash: auth.Hash(token)}
}

type principalKey struct{}

// principal is the caller of r, as guard let it in (Anonymous on routes
// without a guard).
func principal(r *http.Request) auth.Principal {
	if p, ok := r.Context().Value(principalKey{}).(auth.Principal); ok {
		return p
	}
	return auth.Anonymous
}

// guard lets a call in as described above (steps 1 and 2).
func (s *Server) guard(roles []messages.Role, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.admit(w, r, s.creds.Current(), roles)
		if !ok {
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// refusal is why authorize refuses a call.
type refusal int

const (
	admitted     refusal = iota
	tokenMissing         // 401: no Authorization header
	tokenWrong           // 401: a header that names no credential of the set
	roleRefused          // 403: the credential's role may not make the call
)

// authorize is steps 1 and 2 for a call with the Authorization header
// under set: its principal (Anonymous on an open set), or why it is
// refused.
func authorize(set *auth.Set, header string, roles []messages.Role) (auth.Principal, refusal) {
	if set.Open() {
		return auth.Anonymous, admitted
	}
	if token, bearer := bearerToken(header); bearer {
		if p, ok := set.Authenticate(token); ok {
			if !p.Has(roles) {
				return p, roleRefused
			}
			return p, admitted
		}
	}
	if header == "" {
		return auth.Principal{}, tokenMissing
	}
	return auth.Principal{}, tokenWrong
}

// bearerToken is the token of an Authorization header of the Bearer
// scheme. An authentication scheme's name is case-insensitive (RFC 9110
// 11.1), and one or more spaces part it from the token: a client or proxy
// that sends "bearer <token>" with the right token must not be refused.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(token, " "), true
}

// admit is authorize for r under set; a refusal is answered (and logged)
// and admit returns false.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, set *auth.Set, roles []messages.Role) (auth.Principal, bool) {
	p, why := authorize(set, r.Header.Get("Authorization"), roles)
	switch why {
	case tokenMissing, tokenWrong:
		// Missing and wrong are told apart (the caller knows which it
		// sent); the log names the caller's address, never a token.
		what, msg := "wrong", "the API token is not valid (Authorization: Bearer <token> must carry the node's --api-token or the token of one of its credentials)"
		if why == tokenMissing {
			what, msg = "missing", "an API token is required: Authorization: Bearer <token>"
		}
		s.refused.Write("token", what, "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
		s.fail(w, r, messages.Errorf(messages.CodeUnauthorized, "%s", msg))
		return p, false
	case roleRefused:
		s.forbid(w, r, p, fmt.Sprintf("this call needs the role %s", roleList(roles)))
		return p, false
	}
	return p, true
}

// forbid answers 403 forbidden for p and logs it at a bounded rate.
func (s *Server) forbid(w http.ResponseWriter, r *http.Request, p auth.Principal, why string) {
	s.forbidden.Write("credential", p.Name, "role", p.Role, "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
	s.fail(w, r, messages.Errorf(messages.CodeForbidden, "credential %q has the role %s: %s", p.Name, p.Role, why))
}

// bound refuses (403, and false) a call for frontend by a credential not
// bound to it.
func (s *Server) bound(w http.ResponseWriter, r *http.Request, frontend string) bool {
	return s.boundAs(w, r, principal(r), frontend)
}

// boundAs is bound for the principal p.
func (s *Server) boundAs(w http.ResponseWriter, r *http.Request, p auth.Principal, frontend string) bool {
	if p.Bound(frontend) {
		return true
	}
	s.forbid(w, r, p, fmt.Sprintf("it may act only for the frontends %s, not %q (the role admin may act for all)",
		strings.Join(p.Frontends, ", "), frontend))
	return false
}

// ownOnly reports whether r's caller sees only the messages it submitted.
func ownOnly(r *http.Request) (string, bool) {
	p := principal(r)
	return p.Name, p.Role == messages.RoleClient
}

// submitAllowed takes one submit from the caller's rate, if it has one.
func (s *Server) submitAllowed(r *http.Request) error {
	p := principal(r)
	if p.SubmitRate <= 0 {
		return nil
	}
	ok, wait := s.limiter.Allow(p.Name, p.SubmitRate, s.cfg.Now())
	if ok {
		return nil
	}
	return retryAfter(messages.Errorf(messages.CodeRateLimited,
		"credential %q may submit %g messages a second; retry after %s", p.Name, p.SubmitRate, wait.Round(time.Millisecond)), wait)
}

// submitRefused gives back the submit submitAllowed took when the
// backend refused the submit as malformed (400: a clock check, validity
// passed or deliver_after too late, which needs the node): such a submit
// uses none of the rate.
func (s *Server) submitRefused(r *http.Request, err error) {
	if p := principal(r); messages.Malformed(err) {
		s.limiter.Refund(p.Name, p.SubmitRate)
	}
}

func roleList(roles []messages.Role) string {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// whoamiReply is the document of GET /api/whoami: the caller's credential
// (never its token), and whether the node requires one at all.
type whoamiReply struct {
	Name       string        `json:"name"`
	Role       messages.Role `json:"role"`
	Frontends  []string      `json:"frontends"`
	SubmitRate float64       `json:"submit_rate,omitempty"`
	// Open is true on a node without credentials: anyone is an admin.
	Open bool `json:"open"`
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	doc := whoamiReply{Name: p.Name, Role: p.Role, Frontends: p.Frontends, SubmitRate: p.SubmitRate, Open: s.creds.Current().Open()}
	if doc.Frontends == nil {
		doc.Frontends = []string{}
	}
	writeJSON(w, http.StatusOK, doc)
}

// RouteRoles is the roles each guarded route lets in, by "METHOD
// /template" (for the route x role tests and the OpenAPI check).
func (s *Server) RouteRoles() map[string][]messages.Role {
	out := make(map[string][]messages.Role, len(s.roles))
	for k, v := range s.roles {
		out[k] = slices.Clone(v)
	}
	return out
}

// A long-poll waits up to a minute, and a credential may be revoked (or
// its role or frontends changed) meanwhile. The node puts new credentials
// in force through ChangeCredentials, which first ends the polls under
// way whose caller they no longer let poll. Ended, a waiting poll is given
// no work (a delivery worker drops a poll whose request has ended: its
// work stays at hand for the next poll, no attempt spent), and it is
// answered as the guard answers its caller now (401 or 403). A poll that
// starts as the change is made is checked once registered, under the same
// lock: either the change ends it or it sees the change in force. A poll
// the worker answered before the change keeps its answer: those messages
// were leased while the caller could poll.

// livePolls are the long-polls under way.
type livePolls struct {
	mu sync.Mutex
	m  map[*livePoll]struct{}
}

// livePoll is a long-poll: its caller's Authorization header, its
// frontend, and what ends it.
type livePoll struct {
	header, frontend string
	end              context.CancelFunc
}

// allowed reports whether set lets p's caller poll its frontend.
func (p *livePoll) allowed(set *auth.Set) bool {
	pr, why := authorize(set, p.header, frontendRoles)
	return why == admitted && pr.Bound(p.frontend)
}

// addPoll registers p until the returned func is called, and reports
// whether the credentials in force let its caller poll.
func (s *Server) addPoll(p *livePoll) (remove func(), allowed bool) {
	s.polls.mu.Lock()
	defer s.polls.mu.Unlock()
	if s.polls.m == nil {
		s.polls.m = map[*livePoll]struct{}{}
	}
	s.polls.m[p] = struct{}{}
	return func() {
		s.polls.mu.Lock()
		defer s.polls.mu.Unlock()
		delete(s.polls.m, p)
	}, p.allowed(s.creds.Current())
}

// pollCredentials is the credentials in force for a poll's check once it
// ended: read under the lock, so that a poll ChangeCredentials ended sees
// the credentials that ended it.
func (s *Server) pollCredentials() *auth.Set {
	s.polls.mu.Lock()
	defer s.polls.mu.Unlock()
	return s.creds.Current()
}

// ChangeCredentials puts next in force by calling apply (which makes
// Credentials.Current return it), after ending the long-polls under way
// whose caller next would not let poll (see livePolls).
func (s *Server) ChangeCredentials(next *auth.Set, apply func()) {
	s.polls.mu.Lock()
	defer s.polls.mu.Unlock()
	for p := range s.polls.m {
		if !p.allowed(next) {
			p.end()
		}
	}
	apply()
}
