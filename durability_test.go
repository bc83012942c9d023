package switchboard_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
	"github.com/switchboard-dev/switchboard/polltest"
)

// heldSync is a store Sync that can be held back: while held, every sync of
// the WAL waits.
type heldSync struct {
	mu   sync.Mutex
	open chan struct{}
}

func newHeldSync() *heldSync {
	h := &heldSync{open: make(chan struct{})}
	close(h.open)
	return h
}

func (h *heldSync) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open = make(chan struct{})
}

func (h *heldSync) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.open:
	default:
		close(h.open)
	}
}

func (h *heldSync) sync(f *os.File) error {
	h.mu.Lock()
	open := h.open
	h.mu.Unlock()
	<-open
	return sqlite.SyncData(f)
}

// TestNothingLeavesBeforeItsSync runs a node whose store cannot make its
// WAL durable for a while: once a submit's commit is made (and not synced),
// its 202, a duplicate submit's 200, a message document, a poll given the
// new message, and an ack's result all wait until that commit is synced.
func TestNothingLeavesBeforeItsSync(t *testing.T) {
	held := newHeldSync()
	cfg := testConfig(t)
	scfg := sqlite.DefaultConfig()
	scfg.Path, scfg.Sync = filepath.Join(cfg.DataDir, "switchboard.db"), held.sync
	store, err := sqlite.Open(context.Background(), scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	cfg.Store = store
	h := startNode(t, cfg)
	h.pullFrontend("fe", "44")
	h.pullFrontend("fe2", "45")
	h.submit("before", "441")
	peek, err := sql.Open("sqlite", scfg.Path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peek.Close() })
	committed := func(id string) bool {
		var n int
		_ = peek.QueryRow(`SELECT count(*) FROM messages WHERE id = ?`, id).Scan(&n)
		return n == 1
	}

	held.hold()
	t.Cleanup(held.release)
	done := make(chan string, 8)
	call := func(what string, f func()) {
		go func() { f(); done <- what }()
	}
	call("submit", func() { h.submit("during", "451") })
	polltest.Eventually(t, 10*time.Second, func() error {
		if !committed("during") {
			return fmt.Errorf("the submit's commit has not happened")
		}
		return nil
	})
	got := make(chan []messages.Outgoing, 1)
	call("poll", func() { got <- h.poll("fe2", 10, 10000, 30000) })
	call("duplicate submit", func() {
		h.must(200, "POST", "/api/messages", map[string]string{"id": "before", "source_msisdn": "15550001", "destination_msisdn": "441", "message_body": "hello before"}, nil)
	})
	call("message document", func() { h.message("before") })
	call("ack", func() { h.ack("fe", messages.DeliveryResult{ID: "before", Status: messages.Delivered}) })
	select {
	case what := <-done:
		t.Fatalf("%s answered while the commit it depends on was not durable", what)
	case <-time.After(300 * time.Millisecond):
	}
	held.release()
	for range 5 {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("not every call answered after the sync")
		}
	}
	if out := <-got; len(out) != 1 || out[0].ID != "during" || out[0].Attempt != 1 {
		t.Errorf("the waiting poll got %+v, want the new message, attempt 1", out)
	}
}
