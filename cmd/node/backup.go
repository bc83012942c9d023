package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// backupCommand is `switchboard backup --to FILE [--data-dir DIR]`: an
// online copy of the embedded store of the node whose data directory is
// DIR (it may be running). The shared store (Postgres) is backed up with
// the server's own tools.
func backupCommand(args []string, stdout, stderr io.Writer, env lookupEnv) int {
	fs := flag.NewFlagSet("switchboard backup", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dataDir, _ := env(envName("data-dir"))
	if dataDir == "" {
		dataDir = "./data"
	}
	pg, _ := env(envName("postgres"))
	fs.StringVar(&dataDir, "data-dir", dataDir, "")
	fs.StringVar(&pg, "postgres", pg, "")
	to := fs.String("to", "", "")
	twice := onceEach(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printBackupUsage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "switchboard: %s (see 'switchboard backup -h')\n", flagSyntaxError(err))
		return 2
	}
	var errs []error
	if err := twice(); err != nil {
		errs = append(errs, err)
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q (see 'switchboard backup -h')", fs.Arg(0)))
	}
	if *to == "" {
		errs = append(errs, errors.New("--to: required: the file to write the backup to"))
	}
	if strings.TrimSpace(pg) != "" {
		errs = append(errs, errors.New("--postgres: the shared store is backed up with Postgres's own tools (pg_dump, or base backups with WAL archiving for point-in-time recovery): see docs/operations.md"))
	}
	if len(errs) > 0 {
		printErrorLines(stderr, errors.Join(errs...))
		return 2
	}
	info, err := sqlite.Backup(context.Background(), filepath.Join(dataDir, "switchboard.db"), *to)
	if err != nil {
		printErrorLines(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %d messages, %d bytes\n", info.Path, info.Messages, info.Bytes)
	return 0
}

func printBackupUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: switchboard backup --to FILE [--data-dir DIR]

Writes a consistent copy of the embedded store in DIR to FILE while the node
runs (or not): one snapshot, compacted, synced to disk and checked before the
command returns. FILE must not exist. Prints FILE, its messages and its size.

To restore: stop the node, then
  mv FILE DIR/switchboard.db
  rm -f DIR/switchboard.db-wal DIR/switchboard.db-shm
and start the node. A clean stop leaves no -wal or -shm file; those a crash
left belong to the old store and must go. Messages delivered after the
backup was taken are offered to their frontends again (with the same ids):
see docs/operations.md.

A node on Postgres (--postgres) is backed up with Postgres's own tools.

Flags:
  --to FILE        the backup to write; required
  --data-dir DIR   the node's data directory [SWITCHBOARD_DATA_DIR] (default ./data)
`)
}
