package ring

import (
	"math"
	"math/bits"
	"slices"

	"github.com/switchboard-dev/switchboard/messages"
)

// Whole is the whole ring: every token from 0 to MaxUint64 (2^64 tokens).
var Whole = []messages.TokenRange{{Lo: 0, Hi: math.MaxUint64}}

// Normalize returns rs sorted by Lo with overlapping and adjacent ranges
// merged, as a new slice (nil when rs holds no valid range). Ranges with Lo
// above Hi are dropped: they hold no token.
func Normalize(rs []messages.TokenRange) []messages.TokenRange {
	var out []messages.TokenRange
	for _, r := range rs {
		if r.Lo <= r.Hi {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b messages.TokenRange) int {
		switch {
		case a.Lo < b.Lo:
			return -1
		case a.Lo > b.Lo:
			return 1
		}
		return 0
	})
	merged := out[:1]
	for _, r := range out[1:] {
		last := &merged[len(merged)-1]
		// Adjacent when r starts right after last; last.Hi == MaxUint64
		// already reaches the end, so anything after it overlaps.
		if last.Hi == math.MaxUint64 || r.Lo <= last.Hi+1 {
			if r.Hi > last.Hi {
				last.Hi = r.Hi
			}
			continue
		}
		merged = append(merged, r)
	}
	return slices.Clip(merged)
}

// Contains reports whether token t is in one of rs.
func Contains(rs []messages.TokenRange, t uint64) bool {
	for _, r := range rs {
		if r.Contains(t) {
			return true
		}
	}
	return false
}

// Inside reports whether every range of inner lies inside one range of
// outer once outer is normalized (so inner may span ranges of outer that
// touch). An empty inner is inside anything.
func Inside(inner, outer []messages.TokenRange) bool {
	out := Normalize(outer)
	for _, r := range inner {
		if r.Lo > r.Hi {
			continue
		}
		i, _ := slices.BinarySearchFunc(out, r.Lo, func(o messages.TokenRange, t uint64) int {
			if o.Hi < t {
				return -1
			}
			if o.Lo > t {
				return 1
			}
			return 0
		})
		if i == len(out) || out[i].Lo > r.Lo || out[i].Hi < r.Hi {
			return false
		}
	}
	return true
}

// Fraction is the share of the 2^64-token ring that rs covers, in [0, 1]
// (overlaps counted once): 1 for Whole, 0 for none.
func Fraction(rs []messages.TokenRange) float64 {
	hi, lo := count(Normalize(rs))
	if hi != 0 {
		return 1
	}
	return float64(lo) / (1 << 64)
}

// count is the number of tokens in the normalized ranges rs as a 128-bit
// number (hi, lo): 2^64 tokens do not fit in a uint64.
func count(rs []messages.TokenRange) (hi, lo uint64) {
	for _, r := range rs {
		var c uint64
		lo, c = bits.Add64(lo, r.Hi-r.Lo, 0)
		hi += c
		lo, c = bits.Add64(lo, 1, 0)
		hi += c
	}
	return hi, lo
}

// subtract returns the tokens of a that are not in b, normalized.
func subtract(a, b []messages.TokenRange) []messages.TokenRange {
	a, b = Normalize(a), Normalize(b)
	var out []messages.TokenRange
	j := 0
	for _, r := range a {
		lo := r.Lo
		for j < len(b) && b[j].Hi < lo {
			j++
		}
		done := false
		for k := j; k < len(b) && b[k].Lo <= r.Hi; k++ {
			if b[k].Lo > lo {
				out = append(out, messages.TokenRange{Lo: lo, Hi: b[k].Lo - 1})
			}
			if b[k].Hi >= r.Hi {
				done = true
				break
			}
			lo = b[k].Hi + 1
		}
		if !done {
			out = append(out, messages.TokenRange{Lo: lo, Hi: r.Hi})
		}
	}
	return out
}

// intersect returns the tokens in both a and b, normalized.
func intersect(a, b []messages.TokenRange) []messages.TokenRange {
	return subtract(a, subtract(a, b))
}
