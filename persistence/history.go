package persistence

import (
	"slices"

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
