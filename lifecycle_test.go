package switchboard_test

import (
	"context"
	"errors"
	"testing"

	"github.com/switchboard-dev/switchboard"
)

// TestStartAfterStopRefuses: Stop before Start returned nil and left the
// node startable, so a Start that lost the race with its owner's Stop
// started the node and served on its listener, the Stop lost. A node is
// started once: Start after any Stop refuses with ErrStopped.
func TestStartAfterStopRefuses(t *testing.T) {
	cfg := testConfig(t)
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); !errors.Is(err, switchboard.ErrStopped) {
		t.Errorf("Start after Stop: %v, want ErrStopped; the node serves on %q after its owner stopped it", err, n.Addr())
		n.Stop(context.Background())
	}
	if n.Addr() != "" {
		t.Errorf("Start after Stop bound %s", n.Addr())
	}
}
