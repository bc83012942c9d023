package httpapi

import (
	"context"
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

// auditReply is the document of GET /api/audit; next_cursor is empty on
// the last page.
type auditReply struct {
	Entries    []messages.AuditEntry `json:"entries"`
	NextCursor string                `json:"next_cursor"`
}

func (s *Server) auditTrail(w http.ResponseWriter, r *http.Request) {
	q, err := auditQueryOf(r.URL.Query())
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

// auditDetail formats the detail of a change.
func auditDetail(format string, args ...any) string {
	d := fmt.Sprintf(format, args...)
	for len(d) > messages.MaxAuditDetail {
		_, size := utf8.DecodeLastRuneInString(d)
		d = d[:len(d)-size]
	}
	return d
}
