package switchboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
)

func TestPullFrontendDeliversExactlyOnce(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	id := h.submit("", "+447700900001")

	m := h.message(id)
	if m.State != messages.StatePending || m.Frontend != "fe1" || m.SourceSMSC != "test-node" || m.DestSMSC != "test-node" || len(m.History) != 1 {
		t.Fatalf("after submit: %+v", m)
	}
	got := h.poll("fe1", 10, 5000, 30000)
	if len(got) != 1 || got[0].ID != id || got[0].Attempt != 1 || got[0].DestinationMSISDN != "+447700900001" || got[0].SourceSMSC != "test-node" {
		t.Fatalf("poll: %+v", got)
	}
	if out := h.ack("fe1", messages.DeliveryResult{ID: id, Status: messages.Delivered}); out[0].Outcome != "applied" {
		t.Fatalf("ack: %+v", out)
	}
	m = h.message(id)
	if m.State != messages.StateDelivered || len(m.History) != 2 || m.History[1].State != messages.StateDelivered {
		t.Fatalf("after ack: %+v", m)
	}
	if out := h.ack("fe1", messages.DeliveryResult{ID: id, Status: messages.Delivered}); out[0].Outcome != "already_recorded" {
		t.Fatalf("second ack: %+v", out)
	}
	if got := h.poll("fe1", 10, 200, 30000); len(got) != 0 {
		t.Fatalf("delivered message offered again: %+v", got)
	}
}

func TestLongPollIsAnsweredWhenWorkArrives(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	got := make(chan []messages.Outgoing, 1)
	go func() { got <- h.poll("fe1", 5, 20000, 30000) }()
	// The poll is waiting; a submit must wake it long before its 20 s wait ends.
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	id := h.submit("m-wake", "4470")
	select {
	case msgs := <-got:
		if len(msgs) != 1 || msgs[0].ID != id {
			t.Fatalf("poll got %+v", msgs)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("poll answered %v after the submit", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long-poll was not woken by the submit")
	}
}

func TestSubmitWithIDIsIdempotent(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	h.submit("order-17", "4412")
	var again messages.Message
	h.must(200, "POST", "/api/messages", map[string]string{
		"id": "order-17", "source_msisdn": "15550001", "destination_msisdn": "4412", "message_body": "hello order-17",
	}, &again)
	if again.ID != "order-17" || again.Body != "hello order-17" || again.State != messages.StatePending {
		t.Fatalf("second submit returned %+v, want the stored message", again)
	}
	// Other content under the same id is a conflict, not the old message.
	h.apiError(409, "id_conflict", "POST", "/api/messages", map[string]string{
		"id": "order-17", "source_msisdn": "other", "destination_msisdn": "4499", "message_body": "different",
	})
	var list struct{ Messages []messages.Message }
	h.must(200, "GET", "/api/messages", nil, &list)
	if len(list.Messages) != 1 || list.Messages[0].Body != "hello order-17" {
		t.Fatalf("stored %+v, want the one first message", list.Messages)
	}
}

func TestConcurrentSubmitsWithOneIDStoreOne(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	var created, existing atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _ := h.do("POST", "/api/messages", map[string]string{
				"id": "same", "source_msisdn": "1", "destination_msisdn": "441", "message_body": "x",
			})
			switch status {
			case 202:
				created.Add(1)
			case 200:
				existing.Add(1)
			default:
				t.Errorf("status %d", status)
			}
		}()
	}
	wg.Wait()
	if created.Load() != 1 || existing.Load() != 15 {
		t.Fatalf("created %d, existing %d; want 1 and 15", created.Load(), existing.Load())
	}
}

func TestListPagesNewestFirst(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	for i := range 7 {
		h.submit(fmt.Sprintf("m%d", i), "441")
	}
	if seen := h.search("state=pending&limit=3"); strings.Join(seen, ",") != "m6,m5,m4,m3,m2,m1,m0" {
		t.Fatalf("pages visited %v", seen)
	}
	var none struct{ Messages []messages.Message }
	h.must(200, "GET", "/api/messages?state=delivered", nil, &none)
	if len(none.Messages) != 0 {
		t.Fatalf("state filter: %+v", none.Messages)
	}
}

// webhookFrontend is a test webhook: it answers the statuses given in turn
// (then 200) and records every POST.
type webhookFrontend struct {
	mu       sync.Mutex
	statuses []int
	calls    []webhookCall
	srv      *httptest.Server
}

type webhookCall struct {
	ID, Key, Attempt string
	Status           int
}

func newWebhook(t *testing.T, statuses ...int) *webhookFrontend {
	w := &webhookFrontend{statuses: statuses}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var m messages.Outgoing
		if err := jsonDecode(r, &m); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		w.mu.Lock()
		status := 200
		if len(w.statuses) > 0 {
			status, w.statuses = w.statuses[0], w.statuses[1:]
		}
		w.calls = append(w.calls, webhookCall{ID: m.ID, Key: r.Header.Get("Idempotency-Key"), Attempt: r.Header.Get("X-Switchboard-Attempt"), Status: status})
		w.mu.Unlock()
		rw.WriteHeader(status)
		_, _ = rw.Write([]byte("test says " + http.StatusText(status)))
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *webhookFrontend) setStatuses(s ...int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.statuses = s
}

func (w *webhookFrontend) seen() []webhookCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]webhookCall(nil), w.calls...)
}

func TestWebhookRetriesWithBackoffThenDelivers(t *testing.T) {
	h := startNode(t, testConfig(t))
	wh := newWebhook(t, 503, 500)
	h.webhookFrontend("hook", wh.srv.URL, "33")
	id := h.submit("", "33123")
	m := h.waitState(id, messages.StateDelivered)
	calls := wh.seen()
	if len(calls) != 3 || m.Attempts != 3 {
		t.Fatalf("calls %+v attempts %d; want 3", calls, m.Attempts)
	}
	for i, c := range calls {
		if c.ID != id || c.Key != id || c.Attempt != fmt.Sprint(i+1) {
			t.Fatalf("call %d = %+v", i, c)
		}
	}
	var states []messages.State
	for _, e := range m.History {
		states = append(states, e.State)
	}
	if fmt.Sprint(states) != "[pending retry retry delivered]" {
		t.Fatalf("history %v", states)
	}
}

// A webhook at its rate limit (429 Too Many Requests) has not taken the
// message: each 429 is a deferral that uses no attempt, so a frontend
// answering 429 more often than --delivery-max-attempts does not fail
// the message (max_attempts); it is delivered once the frontend takes it,
// at its first attempt, every call carrying attempt 1. A 503 (the service
// failing) still uses its attempt.
func TestWebhookRateLimitedUsesNoAttempt(t *testing.T) {
	cfg := testConfig(t)
	cfg.DeliveryMaxAttempts = 2
	h := startNode(t, cfg)
	wh := newWebhook(t, 429, 429, 429, 503, 429, 429)
	h.webhookFrontend("hook", wh.srv.URL, "33")
	id := h.submit("", "33123")
	m := h.waitState(id, messages.StateDelivered)
	var attempts []string
	for _, c := range wh.seen() {
		attempts = append(attempts, c.Attempt)
	}
	if m.Attempts != 2 || strings.Join(attempts, ",") != "1,1,1,1,2,2,2" {
		t.Fatalf("delivered after %d attempts, calls with attempts %v; want 2, [1 1 1 1 2 2 2] (a 429 uses none)", m.Attempts, attempts)
	}
	if !historyHas(m, "not attempted (attempt 1 given back): hook busy: HTTP 429: test says Too Many Requests; retry in") ||
		!historyHas(m, "not attempted (attempt 2 given back): hook busy: HTTP 429") || !historyHas(m, "attempt 1 failed: HTTP 503") {
		t.Fatalf("history %+v, want the 429s deferred and the 503 a failed attempt", m.History)
	}
	// The 429s of an attempt, one after another, are one entry counting
	// them (attempt, deferrals).
	var marks []string
	for _, e := range m.History {
		marks = append(marks, fmt.Sprintf("%d/%d", e.Attempt, e.Deferrals))
	}
	if got := strings.Join(marks, ","); got != "0/0,1/3,1/0,2/2,2/0" {
		t.Fatalf("history {attempt/deferrals} %s, want 0/0,1/3,1/0,2/2,2/0 (accepted, 3 deferrals, attempt 1 failed, 2 deferrals, delivered): %+v", got, m.History)
	}
}

func TestWebhookMaxAttemptsDeadLettersAndResubmitDelivers(t *testing.T) {
	cfg := testConfig(t)
	cfg.DeliveryMaxAttempts = 3
	h := startNode(t, cfg)
	wh := newWebhook(t, 500, 500, 500, 500, 500, 500)
	h.webhookFrontend("hook", wh.srv.URL, "33")
	id := h.submit("", "331")
	m := h.waitState(id, messages.StateFailed)
	if m.Reason != messages.ReasonMaxAttempts || m.Attempts != 3 || len(wh.seen()) != 3 {
		t.Fatalf("dead-lettered message %+v after %d calls", m, len(wh.seen()))
	}
	polltest.Eventually(t, 5*time.Second, func() error {
		if d := h.status().DLQDepth; d != 1 {
			return fmt.Errorf("dlq_depth %d", d)
		}
		return nil
	})
	wh.setStatuses()
	var r messages.Message
	h.must(200, "POST", "/api/messages/"+id+"/resubmit", nil, &r)
	if r.State != messages.StatePending || r.Attempts != 0 {
		t.Fatalf("after resubmit %+v", r)
	}
	m = h.waitState(id, messages.StateDelivered)
	if m.Attempts != 1 {
		t.Fatalf("attempts after resubmit %d", m.Attempts)
	}
	h.apiError(409, "invalid_state", "POST", "/api/messages/"+id+"/resubmit", nil)
}

func TestBulkResubmit(t *testing.T) {
	cfg := testConfig(t)
	cfg.DeliveryMaxAttempts = 1
	h := startNode(t, cfg)
	wh := newWebhook(t, 500, 500, 500, 500, 500)
	h.webhookFrontend("hook", wh.srv.URL, "33")
	var ids []string
	for i := range 5 {
		ids = append(ids, h.submit(fmt.Sprintf("b%d", i), "331"))
	}
	for _, id := range ids {
		h.waitState(id, messages.StateFailed)
	}
	var res messages.BulkReply
	h.must(200, "POST", "/api/messages/resubmit", map[string]string{"state": "failed"}, &res)
	if res.Resubmitted != 5 || res.Skipped != 0 {
		t.Fatalf("bulk: %+v", res)
	}
	for _, id := range ids {
		h.waitState(id, messages.StateDelivered)
	}
	h.apiError(400, "invalid_request", "POST", "/api/messages/resubmit", map[string]string{"state": "delivered"})
}

func TestWebhookPermanentRejectionFails(t *testing.T) {
	h := startNode(t, testConfig(t))
	wh := newWebhook(t, 404)
	h.webhookFrontend("hook", wh.srv.URL, "33")
	id := h.submit("", "331")
	m := h.waitState(id, messages.StateFailed)
	if !strings.HasPrefix(m.Reason, "rejected: HTTP 404") || len(wh.seen()) != 1 {
		t.Fatalf("rejected: %+v after %d calls", m, len(wh.seen()))
	}
}

func TestPullVerdictsRetryAndFail(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	a, b := h.submit("a", "441"), h.submit("b", "442")
	if got := h.poll("fe1", 10, 2000, 30000); len(got) != 2 {
		t.Fatalf("poll: %+v", got)
	}
	out := h.ack("fe1",
		messages.DeliveryResult{ID: a, Status: messages.Retry, Reason: "busy"},
		messages.DeliveryResult{ID: b, Status: messages.Failed, Reason: "unknown subscriber"},
		messages.DeliveryResult{ID: "nope", Status: messages.Delivered})
	if out[0].Outcome != "applied" || out[1].Outcome != "applied" || out[2].Outcome != "no_work" {
		t.Fatalf("ack outcomes %+v", out)
	}
	if m := h.message(b); m.State != messages.StateFailed || m.Reason != "rejected: unknown subscriber" {
		t.Fatalf("failed verdict: %+v", m)
	}
	// The retry comes back after its backoff, as attempt 2.
	var again []messages.Outgoing
	polltest.Eventually(t, 10*time.Second, func() error {
		again = h.poll("fe1", 10, 500, 30000)
		if len(again) == 0 {
			return fmt.Errorf("retried message not offered yet")
		}
		return nil
	})
	if len(again) != 1 || again[0].ID != a || again[0].Attempt != 2 {
		t.Fatalf("retry offered %+v", again)
	}
}

func TestUnackedLeaseExpiresAndIsOfferedAgain(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	id := h.submit("", "441")
	first := h.poll("fe1", 1, 2000, 1000)
	if len(first) != 1 {
		t.Fatalf("poll: %+v", first)
	}
	if got := h.poll("fe1", 1, 0, 1000); len(got) != 0 {
		t.Fatalf("leased message offered during its lease: %+v", got)
	}
	// Waiting up to 3 s: the worker wakes when the 1 s lease ends.
	second := h.poll("fe1", 1, 3000, 30000)
	if len(second) != 1 || second[0].ID != id || second[0].Attempt != 2 {
		t.Fatalf("after the lease ran out: %+v", second)
	}
}

func TestUndeliveredMessageExpires(t *testing.T) {
	cfg := testConfig(t)
	cfg.MessageValidity = 300 * time.Millisecond
	h := startNode(t, cfg)
	h.pullFrontend("nobody-polls", "44")
	id := h.submit("", "441")
	m := h.waitState(id, messages.StateFailed)
	if m.Reason != messages.ReasonExpired {
		t.Fatalf("expired message: %+v", m)
	}
}

func TestRestartTakesBackLeasesAtOnce(t *testing.T) {
	cfg := testConfig(t)
	h := startNode(t, cfg)
	h.pullFrontend("fe1", "44")
	id := h.submit("", "441")
	if got := h.poll("fe1", 1, 2000, 3600_000); len(got) != 1 {
		t.Fatalf("poll: %+v", got)
	}
	h.stop()

	cfg.Listen, cfg.MetricsListen = "127.0.0.1:0", "127.0.0.1:0"
	h2 := startNode(t, cfg)
	got := h2.poll("fe1", 1, 2000, 30000)
	if len(got) != 1 || got[0].ID != id || got[0].Attempt != 2 {
		t.Fatalf("after restart (the old lease had an hour left): %+v", got)
	}
}

func TestPutRepliesWithTheStoredRecord(t *testing.T) {
	h := startNode(t, testConfig(t))
	var fe messages.Frontend
	h.must(200, "PUT", "/api/frontends/fe1", map[string]string{"mode": "pull"}, &fe)
	if fe.Name != "fe1" || fe.Mode != messages.ModePull || fe.CreatedAt.IsZero() || fe.UpdatedAt.IsZero() {
		t.Fatalf("PUT frontend replied %+v", fe)
	}
	var again messages.Frontend
	h.must(200, "PUT", "/api/frontends/fe1", map[string]string{"mode": "webhook", "url": "http://127.0.0.1:1/"}, &again)
	if again.Mode != messages.ModeWebhook || !again.CreatedAt.Equal(fe.CreatedAt) {
		t.Fatalf("replacing kept created_at? %+v vs %+v", again, fe)
	}
	var r messages.Route
	h.must(200, "PUT", "/api/routes/44", map[string]string{"frontend": "fe1"}, &r)
	if r.Prefix != "44" || r.Frontend != "fe1" || r.UpdatedAt.IsZero() {
		t.Fatalf("PUT route replied %+v", r)
	}
}

// TestStaleVerdictOfAnExpiredLeaseIsIgnored: poller A's lease runs out and
// the message is offered to poller B; A's late "failed" (naming attempt 1)
// must not dead-letter the message B is delivering.
func TestStaleVerdictOfAnExpiredLeaseIsIgnored(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	id := h.submit("", "441")
	a := h.poll("fe1", 1, 2000, 1000)
	if len(a) != 1 || a[0].Attempt != 1 {
		t.Fatalf("A polled %+v", a)
	}
	b := h.poll("fe1", 1, 3000, 30000) // offered again once A's 1 s lease ends
	if len(b) != 1 || b[0].ID != id || b[0].Attempt != 2 {
		t.Fatalf("B polled %+v", b)
	}
	for _, status := range []messages.DeliveryStatus{messages.Failed, messages.Retry} {
		out := h.ack("fe1", messages.DeliveryResult{ID: id, Status: status, Reason: "late", Attempt: 1})
		if out[0].Outcome != messages.OutcomeStale {
			t.Fatalf("A's late %s: %+v", status, out)
		}
	}
	if m := h.message(id); m.State != messages.StatePending || len(m.History) != 1 {
		t.Fatalf("a stale verdict changed the message: %+v", m)
	}
	if out := h.ack("fe1", messages.DeliveryResult{ID: id, Status: messages.Delivered, Attempt: 2}); out[0].Outcome != "applied" {
		t.Fatalf("B's ack: %+v", out)
	}
	h.waitState(id, messages.StateDelivered)
}
