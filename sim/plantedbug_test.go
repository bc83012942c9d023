//go:build simbug

package sim

import (
	"fmt"
	"testing"
	"time"
)

// TestPlantedBugIsCaught runs with the planted bug (go test -tags simbug:
// a forward batch whose answer never came is taken as accepted by the
// peer, httpapi/plantedbug_on.go): random seeds of three nodes must
// catch it (lost messages) within plantedBugSeeds, and the replay of the
// first failing seed must reach the same verdict.
func TestPlantedBugIsCaught(t *testing.T) {
	const plantedBugSeeds = 10
	for s := int64(1); s <= plantedBugSeeds; s++ {
		o := RandomOptions(s, 3, 2*time.Minute)
		o.Dir = t.TempDir()
		rep, err, ok := RunIn(t, fmt.Sprintf("seed=%d", s), s, o)
		if !ok || err != nil {
			t.Fatalf("seed %d: the run was not made: %v", s, err)
		}
		if rep.OK() {
			continue
		}
		if rep.Result.Lost == 0 {
			t.Fatalf("seed %d failed without losing a message:\n%s", s, rep)
		}
		t.Logf("caught by seed %d (%s); replay: %s", s, rep.Line(), rep.Replay())
		o.Dir = t.TempDir()
		again, err, ok := RunIn(t, fmt.Sprintf("replay seed=%d", s), s, o)
		if !ok || err != nil {
			t.Fatalf("replay of seed %d was not made: %v", s, err)
		}
		if again.OK() {
			t.Fatalf("the replay of seed %d passed: the verdict was not reproduced:\n%s", s, again)
		}
		t.Logf("replay: %s (history %s, first run %s)", again.Line(), again.Digest, rep.Digest)
		return
	}
	t.Fatalf("the planted bug survived %d seeds", plantedBugSeeds)
}
