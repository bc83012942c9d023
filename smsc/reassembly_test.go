package smsc

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/smpp"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func part(seq byte, data string) smpp.Part { return smpp.Part{Seq: seq, Data: []byte(data)} }

func TestReassemblyPutsPartsInOrder(t *testing.T) {
	r := NewReassembly[int](time.Minute, 100)
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
		w, err := r.Add(step.k, step.p, 0, i, t0.Add(time.Duration(i)*time.Second))
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
	r := NewReassembly[string](time.Minute, 3)
	a := PartKey{Account: "a", Source: "S", Dest: "1", Ref: 1, Total: 2}
	b := PartKey{Account: "a", Source: "S", Dest: "2", Ref: 1, Total: 2}
	if _, err := r.Add(a, part(1, "x"), 0, "a1", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(b, part(1, "y"), 0, "b1", t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(b, part(2, "y"), 8, "b2", t0.Add(31*time.Second)); !errors.Is(err, ErrMixedCoding) {
		t.Errorf("a part of another coding: %v", err)
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
	if _, err := r.Add(a, part(1, "x"), 0, "a1'", t0.Add(61*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(PartKey{Ref: 9, Total: 2}, part(1, "z"), 0, "c", t0.Add(62*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(PartKey{Ref: 10, Total: 2}, part(1, "z"), 0, "d", t0.Add(63*time.Second)); !errors.Is(err, ErrTableFull) {
		t.Errorf("a fourth part: %v, want ErrTableFull", err)
	}
	if got := r.Expire(t0.Add(time.Hour)); len(got) != 3 || r.Held() != 0 || !r.Next().IsZero() {
		t.Errorf("expired %d, held %d, next %v", len(got), r.Held(), r.Next())
	}
}
