//go:build linux

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

// nobody is the user the tests below run the node as: a node of its own
// user (systemd's User=switchboard), files made by root it may not write.
const nobody = 65534

// asNobody is the node's binary where user nobody may run it (the test's
// own temporary directories are root's, mode 0700), and a base directory
// of root's, mode 0755, for the test's files. It needs root (needRoot).
func asNobody(t *testing.T) (bin, base string) {
	t.Helper()
	needRoot(t, "it runs the node as another user")
	base, err := os.MkdirTemp("", "switchboard-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	data, err := os.ReadFile(nodetest.Binary(t))
	if err == nil {
		err = os.Chmod(base, 0o755)
	}
	bin = filepath.Join(base, "switchboard")
	if err == nil {
		err = os.WriteFile(bin, data, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin, base
}

// startAsNobody runs bin with args as user nobody until it exits (at most
// 20 s: a node still running then fails the test) and returns its exit
// code and standard error.
func startAsNobody(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Stderr = nodetest.Env(), &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%q ran for 20 s; want it refused at start\n%s", args, tail(stderr.String(), 3000))
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// TestStartRefusesFilesItsUserCannotWrite: the node's user must write its
// --cdr-file and its directory (it makes and rotates the file there) and the
// store in its --data-dir. Both passed the checks before anything opens;
// the node then made and migrated the store and exited 1 at the call
// records' file (systemd restarts that every 5 s), or exited 1 with
// SQLite's "unable to open database file" on a store restored by root
// (its backup is root's, mode 0600). Each is refused before anything
// opens now: exit 2, one line naming the flag.
func TestStartRefusesFilesItsUserCannotWrite(t *testing.T) {
	bin, base := asNobody(t)
	dataDir, rootDir := filepath.Join(base, "data"), filepath.Join(base, "log")
	for _, d := range []string{dataDir, rootDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dataDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	rootFile := filepath.Join(rootDir, "cdr-of-root.jsonl")
	if err := os.WriteFile(rootFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The node's own file in root's directory (systemd's ReadWritePaths=
	// naming the file, not its directory): it was taken, and the first
	// rotation, days later, could not rename it aside, nor make a new file
	// after logrotate moved it: nothing was purged from then on.
	ownFile := filepath.Join(rootDir, "cdr-of-nobody.jsonl")
	if err := os.WriteFile(ownFile, nil, 0o644); err == nil {
		err = os.Chown(ownFile, nobody, nobody)
	} else {
		t.Fatal(err)
	}
	run := []string{"run", "--name", "dc1", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--log-format", "json"}
	for _, tc := range []struct {
		name, cdr, want string
	}{
		{"a file still to be made in root's directory", filepath.Join(rootDir, "cdr.jsonl"),
			"switchboard: --cdr-file: the directory of " + filepath.Join(rootDir, "cdr.jsonl") + ", " + rootDir + ", is not writable: permission denied"},
		{"root's file", rootFile, "switchboard: --cdr-file: " + rootFile + ": permission denied"},
		{"its file in root's directory", ownFile,
			"switchboard: --cdr-file: the directory of " + ownFile + ", " + rootDir + ", is not writable: permission denied"},
	} {
		code, stderr := startAsNobody(t, bin, append(run, "--cdr-file", tc.cdr)...)
		_, dbErr := os.Stat(filepath.Join(dataDir, "switchboard.db"))
		if code != 2 || !errors.Is(dbErr, os.ErrNotExist) || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("%s: exit %d (want 2), the store made: %v (want not), stderr %q, want it to start %q", tc.name, code, dbErr == nil, tail(stderr, 1000), tc.want)
		}
	}

	// A store restored by root, as the backup command writes it; and a
	// store of the node's own user whose lock a node run as root left.
	db := filepath.Join(dataDir, "switchboard.db")
	if err := os.WriteFile(db, []byte("SQLite format 3\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := "switchboard: --data-dir: " + db + " cannot be opened for writing: permission denied (the node's user must own it"
	if code, stderr := startAsNobody(t, bin, run...); code != 2 || !strings.HasPrefix(stderr, want) {
		t.Errorf("a store of root's: exit %d (want 2), stderr %q, want it to start %q", code, tail(stderr, 1000), want)
	}
	if err := os.Chown(db, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db+"-lock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	want = "switchboard: --data-dir: " + db + "-lock cannot be opened for writing: permission denied"
	if code, stderr := startAsNobody(t, bin, run...); code != 2 || !strings.HasPrefix(stderr, want) {
		t.Errorf("a lock of root's: exit %d (want 2), stderr %q, want it to start %q", code, tail(stderr, 1000), want)
	}
}
