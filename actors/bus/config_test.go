package bus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
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
	// The client's errors, should one quote a server's URL.
	if got := redactSecrets(`parse "nats://a:s3cret@n1:4222": x, tok`, "nats://a:s3cret@n1:4222,tls://tok@n2"); got != `parse "nats://a:xxxxx@n1:4222": x, xxxxx` {
		t.Errorf("redactSecrets = %q", got)
	}
	for _, bad := range []string{"http://alice:s3cret@n:4222", "nats://alice:s3cret@n:99999", "nats://alice:s3cret@:4222",
		"nats://s3cret@n:4222/path", "nats://n1,nats://alice:s3cret@n2:4222/%zz"} {
		err := ValidURL(bad)
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("ValidURL(%q) = %v, want an error naming the server with its secret as xxxxx", bad, err)
		}
	}
}

// TestCredsMustBeCredentials: --nats-creds naming a file that holds no
// NATS user credentials (another file, a bare seed, a directory) was
// taken at start: the bus then stayed down for good, saying only that it
// was not connected. It is refused, naming the file; a credentials file
// as nsc writes it is taken.
func TestCredsMustBeCredentials(t *testing.T) {
	dir := t.TempDir()
	account, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	token, err := jwt.NewUserClaims(pub).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("user.creds", creds)
	// credsError is what Validate says of a config with the creds file at
	// path (nil: nothing of the creds).
	credsError := func(path string) error {
		c := DefaultConfig()
		c.URL, c.Stream, c.Name, c.Creds = "nats://n:4222", "SWITCHBOARD_test", "t", path
		err := c.Validate()
		if err != nil && strings.Contains(err.Error(), "Creds") {
			return err
		}
		return nil
	}
	for name, path := range map[string]string{
		"another file":   write("junk.creds", []byte("not a credentials file\n")),
		"a bare seed":    write("seed.nk", append(seed, '\n')),
		"a JWT, no seed": write("jwt.creds", []byte("-----BEGIN NATS USER JWT-----\n"+token+"\n------END NATS USER JWT------\n")),
		"a directory":    dir,
	} {
		if err := credsError(path); err == nil {
			t.Errorf("%s (%s): taken for credentials", name, path)
		}
	}
	if err := credsError(good); err != nil {
		t.Errorf("a credentials file as nsc writes it: %v", err)
	}
}
