package delivery

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// The spans of delivery attempts (docs/observability.md). Only a message
// whose trace is sampled (Trace set) has them: without tracing, or for
// the others, nothing is made.

// attemptSpan starts the span of one attempt to deliver out, a child of
// the message's trace.
func (w *Worker) attemptSpan(name string, out messages.Outgoing) trace.Span {
	return w.d.Tracing.Start(out.Trace, name, trace.SpanKindClient,
		attribute.String("switchboard.message_id", out.ID), attribute.String("switchboard.frontend", w.fe.Name),
		attribute.Int("switchboard.attempt", out.Attempt))
}

// endAttempt ends an attempt's span with the frontend's verdict.
func endAttempt(span trace.Span, status messages.DeliveryStatus, reason string) {
	span.SetAttributes(attribute.String("switchboard.verdict", string(status)))
	if status != messages.Delivered {
		telemetry.Fail(span, errorString(string(status)+": "+reason))
	}
	span.End()
}

// openSpan starts the span of out's attempt, which ends with its verdict
// (closeSpan). A message offered again before a verdict (its lease ended
// unacknowledged) ends the span of the attempt before.
func (w *Worker) openSpan(name string, out messages.Outgoing) {
	if w.d.Tracing == nil || out.Trace == "" {
		return
	}
	if old, ok := w.spans[out.ID]; ok {
		endAttempt(old, messages.Retry, "no verdict before it was offered again")
	}
	if w.spans == nil {
		w.spans = map[string]trace.Span{}
	}
	w.spans[out.ID] = w.attemptSpan(name, out)
}

// closeSpan ends the open span of o's message with o's result.
func (w *Worker) closeSpan(o persistence.Outcome) {
	span, ok := w.spans[o.MessageID]
	if !ok {
		return
	}
	delete(w.spans, o.MessageID)
	status := messages.Delivered
	switch o.Result {
	case persistence.ResultDelivered:
	case persistence.ResultFailed:
		status = messages.Failed
	default:
		status = messages.Retry
	}
	endAttempt(span, status, o.Reason)
}

// closeSpans ends every open span (the worker stops or restarts: its
// leases are taken again later, in spans of their own).
func (w *Worker) closeSpans() {
	for id, span := range w.spans {
		endAttempt(span, messages.Retry, "the delivery worker stopped")
		delete(w.spans, id)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
