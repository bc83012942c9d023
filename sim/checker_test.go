package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

func TestCheckFindsEachViolation(t *testing.T) {
	acc := func(id, fe string) Submit { return Submit{ID: id, Node: "n1", Frontend: fe, Outcome: Accepted} }
	del := func(id, fe string, a AckOutcome) Delivery { return Delivery{ID: id, Frontend: fe, Node: "n2", Ack: a} }
	push := func(id, by string, a AckOutcome) Delivery {
		return Delivery{ID: id, Frontend: "w1", Node: "n2", Ack: a, Push: true, By: by, Kind: KindWebhook}
	}
	delivered := messages.StateDelivered
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s Submit, d time.Duration) Submit { s.At, s.Target = t0.Add(d), "n2"; return s }
	dest := func(s Submit) Submit { s.Target = "n2"; return s }
	waits := map[string]Waits{"n1": {Forward: 250 * time.Second, Validity: time.Hour, Attempts: 5}, "n2": {Forward: 250 * time.Second, Validity: time.Hour, Attempts: 5}}
	timed := func(h History, clocks map[string][]ClockMove) History {
		h.ReadAt, h.Waits, h.Clocks = t0.Add(5*time.Minute), waits, clocks
		return h
	}
	// move sets a node's clock to the run's time plus offset at d.
	move := func(d, offset time.Duration) ClockMove { return ClockMove{At: t0.Add(d), Offset: offset} }
	tests := []struct {
		name string
		h    History
		want Result // Details ignored
		line string // a detail that must be there
	}{
		{
			name: "clean",
			h: History{
				Submits:    []Submit{acc("a", "f1"), acc("b", "f2")},
				Deliveries: []Delivery{del("a", "f1", Acked), del("b", "f2", Offered), del("b", "f2", Acked)},
				Origin:     map[string]messages.State{"a": delivered, "b": delivered},
			},
			want: Result{Accepted: 2, Delivered: 2},
		},
		{
			name: "lost",
			h: History{
				Submits: []Submit{acc("a", "f1")},
				Origin:  map[string]messages.State{"a": messages.StateForwardQueued},
			},
			want: Result{Accepted: 1, Lost: 1, Stuck: 1},
			line: "lost: a",
		},
		{
			name: "lost because absent at origin",
			h:    History{Submits: []Submit{acc("a", "f1")}, Origin: map[string]messages.State{}},
			want: Result{Accepted: 1, Lost: 1},
			line: "absent at its origin",
		},
		{
			name: "legitimate final failures are not lost",
			h: History{
				Submits: []Submit{dest(acc("a", "f1")), dest(acc("b", "f1"))},
				Origin:  map[string]messages.State{"a": messages.StateFailed, "b": messages.StateForwardFailed},
				Reason:  map[string]string{"a": messages.ReasonMaxAttempts, "b": messages.ReasonForwardTimeout},
				Dest:    map[string]Stored{"a": {State: messages.StateFailed, Reason: messages.ReasonMaxAttempts, Attempts: 5}, "b": {}},
				Waits:   waits,
			},
			want: Result{Accepted: 2, Failed: 2},
		},
		{
			name: "unjustified: failures no fault of the run causes",
			h: History{
				Submits: []Submit{dest(acc("a", "w1")), dest(acc("b", "w1")), dest(acc("c", "w1")), dest(acc("d", "w1")),
					dest(acc("e", "w1")), {ID: "f", Node: "n2", Target: "n2", Frontend: "w1", Outcome: Maybe}},
				Origin: map[string]messages.State{"a": messages.StateFailed, "b": messages.StateFailed, "c": messages.StateForwardFailed,
					"d": messages.StateFailed, "e": messages.StateFailed, "f": messages.StateFailed},
				Reason: map[string]string{"a": messages.ReasonRejected + ": HTTP 503: not now", "b": messages.ReasonMaxAttempts,
					"c": messages.ReasonPeerRejected, "d": messages.ReasonForwardTimeout, "e": messages.ReasonMaxAttempts, "f": messages.ReasonMaxAttempts},
				Dest: map[string]Stored{"a": {State: messages.StateFailed, Reason: messages.ReasonRejected + ": HTTP 503: not now", Attempts: 1},
					"b": {State: messages.StateFailed, Reason: messages.ReasonMaxAttempts, Attempts: 2}, "c": {},
					"e": {State: messages.StateFailed, Reason: messages.ReasonExpired, Attempts: 1},
					"f": {State: messages.StateFailed, Reason: messages.ReasonMaxAttempts, Attempts: 1}},
				Waits: waits,
			},
			want: Result{Accepted: 5, Failed: 5, Unjustified: 6},
			line: `unjustified: a failed (rejected: HTTP 503: not now) at its origin n1: the sim's frontends never refuse a message`,
		},
		{
			name: "maybe accepted and never seen is not lost",
			h: History{
				Submits: []Submit{{ID: "a", Node: "n1", Frontend: "f1", Outcome: Maybe}},
				Origin:  map[string]messages.State{},
			},
			want: Result{},
		},
		{
			name: "duplicated",
			h: History{
				Submits:    []Submit{acc("a", "f1")},
				Deliveries: []Delivery{del("a", "f1", Acked), del("a", "f1", Acked)},
				Origin:     map[string]messages.State{"a": delivered},
			},
			want: Result{Accepted: 1, Delivered: 1, Duplicated: 1},
			line: "duplicated: a handed to a pull frontend again 1 time(s)",
		},
		{
			name: "a redelivery after an unknown ack is no duplicate",
			h: History{
				Submits:    []Submit{acc("a", "f1")},
				Deliveries: []Delivery{del("a", "f1", AckUnknown), del("a", "f1", Acked)},
				Origin:     map[string]messages.State{"a": delivered},
			},
			want: Result{Accepted: 1, Delivered: 1},
		},
		{
			name: "unexpected",
			h: History{
				Submits:    []Submit{{ID: "r", Frontend: "f1", Outcome: Rejected}},
				Deliveries: []Delivery{del("x", "f1", Acked), del("r", "f1", Offered)},
			},
			want: Result{Unexpected: 2},
			line: "unexpected: x",
		},
		{
			name: "maybe accepted and delivered is expected",
			h: History{
				Submits:    []Submit{{ID: "a", Node: "n1", Frontend: "f1", Outcome: Maybe}},
				Deliveries: []Delivery{del("a", "f1", Acked)},
				Origin:     map[string]messages.State{"a": delivered},
			},
			want: Result{},
		},
		{
			name: "maybe accepted, delivered, and absent at its origin disagrees",
			h: History{
				Submits:    []Submit{{ID: "a", Node: "n1", Frontend: "f1", Outcome: Maybe}},
				Deliveries: []Delivery{del("a", "f1", Acked)},
				Origin:     map[string]messages.State{},
			},
			want: Result{Disagreeing: 1},
			line: "disagreeing: a acked at f1 but absent",
		},
		{
			name: "misrouted",
			h: History{
				Submits:    []Submit{acc("a", "f1")},
				Deliveries: []Delivery{del("a", "f9", Acked)},
				Origin:     map[string]messages.State{"a": delivered},
			},
			want: Result{Accepted: 1, Delivered: 1, Misrouted: 1},
			line: "misrouted: a seen at n2/f9",
		},
		{
			name: "disagreeing: acked but not delivered at origin",
			h: History{
				Submits:    []Submit{acc("a", "f1")},
				Deliveries: []Delivery{del("a", "f1", Acked)},
				Origin:     map[string]messages.State{"a": messages.StateForwarded},
			},
			want: Result{Accepted: 1, Delivered: 1, Disagreeing: 1, Stuck: 1},
			line: "disagreeing: a acked at f1 but forwarded",
		},
		{
			name: "redelivered: a push frontend handed a message again by the incarnation that had its answer",
			h: History{
				Submits:    []Submit{acc("a", "w1"), acc("b", "w1")},
				Deliveries: []Delivery{push("a", "n2#1", Acked), push("a", "n2#1", Acked), push("b", "n2#1", Acked)},
				Origin:     map[string]messages.State{"a": delivered, "b": delivered},
			},
			want: Result{Accepted: 2, Delivered: 2, Redelivered: 1},
			line: "redelivered: a handed to its push frontend again 1 time(s) by n2#1",
		},
		{
			name: "a push frontend handed a message again by a new incarnation, or after a lost answer, is at least once",
			h: History{
				Submits: []Submit{acc("a", "w1"), acc("b", "w1")},
				Deliveries: []Delivery{push("a", "n2#1", Acked), push("a", "n2#2", Acked),
					push("b", "n2#1", AckUnknown), push("b", "n2#1", Acked)},
				Origin: map[string]messages.State{"a": delivered, "b": delivered},
			},
			want: Result{Accepted: 2, Delivered: 2},
		},
		{
			name: "a push answered with its answer lost is not lost, but stuck while not final",
			h: History{
				Submits:    []Submit{acc("a", "w1")},
				Deliveries: []Delivery{push("a", "n2#1", AckUnknown)},
				Origin:     map[string]messages.State{"a": messages.StateForwarded},
			},
			want: Result{Accepted: 1, Stuck: 1},
			line: "stuck: a forwarded at its origin n1",
		},
		{
			name: "stuck: not final at its origin after the run, its only hand-over's ack unknown",
			h: History{
				Submits: []Submit{acc("a", "f1"), acc("b", "f1"), acc("c", "w1"), acc("d", "w1")},
				Deliveries: []Delivery{del("a", "f1", AckUnknown), del("b", "f1", AckUnknown),
					push("c", "n2#1", AckUnknown), push("d", "n2#1", AckUnknown)},
				Origin: map[string]messages.State{"a": messages.StateRetry, "b": messages.StatePending,
					"c": messages.StateForwarded, "d": messages.StateForwardQueued},
			},
			want: Result{Accepted: 4, Stuck: 4},
			line: "stuck: a retry at its origin n1 after the run (accepted; hand-overs: 0 acked, 1 ack unknown, 0 offered)",
		},
		{
			name: "stuck: maybe accepted, stored and pending at its origin",
			h: History{
				Submits: []Submit{{ID: "a", Node: "n1", Frontend: "f1", Outcome: Maybe}},
				Origin:  map[string]messages.State{"a": messages.StatePending},
			},
			want: Result{Stuck: 1},
			line: "stuck: a pending at its origin n1 after the run (maybe accepted;",
		},
		{
			name: "stuck: a copy not final at its destination",
			h: History{
				Submits: []Submit{dest(acc("a", "f1"))},
				Origin:  map[string]messages.State{"a": messages.StateForwardFailed},
				Reason:  map[string]string{"a": messages.ReasonForwardTimeout},
				Dest:    map[string]Stored{"a": {State: messages.StateRetry, Attempts: 1, Detail: "attempt 1 failed"}},
			},
			want: Result{Accepted: 1, Stuck: 1, Failed: 1},
			line: "stuck: a retry at its destination n2 after the run (forward_failed at its origin n1",
		},
		{
			name: "an unknown ack is decided by the destination's store",
			h: History{
				Submits:    []Submit{dest(acc("a", "f1")), dest(acc("b", "f1")), dest(acc("c", "f1"))},
				Deliveries: []Delivery{del("a", "f1", AckUnknown), del("b", "f1", AckUnknown), del("c", "f1", AckUnknown)},
				Origin:     map[string]messages.State{"a": messages.StateFailed, "b": delivered, "c": delivered},
				Reason:     map[string]string{"a": messages.ReasonMaxAttempts},
				Dest: map[string]Stored{"a": {State: delivered, Attempts: 5},
					"b": {State: messages.StateFailed, Reason: messages.ReasonMaxAttempts, Attempts: 5}, "c": {State: delivered}},
				Waits: waits,
			},
			want: Result{Accepted: 3, Delivered: 2, Disagreeing: 2, Failed: 1},
			line: "disagreeing: a's ack at f1 unknown: delivered at its destination n2 but failed at its origin n1",
		},
		{
			name: "disagreeing: the destination's store against a confirmed ack, or without any",
			h: History{
				Submits:    []Submit{dest(acc("a", "f1")), dest(acc("b", "f1"))},
				Deliveries: []Delivery{del("a", "f1", Acked)},
				Origin:     map[string]messages.State{"a": delivered, "b": messages.StateForwardFailed},
				Reason:     map[string]string{"b": messages.ReasonForwardTimeout},
				Dest:       map[string]Stored{"a": {State: messages.StateFailed, Reason: messages.ReasonMaxAttempts, Attempts: 5}, "b": {State: delivered}},
				Waits:      waits,
			},
			want: Result{Accepted: 2, Delivered: 1, Disagreeing: 2, Failed: 1},
			line: "disagreeing: b delivered at its destination n2 but no frontend acked it",
		},
		{
			name: "failed_early: forward_failed sooner than its origin's forward wait",
			h: timed(History{
				Submits: []Submit{at(acc("a", "f1"), 0), at(acc("b", "f1"), 3*time.Minute)},
				Origin:  map[string]messages.State{"a": messages.StateForwardFailed, "b": messages.StateForwardFailed},
				Reason:  map[string]string{"a": messages.ReasonForwardTimeout, "b": messages.ReasonForwardTimeout},
			}, nil),
			want: Result{Accepted: 2, Failed: 2, FailedEarly: 1},
			line: "failed_early: b forward_failed (forward_timeout) at n1 2m0s after its submit",
		},
		{
			name: "a clock moved forward, or set right after a step back, may fail a message sooner by its own reading",
			h: timed(History{
				Submits: []Submit{at(acc("b", "f1"), 3*time.Minute), {ID: "c", Node: "n2", Frontend: "f1", Target: "n1", Outcome: Accepted, At: t0.Add(3 * time.Minute)}},
				Origin:  map[string]messages.State{"b": messages.StateForwardFailed, "c": messages.StateForwardFailed},
				Reason:  map[string]string{"b": messages.ReasonForwardTimeout, "c": messages.ReasonForwardTimeout},
			}, map[string][]ClockMove{"n1": {move(3*time.Minute+30*time.Second, 3*time.Minute)},
				"n2": {move(3*time.Minute+10*time.Second, -3*time.Minute), move(3*time.Minute+40*time.Second, 0)}}),
			want: Result{Accepted: 2, Failed: 2},
		},
		{
			name: "failed_early: a clock moved forward before the submit does not shorten the wait",
			h: timed(History{
				Submits: []Submit{at(acc("a", "f1"), 3*time.Minute), {ID: "b", Node: "n2", Frontend: "f1", Target: "n1", Outcome: Accepted, At: t0.Add(3 * time.Minute)}},
				Origin:  map[string]messages.State{"a": messages.StateForwardFailed, "b": messages.StateForwardFailed},
				Reason:  map[string]string{"a": messages.ReasonForwardTimeout, "b": messages.ReasonForwardTimeout},
			}, map[string][]ClockMove{"n1": {move(10*time.Second, 5*time.Minute), move(30*time.Second, 0)},
				"n2": {move(10*time.Second, 5*time.Minute)}}),
			want: Result{Accepted: 2, Failed: 2, FailedEarly: 2},
			line: "failed_early: a forward_failed (forward_timeout) at n1 2m0s after its submit (clock moved forward 0s), its wait is 4m10s",
		},
		{
			name: "failed_early: expired sooner than the validity, the destination's clock moved forward less",
			h: timed(History{
				Submits: []Submit{at(acc("a", "f1"), 0), at(acc("b", "f1"), 0)},
				Origin:  map[string]messages.State{"a": messages.StateFailed, "b": messages.StateFailed},
				Reason:  map[string]string{"a": messages.ReasonExpired, "b": messages.ReasonMaxAttempts},
				Dest:    map[string]Stored{"b": {State: messages.StateFailed, Reason: messages.ReasonMaxAttempts, Attempts: 6}},
			}, map[string][]ClockMove{"n2": {move(-time.Minute, 50*time.Minute)}}),
			want: Result{Accepted: 2, Failed: 2, FailedEarly: 1},
			line: "failed_early: a failed (expired) at n1 5m0s after its submit (clocks moved forward 50m0s), its validity is 1h0m0s",
		},
		{
			name: "a destination's clock ahead of the origin's since before the submit may expire a message sooner",
			h: timed(History{
				Submits: []Submit{at(acc("a", "f1"), 0)},
				Origin:  map[string]messages.State{"a": messages.StateFailed},
				Reason:  map[string]string{"a": messages.ReasonExpired},
			}, map[string][]ClockMove{"n2": {move(-time.Minute, 56*time.Minute)}}),
			want: Result{Accepted: 1, Failed: 1},
		},
		{
			name: "disagreeing: delivered at origin, acked nowhere",
			h: History{
				Submits: []Submit{acc("a", "f1")},
				Origin:  map[string]messages.State{"a": delivered},
			},
			want: Result{Accepted: 1, Lost: 1, Disagreeing: 1},
			line: "no frontend acked it",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.h)
			details := got.Details
			got.Details = nil
			if got.Accepted != tt.want.Accepted || got.Delivered != tt.want.Delivered || got.Lost != tt.want.Lost ||
				got.Duplicated != tt.want.Duplicated || got.Unexpected != tt.want.Unexpected ||
				got.Misrouted != tt.want.Misrouted || got.Disagreeing != tt.want.Disagreeing || got.Redelivered != tt.want.Redelivered ||
				got.FailedEarly != tt.want.FailedEarly || got.Stuck != tt.want.Stuck || got.Failed != tt.want.Failed || got.Unjustified != tt.want.Unjustified {
				t.Fatalf("got %+v, want %+v\n%s", got, tt.want, strings.Join(details, "\n"))
			}
			if got.OK() != (tt.want.Lost+tt.want.Duplicated+tt.want.Unexpected+tt.want.Misrouted+tt.want.Disagreeing+tt.want.Redelivered+tt.want.FailedEarly+tt.want.Stuck+tt.want.Unjustified == 0) {
				t.Fatalf("OK() = %v for %+v", got.OK(), got)
			}
			if tt.line != "" && !strings.Contains(strings.Join(details, "\n"), tt.line) {
				t.Fatalf("details lack %q:\n%s", tt.line, strings.Join(details, "\n"))
			}
		})
	}
}

func TestResultLine(t *testing.T) {
	r := Result{Accepted: 10, Delivered: 9, Lost: 1}
	want := "sim: seed=42 nodes=5 accepted=10 delivered=9 lost=1 duplicated=0 unexpected=0 misrouted=0 disagreeing=0 redelivered=0 failed_early=0"
	if got := r.Line(42, 5); got != want {
		t.Fatalf("got %q", got)
	}
	r.Stuck, r.Unjustified, r.Failed = 2, 3, 4
	rep := Report{Seed: 42, Nodes: 5, Result: r, Quiesced: true,
		Faults: FaultCounts{Skews: 1, Jumps: 2, Removals: 3, DrainRestarts: 4, AfterCommit: map[CommitPoint]int{CommitAck: 2, CommitStatus: 1}}}
	if got := rep.Line(); got != want+" skews=1 jumps=2 removals=3 drain_restarts=4 stuck=2 unjustified=3 failed=4 quiesced=1 commit_crashes=3" {
		t.Fatalf("got %q", got)
	}
	rep.Quiesced = false
	if got := rep.Line(); !strings.Contains(got, " quiesced=0 ") {
		t.Fatalf("got %q", got)
	}
}

// A run whose work was not done by the quiescence deadline fails, whatever
// the checker found: its messages' end states are not the end.
func TestReportFailsUnlessQuiesced(t *testing.T) {
	if rep := (Report{Quiesced: true}); !rep.OK() {
		t.Fatalf("a quiesced run without violations fails: %+v", rep)
	}
	if rep := (Report{Quiesced: false}); rep.OK() {
		t.Fatalf("a run that never quiesced passes: %+v", rep)
	}
}
