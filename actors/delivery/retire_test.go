package delivery

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// TestPlanUp: a frontend that comes up with the settings its worker has
// kicks it; with others (any PUT that changes its mode, URL or secret:
// an smpp frontend's window is in its URL) the worker retires, draining
// what it has in flight until the drain bound, and a new one is spawned.
func TestPlanUp(t *testing.T) {
	hook := messages.Frontend{Name: "fe", Mode: messages.ModeWebhook, URL: "https://a.example/hook"}
	smsc := messages.Frontend{Name: "fe", Mode: messages.ModeSMPP, URL: "smpp://sb@smsc:2775?window=4", Secret: "pw"}
	with := func(fe messages.Frontend, f func(*messages.Frontend)) messages.Frontend { f(&fe); return fe }
	const drain = 25 * time.Second
	for _, c := range []struct {
		name string
		old  *messages.Frontend
		fe   messages.Frontend
		want workerPlan
	}{
		{"new", nil, hook, workerPlan{spawn: true}},
		{"unchanged", &hook, hook, workerPlan{kick: true}},
		{"url", &hook, with(hook, func(f *messages.Frontend) { f.URL = "https://b.example/hook" }), workerPlan{retire: true, by: t0.Add(drain), spawn: true}},
		{"secret", &hook, with(hook, func(f *messages.Frontend) { f.Secret = "s3cret-s3cret-s3cret" }), workerPlan{retire: true, by: t0.Add(drain), spawn: true}},
		{"window", &smsc, with(smsc, func(f *messages.Frontend) { f.URL = "smpp://sb@smsc:2775?window=5" }), workerPlan{retire: true, by: t0.Add(drain), spawn: true}},
		{"mode", &hook, with(hook, func(f *messages.Frontend) { f.Mode, f.URL = messages.ModePull, "" }), workerPlan{retire: true, by: t0.Add(drain), spawn: true}},
	} {
		if got := planUp(t0, c.old, c.fe, drain); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestPlanDown: the worker of a frontend that goes away (deleted) retires
// with the same bound as on a change, and nothing is spawned; a frontend
// without a worker has nothing to do.
func TestPlanDown(t *testing.T) {
	hook := messages.Frontend{Name: "fe", Mode: messages.ModeWebhook, URL: "https://a.example/hook"}
	const drain = 25 * time.Second
	if got, want := planDown(t0, &hook, drain), (workerPlan{retire: true, by: t0.Add(drain)}); got != want {
		t.Errorf("deleted: %+v, want %+v", got, want)
	}
	if got := planDown(t0, nil, drain); got != (workerPlan{}) {
		t.Errorf("no worker: %+v, want nothing", got)
	}
}

// TestRetire: a retiring dispatcher claims nothing more, records the
// verdicts of what it has in flight, and says Retired once it has; or at
// its bound, whatever it still has.
func TestRetire(t *testing.T) {
	d := newPush(2)
	r, _ := d.Next(t0)
	d.Done(t0, r, nil, &persistence.Claim{Work: work("d", 1, time.Minute)}, nil)
	by := t0.Add(time.Minute)
	if e := d.Retire(t0, by); e.Retired || e.Drained {
		t.Fatalf("retired with a delivery in flight: %+v", e)
	}
	if w := d.Wake(); !w.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("Wake = %v, want the delivery's deadline", w)
	}
	d.Verdict(t0, "d0", 0, messages.DeliveryResult{ID: "d0", Status: messages.Delivered}, false, rng())
	r, ok := d.Next(t0)
	if !ok || r.Claim != nil || len(r.Outcomes) != 1 {
		t.Fatalf("round %+v while retiring: want the verdict only", r)
	}
	if e := d.Done(t0, r, []persistence.Completion{persistence.Applied}, nil, nil); !e.Retired || len(e.Applied) != 1 {
		t.Fatalf("effects %+v once the last verdict was recorded: want it applied, and retired", e)
	}
	if e := newPull().Retire(t0, by); !e.Retired {
		t.Error("an idle dispatcher does not retire at once")
	}

	// A store that fails every round: the verdict is never recorded, and
	// the dispatcher retires at its bound.
	d = newPush(2)
	r, _ = d.Next(t0)
	d.Done(t0, r, nil, &persistence.Claim{Work: work("d", 1, time.Minute)}, nil)
	by = t0.Add(30 * time.Second)
	d.Retire(t0, by)
	d.Verdict(t0, "d0", 0, messages.DeliveryResult{ID: "d0", Status: messages.Delivered}, false, rng())
	now := t0
	for range 3 {
		r, ok := d.Next(now)
		if !ok {
			t.Fatalf("no round at %v with a verdict to record", now)
		}
		if e := d.Done(now, r, nil, nil, errUnavailable("down")); e.Retired {
			t.Fatalf("retired at %v, before its bound, with its verdict unrecorded", now)
		}
		now = now.Add(storeRetry)
	}
	if w := d.Wake(); !w.Equal(now) {
		t.Errorf("Wake = %v, want the round's retry at %v", w, now)
	}
	if e := d.Tick(by.Add(-time.Nanosecond), rng()); e.Retired {
		t.Fatal("retired before its bound")
	}
	if e := d.Tick(by, rng()); !e.Retired {
		t.Fatal("not retired at its bound")
	}
}

// TestRetireAfterRestart: a retiring (or draining) worker that restarts
// hands its next dispatcher the deliveries it had under way (Carry,
// Inherit); that one is not drained, nor retired, before their verdicts
// come (recorded late) or their deadline passes. Started empty, it stopped
// at once, and their verdicts went to a dead PID.
func TestRetireAfterRestart(t *testing.T) {
	before := newPush(2)
	r, _ := before.Next(t0)
	before.Done(t0, r, nil, &persistence.Claim{Work: work("d", 2, time.Minute)}, nil)
	carried := before.Carry(t0)
	flights := carried.flights
	deadline := t0.Add(10 * time.Second)
	if len(flights) != 2 || !flights["d0"].Equal(deadline) || !flights["d1"].Equal(deadline) {
		t.Fatalf("carried flights %v, want d0 and d1 until %v", flights, deadline)
	}
	by := t0.Add(time.Minute)

	d := newPush(2)
	d.Inherit(carried)
	if again := d.Carry(t0).flights; len(again) != 2 {
		t.Errorf("carried flights after Inherit %v: a second restart would forget them", again)
	}
	if e := d.Retire(t0, by); e.Retired || e.Drained {
		t.Fatalf("retired with its previous incarnation's deliveries under way: %+v", e)
	}
	if w := d.Wake(); !w.Equal(deadline) {
		t.Errorf("Wake = %v, want their deadline %v", w, deadline)
	}
	d.Verdict(t0, "d0", 1, messages.DeliveryResult{ID: "d0", Status: messages.Delivered}, false, rng())
	r, ok := d.Next(t0)
	if !ok || r.Claim != nil || len(r.Outcomes) != 1 || r.Outcomes[0].MessageID != "d0" {
		t.Fatalf("round %+v: want d0's late verdict only", r)
	}
	if e := d.Done(t0, r, []persistence.Completion{persistence.Applied}, nil, nil); e.Retired || len(e.Applied) != 1 {
		t.Fatalf("effects %+v with d1 still under way: want d0 applied, not retired", e)
	}
	if e := d.Tick(deadline.Add(-time.Nanosecond), rng()); e.Retired {
		t.Fatal("retired before d1's deadline")
	}
	if e := d.Tick(deadline, rng()); !e.Retired {
		t.Fatal("not retired at d1's deadline")
	}

	// Its retire bound caps the wait; a drain waits the same way.
	d = newPush(2)
	d.Inherit(carried)
	if e := d.Retire(t0, t0.Add(time.Second)); e.Retired {
		t.Fatal("retired at once")
	}
	if e := d.Tick(t0.Add(time.Second), rng()); !e.Retired {
		t.Fatal("not retired at its bound, before the deliveries' deadline")
	}
	d = newPush(2)
	d.Inherit(carried)
	if e := d.Drain(); e.Drained {
		t.Fatal("drained with its previous incarnation's deliveries under way")
	}
	d.Verdict(t0, "d0", 1, messages.DeliveryResult{ID: "d0", Status: messages.Retry}, false, rng())
	d.Verdict(t0, "d1", 1, messages.DeliveryResult{ID: "d1", Status: messages.Failed}, false, rng())
	r, _ = d.Next(t0)
	if len(r.Outcomes) != 1 || r.Outcomes[0].MessageID != "d1" {
		t.Fatalf("round %+v: want d1's late failure only (a late retry changes nothing)", r)
	}
	if e := d.Done(t0, r, []persistence.Completion{persistence.Applied}, nil, nil); !e.Drained {
		t.Fatalf("effects %+v once both answered: want drained", e)
	}
}

// TestRespawnAfter: a frontend whose worker stops for good (its restart
// budget used up) gets a new one after respawnMin, doubled for each such
// stop within respawnQuiet of the last one, up to respawnMax.
func TestRespawnAfter(t *testing.T) {
	for _, c := range []struct {
		name    string
		stopped time.Time
		wait    time.Duration
		want    time.Duration
	}{
		{"first", time.Time{}, 0, respawnMin},
		{"again", t0.Add(-time.Minute), respawnMin, 2 * respawnMin},
		{"capped", t0.Add(-time.Minute), respawnMax, respawnMax},
		{"after a quiet while", t0.Add(-respawnQuiet - time.Second), time.Minute, respawnMin},
	} {
		if got := respawnAfter(t0, c.stopped, c.wait); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRetireHandsNamedBack: with the bus up, the messages the bus named
// before a retirement (or a drain) and not claimed yet are not claimed:
// they go back to the bus (Effects.Refused), for the frontend's new worker
// or another instance. Claimed, the retiring worker delivered them with
// its old settings (the old URL, the old SMSC connection) after the
// change, and a drain waited for them.
func TestRetireHandsNamedBack(t *testing.T) {
	for _, how := range []string{"retire", "drain"} {
		d := newBusPush(3)
		if refused := d.Named("a", "b"); refused != nil {
			t.Fatalf("Named refused %v", refused)
		}
		var e Effects
		if how == "retire" {
			e = d.Retire(t0, t0.Add(time.Minute))
		} else {
			e = d.Drain()
		}
		if fmt.Sprint(e.Refused) != "[a b]" {
			t.Errorf("%s: Refused = %v, want a and b handed back", how, e.Refused)
		}
		if r, ok := d.Next(t0); ok {
			t.Errorf("%s: round %+v: a claim of what the bus named", how, r.Claim)
		}
		if how == "retire" && !e.Retired {
			t.Errorf("%s: not retired with nothing in flight", how)
		}
	}
}

// TestRetireWaitsForRowsOwed: the handover board granted a push worker's
// offer (the intake wrote the rows leased to it; their Work is on its
// way: Owe) and then its frontend changed. Retired at once, the worker
// stopped and the Work was lost with its mailbox: the messages waited for
// their lease, an attempt counted, no call made. It waits for the Work,
// and gives its rows back (a deferral, due now, fenced with its claim)
// rather than deliver them with its old settings; once that is recorded
// it is retired, and its successor is kicked (GaveBack).
func TestRetireWaitsForRowsOwed(t *testing.T) {
	d := newPush(2)
	d.Owe(1)
	if e := d.Retire(t0, t0.Add(time.Minute)); e.Retired {
		t.Fatalf("retired with a row owed by the handover board: %+v", e)
	}
	if e := d.Tick(t0.Add(time.Second), rng()); e.Retired {
		t.Fatalf("retired at a tick with a row owed: %+v", e)
	}
	wk := work("h", 1, time.Minute)
	wk[0].LeaseEpoch = 7
	if e := d.Handover(t0, wk); len(e.Start) != 0 {
		t.Fatalf("a retiring worker delivers work handed over to it: %+v", e.Start)
	}
	d.Owe(0) // the Work settled its grant
	r, ok := d.Next(t0)
	if !ok || r.Claim != nil || len(r.Outcomes) != 1 {
		t.Fatalf("round %+v: want the give-back only", r)
	}
	o := r.Outcomes[0]
	if o.MessageID != "h0" || o.Result != persistence.ResultRetry || !o.Deferred || !o.RetryAt.Equal(t0) ||
		o.Attempt != 1 || o.Epoch != 7 || o.Owner != "me" {
		t.Fatalf("outcome %+v: want a deferral of attempt 1, due now, fenced with its claim", o)
	}
	e := d.Done(t0, r, []persistence.Completion{persistence.Applied}, nil, nil)
	if !e.Retired || !e.GaveBack {
		t.Fatalf("effects %+v once the give-back was recorded: want retired, and its successor kicked", e)
	}

	// A pull worker's work at hand (no poll took it) is given back as it
	// retires, and work handed over after.
	d = newPull()
	d.Handover(t0, work("p", 2, time.Minute))
	d.Owe(1)
	if e := d.Retire(t0, t0.Add(time.Minute)); e.Retired {
		t.Fatalf("retired with work at hand and a row owed: %+v", e)
	}
	d.Handover(t0, work("q", 1, time.Minute))
	d.Owe(0)
	r, _ = d.Next(t0)
	var got []string
	for _, o := range r.Outcomes {
		if !o.Deferred {
			t.Errorf("outcome %+v: want a give-back", o)
		}
		got = append(got, o.MessageID)
	}
	if fmt.Sprint(got) != "[p0 p1 q0]" {
		t.Fatalf("given back %v, want p0 p1 q0", got)
	}
	if e := d.Done(t0, r, []persistence.Completion{persistence.Applied, persistence.Applied, persistence.Applied}, nil, nil); !e.Retired {
		t.Fatalf("effects %+v: want retired", e)
	}

	// A node's drain (no retirement) keeps delivering what comes.
	d = newPush(2)
	d.Owe(1)
	if e := d.Drain(); !e.Drained {
		t.Fatalf("a drain waits for rows owed: %+v", e)
	}
}

// TestRetireHoldsAcksWhilePolledLeasesRun: a pull frontend's worker
// retires (its frontend changed to a webhook) after its polls got
// messages: it stays until their leases end (within its bound), so that
// its consumers' acks are recorded (the supervisor routes them to it).
// Stopped at once, the ack was refused and the verdict lost: the message
// was delivered again once its lease ran out. A node's stop (Drain) ends
// the wait.
func TestRetireHoldsAcksWhilePolledLeasesRun(t *testing.T) {
	lease := t0.Add(30 * time.Second)
	polled := func() *Dispatcher {
		d := newPull()
		p := poll(1, 30*time.Second)
		d.Poll(t0, p)
		e := d.Handover(t0, work("m", 1, 30*time.Second))
		if len(e.Answers) != 1 || len(e.Answers[0].Reply.Messages) != 1 {
			t.Fatalf("answers %+v: want the poll answered with m0", e.Answers)
		}
		return d
	}
	d := polled()
	if e := d.Retire(t0, t0.Add(time.Minute)); e.Retired {
		t.Fatalf("retired with a polled message's lease running: %+v", e)
	}
	if w := d.Wake(); !w.Equal(lease) {
		t.Errorf("Wake = %v, want the lease's end %v", w, lease)
	}
	a := &messages.Ack{Frontend: "fe", Reply: make(chan messages.AckReply, 1),
		Results: []messages.DeliveryResult{{ID: "m0", Status: messages.Delivered}}}
	d.Ack(t0.Add(time.Second), a, nil, nil, rng())
	r, ok := d.Next(t0.Add(time.Second))
	if !ok || len(r.Outcomes) != 1 || r.Claim != nil {
		t.Fatalf("round %+v: want the ack's verdict only", r)
	}
	e := d.Done(t0.Add(time.Second), r, []persistence.Completion{persistence.Applied}, nil, nil)
	if len(e.Acks) != 1 || e.Retired {
		t.Fatalf("effects %+v: want the ack answered, and the worker still there until the lease ends", e)
	}
	if e := d.Tick(lease.Add(-time.Nanosecond), rng()); e.Retired {
		t.Fatal("retired before the lease ended")
	}
	if e := d.Tick(lease, rng()); !e.Retired {
		t.Fatal("not retired once the lease ended")
	}

	// Its bound caps the wait.
	d = polled()
	d.Retire(t0, t0.Add(10*time.Second))
	if w := d.Wake(); !w.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("Wake = %v, want the bound", w)
	}
	if e := d.Tick(t0.Add(10*time.Second), rng()); !e.Retired {
		t.Fatal("not retired at its bound")
	}

	// The node stops: it waits no more.
	d = polled()
	d.Retire(t0, t0.Add(time.Minute))
	if e := d.Drain(); !e.Retired {
		t.Fatalf("a retiring worker waits for acks as the node stops: %+v", e)
	}

	// A lease that ended before the retirement holds nothing.
	d = polled()
	if e := d.Retire(lease, lease.Add(time.Minute)); !e.Retired {
		t.Fatalf("retired %+v: want at once, the lease over", e)
	}
}
