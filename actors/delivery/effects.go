package delivery

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// pushResult is a push frontend's verdict on one attempt (webhook.go,
// smpp.go), sent to its worker.
type pushResult struct {
	id      string
	attempt int
	result  messages.DeliveryResult
}

// apply carries out the dispatcher's effects, with the bus messages the
// bus link settles for them.
func (w *Worker) apply(c actor.Context, e Effects) {
	now := w.d.Clock.Now()
	w.settle(w.link.settle(e, now))
	for _, o := range e.LateRefused {
		w.log.Warn("late verdict on a final message not recorded: it stays as it is; check with the frontend before resubmitting",
			"message", o.MessageID, "result", o.Result, "detail", o.Detail)
	}
	for _, o := range e.Dropped {
		w.log.Error("verdict dropped: the store refuses it", "message", o.MessageID, "result", o.Result,
			"reason", o.Reason, "detail", o.Detail)
	}
	for _, o := range e.Applied {
		if w.smpp != nil && len(o.SMSCMessageIDs) > 0 {
			w.smpp.Committed(o.SMSCMessageIDs)
		}
		w.closeSpan(o)
		w.d.Metrics.count(o)
		w.d.Publish(messages.StateChanged{ID: o.MessageID, State: persistence.StateAfter(o.Kind, o.Result),
			Frontend: w.fe.Name, At: now, Detail: persistence.CleanText(o.Detail), Reason: persistence.CleanText(o.Reason)})
	}
	for _, a := range e.Acks {
		a.Ack.Reply <- a.Reply
	}
	for _, a := range e.Answers {
		for i, m := range a.Reply.Messages {
			w.openSpan(telemetry.SpanDeliverPull, m, a.Until[i])
		}
		a.Poll.Reply <- a.Reply
	}
	if len(e.Start) > 0 {
		w.start(c, e.Start)
	}
	if p := c.Parent(); e.GaveBack && p != nil {
		// The supervisor kicks the frontend's worker now (the successor),
		// if any, to claim what this one gave back.
		c.Send(p, &messages.Kick{Frontend: w.fe.Name})
	}
	if e.Drained {
		for _, d := range w.life.drainDone {
			close(d)
		}
		w.life.drainDone = nil
	}
	if e.Retired && !w.stopped {
		w.stopped = true
		c.Stop(w.self) // nothing more to do: its successor has the frontend, or it is gone
	}
}

// start delivers to a push frontend: a webhook call or an SMPP submit on a
// goroutine of its own, or a request to the in-process frontend's actor.
func (w *Worker) start(c actor.Context, work []persistence.Work) {
	var target *actor.PID
	if w.fe.Mode == messages.ModeActor {
		pid, ok := w.d.Actors.Get(w.fe.Name)
		if !ok {
			// Unregistered since the claim: the attempts count as retries at
			// their deadline.
			return
		}
		target = pid
	}
	deadline := w.d.Clock.Now().Add(w.d.SendTimeout)
	for _, wk := range work {
		out := messages.OutgoingOf(wk.Message)
		switch {
		case target != nil:
			w.openSpan(telemetry.SpanDeliverActor, out, time.Time{}) // ends with its verdict or its timeout
			w.core.Asked(out.ID, out.Attempt)
			c.Request(target, &messages.Delivery{Message: out, Deadline: deadline})
		case w.fe.Mode == messages.ModeSMPP:
			go w.sendSMPP(wk, out)
		default:
			go w.sendWebhook(out)
		}
	}
}
