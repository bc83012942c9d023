package lock_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/lock"
	"github.com/switchboard-dev/switchboard/polltest"
)

// stepClock is a clock whose timers the test fires: each AfterFunc is
// handed to the test on timers, with the wait it asked for.
type stepClock struct {
	now    time.Time
	timers chan *timer
}

type timer struct {
	d    time.Duration
	f    func()
	mu   sync.Mutex
	done bool
}

func newStepClock() *stepClock {
	return &stepClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), timers: make(chan *timer, 16)}
}

func (c *stepClock) Now() time.Time { return c.now }

func (c *stepClock) AfterFunc(d time.Duration, f func()) func() bool {
	t := &timer{d: d, f: f}
	c.timers <- t
	return func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		stopped := !t.done
		t.done = true
		return stopped
	}
}

// fire runs the timer's function unless it was stopped.
func (t *timer) fire() {
	t.mu.Lock()
	run := !t.done
	t.done = true
	t.mu.Unlock()
	if run {
		go t.f()
	}
}

// next is the next timer the keeper set; it fails the test when none comes.
func (c *stepClock) next(t *testing.T) *timer {
	t.Helper()
	select {
	case tm := <-c.timers:
		return tm
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper set no timer")
		return nil
	}
}

// memElector is an in-memory elector: one holder per name; fail makes the
// next tries fail as a store that does not answer.
type memElector struct {
	mu      sync.Mutex
	holders map[string]*memLead
	fail    error
	tries   int
}

type memLead struct {
	el   *memElector
	name string
	lost chan struct{}
	once sync.Once
}

func newMemElector() *memElector { return &memElector{holders: map[string]*memLead{}} }

func (e *memElector) TryLead(ctx context.Context, name string) (persistence.Leadership, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tries++
	if e.fail != nil {
		return nil, e.fail
	}
	if e.holders[name] != nil {
		return nil, nil
	}
	l := &memLead{el: e, name: name, lost: make(chan struct{})}
	e.holders[name] = l
	return l, nil
}

// end frees the lock name as a session the database ended: its holder
// sees Lost close.
func (e *memElector) end(name string) {
	e.mu.Lock()
	l := e.holders[name]
	e.mu.Unlock()
	if l != nil {
		_ = l.Release(context.Background())
	}
}

func (e *memElector) held(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.holders[name] != nil
}

func (e *memElector) setFail(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fail = err
}

func (l *memLead) Lost() <-chan struct{} { return l.lost }

func (l *memLead) Release(context.Context) error {
	l.el.mu.Lock()
	if l.el.holders[l.name] == l {
		delete(l.el.holders, l.name)
	}
	l.el.mu.Unlock()
	l.once.Do(func() { close(l.lost) })
	return nil
}

// steps is a policy of fixed waits: the wait after failure i is
// Delays[i-1]; it gives up after len(Delays)+1 failures.
type steps []time.Duration

func (s steps) GiveUp(failures int) bool { return failures > len(s) }

func (s steps) Delay(failures int, _ *rand.Rand) time.Duration { return s[failures-1] }

func newKeeper(t *testing.T, el persistence.Elector, c *stepClock, p lock.Policy) *lock.Keeper {
	t.Helper()
	k, err := lock.New(lock.Config{Elector: el, Name: "instance/a", Clock: c, Policy: p,
		Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type taken struct {
	h   *lock.Hold
	err error
}

// take runs Take in a goroutine; waits receives each reported wait.
func take(ctx context.Context, k *lock.Keeper) (<-chan taken, <-chan time.Duration) {
	out, waits := make(chan taken, 1), make(chan time.Duration, 16)
	go func() {
		h, err := k.Take(ctx, func(d time.Duration) { waits <- d })
		out <- taken{h, err}
	}()
	return out, waits
}

func TestConfigValidate(t *testing.T) {
	_, err := lock.New(lock.Config{})
	if err == nil {
		t.Fatal("an empty config was accepted")
	}
	for _, want := range []string{"Elector, Clock and Logger", "Name", "Timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not name %s", err, want)
		}
	}
}

// TestTakeFree: a free lock is taken at the first try, without a wait;
// released, it is free for the next.
func TestTakeFree(t *testing.T) {
	el, c := newMemElector(), newStepClock()
	k := newKeeper(t, el, c, steps{time.Second})
	h, err := k.Take(t.Context(), func(time.Duration) { t.Error("a wait for a free lock") })
	if err != nil {
		t.Fatal(err)
	}
	if !el.held("instance/a") {
		t.Fatal("the elector does not see the lock held")
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Lost():
	default:
		t.Fatal("Lost is open after Release")
	}
	if el.held("instance/a") {
		t.Fatal("the lock is held after Release")
	}
}

// TestTakeOnce: without a policy a held lock is one try, and ErrHeld; a
// store that fails is its error.
func TestTakeOnce(t *testing.T) {
	el, c := newMemElector(), newStepClock()
	other := newKeeper(t, el, c, nil)
	if _, err := other.Take(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	k := newKeeper(t, el, c, nil)
	_, err := k.Take(t.Context(), nil)
	var le *lock.Error
	if !errors.As(err, &le) || !errors.Is(err, lock.ErrHeld) || le.Attempts != 1 || le.Stopped || le.Name != "instance/a" {
		t.Fatalf("Take of a held lock: %#v", err)
	}
	broken := errors.New("connection refused")
	el.setFail(broken)
	if _, err := k.Take(t.Context(), nil); !errors.Is(err, broken) {
		t.Fatalf("Take on a failing store: %v", err)
	}
}

// TestWaitThenTake: a held lock is tried again after each of the policy's
// waits, on the keeper's clock, and taken once its holder lets it go.
func TestWaitThenTake(t *testing.T) {
	el, c := newMemElector(), newStepClock()
	first, err := newKeeper(t, el, c, nil).Take(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	k := newKeeper(t, el, c, steps{time.Second, 2 * time.Second, 3 * time.Second})
	out, waits := take(t.Context(), k)
	for _, d := range []time.Duration{time.Second, 2 * time.Second} {
		tm := c.next(t)
		if tm.d != d || <-waits != d {
			t.Fatalf("wait %v, want %v", tm.d, d)
		}
		if d == 2*time.Second {
			_ = first.Release()
		}
		tm.fire()
	}
	got := <-out
	if got.err != nil {
		t.Fatalf("Take after the holder left: %v", got.err)
	}
	el.mu.Lock()
	tries := el.tries
	el.mu.Unlock()
	if tries != 4 {
		t.Fatalf("%d tries, want 4 (the first holder's and three)", tries)
	}
	_ = got.h.Release()
}

// TestGiveUp: once the policy gives up Take says so, with the attempts and
// what failed last.
func TestGiveUp(t *testing.T) {
	el, c := newMemElector(), newStepClock()
	if _, err := newKeeper(t, el, c, nil).Take(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	k := newKeeper(t, el, c, steps{time.Second, time.Second})
	out, _ := take(t.Context(), k)
	c.next(t).fire()
	c.next(t).fire()
	got := <-out
	var le *lock.Error
	if !errors.As(got.err, &le) || le.Attempts != 3 || le.Stopped || !errors.Is(got.err, lock.ErrHeld) {
		t.Fatalf("Take gave up with %#v", got.err)
	}
	if want := `lock "instance/a": another session holds it; gave up after 3 attempts`; got.err.Error() != want {
		t.Fatalf("error %q, want %q", got.err, want)
	}
}

// TestStoppedWhileWaiting: a context that ends during a wait ends Take at
// once, Stopped.
func TestStoppedWhileWaiting(t *testing.T) {
	el, c := newMemElector(), newStepClock()
	el.setFail(errors.New("connection refused"))
	k := newKeeper(t, el, c, steps{time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	out, _ := take(ctx, k)
	c.next(t)
	cancel()
	got := <-out
	var le *lock.Error
	if !errors.As(got.err, &le) || !le.Stopped || le.Attempts != 1 || !strings.Contains(got.err.Error(), "connection refused") {
		t.Fatalf("Take stopped with %#v", got.err)
	}
}

// TestKeepTakesAgain: a lock whose session ended is taken again (waiting
// with the policy while the store is away); Keep releases it when its
// context ends.
func TestKeepTakesAgain(t *testing.T) {
	el, c := newMemElector(), newStepClock()
	k := newKeeper(t, el, c, steps{time.Second, time.Second})
	h, err := k.Take(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	kept := make(chan error, 1)
	go func() { kept <- k.Keep(ctx, h) }()

	el.setFail(errors.New("connection refused"))
	el.end("instance/a")
	tm := c.next(t) // the first try again failed
	el.setFail(nil)
	tm.fire()
	polltest.Until(t, 10*time.Second, "the lock taken again", func() bool { return el.held("instance/a") })

	// Lost again, and taken again at once.
	el.end("instance/a")
	polltest.Until(t, 10*time.Second, "the lock taken again", func() bool { return el.held("instance/a") })

	cancel()
	if err := <-kept; err != nil {
		t.Fatalf("Keep: %v", err)
	}
	if el.held("instance/a") {
		t.Fatal("the lock is held after Keep returned")
	}
}

// TestKeepGivesUp: a lost lock another session took is an error at the
// first try (no wait: a second process of the same name took it, and two
// must not run at once; its owner went on for the whole policy, ~50 s by
// default), and Keep returns with nothing held by it.
func TestKeepGivesUp(t *testing.T) {
	el, c := newMemElector(), newStepClock()
	k := newKeeper(t, el, c, steps{time.Second})
	h, err := k.Take(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := make(chan error, 1)
	go func() { kept <- k.Keep(t.Context(), h) }()
	el.mu.Lock()
	delete(el.holders, "instance/a")
	el.mu.Unlock()
	thief, err := newKeeper(t, el, c, nil).Take(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = h.Release() // the keeper's session ends
	err = <-kept
	var le *lock.Error
	if !errors.As(err, &le) || le.Attempts != 1 || !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("Keep: %v, want ErrHeld at its first try", err)
	}
	select {
	case <-thief.Lost():
		t.Fatal("the other session's lock was lost")
	default:
	}
}

// TestWait: Wait tells a loss; a context that ends releases the lock and
// tells none.
func TestWait(t *testing.T) {
	el, c := newMemElector(), newStepClock()
	k := newKeeper(t, el, c, nil)
	h, err := k.Take(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	el.end("instance/a")
	if !h.Wait(t.Context()) {
		t.Fatal("Wait did not tell the loss")
	}
	h, err = k.Take(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if h.Wait(ctx) {
		t.Fatal("Wait told a loss after its context ended")
	}
	if el.held("instance/a") {
		t.Fatal("Wait did not release the lock when its context ended")
	}
}
