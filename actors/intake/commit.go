package intake

import (
	"context"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// A group commit's run: on a goroutine of its own (Intake.start) or, as
// the intake stops, on the actor's. So it touches only what is safe from
// any goroutine (the store, Publish, the relay, the board, the again
// queue, sends through the system's root), never the pipeline or the
// table.

// run commits a batch, answers everyone in it and publishes its changes;
// it returns the work to kick.
func (a *Intake) run(b *Batch) []persistence.WorkSpec {
	span := a.commitSpan(b)
	ctx, cancel := a.storeCtx()
	w, err := a.cfg.Store.Write(ctx, b.Now, b.Write())
	cancel()
	if span != nil {
		telemetry.Fail(span, err)
		span.End()
	}
	if err != nil {
		if level := persistence.FailureLevel(err); level < slog.LevelError {
			a.log.Log(context.Background(), level, "commit failed", "messages", len(b.Stored), "reports", len(b.Updates), "err", err)
		} else {
			a.failures.Write("messages", len(b.Stored), "reports", len(b.Updates), "err", err)
		}
	}
	changes, kicks := b.settle(w, err)
	a.again.add(b.Again)
	for _, ch := range changes {
		a.cfg.Publish(ch)
	}
	if w, ok := stored(w, err); ok {
		b.handOver(w, func(to *actor.PID, work *handover.Work) { a.sys.Root.Send(to, work) })
		if a.cfg.Relay != nil {
			a.cfg.Relay.Publish(b.published(w))
		}
	}
	b.release()
	return kicks
}

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
