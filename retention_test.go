package switchboard_test

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/actors/retention"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/storetest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// TestRetentionPurgesWithCallRecords: delivered and failed messages go
// after their retention, each with a call record written first; a pending
// message stays; a client id is taken while its message is kept and free
// after the purge; the metrics count what went; the purges leave no row
// of a message behind.
func TestRetentionPurgesWithCallRecords(t *testing.T) {
	// Delivered messages go after 1 s, failed ones after 2 s (the forward
	// flags shrunk so that the start-up check of the redelivery horizon
	// allows it).
	cfg := testConfig(t)
	cfg.ForwardMaxRetries, cfg.ForwardRetryInterval, cfg.HTTPTimeout = 2, 100*time.Millisecond, 200*time.Millisecond
	cfg.Retention, cfg.RetentionFailed = time.Second, 2*time.Second
	cfg.CDRFile = filepath.Join(t.TempDir(), "cdr.jsonl")
	h := startNode(t, cfg)
	h.pullFrontend("pull", "44")

	h.submit("kept-id", "4471")
	h.submit("fails", "4472")
	h.submit("waits", "4473")
	offered := h.poll("pull", 3, 2000, 60000)
	var results []messages.DeliveryResult
	for _, o := range offered {
		switch o.ID {
		case "kept-id":
			results = append(results, messages.DeliveryResult{ID: o.ID, Status: messages.Delivered, Attempt: o.Attempt})
		case "fails":
			results = append(results, messages.DeliveryResult{ID: o.ID, Status: messages.Failed, Reason: "unknown subscriber", Attempt: o.Attempt})
		}
	}
	if len(results) != 2 {
		t.Fatalf("offered %v", offered)
	}
	h.ack("pull", results...)
	delivered := time.Now()
	h.waitState("kept-id", messages.StateDelivered)

	// Within its retention the id is taken: the stored message answers.
	var r struct{ ID, State string }
	h.must(200, "POST", "/api/messages", map[string]string{
		"id": "kept-id", "source_msisdn": "15550001", "destination_msisdn": "4471", "message_body": "hello kept-id",
	}, &r)
	if r.State != string(messages.StateDelivered) {
		t.Fatalf("a submit of a kept id answered %+v", r)
	}

	for _, id := range []string{"kept-id", "fails"} {
		polltest.Eventually(t, 20*time.Second, func() error {
			if status, _ := h.do("GET", "/api/messages/"+id, nil); status != 404 {
				return fmt.Errorf("message %s still there (%d)", id, status)
			}
			return nil
		})
	}
	if since := time.Since(delivered); since < time.Second {
		t.Errorf("kept-id was purged %v after its delivery, before its retention of 1s", since)
	}
	h.waitState("waits", messages.StatePending) // leased to the poll, never acked: not at rest

	recs := readRecords(t, cfg.CDRFile)
	for id, want := range map[string]messages.State{"kept-id": messages.StateDelivered, "fails": messages.StateFailed} {
		rec, ok := recs[id]
		if !ok {
			t.Fatalf("no call record for %s in %v", id, recs)
		}
		if rec.State != want || rec.Node != cfg.Name || rec.Record != retention.RecordKind || rec.DestinationMSISDN == "" ||
			len(rec.History) < 2 || rec.History[len(rec.History)-1].State != want || rec.Attempts != 1 || rec.BodyBytes == 0 {
			t.Errorf("call record of %s: %+v", id, rec)
		}
	}
	if rec := recs["fails"]; !strings.Contains(rec.Reason, "unknown subscriber") {
		t.Errorf("the failed message's record has reason %q", rec.Reason)
	}

	// After its purge the id is free: the same id is a new message.
	h.submit("kept-id", "4471")
	if m := h.message("kept-id"); len(m.History) != 1 || m.State != messages.StatePending {
		t.Errorf("the id after its purge: %s with history %v", m.State, m.History)
	}

	text := scrape(t, h)
	for series, want := range map[string]float64{
		`switchboard_retention_purged_total{state="delivered"}`: 1,
		`switchboard_retention_purged_total{state="failed"}`:    1,
	} {
		if got := metricValue(t, text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := metricValue(t, text, `switchboard_store_bytes{node="test-node"}`); got <= 0 {
		t.Errorf("switchboard_store_bytes = %v", got)
	}
	metricValue(t, text, "switchboard_retention_eligible")

	// The embedded store's writer does not enforce the references: the
	// node's own purges must have left none dangling.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(cfg.DataDir, "switchboard.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var orphan string
	switch err := db.QueryRow(storetest.OrphansSQL).Scan(&orphan); {
	case err == nil:
		t.Errorf("after the purges, a row of a purged message is left: %s", orphan)
	case err != sql.ErrNoRows:
		t.Errorf("orphans: %v", err)
	}
}

// readRecords reads a call record file, by message id; every line must be
// one record.
func readRecords(t *testing.T, path string) map[string]retention.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]retention.Record{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r retention.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("call record line %q: %v", sc.Text(), err)
		}
		out[r.ID] = r
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// metricValue is the value of one series in a scrape (the test fails when
// it is absent).
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no series %s in the scrape", series)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", series, err)
	}
	return v
}

// TestRetentionRefusesAShortWindow: on a federating node, a retention
// shorter than a peer may still resend a forward is refused at New,
// naming the flags.
func TestRetentionRefusesAShortWindow(t *testing.T) {
	cfg := testConfig(t)
	cfg.Federation, cfg.InsecureSkipVerify, cfg.Peers = true, true, []string{"b:8443"}
	cfg.Retention = time.Minute // the default horizon is 50 x 5s + 4 x 5s
	_, err := switchboard.New(cfg)
	if err == nil || !strings.Contains(err.Error(), "Retention: 1m0s is shorter") || !strings.Contains(err.Error(), "ForwardMaxRetries 50") {
		t.Fatalf("New with --retention 1m: %v", err)
	}
}

// TestRetentionCallRecordsOfForwardedMessages: a forwarded message has a
// record at each node: at its origin with the peer it was forwarded to,
// the outcome and attempts the peer reported; at the peer with the origin.
// A forward_failed message (it never reached the peer) names in peer the
// node it was to be forwarded to, as its dest_smsc does.
func TestRetentionCallRecordsOfForwardedMessages(t *testing.T) {
	fn, a, b := forwardingPair(t, func(c *switchboard.Config) {
		// Retention the shortest the redelivery horizon allows.
		c.HTTPTimeout, c.ForwardMaxRetries = 200*time.Millisecond, 3
		c.Retention, c.RetentionFailed = 2*time.Second, 2*time.Second
		c.CDRFile = filepath.Join(t.TempDir(), "cdr.jsonl")
	})
	b.waitPeer("a", messages.PeerHealthy)
	del, fail := a.submit("fwd-delivered", "2555"), a.submit("fwd-failed", "2556")
	for range 2 {
		got := b.pollOne("fe-b")
		res := messages.DeliveryResult{ID: got.ID, Status: messages.Delivered, Attempt: got.Attempt}
		if got.ID == fail {
			res.Status, res.Reason = messages.Failed, `unknown, "subscriber"`
		}
		b.ack("fe-b", res)
	}
	a.waitState(del, messages.StateDelivered)
	a.waitState(fail, messages.StateFailed)
	ff := a.queueDuringCut(fn, "b", "ff", 1)[0]
	a.waitState(ff, messages.StateForwardFailed)

	type want struct {
		state              messages.State
		source, dest, peer string
		attempts           int
		reason             string
	}
	for h, wants := range map[*harness]map[string]want{
		a: {
			del:  {messages.StateDelivered, "a", "b", "b", 1, ""},
			fail: {messages.StateFailed, "a", "b", "b", 1, `rejected: unknown, "subscriber"`},
			ff:   {messages.StateForwardFailed, "a", "b", "b", 0, string(messages.ReasonForwardTimeout)},
		},
		b: {
			del:  {messages.StateDelivered, "a", "b", "a", 1, ""},
			fail: {messages.StateFailed, "a", "b", "a", 1, `rejected: unknown, "subscriber"`},
		},
	} {
		for id := range wants {
			polltest.Eventually(t, 20*time.Second, func() error {
				if status, _ := h.do("GET", "/api/messages/"+id, nil); status != 404 {
					return fmt.Errorf("message %s still at %s (%d)", id, h.cfg.Name, status)
				}
				return nil
			})
		}
		recs := readRecords(t, h.cfg.CDRFile)
		for id, w := range wants {
			r, ok := recs[id]
			if !ok {
				t.Errorf("%s purged %s with no record", h.cfg.Name, id)
				continue
			}
			got := want{r.State, r.SourceSMSC, r.DestSMSC, r.Peer, r.Attempts, r.Reason}
			if got != w || r.Node != h.cfg.Name || r.Frontend != "fe-b" || r.FinalAt.IsZero() || r.FinalAt.Location() != time.UTC {
				t.Errorf("%s's record of %s: %+v, want %+v", h.cfg.Name, id, r, w)
			}
		}
	}
}
