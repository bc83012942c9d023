package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// errInUse: another open store holds the lock.
var errInUse = errors.New("in use")

// LockSuffix names the store's lock file: the database's path with it
// (switchboard.db-lock), beside the -wal and -shm files SQLite keeps.
const LockSuffix = "-lock"

// Lock is the lock of the database at a path, taken by TakeLock before
// Open (Config.Lock).
type Lock struct {
	path string
	f    *os.File
}

// TakeLock takes the lock of the database at path (making its directory
// when missing), as Open does, for a caller that writes other files beside
// the database and may do so only as the one process using them: a node
// takes it before it makes its self-signed certificate in the data
// directory, so that a second process on the directory, refused here,
// changes nothing there. Open with Config.Lock set holds it from then on;
// Close releases it when Open is not called.
func TakeLock(path string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	f, err := lockStore(path)
	if err != nil {
		return nil, err
	}
	return &Lock{path: path, f: f}, nil
}

// Close releases the lock (a no-op once Open took it over, or on nil).
func (l *Lock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	return f.Close()
}

// take hands the lock's file over to the store Open makes of path.
func (l *Lock) take(path string) (*os.File, error) {
	if l.f == nil {
		return nil, errors.New("sqlite: Config.Lock was released, or taken by another Open")
	}
	if l.path != path {
		return nil, fmt.Errorf("sqlite: Config.Lock is the lock of %s, not of %s", l.path, path)
	}
	f := l.f
	l.f = nil
	return f, nil
}

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
