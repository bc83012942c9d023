package bus

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/switchboard-dev/switchboard/persistence"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func TestClaimed(t *testing.T) {
	for _, c := range []struct {
		name    string
		claimed bool
		later   time.Time
		want    Decision
	}{
		{"claimed: delivered here", true, time.Time{}, Decision{Action: Keep}},
		{"leased elsewhere or not due within a moment: back when claimable", false, t0.Add(nakAhead), Decision{Action: Nak, Delay: nakAhead + nakSlack}},
		{"leased elsewhere (a claim from the store) or not due (a retry) for longer: the row is the record",
			false, t0.Add(nakAhead + time.Millisecond), Decision{Action: Ack}},
		{"a pull lease of 30 s: not one of MaxAckPending for its length", false, t0.Add(30 * time.Second), Decision{Action: Ack}},
		{"claimable already (a race): back at once", false, t0.Add(-time.Second), Decision{Action: Nak, Delay: nakSlack}},
		{"no row: done or gone, the ledger barrier", false, time.Time{}, Decision{Action: Ack}},
	} {
		if got := Claimed(c.claimed, c.later, t0); got != c.want {
			t.Errorf("%s: Claimed = %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestBack: a message let go without an outcome goes back at once, or,
// while its work's lease here is known to run on, when it ends (its next
// holder could not claim it before).
func TestBack(t *testing.T) {
	for _, c := range []struct {
		name  string
		until time.Time
		want  Decision
	}{
		{"lease unknown (pushed work)", time.Time{}, Decision{Action: Nak}},
		{"lease ended", t0, Decision{Action: Nak}},
		{"lease runs on", t0.Add(time.Minute), Decision{Action: Nak, Delay: time.Minute + nakSlack}},
	} {
		if got := Back(c.until, t0); got != c.want {
			t.Errorf("%s: Back = %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestHoldsRelease: Release lets go of the messages keep says no to (told
// each one's lease end), in id order, and keeps the rest.
func TestHoldsRelease(t *testing.T) {
	h := Holds[string]{Touch: 10 * time.Second}
	for _, id := range []string{"c", "a", "b"} {
		h.Add(id, id+"!", t0)
	}
	h.Lease("b", t0.Add(time.Minute))
	let := h.Release(func(id string, until time.Time) bool { return id == "c" })
	if got := fmt.Sprint(let); got != fmt.Sprintf("[{a a! %v} {b b! %v}]", time.Time{}, t0.Add(time.Minute)) {
		t.Fatalf("Release = %s", got)
	}
	if h.Len() != 1 || !h.Held("c") || h.Leased("c") {
		t.Fatalf("after Release: %d held, c held %v, leased %v; want c alone, without a lease", h.Len(), h.Held("c"), h.Leased("c"))
	}
}

func TestSettled(t *testing.T) {
	o := func(r persistence.Result, retryAt time.Time) persistence.Outcome {
		return persistence.Outcome{Kind: persistence.WorkDelivery, Target: "fe", MessageID: "m", Result: r, RetryAt: retryAt}
	}
	for _, c := range []struct {
		name string
		o    persistence.Outcome
		c    persistence.Completion
		want Decision
	}{
		{"delivered", o(persistence.ResultDelivered, time.Time{}), persistence.Applied, Decision{Action: Ack}},
		// The retry's commit wrote the row back unrelayed: the relay
		// publishes it when due. A nak with the backoff would hold one of
		// the consumer's MaxAckPending until then.
		{"retry: back to the relay, not parked in the consumer", o(persistence.ResultRetry, t0.Add(time.Minute)), persistence.Applied, Decision{Action: Ack}},
		{"dead letter recorded: term", o(persistence.ResultFailed, time.Time{}), persistence.Applied, Decision{Action: Term}},
		{"recorded before: a redelivery", o(persistence.ResultDelivered, time.Time{}), persistence.AlreadyRecorded, Decision{Action: Ack}},
		{"a retry verdict on recorded work", o(persistence.ResultRetry, t0.Add(time.Minute)), persistence.AlreadyRecorded, Decision{Action: Ack}},
		{"a failure on recorded work is no dead letter", o(persistence.ResultFailed, time.Time{}), persistence.AlreadyRecorded, Decision{Action: Ack}},
		{"no work left", o(persistence.ResultFailed, time.Time{}), persistence.NoWork, Decision{Action: Ack}},
		{"stale: the newer holder speaks", o(persistence.ResultDelivered, time.Time{}), persistence.StaleEpoch, Decision{Action: Nak}},
		{"a pull ack of an older attempt: the newer holder speaks", o(persistence.ResultRetry, t0.Add(time.Minute)), persistence.Stale, Decision{Action: Nak}},
	} {
		if got := Settled(c.o, c.c); got != c.want {
			t.Errorf("%s: Settled = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestHoldsTouchAndExpire(t *testing.T) {
	h := Holds[string]{Touch: 10 * time.Second}
	if !h.Wake().IsZero() {
		t.Fatal("Wake of nothing held is not zero")
	}
	h.Add("a", "msg-a", t0)
	h.Add("b", "msg-b", t0.Add(time.Second))
	if h.Add("a", "again", t0) {
		t.Fatal("a second Add of a held id succeeded")
	}
	h.Lease("b", t0.Add(5*time.Second))
	if got := h.Wake(); !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("Wake = %v, want b's lease end", got)
	}
	touch, expired := h.Due(t0.Add(5 * time.Second))
	if len(touch) != 0 || fmt.Sprint(expired) != "[msg-b]" {
		t.Fatalf("Due at +5s = %v, %v; want b expired", touch, expired)
	}
	touch, expired = h.Due(t0.Add(10 * time.Second))
	if fmt.Sprint(touch) != "[msg-a]" || len(expired) != 0 {
		t.Fatalf("Due at +10s = %v, %v; want a touched", touch, expired)
	}
	if got := h.Wake(); !got.Equal(t0.Add(20 * time.Second)) {
		t.Fatalf("Wake after the touch = %v, want +20s", got)
	}
	if !h.Held("a") || h.Held("b") {
		t.Fatalf("Held a %v, b %v; want a held, b not (it expired)", h.Held("a"), h.Held("b"))
	}
	if m, ok := h.Take("a"); !ok || m != "msg-a" || h.Len() != 0 {
		t.Fatalf("Take = %q %v, %d left", m, ok, h.Len())
	}
	if _, ok := h.Take("a"); ok {
		t.Fatal("Take of a taken id succeeded")
	}
}

// TestHoldsProperty: against a model, every held message is either taken,
// expired once at its lease end, or still held; none is touched later
// than Touch after its last touch when Due runs at every Wake.
func TestHoldsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := Holds[string]{Touch: 10 * time.Second}
		now := t0
		held := map[string]bool{}
		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				id := fmt.Sprint(rapid.IntRange(0, 9).Draw(t, "id"))
				if h.Add(id, id, now) == held[id] {
					t.Fatalf("step %d: Add(%s) disagrees with the model (held %v)", i, id, held[id])
				}
				held[id] = true
			case 1:
				id := fmt.Sprint(rapid.IntRange(0, 9).Draw(t, "id"))
				if _, ok := h.Take(id); ok != held[id] {
					t.Fatalf("step %d: Take(%s) = %v, model %v", i, id, ok, held[id])
				}
				delete(held, id)
			case 2:
				id := fmt.Sprint(rapid.IntRange(0, 9).Draw(t, "id"))
				h.Lease(id, now.Add(time.Duration(rapid.IntRange(0, 30).Draw(t, "lease"))*time.Second))
			case 3:
				if w := h.Wake(); !w.IsZero() {
					if w.Sub(now) > 10*time.Second {
						t.Fatalf("step %d: Wake %v is more than Touch away", i, w.Sub(now))
					}
					now = w
				}
				_, expired := h.Due(now)
				for _, id := range expired {
					if !held[id] {
						t.Fatalf("step %d: %s expired but was not held", i, id)
					}
					delete(held, id)
				}
			}
			if h.Len() != len(held) {
				t.Fatalf("step %d: %d held, model %d", i, h.Len(), len(held))
			}
		}
	})
}

func TestRelayBackoffAndSweep(t *testing.T) {
	r := Relay{Batch: 10, Sweep: time.Second, RetryMin: 100 * time.Millisecond, RetryMax: time.Second}
	rng := rand.New(rand.NewPCG(1, 2))
	if !r.Due(t0) {
		t.Fatal("a new relay is not due")
	}
	r.Done(t0, 10) // a full batch: more may wait
	if !r.Due(t0) {
		t.Fatal("not due after a full batch")
	}
	r.Done(t0, 3)
	if r.Due(t0) || !r.Due(t0.Add(time.Second)) {
		t.Fatal("after a short batch the relay should wait for its sweep")
	}
	r.Kick()
	if !r.Due(t0) {
		t.Fatal("a kick does not make it due")
	}
	for i := range 8 {
		w := r.Failed(t0, rng)
		cap := min(100*time.Millisecond<<i, time.Second)
		if w < cap/2 || w > cap {
			t.Fatalf("failure %d: wait %v outside [%v, %v]", i+1, w, cap/2, cap)
		}
		if r.Due(t0.Add(w-time.Millisecond)) && w > time.Millisecond {
			t.Fatalf("failure %d: due before its wait", i+1)
		}
		r.Kick()
		if r.Due(t0) {
			t.Fatalf("failure %d: a kick overrides the backoff", i+1)
		}
	}
	if n := r.Done(t0, 0); n != 8 {
		t.Fatalf("Done after 8 failures reports %d", n)
	}
}

// TestRelayGoesOnPastRefusedRows: rows the stream refused are given back
// with their due time and row, so the take would return them first again
// in every round: the next take starts past them, and from the first row
// again once a take reached the end.
func TestRelayGoesOnPastRefusedRows(t *testing.T) {
	r := Relay{Batch: 10}
	key := func(row int64) persistence.RelayKey { return persistence.RelayKey{DueAt: t0, Row: row} }
	if r.From() != (persistence.RelayKey{}) {
		t.Fatalf("a new relay starts at %+v, want the first row", r.From())
	}
	r.Took(10, key(10), 3)
	if r.From() != key(10) {
		t.Fatalf("after a batch with rows refused the take starts at %+v, want past them (%+v)", r.From(), key(10))
	}
	r.Took(10, key(20), 0)
	if r.From() == (persistence.RelayKey{}) {
		t.Fatal("a full batch published went back to the first row: the refused rows would come first again")
	}
	r.Took(4, key(24), 0)
	if r.From() != (persistence.RelayKey{}) {
		t.Fatalf("after the end of the rows due the take starts at %+v, want the first row again", r.From())
	}
	r.Took(2, key(2), 2)
	r.Took(0, persistence.RelayKey{}, 0)
	if r.From() != (persistence.RelayKey{}) {
		t.Fatalf("after an empty take past refused rows the take starts at %+v, want the first row again", r.From())
	}
}

// TestPublishesLogOncePerChangeAndDegrade: failed publishes are logged
// once per error (not once per batch), and DegradeAfter of them in a row
// make the bus degraded until a publish succeeds; the rounds' failures
// (quiet: they log their own) count without being logged here.
func TestPublishesLogOncePerChangeAndDegrade(t *testing.T) {
	p := Publishes{DegradeAfter: 3}
	for i, c := range []struct {
		why           string
		loud          bool
		log, degraded bool
	}{
		{"refused", true, true, false},
		{"refused", true, false, false},
		{"timeout", false, false, true},
		{"timeout", true, true, true},
		{"timeout", true, false, true},
	} {
		if log, degraded := p.Failed(c.why, c.loud); log != c.log || degraded != c.degraded {
			t.Fatalf("failure %d (%s, loud %v): log %v degraded %v, want %v %v", i+1, c.why, c.loud, log, degraded, c.log, c.degraded)
		}
	}
	if logged, was := p.Succeeded(); !logged || !was {
		t.Fatalf("Succeeded after five failures: logged %v, was degraded %v; want true, true", logged, was)
	}
	if log, degraded := p.Failed("refused", true); !log || degraded {
		t.Fatalf("a failure after a success: log %v degraded %v; want it logged, not degraded", log, degraded)
	}
	p.Failed("refused", false)
	if logged, was := p.Succeeded(); !logged || was {
		t.Fatalf("Succeeded after two failures: logged %v, was degraded %v; want true, false", logged, was)
	}
	p.Failed("quiet", false)
	if logged, _ := p.Succeeded(); logged {
		t.Fatal("the return after a failure nobody logged is logged")
	}
}

func TestNames(t *testing.T) {
	for site, want := range map[string]string{"dc1": "SWITCHBOARD_dc1", "a.b-c_d": "SWITCHBOARD_a_b-c_d"} {
		if got := StreamName(site); got != want || ValidStream(got) != nil {
			t.Errorf("StreamName(%q) = %q (valid: %v), want %q", site, got, ValidStream(got), want)
		}
	}
	for _, bad := range []string{"", "a.b", "a b", "a*", "a>", "a/b"} {
		if ValidStream(bad) == nil {
			t.Errorf("ValidStream(%q) accepted it", bad)
		}
	}
	// A frontend's subject is valid whatever its name: a name whose dots
	// leave a token empty is one escaped token; every other name keeps
	// the subject it always had (a running site's stream holds it).
	for fe, want := range map[string]string{"fe": "S.fe", "a.b": "S.a.b", "a_b-1": "S.a_b-1", "fe.": "S.fe~2E",
		"a..b": "S.a~2E~2Eb", "x y*": "S.x~20y~2A"} {
		if got := Subject("S", fe); got != want || !validSubject(got) {
			t.Errorf("Subject(S, %q) = %q (valid: %v), want %q", fe, got, validSubject(got), want)
		}
	}
	if ConsumerName("a.b") == ConsumerName("a_b") || ConsumerName("fe") != "delivery_fe" {
		t.Errorf("consumer names: %q %q %q", ConsumerName("a.b"), ConsumerName("a_b"), ConsumerName("fe"))
	}
	// A row's publishes for one due time are one message; a retry of it
	// (due later) is another.
	r := persistence.Relay{MessageID: "m-1", Row: 42, DueAt: t0}
	later := r
	later.DueAt = t0.Add(time.Minute)
	if got := MsgID(r); got != fmt.Sprintf("m-1/42/%d", t0.UnixMicro()) || MsgID(later) == got {
		t.Errorf("MsgID = %q, of the retry %q", got, MsgID(later))
	}
}

// validSubject reports whether s is a valid literal NATS subject: tokens
// separated by '.', none empty, no white space and no wildcards.
func validSubject(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n*>") {
			return false
		}
	}
	return true
}

// TestSubjectsValidAndDistinct: every frontend name a node accepts, and
// any other string, has a valid subject, and two names never share one.
func TestSubjectsValidAndDistinct(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9._-]{0,20}`)
		any := rapid.StringMatching(`[A-Za-z0-9._~ *>-]{1,12}`)
		a := rapid.OneOf(name, any).Draw(t, "a")
		b := rapid.OneOf(name, any).Draw(t, "b")
		sa, sb := Subject("S", a), Subject("S", b)
		if !validSubject(sa) {
			t.Fatalf("Subject(S, %q) = %q is not a valid subject", a, sa)
		}
		if a != b && sa == sb {
			t.Fatalf("%q and %q share the subject %q", a, b, sa)
		}
	})
}
