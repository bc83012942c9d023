package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/nodetest"
)

// TestSIGHUPDuringStartUpDoesNotKillTheNode: the shipped unit's
// ExecReload sends SIGHUP (systemctl reload, a certificate renewal hook).
// `switchboard run` installed its SIGHUP handler only after the flags,
// the files they name (Preflight) and switchboard.New: a SIGHUP before
// that killed the process with Go's default action, and systemd does not
// restart a service killed by SIGHUP (a "clean" signal for
// Restart=on-failure). Now it is logged and the node starts. Here the
// token file is a FIFO, so that the preflight's read of it holds the
// process in that window for as long as the test needs; the window exists
// on every start.
func TestSIGHUPDuringStartUpDoesNotKillTheNode(t *testing.T) {
	bin := nodetest.Binary(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "run", "--name", "dc1", "--data-dir", filepath.Join(dir, "data"),
		"--listen", nodetest.FreeAddr(t), "--metrics-listen", "", "--api-token-file", fifo, "--log-format", "json")
	cmd.Env = nodetest.Env()
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	ended := func() {
		t.Helper()
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		t.Fatalf("a SIGHUP during start-up ended the node: signaled %v (%v), exit %d\n%s",
			ws.Signaled(), ws.Signal(), cmd.ProcessState.ExitCode(), stderr.String())
	}
	// The node is in the preflight, reading the token file, once the FIFO
	// has a reader: a writer's non-blocking open fails with ENXIO until
	// then. (A fixed sleep here sent the SIGHUP before the process had
	// come that far when the machine was slow to start it.)
	var w *os.File
	for deadline := time.Now().Add(10 * time.Second); w == nil; {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		switch {
		case err == nil:
			w = f
		case !errors.Is(err, syscall.ENXIO):
			t.Fatal(err)
		case time.Now().After(deadline):
			t.Fatalf("the node did not open its token file within 10s\n%s", stderr.String())
		default:
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Let the read finish, then put a regular file with the same token in
	// the FIFO's place for the node's later reads (at its start, by its
	// watch).
	const token = "0123456789abcdef0123456789abcdef\n"
	if _, err := w.WriteString(token); err != nil {
		t.Fatal(err)
	}
	w.Close()
	regular := filepath.Join(dir, "token.regular")
	if err := os.WriteFile(regular, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(regular, fifo); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		ended()
	case <-time.After(5 * time.Second):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(45 * time.Second):
		t.Fatalf("the node did not stop within 45s of SIGTERM")
	}
	// Go hands a signal to its channel on a goroutine of its own: one sent
	// while the token file was read may reach it only once the node exists,
	// and is then a reload of a node not running yet, which says so. Either
	// way it is logged, and the node starts.
	if log := stderr.String(); !strings.Contains(log, "SIGHUP during start-up") && !strings.Contains(log, "the node is not running") {
		t.Errorf("the node does not log the SIGHUP it got while starting:\n%s", log)
	}
}

// TestParseRunRefusesAPipeForCallRecords: a --cdr-file that is a pipe
// (/dev/stdout in a container) hung start-up, the preflight's open waiting
// for a reader; it is refused before any open, as a device is.
func TestParseRunRefusesAPipeForCallRecords(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	want := "--cdr-file: call records: " + fifo + " is not a regular file but a pipe"
	if _, _, err := parseStart([]string{"--cdr-file", fifo}, noEnv); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("--cdr-file %s: %v, want %q", fifo, err, want)
	}
}
