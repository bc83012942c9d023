//go:build !linux

package sqlite

import "os"

// SyncData makes f's data durable (fsync; fdatasync where the system has
// it, see sync_linux.go).
func SyncData(f *os.File) error { return f.Sync() }
