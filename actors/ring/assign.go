package ring

import (
	"cmp"
	"math/bits"
	"slices"

	"github.com/switchboard-dev/switchboard/messages"
)

// Assign splits the whole ring among members and returns each member's
// ranges, normalized. prev is the previous split (it may be nil, name
// departed members, leave gaps or even overlap); members are instance ids
// (duplicates are ignored; none gives an empty map).
//
// Shares are exact: with n members each gets floor(2^64/n) tokens and the
// first 2^64 mod n members in id order one more, so shares differ by at
// most one token. The ranges cover the ring with no overlap.
//
// Movement is minimal: every member keeps as much of its prev ranges as
// its new share allows. Going through members in id order (an earlier
// member wins a token that prev gave to several), a member over its share
// keeps its largest prev ranges whole, largest first, and trims the last
// one it needs from its end: the excess it lets go is its small pieces.
// The tokens nobody keeps (of departed members, the excess, gaps) are the
// free tokens; they go to the members below their share, in id order:
// first free tokens that touch the member's kept ranges (they merge), then
// the smallest free range that fills the rest at once, else the largest
// free ranges first. So Assign(Assign(x, m), m) moves nothing; when one
// member joins n balanced members only its share (about 1/(n+1) of the
// ring) moves; when one leaves only its tokens move.
//
// Fragmentation: which tokens move is free (how many is not), and they are
// chosen to keep ranges whole: small pieces let go, free tokens merged into
// the ranges they touch. But minimal movement means members keep the
// pieces they hold, so pieces follow the membership a ring has seen, not
// the amount of churn: with twelve instances joining and leaving at random
// for thousands of steps, members hold about 5 ranges on average, and 25
// at most (TestAssignFragmentation).
func Assign(prev map[string][]messages.TokenRange, members []string) map[string][]messages.TokenRange {
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make(map[string][]messages.TokenRange, len(ids))
	switch len(ids) {
	case 0:
		return out
	case 1:
		out[ids[0]] = slices.Clone(Whole)
		return out
	}

	// 2^64 / n with n >= 2: the quotient fits a uint64.
	n := uint64(len(ids))
	share, extra := bits.Div64(1, 0, n)
	quota := func(i int) uint64 {
		if uint64(i) < extra {
			return share + 1
		}
		return share
	}

	kept := make([][]messages.TokenRange, len(ids))
	need := make([]uint64, len(ids))
	var taken []messages.TokenRange
	for i, id := range ids {
		mine := subtract(prev[id], taken)
		kept[i], need[i] = keepLargest(mine, quota(i))
		taken = Normalize(append(taken, kept[i]...))
	}
	free := subtract(Whole, taken)

	// Free tokens that touch a member's kept ranges extend them.
	for i := range ids {
		for need[i] > 0 {
			k, lo, hi, ok := adjacent(free, kept[i], need[i])
			if !ok {
				break
			}
			kept[i] = Normalize(append(kept[i], messages.TokenRange{Lo: lo, Hi: hi}))
			need[i] -= hi - lo + 1
			free = cut(free, k, lo, hi)
		}
	}
	// The rest: one free range that fills the need at once (the smallest
	// such, to leave big ones whole), else the largest ones first.
	for i := range ids {
		for need[i] > 0 {
			k := bestFit(free, need[i])
			r := free[k]
			hi := r.Hi
			if r.Hi-r.Lo >= need[i] {
				hi = r.Lo + need[i] - 1
			}
			kept[i] = Normalize(append(kept[i], messages.TokenRange{Lo: r.Lo, Hi: hi}))
			need[i] -= hi - r.Lo + 1
			free = cut(free, k, r.Lo, hi)
		}
	}
	for i, id := range ids {
		out[id] = kept[i]
	}
	return out
}

// keepLargest returns q tokens of the normalized rs (all of them when fewer),
// normalized, and how many tokens short of q that is. It keeps the largest
// ranges whole, largest first, and trims the last one it needs from its
// end, so the small pieces are the ones let go: the amount kept is the
// same whichever tokens are kept, and letting pieces go rather than
// splitting big ranges keeps the ring from fragmenting under churn.
func keepLargest(rs []messages.TokenRange, q uint64) ([]messages.TokenRange, uint64) {
	bySize := slices.Clone(rs)
	slices.SortStableFunc(bySize, func(a, b messages.TokenRange) int {
		return cmp.Compare(b.Hi-b.Lo, a.Hi-a.Lo)
	})
	var out []messages.TokenRange
	for _, r := range bySize {
		if q == 0 {
			break
		}
		if r.Hi-r.Lo >= q-1 {
			out = append(out, messages.TokenRange{Lo: r.Lo, Hi: r.Lo + q - 1})
			q = 0
			break
		}
		out = append(out, r)
		q -= r.Hi - r.Lo + 1
	}
	return Normalize(out), q
}

// adjacent finds a free range touching one of kept and returns the part of
// it (at most need tokens, taken from the touching side) to hand over.
func adjacent(free, kept []messages.TokenRange, need uint64) (k int, lo, hi uint64, ok bool) {
	for k, f := range free {
		for _, r := range kept {
			switch {
			case r.Hi < f.Lo && r.Hi+1 == f.Lo: // f follows r
				hi := f.Hi
				if f.Hi-f.Lo >= need {
					hi = f.Lo + need - 1
				}
				return k, f.Lo, hi, true
			case f.Hi < r.Lo && f.Hi+1 == r.Lo: // f precedes r
				lo := f.Lo
				if f.Hi-f.Lo >= need {
					lo = f.Hi - (need - 1)
				}
				return k, lo, f.Hi, true
			}
		}
	}
	return 0, 0, 0, false
}

// bestFit returns the index of the smallest free range holding at least
// need tokens, else of the largest one (ties: the lowest). free is not
// empty while a member is short: free tokens equal the total shortfall.
func bestFit(free []messages.TokenRange, need uint64) int {
	best, largest := -1, 0
	for k, f := range free {
		w := f.Hi - f.Lo // tokens - 1
		if w >= need-1 && (best < 0 || w < free[best].Hi-free[best].Lo) {
			best = k
		}
		if w > free[largest].Hi-free[largest].Lo {
			largest = k
		}
	}
	if best >= 0 {
		return best
	}
	return largest
}

// cut removes [lo, hi], which lies inside free[k], from free.
func cut(free []messages.TokenRange, k int, lo, hi uint64) []messages.TokenRange {
	f := free[k]
	var parts []messages.TokenRange
	if f.Lo < lo {
		parts = append(parts, messages.TokenRange{Lo: f.Lo, Hi: lo - 1})
	}
	if hi < f.Hi {
		parts = append(parts, messages.TokenRange{Lo: hi + 1, Hi: f.Hi})
	}
	return slices.Concat(free[:k], parts, free[k+1:])
}
