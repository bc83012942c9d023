package switchboard_test

import (
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestAckRepeatedIDKeepsDelivered: one ack carrying a stale retry for
// attempt 1 and then delivered for attempt 2 of the same message. The
// node answered the repeat with the first verdict's outcome (stale) and
// dropped the delivered one; each verdict is now decided on its own.
func TestAckRepeatedIDKeepsDelivered(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("p", "46")
	id := h.submit("", "46123")
	if first := h.poll("p", 1, 2000, 1000); len(first) != 1 || first[0].Attempt != 1 { // leased for 1 s
		t.Fatalf("first poll %+v", first)
	}
	var second []messages.Outgoing
	for range 10 { // the lease runs out: offered again
		if second = h.poll("p", 1, 2000, 30000); len(second) == 1 {
			break
		}
	}
	if len(second) != 1 || second[0].Attempt != 2 {
		t.Fatalf("second poll %+v", second)
	}
	out := h.ack("p",
		messages.DeliveryResult{ID: id, Status: messages.Retry, Attempt: 1, Reason: "busy"},
		messages.DeliveryResult{ID: id, Status: messages.Delivered, Attempt: 2},
	)
	if len(out) != 2 || out[0].Outcome != messages.OutcomeStale || out[1].Outcome != "applied" {
		t.Errorf("outcomes %+v, want stale then applied", out)
	}
	if m := h.message(id); m.State != messages.StateDelivered {
		t.Fatalf("message %s after a delivered verdict: want delivered", m.State)
	}
}

// TestPollWithoutWaitGetsDueMessage: a poll with wait_ms 0 while a message
// is due was answered empty before the claim made for it came back; the
// message then waited leased (an attempt counted) for the lease's end.
func TestPollWithoutWaitGetsDueMessage(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("z", "50")
	id := h.submit("", "50123")
	got := h.poll("z", 10, 0, 30000)
	if len(got) != 1 || got[0].ID != id || got[0].Attempt != 1 {
		m := h.message(id)
		t.Fatalf("a wait_ms 0 poll with one message due got %+v; the message: %s, attempts %d", got, m.State, m.Attempts)
	}
}

// TestAckOfAnotherFrontendsMessageIsNoWork: an ack at pull frontend a of
// frontend b's message is no_work ("this frontend has no such message");
// once b's message was final it answered already_recorded, telling a
// about b's message.
func TestAckOfAnotherFrontendsMessageIsNoWork(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("a", "47")
	h.pullFrontend("b", "48")
	id := h.submit("", "48123")
	if ms := h.poll("b", 1, 2000, 30000); len(ms) != 1 {
		t.Fatalf("poll b %+v", ms)
	}
	h.ack("b", messages.DeliveryResult{ID: id, Status: messages.Delivered})
	if out := h.ack("a", messages.DeliveryResult{ID: id, Status: messages.Delivered}); out[0].Outcome != "no_work" {
		t.Fatalf("ack at a of b's delivered message: %+v, want no_work", out)
	}
}

// TestRepeatedRetryAckIsAlreadyRecorded: a consumer's HTTP client that
// sends a retry ack again (the answer to the first lost) was answered
// applied again, and the retry recorded again: another history entry, the
// next attempt pushed back. The repeat is already_recorded and changes
// nothing; the next attempt's retry is applied.
func TestRepeatedRetryAckIsAlreadyRecorded(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("r", "49")
	id := h.submit("", "49123")
	if got := h.poll("r", 1, 2000, 30000); len(got) != 1 || got[0].Attempt != 1 {
		t.Fatalf("first poll %+v", got)
	}
	retry := messages.DeliveryResult{ID: id, Status: messages.Retry, Reason: "busy"}
	if out := h.ack("r", retry); out[0].Outcome != "applied" {
		t.Fatalf("retry ack: %+v", out)
	}
	first := h.message(id)
	if out := h.ack("r", retry); out[0].Outcome != "already_recorded" {
		t.Errorf("the same retry ack again: %+v, want already_recorded", out)
	}
	if m := h.message(id); len(m.History) != len(first.History) || m.Attempts != first.Attempts ||
		m.NextAttemptAt == nil || first.NextAttemptAt == nil || !m.NextAttemptAt.Equal(*first.NextAttemptAt) {
		t.Errorf("after the repeated ack: %d history entries, %d attempts, next attempt %v; want %d, %d, %v",
			len(m.History), m.Attempts, m.NextAttemptAt, len(first.History), first.Attempts, first.NextAttemptAt)
	}
	if got := h.poll("r", 1, 5000, 30000); len(got) != 1 || got[0].Attempt != 2 {
		t.Fatalf("second poll %+v", got)
	}
	retry.Attempt = 2
	if out := h.ack("r", retry, retry); out[0].Outcome != "applied" || out[1].Outcome != "already_recorded" {
		t.Errorf("attempt 2's retry, twice in one ack: %+v, want applied then already_recorded", out)
	}
	if m := h.message(id); len(m.History) != len(first.History)+1 {
		t.Errorf("%d history entries after attempt 2's retry, want %d", len(m.History), len(first.History)+1)
	}
}
