package delivery

import (
	"context"
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

// startSMPP gets an smpp frontend's client (started, or kept from before
// a restart of the worker: workerLife).
func (w *Worker) startSMPP() {
	if w.fe.Mode != messages.ModeSMPP {
		return
	}
	if w.d.SMPP == nil {
		w.log.Error("smpp frontend without an SMPP client registry: nothing is delivered")
		return
	}
	if w.life.smpp == nil {
		cl, err := w.d.SMPP.Get(w.fe)
		if err != nil {
			w.log.Error("smpp frontend cannot start: nothing is delivered", "err", err)
			return
		}
		w.life.smpp = cl
	}
	w.smpp = w.life.smpp
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
