package sqlite

import (
	"errors"
	"log/slog"
	"strings"
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
}

// DefaultConfig returns a Config with every default filled in; Path is left
// empty (see Config.Path).
func DefaultConfig() Config {
	return Config{Logger: slog.New(slog.DiscardHandler)}
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
	return errors.Join(errs...)
}
