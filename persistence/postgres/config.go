package postgres

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Config is what Open needs. Start from DefaultConfig and set DSN.
type Config struct {
	// DSN is a libpq-style connection string or postgres:// URL. The store's
	// tables live in the connection's current schema: add search_path to the
	// DSN to put them elsewhere than public. Open creates the schema it
	// names when none of the search_path's exists (see the package doc).
	DSN string
	// Logger receives the store's few logs (migrations applied).
	Logger *slog.Logger
	// MaxConns bounds the connection pool, unless the DSN sets pgxpool's
	// pool_max_conns.
	MaxConns int32
	// ApplicationName is the application_name of every session the store
	// opens (the pool's, a leadership's, the migration's), so that an
	// operator tells the instances of a site apart in pg_stat_activity
	// and the server's logs; a DSN that sets application_name keeps its
	// own. Empty: none. The server keeps its first 63 bytes.
	ApplicationName string
	// NoMigrate opens the store without applying migrations (a tool that
	// reads or edits a few rows of a node's database must not change its
	// schema): Open then refuses a database that lacks a migration of
	// this package's (ErrSchemaBehind), records another migration under
	// one's version (ErrSchemaForeign), or has no schema (ErrNoSchema).
	NoMigrate bool
	// OnNoSpace, when set, is told of each call that failed for want of
	// room on the server (its error is persistence.ErrNoSpace), whatever
	// the call: a claim, an outcome, a report, the cleaner's, as well as
	// new messages. Postgres tells of a full disk only so; a node shuts
	// its gate on new work for it. It runs on the caller's goroutine and
	// must not block.
	OnNoSpace func(error)
}

// DefaultConfig returns a Config with every default filled in; only DSN is
// left for the caller.
func DefaultConfig() Config {
	return Config{
		// A node writes through a handful of actors that batch (intake group
		// commit, one delivery worker per frontend, the ring's partitions)
		// plus API readers: 10 connections serve them without queueing, and
		// a site of several instances stays well under Postgres's default
		// max_connections of 100.
		MaxConns: 10,
		// A node names its instance (Node.openStore); a tool keeps this.
		ApplicationName: "switchboard",
		// Quiet unless the node passes its logger: a package never writes to
		// the process's default logger behind the caller's back.
		Logger: slog.New(slog.DiscardHandler),
	}
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.DSN == "" {
		errs = append(errs, errors.New("postgres: empty DSN"))
	} else if _, err := pgxpool.ParseConfig(c.DSN); err != nil {
		// The parse error can quote the DSN, password included: keep only
		// the fact that it does not parse.
		errs = append(errs, errors.New("postgres: DSN does not parse as a connection string or URL"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("postgres: nil Logger"))
	}
	if c.MaxConns <= 0 {
		errs = append(errs, fmt.Errorf("postgres: MaxConns %d must be positive", c.MaxConns))
	}
	return errors.Join(errs...)
}
