package switchboard_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
)

// TestAckOfAMessageNeverOfferedChangesNothing: a frontend's ack of a
// message it was never offered is answered not_offered per id and
// changes nothing; once offered, the same ack applies.
func TestAckOfAMessageNeverOfferedChangesNothing(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	h.submit("never-polled", "441")
	before := h.snapshot()
	for _, st := range []messages.DeliveryStatus{messages.Delivered, messages.Failed, messages.Retry} {
		out := h.ack("fe1", messages.DeliveryResult{ID: "never-polled", Status: st})
		if len(out) != 1 || out[0].Outcome != "not_offered" {
			t.Fatalf("ack %s of a message never offered: %+v, want not_offered", st, out)
		}
	}
	if after := h.snapshot(); after != before {
		t.Fatalf("an ack of a message never offered changed the store:\nbefore %s\nafter  %s", before, after)
	}
	if m := h.message("never-polled"); m.State != messages.StatePending || m.Attempts != 0 {
		t.Fatalf("message is %s with %d attempts, want pending with 0", m.State, m.Attempts)
	}
	if got := h.poll("fe1", 1, 1000, 30000); len(got) != 1 || got[0].ID != "never-polled" {
		t.Fatalf("poll got %+v", got)
	}
	out := h.ack("fe1", messages.DeliveryResult{ID: "never-polled", Status: messages.Delivered})
	if len(out) != 1 || out[0].Outcome != "applied" {
		t.Fatalf("ack once offered: %+v, want applied", out)
	}
	h.waitState("never-polled", messages.StateDelivered)
}

// TestEmptyAckIsANoOp: a poll-then-ack loop acks what an empty poll gave
// it; the answer is 200 with no results and nothing changes.
func TestEmptyAckIsANoOp(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	h.submit("waiting", "441")
	before := h.snapshot()
	var r struct{ Results []messages.AckOutcome }
	h.must(200, "POST", "/api/frontends/fe1/ack", `{"results":[]}`, &r)
	if r.Results == nil || len(r.Results) != 0 {
		t.Fatalf("empty ack answered %+v, want an empty list", r.Results)
	}
	if after := h.snapshot(); after != before {
		t.Fatalf("an empty ack changed the store:\nbefore %s\nafter  %s", before, after)
	}
	h.apiError(404, "not_found", "POST", "/api/frontends/ghost/ack", `{"results":[]}`)
}

// TestOptionalFieldsReachTheFrontend: data coding, a binary body of every
// byte value, validity, scheduled delivery and message class (0, which is
// not none) are stored as given and handed to a pull frontend unchanged;
// the scheduled message is not offered before its time.
func TestOptionalFieldsReachTheFrontend(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	payload := make([]byte, 256)
	for i := range payload {
		payload[i] = byte(i)
	}
	validity := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	h.must(202, "POST", "/api/messages", map[string]any{
		"id": "bin-1", "source_msisdn": "1555", "destination_msisdn": "+441", "data_coding": "binary",
		"message_body_base64": payload, "validity_until": validity,
	}, nil)
	h.must(202, "POST", "/api/messages", map[string]any{
		"id": "gsm-1", "source_msisdn": "1555", "destination_msisdn": "442", "data_coding": "gsm7",
		"message_body": "Ünicode? no: GSM 7-bit €{}[]~|^\\ Ω", "message_class": 0,
	}, nil)
	later := time.Now().Add(1500 * time.Millisecond).UTC()
	h.must(202, "POST", "/api/messages", map[string]any{
		"id": "later-1", "source_msisdn": "1555", "destination_msisdn": "443", "message_body": "later", "deliver_after": later,
	}, nil)

	m := h.message("bin-1")
	if !bytes.Equal(m.Binary, payload) || m.Body != "" || m.DataCoding != messages.CodingBinary ||
		m.ValidityUntil == nil || !m.ValidityUntil.Equal(validity) {
		t.Fatalf("stored binary message %+v", m)
	}
	if m := h.message("gsm-1"); m.MessageClass == nil || *m.MessageClass != 0 {
		t.Fatalf("stored gsm-1 with message_class %v, want 0", m.MessageClass)
	}
	got := h.poll("fe1", 10, 1000, 30000)
	if len(got) != 2 {
		t.Fatalf("poll got %d messages, want bin-1 and gsm-1 (later-1 is not due)", len(got))
	}
	for _, o := range got {
		switch o.ID {
		case "bin-1":
			if !bytes.Equal(o.Binary, payload) || o.DataCoding != messages.CodingBinary || o.ValidityUntil == nil || o.MessageClass != nil {
				t.Fatalf("frontend got %+v", o)
			}
		case "gsm-1":
			if o.DataCoding != messages.CodingGSM7 || o.Body != "Ünicode? no: GSM 7-bit €{}[]~|^\\ Ω" || o.MessageClass == nil || *o.MessageClass != 0 {
				t.Fatalf("frontend got %+v", o)
			}
		default:
			t.Fatalf("frontend got %s before its time", o.ID)
		}
	}
	var seen []messages.Outgoing
	polltest.Eventually(t, 10*time.Second, func() error {
		seen = h.poll("fe1", 10, 1000, 30000)
		if len(seen) == 0 {
			return errors.New("the scheduled message is not offered yet")
		}
		return nil
	})
	if seen[0].ID != "later-1" || seen[0].DeliverAfter == nil || time.Now().Before(later) {
		t.Fatalf("scheduled message %+v offered at %v, want later-1 after %v", seen[0], time.Now(), later)
	}
}

// TestMessageClassOutOfRangeIsRefused: a message_class other than 0-3 is
// a 400 invalid_request naming the field, and nothing is stored.
func TestMessageClassOutOfRangeIsRefused(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe1", "44")
	for _, class := range []int{-1, 4, 240} {
		id := fmt.Sprintf("class-%d", class)
		msg := h.apiError(400, messages.CodeInvalidRequest, "POST", "/api/messages", map[string]any{
			"id": id, "source_msisdn": "1555", "destination_msisdn": "441", "message_body": "hi", "message_class": class,
		})
		if !strings.Contains(msg, "message_class") {
			t.Errorf("message_class %d refused with %q, which does not name the field", class, msg)
		}
		h.apiError(404, messages.CodeNotFound, "GET", "/api/messages/"+id, nil)
	}
}

// TestPerMessageValidityExpires: a message whose own validity_until
// passes undelivered ends failed (expired), before --message-validity.
func TestPerMessageValidityExpires(t *testing.T) {
	cfg := testConfig(t)
	cfg.MessageValidity = 30 * time.Second // the janitor sweeps every second
	h := startNode(t, cfg)
	h.pullFrontend("fe1", "44")
	h.must(202, "POST", "/api/messages", map[string]any{
		"id": "short-lived", "source_msisdn": "1555", "destination_msisdn": "441", "message_body": "x",
		"validity_until": time.Now().Add(time.Second).UTC(),
	}, nil)
	m := h.waitState("short-lived", messages.StateFailed)
	if m.Reason != messages.ReasonExpired {
		t.Fatalf("reason %q, want expired", m.Reason)
	}
}
