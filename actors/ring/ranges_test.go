package ring

import (
	"math"
	"slices"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"pgregory.net/rapid"
)

type rs = []messages.TokenRange

const max64 = math.MaxUint64

func tr(lo, hi uint64) messages.TokenRange { return messages.TokenRange{Lo: lo, Hi: hi} }

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   rs
		want rs
	}{
		{"nil", nil, nil},
		{"invalid dropped", rs{tr(5, 4)}, nil},
		{"sorted", rs{tr(10, 20), tr(0, 5)}, rs{tr(0, 5), tr(10, 20)}},
		{"adjacent merged", rs{tr(6, 9), tr(0, 5)}, rs{tr(0, 9)}},
		{"overlap merged", rs{tr(0, 10), tr(5, 7), tr(8, 12)}, rs{tr(0, 12)}},
		{"top edge", rs{tr(max64, max64), tr(0, 0), tr(1, max64-1)}, Whole},
		{"gap kept", rs{tr(0, 1), tr(3, max64)}, rs{tr(0, 1), tr(3, max64)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Normalize(tc.in); !slices.Equal(got, tc.want) {
				t.Fatalf("Normalize(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestInsideContainsFraction(t *testing.T) {
	for _, tc := range []struct {
		name         string
		inner, outer rs
		want         bool
	}{
		{"empty inner", nil, nil, true},
		{"inside", rs{tr(2, 3)}, rs{tr(0, 5)}, true},
		{"spans touching outer", rs{tr(2, 8)}, rs{tr(0, 5), tr(6, 9)}, true},
		{"spans a gap", rs{tr(2, 8)}, rs{tr(0, 5), tr(7, 9)}, false},
		{"outside", rs{tr(20, 30)}, rs{tr(0, 5)}, false},
		{"whole in whole", Whole, Whole, true},
		{"whole in less", Whole, rs{tr(0, max64-1)}, false},
	} {
		if got := Inside(tc.inner, tc.outer); got != tc.want {
			t.Errorf("%s: Inside(%v, %v) = %v, want %v", tc.name, tc.inner, tc.outer, got, tc.want)
		}
	}
	if !Contains(Whole, 0) || !Contains(Whole, max64) || Contains(rs{tr(1, 2)}, 3) {
		t.Error("Contains wrong at the edges")
	}
	for _, tc := range []struct {
		in   rs
		want float64
	}{
		{nil, 0}, {Whole, 1}, {rs{tr(0, 1<<63-1)}, 0.5}, {rs{tr(0, 1<<62-1), tr(1<<63, 1<<63+1<<62-1)}, 0.5},
		{rs{tr(0, max64), tr(5, 6)}, 1},
	} {
		if got := Fraction(tc.in); got != tc.want {
			t.Errorf("Fraction(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// token draws edge values often: the ring's ends are where overflow hides.
func token() *rapid.Generator[uint64] {
	return rapid.OneOf(rapid.Uint64(), rapid.SampledFrom([]uint64{0, 1, 2, 1 << 63, max64 - 1, max64}))
}

func tokenRange() *rapid.Generator[messages.TokenRange] {
	return rapid.Custom(func(t *rapid.T) messages.TokenRange {
		a, b := token().Draw(t, "a"), token().Draw(t, "b")
		return messages.TokenRange{Lo: min(a, b), Hi: max(a, b)}
	})
}

func ranges() *rapid.Generator[rs] { return rapid.SliceOfN(tokenRange(), 0, 6) }

// probes are tokens worth checking for rs: its edges and neighbours.
func probes(sets ...rs) []uint64 {
	out := []uint64{0, max64}
	for _, s := range sets {
		for _, r := range s {
			out = append(out, r.Lo, r.Hi, r.Lo-1, r.Hi+1)
		}
	}
	return out
}

func TestRangesProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := ranges().Draw(t, "a"), ranges().Draw(t, "b")
		n := Normalize(a)
		for i, r := range n {
			if r.Lo > r.Hi || (i > 0 && n[i-1].Hi+1 >= r.Lo) {
				t.Fatalf("Normalize(%v) = %v: not sorted, disjoint and apart", a, n)
			}
		}
		s := subtract(a, b)
		x := intersect(a, b)
		for _, p := range probes(a, b) {
			if Contains(a, p) != Contains(n, p) {
				t.Fatalf("token %d: Contains differs after Normalize(%v) = %v", p, a, n)
			}
			if Contains(s, p) != (Contains(a, p) && !Contains(b, p)) {
				t.Fatalf("token %d: subtract(%v, %v) = %v", p, a, b, s)
			}
			if Contains(x, p) != (Contains(a, p) && Contains(b, p)) {
				t.Fatalf("token %d: intersect(%v, %v) = %v", p, a, b, x)
			}
		}
		if !Inside(s, a) || !Inside(a, n) || !Inside(x, b) {
			t.Fatalf("Inside: parts of a set are not inside it")
		}
		// Complements add up to the whole ring.
		ha, la := count(n)
		hc, lc := count(subtract(Whole, a))
		if lo, c := addCarry(la, lc); ha+hc+c != 1 || lo != 0 {
			t.Fatalf("a and its complement do not cover 2^64 tokens")
		}
		if f := Fraction(a); f < 0 || f > 1 {
			t.Fatalf("Fraction(%v) = %v", a, f)
		}
	})
}

func addCarry(a, b uint64) (uint64, uint64) {
	s := a + b
	if s < a {
		return s, 1
	}
	return s, 0
}
