package forward

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/telemetry"
	"github.com/switchboard-dev/switchboard/transport"
)

// recordingTransport keeps the forwards it is asked to send.
type recordingTransport struct {
	transport.Peer
	got []messages.Forward
}

func (r *recordingTransport) Forward(_ context.Context, _ transport.Target, _ bool, fs []messages.Forward) ([]messages.ForwardResult, error) {
	r.got = append(r.got, fs...)
	out := make([]messages.ForwardResult, len(fs))
	for i, f := range fs {
		out[i].ID = f.ID
	}
	return out, nil
}

// TestTraceparentOnlyToPeersAnnouncingIt: a traced message's forward
// carries the forward span's traceparent (a child in the message's trace)
// to a peer announcing trace_context, and nothing to one that does not;
// an untraced message carries nothing either way.
func TestTraceparentOnlyToPeersAnnouncingIt(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(telemetry.DefaultSampler()))
	defer tp.Shutdown(context.Background())
	tracing := telemetry.NewTracing(tp, nil)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	work := []persistence.Work{
		{MessageID: "traced", Message: messages.Message{ID: "traced", Trace: parent}},
		{MessageID: "plain", Message: messages.Message{ID: "plain"}},
	}
	for _, announced := range []bool{true, false} {
		tr := &recordingTransport{}
		spans := startSpans(tracing, telemetry.SpanForward, "b", work)
		if _, err := sendForwards(context.Background(), tr, "b", messages.PeerLink{Addr: "b:1", TraceContext: announced}, work, spans); err != nil {
			t.Fatal(err)
		}
		endSpans(spans, func(int) error { return nil })
		if len(tr.got) != 2 {
			t.Fatalf("sent %d forwards", len(tr.got))
		}
		if tr.got[1].Traceparent != "" {
			t.Errorf("announced=%v: the untraced message carries %q", announced, tr.got[1].Traceparent)
		}
		got := tr.got[0].Traceparent
		if !announced {
			if got != "" {
				t.Errorf("a peer without trace_context got traceparent %q", got)
			}
			continue
		}
		sc, ok := telemetry.Parse(got)
		if !ok || messages.TraceIDOf(got) != messages.TraceIDOf(parent) || got == parent || !sc.IsSampled() {
			t.Errorf("traceparent %q: want the forward span's, in the message's trace", got)
		}
		if sc.SpanID() != spans[0].SpanContext().SpanID() {
			t.Errorf("traceparent %q is not the forward span's (%v)", got, spans[0].SpanContext().SpanID())
		}
	}
	// Without tracing no span is made and nothing is sent.
	if spans := startSpans(nil, telemetry.SpanForward, "b", work); spans != nil {
		t.Errorf("spans without tracing: %v", spans)
	}
}

// answeringTransport answers each forward with the reply of its id.
type answeringTransport struct {
	transport.Peer
	replies map[string]messages.ForwardReply
}

func (a *answeringTransport) Forward(_ context.Context, _ transport.Target, _ bool, fs []messages.Forward) ([]messages.ForwardResult, error) {
	out := make([]messages.ForwardResult, len(fs))
	for i, f := range fs {
		out[i].ForwardReply = a.replies[f.ID]
	}
	return out, nil
}

// TestAForwardAnsweredWithAFinalStateShowsIt: a message resubmitted at the
// origin after it failed at the peer is answered "duplicate, state
// failed", which the origin records as the peer's report; its forward
// span stayed unset and no span showed the outcome. The span now carries
// switchboard.outcome (and switchboard.duplicate), and is failed when the
// state is failed; a forward the peer just took shows no outcome.
func TestAForwardAnsweredWithAFinalStateShowsIt(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tr := &answeringTransport{replies: map[string]messages.ForwardReply{
		"failed":    {ID: "failed", Duplicate: true, State: messages.StateFailed, Reason: messages.ReasonPeerRejected},
		"delivered": {ID: "delivered", Duplicate: true, State: messages.StateDelivered},
		"new":       {ID: "new", State: messages.StatePending},
	}}
	var b Batch
	b.Kind = persistence.WorkForward
	for _, id := range []string{"failed", "delivered", "new"} {
		b.Work = append(b.Work, persistence.Work{Kind: persistence.WorkForward, Target: "b", MessageID: id,
			Message: messages.Message{ID: id, SourceSMSC: "a", DestSMSC: "b", Trace: parent}})
	}
	cfg := Config{Transport: tr, Tracing: telemetry.NewTracing(tp, nil), Peer: "b"}
	if res := cfg.request(messages.PeerLink{Addr: "b:1", TraceContext: true, ForwardBatch: true}, b); res.err != nil {
		t.Fatal(res.err)
	}
	want := map[string]struct {
		outcome string
		failed  bool
	}{"failed": {"failed", true}, "delivered": {"delivered", false}, "new": {"", false}}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans ended, want 3", len(spans))
	}
	for _, s := range spans {
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		id := attrs["switchboard.message_id"].AsString()
		w := want[id]
		if got := attrs["switchboard.outcome"].AsString(); got != w.outcome {
			t.Errorf("%s: switchboard.outcome %q, want %q", id, got, w.outcome)
		}
		if failed := s.Status().Code == codes.Error; failed != w.failed {
			t.Errorf("%s: span status %v %q, want failed %v", id, s.Status().Code, s.Status().Description, w.failed)
		}
	}
}
