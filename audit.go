package switchboard

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/supervision/redact"
)

// The audit trail (docs/operations.md, "The audit trail"): each change a
// person or a tool makes is written to the store and as a log line
// ("audit", component=audit), so that a change the store could not
// record is still on record; it is kept for --audit-retention, purged by
// the retention cleaner apart from messages.

// audit records entries: a log line each, then the store.
func (n *Node) audit(ctx context.Context, entries ...messages.AuditEntry) {
	if len(entries) == 0 {
		return
	}
	log := n.log.With("component", "audit")
	for i, e := range entries {
		if n.cfg.Redact == RedactOn {
			// A client chooses its message ids, and a number is an id
			// like any other.
			e.Target, e.Detail = redact.Text(e.Target), redact.Text(e.Detail)
		}
		log.Info("audit", "actor", e.Actor, "role", e.Role, "remote", e.Remote, "action", e.Action, "target", e.Target, "detail", e.Detail)
		// The store bounds each text (a long credentials file's or
		// certificate's path would refuse the whole batch): what is
		// stored is cut to fit, the log line above keeps it whole.
		e.Actor, e.Remote = clipText(e.Actor, messages.MaxAuditActor), clipText(e.Remote, messages.MaxAuditRemote)
		e.Target, e.Detail = clipText(e.Target, messages.MaxAuditTarget), clipText(e.Detail, messages.MaxAuditDetail)
		entries[i] = e
	}
	if err := n.store.AppendAudit(ctx, entries); err != nil {
		log.Error("the audit trail could not store a change; its log line above is its record", "entries", len(entries), "err", err)
	}
}

// embeddingActor is the trail's actor of the changes a program embedding
// the node makes through its Go API (PutRoute, PutFrontend, DeleteRoute,
// DeleteFrontend, Resubmit, ResubmitBulk); embeddingRemote is where
// they come from.
const (
	embeddingActor  = "embedding"
	embeddingRemote = "the embedding Go API"
)

// embeddedChange records a change of the Go API as the HTTP API records
// its callers' (httpapi/audit.go), each action's detail by the same
// formatter: it returns the call's context, which carries the
// httpapi.LateChange that records a change whose answer came after ctx
// ended (when the answer comes), and record, which the method calls with
// the call's result when its change was made.
func embeddedChange[T any](n *Node, ctx context.Context, action, target string, detail func(T) string) (context.Context, func(T)) {
	record := func(v T) {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.audit(rctx, messages.AuditEntry{At: n.clock.Now(), Actor: embeddingActor, Remote: embeddingRemote,
			Action: action, Target: target, Detail: detail(v)})
	}
	late := func(result any) {
		v, _ := result.(T)
		record(v)
	}
	return httpapi.WithLateChange(ctx, late), record
}

// embeddedCall runs call, a change of the Go API, with the context of
// embeddedChange, and records it when it was made: its error nil, or
// ErrNotReadBack (made, and not read back), the HTTP API's rule.
func embeddedCall[T any](n *Node, ctx context.Context, action, target string, detail func(T) string,
	call func(context.Context) (T, error)) (T, error) {
	ctx, record := embeddedChange(n, ctx, action, target, detail)
	v, err := call(ctx)
	if err == nil || errors.Is(err, messages.ErrNotReadBack) {
		record(v)
	}
	return v, err
}

// clipText is s cut to at most max bytes, at a character's boundary.
func clipText(s string, max int) string {
	for len(s) > max {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
