package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/persistence"
)

// TestBusLinkFetch: one fetch out at a time, only with room, none during
// the wait after a failed one; a pull worker's polls wait on it, so it
// waits less.
func TestBusLinkFetch(t *testing.T) {
	cases := []struct {
		name     string
		pull     bool
		fetching bool
		after    time.Time
		room     int
		wantN    int
		wantWait time.Duration
	}{
		{name: "push", room: 3, wantN: 3, wantWait: busFetchWait},
		{name: "pull", pull: true, room: 7, wantN: 7, wantWait: busFetchWaitPull},
		{name: "no room", room: 0},
		{name: "one out", fetching: true, room: 3},
		{name: "during the wait after a failure", after: t0.Add(time.Nanosecond), room: 3},
		{name: "the wait is over", after: t0, room: 3, wantN: 3, wantWait: busFetchWait},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newBusLink[string](c.pull)
			l.after = c.after
			var out *busFetch
			if c.fetching {
				out = &busFetch{n: 1, wait: busFetchWait}
				l.out = out
			}
			f := l.fetch(t0, c.room)
			if got, want := fmt.Sprint(f), fmt.Sprint(&busFetch{n: c.wantN, wait: c.wantWait}); (f != nil) != (c.wantN > 0) || f != nil && got != want {
				t.Fatalf("fetch = %v; want %v: %v", got, c.wantN > 0, want)
			}
			if f != nil {
				out = f
			}
			if l.out != out {
				t.Fatalf("fetch out %v after a fetch %v, want %v", l.out, f, out)
			}
		})
	}
}

// TestBusLinkFetchedNotesEachFailureOnce: a fetch's end makes room for the
// next; a failure delays it busFetchRetry and is noted once while it
// repeats, not while the bus is down, and its end is noted.
func TestBusLinkFetchedNotesEachFailureOnce(t *testing.T) {
	refused, gone := errors.New("refused"), errors.New("gone")
	steps := []struct {
		err  error
		up   bool
		want fetchNote
	}{
		{err: nil, up: true, want: fetchQuiet},
		{err: refused, up: true, want: fetchFailed},
		{err: refused, up: true, want: fetchQuiet},
		{err: gone, up: true, want: fetchFailed},
		{err: nil, up: true, want: fetchBack},
		{err: refused, up: false, want: fetchQuiet},
		{err: refused, up: true, want: fetchQuiet},
		{err: nil, up: false, want: fetchBack},
	}
	l := newBusLink[string](false)
	f := l.fetch(t0, 1)
	for i, s := range steps {
		now := t0.Add(time.Duration(i) * time.Minute)
		if got := l.fetched(f, now, s.err, s.up); got != s.want {
			t.Fatalf("step %d (%v, up %v): note %d, want %d", i, s.err, s.up, got, s.want)
		}
		if f = l.fetch(now.Add(busFetchRetry-time.Nanosecond), 1); (f != nil) != (s.err == nil) {
			t.Fatalf("step %d (%v): a fetch within busFetchRetry: %v", i, s.err, f)
		}
		if s.err != nil {
			if f = l.fetch(now.Add(busFetchRetry), 1); f == nil {
				t.Fatalf("step %d (%v): no fetch after busFetchRetry", i, s.err)
			}
		}
		if again := l.fetch(now.Add(busFetchRetry), 1); again != nil {
			t.Fatalf("step %d: a second fetch out", i)
		}
	}
}

// TestBusLinkFetchOfAnEarlierIncarnation: a worker that restarts while its
// fetch runs (the restart cancels it) gets that fetch's messages and end in
// its next incarnation: same PID, same mailbox. That one's link took the
// end for its own fetch's: the fetch out was forgotten, a second went out
// beside it (twice the room asked of the bus), and the messages were named
// without room asked for them. They go back to the bus now (nak: it hands
// them out again), but for one held since (its handle settles it), and
// the fetch out goes on.
func TestBusLinkFetchOfAnEarlierIncarnation(t *testing.T) {
	before := newBusLink[string](false)
	old := before.fetch(t0, 2)
	l, n := newBusLink[string](false), &named{room: 2}
	mine := l.fetch(t0, 2)
	if nak, cancel := l.take(mine, "b", "b#2", t0, n.named); nak != nil || cancel {
		t.Fatalf("take b of the fetch out = %v, %v; want it named", nak, cancel)
	}
	var back []string
	for _, id := range []string{"a", "b"} {
		nak, cancel := l.take(old, id, id+"#1", t0, n.named)
		if cancel {
			t.Fatalf("the fetch out cancelled for %s of an earlier incarnation's fetch", id)
		}
		for _, s := range nak {
			back = append(back, fmt.Sprintf("%s %s", s.msg, s.d.Action))
		}
	}
	if want := []string{"a#1 naked"}; !slices.Equal(back, want) || !slices.Equal(n.given, []string{"b"}) {
		t.Fatalf("an earlier incarnation's fetch: handed back %q, named %v; want %q, and only b of the fetch out named", back, n.given, want)
	}
	if l.holds.Len() != 1 || !l.holds.Held("b") {
		t.Fatalf("%d held; want b alone, with the handle of the fetch out", l.holds.Len())
	}
	if note := l.fetched(old, t0, context.Canceled, true); note != fetchEarlier {
		t.Fatalf("the end of an earlier incarnation's fetch noted %d, want fetchEarlier", note)
	}
	if f := l.fetch(t0, 2); f != nil {
		t.Fatalf("fetch %v beside the one out, after an earlier incarnation's fetch ended", f)
	}
	if f := l.fetch(t0.Add(busFetchRetry), 2); f != nil {
		t.Fatalf("fetch %v beside the one out", f)
	}
	if note := l.fetched(mine, t0, nil, true); note != fetchQuiet {
		t.Fatalf("the end of the fetch out noted %d", note)
	}
	if f := l.fetch(t0, 2); f == nil {
		t.Fatal("no fetch after the one out ended")
	}
}

// named is a dispatcher's Named that takes room ids and refuses the rest,
// and records what it was given.
type named struct {
	room  int
	given []string
}

func (n *named) named(ids ...string) []string {
	n.given = append(n.given, ids...)
	take := min(n.room, len(ids))
	n.room -= take
	return ids[take:]
}

// TestBusLinkTake: a message the bus hands out is held and its work
// named; one whose work is refused goes back at once (nak) and the fetch
// out is cancelled; one handed out again while held replaces the handle
// it was held with, and is not named again.
func TestBusLinkTake(t *testing.T) {
	l, n := newBusLink[string](false), &named{room: 1}
	f := l.fetch(t0, 1)
	if nak, cancel := l.take(f, "a", "a#1", t0, n.named); nak != nil || cancel {
		t.Fatalf("take a = %v, %v; want it named", nak, cancel)
	}
	nak, cancel := l.take(f, "b", "b#1", t0, n.named)
	if want := []settlement[string]{{msg: "b#1", d: bus.Decision{Action: bus.Nak}}}; !slices.Equal(nak, want) || !cancel {
		t.Fatalf("take b, refused = %v, %v; want %v and the fetch cancelled", nak, cancel, want)
	}
	if nak, cancel := l.take(f, "a", "a#2", t0, n.named); nak != nil || cancel {
		t.Fatalf("take a again = %v, %v", nak, cancel)
	}
	if !slices.Equal(n.given, []string{"a", "b"}) {
		t.Fatalf("named %v, want a and b once each", n.given)
	}
	got := l.settle(Effects{Settled: []Settled{{Outcome: persistence.Outcome{MessageID: "a", Result: persistence.ResultDelivered},
		Completion: persistence.Applied}}}, t0)
	if want := []settlement[string]{{msg: "a#2", d: bus.Decision{Action: bus.Ack}}}; !slices.Equal(got, want) {
		t.Fatalf("settled %v, want %v: the handle of the redelivery", got, want)
	}
	if l.holds.Len() != 0 {
		t.Fatalf("%d held after the refusal and the settlement", l.holds.Len())
	}
}

// TestBusLinkSettle: the effects settle the messages held for them (none
// other): a committed outcome as bus.Settled says, a named message not
// claimed as bus.Claimed says; a pull worker keeps a claimed message
// until its lease ends, then hands it back.
func TestBusLinkSettle(t *testing.T) {
	delivered := func(id string) Settled {
		return Settled{Outcome: persistence.Outcome{MessageID: id, Result: persistence.ResultDelivered}, Completion: persistence.Applied}
	}
	failed := Settled{Outcome: persistence.Outcome{MessageID: "f", Result: persistence.ResultFailed}, Completion: persistence.Applied}
	retry := Settled{Outcome: persistence.Outcome{MessageID: "r", Result: persistence.ResultRetry}, Completion: persistence.Applied}
	stale := Settled{Outcome: persistence.Outcome{MessageID: "s", Result: persistence.ResultDelivered}, Completion: persistence.StaleEpoch}
	cases := []struct {
		name string
		pull bool
		held []string
		e    Effects
		want []string // "msg action delay"
		left int      // messages still held
	}{
		{name: "committed outcomes", held: []string{"d", "f", "r", "s"},
			e:    Effects{Settled: []Settled{delivered("d"), failed, retry, stale, delivered("x")}},
			want: []string{"d acked 0s", "f termed 0s", "r acked 0s", "s naked 0s"}},
		{name: "unclaimed", held: []string{"later", "gone", "kept"},
			e:    Effects{Unclaimed: []Unclaimed{{ID: "later", Later: t0.Add(time.Second)}, {ID: "gone"}}},
			want: []string{"later naked 1.05s", "gone acked 0s"}, left: 1},
		{name: "refused", held: []string{"a", "b", "kept"},
			e:    Effects{Refused: []string{"a", "b", "never held"}},
			want: []string{"a naked 0s", "b naked 0s"}, left: 1},
		{name: "push claimed", held: []string{"c0"},
			e: Effects{Claimed: work("c", 1, time.Second)}, left: 1},
		{name: "pull claimed", pull: true, held: []string{"c0"},
			e: Effects{Claimed: work("c", 1, time.Second)}, left: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newBusLink[string](c.pull)
			for _, id := range c.held {
				l.holds.Add(id, id, t0)
			}
			var got []string
			for _, s := range l.settle(c.e, t0) {
				got = append(got, fmt.Sprintf("%s %s %v", s.msg, s.d.Action, s.d.Delay))
			}
			if !slices.Equal(got, c.want) || l.holds.Len() != c.left {
				t.Fatalf("settled %q, %d held; want %q, %d", got, l.holds.Len(), c.want, c.left)
			}
			// Past the claimed work's lease a pull worker hands its message
			// back; a push worker's delivery settles it.
			_, nak := l.tick(t0.Add(time.Second))
			if wantBack := c.pull && len(c.e.Claimed) > 0; (len(nak) == 1) != wantBack {
				t.Fatalf("handed back %v past the lease; want one: %v", nak, wantBack)
			}
		})
	}
}

// TestBusLinkTickAndWake: held messages are touched every busTouch and
// handed back at their lease's end; the link wakes for both, and for the
// end of the wait after a failed fetch while the bus is up.
func TestBusLinkTickAndWake(t *testing.T) {
	l := newBusLink[string](true)
	if w := l.wake(true); !w.IsZero() {
		t.Fatalf("wake %v with nothing held", w)
	}
	l.holds.Add("a", "a", t0)
	l.holds.Add("b", "b", t0)
	l.holds.Lease("b", t0.Add(3*time.Second))
	if w := l.wake(true); !w.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("wake %v, want b's lease end at +3s", w)
	}
	touch, nak := l.tick(t0.Add(3 * time.Second))
	if len(touch) != 0 || len(nak) != 1 || nak[0].msg != "b" || nak[0].d.Action != bus.Nak {
		t.Fatalf("tick at +3s = %v, %v; want b handed back", touch, nak)
	}
	if w := l.wake(true); !w.Equal(t0.Add(busTouch)) {
		t.Fatalf("wake %v, want a's touch", w)
	}
	if touch, nak := l.tick(t0.Add(busTouch)); !slices.Equal(touch, []string{"a"}) || nak != nil {
		t.Fatalf("tick at the touch = %v, %v; want a touched", touch, nak)
	}
	l.fetched(l.fetch(t0, 1), t0.Add(busTouch), errors.New("refused"), true)
	retry := t0.Add(busTouch + busFetchRetry)
	if w := l.wake(true); !w.Equal(retry) {
		t.Fatalf("wake %v after a failed fetch, want %v", w, retry)
	}
	if w := l.wake(false); !w.Equal(t0.Add(2 * busTouch)) {
		t.Fatalf("wake %v with the bus down, want a's next touch only", w)
	}
}

// TestBusLinkHandOn: as its worker restarts, a bus link naks at once the
// messages whose work no incarnation goes on with (named, in the claim
// out), and hands on those whose outcome may still be recorded: a
// delivery under way or a verdict to record (outstanding), a verdict of
// the round out (until that round's result can no longer come), a pull
// frontend's work handed to a poll (its lease); and its fetch out. The
// next incarnation settles them on their outcome, and naks each once its
// dispatcher has let it go without one and no earlier round may still
// have it.
func TestBusLinkHandOn(t *testing.T) {
	settled := func(ss []settlement[string]) []string {
		var out []string
		for _, s := range ss {
			out = append(out, fmt.Sprintf("%s %s %v", s.msg, s.d.Action, s.d.Delay))
		}
		return out
	}
	among := func(ids ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(ids, id) }
	}
	old := newBusLink[string](true)
	for _, id := range []string{"named", "claiming", "flying", "recording", "retry", "polled"} {
		old.holds.Add(id, id, t0)
	}
	old.holds.Lease("polled", t0.Add(time.Minute))
	out := old.fetch(t0, 2)
	round := &Round{Outcomes: []persistence.Outcome{{MessageID: "retry", Result: persistence.ResultRetry}},
		Claim: &persistence.ClaimRequest{IDs: []string{"claiming"}}}
	carry, nak := old.handOn(t0, among("flying", "recording"), round, t0.Add(30*time.Second))
	if got, want := settled(nak), []string{"claiming naked 0s", "named naked 0s"}; !slices.Equal(got, want) {
		t.Fatalf("naked at the restart %q, want %q", got, want)
	}
	if old.holds.Len() != 0 {
		t.Fatalf("the old link still holds %d", old.holds.Len())
	}

	l := newBusLink[string](true)
	l.inherit(carry)
	if l.holds.Len() != 4 {
		t.Fatalf("the next incarnation holds %d, want flying, recording, retry and polled", l.holds.Len())
	}
	// The fetch out goes on for it: what it gets is its own, and no second
	// fetch goes out beside it.
	if l.earlier(out) || l.fetch(t0, 2) != nil {
		t.Fatal("the fetch out at the restart is not the next incarnation's")
	}
	if w := l.wake(true); !w.Equal(t0.Add(busTouch)) {
		t.Fatalf("wake %v, want the touch (before the round's bound)", w)
	}
	// recording's verdict is committed: settled as ever.
	if got := settled(l.settle(Effects{Settled: []Settled{{Outcome: persistence.Outcome{MessageID: "recording",
		Result: persistence.ResultDelivered}, Completion: persistence.Applied}}}, t0)); !slices.Equal(got, []string{"recording acked 0s"}) {
		t.Fatalf("settled %q, want recording acked", got)
	}
	// flying is still under way; retry waits for the earlier round.
	if got := l.release(t0.Add(time.Second), among("flying")); got != nil {
		t.Fatalf("released %q while flying is under way and the round may report", settled(got))
	}
	// flying's delivery is let go without an outcome (its deadline passed):
	// back to the bus.
	if got := settled(l.release(t0.Add(2*time.Second), among())); !slices.Equal(got, []string{"flying naked 0s"}) {
		t.Fatalf("released %q, want flying", got)
	}

	// A second restart: retry still waits for the first round, with its
	// bound; polled keeps its lease.
	carry, nak = l.handOn(t0.Add(3*time.Second), among(), nil, t0.Add(time.Hour))
	if nak != nil {
		t.Fatalf("naked %q at the second restart", settled(nak))
	}
	l = newBusLink[string](true)
	l.inherit(carry)
	if w := l.wake(true); !w.Equal(t0.Add(busTouch)) {
		t.Fatalf("wake %v, want the touch", w)
	}
	// The round reports (what it committed was settled with its effects):
	// retry is no longer waited for.
	l.earlierDone(round)
	if got := settled(l.release(t0.Add(4*time.Second), among())); !slices.Equal(got, []string{"retry naked 0s"}) {
		t.Fatalf("released %q after the round reported, want retry", got)
	}
	if l.holds.Len() != 1 || !l.holds.Leased("polled") {
		t.Fatalf("%d held, want polled with its lease", l.holds.Len())
	}
}

// TestBusLinkHandOnRoundBound: a verdict of the round out is waited for
// until that round's store call can no longer end; past it (the round
// panicked: its result never comes) the message goes back.
func TestBusLinkHandOnRoundBound(t *testing.T) {
	old := newBusLink[string](false)
	old.holds.Add("retry", "retry", t0)
	round := &Round{Outcomes: []persistence.Outcome{{MessageID: "retry", Result: persistence.ResultRetry}}}
	bound := t0.Add(5 * time.Second)
	carry, nak := old.handOn(t0, func(string) bool { return false }, round, bound)
	if nak != nil {
		t.Fatalf("naked %v", nak)
	}
	l := newBusLink[string](false)
	l.inherit(carry)
	if w := l.wake(true); !w.Equal(bound) {
		t.Fatalf("wake %v, want the round's bound %v", w, bound)
	}
	if got := l.release(bound.Add(-time.Nanosecond), func(string) bool { return false }); got != nil {
		t.Fatalf("released %v before the bound", got)
	}
	got := l.release(bound, func(string) bool { return false })
	if len(got) != 1 || got[0].msg != "retry" || got[0].d != (bus.Decision{Action: bus.Nak}) {
		t.Fatalf("released %v at the bound, want retry naked", got)
	}
	if w := l.wake(true); !w.IsZero() {
		t.Fatalf("wake %v with nothing held", w)
	}
}

// TestBusLinkLetGo: a worker that stops lets every message go: naked now,
// a pull frontend's work handed to a poll delayed until its lease ends
// (its next holder could not claim it before).
func TestBusLinkLetGo(t *testing.T) {
	l := newBusLink[string](true)
	l.holds.Add("named", "named", t0)
	l.holds.Add("polled", "polled", t0)
	l.holds.Lease("polled", t0.Add(time.Minute))
	var got []string
	for _, s := range l.letGo(t0.Add(10 * time.Second)) {
		got = append(got, fmt.Sprintf("%s %s %v", s.msg, s.d.Action, s.d.Delay))
	}
	if want := []string{"named naked 0s", "polled naked 50.05s"}; !slices.Equal(got, want) {
		t.Fatalf("let go %q, want %q", got, want)
	}
	if l.holds.Len() != 0 {
		t.Fatalf("%d still held", l.holds.Len())
	}
}

// TestBusInbox: a batch a fetch sends the worker is the inbox's until the
// worker takes it; a stop takes those it did not, and a batch put after
// the stop is not sent but kept for its fetch to nak (late), once.
func TestBusInbox(t *testing.T) {
	in := &busInbox{}
	a, b, c := &busMsgs{ms: []*bus.Msg{{}, {}}}, &busMsgs{ms: []*bus.Msg{{}}}, &busMsgs{ms: []*bus.Msg{{}}}
	if !in.put(a) || !in.put(b) {
		t.Fatal("a batch put before the stop is not to be sent")
	}
	in.take(a)
	if got := in.stop(); len(got) != 1 || got[0] != b.ms[0] {
		t.Fatalf("stop = %v, want b's message (a was taken)", got)
	}
	if in.put(c) {
		t.Fatal("a batch put after the stop is to be sent")
	}
	if got := in.late(); len(got) != 1 || got[0] != c.ms[0] {
		t.Fatalf("late = %v, want c's message", got)
	}
	if got := in.late(); len(got) != 0 {
		t.Fatalf("late again = %v, want none", got)
	}
	if got := untaken(b.ms); len(got) != 1 || got[0].d.Action != bus.Nak {
		t.Fatalf("untaken = %+v, want a nak", got)
	}
}
