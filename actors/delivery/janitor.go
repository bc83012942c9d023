package delivery

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// expireBatch bounds one expiry transaction.
const expireBatch = 500

// Janitor fails messages whose validity passed while no worker claimed
// them: those of a pull frontend nobody polls, or of a frontend that was
// deleted. (Claimed ones are caught by Policy.Before.)
type Janitor struct {
	d    *Deps
	log  *slog.Logger
	wake *clock.Wakeup
	// fwake schedules the forward sweep, on its own cadence.
	fwake *clock.Wakeup
}

type (
	sweepMsg        struct{}
	forwardSweepMsg struct{}
)

// NewJanitor returns the producer of the janitor.
func NewJanitor(d *Deps) (actor.Producer, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	d = d.withDefaults()
	return func() actor.Actor { return &Janitor{d: d, log: d.Logger.With("component", "janitor")} }, nil
}

// SweepInterval is how often validity is checked: a hundredth of it, within
// [1s, 1m], so a message outlives its validity by at most 1%.
func (p Policy) SweepInterval() time.Duration {
	return min(max(p.Validity/100, time.Second), time.Minute)
}

// Receive implements actor.Actor.
func (j *Janitor) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		self, sys := c.Self(), c.ActorSystem()
		j.wake = clock.NewWakeup(j.d.Clock, func(uint64) { sys.Root.Send(self, sweepMsg{}) })
		j.fwake = clock.NewWakeup(j.d.Clock, func(uint64) { sys.Root.Send(self, forwardSweepMsg{}) })
		j.wake.Schedule(j.d.Clock.Now())
		if j.d.ForwardMaxWait > 0 {
			j.fwake.Schedule(j.d.Clock.Now())
		}
	case *actor.Restarting, *actor.Stopping:
		j.wake.Cancel()
		j.fwake.Cancel()
	case sweepMsg:
		j.sweep(c)
	case forwardSweepMsg:
		j.sweepForwards(c)
	}
}

// idle reports whether the site's sweeps run elsewhere now; the sweep
// looks again soon (within a second: this instance may lead the next).
func (j *Janitor) idle(w *clock.Wakeup, now time.Time, interval time.Duration) bool {
	if j.d.Leader == nil || j.d.Leader.Master() {
		return false
	}
	w.Schedule(now.Add(min(interval, time.Second)))
	return true
}

func (j *Janitor) sweep(c actor.Context) {
	now := j.d.Clock.Now()
	if j.idle(j.wake, now, j.d.Policy.SweepInterval()) {
		return
	}
	ctx, cancel := j.d.storeCtx()
	expired, err := j.d.Store.ExpireMessages(ctx, persistence.ExpireRequest{
		Now: now, SubmittedBefore: now.Add(-j.d.Policy.Validity), Limit: expireBatch,
	})
	cancel()
	if err != nil {
		j.log.Error("expiry sweep failed", "err", err)
		j.wake.Schedule(now.Add(storeRetry))
		return
	}
	for _, m := range expired {
		o := persistence.Outcome{Kind: persistence.WorkDelivery, Target: m.Frontend, MessageID: m.ID,
			Result: persistence.ResultFailed, Reason: messages.ReasonExpired}
		j.d.Metrics.count(o)
		j.d.Publish(messages.StateChanged{ID: m.ID, State: messages.StateFailed, Frontend: m.Frontend,
			At: now, Detail: "expired", Reason: messages.ReasonExpired})
	}
	if len(expired) > 0 {
		j.log.Info("expired undelivered messages", "count", len(expired))
	}
	if len(expired) == expireBatch {
		c.Send(c.Self(), sweepMsg{}) // more to do; let other messages in between
		return
	}
	j.wake.Schedule(now.Add(j.d.Policy.SweepInterval()))
}

// sweepForwards fails one batch of messages that waited in forward_queued
// longer than ForwardMaxWait. The wait is derived from queued_at; no queued
// row is touched until its time is up.
func (j *Janitor) sweepForwards(c actor.Context) {
	now := j.d.Clock.Now()
	if j.idle(j.fwake, now, j.d.ForwardSweep) {
		return
	}
	ctx, cancel := j.d.storeCtx()
	failed, err := j.d.Store.FailForwards(ctx, persistence.ForwardExpiry{
		Now: now, QueuedBefore: now.Add(-j.d.ForwardMaxWait), Limit: expireBatch,
	})
	cancel()
	if err != nil {
		j.log.Error("forward expiry sweep failed", "err", err)
		j.fwake.Schedule(now.Add(storeRetry))
		return
	}
	for _, m := range failed {
		j.d.Publish(messages.StateChanged{ID: m.ID, State: messages.StateForwardFailed, Frontend: m.Frontend,
			At: now, Detail: "waited too long for peer " + m.DestSMSC, Reason: messages.ReasonForwardTimeout})
	}
	if len(failed) > 0 {
		j.log.Warn("queued forwards failed: their peers stayed unreachable", "count", len(failed))
	}
	if len(failed) == expireBatch {
		c.Send(c.Self(), forwardSweepMsg{}) // more to do
		return
	}
	j.fwake.Schedule(now.Add(j.d.ForwardSweep))
}
