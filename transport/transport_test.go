package transport

import (
	"strings"
	"testing"
)

// TestKindNames: every kind has a name of its own for logs and metrics.
func TestKindNames(t *testing.T) {
	seen := map[string]Kind{}
	for k := None; k <= ServerError; k++ {
		name := k.String()
		if name == "" || strings.HasPrefix(name, "kind(") {
			t.Errorf("kind %d has no name", int(k))
		}
		if other, dup := seen[name]; dup {
			t.Errorf("kinds %d and %d are both %q", int(other), int(k), name)
		}
		seen[name] = k
	}
	if got := Kind(99).String(); got != "kind(99)" {
		t.Errorf("an unknown kind is %q", got)
	}
}
