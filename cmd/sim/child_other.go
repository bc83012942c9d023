//go:build !linux

package main

import "os/exec"

// startChild starts a seed's child process. Outside Linux there is no
// parent-death signal: a child of a killed command runs its seed to the
// end.
func startChild(cmd *exec.Cmd) (wait func() error, err error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd.Wait, nil
}
