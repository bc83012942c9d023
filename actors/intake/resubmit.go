package intake

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Resubmits: a failed or forward_failed message goes back to work on the
// route its destination has now, one at a time or in bulk by state.

// bulkPage is how many messages one step of a bulk resubmit handles; submits
// queued meanwhile are served between steps.
const bulkPage = 256

// bulkStep continues a bulk resubmit after `before`.
type bulkStep struct {
	req    *messages.ResubmitBulk
	before int64
	acc    messages.BulkReply
}

// reroute builds the re-routing of a message to whichever frontend serves
// its destination now.
func (a *Intake) reroute(m messages.Message, now time.Time) (persistence.Reroute, error) {
	t, err := a.table.Resolve(m.DestinationMSISDN)
	if err != nil {
		return persistence.Reroute{}, err
	}
	// Its options go with it: a delivery it schedules (deliver_after)
	// still waits for its time.
	nm := router{node: a.cfg.Node}.newMessage(messages.Submission{ID: m.ID, Options: m.Options}, t, now)
	return persistence.Reroute{
		ID: m.ID, Frontend: nm.Frontend, DestSMSC: nm.DestSMSC, State: nm.State,
		Detail: fmt.Sprintf("resubmitted from %s: %s", m.State, nm.Detail),
		Work:   nm.Work,
	}, nil
}

func (a *Intake) resubmit(c actor.Context, id string) messages.ResubmitReply {
	ctx, cancel := a.storeCtx()
	defer cancel()
	m, err := a.cfg.Store.GetMessage(ctx, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return messages.ResubmitReply{Err: messages.Errorf(messages.CodeNotFound, "no message with id %q", id)}
	}
	if err != nil {
		return messages.ResubmitReply{Err: a.unavailable("get message", err)}
	}
	if !m.State.Resubmittable() {
		return messages.ResubmitReply{Err: notResubmittable(id, m.State)}
	}
	now := a.cfg.Clock.Now()
	r, err := a.reroute(m, now)
	if err != nil {
		return messages.ResubmitReply{Err: err}
	}
	res, err := a.cfg.Store.Resubmit(ctx, now, []persistence.Reroute{r})
	if err != nil {
		return messages.ResubmitReply{Err: a.unavailable("resubmit", err)}
	}
	if !res[0].Applied {
		return messages.ResubmitReply{Err: notResubmittable(id, res[0].State)}
	}
	// Read the message as resubmitted before the worker is kicked (and
	// claims it), so the reply shows it as the resubmit left it.
	m, err = a.cfg.Store.GetMessage(ctx, id)
	a.resubmitted(c, []persistence.Reroute{r}, now)
	if err != nil {
		// The resubmit was made: the reply says so, with what it set, so
		// that its caller records the change all the same.
		return messages.ResubmitReply{Message: messages.Message{ID: id, Frontend: r.Frontend, DestSMSC: r.DestSMSC, State: r.State},
			Err: fmt.Errorf("%w: %w", messages.ErrNotReadBack, a.unavailable("get message", err))}
	}
	return messages.ResubmitReply{Message: m}
}

// resubmitted publishes and kicks for applied reroutes.
func (a *Intake) resubmitted(c actor.Context, rs []persistence.Reroute, now time.Time) {
	var kl kickList
	for _, r := range rs {
		a.cfg.Publish(messages.StateChanged{ID: r.ID, State: r.State, Frontend: r.Frontend, At: now, Detail: r.Detail})
		kl.add(*r.Work, r.State)
	}
	a.kick(c, kl.work)
}

// bulk handles one page of a bulk resubmit and queues the next step, so
// that submits are served in between. Only the states that may be
// resubmitted may be asked for.
func (a *Intake) bulk(c actor.Context, step bulkStep) {
	if !step.req.State.Resubmittable() {
		step.req.Reply <- messages.BulkReply{Err: messages.Errorf(messages.CodeInvalidRequest,
			"state %q: only failed and forward_failed messages can be resubmitted", step.req.State)}
		return
	}
	ctx, cancel := a.storeCtx()
	defer cancel()
	page, err := a.cfg.Store.ListMessages(ctx, persistence.ListQuery{State: step.req.State, Limit: bulkPage, Before: step.before})
	if err != nil {
		step.acc.Err = a.unavailable("list messages", err)
		step.req.Reply <- step.acc
		return
	}
	now := a.cfg.Clock.Now()
	var rs []persistence.Reroute
	for _, m := range page.Messages {
		r, err := a.reroute(m, now)
		if err != nil {
			step.acc.Skipped++
			continue
		}
		rs = append(rs, r)
	}
	if len(rs) > 0 {
		res, err := a.cfg.Store.Resubmit(ctx, now, rs)
		if err != nil {
			step.acc.Err = a.unavailable("resubmit", err)
			step.req.Reply <- step.acc
			return
		}
		applied := rs[:0]
		for i, r := range res {
			if r.Applied {
				applied = append(applied, rs[i])
			}
		}
		step.acc.Resubmitted += len(applied)
		a.resubmitted(c, applied, now)
	}
	if page.Next == 0 {
		step.req.Reply <- step.acc
		return
	}
	step.before = page.Next
	c.Send(c.Self(), step)
}

// notResubmittable is the refusal of a resubmit of message id in state:
// whether the intake read that state or the store found it at the resubmit
// (another instance resubmitted it, or it was delivered, in between).
func notResubmittable(id string, state messages.State) error {
	return messages.Errorf(messages.CodeInvalidState,
		"message %s is %s; only failed and forward_failed messages can be resubmitted", id, state)
}
