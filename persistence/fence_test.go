package persistence

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

// tr is the token range [lo, hi].
func tr(lo, hi uint64) TokenRange { return TokenRange{Lo: lo, Hi: hi} }

func TestSignedRanges(t *testing.T) {
	const half = uint64(1) << 63
	cases := []struct {
		name string
		in   []TokenRange
		want [][2]int64
	}{
		{"none", nil, [][2]int64{}},
		{"low half", []TokenRange{tr(0, 100)}, [][2]int64{{0, 100}}},
		{"a point", []TokenRange{tr(7, 7)}, [][2]int64{{7, 7}}},
		{"up to 2^63-1", []TokenRange{tr(5, half-1)}, [][2]int64{{5, math.MaxInt64}}},
		{"from 2^63", []TokenRange{tr(half, half+10)}, [][2]int64{{math.MinInt64, math.MinInt64 + 10}}},
		{"high half to the top", []TokenRange{tr(half+1, math.MaxUint64)}, [][2]int64{{math.MinInt64 + 1, -1}}},
		{"across 2^63", []TokenRange{tr(half-2, half+3)}, [][2]int64{{math.MaxInt64 - 1, math.MaxInt64}, {math.MinInt64, math.MinInt64 + 3}}},
		{"whole ring", []TokenRange{tr(0, math.MaxUint64)}, [][2]int64{{0, math.MaxInt64}, {math.MinInt64, -1}}},
		{"several, in order", []TokenRange{tr(half, half), tr(1, 2)}, [][2]int64{{math.MinInt64, math.MinInt64}, {1, 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := SignedRanges(c.in)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("SignedRanges(%v) = %v, want %v", c.in, got, c.want)
			}
			// Every token of the input is in one output range, and only those.
			for _, r := range c.in {
				for _, tok := range []uint64{r.Lo, r.Hi, r.Lo + (r.Hi-r.Lo)/2, r.Lo - 1, r.Hi + 1} {
					inUnsigned := r.Contains(tok)
					for _, o := range c.in {
						inUnsigned = inUnsigned || o.Contains(tok)
					}
					inSigned := false
					for _, s := range got {
						if s[0] <= int64(tok) && int64(tok) <= s[1] {
							inSigned = true
						}
					}
					if inUnsigned != inSigned {
						t.Errorf("token %d: in %v is %v, in %v is %v", tok, c.in, inUnsigned, got, inSigned)
					}
				}
			}
		})
	}
}

func TestCovered(t *testing.T) {
	owned := []TokenRange{tr(0, 9), tr(20, math.MaxUint64)}
	cases := []struct {
		want []TokenRange
		ok   bool
	}{
		{nil, true},
		{[]TokenRange{tr(0, 9)}, true},
		{[]TokenRange{tr(2, 3), tr(25, math.MaxUint64)}, true},
		{[]TokenRange{tr(5, 25)}, false}, // spans two owned ranges with a gap
		{[]TokenRange{tr(0, 10)}, false},
		{[]TokenRange{tr(2, 3), tr(10, 10)}, false},
	}
	for _, c := range cases {
		if got := Covered(owned, c.want); got != c.ok {
			t.Errorf("Covered(%v, %v) = %v, want %v", owned, c.want, got, c.ok)
		}
	}
	if Covered(nil, []TokenRange{tr(0, 0)}) {
		t.Error("nothing owned covers a range")
	}
}

func TestRingStateValidate(t *testing.T) {
	ok := RingState{Epoch: 3, Owners: []RangeOwner{
		{messages.ServiceDelivery, tr(0, 9), "a"},
		{messages.ServiceDelivery, tr(10, math.MaxUint64), "b"},
		{messages.ServiceForward, tr(0, math.MaxUint64), "a"},
	}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	if err := ValidatePublish(2, ok); err != nil {
		t.Fatalf("ValidatePublish(2) = %v", err)
	}
	if err := ValidatePublish(3, ok); err == nil || !strings.Contains(err.Error(), "above the previous epoch") {
		t.Errorf("ValidatePublish(3) = %v", err)
	}
	bad := RingState{Owners: []RangeOwner{
		{"status", tr(0, 1), "a"},
		{messages.ServiceDelivery, tr(9, 1), "a"},
		{messages.ServiceForward, tr(0, 10), ""},
		{messages.ServiceForward, tr(10, 20), "b"},
	}}
	err := bad.Validate()
	for _, want := range []string{"epoch must be positive", `unknown service "status"`, "lo above hi", "empty owner", "overlap"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	if errors.Is(err, ErrStaleEpoch) {
		t.Error("a bad assignment is not a stale epoch")
	}
}

func TestCompletionOf(t *testing.T) {
	fenced := Outcome{Kind: WorkDelivery, Epoch: 4, Owner: "a"}
	status := Outcome{Kind: WorkStatus, Epoch: 4, Owner: "a"}
	ownerOnly := Outcome{Kind: WorkDelivery, Result: ResultRetry, Owner: "a"} // a claim under epoch 0: handed over, by id, or without a ring
	ack := Outcome{Kind: WorkDelivery, Ack: true}
	retry := Outcome{Kind: WorkDelivery, Result: ResultRetry, Ack: true}
	deferralAck := Outcome{Kind: WorkDelivery, Result: ResultRetry, Deferred: true, Ack: true}
	forwardRetry := Outcome{Kind: WorkForward, Result: ResultRetry}
	mine := []WorkLease{{Owner: "a", Epoch: 4}}
	retried := func(attempt int) []WorkLease { return []WorkLease{{Retried: attempt}} }
	cases := []struct {
		name     string
		o        Outcome
		found    bool
		state    messages.State
		attempts int
		recorded bool
		rows     []WorkLease
		want     Completion
	}{
		{"no message", fenced, false, "", 1, false, mine, NoWork},
		{"recorded", fenced, true, messages.StatePending, 1, true, []WorkLease{{Owner: "b", Epoch: 5}}, AlreadyRecorded},
		{"final message", fenced, true, messages.StateDelivered, 1, false, mine, AlreadyRecorded},
		{"final message, no row of its target", fenced, true, messages.StateDelivered, 1, false, nil, NoWork},
		{"final message, status work", status, true, messages.StateDelivered, 0, false, mine, Applied},
		{"no row", fenced, true, messages.StatePending, 1, false, nil, NoWork},
		{"leased to it", fenced, true, messages.StatePending, 1, false, mine, Applied},
		{"another owner", fenced, true, messages.StatePending, 1, false, []WorkLease{{Owner: "b", Epoch: 4}}, StaleEpoch},
		{"another epoch", fenced, true, messages.StatePending, 1, false, []WorkLease{{Owner: "a", Epoch: 5}}, StaleEpoch},
		{"unleased", fenced, true, messages.StateRetry, 1, false, []WorkLease{{}}, StaleEpoch},
		{"unfenced", Outcome{Kind: WorkDelivery}, true, messages.StatePending, 1, false, []WorkLease{{Owner: "b", Epoch: 5}}, Applied},
		{"epoch 0, leased to it", ownerOnly, true, messages.StatePending, 1, false, []WorkLease{{Owner: "a"}}, Applied},
		{"epoch 0, another owner's claim under an epoch", ownerOnly, true, messages.StatePending, 2, false, []WorkLease{{Owner: "b", Epoch: 3}}, StaleEpoch},
		{"epoch 0, another owner's claim by id", ownerOnly, true, messages.StatePending, 2, false, []WorkLease{{Owner: "b"}}, StaleEpoch},
		{"epoch 0, its own claim under an epoch since", ownerOnly, true, messages.StatePending, 2, false, []WorkLease{{Owner: "a", Epoch: 3}}, StaleEpoch},
		{"epoch 0, unleased", ownerOnly, true, messages.StateRetry, 1, false, []WorkLease{{}}, StaleEpoch},
		{"ack, never offered", ack, true, messages.StatePending, 0, false, []WorkLease{{}}, NotOffered},
		{"ack, lease ran out", ack, true, messages.StatePending, 1, false, []WorkLease{{}}, Applied},
		{"ack, recorded before", ack, true, messages.StatePending, 0, true, []WorkLease{{}}, AlreadyRecorded},
		{"ack, no row", ack, true, messages.StatePending, 0, false, nil, NoWork},
		{"deferral ack again, attempt 1 given back", deferralAck, true, messages.StateRetry, 0, false, []WorkLease{{}}, AlreadyRecorded},
		{"deferral ack, never offered", deferralAck, true, messages.StatePending, 0, false, []WorkLease{{}}, NotOffered},
		{"retry of an attempt whose retry is recorded", retry, true, messages.StateRetry, 2, false, retried(2), AlreadyRecorded},
		{"retry of a later attempt", retry, true, messages.StateRetry, 3, false, retried(2), Applied},
		{"delivered after the attempt's retry", Outcome{Kind: WorkDelivery, Result: ResultDelivered, Ack: true}, true, messages.StateRetry, 2, false, retried(2), Applied},
		{"retry, no retry recorded", retry, true, messages.StatePending, 1, false, retried(0), Applied},
		{"forward retry: attempts count deliveries", forwardRetry, true, messages.StateForwardQueued, 1, false, retried(1), Applied},
	}
	for _, c := range cases {
		var m *Row
		if c.found {
			m = &Row{Message: messages.Message{State: c.state, Attempts: c.attempts}}
		}
		if got := CompletionOf(c.o, m, c.recorded, c.rows); got != c.want {
			t.Errorf("%s: CompletionOf = %s, want %s", c.name, got, c.want)
		}
	}
}
