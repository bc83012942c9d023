package switchboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/smpp"
	"github.com/switchboard-dev/switchboard/telemetry"
	"github.com/switchboard-dev/switchboard/telemetry/otlptest"
)

// TestSMPPSubmitStartsTheMessagesTrace: only the HTTP API's submit started
// a message's trace, and a message submitted over the SMPP listener was
// never traced, whatever the sampler. Its submit_sm now starts one, as
// the sampler decides (always_on here): the message keeps its trace, the
// submit's server span is its root and carries the message's id, and the
// message's delivery span is in the same trace.
func TestSMPPSubmitStartsTheMessagesTrace(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	rcv := otlptest.New(t)
	cfg := testConfig(t)
	cfg.SMPPListen = "127.0.0.1:0"
	pushingTo(rcv)(&cfg)
	h := startNode(t, cfg)
	h.pullFrontend("pf", "44")

	s := esmeSession(t, h)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.Bind(ctx, smpp.BindTransceiver, smpp.Bind{SystemID: "app", Password: "any"}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	resp, err := s.Request(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: &smpp.SM{Source: smpp.Address{Addr: "Shop"},
		Dest: smpp.Address{Addr: "447700900001"}, ShortMessage: []byte("hi")}})
	if err != nil || resp.Status != smpp.StatusOK {
		t.Fatalf("submit_sm: %v %s", err, resp.Status)
	}
	id := resp.Body.(*smpp.SMResp).MessageID
	m := h.message(id)
	if m.TraceID == "" {
		t.Fatalf("message %s submitted over SMPP has no trace_id (sampler always_on)", id)
	}
	var submit otlptest.Span
	rcv.Wait(t, 20*time.Second, "the SMPP submit's span", func(r *otlptest.Receiver) bool {
		for _, sp := range r.Spans() {
			if sp.Name == telemetry.SpanSubmitSMPP && sp.TraceID == m.TraceID {
				submit = sp
				return true
			}
		}
		return false
	})
	if submit.ParentSpanID != "" || submit.Kind != "SPAN_KIND_SERVER" || submit.Error ||
		submit.Attributes["switchboard.message_id"] != id || submit.Attributes["smpp.command"] != "submit_sm" {
		t.Errorf("submit span %+v: want a root server span, not failed, with switchboard.message_id %s and smpp.command submit_sm", submit, id)
	}
	out := h.poll("pf", 1, 1000, 30000)
	if len(out) != 1 || out[0].ID != id {
		t.Fatalf("poll: %+v", out)
	}
	h.ack("pf", messages.DeliveryResult{ID: id, Status: messages.Delivered, Attempt: out[0].Attempt})
	if p := pullSpan(t, rcv, m.TraceID, ""); p.ParentSpanID != submit.SpanID {
		t.Errorf("pull span's parent %s, want the submit's span %s", p.ParentSpanID, submit.SpanID)
	}
}
