package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/polltest"
)

// TestKilledCommandTakesItsSeedsWithIt kills the command (kill -9) while a
// seed runs in its child: the child dies too, instead of running its seed
// on without anyone to read it.
func TestKilledCommandTakesItsSeedsWithIt(t *testing.T) {
	bin := buildSim(t)
	var out bytes.Buffer
	cmd := exec.Command(bin, "--seeds", "2", "--jobs", "2", "--nodes", "2", "--duration", "30m", "--seed", "1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var child int
	polltest.Eventually(t, 30*time.Second, func() error {
		kids := childrenOf(cmd.Process.Pid)
		if len(kids) == 0 {
			return fmt.Errorf("no child of %d yet", cmd.Process.Pid)
		}
		child = kids[0]
		t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) }) // when the test fails
		return nil
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	polltest.Until(t, 30*time.Second, fmt.Sprintf("the seed's child %d ends", child), func() bool {
		state, ok := procState(child)
		return !ok || state == "Z" // gone, or dead and not yet reaped by its new parent
	})
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var kids []int
	for _, d := range dirs {
		p, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if ppid, ok := procField(p, 1); ok && ppid == strconv.Itoa(pid) {
			kids = append(kids, p)
		}
	}
	return kids
}

// procState is the state letter of pid (R, S, Z, ...); ok is false when
// there is no such process.
func procState(pid int) (string, bool) { return procField(pid, 0) }

// procField is the field i after the command name in /proc/pid/stat (0:
// state, 1: parent pid).
func procField(pid, i int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	s := string(b)
	rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if i >= len(rest) {
		return "", false
	}
	return rest[i], true
}
