package persistence

import (
	"cmp"
	"slices"

	"github.com/switchboard-dev/switchboard/messages"
)

// Counts are maintained, not counted: every transaction that changes a
// message's state or writes or removes an outbox row also adds the change
// to a counter, in the same transaction, so that Stats reads a handful of
// counters instead of aggregating a table of millions of messages, and the
// counts are exact after a crash. The decision core fills a transaction's
// deltas (Changes.Counts); each store writes them its way (see its doc).

// CountState is Counter.Of for the messages in a state.
const CountState = "state"

// Counter names one maintained count: the messages in a state
// ({CountState, state}), or the outbox rows of one kind of work for one
// target ({kind, target}).
type Counter struct {
	Of  string
	Key string
}

// Counts are deltas (or totals) by counter; a zero entry is never kept.
type Counts map[Counter]int64

// State adds n to the count of messages in state s.
func (c Counts) State(s messages.State, n int64) { c.add(Counter{Of: CountState, Key: string(s)}, n) }

// Work adds n to the count of outbox rows of kind k for target.
func (c Counts) Work(k WorkKind, target string, n int64) {
	c.add(Counter{Of: string(k), Key: target}, n)
}

func (c Counts) add(k Counter, n int64) {
	if n == 0 {
		return
	}
	if c[k] += n; c[k] == 0 {
		delete(c, k)
	}
}

// Merge adds every delta of d.
func (c Counts) Merge(d Counts) {
	for k, n := range d {
		c.add(k, n)
	}
}

// CountDelta is one counter and its delta, as a store writes it.
type CountDelta struct {
	Counter
	N int64
}

// Sorted returns the deltas ordered by counter: the order a store writes
// them in (on a shared store, the order its row locks are taken in).
func (c Counts) Sorted() []CountDelta {
	out := make([]CountDelta, 0, len(c))
	for k, n := range c {
		out = append(out, CountDelta{Counter: k, N: n})
	}
	slices.SortFunc(out, func(a, b CountDelta) int {
		return cmp.Or(cmp.Compare(a.Of, b.Of), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// StatsOf builds Stats from the counters' totals (kept as a store read
// them; a counter that reads 0 is as good as absent) and the store's size
// on disk.
func StatsOf(totals Counts, bytes int64) Stats {
	st := NewStats()
	for k, n := range totals {
		switch {
		case n == 0:
		case k.Of == CountState:
			st.ByState[messages.State(k.Key)] += n
		default:
			st.OutboxDepth += n
			if k.Of == string(WorkForward) {
				st.ForwardQueue[k.Key] += n
			}
		}
	}
	st.DLQDepth = st.ByState[messages.StateFailed]
	st.StoreBytes = bytes
	return st
}
