package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// purgeableSQL selects, oldest first, up to ?3 messages in resting state ?1
// that came to rest before ?2 and have no outbox row, with what the purge
// decision reads. It walks the partial index messages_finalized (only
// resting messages are in it), so it costs O(limit) plus the messages it
// skips for their work: reports still owed to an origin, few.
const purgeableSQL = `SELECT m.id, m.state, m.finalized_at FROM messages m INDEXED BY messages_finalized
	WHERE m.state = ?1 AND m.finalized_at IS NOT NULL AND m.finalized_at < ?2
	AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.message_id = m.id)
	ORDER BY m.finalized_at LIMIT +?3`

// purgeable finds the candidates of a purge, each state's oldest first,
// the states in order, req.Limit in all. They are loaded as the query
// reads them: it runs in the purge's own transaction, on the store's one
// writer, so that they have no outbox row (its condition) holds until the
// purge is written, and the decision reads nothing else.
func purgeable(req persistence.PurgeRequest) candidates {
	return func(ctx context.Context, tx querier, l *persistence.Loaded) ([]string, error) {
		var ids []string
		for _, st := range slices.Sorted(maps.Keys(req.Before)) {
			if len(ids) >= req.Limit {
				break
			}
			rows, err := tx.QueryContext(ctx, purgeableSQL, string(st), toDB(req.Before[st]), req.Limit-len(ids))
			if err != nil {
				return nil, err
			}
			if err := scanEach(rows, func(r *sql.Rows) error {
				m := &persistence.Row{}
				var at int64
				err := r.Scan(&m.ID, &m.State, &at)
				t := fromDB(at)
				m.FinalizedAt = &t
				l.Rows[m.ID] = m
				ids = append(ids, m.ID)
				return err
			}); err != nil {
				return nil, err
			}
		}
		return ids, nil
	}
}

// Purgeable implements persistence.Store: the candidates of a purge, read
// whole with their history.
func (s *Store) Purgeable(ctx context.Context, req persistence.PurgeRequest) ([]messages.Message, error) {
	const op = "purgeable"
	if err := s.precheck(op, req.Validate()); err != nil {
		return nil, err
	}
	out := []messages.Message{}
	err := s.read(ctx, op, func(tx *sql.Tx) error {
		ids, err := purgeable(req)(ctx, tx, persistence.NewLoaded())
		if err != nil || len(ids) == 0 {
			return err
		}
		byID, err := loadWithHistory(ctx, tx, ids)
		for _, id := range ids {
			if m, ok := byID[id]; ok {
				out = append(out, m)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CountPurgeable implements persistence.Store: each state's candidates,
// counted on the index, req.Limit in all.
func (s *Store) CountPurgeable(ctx context.Context, req persistence.PurgeRequest) (int64, error) {
	const op = "count purgeable"
	if err := s.precheck(op, req.Validate()); err != nil {
		return 0, err
	}
	var total int64
	err := s.read(ctx, op, func(tx *sql.Tx) error {
		for _, st := range slices.Sorted(maps.Keys(req.Before)) {
			var n int64
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (`+purgeableSQL+`)`,
				string(st), toDB(req.Before[st]), int64(req.Limit)-total).Scan(&n); err != nil {
				return err
			}
			if total += n; total >= int64(req.Limit) {
				break
			}
		}
		return nil
	})
	return total, err
}

// Purge implements persistence.Store (persistence.Purge decides).
func (s *Store) Purge(ctx context.Context, req persistence.PurgeRequest, ids []string) ([]persistence.Purged, error) {
	const op = "purge"
	if err := s.precheck(op, req.Validate()); err != nil {
		return nil, err
	}
	find := purgeable(req)
	if ids != nil {
		given := ids[:min(len(ids), req.Limit)]
		find = func(ctx context.Context, tx querier, l *persistence.Loaded) ([]string, error) {
			return given, load(ctx, tx, l, given, false)
		}
	}
	gone, err := s.sweep(ctx, op, s.writeBehind, req.Now, find, func(l *persistence.Loaded, c *persistence.Changes, m *persistence.Row) bool {
		return persistence.Purge(l, c, m, req)
	})
	if err != nil {
		return nil, err
	}
	out := make([]persistence.Purged, len(gone))
	for i, m := range gone {
		out[i] = persistence.Purged{ID: m.ID, State: m.State}
	}
	return out, nil
}

// deletePurged deletes purged messages with their history, ledger and
// SMSC id entries (children first; the writer does not enforce the
// references, the store suite checks that none is left behind).
func deletePurged(ctx context.Context, tx querier, purged []*persistence.Row) error {
	ids := make([]string, len(purged))
	for i, m := range purged {
		ids[i] = m.ID
	}
	return chunks(len(ids), func(lo, hi int) error {
		in, args := params(hi-lo), anys(ids[lo:hi])
		for _, table := range []string{"history WHERE message_id", "ledger WHERE message_id", "smsc_refs WHERE message_id", "messages WHERE id"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` IN (`+in+`)`, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// Space given back by Compact: the free pages beyond a reserve, at most
// compactPages a call (8 MiB of 4 KiB pages: a few milliseconds of the
// writer). The reserve (1/16 of the file, at least reservePages = 1 MiB)
// stays free for the next writes: freeing pages the next hour's messages
// take again only moves data around. Short of space, only reservePages
// stay: the node refuses new work by the file system's free space, which
// does not count the file's free pages, however many.
const (
	compactPages = 2048
	reservePages = 256
)

// compactStep is how many of a file's free pages (of pages in all) one
// Compact gives back: those beyond the reserve, at most compactPages.
func compactStep(free, pages int64, short bool) int64 {
	keep := max(reservePages, pages/16)
	if short {
		keep = reservePages
	}
	return min(max(free-keep, 0), compactPages)
}

// autoVacuumIncremental is what PRAGMA auto_vacuum answers for a database
// in incremental mode.
const autoVacuumIncremental = 2

// Compact implements persistence.Store: a bounded incremental vacuum in
// the writer (the database must have been created with
// auto_vacuum=INCREMENTAL, as this store creates them; an older one keeps
// its free pages for reuse, see docs/operations.md), then a checkpoint, which
// shrinks the file. Short of space, it ends by giving back the WAL too
// (giveBackWAL).
func (s *Store) Compact(ctx context.Context, short bool) (int64, error) {
	freed, err := s.vacuumStep(ctx, short)
	if err != nil || !short {
		return freed, err
	}
	wal, err := s.giveBackWAL(ctx)
	return freed + wal, err
}

// vacuumStep is Compact's incremental vacuum and checkpoint: the bytes
// the database file gave back.
func (s *Store) vacuumStep(ctx context.Context, short bool) (int64, error) {
	const op = "compact"
	var mode, pages, free int64
	err := s.read(ctx, op, func(tx *sql.Tx) error {
		return readPragmas(ctx, tx, map[string]*int64{"auto_vacuum": &mode, "page_count": &pages, "freelist_count": &free})
	})
	if err != nil {
		return 0, err
	}
	n := compactStep(free, pages, short)
	if mode != autoVacuumIncremental || n == 0 {
		return 0, nil
	}
	// A reader's snapshot (a backup's VACUUM INTO, a long list) that keeps
	// the WAL from being copied back whole would keep the pages the vacuum
	// moves in the WAL too: the WAL grows by the step and the file does not
	// shrink, which on a full disk eats the reserve it is meant to give
	// back. The step waits for the next upkeep then.
	if held, err := s.walHeld(ctx); err != nil || held {
		return 0, err
	}
	before, err := fileSize(s.path)
	if err != nil {
		return 0, err
	}
	err = s.writeBehind(ctx, op, func(tx querier) error {
		// incremental_vacuum returns a row per page it frees; reading them
		// all is what makes it run to the end.
		return scanEachQuery(ctx, tx, "PRAGMA incremental_vacuum("+strconv.FormatInt(n, 10)+")")
	})
	if err != nil {
		return 0, err
	}
	if err := s.checkpoint(ctx); err != nil {
		return 0, s.fail(ctx, op, err)
	}
	// What the file gave back, as measured: a reader that began meanwhile
	// keeps it from shrinking, and the cleaner repeats a step only while
	// one gives something back.
	after, err := fileSize(s.path)
	if err != nil {
		return 0, err
	}
	return max(0, before-after), nil
}

// giveBackWAL truncates the WAL to nothing (a TRUNCATE checkpoint) and
// returns the bytes that gave back. A PASSIVE checkpoint never shrinks
// the file: once a reader's snapshot (a backup's VACUUM INTO, a long
// list) let it grow, SQLite writes from its start again but the file
// keeps its size, up to journal_size_limit (64 MiB). Short of space that
// is space the node refuses new work for want of while the cleaner has
// purged everything, so Compact gives it back then; otherwise it is left
// for the next writes, as the checkpointer leaves a WAL below
// Config.WALLimit.
//
// The checkpointer's connection has no busy wait: a TRUNCATE checkpoint
// that finds the writer in a transaction, or a reader still on a frame of
// the WAL, copies what it can as a PASSIVE one would and leaves the file
// as it is (the next upkeep tries again), so it never waits for a long
// reader while it holds the writer back. When it gets through, the
// checkpoints before it have copied nearly everything: the writer waits
// only for the rest.
func (s *Store) giveBackWAL(ctx context.Context) (int64, error) {
	if s.cdb == nil || s.broken() != nil {
		return 0, nil
	}
	before, err := fileSize(s.wal.path)
	if err != nil || before == 0 {
		return 0, ignoreMissing(err)
	}
	var busy, frames, done int64
	if err := s.checkpointed(s.cdb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done)); err != nil {
		return 0, s.fail(ctx, "compact", err)
	}
	after, err := fileSize(s.wal.path)
	if err != nil {
		return 0, ignoreMissing(err)
	}
	return max(0, before-after), nil
}

// ignoreMissing is err, nil when it says the file does not exist.
func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// walHeld reports whether a checkpoint cannot copy the whole WAL back into
// the database now: a reader's snapshot holds some of its frames.
func (s *Store) walHeld(ctx context.Context) (bool, error) {
	if s.cdb == nil {
		return false, nil
	}
	var busy, frames, done int64
	if err := s.checkpointed(s.cdb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &done)); err != nil {
		return false, err
	}
	return done < frames, nil
}

// fileSize is the size of the file at path.
func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// readPragmas reads the integer pragmas named into their variables.
func readPragmas(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, into map[string]*int64) error {
	for pragma, v := range into {
		if err := q.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(v); err != nil {
			return err
		}
	}
	return nil
}

// scanEachQuery runs a query and reads (and drops) every row it returns.
func scanEachQuery(ctx context.Context, q querier, text string) error {
	rows, err := q.QueryContext(ctx, text)
	if err != nil {
		return err
	}
	return scanEach(rows, func(*sql.Rows) error { return nil })
}
