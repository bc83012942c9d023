package delivery

import (
	"time"

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
// (closeSpan) or, for a lease (until), when the lease ends unacknowledged
// (endLapsedSpans). A message offered again before either ends the span of
// the attempt before.
func (w *Worker) openSpan(name string, out messages.Outgoing, until time.Time) {
	if w.d.Tracing == nil || out.Trace == "" {
		return
	}
	if old, ok := w.spans.add(out.ID, w.attemptSpan(name, out), until); ok {
		endAttempt(old, messages.Retry, "no verdict before it was offered again")
	}
}

// closeSpan ends the open span of o's message with o's result.
func (w *Worker) closeSpan(o persistence.Outcome) {
	if s, ok := w.spans.take(o.MessageID); ok {
		endAttempt(s, statusOf(o.Result), o.Reason)
	}
}

// statusOf is the verdict a recorded result stands for.
func statusOf(r persistence.Result) messages.DeliveryStatus {
	switch r {
	case persistence.ResultDelivered:
		return messages.Delivered
	case persistence.ResultFailed:
		return messages.Failed
	}
	return messages.Retry
}

// endLapsedSpans ends the spans whose lease has ended by now. It runs on
// every wake-up of the worker; step schedules one for the book's wake.
func (w *Worker) endLapsedSpans(now time.Time) {
	for _, s := range w.spans.lapsed(now) {
		endAttempt(s, messages.Retry, "its lease ended unacknowledged")
	}
}

// closeSpans ends every open span (the worker stops or restarts).
func (w *Worker) closeSpans() {
	for _, s := range w.spans.all() {
		endAttempt(s, messages.Retry, "the delivery worker stopped")
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
