package smppout

import (
	"testing"

	"go.uber.org/goleak"
)

// Clients start goroutines: none may outlive its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
