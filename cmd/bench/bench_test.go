package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// benchLine is the format of BENCH.md.
var benchLine = regexp.MustCompile(`^bench: (\S+) (\S+) (\S+) baseline=(\S+) ratio=(\S+)$`)

// TestShortRun runs the whole benchmark with --short and checks that every
// figure prints exactly one parseable bench: line, and nothing else is
// printed outside # lines, so the harness cannot rot silently. It uses 8
// clients: under -race on 2 shared cores, 64 TLS clients spend the short
// window in handshakes. A 2s window keeps a stall of the shared machine
// from leaving a figure without a single completion.
func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real nodes for a few seconds")
	}
	var out, errOut bytes.Buffer
	start := time.Now()
	if err := run([]string{"--short", "--window", "2s", "--clients", "8", "--consumers", "2"}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	t.Logf("took %v:\n%s", time.Since(start).Round(time.Millisecond), &out)
	seen := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimRight(out.Bytes(), "\n"), []byte("\n")) {
		if bytes.HasPrefix(line, []byte("#")) {
			continue
		}
		m := benchLine.FindSubmatch(line)
		if m == nil {
			t.Errorf("line is neither a comment nor a bench: line: %q", line)
			continue
		}
		name := string(m[1])
		seen[name]++
		if string(m[3]) != "msg/s" {
			t.Errorf("%s: unit %q, want msg/s", name, m[3])
		}
		for _, f := range []struct{ what, s string }{{"value", string(m[2])}, {"baseline", string(m[4])}, {"ratio", string(m[5])}} {
			v, err := strconv.ParseFloat(f.s, 64)
			if err != nil || !(v > 0) {
				t.Errorf("%s: %s %q is not a positive number", name, f.what, f.s)
			}
		}
	}
	for _, fig := range figures {
		if seen[fig] != 1 {
			t.Errorf("figure %s printed %d times, want once", fig, seen[fig])
		}
	}
	if len(seen) != len(figures) {
		t.Errorf("figures printed: %v, want %v", seen, figures)
	}
	if bytes.Contains(out.Bytes(), []byte("FAILED")) {
		t.Errorf("requests failed during the run:\n%s", &out)
	}
}

// TestBodies: each submission is exactly the asked size, valid, and routed
// to the bench frontend's prefix.
func TestBodies(t *testing.T) {
	for _, size := range []int{160, 321, 1000} {
		for i, b := range newBodies(3, size) {
			if len(b) != size {
				t.Errorf("size %d: body %d is %d bytes", size, i, len(b))
			}
			var s messages.Submission
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("body %q: %v", b, err)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("body %q: %v", b, err)
			}
			if s.DestinationMSISDN[:len(routePrefix)] != routePrefix {
				t.Errorf("destination %q is not under the route %q", s.DestinationMSISDN, routePrefix)
			}
		}
	}
}

func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{"--short", "--window", "3s", "--only", "delivery"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.window != 3*time.Second || o.warmup != 500*time.Millisecond || o.repeat != 1 || o.only != "delivery" || o.clients != 64 {
		t.Errorf("options %+v", o)
	}
	o, err = parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.window != 10*time.Second || o.warmup != 2*time.Second || o.repeat != 3 || o.clients != 64 {
		t.Errorf("defaults %+v", o)
	}
	for _, bad := range [][]string{{"--only", "nope"}, {"--repeat", "0"}, {"--clients", "0"}, {"extra"}} {
		if _, err := parseFlags(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
