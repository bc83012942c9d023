package persistence

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The delivery bus (--nats-url): the relay publishes each outbox row of
// delivery work to a NATS JetStream stream once and marks it relayed; the
// consumers that take a row's bus message claim that row by its message id
// (ClaimRequest.IDs) and record its outcome as any worker does. Every
// delivery row starts unrelayed, with or without a bus, so that work
// written before the bus was enabled, or while it was down, is relayed when
// it runs; a row replaced by new work (a resubmit) is new, unrelayed work.

// RelayRequest asks for delivery rows to publish to the bus.
type RelayRequest struct {
	// Now: rows whose relay lease is absent or ended (relay_until <= Now)
	// may be taken.
	Now time.Time
	// Limit is the most rows to take (> 0).
	Limit int
	// Lease is how long the taken rows stay the caller's to publish (> 0):
	// another relay skips them meanwhile, and takes them after it if they
	// were not marked relayed (the relay died, or the bus refused them).
	Lease time.Duration
	// Relayed are rows the caller published since its last call: they are
	// marked relayed (as MarkRelayed would) in the same transaction,
	// before the take, so that a busy relay spends one transaction a
	// round.
	Relayed []int64
}

// Validate reports what is wrong with r.
func (r RelayRequest) Validate() error {
	var errs []error
	if r.Limit <= 0 {
		errs = append(errs, fmt.Errorf("relay: limit %d must be positive", r.Limit))
	}
	if r.Lease <= 0 {
		errs = append(errs, fmt.Errorf("relay: lease %v must be positive", r.Lease))
	}
	if r.Now.IsZero() {
		errs = append(errs, errors.New("relay: now must be set"))
	}
	errs = append(errs, ValidateRows(r.Relayed))
	return errors.Join(errs...)
}

// Relay is one outbox row of delivery work a relay took to publish. Row is
// its stable id: the bus deduplicates publishes by it.
type Relay struct {
	Row       int64
	MessageID string
	// Target is the frontend.
	Target    string
	CreatedAt time.Time
}

// ValidateRows reports what is wrong with the rows of MarkRelayed.
func ValidateRows(rows []int64) error {
	for _, r := range rows {
		if r <= 0 {
			return fmt.Errorf("relayed: row id %d must be positive", r)
		}
	}
	return nil
}

// Relayed reports whether a row is written relayed: a row written leased
// (NewMessage.Lease) is handed over in memory to a worker that is ready
// for it and is that worker's at once, so it is not published to the bus.
// If that worker dies, the bus's backstop (a claim from the store of work
// overdue for a while) takes it after its lease. Every other delivery row
// starts unrelayed.
func (w WorkAdd) Relayed() bool { return w.Lease != nil }

// ClaimableAt is when an outbox row due at due whose lease ends at
// leaseUntil (zero when not leased) may be claimed, seen at now: its due
// time, or the end of a lease still live, whichever is later. A claim of
// named messages (ClaimRequest.IDs) reports it for rows it could not take
// (Claim.Later), so that the bus hands their message out again then.
func ClaimableAt(due, leaseUntil, now time.Time) time.Time {
	if leaseUntil.After(now) && leaseUntil.After(due) {
		return leaseUntil
	}
	return due
}

// SortRelays orders rows a relay took oldest first, as RelayWork returns
// them (a store's RETURNING comes in no particular order).
func SortRelays(rs []Relay) {
	slices.SortFunc(rs, func(a, b Relay) int { return cmp.Compare(a.Row, b.Row) })
}
