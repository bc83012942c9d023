// Package polltest waits in a test for a condition that another goroutine,
// a process or a node will make true: it polls, and fails the test when the
// condition still does not hold after a timeout. It imports nothing of the
// module, so that the tests of every package may use it.
//
// The first polls come 1ms apart, later ones up to 20ms apart: a condition
// in memory is seen at once, and a condition read over HTTP does not keep
// the machine busy.
package polltest

import (
	"fmt"
	"testing"
	"time"
)

// maxInterval is the longest pause between two polls.
const maxInterval = 20 * time.Millisecond

// Eventually calls f until it returns nil. When timeout has passed it
// fails the test with f's last error.
func Eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	if err := poll(timeout, f); err != nil {
		t.Fatalf("gave up after %v: %v", timeout, err)
	}
}

// Until calls cond until it holds. When timeout has passed it fails the
// test, naming what it waited for.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := poll(timeout, func() error {
		if !cond() {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v (%v)", err, timeout)
	}
}

// poll calls f until it returns nil (then nil) or timeout has passed (then
// f's last error).
func poll(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, maxInterval)
	}
}
