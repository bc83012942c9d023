package delivery

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/clock"
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

// openSpan is a delivery span still open, and when the lease of its
// message ends (zero: it has none, it ends with its verdict).
type openSpan struct {
	span  trace.Span
	until time.Time
}

// openSpan starts the span of out's attempt, which ends with its verdict
// (closeSpan) or, for a lease (until), when the lease ends unacknowledged
// (endLapsedSpans). A message offered again before either ends the span of
// the attempt before.
func (w *Worker) openSpan(name string, out messages.Outgoing, until time.Time) {
	if w.d.Tracing == nil || out.Trace == "" {
		return
	}
	if old, ok := w.spans[out.ID]; ok {
		endAttempt(old.span, messages.Retry, "no verdict before it was offered again")
	}
	if w.spans == nil {
		w.spans = map[string]openSpan{}
	}
	w.spans[out.ID] = openSpan{span: w.attemptSpan(name, out), until: until}
	if !until.IsZero() {
		w.spansDue = clock.Earliest(w.spansDue, until)
	}
}

// closeSpan ends the open span of o's message with o's result.
func (w *Worker) closeSpan(o persistence.Outcome) {
	s, ok := w.spans[o.MessageID]
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
	endAttempt(s.span, status, o.Reason)
}

// endLapsedSpans ends the spans whose lease has ended by now: no ack came
// here (none at all, and the message waits for another poll or expires;
// or one through another instance of the site, which has no span to end).
// It runs on every wake-up of the worker; step schedules one for
// spansDue. A span closed before its lease end leaves spansDue early:
// that wake-up finds nothing to end and moves it on.
func (w *Worker) endLapsedSpans(now time.Time) {
	if w.spansDue.IsZero() || now.Before(w.spansDue) {
		return
	}
	w.spansDue = time.Time{}
	for id, s := range w.spans {
		switch {
		case s.until.IsZero():
		case !now.Before(s.until):
			endAttempt(s.span, messages.Retry, "its lease ended unacknowledged")
			delete(w.spans, id)
		default:
			w.spansDue = clock.Earliest(w.spansDue, s.until)
		}
	}
}

// closeSpans ends every open span (the worker stops or restarts: its
// leases are taken again later, in spans of their own).
func (w *Worker) closeSpans() {
	for id, s := range w.spans {
		endAttempt(s.span, messages.Retry, "the delivery worker stopped")
		delete(w.spans, id)
	}
	w.spansDue = time.Time{}
}

type errorString string

func (e errorString) Error() string { return string(e) }
