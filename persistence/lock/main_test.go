package lock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: a
// keeper's wait or watch left behind would.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
