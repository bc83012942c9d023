package sqlite

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"time"
)

// Config is what Open needs. Start from DefaultConfig, set Path, and Open
// validates it.
type Config struct {
	// Path is the database file, usually <data-dir>/switchboard.db; its
	// directory is created when missing. No default: where a node keeps its
	// data is the node's decision. SQLite puts the -wal and -shm files next
	// to it, so the directory must be writable.
	Path string
	// Logger receives the store's few log lines (open, migrations, close),
	// with component=store. Default: a logger that discards, because a
	// library must not decide where a program's logs go.
	Logger *slog.Logger
	// Sync makes the -wal file durable after commits (default: fdatasync,
	// or fsync where the system has no fdatasync). Tests replace it to hold
	// a sync back or to fail one; a replacement must make the file's data
	// durable (call the default) before it returns nil.
	Sync func(*os.File) error
	// Checkpoint is how often the checkpointer copies the WAL into the
	// database while commits come (see DefaultConfig). Negative
	// disables it, so that the WAL only grows: only for tests that emulate
	// a power cut by cutting the WAL back (it is never read back otherwise).
	Checkpoint time.Duration
	// WALLimit is the size of the -wal file past which the checkpointer
	// truncates it (see DefaultConfig).
	WALLimit int64
	// OnFatal, when set, is told (once, on a goroutine of its own) that the
	// store stopped because an fsync failed; every write then fails. The
	// node stops: what the disk holds is not known until a restart reads it.
	OnFatal func(error)
	// OnNoSpace, when set, is told of each call that failed for want of
	// room (its error is persistence.ErrNoSpace: a full disk, a file
	// system gone read-only), whatever the call: a claim, an outcome, the
	// cleaner's, as well as new messages. A node shuts its gate on new
	// work for it. It runs on the caller's goroutine and must not block.
	OnNoSpace func(error)
	// Lock, when set, is the lock of Path that TakeLock took: Open holds
	// it instead of taking its own (and releases it when it fails). Nil:
	// Open takes it.
	Lock *Lock
}

// DefaultConfig returns a Config with every default filled in; Path is left
// empty (see Config.Path).
func DefaultConfig() Config {
	return Config{
		Logger: slog.New(slog.DiscardHandler),
		Sync:   SyncData,
		// 200 ms: the WAL stays a few MB under load, and a checkpoint
		// copies little each time.
		Checkpoint: 200 * time.Millisecond,
		// 64 MiB: a PASSIVE checkpoint alone never starts the file over
		// under steady traffic (see checkpointLoop).
		WALLimit: 64 << 20,
	}
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	switch {
	case c.Path == "":
		errs = append(errs, errors.New("sqlite: empty path"))
	case strings.Contains(c.Path, "?"):
		// The driver reads everything after '?' as DSN parameters.
		errs = append(errs, errors.New("sqlite: path must not contain '?'"))
	case c.Path == ":memory:" || strings.HasPrefix(c.Path, "file:"):
		// The store opens the file twice (a writer and a reader pool); an
		// in-memory or URI database would be two different databases.
		errs = append(errs, errors.New("sqlite: path must be a file path, not :memory: or a file: URI"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("sqlite: nil logger"))
	}
	if c.Sync == nil {
		errs = append(errs, errors.New("sqlite: nil Sync (DefaultConfig sets SyncData)"))
	}
	if c.WALLimit <= 0 {
		errs = append(errs, errors.New("sqlite: WALLimit must be positive (DefaultConfig sets 64 MiB)"))
	}
	if c.Checkpoint == 0 {
		errs = append(errs, errors.New("sqlite: Checkpoint 0 (DefaultConfig sets 200ms; negative disables it)"))
	}
	return errors.Join(errs...)
}
