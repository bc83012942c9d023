package certs_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/httpapi/certs/certstest"
)

// servedSerial dials addr and returns the serial of the certificate served.
func servedSerial(t *testing.T, addr string, pool *x509.CertPool) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestReloaderRotates(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	if err := certs.InitCA(dir, []string{"a"}, now); err != nil {
		t.Fatal(err)
	}
	cert, key := certs.NodeFiles(dir, "a")
	caFile, _ := certs.CAFiles(dir)
	r, err := certs.NewReloader(cert, key, caFile)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(); changed || err != nil {
		t.Fatalf("Reload of unchanged files: %v, %v", changed, err)
	}
	pool := r.Pool()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	first := servedSerial(t, ln.Addr().String(), pool)
	if first != r.Certificate().Leaf.SerialNumber.String() {
		t.Fatalf("served serial %s, loaded %s", first, r.Certificate().Leaf.SerialNumber)
	}
	// A connection made before the rotation goes on working after it.
	open, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	certstest.Reissue(t, dir, cert, key, "a")
	if changed, err := r.Reload(); !changed || err != nil {
		t.Fatalf("Reload after a new certificate: %v, %v", changed, err)
	}
	second := servedSerial(t, ln.Addr().String(), pool)
	if second == first || second != r.Certificate().Leaf.SerialNumber.String() {
		t.Errorf("after the reload the listener serves %s (before %s, loaded %s)", second, first, r.Certificate().Leaf.SerialNumber)
	}
	if _, err := open.Write([]byte{7}); err != nil {
		t.Fatalf("the connection made before the rotation broke: %v", err)
	}
	b := make([]byte, 1)
	if _, err := open.Read(b); err != nil || b[0] != 7 {
		t.Fatalf("the connection made before the rotation: %v %v", b, err)
	}
	certEnd, caEnd := r.Expiry()
	if certEnd.IsZero() || caEnd.IsZero() || !certEnd.Equal(r.Certificate().Leaf.NotAfter) {
		t.Errorf("Expiry = %v, %v", certEnd, caEnd)
	}

	// A bad key (a half-written rotation) is refused; the old stays served.
	if err := os.WriteFile(key, []byte("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(); changed || err == nil {
		t.Fatalf("Reload of a broken key: %v, %v; want an error", changed, err)
	}
	if got := servedSerial(t, ln.Addr().String(), pool); got != second {
		t.Errorf("after a failed reload the listener serves %s, want %s still", got, second)
	}
	// A CA file that goes missing is refused too.
	if err := os.Remove(caFile); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reload(); err == nil {
		t.Error("Reload without the CA file succeeded")
	}
}

// copyPair copies a certificate and key over the reloader's files.
func copyPair(t *testing.T, fromCert, fromKey, toCert, toKey string) {
	t.Helper()
	for _, p := range [][2]string{{fromKey, toKey}, {fromCert, toCert}} {
		data, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// writeServerOnly writes a certificate for node "a" signed by caDir's CA
// that allows server authentication only (a node presents its certificate
// to its peers as a client too).
func writeServerOnly(t *testing.T, caDir, certFile, keyFile string, now time.Time) {
	t.Helper()
	caCert, caKey := certs.CAFiles(caDir)
	ca, err := tls.LoadX509KeyPair(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "a"}, DNSNames: []string{"a"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, key.Public(), ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReloadRefusesACertificatePeersWouldRefuse: a reload does not replace
// the certificate in force by one outside its validity period (at the
// reloader's clock), or, with a CA file, one that CA did not issue for
// both server and client use or one that does not name the node (peers
// check the name); the old one stays and the error says why.
func TestReloadRefusesACertificatePeersWouldRefuse(t *testing.T) {
	now := time.Now()
	// reissue writes a new certificate of the CA; anotherCAs one of a CA
	// of its own.
	reissue := func(t *testing.T, dir, cert, key string) { certstest.Reissue(t, dir, cert, key, "a") }
	// anotherNodes is the CA's certificate of node "b".
	anotherNodes := func(t *testing.T, dir, cert, key string) {
		if err := certs.InitCA(dir, []string{"b"}, now); err != nil {
			t.Fatal(err)
		}
		bc, bk := certs.NodeFiles(dir, "b")
		copyPair(t, bc, bk, cert, key)
	}
	anotherCAs := func(t *testing.T, dir, cert, key string) {
		other := t.TempDir()
		if err := certs.InitCA(other, []string{"a"}, now); err != nil {
			t.Fatal(err)
		}
		oc, ok := certs.NodeFiles(other, "a")
		copyPair(t, oc, ok, cert, key)
	}
	cases := []struct {
		name  string
		noCA  bool
		clock time.Time
		// put writes the new files (dir is the CA's).
		put  func(t *testing.T, dir, cert, key string)
		want string // error substring; "" for a reload that takes
	}{
		{"a new certificate of the CA", false, now, reissue, ""},
		{"expired", false, now.Add(3 * 365 * 24 * time.Hour), reissue, "expired at"},
		{"not valid yet", false, now.Add(-2 * time.Hour), reissue, "is not valid before"},
		{"another CA's", false, now, anotherCAs, "not trusted by the CA bundle"},
		{"server use only", false, now, func(t *testing.T, dir, cert, key string) {
			writeServerOnly(t, dir, cert, key, now)
		}, "not trusted by the CA bundle"},
		{"another CA's without a CA file", true, now, anotherCAs, ""},
		{"another node's", false, now, anotherNodes, `does not name node "a"`},
		{"another node's without a CA file", true, now, anotherNodes, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := certs.InitCA(dir, []string{"a"}, now); err != nil {
				t.Fatal(err)
			}
			cert, key := certs.NodeFiles(dir, "a")
			caFile, _ := certs.CAFiles(dir)
			if tc.noCA {
				caFile = ""
			}
			r, err := certs.NewReloader(cert, key, caFile, certs.WithClock(func() time.Time { return tc.clock }), certs.WithNode("a"))
			if err != nil {
				t.Fatal(err)
			}
			before := r.Certificate().Leaf.SerialNumber.String()
			tc.put(t, dir, cert, key)
			changed, err := r.Reload()
			after := r.Certificate().Leaf.SerialNumber.String()
			if tc.want == "" {
				if !changed || err != nil || after == before {
					t.Fatalf("Reload = %v, %v (serial %s, before %s); want the new certificate in force", changed, err, after, before)
				}
				return
			}
			if changed || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reload = %v, %v; want an error with %q", changed, err, tc.want)
			}
			if after != before {
				t.Errorf("serial in force %s, want the old %s", after, before)
			}
		})
	}
}

// TestNewReloaderRefusesAnotherNodesCertificate: with a CA file, a node
// does not start with a certificate that does not name it, as peers would
// refuse every call of it; without one nothing checks names.
func TestNewReloaderRefusesAnotherNodesCertificate(t *testing.T) {
	dir := t.TempDir()
	if err := certs.InitCA(dir, []string{"a", "b"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	cert, key := certs.NodeFiles(dir, "b")
	caFile, _ := certs.CAFiles(dir)
	_, err := certs.NewReloader(cert, key, caFile, certs.WithNode("a"))
	if err == nil || !strings.Contains(err.Error(), `does not name node "a"`) {
		t.Fatalf("NewReloader with b's certificate for node a: %v; want a refusal", err)
	}
	if _, err := certs.NewReloader(cert, key, caFile, certs.WithNode("b")); err != nil {
		t.Fatalf("NewReloader with b's certificate for node b: %v", err)
	}
	if _, err := certs.NewReloader(cert, key, "", certs.WithNode("a")); err != nil {
		t.Fatalf("NewReloader without a CA file: %v", err)
	}
}

// TestConcurrentReloadsTakeAChangeOnce: the node reloads from two places
// at once (SIGHUP and the watch, which sees the same new files within a
// second): one of them takes the change, the other finds nothing new.
// Both took it, and the node logged the reload and wrote its tls.reload
// audit entry twice.
func TestConcurrentReloadsTakeAChangeOnce(t *testing.T) {
	dir := t.TempDir()
	if err := certs.InitCA(dir, []string{"a"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	cert, key := certs.NodeFiles(dir, "a")
	caFile, _ := certs.CAFiles(dir)
	r, err := certs.NewReloader(cert, key, caFile, certs.WithNode("a"))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		certstest.Reissue(t, dir, cert, key, "a")
		const reloaders = 4
		start := make(chan struct{})
		changed := make(chan bool, reloaders)
		for range reloaders {
			go func() {
				<-start
				c, err := r.Reload()
				if err != nil {
					t.Error(err)
				}
				changed <- c
			}()
		}
		close(start)
		took := 0
		for range reloaders {
			if <-changed {
				took++
			}
		}
		if took != 1 {
			t.Fatalf("round %d: %d of %d concurrent reloads took the same new files, want 1", round, took, reloaders)
		}
	}
}
