package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/persistence/space/spacetest"

	_ "modernc.org/sqlite"
)

// The full-disk scenario of the storage issue, on the real binary with its
// data directory on a small file system of its own (a tmpfs the test
// mounts): concurrent clients submit until the node refuses with 507
// storage_full; reads, /readyz and acks of delivered messages go on; once an
// operator frees space the node takes new work again by itself; after a
// kill -9 and a restart every message it acknowledged is there.
//
// With a reserve (--min-free-space) the free-space check refuses first;
// without one the disk fills for real and the store's failed write does.

func TestFullDiskWithReserve(t *testing.T) { runFullDisk(t, "16MiB") }

func TestFullDiskWithoutReserve(t *testing.T) { runFullDisk(t, "0") }

func runFullDisk(t *testing.T, reserve string) {
	bin := nodetest.Binary(t)
	disk := spacetest.Tmpfs(t, 64<<20)
	filler := spacetest.Fill(t, disk, 24<<20) // what the operator frees later
	node := singleNode(t, bin, "full", filepath.Join(disk, "data"), "--min-free-space", reserve, "--route", "44=fe")
	node.Must(200, "PUT", "/api/frontends/fe", map[string]string{"mode": "pull"}, nil)

	// Fill: 8 clients submit 8 kB messages until each has seen a 507.
	body := strings.Repeat("x", 8000)
	var (
		mu       sync.Mutex
		accepted []string
		wg       sync.WaitGroup
	)
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("c%d-%06d", c, i)
				status, err := node.submitStatus(id, body)
				switch {
				case err != nil:
					t.Errorf("submit %s: %v", id, err)
					return
				case status == 202:
					mu.Lock()
					accepted = append(accepted, id)
					mu.Unlock()
				case status == 507:
					return
				default:
					t.Errorf("submit %s: status %d", id, status)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("reserve %s: %d messages accepted before the first 507", reserve, len(accepted))
	if len(accepted) == 0 {
		t.Fatal("nothing was accepted before the disk was full")
	}

	// Full: new work is refused with 507, Retry-After and the code; the
	// node stays ready and says why; reads work.
	status, hdr, doc := node.raw("POST", "/api/messages", map[string]string{
		"id": "refused", "source_msisdn": "1555", "destination_msisdn": "4471", "message_body": body})
	if status != 507 || hdr.Get("Retry-After") == "" || !strings.Contains(doc, `"storage_full"`) {
		t.Fatalf("a submit on the full disk: %d Retry-After=%q %s", status, hdr.Get("Retry-After"), doc)
	}
	status, _, doc = node.raw("GET", "/readyz", nil)
	if status != 200 || !strings.Contains(doc, `"storage":"full"`) || !strings.Contains(doc, "storage_reason") {
		t.Fatalf("/readyz on the full disk: %d %s", status, doc)
	}
	if status, _, _ := node.raw("GET", "/api/messages/"+accepted[0], nil); status != 200 {
		t.Fatalf("reading a message on the full disk: %d", status)
	}
	if status, _, _ := node.raw("GET", "/api/messages/refused", nil); status != 404 {
		t.Fatalf("the refused message: %d, want 404", status)
	}

	// With a reserve, outcomes still commit: a frontend takes and acks.
	if reserve != "0" {
		var poll struct{ Messages []messages.Outgoing }
		if status, err := node.Call("POST", "/api/frontends/fe/poll", map[string]any{"max": 50, "wait_ms": 1000, "lease_ms": 60000}, &poll); err != nil || status != 200 || len(poll.Messages) == 0 {
			t.Fatalf("poll on the full disk: %d %v (%d messages)", status, err, len(poll.Messages))
		}
		var results []messages.DeliveryResult
		for _, m := range poll.Messages {
			results = append(results, messages.DeliveryResult{ID: m.ID, Status: messages.Delivered, Attempt: m.Attempt})
		}
		var acked struct{ Results []messages.AckOutcome }
		if status, err := node.Call("POST", "/api/frontends/fe/ack", map[string]any{"results": results}, &acked); err != nil || status != 200 {
			t.Fatalf("ack on the full disk: %d %v", status, err)
		}
		for _, o := range acked.Results {
			if o.Outcome != "applied" {
				t.Fatalf("ack on the full disk: %+v", o)
			}
		}
	}

	// The operator frees space: new work is taken again, without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		id := fmt.Sprintf("after-%d", i)
		status, err := node.submitStatus(id, "after")
		if err != nil {
			t.Fatal(err)
		}
		if status == 202 {
			accepted = append(accepted, id)
			break
		}
		if status != 507 || time.Now().After(deadline) {
			t.Fatalf("a submit after space came back: %d (%v)", status, time.Since(deadline.Add(-30*time.Second)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, _, doc := node.raw("GET", "/readyz", nil); status != 200 || !strings.Contains(doc, `"storage":"ok"`) {
		t.Fatalf("/readyz with room again: %d %s", status, doc)
	}
	// Each change is logged once (within the shell's second).
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(node.Logs(), "storage has room again") {
		if time.Now().After(deadline) {
			t.Fatal("the recovery was not logged")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(node.Logs(), "storage full: new submits and forwards are refused"); n != 1 {
		t.Errorf("the full storage was logged %d times, want once", n)
	}

	// Nothing acknowledged is lost, also across kill -9.
	node.Kill()
	node.Start()
	for _, id := range accepted {
		if status, _, _ := node.raw("GET", "/api/messages/"+id, nil); status != 200 {
			t.Fatalf("acknowledged message %s: %d after the restart", id, status)
		}
	}
}

// TestFullDiskHeldWALRecovers: a reader's snapshot (a backup's VACUUM
// INTO, a long list) held while the node took work let the store's
// write-ahead log grow until the node refused new work (507). Once the
// reader was done and the cleaner had purged every message, the node
// stayed storage_full for good: a checkpoint never shrinks the WAL's file,
// which kept the space. The cleaner's compaction short of space gives it
// back, and the node takes new work again by itself.
func TestFullDiskHeldWALRecovers(t *testing.T) {
	bin := nodetest.Binary(t)
	disk := spacetest.Tmpfs(t, 64<<20)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer hook.Close()
	data := filepath.Join(disk, "data")
	node := singleNode(t, bin, "walheld", data, "--min-free-space", "24MiB", "--retention", "2s", "--retention-failed", "2s",
		"--frontend", "hook="+hook.URL+"/", "--route", "44=hook")

	reader, err := sql.Open("sqlite", filepath.Join(data, "switchboard.db")+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	tx, err := reader.BeginTx(context.Background(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow("SELECT count(*) FROM messages").Scan(&n); err != nil {
		t.Fatal(err)
	}

	// Short bodies: the WAL grows by the commits' pages, and what the
	// node writes after the first 507 (deliveries, purges) stays within
	// the reserve.
	body := "hello"
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				status, err := node.submitStatus(fmt.Sprintf("c%d-%06d", c, i), body)
				if err != nil {
					t.Errorf("submit: %v", err)
					return
				}
				if status == 507 {
					return
				}
				if status != 202 {
					t.Errorf("submit: status %d", status)
					return
				}
				accepted.Add(1)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	wal, _ := os.Stat(filepath.Join(data, "switchboard.db-wal"))
	t.Logf("%d messages accepted before the first 507; the WAL is %d bytes", accepted.Load(), wal.Size())
	if err := tx.Rollback(); err != nil { // the reader is done
		t.Fatal(err)
	}

	deadline := time.Now().Add(45 * time.Second)
	for i := 0; ; i++ {
		status, err := node.submitStatus(fmt.Sprintf("after-%d", i), "after")
		if err != nil {
			t.Fatal(err)
		}
		if status == 202 {
			break
		}
		if status != 507 || time.Now().After(deadline) {
			wal, _ := os.Stat(filepath.Join(data, "switchboard.db-wal"))
			_, _, ready := node.raw("GET", "/readyz", nil)
			t.Fatalf("a submit 45 s after the reader was done: %d; the WAL is %d bytes; /readyz %s", status, wal.Size(), ready)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// singleNode starts the binary as node name on dataDir (HTTPS with a
// certificate of a CA of its own, which its client trusts) with extra
// flags; the test's cleanup ends it, and its logs are printed when the test
// failed.
func singleNode(t *testing.T, bin, name, dataDir string, extra ...string) *e2eNode {
	t.Helper()
	certDir, pool := nodetest.DevCerts(t, bin, t.TempDir(), name)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: name}, MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	addr := nodetest.FreeAddr(t)
	node := newE2ENode(t, bin, addr, &http.Client{Transport: tr, Timeout: 30 * time.Second}, append([]string{"run", "--name", name, "--instance-id", name + "-0", "--data-dir", dataDir,
		"--listen", addr, "--metrics-listen", "",
		"--tls-cert", filepath.Join(certDir, name+".pem"), "--tls-key", filepath.Join(certDir, name+".key"),
		"--log-format", "json"}, extra...)...)
	t.Cleanup(func() {
		if t.Failed() {
			for i, l := range node.RunLogs() {
				t.Logf("--- logs of run %d of %s ---\n%s", i+1, name, tail(l, 6000))
			}
		}
	})
	node.Start()
	t.Cleanup(func() { node.End() })
	return node
}

// submitStatus submits id with body to destination 4471 and returns the
// status.
func (n *e2eNode) submitStatus(id, body string) (int, error) {
	return n.Call("POST", "/api/messages", map[string]string{
		"id": id, "source_msisdn": "1555", "destination_msisdn": "4471", "message_body": body}, nil)
}

// raw sends a JSON request and returns the status, the headers and the
// body as text; a transport error fails the test.
func (n *e2eNode) raw(method, path string, body any) (int, http.Header, string) {
	n.T.Helper()
	a, err := n.Answer(method, path, body)
	if err != nil {
		n.T.Fatalf("%s %s: %v", method, path, err)
	}
	return a.Status, a.Header, string(a.Body)
}

// TestNewDataDirOnAFullDisk: a data directory still to be made on a full
// file system (no inode left: its mkdir fails; no block left: it could be
// made, empty, but not a file in it) passed the preflight, which takes a
// full disk for writable (right for a data directory that exists: the node
// serves what it holds and refuses new work with 507). The node then
// failed at start, exit 1, with a log line naming no flag (the self-signed
// certificate's write) or later than the flags', and left an empty data
// directory behind. So did one made empty before the node's first start
// (systemd's StateDirectory makes it), restarted every few seconds. A new
// data directory has nothing to serve: the start is refused at once, exit
// 2, one line naming --data-dir and the cause, nothing made.
func TestNewDataDirOnAFullDisk(t *testing.T) {
	bin := nodetest.Binary(t)
	for _, tc := range []struct {
		name, cause string
		// disk makes the file system, calls first on it, and fills it.
		disk func(t *testing.T, first func(disk string)) string
	}{
		{"no inode left", "no space left on device", func(t *testing.T, first func(string)) string {
			disk := spacetest.TmpfsInodes(t, 1<<20, 16)
			first(disk)
			for i := 0; ; i++ {
				err := os.Mkdir(filepath.Join(disk, fmt.Sprintf("d%d", i)), 0o700)
				if errors.Is(err, syscall.ENOSPC) {
					return disk
				}
				if err != nil || i > 1000 {
					t.Fatalf("filling the inodes of %s: %v after %d", disk, err, i)
				}
			}
		}},
		{"no block left", "0 bytes free", func(t *testing.T, first func(string)) string {
			disk := spacetest.Tmpfs(t, 1<<20)
			first(disk)
			spacetest.Fill(t, disk, 1<<20)
			return disk
		}},
	} {
		// made: the data directory exists, empty (systemd's
		// StateDirectory, a volume mounted empty), as the node's first
		// start finds it; else it is still to be made.
		for _, made := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, made %v", tc.name, made), func(t *testing.T) {
				var data string
				disk := tc.disk(t, func(disk string) {
					data = filepath.Join(disk, "data")
					if made {
						if err := os.Mkdir(data, 0o700); err != nil {
							t.Fatal(err)
						}
					}
				})
				before, _ := os.ReadDir(disk)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a node that started after all
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, "run", "--name", "full", "--data-dir", data,
					"--listen", "127.0.0.1:0", "--metrics-listen", "", "--log-format", "json")
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				code := exitCode(cmd.Run())
				want := "switchboard: --data-dir: cannot make " + data
				if made {
					want = "switchboard: --data-dir: cannot start in " + data + ", which holds no switchboard.db yet"
				}
				if lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); code != 2 || len(lines) != 1 ||
					!strings.HasPrefix(lines[0], want) || !strings.Contains(lines[0], tc.cause) {
					t.Errorf("exit %d, stderr %q; want exit 2 and one line starting %q, saying %q", code, stderr.String(), want, tc.cause)
				}
				if after, _ := os.ReadDir(disk); len(after) != len(before) {
					t.Errorf("the refused start left %v in %s (was %v)", after, disk, before)
				}
				if made {
					if in, _ := os.ReadDir(data); len(in) != 0 {
						t.Errorf("the refused start left %v in the data directory", in)
					}
				}
			})
		}
	}
}
