package delivery

import (
	"maps"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/clock"
)

// spanBook is the open delivery spans of a worker's traced messages, by
// message id, as a pure state machine: a span of a message handed to a
// pull frontend ends with its ack or, unacknowledged, when its lease ends;
// one handed to an in-process actor ends with its verdict (or its
// timeout's). The shell (trace.go) starts and ends the spans the book
// names. S is the span type (the shell's trace.Span). Not safe for
// concurrent use.
type spanBook[S any] struct {
	open map[string]bookedSpan[S]
	// due is when the first of their leases ends, or earlier: the span it
	// was for may have ended since (lapsed then finds nothing to end and
	// moves it on). Zero when none has a lease.
	due time.Time
}

type bookedSpan[S any] struct {
	span S
	// until is when the message's lease ends (zero: it has none).
	until time.Time
}

// add books s, the span of message id's attempt, which ends with its
// verdict (take) or, with a lease (until), when the lease ends (lapsed). It
// returns the span of an earlier attempt of the message still open (the
// message was offered again before either), to end.
func (b *spanBook[S]) add(id string, s S, until time.Time) (earlier S, ok bool) {
	old, ok := b.open[id]
	if b.open == nil {
		b.open = map[string]bookedSpan[S]{}
	}
	b.open[id] = bookedSpan[S]{span: s, until: until}
	if !until.IsZero() {
		b.due = clock.Earliest(b.due, until)
	}
	return old.span, ok
}

// take takes the open span of message id (its verdict came).
func (b *spanBook[S]) take(id string) (S, bool) {
	s, ok := b.open[id]
	delete(b.open, id)
	return s.span, ok
}

// lapsed takes the spans whose lease has ended by now, in message id
// order: no ack came here (none at all, and the message waits for another
// poll or expires; or one through another instance of the site, which has
// no span to end).
func (b *spanBook[S]) lapsed(now time.Time) []S {
	if b.due.IsZero() || now.Before(b.due) {
		return nil
	}
	b.due = time.Time{}
	var out []S
	for _, id := range slices.Sorted(maps.Keys(b.open)) {
		s := b.open[id]
		switch {
		case s.until.IsZero():
		case !now.Before(s.until):
			out = append(out, s.span)
			delete(b.open, id)
		default:
			b.due = clock.Earliest(b.due, s.until)
		}
	}
	return out
}

// all takes every open span, in message id order (the worker stops or
// restarts: its leases are taken again later, in spans of their own).
func (b *spanBook[S]) all() []S {
	var out []S
	for _, id := range slices.Sorted(maps.Keys(b.open)) {
		out = append(out, b.open[id].span)
	}
	clear(b.open)
	b.due = time.Time{}
	return out
}

// wake is when lapsed is next needed (zero: no span has a lease).
func (b *spanBook[S]) wake() time.Time { return b.due }
