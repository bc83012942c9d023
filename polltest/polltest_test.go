package polltest

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// fakeT records a failure instead of ending the test.
type fakeT struct {
	testing.TB
	failed atomic.Bool
	msg    string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed.Store(true)
	f.msg = format
}

func TestEventuallyReturnsOnceFHolds(t *testing.T) {
	var calls int
	ft := &fakeT{}
	Eventually(ft, time.Second, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if ft.failed.Load() || calls != 3 {
		t.Fatalf("failed %v after %d calls, want success after 3", ft.failed.Load(), calls)
	}
}

func TestEventuallyFailsAfterTimeout(t *testing.T) {
	ft := &fakeT{}
	start := time.Now()
	Eventually(ft, 30*time.Millisecond, func() error { return errors.New("never") })
	if !ft.failed.Load() {
		t.Fatal("Eventually did not fail on a condition that never holds")
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", d)
	}
}

func TestUntilFailsAfterTimeout(t *testing.T) {
	ft := &fakeT{}
	Until(ft, 10*time.Millisecond, "nothing", func() bool { return false })
	if !ft.failed.Load() {
		t.Fatal("Until did not fail on a condition that never holds")
	}
	ok := &fakeT{}
	Until(ok, time.Second, "true", func() bool { return true })
	if ok.failed.Load() {
		t.Fatal("Until failed on a condition that holds")
	}
}
