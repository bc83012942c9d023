package delivery

import (
	"context"
	"time"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/messages"
)

// The worker's side of the delivery bus (Deps.Bus): it asks its
// frontend's consumer for as many messages as it has room for (free push
// slots, or its waiting polls' room), holds each while its work is under
// way, claims its row by id through the dispatcher, and settles it (ack,
// also for a retry, whose commit wrote the row back for the relay to
// publish when it is due; term for the dead letter) once the outcome of
// its work is committed — never before. The idempotency ledger stays the
// barrier: a message whose work is recorded finds no row to claim and is
// acked.
//
// The room is also offered on the handover board, as without the bus: work
// this instance's commits can hand to a ready worker at once is written
// leased to it (and not relayed), so the hot path costs no bus round trip.
// Both may fill the room at once, so a worker may have up to twice its
// window under way for a moment (the bus's fetch and the offer; not the
// backstop's claim, which withdraws the offer and keeps its room out of
// the next: seat.owe, busRoom); a pull worker keeps what the bus hands
// out after the polls were answered as work at hand for the next poll
// while its consumers are busy (Dispatcher.Named, pullRoom), rather than
// naking it round the bus.

// busTouch is how often a held message is touched (InProgress): a third
// of the consumer's AckWait (30s), so that a slow webhook or a pull
// frontend's lease keeps its message.
const busTouch = 10 * time.Second

// The bus's backstop: every busBackstop (2s) a worker claims from the store
// the work due and unleased for busOverdue (10s: far longer than the bus
// takes to hand out work it holds, unless it has a backlog): work that was
// handed over to a worker that died or whose polls left (it was never
// relayed), or whose bus message was lost (NATS lost its store). A claim
// that takes work the bus still holds is harmless: the row is leased, and
// the bus message finds it so (nak) or gone (ack).
const (
	busOverdue  = 10 * time.Second
	busBackstop = 2 * time.Second
)

// busFetchWait is how long one fetch waits for messages: a push worker's
// long poll of the bus; a pull worker's polls wait on it, so it is short.
const (
	busFetchWait     = 5 * time.Second
	busFetchWaitPull = time.Second
	// busFetchRetry is the wait after a failed fetch.
	busFetchRetry = time.Second
)

// fetch starts a fetch when the dispatcher has room and none is out.
func (w *Worker) fetch(now time.Time) {
	if w.d.Bus == nil || w.fetching || now.Before(w.fetchAfter) {
		return
	}
	n := w.core.BusRoom()
	if n <= 0 {
		return
	}
	wait := busFetchWait
	if w.fe.Mode == messages.ModePull {
		wait = busFetchWaitPull
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.fetching, w.fetchCancel = true, cancel
	self, root, b, name := w.self, w.sys.Root, w.d.Bus, w.fe.Name
	go func() {
		defer cancel()
		err := b.Fetch(ctx, name, n, wait, func(ms []*bus.Msg) { root.Send(self, &busMsgs{ms: ms}) })
		root.Send(self, &fetchDone{err: err})
	}()
}

// fetched ends a fetch; after a failure the next waits busFetchRetry.
func (w *Worker) fetched(err error, now time.Time) {
	w.fetching = false
	if err == nil {
		if w.fetchErr != "" {
			w.log.Info("fetching from the delivery bus works again")
		}
		w.fetchErr = ""
		return
	}
	w.fetchAfter = now.Add(busFetchRetry)
	if w.d.Bus.Up() && err.Error() != w.fetchErr {
		w.log.Warn("fetching from the delivery bus failed", "err", err)
	}
	w.fetchErr = err.Error()
}

// takeAll holds the messages of a fetch and names their work to the
// dispatcher, all before its next round (one claim for them all).
func (w *Worker) takeAll(ms []*bus.Msg, now time.Time) {
	for _, m := range ms {
		w.take(m, now)
	}
}

// take holds a message the bus handed out and names its work to the
// dispatcher. A message held already (handed out again while its work is
// under way here) replaces the old handle: its work is already ours.
func (w *Worker) take(m *bus.Msg, now time.Time) {
	if !w.holds.Add(m.ID, m, now) {
		w.holds.Take(m.ID)
		w.holds.Add(m.ID, m, now)
		return
	}
	for _, id := range w.core.Named(m.ID) {
		if held, ok := w.holds.Take(id); ok {
			w.settleOne(held, bus.Decision{Action: bus.Nak})
		}
		if w.fetchCancel != nil {
			w.fetchCancel() // the room it was asked with is gone
		}
	}
}

// settle settles the held messages the dispatcher's effects decide.
func (w *Worker) settle(e Effects, now time.Time) {
	// A retry's commit wrote its row back unrelayed: the relay publishes
	// it again when it is due, whether the bus held it (its message is
	// acked) or not (it was handed over, or claimed from the store).
	for _, s := range e.Settled {
		if m, ok := w.holds.Take(s.Outcome.MessageID); ok {
			w.settleOne(m, bus.Settled(s.Outcome, s.Completion))
		}
	}
	for _, u := range e.Unclaimed {
		if m, ok := w.holds.Take(u.ID); ok {
			w.settleOne(m, bus.Claimed(false, u.Later, now))
		}
	}
	if w.fe.Mode == messages.ModePull {
		// A pull frontend may ack through another instance: past the lease
		// the message goes back, and its next holder learns from the store.
		for _, wk := range e.Claimed {
			w.holds.Lease(wk.MessageID, wk.LeaseUntil)
		}
	}
}

func (w *Worker) settleOne(m *bus.Msg, d bus.Decision) {
	if err := m.Settle(d); err != nil {
		w.log.Debug("settling a bus message failed; it comes back after its ack wait", "id", m.ID, "action", d.Action.String(), "err", err)
	}
}

// tickHolds touches the held messages that need it and hands back those
// whose lease ended here without an outcome.
func (w *Worker) tickHolds(now time.Time) {
	touch, expired := w.holds.Due(now)
	for _, m := range touch {
		_ = m.Touch()
	}
	for _, m := range expired {
		w.settleOne(m, bus.Decision{Action: bus.Nak})
	}
}
