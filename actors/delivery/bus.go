package delivery

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/actors/bus"
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
//
// A worker that restarts naks at once the messages whose work no
// incarnation goes on with, and hands the others (a delivery under way, a
// verdict to record, a pull poll's message) to its next incarnation, which
// settles them once their outcome is committed, with its fetch out; a
// worker that stops naks all it holds (busLink.handOn, busLink.letGo),
// and what its fetch got and sent it that it had not taken yet
// (busInbox). Left held, each came back only after the consumer's
// AckWait. Those of a stop, and the messages a worker refuses (takeAll),
// go back once the fetch it cancels for them has ended (afterFetch), at
// once: no nak is delayed for the fetch's sake.
//
// What to hold, settle, touch and fetch is busLink's (buslink.go); the
// worker's methods below carry it out.

// busTouch is how often a held message is touched (InProgress): a third
// of the consumer's AckWait (30s), so that a slow webhook or a pull
// frontend's lease keeps its message.
const busTouch = 10 * time.Second

// The bus's backstop: every busBackstop (2s) a worker claims from the store
// the work due and unleased for busOverdue (10s: far longer than the bus
// takes to hand out work it holds, unless it has a backlog): work that was
// handed over to a worker that died or whose polls left (it was never
// relayed), or whose bus message was lost (NATS lost its store; or it was
// acked for a lease that then ended without an outcome, bus.Claimed). A
// claim that takes work the bus still holds is harmless: the row is
// leased, and the bus message finds it so or gone (acked either way).
const (
	busOverdue  = 10 * time.Second
	busBackstop = 2 * time.Second
)

// busFetchWait is how long one fetch waits for messages: a push worker's
// long poll of the bus; a pull worker's polls wait on it, so it is short.
const (
	busFetchWait     = 5 * time.Second
	busFetchWaitPull = time.Second
	// busShortPoll: a pull poll that waits less is served from the store
	// too (Dispatcher.shortPoll): a fetch and the claim by id of what it
	// brings take a few milliseconds, a poll that waits less may be gone
	// by then. A poll that waits longer is served by the bus alone.
	busShortPoll = 50 * time.Millisecond
	// busFetchRetry is the wait after a failed fetch.
	busFetchRetry = time.Second
	// busStopWait bounds how long a stopping worker waits for the fetch
	// it cancels to end before it naks what it lets go: a cancelled
	// fetch ends within one round trip to the server (the bus's
	// PublishTimeout, 5 s, bounds it).
	busStopWait = 5 * time.Second
)

// Messages of a fetch to its worker, naming the fetch (busLink.earlier: a
// restart of the worker keeps its PID, so those of a fetch it started
// before come to the next incarnation): busMsgs are messages the bus
// handed out; fetchDone ends the fetch.
type (
	busMsgs struct {
		f  *busFetch
		ms []*bus.Msg
	}
	fetchDone struct {
		f   *busFetch
		err error
	}
)

// busInbox is the batches a worker's fetches got from the bus and sent it
// (busMsgs) that it has not taken yet (takeAll). A stop drops the
// messages still queued in the worker's mailbox, and those sent after it
// go to dead letters: held by nobody, their bus messages came back only
// after the consumer's AckWait. So a fetch adds each batch here before it
// sends it (put), the worker takes it out as it takes the batch (take),
// and a stop takes what is left, to nak (stop); a batch a fetch gets
// after the stop is kept for that fetch to nak once it has ended (late).
// Either way the naks go once the fetch has ended (afterFetch says
// why). It is the worker's across its restarts (workerLife): a restart
// keeps the mailbox, and the batches queued in it come to the next
// incarnation.
// Safe for concurrent use: fetches add, the worker takes.
type busInbox struct {
	mu      sync.Mutex
	queued  []*busMsgs
	stopped bool
	left    []*bus.Msg // got after the stop
}

// put adds a batch a fetch is about to send its worker; false: the worker
// stopped, and the batch is kept for the fetch to nak (late).
func (in *busInbox) put(m *busMsgs) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stopped {
		in.left = append(in.left, m.ms...)
		return false
	}
	in.queued = append(in.queued, m)
	return true
}

// take takes out a batch the worker received.
func (in *busInbox) take(m *busMsgs) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.queued = slices.DeleteFunc(in.queued, func(q *busMsgs) bool { return q == m })
}

// stop marks the worker stopped and returns the messages of the batches
// it did not take.
func (in *busInbox) stop() []*bus.Msg {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stopped = true
	var out []*bus.Msg
	for _, m := range in.queued {
		out = append(out, m.ms...)
	}
	in.queued = nil
	return out
}

// late returns the messages fetches got after the stop (put), once.
func (in *busInbox) late() []*bus.Msg {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := in.left
	in.left = nil
	return out
}

// untaken is the settlement of messages the worker got and never took:
// back to the bus, for another worker.
func untaken(ms []*bus.Msg) []settlement[*bus.Msg] {
	var out []settlement[*bus.Msg]
	for _, m := range ms {
		out = append(out, settlement[*bus.Msg]{msg: m, d: bus.Decision{Action: bus.Nak}})
	}
	return out
}

// fetch starts the fetch the bus link asks for, if any.
func (w *Worker) fetch(now time.Time) {
	if w.d.Bus == nil {
		return
	}
	f := w.link.fetch(now, w.core.BusRoom())
	if f == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	w.fetching = fetchOut{cancel: cancel, ended: ended}
	self, root, b, name, inbox := w.self, w.sys.Root, w.d.Bus, w.fe.Name, w.life.inbox
	go func() {
		defer cancel()
		err := b.Fetch(ctx, name, f.n, f.wait, func(ms []*bus.Msg) {
			if m := (&busMsgs{f: f, ms: ms}); inbox.put(m) {
				root.Send(self, m)
			}
		})
		w.settle(untaken(inbox.late())) // the worker stopped: after the fetch's end, before the stop returns (ended)
		close(ended)
		root.Send(self, &fetchDone{f: f, err: err})
	}()
}

// afterFetch settles ss once the fetch the worker cancelled has ended, on
// a goroutine of their own if it has not yet: the messages the worker
// refuses (takeAll). (Those it lets go as it stops, busLink.letGo, are
// naked the same way, but before its stop returns: Worker.Receive.)
// Naked while that fetch's pull request still waits at the server (asked
// for more than it got), a message may be handed straight back to it: the
// fetch hands it to the worker again, which refuses it again, round and
// round until the fetch has ended. Once bus.Fetch has returned its
// request gets nothing more, so a nak then goes to another fetch (another
// instance's, or this worker's next one) at once. (With nats.go's Fetch a
// cancelled fetch dropped such a message, and unsubscribed its request
// only after it had returned: each nak was delayed past that, by a
// measured margin of 20 ms for a refused message, and by 6 s, the
// fetch's wait and a second, at a stop.)
func (w *Worker) afterFetch(ss []settlement[*bus.Msg]) {
	if len(ss) == 0 {
		return
	}
	if ended := w.fetching.ended; ended != nil && !gone(ended) {
		go func() {
			<-ended
			w.settle(ss)
		}()
		return
	}
	w.settle(ss)
}

// fetched ends a fetch.
func (w *Worker) fetched(m *fetchDone, now time.Time) {
	switch w.link.fetched(m.f, now, m.err, w.d.Bus.Up()) {
	case fetchBack:
		w.log.Info("fetching from the delivery bus works again")
	case fetchFailed:
		w.log.Warn("fetching from the delivery bus failed", "err", m.err)
	case fetchEarlier:
		w.log.Debug("a fetch from the delivery bus of the worker before its restart ended", "err", m.err)
	}
}

// takeAll holds the messages of a fetch and names their work to the
// dispatcher, all before its next round (one claim for them all); those
// of a fetch of the worker before its restart go back to the bus. Those
// the dispatcher refuses go back too, once the fetch it cancels for them
// has ended (afterFetch).
func (w *Worker) takeAll(m *busMsgs, now time.Time) {
	w.life.inbox.take(m)
	if w.link.earlier(m.f) {
		w.log.Info("messages a fetch from the delivery bus of the worker before its restart got go back to the bus",
			"messages", len(m.ms))
	}
	var refused []settlement[*bus.Msg]
	for _, bm := range m.ms {
		nak, cancel := w.link.take(m.f, bm.ID, bm, now, w.core.Named)
		if !cancel {
			w.settle(nak)
			continue
		}
		if w.fetching.cancel != nil {
			w.fetching.cancel()
		}
		refused = append(refused, nak...)
	}
	w.afterFetch(refused) // once for the batch: one wait for the fetch's end
}

// settle settles bus messages as the bus link decided.
func (w *Worker) settle(ss []settlement[*bus.Msg]) {
	for _, s := range ss {
		if err := s.msg.Settle(s.d); err != nil {
			w.log.Debug("settling a bus message failed; it comes back after its ack wait", "id", s.msg.ID, "action", s.d.Action.String(), "err", err)
		}
	}
}

// tickHolds touches the held messages that need it and hands back those
// whose lease ended here without an outcome.
func (w *Worker) tickHolds(now time.Time) {
	touch, nak := w.link.tick(now)
	for _, m := range touch {
		_ = m.Touch()
	}
	w.settle(nak)
}
