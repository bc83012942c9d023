//go:build unix

package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPU is the user+system CPU time of this process so far (clients
// and server alike: both sides of every run share the process).
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
