package sqlite

import (
	"errors"
	"fmt"
	"os"
)

// errInUse: another open store holds the lock.
var errInUse = errors.New("in use")

// LockSuffix names the store's lock file: the database's path with it
// (switchboard.db-lock), beside the -wal and -shm files SQLite keeps.
const LockSuffix = "-lock"

// lockStore takes the store's lock for as long as the store is open: one
// process at a time writes a database. SQLite itself lets several, but
// this store's rules do not: a node is the single owner of the work it
// claims (the embedded store has no elector to share it by), so a second
// node on one data directory (a second unit, a container restarted while
// the old one still runs) would claim and deliver the same messages
// again. A process that ends, killed too, lets the lock go with its file
// descriptors. The lock file stays (removing it would race a store
// opening meanwhile). Backups (Backup) read without it.
func lockStore(path string) (*os.File, error) {
	lp := path + LockSuffix
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: its lock: %w", path, err)
	}
	if err := tryLock(f); err != nil {
		_ = f.Close()
		if errors.Is(err, errInUse) {
			return nil, fmt.Errorf("sqlite: %s is in use by another running process (it holds %s): one node at a time runs on a data directory", path, lp)
		}
		return nil, fmt.Errorf("sqlite: open %s: its lock %s: %w", path, lp, err)
	}
	return f, nil
}
