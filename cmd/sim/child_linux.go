package main

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startChild starts a seed's child process so that it dies with this
// process: the kernel sends it SIGKILL when the thread that started it
// exits (Pdeathsig). Killing the command (kill -9, a CI timeout) thus
// leaves no seed running on. The signal follows the starting thread, not
// the process, so the goroutine keeps its thread until the child is
// waited for; wait must be called on the same goroutine.
func startChild(cmd *exec.Cmd) (wait func() error, err error) {
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return func() error {
		defer runtime.UnlockOSThread()
		return cmd.Wait()
	}, nil
}
