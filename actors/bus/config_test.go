package bus

import (
	"strings"
	"testing"
)

// TestURLSecretsAreNeverShown: a --nats-url may carry a user and password
// or a token (a user without a password) per server. The bus's state (what
// GET /readyz shows without a token) and ValidURL's errors (printed at
// start-up) show each server with its secret replaced by xxxxx.
func TestURLSecretsAreNeverShown(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"127.0.0.1:4222", "127.0.0.1:4222"},
		{"nats://alice:s3cret@n:4222", "nats://alice:xxxxx@n:4222"},
		{"alice:s3cret@n:4222", "alice:xxxxx@n:4222"},
		{"nats://s3cret@n:4222", "nats://xxxxx@n:4222"},
		{"nats://a:s3cret@n1:4222, tls://s3cret@n2:4222,nats://n3", "nats://a:xxxxx@n1:4222,tls://xxxxx@n2:4222,nats://n3"},
		{"nats://a:s3cret@n:4222/%zz", "xxxxx@n:4222/%zz"}, // not a URL: without what could be its user info
	} {
		if got := RedactURL(c.in); got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
		b := &Bus{cfg: Config{URL: c.in}}
		if state, why := b.State(); state != "down" || why != "not connected to "+c.want {
			t.Errorf("State of a bus at %q not connected: %s %q", c.in, state, why)
		}
	}
	for _, bad := range []string{"http://alice:s3cret@n:4222", "nats://alice:s3cret@n:99999", "nats://alice:s3cret@:4222",
		"nats://s3cret@n:4222/path", "nats://n1,nats://alice:s3cret@n2:4222/%zz"} {
		err := ValidURL(bad)
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("ValidURL(%q) = %v, want an error naming the server with its secret as xxxxx", bad, err)
		}
	}
}
