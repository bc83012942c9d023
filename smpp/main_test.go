package smpp

import (
	"testing"

	"go.uber.org/goleak"
)

// Sessions start goroutines: none may outlive its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
