package persistence

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The delivery bus (--nats-url): the relay takes outbox rows of delivery
// work not yet relayed, marking them relayed as it takes them (one
// statement: another relay skips them), publishes them to a NATS JetStream
// stream, and gives back with Unrelay those the stream did not take, for a
// later round. A relay that dies between its take and its publish leaves
// rows marked relayed that the bus never got: the delivery workers'
// backstop (a claim from the store of work overdue for a while) delivers
// them. The consumers that take a row's bus message claim that row by its
// message id (ClaimRequest.IDs) and record its outcome as any worker does.
// Every delivery row starts unrelayed, with or without a bus (except one
// written leased or to publish by its writer, see WorkAdd.Relayed), so
// that work written before the bus was enabled, or while it was down, is
// relayed when it runs; a row replaced by new work (a resubmit) is new,
// unrelayed work. The hot path needs no relay round: an instance whose bus
// is up writes its new delivery work to publish (NewMessage.Publish) and
// publishes it after the commit, as a relay would after its take.
//
// The bus carries only work that is due. A consumer that is handed work
// before its time can only nak it with a delay, and a naked message
// still counts toward the consumer's MaxAckPending: work scheduled ahead
// (deliver_after) or waiting for its retry would fill it and stop the
// frontend's consumer for everything else. So work due later is written
// unrelayed (NewWork ignores Publish for it), RelayWork takes only rows
// due at its now, and a retry writes its row back unrelayed in the
// retry's own transaction (Changes.Reschedule): the relay publishes each
// as it falls due, under a Nats-Msg-Id that names its due time.

// RelayRequest asks RelayWork for up to Limit rows due at Now, after
// After.
type RelayRequest struct {
	Now   time.Time
	Limit int
	// After, when set, takes only rows after it in RelayWork's order (due
	// time, then row): the relay goes on past rows it could not publish
	// (given back, they would otherwise come first in every round and a
	// batch of them would hold up every row behind), and starts from the
	// first row again once it reached the last.
	After RelayKey
}

// RelayKey is a row's place in RelayWork's order; the zero key comes
// before every row.
type RelayKey struct {
	DueAt time.Time
	Row   int64
}

// Key is r's place in RelayWork's order.
func (r Relay) Key() RelayKey { return RelayKey{DueAt: r.DueAt, Row: r.Row} }

// ValidateRelay reports what is wrong with a RelayRequest.
func ValidateRelay(req RelayRequest) error {
	var errs []error
	if req.Now.IsZero() {
		errs = append(errs, errors.New("relay: now must be set"))
	}
	if err := ValidateRelayLimit(req.Limit); err != nil {
		errs = append(errs, err)
	}
	if req.After.Row < 0 {
		errs = append(errs, fmt.Errorf("relay: after row %d must not be negative", req.After.Row))
	}
	return errors.Join(errs...)
}

// ValidateRelayLimit reports what is wrong with a limit of RelayWork or
// RelayAgain.
func ValidateRelayLimit(limit int) error {
	if limit <= 0 {
		return fmt.Errorf("relay: limit %d must be positive", limit)
	}
	return nil
}

// ValidateRelayAgain checks RelayAgain's cursor and limit.
func ValidateRelayAgain(after int64, limit int) error {
	if after < 0 {
		return fmt.Errorf("relay again: after %d must not be negative", after)
	}
	return ValidateRelayLimit(limit)
}

// Relay is one outbox row of delivery work a relay took to publish. Row
// and DueAt name the publish: the bus drops a second publish of the same
// row due at the same time (an answer lost), and takes a row published
// again for a later due time (a retry) as new.
type Relay struct {
	Row       int64
	MessageID string
	// Target is the frontend.
	Target    string
	CreatedAt time.Time
	// DueAt is when the row's work is due (at or before the relay's now).
	DueAt time.Time
}

// ValidateRows reports what is wrong with the rows of Unrelay.
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
// for it and is that worker's at once, so it is not published to the bus;
// a row written to publish (NewMessage.Publish) is published by the
// instance that wrote it, right after its commit. If that worker or that
// instance dies, the bus's backstop (a claim from the store of work
// overdue for a while) takes the row after its lease or due time. Every
// other delivery row starts unrelayed.
func (w WorkAdd) Relayed() bool { return w.Lease != nil || w.Publish }

// LaterNeeded reports whether a claim of the named messages ids that took
// work must read when the rest becomes claimable (Claim.Later): only when
// some named message's row was not taken (a message has at most one row
// of a kind and target).
func LaterNeeded(ids []string, work []Work) bool {
	taken := make(map[string]bool, len(work))
	for _, w := range work {
		taken[w.MessageID] = true
	}
	for _, id := range ids {
		if !taken[id] {
			return true
		}
	}
	return false
}

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

// SortRelays orders rows a relay took earliest due first, then oldest, as
// RelayWork returns them (a store's RETURNING comes in no particular
// order).
func SortRelays(rs []Relay) {
	slices.SortFunc(rs, func(a, b Relay) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Row, b.Row)
	})
}
