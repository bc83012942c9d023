package bus_test

import (
	"crypto/tls"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/actors/bus/bustest"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/polltest"
)

// TestTLSServerOfEveryTLSScheme: the bus takes --tls-ca (and the node's
// certificate, for a server that demands a client's) for a TLS server
// whatever the case of its URL's scheme (the client takes TLS:// as
// tls://), and for a websocket one over TLS (wss://). They were applied
// for a lower-case tls:// alone: with TLS:// or wss:// the client checked
// the server against the system roots only, and a server with a
// certificate of the site's own CA was never reached (unknown authority).
func TestTLSServerOfEveryTLSScheme(t *testing.T) {
	srv, ca, cert, key := mutualTLSServer(t)
	tlsURL, wssURL := srv.TLSURL(), srv.WSSURL()
	for _, url := range []string{
		tlsURL,
		"TLS" + strings.TrimPrefix(tlsURL, "tls"),
		"Tls" + strings.TrimPrefix(tlsURL, "tls"),
		wssURL,
		"WSS" + strings.TrimPrefix(wssURL, "wss"),
	} {
		t.Run(url, func(t *testing.T) {
			openWith(t, url, func(c *bus.Config) { c.TLSCA, c.TLSCert, c.TLSKey = ca, cert, key })
		})
	}
}

// TestABusThatCannotConnectSaysWhy: a bus whose first connect failed (a
// TLS server that refuses the node's handshake, one that demands a client
// certificate the node did not give, nats:// to a TLS server, a port
// nothing listens on) said only "not connected to <url>" in /readyz,
// /api/status and its down warning, never why: the client retries in the
// background and nothing recorded its dial errors. Why is now the URL
// (its password redacted) and the client's last connect error.
func TestABusThatCannotConnectSaysWhy(t *testing.T) {
	srv, ca, cert, key := mutualTLSServer(t)
	closed := bustest.Start(t)
	closed.Stop()
	other := t.TempDir() // a CA the server's certificate is not of
	if err := certs.InitCA(other, []string{"x"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	otherCA, _ := certs.CAFiles(other)
	withSecret := func(u string) string { return strings.Replace(u, "://", "://sb:hunter2@", 1) }
	for _, c := range []struct {
		name, url string
		set       func(*bus.Config)
		want      string
	}{
		{"handshake refused", withSecret(srv.TLSURL()), func(c *bus.Config) { c.TLSCA, c.TLSCert, c.TLSKey = otherCA, cert, key }, "certificate"},
		// The client sees the server's refusal as its alert or as the
		// connection closed after the handshake, as the timing falls.
		{"no client certificate", withSecret(srv.TLSURL()), func(c *bus.Config) { c.TLSCA = ca }, "tls"},
		{"nats:// to a TLS server", withSecret("nats://" + strings.TrimPrefix(srv.TLSURL(), "tls://")), nil, "certificate"},
		{"closed port", withSecret(closed.URL()), nil, "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := &lines{n: map[string]int{}}
			cfg := bus.DefaultConfig()
			cfg.URL, cfg.Stream, cfg.Name = c.url, "SWITCHBOARD_test", "t"
			cfg.Logger = slog.New(log)
			if c.set != nil {
				c.set(&cfg)
			}
			b, err := bus.Open(cfg, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			prefix := "not connected to " + bus.RedactURL(c.url) + ": "
			var why string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, why = b.State(); strings.HasPrefix(why, prefix) && strings.Contains(why, c.want) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the bus says why %q after 10s, want %q and the connect error (%s)", why, prefix, c.want)
				}
			}
			t.Logf("why: %s", why)
			if strings.Contains(why, "hunter2") {
				t.Fatalf("why shows the URL's password: %s", why)
			}
			const down = "the delivery bus is down: submits are still accepted (the outbox holds the work) and delivery goes on from the store until it returns"
			polltest.Until(t, 10*time.Second, "the down warning", func() bool { return log.count(down) > 0 })
			if got := log.last(down)["why"]; !strings.HasPrefix(got, prefix) || !strings.Contains(got, c.want) {
				t.Fatalf("the down warning says why %q, want %q and the connect error (%s)", got, prefix, c.want)
			}
		})
	}
}

// mutualTLSServer starts a NATS server with a certificate of a new CA
// that demands a client's certificate of it too, and returns the CA's
// file and the node's certificate and key files, of that CA.
func mutualTLSServer(t *testing.T) (srv *bustest.Server, ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	if err := certs.InitCA(dir, []string{"nats", "sb"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ca, _ = certs.CAFiles(dir)
	srvCert, srvKey := certs.NodeFiles(dir, "nats")
	cert, key = certs.NodeFiles(dir, "sb")
	tc, err := certs.ServerConfig(srvCert, srvKey, ca)
	if err != nil {
		t.Fatal(err)
	}
	tc.ClientAuth = tls.RequireAndVerifyClientCert // the node's certificate must be given too
	return bustest.StartTLS(t, tc), ca, cert, key
}

// systemRootsChild names, in the environment of the child process
// TestTLSServerOfASystemRootWithTheFederationCA starts, the directory of
// the CA the child's system roots (SSL_CERT_FILE) hold.
const systemRootsChild = "SWITCHBOARD_TEST_SYSTEM_ROOTS_CA_DIR"

// TestTLSServerOfASystemRootWithTheFederationCA: with --tls-ca (the
// federation's CA) the bus trusts the system roots plus that CA, as
// docs/nats.md says: a NATS server with a certificate of a public CA (a
// hosted service) is reached from a node that federates with its own CA.
// The client trusted --tls-ca alone and refused such a server (unknown
// authority). Go reads the system roots once a process, so the check runs
// in a child process whose SSL_CERT_FILE is the server's CA.
func TestTLSServerOfASystemRootWithTheFederationCA(t *testing.T) {
	dir := os.Getenv(systemRootsChild)
	if dir == "" {
		dir = t.TempDir()
		if err := certs.InitCA(dir, []string{"nats"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		ca, _ := certs.CAFiles(dir)
		cmd := exec.Command(os.Args[0], "-test.run=^TestTLSServerOfASystemRootWithTheFederationCA$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), systemRootsChild+"="+dir, "SSL_CERT_FILE="+ca, "SSL_CERT_DIR="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the child with the server's CA as its system roots: %v\n%s", err, out)
		}
		return
	}
	srvCert, srvKey := certs.NodeFiles(dir, "nats")
	tc, err := certs.ServerConfig(srvCert, srvKey, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := bustest.StartTLS(t, tc)
	fed := t.TempDir()
	if err := certs.InitCA(fed, []string{"sb"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	fedCA, _ := certs.CAFiles(fed)
	openWith(t, srv.TLSURL(), func(c *bus.Config) { c.TLSCA = fedCA })
}
