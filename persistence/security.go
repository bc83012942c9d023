package persistence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// Who may do what: the credentials a node reads from its store (a site on
// Postgres keeps them there, so one revocation reaches every instance) and
// the audit trail of the changes people and tools make. The rules are
// here; each store only runs SQL.

var (
	// ErrExists: a credential with this name, or this token, is stored
	// already; nothing was written.
	ErrExists = errors.New("already exists")
	// ErrLastCredential: revoking it would leave the store without any
	// valid credential (see RevokeLeaves); add another first. Nothing was
	// written.
	ErrLastCredential = errors.New("the last credential of the store")
)

// CredentialStore is the credentials part of a Store.
type CredentialStore interface {
	// Credentials returns every credential, ordered by name.
	Credentials(ctx context.Context) ([]messages.Credential, error)
	// AddCredential stores c and appends audit (its record) in one
	// transaction; ErrExists when c's name or token hash is stored.
	AddCredential(ctx context.Context, c messages.Credential, audit messages.AuditEntry) error
	// RevokeCredential deletes the credential name and appends audit in
	// one transaction; ErrNotFound when there is none, ErrLastCredential
	// when it is the last valid one (see RevokeLeaves).
	RevokeCredential(ctx context.Context, name string, audit messages.AuditEntry) error
}

// AuditStore is the audit trail part of a Store.
type AuditStore interface {
	// AppendAudit appends entries in one transaction, in input order.
	AppendAudit(ctx context.Context, entries []messages.AuditEntry) error
	// ListAudit returns a page of the trail, newest first.
	ListAudit(ctx context.Context, q AuditQuery) (AuditPage, error)
	// PurgeAudit deletes up to limit entries older than before, oldest
	// first, and returns how many. Messages' retention never touches the
	// trail: it has a retention of its own.
	PurgeAudit(ctx context.Context, before time.Time, limit int) (int64, error)
}

// AuditQuery selects a page of the audit trail, newest first. Every filter
// set must match.
type AuditQuery struct {
	// Actor and Action match exactly when set.
	Actor, Action string
	// Since and Until bound the entry's time: Since <= at < Until.
	Since, Until time.Time
	// Limit is the page size (> 0).
	Limit int
	// Before is the cursor: only entries with Seq < Before (0 = newest).
	Before int64
}

// AuditFilter is one condition of an audit query: Column Op Value, where
// a time Value is normalized (a store converts it to its own form).
type AuditFilter struct {
	Column, Op string
	Value      any
}

// Filters lists q's conditions, the cursor's included, for a store's
// WHERE: the trail is read newest first by seq and filtered (it is small
// next to messages), so no index is chosen here.
func (q AuditQuery) Filters() []AuditFilter {
	var fs []AuditFilter
	if q.Actor != "" {
		fs = append(fs, AuditFilter{"actor", "=", q.Actor})
	}
	if q.Action != "" {
		fs = append(fs, AuditFilter{"action", "=", q.Action})
	}
	if !q.Since.IsZero() {
		fs = append(fs, AuditFilter{"at", ">=", Normalize(q.Since)})
	}
	if !q.Until.IsZero() {
		fs = append(fs, AuditFilter{"at", "<", Normalize(q.Until)})
	}
	if q.Before > 0 {
		fs = append(fs, AuditFilter{"seq", "<", q.Before})
	}
	return fs
}

// AuditColumns are the columns of an audit entry as the stores read them,
// in the order of their scans.
const AuditColumns = "seq, at, actor, role, remote, action, target, detail"

// AuditPage is one page of the trail; Next is the cursor of the next
// (0 on the last page).
type AuditPage struct {
	Entries []messages.AuditEntry
	Next    int64
}

// AuditPageOf cuts rows (the query's Limit+1 at most, newest first) to a
// page and sets its cursor when more follow.
func AuditPageOf(q AuditQuery, rows []messages.AuditEntry) AuditPage {
	p := AuditPage{Entries: rows}
	if len(rows) > q.Limit {
		p.Entries = rows[:q.Limit]
		p.Next = p.Entries[q.Limit-1].Seq
	}
	return p
}

// Validate reports every problem of q.
func (q AuditQuery) Validate() error {
	var errs []error
	if q.Limit <= 0 {
		errs = append(errs, fmt.Errorf("list audit: limit %d must be positive", q.Limit))
	}
	if q.Before < 0 {
		errs = append(errs, fmt.Errorf("list audit: cursor %d must not be negative", q.Before))
	}
	if q.Action != "" && !slices.Contains(messages.AuditActions, q.Action) {
		errs = append(errs, fmt.Errorf("list audit: unknown action %q", q.Action))
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		errs = append(errs, fmt.Errorf("list audit: since %v is not before until %v", q.Since, q.Until))
	}
	return errors.Join(errs...)
}

// ValidateAudit reports every problem of entries to append and returns
// them as the store keeps them (times normalized).
func ValidateAudit(entries []messages.AuditEntry) ([]messages.AuditEntry, error) {
	var errs []error
	out := make([]messages.AuditEntry, len(entries))
	for i, e := range entries {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("append audit: entry %d: %s", i, fmt.Sprintf(format, args...)))
		}
		if e.At.IsZero() {
			bad("no time")
		}
		if !slices.Contains(messages.AuditActions, e.Action) {
			bad("unknown action %q", e.Action)
		}
		if e.Role != "" && !e.Role.Valid() {
			bad("unknown role %q", e.Role)
		}
		for _, f := range []struct {
			name, v string
			max     int
		}{{"actor", e.Actor, messages.MaxAuditActor}, {"remote", e.Remote, messages.MaxAuditRemote},
			{"target", e.Target, messages.MaxAuditTarget}, {"detail", e.Detail, messages.MaxAuditDetail}} {
			if len(f.v) > f.max {
				bad("%s is longer than %d bytes", f.name, f.max)
			}
		}
		if e.Actor == "" {
			bad("no actor")
		}
		e.At, e.Seq = Normalize(e.At), 0
		out[i] = e
	}
	return out, errors.Join(errs...)
}

// ValidateAddCredential reports what is wrong with AddCredential's input
// and returns the credential and its audit entry as the store keeps them
// (the bound frontends sorted, once each; times normalized).
func ValidateAddCredential(c messages.Credential, audit messages.AuditEntry) (messages.Credential, messages.AuditEntry, error) {
	var errs []error
	if err := c.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("add credential: %w", err))
	}
	if c.CreatedAt.IsZero() {
		errs = append(errs, fmt.Errorf("add credential %q: no creation time", c.Name))
	}
	c.Frontends = slices.Compact(slices.Sorted(slices.Values(c.Frontends)))
	c.CreatedAt = Normalize(c.CreatedAt)
	entries, err := ValidateAudit([]messages.AuditEntry{audit})
	errs = append(errs, err)
	return c, entries[0], errors.Join(errs...)
}

// RevokeLeaves decides a revocation given the credentials the store holds
// besides the one revoked: none valid left is ErrLastCredential. A store
// without credentials is how a node without them runs, and a node leaves
// out a row it finds invalid (one of a newer version's role, or written by
// hand): with only such rows left no one could call a node without
// --api-token, and rows fixed or removed later would open it to anyone.
func RevokeLeaves(left []messages.Credential) error {
	for _, c := range left {
		if c.Validate() == nil {
			return nil
		}
	}
	return ErrLastCredential
}

// ValidatePurgeAudit reports what is wrong with PurgeAudit's input.
func ValidatePurgeAudit(before time.Time, limit int) error {
	var errs []error
	if before.IsZero() {
		errs = append(errs, errors.New("purge audit: no cutoff"))
	}
	if limit <= 0 {
		errs = append(errs, fmt.Errorf("purge audit: limit %d must be positive", limit))
	}
	return errors.Join(errs...)
}
