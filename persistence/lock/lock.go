// Package lock keeps one named lock of a store's Elector for its owner:
// the node's instance lock ("instance/<id>", held for the process's whole
// run) and the ring master's ("ring-master", held while this instance
// leads). Both take the lock the same way (one try, or tries paced by a
// Policy on an injected clock), learn the same way that the database
// ended the session that held it, and give it up the same way.
//
// A Keeper holds no lock and no state of its own: each Take hands out a
// Hold, so that an owner that takes the lock off its goroutine (the ring's
// coordinator, from an effect run off its mailbox) can tell an old Hold
// from the current one. Nothing here holds a mutex while it waits: the
// waits are on channels and the Clock, which a test's virtual time drives.
package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/persistence"
)

// ErrHeld is the Err of an *Error when the last try found the lock held by
// another session (the elector answered, and said no).
var ErrHeld = errors.New("another session holds it")

// Error is why Take did not take the lock.
type Error struct {
	// Name is the lock's.
	Name string
	// Attempts is how many tries failed.
	Attempts int
	// Err is the last try's failure: ErrHeld, or the elector's error.
	Err error
	// Stopped is set when the context ended while Take waited to try
	// again; otherwise the policy gave up (or there was none: one try).
	Stopped bool
}

// Error says which lock, what failed last and why Take stopped trying.
func (e *Error) Error() string {
	if e.Stopped {
		return fmt.Sprintf("lock %q: stopped while waiting for it (%v)", e.Name, e.Err)
	}
	return fmt.Sprintf("lock %q: %v; gave up after %d attempts", e.Name, e.Err, e.Attempts)
}

// Unwrap is Err, so that errors.Is(err, ErrHeld) tells a lock held
// elsewhere from a store that failed.
func (e *Error) Unwrap() error { return e.Err }

// Policy paces the tries of a lock another session holds (or that the
// store fails to give); the ring's Reconnect is one.
type Policy interface {
	// GiveUp reports whether failures tries in a row are enough.
	GiveUp(failures int) bool
	// Delay is the wait before the try after failures failures, drawn
	// with rng where it is jittered.
	Delay(failures int, rng *rand.Rand) time.Duration
}

// Config configures a Keeper.
type Config struct {
	// Elector is the store's (or the site's) lock service.
	Elector persistence.Elector
	// Name is the lock's name.
	Name string
	// Clock paces the waits between tries.
	Clock clock.Clock
	// Policy paces the tries; nil makes Take try once.
	Policy Policy
	// Timeout bounds each try and each release: a store that cannot
	// answer within it is as good as failed (the release then happens
	// when the database ends the session).
	Timeout time.Duration
	// Logger is told of failed releases and of a lost lock's retaking.
	Logger *slog.Logger
}

// Validate reports what is missing.
func (c Config) Validate() error {
	var errs []error
	if c.Elector == nil || c.Clock == nil || c.Logger == nil {
		errs = append(errs, errors.New("lock: Elector, Clock and Logger are required"))
	}
	if c.Name == "" {
		errs = append(errs, errors.New("lock: Name is required"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("lock: Timeout must be positive, got %v", c.Timeout))
	}
	return errors.Join(errs...)
}

// Keeper takes, watches and releases the lock Config.Name. Its methods
// may be called from several goroutines at once.
type Keeper struct {
	cfg Config
	log *slog.Logger
}

// New returns a Keeper of cfg.Name.
func New(cfg Config) (*Keeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Keeper{cfg: cfg, log: cfg.Logger.With("lock", cfg.Name)}, nil
}

// Name is the lock's name.
func (k *Keeper) Name() string { return k.cfg.Name }

// Take tries the lock until it has it, ctx ends, or the policy gives up
// (no policy: after one try); each try ends with ctx. waiting (when set)
// is told of each wait before a try again. The error is an *Error.
func (k *Keeper) Take(ctx context.Context, waiting func(time.Duration)) (*Hold, error) {
	return k.take(ctx, waiting, false)
}

// take is Take; heldEnds ends it at the first try that finds the lock
// held by another session (Keep).
func (k *Keeper) take(ctx context.Context, waiting func(time.Duration), heldEnds bool) (*Hold, error) {
	// A generator per Take: concurrent Takes share nothing, and the sim's
	// clock makes the jitter replay.
	rng := rand.New(rand.NewPCG(uint64(k.cfg.Clock.Now().UnixNano()), 0))
	for failures := 1; ; failures++ {
		tctx, cancel := context.WithTimeout(ctx, k.cfg.Timeout)
		l, err := k.cfg.Elector.TryLead(tctx, k.cfg.Name)
		cancel()
		if l != nil {
			return &Hold{k: k, l: l}, nil
		}
		if err == nil {
			err = ErrHeld
		}
		if k.cfg.Policy == nil || k.cfg.Policy.GiveUp(failures) || (heldEnds && errors.Is(err, ErrHeld)) {
			return nil, &Error{Name: k.cfg.Name, Attempts: failures, Err: err}
		}
		d := k.cfg.Policy.Delay(failures, rng)
		if waiting != nil {
			waiting(d)
		}
		if !k.sleep(ctx, d) {
			return nil, &Error{Name: k.cfg.Name, Attempts: failures, Err: err, Stopped: true}
		}
	}
}

// Keep holds h until ctx ends, then releases it, and returns nil. A lock
// lost before (its session ended) is taken again as Take does, while the
// store is away; when it cannot be, Keep returns the error with nothing
// held: at once when another session holds it (a second process of the
// same name, waiting for it, took it: two must not run at once, and its
// owner stops), after the policy when the store stays away. It blocks: an
// owner runs it in a goroutine of its own.
func (k *Keeper) Keep(ctx context.Context, h *Hold) error {
	for h.Wait(ctx) {
		k.log.Warn("the lock was lost with its database connection; taking it again")
		var err error
		if h, err = k.take(ctx, nil, true); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		k.log.Info("lock taken again")
	}
	return nil
}

// sleep waits d on the clock; false when ctx ended first.
func (k *Keeper) sleep(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	stop := k.cfg.Clock.AfterFunc(d, func() { close(done) })
	defer stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// Hold is one holding of the lock, from a Take.
type Hold struct {
	k *Keeper
	l persistence.Leadership
}

// Lost is closed when the lock is lost (the session that held it ended)
// or released.
func (h *Hold) Lost() <-chan struct{} { return h.l.Lost() }

// Leadership is the elector's holding behind h, for a store call that
// confirms the lock in its own transaction (persistence.RingStore's
// PublishRing).
func (h *Hold) Leadership() persistence.Leadership { return h.l }

// Release gives the lock up, bounded by Config.Timeout; a failure is
// logged (the lock ends with its session anyway) and returned. Releasing
// again does nothing more.
func (h *Hold) Release() error {
	ctx, cancel := context.WithTimeout(context.Background(), h.k.cfg.Timeout)
	defer cancel()
	err := h.l.Release(ctx)
	if err != nil {
		h.k.log.Warn("releasing the lock failed (it ends with the session)", "err", err)
	}
	return err
}

// Wait waits until the lock is lost, and reports true, or until ctx ends:
// then it releases the lock and reports false (also when both happened:
// an owner that is done is told of no loss).
func (h *Hold) Wait(ctx context.Context) bool {
	select {
	case <-h.l.Lost():
		return ctx.Err() == nil
	case <-ctx.Done():
		_ = h.Release()
		return false
	}
}
