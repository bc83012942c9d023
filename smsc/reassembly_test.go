package smsc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/smpp"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func part(seq byte, data string) smpp.Part { return smpp.Part{Seq: seq, Data: []byte(data)} }

func TestReassemblyPutsPartsInOrder(t *testing.T) {
	r := NewReassembly[int](time.Minute, 100, 1<<20)
	k := PartKey{Account: "a", Source: "S", Dest: "447700", Ref: 7, Total: 3}
	other := k
	other.Dest = "447701" // another message with the same reference
	for i, step := range []struct {
		k    PartKey
		p    smpp.Part
		done bool
	}{
		{k, part(3, "C"), false},
		{other, part(1, "x"), false},
		{k, part(1, "A"), false},
		{k, part(1, "a"), false}, // a repeat: its sender is owed an answer too
		{k, part(2, "B"), true},
	} {
		w, err := r.Add(step.k, step.p, Asks{}, i, t0.Add(time.Duration(i)*time.Second), 0)
		if err != nil || (w != nil) != step.done {
			t.Fatalf("step %d: %v, %v", i, w, err)
		}
		if w != nil {
			if string(w.Content) != "aBC" || len(w.Parts) != 4 || w.Key != k {
				t.Errorf("whole = %q with %d parts", w.Content, len(w.Parts))
			}
			owed := map[int]bool{}
			for _, h := range w.Parts {
				owed[h.Owed] = true
			}
			if !owed[0] || !owed[2] || !owed[3] || !owed[4] || owed[1] {
				t.Errorf("owed %v, want steps 0, 2, 3, 4", owed)
			}
		}
	}
	if r.Held() != 1 {
		t.Errorf("held %d, want the other message's one part", r.Held())
	}
}

func TestReassemblyWaitIsBounded(t *testing.T) {
	r := NewReassembly[string](time.Minute, 3, 1<<20)
	a := PartKey{Account: "a", Source: "S", Dest: "1", Ref: 1, Total: 2}
	b := PartKey{Account: "a", Source: "S", Dest: "2", Ref: 1, Total: 2}
	if _, err := r.Add(a, part(1, "x"), Asks{}, "a1", t0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(b, part(1, "y"), Asks{}, "b1", t0.Add(30*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(b, part(2, "y"), Asks{DataCoding: 8}, "b2", t0.Add(31*time.Second), 0); !errors.Is(err, ErrMixedCoding) {
		t.Errorf("a part of another coding: %v", err)
	}
	if _, err := r.Add(b, part(2, "y"), Asks{Subunit: 1}, "b2", t0.Add(31*time.Second), 0); !errors.Is(err, ErrMixedSubunit) {
		t.Errorf("a part of another dest_addr_subunit: %v", err)
	}
	if !r.Next().Equal(t0.Add(time.Minute)) {
		t.Errorf("Next = %v", r.Next())
	}
	if got := r.Expire(t0.Add(59 * time.Second)); len(got) != 0 {
		t.Errorf("expired early: %v", got)
	}
	got := r.Expire(t0.Add(time.Minute))
	if len(got) != 1 || got[0].Key != a || len(got[0].Parts) != 1 || got[0].Parts[0].Owed != "a1" {
		t.Fatalf("expired %+v, want a with its one part", got)
	}
	// The table is bounded: a third held part is the last.
	if _, err := r.Add(a, part(1, "x"), Asks{}, "a1'", t0.Add(61*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(PartKey{Ref: 9, Total: 2}, part(1, "z"), Asks{}, "c", t0.Add(62*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(PartKey{Ref: 10, Total: 2}, part(1, "z"), Asks{}, "d", t0.Add(63*time.Second), 0); !errors.Is(err, ErrTableFull) {
		t.Errorf("a fourth part: %v, want ErrTableFull", err)
	}
	// but not one that completes a message held: it frees room.
	if w, err := r.Add(PartKey{Ref: 9, Total: 2}, part(2, "z"), Asks{}, "c2", t0.Add(64*time.Second), 0); err != nil || w == nil || r.Held() != 2 {
		t.Errorf("a fourth part completing its message: %v, %v, held %d; want the message and 2 held", w, err, r.Held())
	}
	if got := r.Expire(t0.Add(time.Hour)); len(got) != 2 || r.Held() != 0 || !r.Next().IsZero() {
		t.Errorf("expired %d, held %d, next %v", len(got), r.Held(), r.Next())
	}
}

// The table holds at most its byte budget of parts' data, and no part
// carrying more than a short_message does (a part's data may come in a
// message_payload of up to 64 KiB: 10,000 such parts would hold 650 MB).
// A part beyond the budget is refused as one beyond the count (the
// table is full for now), a part too long for good; neither is held.
func TestReassemblyBoundsTheBytesHeld(t *testing.T) {
	r := NewReassembly[int](time.Minute, 100, 3*MaxPartData)
	key := func(ref uint16) PartKey { return PartKey{Account: "a", Source: "S", Dest: "1", Ref: ref, Total: 2} }
	full := func(seq byte) smpp.Part { return smpp.Part{Seq: seq, Data: make([]byte, MaxPartData)} }
	if _, err := r.Add(key(1), smpp.Part{Seq: 1, Data: make([]byte, 65000)}, Asks{}, 0, t0, 0); !errors.Is(err, ErrPartTooLong) {
		t.Fatalf("a part of 65000 octets: %v, want ErrPartTooLong", err)
	}
	if _, err := r.Add(key(1), smpp.Part{Seq: 1, Data: make([]byte, MaxPartData+1)}, Asks{}, 0, t0, 0); !errors.Is(err, ErrPartTooLong) {
		t.Fatalf("a part of %d octets: %v, want ErrPartTooLong", MaxPartData+1, err)
	}
	if r.Held() != 0 || r.HeldBytes() != 0 || !r.Next().IsZero() {
		t.Fatalf("refused parts held: %d parts, %d octets", r.Held(), r.HeldBytes())
	}
	for i, k := range []PartKey{key(1), key(2), key(3)} {
		if _, err := r.Add(k, full(1), Asks{}, i, t0, 0); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
	}
	if _, err := r.Add(key(4), smpp.Part{Seq: 1, Data: []byte("x")}, Asks{}, 4, t0, 0); !errors.Is(err, ErrTableFull) ||
		!strings.Contains(err.Error(), "octets") {
		t.Fatalf("a part beyond the byte budget: %v, want ErrTableFull naming the octets", err)
	}
	if r.Held() != 3 || r.HeldBytes() != 3*MaxPartData {
		t.Fatalf("held %d parts, %d octets; want 3 and %d", r.Held(), r.HeldBytes(), 3*MaxPartData)
	}
	// A part that does not complete its message is refused alike, a
	// repeat of one held too.
	if _, err := r.Add(PartKey{Account: "a", Source: "S", Dest: "1", Ref: 1, Total: 3}, smpp.Part{Seq: 2, Data: []byte("x")}, Asks{}, 5, t0, 0); !errors.Is(err, ErrTableFull) {
		t.Fatalf("a middle part over the budget: %v, want ErrTableFull", err)
	}
	if _, err := r.Add(key(1), smpp.Part{Seq: 1, Data: []byte("again")}, Asks{}, 5, t0, 0); !errors.Is(err, ErrTableFull) {
		t.Fatalf("a repeated part over the budget: %v, want ErrTableFull", err)
	}
	// The part that completes a message is taken over the budget: it
	// leaves with its message and frees room. Refused, a full table would
	// stay full until every message in it timed out, none able to end.
	w, err := r.Add(key(1), smpp.Part{Seq: 2, Data: []byte("end")}, Asks{}, 5, t0, 0)
	if err != nil || w == nil || len(w.Content) != MaxPartData+3 {
		t.Fatalf("the last part over the budget: %v, %v; want the whole message", w, err)
	}
	if r.Held() != 2 || r.HeldBytes() != 2*MaxPartData {
		t.Fatalf("after the message: held %d parts, %d octets; want 2 and %d", r.Held(), r.HeldBytes(), 2*MaxPartData)
	}
	// A message made whole leaves the table with its octets.
	r2 := NewReassembly[int](time.Minute, 100, 2*MaxPartData+3)
	if _, err := r2.Add(key(1), full(1), Asks{}, 0, t0, 0); err != nil {
		t.Fatal(err)
	}
	if w, err := r2.Add(key(1), smpp.Part{Seq: 2, Data: []byte("end")}, Asks{}, 1, t0, 0); err != nil || w == nil || len(w.Content) != MaxPartData+3 {
		t.Fatalf("the message's last part: %v, %v", w, err)
	}
	if r2.Held() != 0 || r2.HeldBytes() != 0 {
		t.Fatalf("after the message: %d parts, %d octets held", r2.Held(), r2.HeldBytes())
	}
	if got := r.Expire(t0.Add(time.Minute)); len(got) != 2 || r.Held() != 0 || r.HeldBytes() != 0 {
		t.Fatalf("expired %d; held %d parts, %d octets", len(got), r.Held(), r.HeldBytes())
	}
}

// A message asks for what any of its parts asked for, whichever part
// completes it: the strongest receipt (the final outcome over a failure
// only over none); its times must be every part's alike, and a part
// whose times differ from those before it is refused and not held.
func TestReassemblyAsksForTheWholeMessage(t *testing.T) {
	const final, failure = smpp.RegisteredFinal, smpp.RegisteredFailure
	for _, tc := range []struct {
		name     string
		receipts []byte // each part's registered_delivery, in arrival order
		want     byte
	}{
		{"only the first part asks", []byte{final, 0, 0}, final},
		{"only a middle part asks", []byte{0, failure, 0}, failure},
		{"the final outcome over a failure only", []byte{failure, final, failure}, final},
		{"0x03 is read as the final outcome", []byte{failure, 0x03, 0}, 0x03},
		{"none asks", []byte{0, 0x10, 0}, 0},
	} {
		r := NewReassembly[int](time.Minute, 100, 1<<20)
		k := PartKey{Account: "a", Source: "S", Dest: "1", Ref: 1, Total: byte(len(tc.receipts))}
		var w *Whole[int]
		for i, rd := range tc.receipts {
			var err error
			if w, err = r.Add(k, part(byte(i+1), "x"), Asks{RegisteredDelivery: rd}, i, t0, 0); err != nil {
				t.Fatalf("%s: part %d: %v", tc.name, i+1, err)
			}
		}
		if w == nil || w.Asks.RegisteredDelivery != tc.want {
			t.Errorf("%s: the message asks %+v, want registered_delivery 0x%02X", tc.name, w, tc.want)
		}
	}
	r := NewReassembly[int](time.Minute, 100, 1<<20)
	k := PartKey{Account: "a", Source: "S", Dest: "1", Ref: 2, Total: 2}
	asks := Asks{Validity: "000001000000000R", Schedule: "000000000500000R"}
	if _, err := r.Add(k, part(1, "x"), asks, 1, t0, 0); err != nil {
		t.Fatal(err)
	}
	other := asks
	other.Validity = ""
	if _, err := r.Add(k, part(2, "y"), other, 2, t0, 0); !errors.Is(err, ErrMixedValidity) {
		t.Errorf("a part without the validity_period of the one before: %v, want ErrMixedValidity", err)
	}
	other = asks
	other.Schedule = "000000001000000R"
	if _, err := r.Add(k, part(2, "y"), other, 2, t0, 0); !errors.Is(err, ErrMixedSchedule) {
		t.Errorf("a part with another schedule_delivery_time: %v, want ErrMixedSchedule", err)
	}
	if r.Held() != 1 {
		t.Errorf("held %d parts, want the first alone", r.Held())
	}
	if w, err := r.Add(k, part(2, "y"), asks, 2, t0, 0); err != nil || w == nil || w.Asks != asks {
		t.Errorf("the part asking alike: %+v, %v", w, err)
	}
}

// A message waits for its next part from its latest, not its first: a
// sender that paces its parts is not refused for it; the pace a part
// comes with (its sender's submit interval) is waited on top. Flush
// takes out every message, waiting or not.
func TestReassemblyWaitsFromTheLatestPart(t *testing.T) {
	r := NewReassembly[int](5*time.Second, 100, 1<<20)
	a := PartKey{Account: "a", Source: "S", Dest: "1", Ref: 1, Total: 3}
	b := PartKey{Account: "b", Source: "S", Dest: "1", Ref: 1, Total: 2}
	if _, err := r.Add(a, part(1, "x"), Asks{}, 1, t0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(a, part(2, "y"), Asks{}, 2, t0.Add(4*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(b, part(1, "x"), Asks{}, 3, t0, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if !r.Next().Equal(t0.Add(7 * time.Second)) {
		t.Errorf("Next = %v, want b's wait with its pace", r.Next().Sub(t0))
	}
	if got := r.Expire(t0.Add(6 * time.Second)); len(got) != 0 {
		t.Errorf("expired %+v 4 s after a's latest part, 6 s after b's", got)
	}
	if got := r.Expire(t0.Add(7 * time.Second)); len(got) != 1 || got[0].Key != b {
		t.Errorf("expired %+v, want b, its wait and pace run out", got)
	}
	if !r.Next().Equal(t0.Add(9 * time.Second)) {
		t.Errorf("Next = %v, want 5 s after a's latest part", r.Next().Sub(t0))
	}
	if got := r.Flush(); len(got) != 1 || got[0].Key != a || r.Held() != 0 || !r.Next().IsZero() {
		t.Errorf("flushed %+v, held %d", got, r.Held())
	}
}
