package delivery

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/actors/smppout"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// smppHeldPoll is how often a worker held by an unbound smpp client looks
// whether it bound (1 s: the bind's kick makes this a fallback).
const smppHeldPoll = time.Second

// smppClient gets the client of an smpp frontend for the worker about to
// be spawned with fe (nil for another mode, or when it cannot start: that
// is logged, and the worker claims nothing). The supervisor gets it, not
// the worker's Started: the workers of changes close together start in
// any order, and the last Get is the registry's current client (Get
// retires the one before), which must be the last change's.
func (d *Deps) smppClient(fe messages.Frontend, log *slog.Logger) *smppout.Client {
	if fe.Mode != messages.ModeSMPP {
		return nil
	}
	if d.SMPP == nil {
		log.Error("smpp frontend without an SMPP client registry: nothing is delivered", "frontend", fe.Name)
		return nil
	}
	cl, err := d.SMPP.Get(fe)
	if err != nil {
		log.Error("smpp frontend cannot start: nothing is delivered", "frontend", fe.Name, "err", err)
		return nil
	}
	return cl
}

// sendSMPP submits one message to the SMSC. An attempt that may send it
// a second time (an earlier attempt left no verdict) is marked in its
// history; for a message in retry that takes reading its last entry.
func (w *Worker) sendSMPP(wk persistence.Work, out messages.Outgoing) {
	ctx, cancel := context.WithTimeout(context.Background(), w.d.SendTimeout)
	defer cancel()
	var last *messages.HistoryEntry
	if out.Attempt > 1 && wk.Message.State == messages.StateRetry {
		if m, err := w.d.Store.GetMessage(ctx, wk.MessageID); err == nil && len(m.History) > 0 {
			last = &m.History[len(m.History)-1]
		}
	}
	var span trace.Span
	if w.d.Tracing != nil && out.Trace != "" {
		span = w.attemptSpan(telemetry.SpanDeliverSMPP, out)
	}
	r := w.smpp.Submit(ctx, out, smppout.ResendNote(out.Attempt, wk.Message.State, last))
	if span != nil {
		endAttempt(span, r.Status, r.Reason)
	}
	w.sys.Root.Send(w.self, &pushResult{id: out.ID, attempt: out.Attempt, result: r})
}
