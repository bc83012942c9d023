package httpapi

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// List limits of GET /api/messages.
const (
	defaultListLimit = 50
	maxListLimit     = 1000
)

func (s *Server) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
}

// submitReply is the 202 document of a new message.
type submitReply struct {
	ID    string         `json:"id"`
	State messages.State `json:"state"`
}

// submitRequest is the body of a submit: a submission whose id left out
// is one the node makes, and whose id given as "" or null is refused. It
// was read as left out, so a client that sent "id": "" meaning an id had
// each retry stored as another message.
type submitRequest struct {
	messages.Submission
	ID givenString `json:"id"`
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var req submitRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	sub := req.Submission
	if req.ID.Given {
		if req.ID.Value == "" {
			s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest,
				"id is given empty or null: give 1-128 letters, digits, '.', '_', ':' or '-', or leave id out for the node to make one"))
			return
		}
		sub.ID = req.ID.Value
	}
	// A submit the node refuses as malformed uses none of the client's
	// rate: the rate is taken only for a valid one, and given back when
	// the backend refuses it as malformed (it validates it too, and checks
	// what needs the node's clock and settings: its validity, its
	// deliver_after; a retry of a stored message passes those).
	if err := sub.Validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.submitAllowed(r); err != nil {
		s.fail(w, r, err)
		return
	}
	if !s.creds.Current().Open() {
		sub.SubmittedBy = principal(r).Name
	}
	// The submit's span, when sampled, is the parent of the message's
	// later spans (on this node and its peers).
	sub.Trace = telemetry.Sampled(r.Context())
	ctx, cancel := s.ctx(r)
	defer cancel()
	m, created, err := s.cfg.Backend.Submit(ctx, sub)
	if err != nil {
		s.submitRefused(r, err)
		s.fail(w, r, err)
		return
	}
	if !created {
		writeJSON(w, http.StatusOK, m)
		return
	}
	writeJSON(w, http.StatusAccepted, submitReply{ID: m.ID, State: m.State})
}

// A path's message id, route prefix or frontend name that no stored
// entry can have is answered not_found before a store is asked about it:
// Postgres refuses text holding NUL or bytes that are not UTF-8 as an
// error (SQLSTATE 22021), which the actors making a change answer
// unavailable, a 503 that tells the caller to repeat the very request.
var (
	messageID    = pathParam{messages.ValidID, "no message with id %q"}
	routePrefix  = pathParam{messages.ValidPrefix, "no route with prefix %q"}
	frontendName = pathParam{messages.ValidName, "no frontend named %q"}
)

// pathParam is a path parameter that names a stored entry: valid tells
// whether one can have the value, notFound is the not_found message (%q
// for the value), the one the node gives for an entry it does not have.
type pathParam struct {
	valid    func(string) bool
	notFound string
}

// none is the not_found of v.
func (p pathParam) none(v string) error {
	return messages.Errorf(messages.CodeNotFound, p.notFound, v)
}

// of is the path parameter of r under name, or its not_found when no
// stored entry can have it.
func (p pathParam) of(r *http.Request, name string) (string, error) {
	v := mux.Vars(r)[name]
	if !p.valid(v) {
		return v, p.none(v)
	}
	return v, nil
}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request) {
	id, err := messageID.of(r, "id")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	m, err := s.cfg.Backend.Message(ctx, id)
	if name, own := ownOnly(r); err == nil && own && m.SubmittedBy != name {
		// Another client's message is not told apart from none.
		err = messageID.none(id)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if m.History == nil {
		m.History = []messages.HistoryEntry{}
	}
	writeJSON(w, http.StatusOK, m)
}

// listReply is the document of GET /api/messages; next_cursor is empty on
// the last page.
type listReply struct {
	Messages   []messages.Message `json:"messages"`
	NextCursor string             `json:"next_cursor"`
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) {
	submittedBy := ""
	if name, own := ownOnly(r); own {
		submittedBy = name
	}
	v, err := queryValues(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := listQueryOf(v, submittedBy)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	page, err := s.cfg.Backend.Messages(ctx, q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reply := listReply{Messages: page.Messages}
	if reply.Messages == nil {
		reply.Messages = []messages.Message{}
	}
	if page.Next != 0 {
		reply.NextCursor = strconv.FormatInt(page.Next, 10)
		if !page.NextAt.IsZero() {
			reply.NextCursor += "@" + strconv.FormatInt(page.NextAt.UnixMicro(), 10)
		}
	}
	writeJSON(w, http.StatusOK, reply)
}

// listQueryOf reads the parameters of GET /api/messages: state, limit,
// cursor, and the search (destination, source: a number, its '+' optional,
// a trailing '*' for a prefix; since, until: RFC 3339; frontend, peer).
// An unknown parameter is refused, like an unknown field, and so is one
// given twice. submittedBy, when set, keeps a client credential's own
// messages; it is set before the cursor is read, because it decides the
// cursor's kind (ListQuery.ByTime).
func listQueryOf(v url.Values, submittedBy string) (persistence.ListQuery, error) {
	q := persistence.ListQuery{Limit: defaultListLimit, SubmittedBy: submittedBy}
	bad := func(format string, args ...any) (persistence.ListQuery, error) {
		return q, messages.Errorf(messages.CodeInvalidRequest, format, args...)
	}
	if err := paramsOnce(v, listParams); err != nil {
		return q, err
	}
	if st := v.Get("state"); st != "" {
		q.State = messages.State(st)
		if !q.State.Valid() {
			return bad("state %q is not a message state", st)
		}
	}
	var err error
	if q.Limit, err = limitOf(v, q.Limit); err != nil {
		return q, err
	}
	for _, p := range []struct {
		name string
		into *persistence.NumberMatch
		ok   func(string) bool
		want string
	}{
		{"destination", &q.Destination, func(k string) bool { return digitsRE.MatchString(k) }, "1-20 digits, with an optional leading '+'"},
		{"source", &q.Source, func(k string) bool {
			return k != "" && len(k) <= messages.MaxSourceLen && messages.TextError("source", k) == nil && !strings.ContainsAny(k, "\n\r\f")
		}, fmt.Sprintf("1-%d printable characters", messages.MaxSourceLen)},
	} {
		raw := v.Get(p.name)
		if raw == "" {
			continue
		}
		key, prefix := strings.CutSuffix(raw, "*")
		key = messages.NumberKey(key)
		// A key must be its own key: "+ +5" gives " +5", which is "+5"
		// as a key, and what the stores compare with is never either.
		if !p.ok(key) || messages.NumberKey(key) != key {
			return bad("%s %q: want %s, and a trailing '*' for every number starting so", p.name, raw, p.want)
		}
		*p.into = persistence.NumberMatch{Key: key, Prefix: prefix}
	}
	if q.Since, q.Until, err = timeRangeOf(v); err != nil {
		return q, err
	}
	for _, p := range []struct {
		name string
		into *string
	}{{"frontend", &q.Frontend}, {"peer", &q.Peer}} {
		if raw := v.Get(p.name); raw != "" {
			if !messages.ValidName(raw) {
				return bad("%s %q is not a valid name", p.name, raw)
			}
			*p.into = raw
		}
	}
	if c := v.Get("cursor"); c != "" {
		seq, at, timed := strings.Cut(c, "@")
		n, err := strconv.ParseInt(seq, 10, 64)
		var micros int64
		if timed {
			micros, err = strconv.ParseInt(at, 10, 64)
		}
		if err != nil || n < 1 || timed != q.ByTime() || (timed && (micros < cursorTimes[0] || micros >= cursorTimes[1])) {
			return bad("cursor %q is not a cursor this API returned for this search", c)
		}
		q.Before = n
		if timed {
			q.BeforeAt = time.UnixMicro(micros).UTC()
		}
	}
	return q, nil
}

// cursorTimes bound the time of a cursor, in microseconds since the epoch:
// the years of an RFC 3339 time (0000-9999), which every acceptance time
// a page ends at is in. A forged time beyond them was read as no store
// reads it: SQLite as the number it is, Postgres refused it ("timestamp
// out of range", answered in the store's words) or, past the range of
// its driver's arithmetic, as a time in the future (a page from the
// newest message again).
var cursorTimes = [2]int64{
	time.Date(0, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMicro(),
	time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMicro(),
}

// limitOf reads the parameter limit of a list: 1 to maxListLimit, def
// when absent.
func limitOf(v url.Values, def int) (int, error) {
	l := v.Get("limit")
	if l == "" {
		return def, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 1 || n > maxListLimit {
		return def, messages.Errorf(messages.CodeInvalidRequest, "limit %q must be an integer from 1 to %d", l, maxListLimit)
	}
	return n, nil
}

// timeRangeOf reads the parameters since and until: RFC 3339 times (a '+'
// a URL turned into a space taken back), since before until.
func timeRangeOf(v url.Values) (since, until time.Time, err error) {
	for _, p := range []struct {
		name string
		into *time.Time
	}{{"since", &since}, {"until", &until}} {
		if raw := v.Get(p.name); raw != "" {
			t, err := time.Parse(time.RFC3339Nano, strings.ReplaceAll(raw, " ", "+"))
			if err != nil {
				return since, until, messages.Errorf(messages.CodeInvalidRequest, "%s %q is not an RFC 3339 time (e.g. 2026-05-01T12:00:00Z)", p.name, raw)
			}
			*p.into = t
		}
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return since, until, messages.Errorf(messages.CodeInvalidRequest, "since must be before until")
	}
	return since, until, nil
}

// queryValues is the parameters of r's query string. A query that does
// not parse (a bad %-escape, a ';' between parameters) is refused whole:
// r.URL.Query() drops the pairs it cannot read in silence, and a list
// would be answered without its filter, or from its newest page again
// for a cursor it lost.
func queryValues(r *http.Request) (url.Values, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, messages.Errorf(messages.CodeInvalidRequest, "the query does not parse: %v (parameters are separated by '&', and '%%' starts a %%XX escape)", err)
	}
	return v, nil
}

// paramsOnce refuses a query that names a parameter not in known
// (unknown_field, like an unknown field of a body), names one more than
// once (invalid_request: url.Values.Get would read the first and ignore
// the rest in silence), or gives one empty (invalid_request, as a bad
// value of it: "?state=" was read as no state, and a filtered list was
// answered 200 with every message). Names are checked in sorted order, so
// that the answer does not depend on map order.
func paramsOnce(v url.Values, known []string) error {
	for _, name := range slices.Sorted(maps.Keys(v)) {
		if !slices.Contains(known, name) {
			return messages.Errorf(messages.CodeUnknownField, "unknown parameter %q (known: %s)", name, strings.Join(known, ", "))
		}
		if n := len(v[name]); n > 1 {
			return messages.Errorf(messages.CodeInvalidRequest, "parameter %q is given %d times", name, n)
		}
		if v.Get(name) == "" {
			return messages.Errorf(messages.CodeInvalidRequest, "parameter %q is given empty: give it a value, or leave it out", name)
		}
	}
	return nil
}

// listParams are the parameters of GET /api/messages.
var listParams = []string{"state", "limit", "cursor", "destination", "source", "since", "until", "frontend", "peer"}

// digitsRE is a destination's number key: its digits.
var digitsRE = regexp.MustCompile(`^[0-9]{1,20}$`)

func (s *Server) resubmit(w http.ResponseWriter, r *http.Request) {
	id, err := messageID.of(r, "id")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := decodeNone(w, r); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := change(s, r, s.cfg.RequestTimeout, messages.AuditResubmit, id, ResubmitAuditDetail)
	defer cancel()
	m, err := s.cfg.Backend.Resubmit(ctx, id)
	if made(err) {
		s.record(r, messages.AuditResubmit, id, ResubmitAuditDetail(m))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) resubmitBulk(w http.ResponseWriter, r *http.Request) {
	var req struct {
		State messages.State `json:"state"`
	}
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if !req.State.Resubmittable() {
		s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "state must be failed or forward_failed, got %q", req.State))
		return
	}
	// A bulk resubmit may page through many messages: give it longer.
	ctx, cancel := change(s, r, 10*s.cfg.RequestTimeout, messages.AuditResubmitBulk, string(req.State), BulkAuditDetail)
	defer cancel()
	res, err := s.cfg.Backend.ResubmitBulk(ctx, req.State)
	if err == nil || res.Resubmitted > 0 {
		// One that failed part of the way resubmitted the pages before.
		s.record(r, messages.AuditResubmitBulk, string(req.State), BulkAuditDetail(res))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	st, err := s.cfg.Backend.Status(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fes := make([]messages.Frontend, len(st.Frontends))
	for i, f := range st.Frontends {
		fes[i] = f.Shown()
	}
	st.Frontends = fes
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	tl, err := s.cfg.Backend.Timeline(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if tl.Points == nil {
		tl.Points = []TimelinePoint{}
	}
	writeJSON(w, http.StatusOK, tl)
}

func (s *Server) listRoutes(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	routes, err := s.cfg.Backend.Routes(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if routes == nil {
		routes = []messages.Route{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"routes": routes})
}

func (s *Server) putRoute(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Frontend string `json:"frontend"`
	}
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	route := messages.Route{Prefix: mux.Vars(r)["prefix"], Frontend: req.Frontend}
	switch {
	case !messages.ValidPrefix(route.Prefix):
		s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "prefix %q must be 1-20 digits", route.Prefix))
		return
	case route.Frontend == "":
		s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "frontend is required"))
		return
	}
	detail := RouteAuditDetail(route)
	ctx, cancel := change(s, r, s.cfg.RequestTimeout, messages.AuditRoutePut, route.Prefix, known(detail))
	defer cancel()
	stored, err := s.cfg.Backend.PutRoute(ctx, route)
	if made(err) {
		s.record(r, messages.AuditRoutePut, route.Prefix, detail)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, stored)
}

func (s *Server) deleteRoute(w http.ResponseWriter, r *http.Request) {
	prefix, err := routePrefix.of(r, "prefix")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := decodeNone(w, r); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := change(s, r, s.cfg.RequestTimeout, messages.AuditRouteDelete, prefix, known(""))
	defer cancel()
	if err := s.cfg.Backend.DeleteRoute(ctx, prefix); err != nil {
		s.fail(w, r, err)
		return
	}
	s.record(r, messages.AuditRouteDelete, prefix, "")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listFrontends(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	fes, err := s.cfg.Backend.Frontends(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shown := make([]messages.Frontend, len(fes))
	for i, f := range fes {
		shown[i] = f.Shown()
	}
	writeJSON(w, http.StatusOK, map[string]any{"frontends": shown})
}

func (s *Server) putFrontend(w http.ResponseWriter, r *http.Request) {
	if !s.bound(w, r, mux.Vars(r)["name"]) {
		return
	}
	// A secret given as "" or null is refused, not read as one left out
	// (an unsigned frontend): it is what "secret":"'$(cmd)'" sends when
	// the command that makes the secret fails.
	var req struct {
		Mode   messages.FrontendMode `json:"mode"`
		URL    string                `json:"url"`
		Secret givenString           `json:"secret"`
	}
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Secret.Given && req.Secret.Value == "" {
		s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest,
			"secret is given empty or null: give the secret (a webhook's: %d-%d printable ASCII characters without blanks), or leave secret out for a frontend without one",
			messages.MinWebhookSecret, messages.MaxWebhookSecret))
		return
	}
	fe, err := messages.Frontend{Name: mux.Vars(r)["name"], Mode: req.Mode, URL: req.URL, Secret: req.Secret.Value}.Normalized()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if fe.Mode == messages.ModeActor {
		s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "mode actor is registered through the embedding API, not over HTTP"))
		return
	}
	if err := fe.Validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	// The secret and the URL's password are never returned nor recorded:
	// only that there is a secret, and the URL with its password redacted.
	detail := FrontendAuditDetail(fe)
	ctx, cancel := change(s, r, s.cfg.RequestTimeout, messages.AuditFrontendPut, fe.Name, known(detail))
	defer cancel()
	stored, err := s.cfg.Backend.PutFrontend(ctx, fe)
	if made(err) {
		s.record(r, messages.AuditFrontendPut, fe.Name, detail)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, stored.Shown())
}

func (s *Server) deleteFrontend(w http.ResponseWriter, r *http.Request) {
	name, err := frontendName.of(r, "name")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := decodeNone(w, r); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := change(s, r, s.cfg.RequestTimeout, messages.AuditFrontendDelete, name, known(""))
	defer cancel()
	if err := s.cfg.Backend.DeleteFrontend(ctx, name); err != nil {
		s.fail(w, r, err)
		return
	}
	s.record(r, messages.AuditFrontendDelete, name, "")
	w.WriteHeader(http.StatusNoContent)
}

// Limits of a long-poll.
const (
	defaultPollMax   = 10
	maxPollMax       = 1000
	maxPollWait      = 60 * time.Second
	defaultPollLease = 30 * time.Second
	minPollLease     = time.Second
	maxPollLease     = time.Hour
	maxAckResults    = 10000
)

func (s *Server) poll(w http.ResponseWriter, r *http.Request) {
	if !s.bound(w, r, mux.Vars(r)["name"]) {
		return
	}
	var req struct {
		Max     *int   `json:"max"`
		WaitMS  *int64 `json:"wait_ms"`
		LeaseMS *int64 `json:"lease_ms"`
	}
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	// The milliseconds are checked as integers: converted first, a value
	// past 2^63 ns (about 292 years) would wrap around into the range.
	max, waitMS, leaseMS := defaultPollMax, int64(0), defaultPollLease.Milliseconds()
	if req.Max != nil {
		max = *req.Max
	}
	if req.WaitMS != nil {
		waitMS = *req.WaitMS
	}
	if req.LeaseMS != nil {
		leaseMS = *req.LeaseMS
	}
	switch {
	case max < 1 || max > maxPollMax:
		s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "max must be from 1 to %d", maxPollMax))
		return
	case waitMS < 0 || waitMS > maxPollWait.Milliseconds():
		s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "wait_ms must be from 0 to %d", maxPollWait.Milliseconds()))
		return
	case leaseMS < minPollLease.Milliseconds() || leaseMS > maxPollLease.Milliseconds():
		s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "lease_ms must be from %d to %d", minPollLease.Milliseconds(), maxPollLease.Milliseconds()))
		return
	}
	wait, lease := time.Duration(waitMS)*time.Millisecond, time.Duration(leaseMS)*time.Millisecond
	name := mux.Vars(r)["name"]
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout+wait)
	defer cancel()
	remove, allowed := s.addPoll(&livePoll{header: r.Header.Get("Authorization"), frontend: name, end: cancel})
	defer remove()
	var (
		msgs []messages.Outgoing
		err  error
	)
	if allowed {
		msgs, err = s.cfg.Backend.Poll(ctx, name, max, wait, lease)
	}
	if len(msgs) == 0 {
		// Its caller's credential may have gone or changed since the
		// guard let it in, or while it waited (which ended it:
		// livePolls): answered as the guard and bound answer it now.
		if p, ok := s.admit(w, r, s.pollCredentials(), frontendRoles); !ok || !s.boundAs(w, r, p, name) {
			return
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if msgs == nil {
		msgs = []messages.Outgoing{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
}

func (s *Server) ack(w http.ResponseWriter, r *http.Request) {
	if !s.bound(w, r, mux.Vars(r)["name"]) {
		return
	}
	var req struct {
		Results []messages.DeliveryResult `json:"results"`
	}
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	// An empty ack is a harmless no-op (a poll-then-ack loop acks what an
	// empty poll gave it).
	if req.Results == nil || len(req.Results) > maxAckResults {
		s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "results is required and holds at most %d verdicts", maxAckResults))
		return
	}
	for i, res := range req.Results {
		if res.ID == "" {
			s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "results[%d].id is required", i))
			return
		}
		// An id Postgres does not take (NUL, bytes not UTF-8) would fail
		// the whole round of verdicts as unavailable: the valid ones
		// would not be recorded however often the frontend acks again.
		if err := messages.TextError(fmt.Sprintf("results[%d].id", i), res.ID); err != nil {
			s.fail(w, r, err)
			return
		}
		if !res.Status.Valid() {
			s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "results[%d].status %q must be delivered, failed or retry", i, res.Status))
			return
		}
		if res.Attempt < 0 {
			s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "results[%d].attempt must not be negative", i))
			return
		}
		if len(res.Reason) > messages.MaxReasonLen {
			s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "results[%d].reason is longer than %d bytes", i, messages.MaxReasonLen))
			return
		}
		if err := messages.TextError(fmt.Sprintf("results[%d].reason", i), res.Reason); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	out, err := s.cfg.Backend.Ack(ctx, mux.Vars(r)["name"], req.Results)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if out == nil {
		out = []messages.AckOutcome{} // a list, never null
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}
