package switchboard_test

import (
	"fmt"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// TestFailedMessagesAreLogged: every message that ends failed is logged,
// at most 20 a minute one by one; the rest are counted, and the count is
// logged (here at the stop, before the minute ends).
func TestFailedMessagesAreLogged(t *testing.T) {
	cfg := testConfig(t)
	log, buf := logtest.New()
	cfg.Logger = log
	h := startNode(t, cfg)
	statuses := make([]int, 25)
	for i := range statuses {
		statuses[i] = 400 // refused for good: failed at once
	}
	wh := newWebhook(t, statuses...)
	h.webhookFrontend("hook", wh.srv.URL, "33")
	for i := range 25 {
		h.submit(fmt.Sprintf("doomed-%02d", i), "331")
	}
	for i := range 25 {
		h.waitState(fmt.Sprintf("doomed-%02d", i), messages.StateFailed)
	}
	lines := buf.Records(t, "message failed")
	if len(lines) != 20 {
		t.Fatalf("%d lines logged, want the first 20", len(lines))
	}
	for _, l := range lines {
		if l["level"] != "WARN" || l["state"] != "failed" || l["frontend"] != "hook" || l["id"] == nil || l["reason"] == "" {
			t.Fatalf("line %v", l)
		}
	}
	h.stop()
	sum := buf.Records(t, "message failures not logged one by one")
	if len(sum) != 1 || sum[0]["suppressed"] != float64(5) {
		t.Fatalf("summary %v, want one counting 5", sum)
	}
}

// TestRefusedTokensAreLogged: a missing and a wrong API token are refused
// with different messages and logged (never the token), at a bounded rate.
func TestRefusedTokensAreLogged(t *testing.T) {
	cfg := testConfig(t)
	cfg.APIToken = "s3cret-0123456789"
	log, buf := logtest.New()
	cfg.Logger = log
	h := startNode(t, cfg)
	h.token = ""
	h.apiError(401, "unauthorized", "GET", "/api/status", nil)
	h.token = "guess"
	for range 12 {
		h.apiError(401, "unauthorized", "GET", "/api/status", nil)
	}
	lines := buf.Records(t, "api token refused")
	if len(lines) != 10 || lines[0]["token"] != "missing" || lines[1]["token"] != "wrong" || lines[1]["path"] != "/api/status" || lines[1]["remote"] == nil {
		t.Fatalf("lines %v, want 10, the first for a missing token", lines)
	}
	for _, l := range lines {
		for k, v := range l {
			if v == "guess" || v == cfg.APIToken {
				t.Fatalf("a token is logged: %s=%v", k, v)
			}
		}
	}
	h.stop()
	if sum := buf.Records(t, "api token refusals not logged one by one"); len(sum) != 1 || sum[0]["suppressed"] != float64(3) {
		t.Fatalf("summary %v, want one counting 3", sum)
	}
}
