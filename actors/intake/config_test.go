package intake

import (
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// TestConfigDefaults: the settings left zero or negative get their
// defaults; those set are kept.
func TestConfigDefaults(t *testing.T) {
	cases := []struct {
		name     string
		in, want Config
	}{
		{"zero", Config{}, Config{MaxBatch: DefaultMaxBatch, StoreTimeout: persistence.CallTimeout, CommitDepth: 1}},
		{"negative", Config{MaxBatch: -1, StoreTimeout: -time.Second, CommitDepth: -2},
			Config{MaxBatch: DefaultMaxBatch, StoreTimeout: persistence.CallTimeout, CommitDepth: 1}},
		{"set", Config{MaxBatch: 7, StoreTimeout: time.Second, CommitDepth: 3}, Config{MaxBatch: 7, StoreTimeout: time.Second, CommitDepth: 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.in.withDefaults()
			if got.MaxBatch != c.want.MaxBatch || got.StoreTimeout != c.want.StoreTimeout || got.CommitDepth != c.want.CommitDepth {
				t.Errorf("MaxBatch %d, StoreTimeout %v, CommitDepth %d; want %d, %v, %d",
					got.MaxBatch, got.StoreTimeout, got.CommitDepth, c.want.MaxBatch, c.want.StoreTimeout, c.want.CommitDepth)
			}
		})
	}
}
