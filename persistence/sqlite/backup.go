package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchboard-dev/switchboard/persistence/space"
)

// BackupInfo describes a backup Backup made.
type BackupInfo struct {
	Path     string
	Bytes    int64
	Messages int64
}

// Backup writes a consistent copy of the store at dbPath to the file to
// (which must not exist), while a node may be running on it: SQLite's
// VACUUM INTO reads one snapshot in a read transaction, which in WAL mode
// neither waits for the writer nor holds it up, and writes a compacted
// database. The copy is synced to disk, then opened and checked
// (quick_check) before Backup returns. A restore is this file moved to
// the data directory as switchboard.db, with no -wal or -shm file beside
// it, before the node starts (docs/operations.md).
func Backup(ctx context.Context, dbPath, to string) (BackupInfo, error) {
	info := BackupInfo{Path: to}
	if strings.Contains(dbPath, "?") {
		// As Config.Validate: the driver reads what follows as parameters.
		return info, fmt.Errorf("sqlite: backup: %s holds a '?', which a store's path may not", dbPath)
	}
	if _, err := os.Stat(dbPath); err != nil {
		return info, fmt.Errorf("sqlite: backup: no store at %s: %w", dbPath, err)
	}
	// The copy holds what the store holds (message bodies, frontend
	// secrets): it is created readable by its owner only, like the data
	// directory. Created here, empty (VACUUM INTO fills an empty file), so
	// that "never overwrites" holds even for a file made in between.
	f, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return info, fmt.Errorf("sqlite: backup: %s exists; a backup never overwrites a file", to)
	}
	if err != nil {
		return info, fmt.Errorf("sqlite: backup: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(to)
		return info, fmt.Errorf("sqlite: backup: %w", err)
	}
	// Not the reader's query_only connection: SQLite refuses VACUUM INTO
	// there. VACUUM INTO writes only the new file, and the copy keeps the
	// database's auto_vacuum mode. A database created before this store
	// created them incremental gets auto_vacuum=INCREMENTAL set on the
	// backup's one connection first, which applies to the copy only (on
	// such a database the setting waits for a VACUUM), so that a backup
	// and a restore convert it (docs/operations.md). It is not set on an
	// incremental database: there SQLite writes the setting to the live
	// database's header, a write transaction beside the node's writer.
	src, err := sql.Open("sqlite", fmt.Sprintf("%s?_pragma=busy_timeout(%d)", dbPath, busyTimeout))
	if err != nil {
		_ = os.Remove(to)
		return info, fmt.Errorf("sqlite: backup: %v", err)
	}
	defer src.Close()
	if err := roomForBackup(ctx, src, to); err != nil {
		_ = os.Remove(to)
		return info, err
	}
	if err := vacuumInto(ctx, src, to); err != nil {
		_ = os.Remove(to)
		return info, fmt.Errorf("sqlite: backup of %s: %v", dbPath, flatten(err))
	}
	if err := syncFile(to); err != nil {
		return info, fmt.Errorf("sqlite: backup: %w", err)
	}
	if err := syncDir(filepath.Dir(to)); err != nil {
		return info, fmt.Errorf("sqlite: backup: %w", err)
	}
	// A URI, its path escaped: a name holding '#', '%' or '?' must not
	// open another file.
	copyDB, err := sql.Open("sqlite", "file:"+(&url.URL{Path: to}).EscapedPath()+"?mode=ro")
	if err != nil {
		return info, fmt.Errorf("sqlite: backup: %v", err)
	}
	defer copyDB.Close()
	var check string
	if err := copyDB.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&check); err != nil || check != "ok" {
		return info, fmt.Errorf("sqlite: backup %s fails its check (the file is left for a look): %s %v", to, check, err)
	}
	if err := copyDB.QueryRowContext(ctx, `SELECT count(*) FROM messages`).Scan(&info.Messages); err != nil {
		return info, fmt.Errorf("sqlite: backup %s: %v", to, flatten(err))
	}
	fi, err := os.Stat(to)
	if err != nil {
		return info, fmt.Errorf("sqlite: backup: %w", err)
	}
	info.Bytes = fi.Size()
	return info, nil
}

// BackupReserve is the room a backup leaves free on the file system it
// writes to: the node's default --min-free-space (256 MiB). A copy written
// to the data's own file system would otherwise fill it, and the node
// beside it, short of space, refuses its traffic (507) and may fail to
// record its outcomes; the copy then failed anyway.
const BackupReserve = 256 << 20

// roomForBackup refuses a backup whose copy (about the pages the store
// uses) would leave less than BackupReserve free where it is written.
func roomForBackup(ctx context.Context, src *sql.DB, to string) error {
	var pages, free, size int64
	if err := readPragmas(ctx, src, map[string]*int64{"page_count": &pages, "freelist_count": &free, "page_size": &size}); err != nil {
		return fmt.Errorf("sqlite: backup: %v", flatten(err))
	}
	need := uint64(max(0, pages-free) * size)
	avail, _, err := space.Usage(filepath.Dir(to))
	if err != nil {
		return fmt.Errorf("sqlite: backup: %w", err)
	}
	if avail < need+BackupReserve {
		return fmt.Errorf("sqlite: backup: %s's file system has %s free; the copy needs about %s and leaves %s free beside it (a node on that file system refuses work below its --min-free-space): write it elsewhere",
			to, space.HumanSize(int64(avail)), space.HumanSize(int64(need)), space.HumanSize(BackupReserve))
	}
	return nil
}

// vacuumInto writes the copy of src to the file to, with auto_vacuum
// INCREMENTAL (see Backup), on one connection of src.
func vacuumInto(ctx context.Context, src *sql.DB, to string) error {
	conn, err := src.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var mode int
	if err := conn.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return err
	}
	if mode != autoVacuumIncremental {
		if _, err := conn.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
			return err
		}
	}
	_, err = conn.ExecContext(ctx, `VACUUM INTO ?`, to)
	return err
}

// syncFile makes a file's content durable.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
