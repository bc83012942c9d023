package sqlite

import (
	"os"
	"syscall"
)

// SyncData makes f's data durable with fdatasync, as SQLite itself does on
// Linux: a WAL append needs its data and size, not its times.
func SyncData(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
