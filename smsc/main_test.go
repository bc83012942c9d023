package smsc

import (
	"testing"

	"go.uber.org/goleak"
)

// The listener starts goroutines: none may outlive its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
