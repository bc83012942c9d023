package switchboard_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// search lists every message of a query of GET /api/messages, following
// the cursor, and returns the ids.
func (h *harness) search(query string) []string {
	h.t.Helper()
	var ids []string
	cursor := ""
	for range 50 {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		var page struct {
			Messages   []messages.Message
			NextCursor string `json:"next_cursor"`
		}
		h.must(200, "GET", "/api/messages?"+q, nil, &page)
		for _, m := range page.Messages {
			ids = append(ids, m.ID)
		}
		if page.NextCursor == "" {
			return ids
		}
		cursor = page.NextCursor
	}
	h.t.Fatalf("%s: more than 50 pages", query)
	return nil
}

// TestSearchMessages: the search of GET /api/messages on a real node: a
// number with or without '+' (and a '+' a URL turned into a space), a
// prefix, a source, a time range, a frontend, with cursor paging.
func TestSearchMessages(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("uk", "44")
	h.pullFrontend("fr", "33")
	send := func(id, src, dest string) {
		h.must(202, "POST", "/api/messages", map[string]string{"id": id, "source_msisdn": src, "destination_msisdn": dest, "message_body": "x"}, nil)
	}
	send("m1", "+15550001", "+447700900001")
	send("m2", "15550002", "447700900001")
	send("m3", "ACME", "447700900002")
	send("m4", "+15550001", "33612345678")
	mid := time.Now().UTC()
	send("m5", "15550001", "+447700900001")

	same := func(what string, got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	same("destination with +", h.search("destination=%2B447700900001&limit=2"), "m5", "m2", "m1")
	same("destination without +", h.search("destination=447700900001&limit=2"), "m5", "m2", "m1")
	same("a + that became a space", h.search("destination=+447700900001&limit=2"), "m5", "m2", "m1")
	same("destination prefix", h.search("destination=4477*&limit=2"), "m5", "m3", "m2", "m1")
	same("source", h.search("source=15550001&limit=2"), "m5", "m4", "m1")
	same("source prefix", h.search("source=AC*&limit=2"), "m3")
	same("since", h.search("limit=2&since="+url.QueryEscape(mid.Format(time.RFC3339Nano))), "m5")
	same("until", h.search("limit=2&until="+url.QueryEscape(mid.Format(time.RFC3339Nano))), "m4", "m3", "m2", "m1")
	same("frontend", h.search("frontend=fr&limit=2"), "m4")
	same("number and frontend", h.search("destination=4477*&frontend=fr&limit=2"))
	same("number, state and time", h.search("limit=2&destination=447700900001&state=pending&until="+url.QueryEscape(mid.Format(time.RFC3339Nano))), "m2", "m1")
}

// TestSearchFindsEveryAcceptedSource: a sender id the node accepts is
// found by a search of its own value. One with a blank at either end
// ("ACME ", " Bank") or after its '+' was stored as given and never found
// (the search's key drops the blanks, the stores compare the source
// without its '+' only): it is refused with 400 and nothing is stored.
func TestSearchFindsEveryAcceptedSource(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("uk", "44")
	for i, src := range []string{"ACME ", " Bank", "+ 5", "+"} {
		h.apiError(400, "invalid_request", "POST", "/api/messages",
			map[string]string{"id": fmt.Sprintf("blank-%d", i), "source_msisdn": src, "destination_msisdn": "447700900001", "message_body": "x"})
	}
	if got := h.search("limit=10"); len(got) != 0 {
		t.Fatalf("refused submissions stored %v", got)
	}
	for id, src := range map[string]string{"s1": "ACME Bank", "s2": "+15550100", "s3": "++4477"} {
		h.must(202, "POST", "/api/messages", map[string]string{"id": id, "source_msisdn": src, "destination_msisdn": "447700900001", "message_body": "x"}, nil)
		if got := h.search("source=" + url.QueryEscape(src)); fmt.Sprint(got) != "["+id+"]" {
			t.Errorf("source=%q (its exact value): %v, want [%s]", src, got, id)
		}
	}
}

// TestForgedTimeCursorIsRefused: the cursor of a time range carries an
// acceptance time (123@<microseconds>); one whose time no message can
// have (before the year 0 or after 9999) is a cursor the API never
// returned, and is refused 400 invalid_request naming the cursor, on both
// stores alike. SQLite answered it 200 (an empty page, or every message);
// Postgres 400 in its own words ("postgres: list messages: ERROR:
// timestamp out of range") or, for the smallest int64, 200 with the
// newest messages: a page that follows nothing.
func TestForgedTimeCursorIsRefused(t *testing.T) {
	onEachStore(t, func(t *testing.T, h *harness) {
		h.pullFrontend("uk", "44")
		h.submit("m1", "447700900001")
		since := "since=2020-01-01T00:00:00Z&limit=1&cursor="
		for _, micros := range []int64{math.MinInt64, -300_000_000_000_000_000, -62_167_219_200_000_001,
			253_402_300_800_000_000, math.MaxInt64} {
			path := fmt.Sprintf("/api/messages?%s1@%d", since, micros)
			status, body := h.api().Do("GET", path, nil)
			var doc struct {
				Error struct{ Code, Message string }
			}
			_ = json.Unmarshal(body, &doc)
			if status != 400 || doc.Error.Code != "invalid_request" || !strings.Contains(doc.Error.Message, "not a cursor this API returned") {
				t.Errorf("GET %s: %d %s; want 400 invalid_request: not a cursor this API returned", path, status, strings.TrimSpace(string(body)))
			}
		}
		// The bounds themselves are times a message may have.
		for _, at := range []time.Time{time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)} {
			want := []string{}
			if at.Year() == 9999 {
				want = []string{"m1"}
			}
			var page struct{ Messages []messages.Message }
			h.must(200, "GET", fmt.Sprintf("/api/messages?%s1@%d", since, at.UnixMicro()), nil, &page)
			got := []string{}
			for _, m := range page.Messages {
				got = append(got, m.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("a cursor at %v: %v, want %v", at, got, want)
			}
		}
	})
}
