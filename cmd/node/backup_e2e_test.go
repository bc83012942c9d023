package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
)

// TestBackupAndRestore: `switchboard backup` copies the store of a
// running node under load; a node started on the restored copy holds every
// message acknowledged before the backup began, in the state it had then.
func TestBackupAndRestore(t *testing.T) {
	bin := nodetest.Binary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	node := singleNode(t, bin, "bak", dataDir, "--route", "44=fe")
	node.Must(200, "PUT", "/api/frontends/fe", map[string]string{"mode": "pull"}, nil)
	var before []string
	for i := range 200 {
		id := fmt.Sprintf("before-%03d", i)
		node.Must(202, "POST", "/api/messages", map[string]string{"id": id, "source_msisdn": "1555", "destination_msisdn": "4471", "message_body": "m"}, nil)
		before = append(before, id)
	}
	var poll struct{ Messages []messages.Outgoing }
	if status, err := node.Call("POST", "/api/frontends/fe/poll", map[string]any{"max": 50, "wait_ms": 1000, "lease_ms": 60000}, &poll); err != nil || status != 200 || len(poll.Messages) == 0 {
		t.Fatalf("poll: %d %v", status, err)
	}
	delivered := map[string]bool{}
	var results []messages.DeliveryResult
	for _, m := range poll.Messages {
		results = append(results, messages.DeliveryResult{ID: m.ID, Status: messages.Delivered, Attempt: m.Attempt})
		delivered[m.ID] = true
	}
	node.Must(200, "POST", "/api/frontends/fe/ack", map[string]any{"results": results}, nil)

	// The backup, while clients go on submitting.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("during-%d-%d", c, i)
				if status, err := node.submitStatus(id, "m"); err != nil || status != 202 {
					t.Errorf("submit during the backup: %d %v", status, err)
					return
				}
			}
		}()
	}
	file := filepath.Join(t.TempDir(), "switchboard-backup.db")
	out, err := exec.Command(bin, "backup", "--to", file, "--data-dir", dataDir).CombinedOutput()
	close(stop)
	wg.Wait()
	if err != nil || !strings.HasPrefix(string(out), file+": ") || !strings.Contains(string(out), " messages, ") {
		t.Fatalf("switchboard backup: %v\n%s", err, out)
	}
	// It never overwrites.
	if out, err := exec.Command(bin, "backup", "--to", file, "--data-dir", dataDir).CombinedOutput(); exitCode(err) != 1 || !strings.Contains(string(out), "exists") {
		t.Errorf("a second backup to the same file: %v\n%s", err, out)
	}
	node.Stop()

	// Restore over the stopped node's store as the help says, and start
	// the node again.
	restoreAsHelpSays(t, file, dataDir)
	again := singleNode(t, bin, "bak", dataDir)
	for _, id := range before {
		var m messages.Message
		if status, err := again.Call("GET", "/api/messages/"+id, nil, &m); err != nil || status != 200 {
			t.Fatalf("message %s on the restored node: %d %v", id, status, err)
		}
		if want := map[bool]messages.State{true: messages.StateDelivered, false: messages.StatePending}[delivered[id]]; m.State != want {
			t.Errorf("message %s on the restored node is %s, want %s", id, m.State, want)
		}
	}
}

// restoreAsHelpSays runs the restore commands of `switchboard backup
// --help` (its lines "  mv ..." and "  rm ..."), with FILE and DIR
// replaced, as a shell would: an rm without -f of a file that is not
// there fails, as it did for the operator who followed an earlier help
// after a clean stop, which leaves no -wal or -shm file.
func restoreAsHelpSays(t *testing.T, file, dataDir string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := mainCode([]string{"backup", "--help"}, &stdout, &stderr, func(string) (string, bool) { return "", false }); code != 0 {
		t.Fatalf("backup --help: exit %d, %s", code, stderr.String())
	}
	ran := 0
	for _, line := range strings.Split(stdout.String(), "\n") {
		args := strings.Fields(line)
		if !strings.HasPrefix(line, "  ") || len(args) == 0 || (args[0] != "mv" && args[0] != "rm") {
			continue
		}
		for i, a := range args {
			a = strings.ReplaceAll(a, "FILE", file)
			args[i] = strings.ReplaceAll(a, "DIR", dataDir)
		}
		ran++
		switch {
		case args[0] == "mv" && len(args) == 3:
			if err := os.Rename(args[1], args[2]); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		case args[0] == "rm":
			force := len(args) > 1 && args[1] == "-f"
			paths := args[1:]
			if force {
				paths = args[2:]
			}
			for _, p := range paths {
				if err := os.Remove(p); err != nil && !(force && errors.Is(err, os.ErrNotExist)) {
					t.Fatalf("%s: %v", strings.TrimSpace(line), err)
				}
			}
		default:
			t.Fatalf("backup --help: a restore command this test cannot run: %q", line)
		}
	}
	if ran == 0 {
		t.Fatalf("backup --help gives no restore commands:\n%s", stdout.String())
	}
}

// TestBackupRefusesBadUse: the command's usage errors exit 2 with one line
// naming the flag.
func TestBackupRefusesBadUse(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "--to: required"},
		{[]string{"--to", "x.db", "extra"}, nil, `unexpected argument "extra"`},
		{[]string{"--to", "x.db", "--postgres", "postgres://db/sb"}, nil, "--postgres: the shared store is backed up with Postgres's own tools"},
		{[]string{"--to", "x.db"}, map[string]string{"SWITCHBOARD_POSTGRES": "postgres://db/sb"}, "--postgres:"},
		{[]string{"--bogus"}, nil, "--bogus: unknown flag"},
	} {
		var stdout, stderr bytes.Buffer
		env := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		if code := mainCode(append([]string{"backup"}, c.args...), &stdout, &stderr, env); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("backup %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := mainCode([]string{"backup", "--to", filepath.Join(t.TempDir(), "x.db"), "--data-dir", t.TempDir()}, &stdout, &stderr,
		func(string) (string, bool) { return "", false }); code != 1 || !strings.Contains(stderr.String(), "no store at") {
		t.Errorf("backup of an empty data dir: exit %d, %q", code, stderr.String())
	}
}

// exitCode is a finished command's exit code (0 for no error, -1 when it
// did not run to an exit).
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}
