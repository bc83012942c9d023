package sim

import (
	"fmt"
	"syscall"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// StoreFault is the fault state of a node's store (every instance of a
// site shares it). Every call of persistence.Store meets it: each write
// is held Slow first (a slow fsync), then fails with
// persistence.ErrNoSpace while Full, or with an I/O error (EIO) with
// probability IOError; each read fails with an I/O error with probability
// IOError (a failing disk fails reads too), is not held, and goes through
// a full disk. A failed call does nothing.
type StoreFault struct {
	IOError float64
	Full    bool
	Slow    time.Duration
}

func (f StoreFault) String() string {
	return fmt.Sprintf("io-error=%.2f full=%v slow=%v", f.IOError, f.Full, f.Slow)
}

// errIO is the I/O error of a failed call.
var errIO = fmt.Errorf("sim: store call failed: %w", syscall.EIO)

// access is what a call of persistence.Store does to the disk.
type access bool

const (
	reading access = false
	writing access = true
)

// faultStore is a node's store and its faults: every call an
// incarnation's view (storeView) lets through meets the node's
// StoreFault before it reaches Store.
type faultStore struct {
	Store persistence.Store
	c     *Cluster
	i     int
}

// fault is the outcome of one call drawn now (nil: it goes through).
// The writes that meet a fault setting are counted (storeFailed).
func (s *faultStore) fault(a access) error {
	s.c.mu.Lock()
	f := s.c.storeFaults[s.i]
	failed := false
	if f.IOError > 0 {
		failed = s.c.frontRng.Float64() < f.IOError
	}
	if a == writing && f != (StoreFault{}) {
		s.c.storeFailed[s.i]++
	}
	s.c.mu.Unlock()
	if a == reading {
		if failed {
			return errIO
		}
		return nil
	}
	if f.Slow > 0 {
		time.Sleep(f.Slow)
	}
	switch {
	case f.Full:
		return fmt.Errorf("sim: disk full: %w", persistence.ErrNoSpace)
	case failed:
		return errIO
	}
	return nil
}
