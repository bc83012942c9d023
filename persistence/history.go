package persistence

import (
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// Where a message's history lives, the same in both stores. Its first two
// entries are held by the message's row (first_state and first_detail at
// created_at, written by Accept; second_state, second_at and
// second_detail, written with the transition that appends it), and only
// its third and later entries are rows of the history table, numbered by
// ordinal. Most messages have no more than two (accepted, then delivered
// or forwarded), so their delivery writes no history row and their purge
// deletes none.
//
// Rows written before the stores held these entries keep them as history
// rows instead: before migration 0004 the first (first_state ''), before
// the store's migration history_in_row (SQLite 0013, Postgres 0012) the
// second (second_state ''). HistoryOf puts them in their place.

// HeldByRow reports whether the history entry of this ordinal (1 is the
// first) is held by the message's row rather than being a history row.
func HeldByRow(ordinal int) bool { return ordinal <= 2 }

// HistoryOf assembles a message's history, oldest first, from the entries
// its row holds (first and second; State "" when the row holds none) and
// its history rows (rows, in ordinal order). The first entry, held or a
// row, always exists; a held second entry comes right after it.
func HistoryOf(first, second messages.HistoryEntry, rows []messages.HistoryEntry) []messages.HistoryEntry {
	out := make([]messages.HistoryEntry, 0, len(rows)+2)
	if first.State != "" {
		out = append(out, first)
	}
	out = append(out, rows...)
	if second.State != "" {
		out = slices.Insert(out, min(1, len(out)), second)
	}
	return out
}

// A frontend that stays busy for hours defers a message at every retry
// wait, and an entry for each would grow its history without bound. So a
// deferral that follows a deferral of the same attempt (the message's last
// entry; FoldsInto) updates that entry instead of appending one (Folded):
// it counts the deferrals (Deferrals), keeps the first's time (At) and
// says the last's (LastAt, and Detail: the last's with the count after
// it). The attempt's real outcome, a claim that counted another attempt,
// or any other transition appends an entry as usual. The entry is where
// it was: in the message's row when it is the second (HeldByRow), else
// its history row, updated in place (Changes.Folded); history_len does
// not change.

// FoldsInto reports whether entry e, about to be appended to a message
// whose last entry is last, folds into last instead: both are deferrals
// (Deferrals > 0; a deferral's entry is always in state retry) of the
// same attempt.
func FoldsInto(last, e messages.HistoryEntry) bool {
	return last.Deferrals > 0 && e.Deferrals > 0 && last.Attempt == e.Attempt
}

// Folded is last with deferral e folded into it at now (see FoldsInto):
// its time (At: zero for an entry loaded, whose time the store keeps) and
// attempt kept, e's state and resend mark (Resend, as its detail),
// Deferrals the sum, LastAt now, Detail e's with "; deferred <n> times,
// the last at <now>" after it (e's cut so that the whole stays within
// MaxTextBytes).
func Folded(last, e messages.HistoryEntry, now time.Time) messages.HistoryEntry {
	n, t := last.Deferrals+e.Deferrals, Normalize(now)
	suffix := fmt.Sprintf("; deferred %d times, the last at %s", n, t.UTC().Format(time.RFC3339))
	return messages.HistoryEntry{State: e.State, At: last.At, Attempt: last.Attempt, Deferrals: n, LastAt: &t, Resend: e.Resend,
		Detail: cutText(e.Detail, MaxTextBytes-len(suffix)) + suffix}
}
