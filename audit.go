package switchboard

import (
	"context"

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
			entries[i] = e
		}
		log.Info("audit", "actor", e.Actor, "role", e.Role, "remote", e.Remote, "action", e.Action, "target", e.Target, "detail", e.Detail)
	}
	if err := n.store.AppendAudit(ctx, entries); err != nil {
		log.Error("the audit trail could not store a change; its log line above is its record", "entries", len(entries), "err", err)
	}
}
