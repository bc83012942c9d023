package discovery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/transport"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait; a hang is a failure, not a CI timeout.
const waitTimeout = 10 * time.Second

// identities answers identity calls from a table: an address not in it
// refuses the connection; one in hang blocks until the call is cancelled.
type identities struct {
	mu    sync.Mutex
	ids   map[string]messages.Identity
	hang  map[string]bool
	calls map[string]int
	// hung receives the address of each call that starts hanging.
	hung chan string
}

func newTransport() *identities {
	return &identities{ids: map[string]messages.Identity{}, hang: map[string]bool{}, calls: map[string]int{},
		hung: make(chan string, 16)}
}

func (f *identities) answer(addr, node, instance string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids[addr] = ident(node, instance)
}

func (f *identities) down(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ids, addr)
}

func (f *identities) count(addr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[addr]
}

func (f *identities) Identity(ctx context.Context, addr string) (messages.Identity, error) {
	f.mu.Lock()
	f.calls[addr]++
	id, ok := f.ids[addr]
	hang := f.hang[addr]
	f.mu.Unlock()
	if hang {
		f.hung <- addr
		<-ctx.Done()
		return messages.Identity{}, ctx.Err()
	}
	if !ok {
		return messages.Identity{}, fmt.Errorf("dial tcp %s: connection refused", addr)
	}
	return id, nil
}

var errNotUsed = errors.New("not used by discovery")

func (f *identities) Health(context.Context, transport.Target, messages.Health) (messages.Health, error) {
	return messages.Health{}, errNotUsed
}

func (f *identities) Registry(context.Context, transport.Target, messages.Registry) (messages.Registry, error) {
	return messages.Registry{}, errNotUsed
}

func (f *identities) Forward(context.Context, transport.Target, bool, []messages.Forward) ([]messages.ForwardResult, error) {
	return nil, errNotUsed
}

func (f *identities) Status(context.Context, transport.Target, bool, []messages.StatusReport) ([]messages.StatusReply, error) {
	return nil, errNotUsed
}

// manualClock is a clock the test moves. A function due now runs at once.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
	// panics makes the next Now panic (to restart the actor).
	panics atomic.Bool
}

type manualTimer struct {
	at   time.Time
	f    func()
	done bool
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	if c.panics.CompareAndSwap(true, false) {
		panic("test: the clock broke")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{at: c.now.Add(d), f: f}
	if d <= 0 {
		t.done = true
		go f()
	} else {
		c.timers = append(c.timers, t)
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.done {
			return false
		}
		t.done = true
		return true
	}
}

// advance moves the clock and runs what became due.
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.done:
		case !t.at.After(c.now):
			t.done = true
			due = append(due, t.f)
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, f := range due {
		go f()
	}
}

// pending counts the timers armed and not yet run or stopped.
func (c *manualClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}
