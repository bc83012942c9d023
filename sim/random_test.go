package sim

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// envInt reads a positive integer from the environment (def when unset).
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestRandomSeeds runs random fault schedules: one seed of three nodes
// and 30 s of virtual time by default (under -race a run costs tens
// of seconds);
// SIM_SEEDS=200 (make sim) runs more, SIM_SEED_FIRST moves the
// range, SIM_NODES and SIM_DURATION shape each run.
func TestRandomSeeds(t *testing.T) {
	seeds := envInt(t, "SIM_SEEDS", 1)
	first := envInt(t, "SIM_SEED_FIRST", 1)
	nodes := envInt(t, "SIM_NODES", 3)
	d := 30 * time.Second
	if v := os.Getenv("SIM_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("SIM_DURATION=%q: %v", v, err)
		}
	}
	for s := first; s < first+seeds; s++ {
		seed := int64(s)
		t.Run("seed="+strconv.Itoa(s), func(t *testing.T) {
			run(t, seed, RandomOptions(seed, nodes, d))
		})
	}
}
