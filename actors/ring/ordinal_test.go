package ring

import "testing"

func TestOrdinal(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int
		ok   bool
	}{
		{"ring-0.ring-headless.default.svc.cluster.local", 0, true},
		{"switchboard-12", 12, true},
		{"a-b-3", 3, true},
		{"ring-007", 7, true},
		{"name-3.svc.cluster.local", 3, true},
		{"ring-x", 0, false},
		{"ring", 0, false},
		{"ring-", 0, false},
		{"-1", 0, false},
		{"ring--1", 0, false},
		{"ring-+1", 0, false},
		{"ring-1x", 0, false},
		{"ring.a-1", 0, false},
		{"", 0, false},
		{"ring-99999999999999999999999", 0, false},
	} {
		got, err := Ordinal(tc.name)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Ordinal(%q) = %d, %v; want %d, ok=%v", tc.name, got, err, tc.want, tc.ok)
		}
	}
}
