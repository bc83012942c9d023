package sim

import (
	"math/rand"
	"testing"
	"time"
)

// TestPausedMasterLosesItsLock pauses the ring master of a site of three
// instances for 20 s: its lock lapses at once, a slave whose calls time
// out takes it and leads, and the paused master, going on, believes it
// leads for 2 s more. The ring invariants (no token owned twice under the
// store's epoch, no row claimed under another's live lease) and the
// delivery invariants hold.
func TestPausedMasterLosesItsLock(t *testing.T) {
	rep := run(t, 721, Options{Nodes: 2, Instances: []int{3}, Duration: 3 * time.Minute,
		Schedule: Schedule{At(5*time.Second, PauseMaster(0, 100*time.Second, 2*time.Second))}})
	if rep.Faults.Lapses != 1 || rep.Faults.Overtaken != 1 {
		t.Fatalf("%d masters paused, %d overtaken while they believed they led; want 1 and 1:\n%s", rep.Faults.Lapses, rep.Faults.Overtaken, rep)
	}
	if len(rep.Errors) > 0 {
		t.Fatalf("schedule errors: %v", rep.Errors)
	}
}

// TestRandomSiteSchedulePausesMasters: random schedules with a
// multi-instance site pause its master (each pause and its notice
// bounded); without one they pause nothing.
func TestRandomSiteSchedulePausesMasters(t *testing.T) {
	paused := 0
	for seed := int64(1); seed <= 50; seed++ {
		for _, e := range RandomSiteSchedule(rand.New(rand.NewSource(seed)), 3, []int{1, 3}, 5*time.Minute) {
			if e.Kind != KindPauseMaster {
				continue
			}
			paused++
			if e.Node != 1 || e.D < 5*time.Second || e.D > 2*time.Minute || e.Notice < 0 || e.Notice > 3*time.Second {
				t.Fatalf("seed %d: %s", seed, e)
			}
		}
		for _, e := range RandomSchedule(rand.New(rand.NewSource(seed)), 3, 5*time.Minute) {
			if e.Kind == KindPauseMaster {
				t.Fatalf("seed %d: %s without a multi-instance site", seed, e)
			}
		}
	}
	if paused == 0 {
		t.Fatal("50 seeds with a site paused no master")
	}
}
