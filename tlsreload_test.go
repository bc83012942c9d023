package switchboard_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/httpapi/certs/certstest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// TestStartRefusesAnotherNodesCertificate: with --tls-ca a node does not
// start with a certificate that does not name it (--name): its peers
// check that name and would refuse every call of it and to it.
func TestStartRefusesAnotherNodesCertificate(t *testing.T) {
	dir := t.TempDir()
	if err := certs.InitCA(dir, []string{"a", "b"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Name = "a"
	cfg.TLSCert, cfg.TLSKey = certs.NodeFiles(dir, "b")
	cfg.TLSCA, _ = certs.CAFiles(dir)
	err := startRefused(t, cfg, "a started with b's certificate")
	if !strings.Contains(err.Error(), `does not name node "a"`) {
		t.Fatalf("Start: %v; want the certificate refused for not naming a", err)
	}
}

// TestAReloadedCABundleCutsOffAPeerOnItsOpenConnections: b's operator
// cuts a off: b's CA bundle (and b's certificate) are replaced by a new
// CA's, which did not sign a's certificate, and b reloads. From then on
// b takes no federation call of a, also over the connections a opened
// before (the health checks keep them alive for ever), and b calls a no
// more over its own: a message a accepts for b's frontend afterwards never
// reaches b, and each sees the other unhealthy.
func TestAReloadedCABundleCutsOffAPeerOnItsOpenConnections(t *testing.T) {
	dir, newDir, bDir := t.TempDir(), t.TempDir(), t.TempDir()
	if err := certs.InitCA(dir, []string{"a", "b"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := certs.InitCA(newDir, []string{"b"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// b's files are copies of its own, replaced below.
	put := func(from string) {
		t.Helper()
		fromCert, fromKey := certs.NodeFiles(from, "b")
		fromCA, _ := certs.CAFiles(from)
		toCert, toKey := certs.NodeFiles(bDir, "b")
		toCA, _ := certs.CAFiles(bDir)
		certstest.Replace(t, [2]string{fromKey, toKey}, [2]string{fromCert, toCert}, [2]string{fromCA, toCA})
	}
	put(dir)
	fn := newFedNet()
	a := mtlsNode(t, fn, dir, "a", nil, "b")
	b := mtlsNode(t, fn, bDir, "b", nil, "a")
	b.pullFrontend("fe-b", "2")
	a.waitPeer("b", messages.PeerHealthy)
	b.waitPeer("a", messages.PeerHealthy)
	a.routeWhenKnown("2", "fe-b")
	a.waitState(a.submit("before-cut", "2555"), messages.StateForwarded)

	put(newDir)
	if err := b.node.Reload(); err != nil {
		t.Fatalf("b's reload: %v", err)
	}
	newCA, _ := certs.CAFiles(newDir)
	b.client.CloseIdleConnections()
	b.client = trustingClient(t, newCA) // b serves the new CA's certificate now
	cut := a.api().Submit("after-cut", "2555").ID
	unhealthy := func(h *harness, peer string) {
		t.Helper()
		polltest.Eventually(t, 30*time.Second, func() error {
			var peers []messages.PeerInfo
			h.must(200, "GET", "/api/peers", nil, &peers)
			for _, p := range peers {
				if p.Node == peer && p.State == messages.PeerHealthy {
					return fmt.Errorf("%s still sees %s healthy (last success %s) after b's CA bundle no longer has a's CA", h.cfg.Name, peer, p.LastSuccess.Format(time.RFC3339Nano))
				}
			}
			return nil
		})
	}
	unhealthy(a, "b")
	unhealthy(b, "a")
	if m := a.message(cut); m.State == messages.StateForwarded {
		t.Errorf("a's message submitted after the cut is %s: %s", m.State, m.LastDetail)
	}
	if status, body := b.do("GET", "/api/messages/"+cut, nil); status != 404 {
		t.Errorf("b has a's message submitted after the cut: %d %s", status, body)
	}
}

// TestStartWarnsOfACertificateClientsWouldRefuse: a node takes at start
// a certificate that clients and peers refuse (expired, not valid yet,
// or, with --tls-ca, not of that CA): there is nothing else to serve, and
// a new one put in place mends it without a restart. It said nothing of
// it: the operator learnt it from the clients. It warns, naming the flag
// and why; a good certificate makes no such line.
func TestStartWarnsOfACertificateClientsWouldRefuse(t *testing.T) {
	const msg = "the TLS certificate served is refused by clients and peers until a new one is put in place"
	now := time.Now()
	cases := []struct {
		name string
		made time.Time // when the CA and the certificate were made
		// otherCA, when set, makes the certificate another CA's.
		otherCA bool
		want    string // in the warning's err; "" for no warning
	}{
		{"valid", now, false, ""},
		{"expired", now.Add(-3 * 365 * 24 * time.Hour), false, "expired at"},
		{"not valid yet", now.Add(3 * time.Hour), false, "is not valid before"},
		{"another CA's", now, true, "not trusted by the CA bundle"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, certDir := t.TempDir(), t.TempDir()
			if err := certs.InitCA(dir, []string{"a"}, tc.made); err != nil {
				t.Fatal(err)
			}
			if !tc.otherCA {
				certDir = dir
			} else if err := certs.InitCA(certDir, []string{"a"}, tc.made); err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(t)
			cfg.Name = "a"
			cfg.TLSCert, cfg.TLSKey = certs.NodeFiles(certDir, "a")
			cfg.TLSCA, _ = certs.CAFiles(dir)
			log, logs := logtest.New()
			cfg.Logger = log
			n := nodetest.Embedded(t, cfg)
			defer nodetest.StopEmbedded(t, n)
			recs := logs.Records(t, msg)
			if tc.want == "" {
				if len(recs) != 0 {
					t.Fatalf("a valid certificate warned: %v", recs)
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("%d lines %q at start, want 1", len(recs), msg)
			}
			if err, _ := recs[0]["err"].(string); !strings.HasPrefix(err, "TLSCert: ") || !strings.Contains(err, tc.want) {
				t.Errorf("warning's err %q, want TLSCert's and %q", err, tc.want)
			}
		})
	}
}
