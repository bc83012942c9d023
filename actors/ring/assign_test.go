package ring

import (
	"fmt"
	"maps"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"pgregory.net/rapid"
)

// checkPartition fails unless got gives each of ids an equal share (within
// one token) and the shares cover the ring exactly once.
func checkPartition(t interface{ Fatalf(string, ...any) }, got map[string]rs, ids []string) {
	var all rs
	var lo, hi uint64 = max64, 0
	for _, id := range ids {
		mine, ok := got[id]
		if !ok || len(mine) == 0 {
			t.Fatalf("member %s got nothing: %v", id, got)
		}
		if !slices.Equal(mine, Normalize(mine)) {
			t.Fatalf("member %s: ranges %v not normalized", id, mine)
		}
		all = append(all, mine...)
		h, l := count(mine)
		if len(ids) > 1 {
			if h != 0 {
				t.Fatalf("member %s owns the whole ring among %d", id, len(ids))
			}
			lo, hi = min(lo, l), max(hi, l)
		}
	}
	if len(got) != len(ids) {
		t.Fatalf("got %d owners, want %d", len(got), len(ids))
	}
	if hi-lo > 1 && len(ids) > 1 {
		t.Fatalf("shares range from %d to %d tokens", lo, hi)
	}
	slices.SortFunc(all, func(a, b messages.TokenRange) int {
		if a.Lo < b.Lo {
			return -1
		}
		if a.Lo > b.Lo {
			return 1
		}
		return 0
	})
	if all[0].Lo != 0 || all[len(all)-1].Hi != max64 {
		t.Fatalf("ranges %v do not reach both ends", all)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1].Hi == max64 || all[i].Lo != all[i-1].Hi+1 {
			t.Fatalf("gap or overlap between %v and %v", all[i-1], all[i])
		}
	}
}

// moved is how many tokens changed owner from prev (a partition) to next.
func moved(prev, next map[string]rs) uint64 {
	var h, l uint64 = 1, 0 // 2^64
	for id, p := range prev {
		kh, kl := count(intersect(p, next[id]))
		var b uint64
		l, b = bits.Sub64(l, kl, 0)
		h = h - kh - b
	}
	if h != 0 {
		return max64
	}
	return l
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%02d", i)
	}
	return out
}

func TestAssignTable(t *testing.T) {
	if got := Assign(nil, nil); len(got) != 0 {
		t.Fatalf("no members: %v", got)
	}
	if got := Assign(map[string]rs{"a": {tr(0, 5)}}, []string{"a"}); !slices.Equal(got["a"], Whole) {
		t.Fatalf("one member: %v", got)
	}
	two := Assign(nil, []string{"b", "a", "b"})
	if want := (map[string]rs{"a": {tr(0, 1<<63-1)}, "b": {tr(1<<63, max64)}}); !maps.EqualFunc(two, want, slices.Equal) {
		t.Fatalf("two members: %v, want %v", two, want)
	}
	three := Assign(nil, []string{"a", "b", "c"})
	checkPartition(t, three, []string{"a", "b", "c"})
	for id, r := range three {
		if len(r) != 1 {
			t.Fatalf("from scratch %s got %d ranges", id, len(r))
		}
	}
	// b leaves: a and c keep theirs and split b's.
	two = Assign(three, []string{"a", "c"})
	checkPartition(t, two, []string{"a", "c"})
	if !Inside(three["a"], two["a"]) || !Inside(three["c"], two["c"]) {
		t.Fatalf("a leave moved others' tokens: %v -> %v", three, two)
	}
	// Adjacent free tokens extend a member's range: one range each.
	if len(two["a"]) != 1 || len(two["c"]) != 1 {
		t.Fatalf("fragmented after a leave: %v", two)
	}
	// A join of d to three: every old member keeps one range.
	four := Assign(three, []string{"a", "b", "c", "d"})
	checkPartition(t, four, []string{"a", "b", "c", "d"})
	for _, id := range []string{"a", "b", "c"} {
		if len(four[id]) != 1 || four[id][0].Lo != three[id][0].Lo {
			t.Fatalf("old member %s not trimmed at its end: %v -> %v", id, three[id], four[id])
		}
	}
}

func TestAssignProperties(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	members := rapid.SliceOfNDistinct(rapid.SampledFrom(names), 1, len(names), rapid.ID)
	prevGen := rapid.MapOfN(rapid.SampledFrom(names), ranges(), 0, len(names))

	t.Run("partition and idempotent", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			prev, ms := prevGen.Draw(t, "prev"), members.Draw(t, "members")
			got := Assign(prev, ms)
			checkPartition(t, got, ms)
			again := Assign(got, ms)
			if !maps.EqualFunc(got, again, slices.Equal) {
				t.Fatalf("Assign not idempotent: %v -> %v", got, again)
			}
		})
	})
	t.Run("keeps what the share allows", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			prev, ms := prevGen.Draw(t, "prev"), members.Draw(t, "members")
			got := Assign(prev, ms)
			// A member whose prev (alone, no overlap) fits its share
			// keeps all of it.
			for _, id := range ms {
				mine := Normalize(prev[id])
				overlap := false
				for other, r := range prev {
					if other != id && len(intersect(mine, r)) > 0 {
						overlap = true
					}
				}
				h, l := count(mine)
				gh, gl := count(got[id])
				if !overlap && (h < gh || (h == gh && l <= gl)) && !Inside(mine, got[id]) {
					t.Fatalf("%s had %v within its share, got %v", id, mine, got[id])
				}
			}
		})
	})
	t.Run("join moves one share", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			n := rapid.IntRange(1, 40).Draw(t, "n")
			history := rapid.SliceOfN(rapid.IntRange(1, 40), 0, 4).Draw(t, "history")
			var prev map[string]rs
			for _, h := range history { // irregular but balanced ranges
				prev = Assign(prev, ids(h))
			}
			prev = Assign(prev, ids(n))
			all := ids(n + 1)
			joiner := all[rapid.IntRange(0, n).Draw(t, "joiner")]
			rest := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == joiner })
			prev = Assign(prev, rest)
			delete(prev, joiner)
			next := Assign(prev, all)
			checkPartition(t, next, all)
			share, _ := bits.Div64(1, 0, uint64(n+1))
			if m := moved(prev, next); m > share+uint64(n+1) {
				t.Fatalf("join of %s to %d moved %d tokens, share is %d", joiner, n, m, share)
			}
		})
	})
	t.Run("leave moves only the leaver's tokens", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			n := rapid.IntRange(2, 40).Draw(t, "n")
			history := rapid.SliceOfN(rapid.IntRange(1, 40), 0, 4).Draw(t, "history")
			var prev map[string]rs
			for _, h := range history {
				prev = Assign(prev, ids(h))
			}
			all := ids(n)
			prev = Assign(prev, all)
			leaver := all[rapid.IntRange(0, n-1).Draw(t, "leaver")]
			rest := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == leaver })
			next := Assign(prev, rest)
			checkPartition(t, next, rest)
			for _, id := range rest {
				if !Inside(prev[id], next[id]) {
					t.Fatalf("%s lost tokens when %s left: %v -> %v", id, leaver, prev[id], next[id])
				}
			}
		})
	})
}

// TestAssignFragmentation: churn does not shatter the ring. Twelve
// instances join and leave at random, 3000 times, from fixed seeds: the
// figures are a property of Assign, so they are the same every run. With
// minimal movement the remaining members keep the pieces they hold, so
// pieces follow the membership seen, not the amount of churn. Measured on
// these seeds: about 5 ranges per member on average (6.6 when Assign kept
// its prefix in token order, 7.5 without merging free tokens into the
// ranges they touch), the same in the second half as in the first, and at
// most 25 for one member.
func TestAssignFragmentation(t *testing.T) {
	const steps, instances = 3000, 12
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, instances))
		var prev map[string]rs
		present := map[string]bool{}
		var sum [2]float64 // ranges per member, summed over each half
		var n [2]int
		for step := range steps {
			id := ids(instances)[rng.IntN(instances)]
			present[id] = !present[id]
			var ms []string
			for m, in := range present {
				if in {
					ms = append(ms, m)
				}
			}
			if len(ms) == 0 {
				continue
			}
			prev = Assign(prev, ms)
			checkPartition(t, prev, ms)
			total := 0
			for id, r := range prev {
				total += len(r)
				if len(r) > 3*instances {
					t.Fatalf("seed %d step %d: %s holds %d ranges", seed, step, id, len(r))
				}
			}
			half := step * 2 / steps
			sum[half] += float64(total) / float64(len(ms))
			n[half]++
		}
		first, second := sum[0]/float64(n[0]), sum[1]/float64(n[1])
		t.Logf("seed %d: %.2f ranges per member, then %.2f", seed, first, second)
		if first > 6 || second > 6 {
			t.Errorf("seed %d: %.2f ranges per member, then %.2f: want at most 6", seed, first, second)
		}
		if second > 1.25*first {
			t.Errorf("seed %d: fragmentation grows with churn: %.2f ranges per member, then %.2f", seed, first, second)
		}
	}
}
