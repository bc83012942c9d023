package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The audit trail: every change a person or a tool makes through the API
// (resubmits, routes, frontends) is recorded once it is made, with who (the
// credential), what, when and from where (the caller's address). The
// backend keeps it in the store and writes it as a log line.

// auditTimeout bounds the record of one change: it is written after the
// change, on a context of its own, so that a client that hangs up as its
// answer is written does not leave the change unrecorded.
const auditTimeout = 10 * time.Second

// record adds the change r made to the audit trail.
func (s *Server) record(r *http.Request, action, target, detail string) {
	p := principal(r)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditTimeout)
	defer cancel()
	s.cfg.Backend.Audit(ctx, messages.AuditEntry{At: s.cfg.Now(), Actor: p.Name, Role: p.Role, Remote: r.RemoteAddr,
		Action: action, Target: target, Detail: detail})
}

// A change is recorded whenever it is made, whatever becomes of its
// caller. Its backend call runs on change's context, which the caller's
// hang-up or its own deadline does not end (the node's bound does), and
// two outcomes that answer the caller an error after the change was made
// are recorded all the same: the read of its result failed
// (ErrNotReadBack), and the node's bound ran out before the actor making
// it answered (the backend hands the answer that comes later to
// LateChange). Each action's detail has one formatter, which both the
// record of an answered call and that of a late answer use.

// ErrNotReadBack wraps the error of a change that was made, but whose
// result could not be read back (PutRoute, PutFrontend, Resubmit): it is
// messages.ErrNotReadBack, which the actors that make the changes use.
var ErrNotReadBack = messages.ErrNotReadBack

// made reports whether a PutRoute, PutFrontend or Resubmit that returned
// err made its change.
func made(err error) bool { return err == nil || errors.Is(err, ErrNotReadBack) }

type lateKey struct{}

// WithLateChange is ctx carrying late as its LateChange.
func WithLateChange(ctx context.Context, late func(result any)) context.Context {
	return context.WithValue(ctx, lateKey{}, late)
}

// LateChange is what a backend calls when a change whose call ended
// unanswered (ctx's bound ran out: its caller was answered unavailable)
// turns out to have been made, with the result the call would have
// returned beside its error: the messages.Message of a Resubmit, the
// messages.BulkReply of a ResubmitBulk, nil for the directory's changes.
// It records the change with the detail an answered call's record has
// (what a resubmit set, how many a bulk resubmit moved). Nil on a context
// that carries none (the HTTP handlers' and the embedding API's changes
// carry one).
func LateChange(ctx context.Context) func(result any) {
	f, _ := ctx.Value(lateKey{}).(func(any))
	return f
}

// lateNote ends the detail of a change recorded through LateChange.
const lateNote = "made after its caller was answered unavailable (no answer within the request timeout)"

// change is the context of a backend call for the change action of
// target: bounded by d alone, and carrying the LateChange that records it
// with detail(result), detail being the action's formatter, which the
// record of an answered call uses too. T is the result's type LateChange
// names for the call (the backend tests hold the node to it).
func change[T any](s *Server, r *http.Request, d time.Duration, action, target string, detail func(T) string) (context.Context, context.CancelFunc) {
	late := func(result any) {
		v, _ := result.(T)
		s.record(r, action, target, auditDetail("%s", strings.TrimPrefix(detail(v)+"; "+lateNote, "; ")))
	}
	return context.WithTimeout(WithLateChange(context.WithoutCancel(r.Context()), late), d)
}

// known is the detail of a change known before its call, whatever its
// result (a route's frontend; nothing for a delete).
func known(detail string) func(any) string {
	return func(any) string { return detail }
}

// ResubmitAuditDetail is the detail of a single resubmit's record: where
// it sent the message. One not read back still says what it set
// (messages.ResubmitReply). The embedding API's records use it too.
func ResubmitAuditDetail(m messages.Message) string {
	return auditDetail("to frontend %s, now %s", m.Frontend, m.State)
}

// BulkAuditDetail is the detail of a bulk resubmit's record: how many it
// moved, and how many it left without a route.
func BulkAuditDetail(res messages.BulkReply) string {
	return auditDetail("%d resubmitted, %d skipped", res.Resubmitted, res.Skipped)
}

// auditReply is the document of GET /api/audit; next_cursor is empty on
// the last page.
type auditReply struct {
	Entries    []messages.AuditEntry `json:"entries"`
	NextCursor string                `json:"next_cursor"`
}

func (s *Server) auditTrail(w http.ResponseWriter, r *http.Request) {
	v, err := queryValues(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := auditQueryOf(v)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	page, err := s.cfg.Backend.AuditTrail(ctx, q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reply := auditReply{Entries: page.Entries}
	if reply.Entries == nil {
		reply.Entries = []messages.AuditEntry{}
	}
	if page.Next != 0 {
		reply.NextCursor = strconv.FormatInt(page.Next, 10)
	}
	writeJSON(w, http.StatusOK, reply)
}

// auditParams are the parameters of GET /api/audit.
var auditParams = []string{"actor", "action", "since", "until", "limit", "cursor"}

// auditQueryOf reads the parameters of GET /api/audit: actor (a
// credential's name, or a tool's), action (one of messages.AuditActions),
// since and until (RFC 3339), limit (1-1000, 50) and cursor. An unknown
// parameter is refused, like an unknown field, and so is one given twice.
func auditQueryOf(v url.Values) (persistence.AuditQuery, error) {
	q := persistence.AuditQuery{Limit: defaultListLimit}
	bad := func(format string, args ...any) (persistence.AuditQuery, error) {
		return q, messages.Errorf(messages.CodeInvalidRequest, format, args...)
	}
	if err := paramsOnce(v, auditParams); err != nil {
		return q, err
	}
	if a := v.Get("actor"); a != "" {
		if len(a) > messages.MaxAuditActor || messages.TextError("actor", a) != nil || strings.ContainsAny(a, "\n\r\f") {
			return bad("actor: at most %d printable characters", messages.MaxAuditActor)
		}
		q.Actor = a
	}
	if a := v.Get("action"); a != "" {
		if !slices.Contains(messages.AuditActions, a) {
			return bad("action %q: one of %s", a, strings.Join(messages.AuditActions, ", "))
		}
		q.Action = a
	}
	var err error
	if q.Since, q.Until, err = timeRangeOf(v); err != nil {
		return q, err
	}
	if q.Limit, err = limitOf(v, q.Limit); err != nil {
		return q, err
	}
	if c := v.Get("cursor"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 1 {
			return bad("cursor %q is not a cursor this API returned", c)
		}
		q.Before = n
	}
	return q, nil
}

// RouteAuditDetail is the detail of a route.put of r: its frontend. The
// node records the changes its --route flags make with it.
func RouteAuditDetail(r messages.Route) string { return auditDetail("frontend %s", r.Frontend) }

// FrontendAuditDetail is the detail of a frontend.put of fe: its mode, its
// URL with the password redacted and whether it is signed, never the
// secret. The node records the changes its --frontend flags make with it.
func FrontendAuditDetail(fe messages.Frontend) string {
	shown := fe.Shown()
	return auditDetail("mode %s, url %q, signed %v", shown.Mode, shown.URL, fe.Secret != "")
}

// auditDetail formats the detail of a change.
func auditDetail(format string, args ...any) string {
	d := fmt.Sprintf(format, args...)
	for len(d) > messages.MaxAuditDetail {
		_, size := utf8.DecodeLastRuneInString(d)
		d = d[:len(d)-size]
	}
	return d
}
