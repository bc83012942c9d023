package intake

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/telemetry"
)

// commitSpan starts the span of a group commit that carries traced
// messages: it links to each message's trace (a commit belongs to many),
// and is nil when none is traced (no span, no cost).
func (a *Intake) commitSpan(b *Batch) trace.Span {
	if a.cfg.Tracing == nil {
		return nil
	}
	var traces []string
	for _, nm := range b.Stored {
		if nm.Trace != "" {
			traces = append(traces, nm.Trace)
		}
	}
	if len(traces) == 0 {
		return nil
	}
	return a.cfg.Tracing.StartLinked(telemetry.SpanIntakeCommit, traces,
		attribute.Int("switchboard.messages", len(b.Stored)), attribute.Int("switchboard.reports", len(b.Updates)))
}
