package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
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
	if _, err := os.Stat(dbPath); err != nil {
		return info, fmt.Errorf("sqlite: backup: no store at %s: %w", dbPath, err)
	}
	if _, err := os.Stat(to); err == nil {
		return info, fmt.Errorf("sqlite: backup: %s exists; a backup never overwrites a file", to)
	}
	// Not the reader's query_only connection: SQLite refuses VACUUM INTO
	// there. VACUUM INTO writes only the new file. auto_vacuum set on the
	// connection applies to the copy: a backup of a database created
	// before this store created them incremental is incremental, so that
	// a backup and a restore convert it (docs/operations.md).
	src, err := sql.Open("sqlite", fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=auto_vacuum(INCREMENTAL)", dbPath, busyTimeout))
	if err != nil {
		return info, fmt.Errorf("sqlite: backup: %v", err)
	}
	defer src.Close()
	if _, err := src.ExecContext(ctx, `VACUUM INTO ?`, to); err != nil {
		_ = os.Remove(to)
		return info, fmt.Errorf("sqlite: backup of %s: %v", dbPath, flatten(err))
	}
	if err := syncFile(to); err != nil {
		return info, fmt.Errorf("sqlite: backup: %w", err)
	}
	if err := syncDir(filepath.Dir(to)); err != nil {
		return info, fmt.Errorf("sqlite: backup: %w", err)
	}
	copyDB, err := sql.Open("sqlite", "file:"+to+"?mode=ro")
	if err != nil {
		return info, fmt.Errorf("sqlite: backup: %v", err)
	}
	defer copyDB.Close()
	var check string
	if err := copyDB.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&check); err != nil || check != "ok" {
		return info, fmt.Errorf("sqlite: backup %s fails its check: %s %v", to, check, err)
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

// syncFile makes a file's content durable.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
