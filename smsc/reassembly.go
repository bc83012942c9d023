package smsc

import (
	"bytes"
	"fmt"
	"sort"
	"time"

	"github.com/switchboard-dev/switchboard/smpp"
)

// PartKey names the message a part belongs to: the account that sent it,
// its source and destination, and the reference and total of its
// concatenation (SMPP has no message id before the SMSC gives one).
type PartKey struct {
	Account, Source, Dest string
	Ref                   uint16
	Total                 byte
}

func (k PartKey) String() string {
	return fmt.Sprintf("%s %s->%s ref %d of %d parts", k.Account, k.Source, k.Dest, k.Ref, k.Total)
}

// Held is a part the table holds, with what its sender is owed: each
// held part's submit_sm is answered once the whole message is committed
// (or refused), never before.
type Held[T any] struct {
	Seq  byte
	Data []byte
	Owed T
}

// Whole is a message whose every part came: its content in part order and
// what its parts asked for, with every part held for it (its parts and
// any repeat of one, each owed its answer).
type Whole[T any] struct {
	Key     PartKey
	Content []byte
	Asks    Asks
	Parts   []Held[T]
}

// Reassembly is the table of concatenated messages being put together: a
// pure core (the listener's shell calls it under its lock and with its
// clock's time). A message waits at most wait for its next part from its
// latest part's arrival, plus the pace that part came with (the interval
// at which its sender may submit, so that one that paces its parts at its
// submit rate is not refused for it); Expire hands back what ran out, for
// its senders to be refused. It holds at most maxHeld parts and maxBytes
// octets of their data, and no part of more than MaxPartData octets.
type Reassembly[T any] struct {
	wait     time.Duration
	maxHeld  int
	maxBytes int
	held     int
	bytes    int
	pending  map[PartKey]*partial[T]
}

type partial[T any] struct {
	due   time.Time // when the wait for its next part runs out
	parts []Held[T] // in arrival order; a seq may repeat
	seen  map[byte]int
	asks  Asks // the first part's, with the strongest receipt of them all
	bytes int  // the octets of the parts' data
}

// Asks is what a part asks for its message beside its data. Every part of
// one message must ask alike for its data_coding, its dest_addr_subunit
// (0 for none; it may ask for a message class beside the data_coding),
// its validity_period and its schedule_delivery_time (the SMPP times as
// given, "" for none): one that differs from the parts before it is
// refused, since the message could not say which the ESME meant. A
// receipt (registered_delivery) is asked for by any part: the message
// gets the strongest any of its parts asked for (a receipt of the final
// outcome over one of a failure only over none), whichever part
// completes it. The times are kept once per message, not per part.
type Asks struct {
	DataCoding, Subunit byte
	Validity, Schedule  string
	RegisteredDelivery  byte
}

// MaxPartData is the most octets of data a part may carry: what a
// short_message carries (254). A part is one SMS; its data may come in a
// message_payload (up to 64 KiB), which no part needs, and which would
// make the table's memory 250 times its parts' count.
const MaxPartData = smpp.MaxShortMessage

// NewReassembly makes a table whose messages wait at most wait for their
// next part, holding at most maxHeld parts and maxBytes octets of their
// data in all.
func NewReassembly[T any](wait time.Duration, maxHeld, maxBytes int) *Reassembly[T] {
	return &Reassembly[T]{wait: wait, maxHeld: maxHeld, maxBytes: maxBytes, pending: map[PartKey]*partial[T]{}}
}

// Reasons Add refuses a part with.
var (
	// ErrTableFull: maxHeld parts, or maxBytes octets of them, are held
	// already (answer ESME_RMSGQFUL: a temporary refusal), and the part
	// does not complete its message (one that does is always taken). The
	// error returned wraps it and says which.
	ErrTableFull = fmt.Errorf("smsc: too many parts of concatenated messages are waiting for the rest")
	// ErrMixedCoding: the part's data_coding is not its message's other
	// parts'.
	ErrMixedCoding = fmt.Errorf("smsc: the parts of one message have different data codings")
	// ErrMixedSubunit: the part's dest_addr_subunit is not its message's
	// other parts' (they would ask for different message classes, or some
	// for one and some for none).
	ErrMixedSubunit = fmt.Errorf("smsc: the parts of one message have different dest_addr_subunits")
	// ErrMixedValidity: the part's validity_period is not its message's
	// other parts' (one without any included).
	ErrMixedValidity = fmt.Errorf("smsc: the parts of one message have different validity_periods")
	// ErrMixedSchedule: the part's schedule_delivery_time is not its
	// message's other parts' (one without any included).
	ErrMixedSchedule = fmt.Errorf("smsc: the parts of one message have different schedule_delivery_times")
	// ErrPartTooLong: the part carries more than MaxPartData octets
	// (answer ESME_RINVMSGLEN: sending it again will not help).
	ErrPartTooLong = fmt.Errorf("smsc: a part of a concatenated message carries at most %d octets", MaxPartData)
)

// Add holds part p of message k, asking a, owed o, at now; its message
// then waits for its next part the table's wait plus pace (0 for a
// sender without a submit rate). When it completes its message, the
// message is returned (and leaves the table). The table keeps a copy of
// p.Data, not the buffer it was cut from.
func (r *Reassembly[T]) Add(k PartKey, p smpp.Part, a Asks, o T, now time.Time, pace time.Duration) (*Whole[T], error) {
	if len(p.Data) > MaxPartData {
		return nil, fmt.Errorf("%w (this one %d)", ErrPartTooLong, len(p.Data))
	}
	pt := r.pending[k]
	switch {
	case pt == nil:
	case pt.asks.DataCoding != a.DataCoding:
		return nil, ErrMixedCoding
	case pt.asks.Subunit != a.Subunit:
		return nil, ErrMixedSubunit
	case pt.asks.Validity != a.Validity:
		return nil, ErrMixedValidity
	case pt.asks.Schedule != a.Schedule:
		return nil, ErrMixedSchedule
	}
	// The part that completes its message passes the bounds: it leaves
	// the table at once with the parts it completes, so it frees room.
	// Refused, it would keep a full table full until the messages in it
	// timed out, none of them able to complete.
	completes := pt != nil && pt.seen[p.Seq] == 0 && len(pt.seen)+1 >= int(k.Total)
	if r.held >= r.maxHeld && !completes {
		return nil, fmt.Errorf("%w (%d parts held, at most %d)", ErrTableFull, r.held, r.maxHeld)
	}
	if r.bytes+len(p.Data) > r.maxBytes && !completes {
		return nil, fmt.Errorf("%w (%d octets of parts held, at most %d)", ErrTableFull, r.bytes, r.maxBytes)
	}
	if pt == nil {
		pt = &partial[T]{seen: map[byte]int{}, asks: a}
		r.pending[k] = pt
	}
	if due := now.Add(r.wait + pace); due.After(pt.due) {
		pt.due = due
	}
	if receiptAsked(a.RegisteredDelivery) > receiptAsked(pt.asks.RegisteredDelivery) {
		pt.asks.RegisteredDelivery = a.RegisteredDelivery
	}
	pt.parts = append(pt.parts, Held[T]{Seq: p.Seq, Data: bytes.Clone(p.Data), Owed: o})
	pt.seen[p.Seq]++
	pt.bytes += len(p.Data)
	r.held++
	r.bytes += len(p.Data)
	if len(pt.seen) < int(k.Total) {
		return nil, nil
	}
	delete(r.pending, k)
	r.held -= len(pt.parts)
	r.bytes -= pt.bytes
	w := &Whole[T]{Key: k, Asks: pt.asks, Parts: pt.parts}
	// The content: each seq once, the latest copy of a repeated part.
	last := map[byte][]byte{}
	for _, h := range pt.parts {
		last[h.Seq] = h.Data
	}
	for seq := 1; seq <= int(k.Total); seq++ {
		w.Content = append(w.Content, last[byte(seq)]...)
	}
	return w, nil
}

// Expire removes the messages whose wait has run out at now and returns
// them (in key order), their Content empty: what they hold is owed a
// refusal.
func (r *Reassembly[T]) Expire(now time.Time) []Whole[T] { return r.remove(now, false) }

// Flush removes every message held, as Expire does: the table is done
// with (the listener stops).
func (r *Reassembly[T]) Flush() []Whole[T] { return r.remove(time.Time{}, true) }

// remove takes out the messages whose wait has run out at now, or all.
func (r *Reassembly[T]) remove(now time.Time, all bool) []Whole[T] {
	var out []Whole[T]
	for k, pt := range r.pending {
		if all || !now.Before(pt.due) {
			out = append(out, Whole[T]{Key: k, Asks: pt.asks, Parts: pt.parts})
			r.held -= len(pt.parts)
			r.bytes -= pt.bytes
			delete(r.pending, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}

// Next is when the earliest wait runs out (zero when nothing waits).
func (r *Reassembly[T]) Next() time.Time {
	var next time.Time
	for _, pt := range r.pending {
		if next.IsZero() || pt.due.Before(next) {
			next = pt.due
		}
	}
	return next
}

// Holds reports whether a part of message k is held.
func (r *Reassembly[T]) Holds(k PartKey) bool { return r.pending[k] != nil }

// Held is the number of parts held.
func (r *Reassembly[T]) Held() int { return r.held }

// HeldBytes is the octets of the held parts' data.
func (r *Reassembly[T]) HeldBytes() int { return r.bytes }
