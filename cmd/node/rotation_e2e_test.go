package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/certs/certstest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
)

// TestFederationE2ECertificateRotation: under a running federation of
// three real binaries with mutual TLS, node a gets a new certificate (new
// files in place, then SIGHUP) while messages flow to and from it. Its
// peers keep forwarding without a failed check (they see a healthy the
// whole time), every message is delivered once, and a serves (and
// presents to its peers) the new certificate. A broken key written
// afterwards is refused: a logs it and keeps serving the new certificate.
func TestFederationE2ECertificateRotation(t *testing.T) {
	c := startFedCluster(t)
	a := c.nodes["a"]
	certFile, keyFile := flagValue(a.Args, "--tls-cert"), flagValue(a.Args, "--tls-key")
	caFile := flagValue(a.Args, "--tls-ca")
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	addr := strings.TrimPrefix(a.base(), "https://")
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "a"})
		if err != nil {
			t.Fatalf("handshake with a: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}

	c.send("before", 10, c.allPairs()...)
	c.waitDelivered(30 * time.Second)
	before := served()

	// b and c watch a the whole time: any check that fails shows.
	stop := make(chan struct{})
	var watching sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for _, viewer := range []string{"b", "c"} {
		watching.Add(1)
		go func() {
			defer watching.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				peers, err := c.peers(viewer)
				if err != nil {
					continue // the viewer's own API: not what is checked here
				}
				for _, p := range peers {
					if p.Node == "a" && (p.State != messages.PeerHealthy || p.ConsecutiveFailures != 0) {
						mu.Lock()
						bad = append(bad, viewer+" saw a "+string(p.State)+": "+p.LastError)
						mu.Unlock()
					}
				}
			}
		}()
	}
	// Traffic to and from a throughout.
	traffic := make(chan struct{})
	go func() {
		defer close(traffic)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c.send("during", 3, pair{"a", "b"}, pair{"b", "a"}, pair{"c", "a"}, pair{"a", "c"})
		}
	}()

	// The rotation: a new certificate from the same CA, renamed into
	// place, then SIGHUP.
	certstest.Reissue(t, filepath.Dir(caFile), certFile, keyFile, "a")
	a.Signal(syscall.SIGHUP)
	var after string
	polltest.Eventually(t, 20*time.Second, func() error {
		if after = served(); after == before {
			return fmt.Errorf("a still serves serial %s", before)
		}
		return nil
	})
	// Traffic goes on a while over new connections (with the new
	// certificate as the peers' client certificate too).
	c.send("after", 10, c.allPairs()...)
	close(stop)
	<-traffic
	watching.Wait()
	mu.Lock()
	if len(bad) > 0 {
		t.Errorf("a's peers saw it fail during the rotation: %v", bad[:min(len(bad), 5)])
	}
	mu.Unlock()

	// A broken key: refused, logged, the new certificate still served.
	good, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte("-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.Signal(syscall.SIGHUP)
	polltest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(a.Logs(), "reload: the TLS certificate, key and CA stay as they were") {
			return errors.New("a did not log the refused key")
		}
		return nil
	})
	if got := served(); got != after {
		t.Errorf("after a broken key a serves %s, want %s still", got, after)
	}
	if err := os.WriteFile(keyFile, good, 0o600); err != nil {
		t.Fatal(err)
	}
	c.send("end", 5, c.allPairs()...)
	c.waitDelivered(60 * time.Second)

	// a's log and audit trail record the reload.
	var trail struct{ Entries []messages.AuditEntry }
	if status, err := a.Call("GET", "/api/audit?action=tls.reload", nil, &trail); err != nil || status != 200 {
		t.Fatalf("GET /api/audit: %d %v", status, err)
	}
	if len(trail.Entries) == 0 || !strings.Contains(trail.Entries[0].Detail, "serial "+after) {
		t.Errorf("a's audit trail of reloads: %+v, want the new serial %s", trail.Entries, after)
	}
	c.finish()
}

// flagValue is the value following flag in args.
func flagValue(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}
