//go:build linux

package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/nodetest"
)

// TestCredentialsRevokeReachesANodeRunningAsItsOwnUser follows the systemd
// deployment of docs/operations.md: the node runs as its own user
// (User=switchboard), /etc/switchboard is root-owned 0750 with the node's
// group, and the operator (root) runs `switchboard credentials revoke ...
// --credentials /etc/switchboard/credentials.json`. The command rewrites
// the file; it used to make it a new file of root's, mode 0600: the node
// could no longer read it, kept the credentials it last read ("a source
// that cannot be read keeps what it last gave"), and the revoked token kept
// working, while the command exited 0 saying "its token no longer opens
// anything (the node sees it within a second)".
func TestCredentialsRevokeReachesANodeRunningAsItsOwnUser(t *testing.T) {
	const nodeUID, nodeGID = nobody, nobody
	nodeBin, base := asNobody(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// /etc/switchboard: root, group switchboard, 0750 (install -d -m 0750 -g switchboard).
	etc := filepath.Join(base, "etc")
	must(os.Mkdir(etc, 0o750))
	must(os.Chown(etc, 0, nodeGID))
	// /var/lib/switchboard: the node's (StateDirectory=).
	dataDir := filepath.Join(base, "data")
	must(os.Mkdir(dataDir, 0o750))
	must(os.Chown(dataDir, nodeUID, nodeGID))
	creds := filepath.Join(etc, "credentials.json")

	cli := func(args ...string) (int, string) {
		cmd := exec.Command(nodeBin, args...)
		cmd.Env = nodetest.Env()
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	adminFile, opsFile := filepath.Join(base, "admin.token"), filepath.Join(base, "ops.token")
	if code, out := cli("credentials", "add", "admin", "--role", "admin", "--credentials", creds, "--token-file", adminFile); code != 0 {
		t.Fatalf("add admin: %d %s", code, out)
	}
	if code, out := cli("credentials", "add", "ops", "--role", "operator", "--credentials", creds, "--token-file", opsFile); code != 0 {
		t.Fatalf("add ops: %d %s", code, out)
	}
	// The operator lets the node's group read the file (else the node
	// does not even start: --credentials: permission denied).
	must(os.Chown(creds, 0, nodeGID))
	must(os.Chmod(creds, 0o640))
	opsTok, err := os.ReadFile(opsFile)
	must(err)
	ops := strings.TrimSpace(string(opsTok))

	addr := nodetest.FreeAddr(t)
	var logs bytes.Buffer
	node := exec.Command(nodeBin, "run", "--name", "dc1", "--instance-id", "dc1-0", "--data-dir", dataDir,
		"--listen", addr, "--metrics-listen", "", "--credentials", creds, "--log-format", "json")
	node.Env = nodetest.Env()
	node.Dir = dataDir
	node.Stdout, node.Stderr = io.Discard, &logs
	node.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nodeUID, Gid: nodeGID}}
	must(node.Start())
	t.Cleanup(func() { _ = node.Process.Kill(); _ = node.Wait() })

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	status := func(token string) int {
		req, _ := http.NewRequest("GET", "https://"+addr+"/api/status", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(20 * time.Second)
	for status(ops) != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("node not serving the ops credential\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	code, out := cli("credentials", "revoke", "ops", "--credentials", creds)
	if code != 0 {
		t.Fatalf("revoke: %d %s", code, out)
	}
	fi, _ := os.Stat(creds)
	st := fi.Sys().(*syscall.Stat_t)
	// The node reads the file within a second: give it five.
	time.Sleep(5 * time.Second)
	if got := status(ops); got != 401 {
		t.Fatalf("revoke exited 0 and said %q, yet 5s later the revoked token still gets %d (the file is now uid %d gid %d mode %v)\nnode logs:\n%s",
			strings.TrimSpace(out), got, st.Uid, st.Gid, fi.Mode(), tailLines(logs.String(), 5))
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprint(strings.Join(lines, "\n"))
}

// needRoot skips a test that needs root (to run the node as another user,
// to give files another owner), but fails it in CI: the CI runs as root,
// and such a test must not pass there by being skipped.
func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("this test needs root (%s); CI runs as root", why)
		}
		t.Skipf("needs root: %s; in CI this test fails instead", why)
	}
}

// TestCredentialsEditKeepsOwnerAndMode: add and revoke rewrite the file
// with the owner, group and mode of the file they replace (before: a new
// file of the user running the command, mode 0600).
func TestCredentialsEditKeepsOwnerAndMode(t *testing.T) {
	needRoot(t, "it gives the file another owner")
	dir := t.TempDir()
	file := filepath.Join(dir, "credentials.json")
	if code, _, errOut := runMain("credentials", "add", "a", "--role", "admin", "--credentials", file, "--token-file", filepath.Join(dir, "a.token")); code != 0 {
		t.Fatalf("add a: %d %s", code, errOut)
	}
	if err := os.Chown(file, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o604); err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 65534 || st.Gid != 65534 || fi.Mode().Perm() != 0o604 {
			t.Errorf("after %s: uid %d gid %d mode %v; want the old file's uid 65534 gid 65534 mode 0604", step, st.Uid, st.Gid, fi.Mode().Perm())
		}
	}
	if code, _, errOut := runMain("credentials", "add", "b", "--role", "operator", "--credentials", file, "--token-file", filepath.Join(dir, "b.token")); code != 0 {
		t.Fatalf("add b: %d %s", code, errOut)
	}
	check("add")
	if code, _, errOut := runMain("credentials", "revoke", "b", "--credentials", file); code != 0 {
		t.Fatalf("revoke b: %d %s", code, errOut)
	}
	check("revoke")
}

// TestCredentialsNewFileTakesTheDirectorysGroup: a file the command makes
// is mode 0640 with its directory's group, so that a node running as
// another user of that group (the systemd layout: /etc/switchboard is
// root's, group switchboard) reads it (before: root's group, mode 0600).
func TestCredentialsNewFileTakesTheDirectorysGroup(t *testing.T) {
	needRoot(t, "it gives the directory another group")
	dir := filepath.Join(t.TempDir(), "etc")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 0, 65534); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "credentials.json")
	if code, _, errOut := runMain("credentials", "add", "a", "--role", "admin", "--credentials", file, "--token-file", filepath.Join(dir, "a.token")); code != 0 {
		t.Fatalf("add a: %d %s", code, errOut)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 0 || st.Gid != 65534 || fi.Mode().Perm() != 0o640 {
		t.Errorf("the new file: uid %d gid %d mode %v; want uid 0 gid 65534 (the directory's) mode 0640", st.Uid, st.Gid, fi.Mode().Perm())
	}
}

// TestCredentialsEditByAnotherUser: a user who may not give the rewritten
// file the owner and group of the old one (not root, not its owner) gets
// an error naming the file and changes nothing; the file's owner edits it
// (no chown needed: it stays theirs).
func TestCredentialsEditByAnotherUser(t *testing.T) {
	const other = nobody
	bin, base := asNobody(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(base, 0o777)) // anyone may replace files here
	file := filepath.Join(base, "credentials.json")
	for _, name := range []string{"a", "b"} {
		if code, _, errOut := runMain("credentials", "add", name, "--role", "admin", "--credentials", file, "--token-file", filepath.Join(base, name+".token")); code != 0 {
			t.Fatalf("add %s: %d %s", name, code, errOut)
		}
	}
	asOther := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = nodetest.Env()
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: other, Gid: other}}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	must(os.Chmod(file, 0o644)) // the other user reads it, and may replace it (the directory is 0777)
	// The lock file root's adds made is root's: the other user takes the
	// lock all the same (it was mode 0600, opened for writing, and the
	// owner of the credentials could not edit them after root had).
	before, err := os.ReadFile(file)
	must(err)
	code, out := asOther("credentials", "revoke", "b", "--credentials", file)
	after, _ := os.ReadFile(file)
	fi, _ := os.Stat(file)
	st := fi.Sys().(*syscall.Stat_t)
	if code == 0 || !strings.Contains(out, "cannot keep the owner (uid 0)") || !bytes.Equal(before, after) || st.Uid != 0 {
		t.Errorf("revoke by uid %d of root's file: exit %d %q, file changed %v, now uid %d; want an error naming the owner and the file as it was",
			other, code, strings.TrimSpace(out), !bytes.Equal(before, after), st.Uid)
	}
	must(os.Chown(file, other, other))
	must(os.Chmod(file, 0o600))
	if code, out := asOther("credentials", "revoke", "b", "--credentials", file); code != 0 {
		t.Fatalf("revoke by the file's owner: exit %d %s", code, out)
	}
	fi, _ = os.Stat(file)
	st = fi.Sys().(*syscall.Stat_t)
	if st.Uid != other || st.Gid != other || fi.Mode().Perm() != 0o600 {
		t.Errorf("after the owner's revoke: uid %d gid %d mode %v; want %d, %d, 0600", st.Uid, st.Gid, fi.Mode().Perm(), other, other)
	}
}

// TestTokenFileMustBeAFile: --token-file naming a device (through a link,
// as /dev/stdout is one), a named pipe or a directory, or a path in a
// directory that does not exist, is a usage error before anything is
// added. The token file is replaced whole: 'credentials add ... --token-file
// /dev/stdout' (or /dev/null), run as root, replaced the device's link (or
// node) with a regular file holding the token, exit 0; a missing directory
// or a directory there lost the token of a credential added all the same.
func TestTokenFileMustBeAFile(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials.json")
	fifo, toDevice, missing := filepath.Join(dir, "fifo"), filepath.Join(dir, "stdout"), filepath.Join(dir, "none")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(os.DevNull, toDevice); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct{ path, want string }{
		{toDevice, toDevice + " is a device: "},
		{fifo, fifo + " is a named pipe: "},
		{dir, dir + " is a directory: "},
		{filepath.Join(missing, "token"), filepath.Join(missing, "token") + ": the directory " + missing + " does not exist"},
	} {
		name := fmt.Sprintf("gw%d", i)
		code, out, errOut := runMain("credentials", "add", name, "--role", "admin", "--credentials", creds, "--token-file", tc.path)
		if code != 2 || out != "" || !strings.Contains(errOut, "switchboard: --token-file: "+tc.want) {
			t.Errorf("--token-file %s: exit %d, stdout %q, stderr %q; want 2 and %q", tc.path, code, out, errOut, tc.want)
		}
	}
	if _, err := os.Stat(creds); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the credentials file after the refused adds: %v; want none made", err)
	}
	if fi, err := os.Lstat(toDevice); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link to %s after the refused add: %v, %v; want it left a link", os.DevNull, fi.Mode(), err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the named pipe after the refused add: %v, %v; want it left a pipe", fi.Mode(), err)
	}
}
