package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/nodetest"
)

// TestRunningNodeWarningsNameTheFlag: the binary's warnings about a file
// it re-reads while running (the watch's, every second; a SIGHUP's) named
// the Config field ("APITokenFile: open ...") where the operator only
// knows the flag (--api-token-file), as the start-up errors say it.
func TestRunningNodeWarningsNameTheFlag(t *testing.T) {
	bin := nodetest.Binary(t)
	tokenFile := filepath.Join(t.TempDir(), "api.token")
	if err := os.WriteFile(tokenFile, []byte("a-token-of-the-operator\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	node := singleNode(t, bin, "w", t.TempDir(), "--api-token-file", tokenFile)
	if err := os.Remove(tokenFile); err != nil {
		t.Fatal(err)
	}

	// waitErr waits for the first record msg and returns its err.
	waitErr := func(msg string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if r := findRecord(logRecords(t, node.Logs()), msg); r != nil {
				s, _ := r["err"].(string)
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q logged in 30s", msg)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	check := func(what, err string) {
		t.Helper()
		if !strings.HasPrefix(err, "--api-token-file: ") || strings.Contains(err, "APITokenFile") {
			t.Errorf("%s: err %q, want it to name --api-token-file (the flag the operator gave), not the Config field", what, err)
		}
	}
	check("the watch's warning", waitErr("cannot check for changes; what is in force stays"))
	node.Signal(syscall.SIGHUP)
	check("the node's reload error", waitErr("reload: a source of the credentials keeps what it last gave"))
	check("the SIGHUP warning", waitErr("reload incomplete; what could not be read stays as it was"))
}
