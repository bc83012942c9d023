package main

import (
	"time"

	"golang.org/x/sys/windows"
)

// processCPU is the user+system CPU time of this process so far (clients
// and server alike: both sides of every run share the process).
func processCPU() time.Duration {
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &created, &exited, &kernel, &user); err != nil {
		return 0
	}
	// A Filetime counts 100 ns intervals.
	ticks := func(t windows.Filetime) int64 { return int64(t.HighDateTime)<<32 | int64(t.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}
