package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
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
