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
// history (resendNote).
func (w *Worker) sendSMPP(wk persistence.Work, out messages.Outgoing) {
	ctx, cancel := context.WithTimeout(context.Background(), w.d.SendTimeout)
	defer cancel()
	note := resendNote(ctx, w.d.Store, wk)
	var span trace.Span
	if w.d.Tracing != nil && out.Trace != "" {
		span = w.attemptSpan(telemetry.SpanDeliverSMPP, out)
	}
	r := w.smpp.Submit(ctx, out, note)
	if span != nil {
		endAttempt(span, r.Status, r.Reason)
	}
	w.sys.Root.Send(w.self, &pushResult{id: out.ID, attempt: out.Attempt, result: r})
}

// resendNote is the resend mark of the attempt claimed as wk
// (smppout.ResendNote): for a message in retry it takes reading the
// message's last history entry from st (not read, the attempt is marked).
func resendNote(ctx context.Context, st persistence.Store, wk persistence.Work) string {
	var last *messages.HistoryEntry
	if wk.Message.Attempts > 1 && wk.Message.State == messages.StateRetry {
		if m, err := st.GetMessage(ctx, wk.MessageID); err == nil && len(m.History) > 0 {
			last = &m.History[len(m.History)-1]
		}
	}
	return smppout.ResendNote(wk.Message.Attempts, wk.Message.State, last)
}
