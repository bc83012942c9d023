package retention

import (
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenRecordsRefusesAPipe: a pipe (/dev/stdout in a container) is
// refused before any open, which would wait for its other end: start-up
// hung there.
func TestOpenRecordsRefusesAPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o640); err != nil {
		t.Fatal(err)
	}
	refuseIrregular(t, fifo)
}
