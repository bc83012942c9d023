package forward

import (
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/ring"
)

func TestConfigLease(t *testing.T) {
	for _, tc := range []struct{ timeout, want time.Duration }{
		{time.Second, 12 * time.Second},
		{30 * time.Second, 70 * time.Second},
	} {
		if got := (Config{Timeout: tc.timeout}).lease(); got != tc.want {
			t.Errorf("timeout %v: lease %v, want %v", tc.timeout, got, tc.want)
		}
	}
}

func TestConfigIdlePoll(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fence ring.Fence
		want  time.Duration
	}{
		{"no fence", nil, 0},
		{"own store", ring.NewShares(0, nil), 0},
		{"shared store", ring.NewShares(2*time.Second, nil), 2 * time.Second},
	} {
		if got := (Config{Fence: tc.fence}).idlePoll(); got != tc.want {
			t.Errorf("%s: idle poll %v, want %v", tc.name, got, tc.want)
		}
	}
}
