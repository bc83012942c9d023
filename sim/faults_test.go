package sim

import (
	"math/rand"
	"strings"
	"testing"
	"time"
)

// TestRandomScheduleReplays: the schedule is a function of the seed alone,
// so --seed N replays it; different seeds give different stories.
func TestRandomScheduleReplays(t *testing.T) {
	draw := func(seed int64) string {
		return RandomSchedule(rand.New(rand.NewSource(seed)), 5, 3*time.Second).String()
	}
	if a, b := draw(42), draw(42); a != b {
		t.Fatalf("seed 42 drew two schedules:\n%s\n%s", a, b)
	}
	if draw(42) == draw(43) {
		t.Fatal("seeds 42 and 43 drew the same schedule")
	}
	for seed := int64(1); seed <= 50; seed++ {
		s := RandomSchedule(rand.New(rand.NewSource(seed)), 5, 3*time.Second)
		if len(s) == 0 {
			t.Fatalf("seed %d: empty schedule", seed)
		}
		for i, e := range s {
			if e.At < 0 || e.At >= 3*time.Second || (i > 0 && e.At < s[i-1].At) {
				t.Fatalf("seed %d: event %d out of order or range:\n%s", seed, i, s)
			}
			if strings.Contains(e.String(), "%!") {
				t.Fatalf("seed %d: bad format %q", seed, e)
			}
		}
	}
}
