//go:build soak

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
)

// TestSoakRetention (make soak; the soak build tag keeps it out of make
// test): the real binary with short retentions (delivered 20s, failed
// 30s) under steady load for several cycles of the longer retention. After
// the first cycles the database file and the process's RSS stop growing
// (the sizes per cycle are printed); no message is delivered twice; a
// duplicate submit inside its message's retention returns the stored
// message, one after its purge is accepted anew.
//
// SOAK_CYCLES (default 6) sets the cycles of 30s; SOAK_RATE (default 300)
// the submits a second.
func TestSoakRetention(t *testing.T) {
	cycles, rate := envInt(t, "SOAK_CYCLES", 6), envInt(t, "SOAK_RATE", 300)
	const cycle = 30 * time.Second
	bin := nodetest.Binary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	node := singleNode(t, bin, "soak", dataDir, "--route", "44=fe",
		"--retention", "20s", "--retention-failed", "30s",
		"--forward-max-retries", "2", "--forward-retry-interval", "1s", "--http-timeout", "1s")
	node.Must(200, "PUT", "/api/frontends/fe", map[string]string{"mode": "pull"}, nil)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var submitted, refused atomic.Int64
	// The load: rate submits a second with ids, from 4 clients.
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Duration(4 * float64(time.Second) / float64(rate)))
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				status, err := node.submitStatus(fmt.Sprintf("s%d-%07d", c, i), strings.Repeat("m", 160))
				if err != nil || status != 202 {
					refused.Add(1)
					continue
				}
				submitted.Add(1)
			}
		}()
	}
	// The frontend: delivers 9 in 10 and fails the rest; every id's
	// "applied" verdict is counted: two would be a double delivery.
	var applied sync.Map // id -> *atomic.Int32
	var doubles atomic.Int64
	verdicts := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var poll struct{ Messages []messages.Outgoing }
			if status, err := node.Call("POST", "/api/frontends/fe/poll", map[string]any{"max": 200, "wait_ms": 500, "lease_ms": 30000}, &poll); err != nil || status != 200 {
				continue
			}
			var results []messages.DeliveryResult
			for _, m := range poll.Messages {
				st := messages.Delivered
				if verdicts++; verdicts%10 == 0 {
					st = messages.Failed
				}
				results = append(results, messages.DeliveryResult{ID: m.ID, Status: st, Attempt: m.Attempt, Reason: "soak"})
			}
			var acked struct{ Results []messages.AckOutcome }
			if status, err := node.Call("POST", "/api/frontends/fe/ack", map[string]any{"results": results}, &acked); err != nil || status != 200 {
				continue
			}
			for _, o := range acked.Results {
				if o.Outcome != "applied" {
					continue
				}
				n, _ := applied.LoadOrStore(o.ID, new(atomic.Int32))
				if n.(*atomic.Int32).Add(1) > 1 {
					doubles.Add(1)
				}
			}
		}
	}()

	// A duplicate inside its message's retention answers with the stored
	// message (200, not a new 202).
	dup := map[string]string{"id": "dup", "source_msisdn": "1", "destination_msisdn": "4471", "message_body": "first"}
	node.Must(202, "POST", "/api/messages", dup, nil)
	time.Sleep(5 * time.Second)
	node.Must(200, "POST", "/api/messages", dup, nil)

	type sample struct{ db, wal, rss int64 }
	var samples []sample
	start := time.Now()
	for c := 1; c <= cycles; c++ {
		time.Sleep(time.Until(start.Add(time.Duration(c) * cycle)))
		s := sample{db: fileSizes(filepath.Join(dataDir, "switchboard.db")), wal: fileSizes(filepath.Join(dataDir, "switchboard.db-wal")),
			rss: rssOf(t, node.Pid())}
		samples = append(samples, s)
		var st struct{ Counts map[string]int64 }
		node.Call("GET", "/api/status", nil, &st)
		t.Logf("cycle %d (%v): database %.1f MB (+ write-ahead log %.1f MB), RSS %.1f MB, submitted %d (refused %d), stored now: %v",
			c, time.Since(start).Round(time.Second), float64(s.db)/1e6, float64(s.wal)/1e6, float64(s.rss)/1e6, submitted.Load(), refused.Load(), st.Counts)
	}
	close(stop)
	wg.Wait()

	if doubles.Load() > 0 {
		t.Errorf("%d messages were delivered twice", doubles.Load())
	}
	if refused.Load() > submitted.Load()/100 {
		t.Errorf("%d of %d submits were refused", refused.Load(), submitted.Load()+refused.Load())
	}
	// Bounded: from the second cycle on the database and the RSS grow by
	// no more than a quarter (the first cycle fills the retention window);
	// the write-ahead log stays within the store's journal_size_limit (64
	// MiB: it keeps its size between checkpoints up to that).
	if len(samples) >= 3 {
		ref := samples[1]
		for i, s := range samples[2:] {
			if s.db > ref.db*5/4+4<<20 || s.rss > ref.rss*5/4+16<<20 || s.wal > 64<<20 {
				t.Errorf("cycle %d grew past the second: database %d -> %d, RSS %d -> %d, write-ahead log %d", i+3, ref.db, s.db, ref.rss, s.rss, s.wal)
			}
		}
	}
	// The dup message (offered and settled like any other) is long past
	// its retention: the same id is a new message.
	status, err := node.Call("POST", "/api/messages", dup, nil)
	if err != nil || status != 202 {
		t.Errorf("the dup id after its purge: %d %v, want 202 (accepted anew)", status, err)
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func fileSizes(paths ...string) int64 {
	var n int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

var vmRSS = regexp.MustCompile(`VmRSS:\s+(\d+) kB`)

// rssOf is a process's resident set size in bytes.
func rssOf(t *testing.T, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := vmRSS.FindSubmatch(data)
	if m == nil {
		t.Fatalf("no VmRSS in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}
