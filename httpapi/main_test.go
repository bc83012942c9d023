package httpapi

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the peer client's
// connections, the test servers and blocked handlers all end with their
// test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
