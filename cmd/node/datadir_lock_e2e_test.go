package main

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"os"
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

	logs := refusedOnDataDir(t, bin, dataDir, "--name", "dc1", "--instance-id", "dc1-0")
	want := "--data-dir: sqlite: " + filepath.Join(dataDir, "switchboard.db") + " is in use by another running process"
	if !strings.Contains(logs, want) {
		t.Errorf("the second node's log does not say %q:\n%s", want, tail(logs, 3000))
	}

	first.Kill()
	singleNode(t, bin, "dc1", dataDir)
}

// TestRefusedNodeChangesNothingInTheDataDir: a second process refused the
// data directory of a running node changes nothing there. Started with
// another name (without --name: the host's), it replaced the running
// node's self-signed certificate and key with its own before the lock
// refused it, and the running node reloaded them and served the other
// name's certificate.
func TestRefusedNodeChangesNothingInTheDataDir(t *testing.T) {
	bin := nodetest.Binary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	addr := nodetest.FreeAddr(t)
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	t.Cleanup(tr.CloseIdleConnections)
	first := newE2ENode(t, bin, addr, &http.Client{Transport: tr, Timeout: 30 * time.Second}, "run", "--name", "dc1", "--instance-id", "dc1-0",
		"--data-dir", dataDir, "--listen", addr, "--metrics-listen", "", "--log-format", "json")
	first.Start()
	t.Cleanup(first.End)

	before := dataDirFiles(t, dataDir)
	refusedOnDataDir(t, bin, dataDir, "--name", "dc2")
	after := dataDirFiles(t, dataDir)
	for name, was := range before {
		if now, ok := after[name]; !ok {
			t.Errorf("%s: removed by the refused process", name)
		} else if !bytes.Equal(now, was) {
			t.Errorf("%s: rewritten by the refused process", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s: made by the refused process", name)
		}
	}
}

// refusedOnDataDir runs a second node on the data directory of a running
// one, with args, and returns its log once it exited 1, as it must.
func refusedOnDataDir(t *testing.T, bin, dataDir string, args ...string) string {
	t.Helper()
	code, logs := runToExit(t, bin, 30*time.Second, "a second node ran for 30s on the data directory of a running one",
		append(append([]string{"run"}, args...), "--data-dir", dataDir,
			"--listen", nodetest.FreeAddr(t), "--metrics-listen", "", "--log-format", "json")...)
	if code != 1 {
		t.Fatalf("the second node exited %d, want exit 1\n%s", code, tail(logs, 3000))
	}
	return logs
}

// dataDirFiles is what the data directory holds that is not the running
// store's (its database and the files SQLite writes beside it change as
// the node runs): name to content.
func dataDirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		switch e.Name() {
		case "switchboard.db", "switchboard.db-wal", "switchboard.db-shm":
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}
