package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/nodetest"
)

// TestSecondNodeOnADataDirIsRefused: a second `switchboard run` on the
// --data-dir of a running node (a second unit, a container started while
// the old one still holds the volume) stops at start, naming the
// directory's lock; it ran, took the ring and claimed as the same owner
// the work the first had out, which it delivered a second time. Once the
// first is gone (killed: the lock goes with the process), a node starts
// there.
func TestSecondNodeOnADataDirIsRefused(t *testing.T) {
	bin := nodetest.Binary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	first := singleNode(t, bin, "dc1", dataDir)

	var logs bytes.Buffer
	cmd := exec.Command(bin, "run", "--name", "dc1", "--instance-id", "dc1-0", "--data-dir", dataDir,
		"--listen", nodetest.FreeAddr(t), "--metrics-listen", "", "--log-format", "json")
	cmd.Env = nodetest.Env()
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || cmd.ProcessState.ExitCode() != 1 {
			t.Fatalf("the second node exited %v, want exit 1\n%s", err, tail(logs.String(), 3000))
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("a second node ran for 30s on the data directory of a running one\n%s", tail(logs.String(), 3000))
	}
	want := "--data-dir: sqlite: " + filepath.Join(dataDir, "switchboard.db") + " is in use by another running process"
	if !strings.Contains(logs.String(), want) {
		t.Errorf("the second node's log does not say %q:\n%s", want, tail(logs.String(), 3000))
	}

	first.Kill()
	singleNode(t, bin, "dc1", dataDir)
}
