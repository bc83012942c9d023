package forward

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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
