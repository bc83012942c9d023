package sim

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// StoreFault is the fault state of a node's store (every instance of a
// site shares it): its writes fail with an I/O error with probability
// IOError, all fail with persistence.ErrNoSpace while Full, and each is
// held Slow first (a slow fsync). A failed write writes nothing.
type StoreFault struct {
	IOError float64
	Full    bool
	Slow    time.Duration
}

func (f StoreFault) String() string {
	return fmt.Sprintf("io-error=%.2f full=%v slow=%v", f.IOError, f.Full, f.Slow)
}

// errIO is the I/O error of a failed write.
var errIO = fmt.Errorf("sim: write failed: %w", syscall.EIO)

// faultStore is a node's store as its incarnations see it: the writes
// meet the node's StoreFault. Reads pass.
type faultStore struct {
	persistence.Store
	c *Cluster
	i int
}

// fault is the outcome of one write drawn now (nil: it goes through).
func (s *faultStore) fault() error {
	s.c.mu.Lock()
	f := s.c.storeFaults[s.i]
	x := s.c.frontRng.Float64()
	if f != (StoreFault{}) {
		s.c.storeFailed[s.i]++
	}
	s.c.mu.Unlock()
	if f.Slow > 0 {
		time.Sleep(f.Slow)
	}
	switch {
	case f.Full:
		return fmt.Errorf("sim: disk full: %w", persistence.ErrNoSpace)
	case x < f.IOError:
		return errIO
	}
	return nil
}

func (s *faultStore) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	if err := s.fault(); err != nil {
		return persistence.Written{}, err
	}
	return s.Store.Write(ctx, now, w)
}

func (s *faultStore) Accept(ctx context.Context, now time.Time, b []persistence.NewMessage) ([]persistence.Accepted, error) {
	if err := s.fault(); err != nil {
		return nil, err
	}
	return s.Store.Accept(ctx, now, b)
}

func (s *faultStore) CompleteWork(ctx context.Context, now time.Time, os []persistence.Outcome) ([]persistence.Completion, error) {
	if err := s.fault(); err != nil {
		return nil, err
	}
	return s.Store.CompleteWork(ctx, now, os)
}

func (s *faultStore) ApplyStatus(ctx context.Context, now time.Time, us []persistence.StatusUpdate) ([]persistence.Completion, error) {
	if err := s.fault(); err != nil {
		return nil, err
	}
	return s.Store.ApplyStatus(ctx, now, us)
}

func (s *faultStore) QueueForwards(ctx context.Context, now time.Time, peer, detail string, limit int) ([]string, error) {
	if err := s.fault(); err != nil {
		return nil, err
	}
	return s.Store.QueueForwards(ctx, now, peer, detail, limit)
}
