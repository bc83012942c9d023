package httpapi

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/certs"
)

// A remembered verdict holds for its pool and until its chain's end only:
// a reloaded pool that does not trust the certificate refuses it at once,
// and so does the clock once the certificate has expired.
func TestClientCertVerdictsFollowThePoolAndTheClock(t *testing.T) {
	now := time.Now()
	trusted, other := t.TempDir(), t.TempDir()
	for _, dir := range []string{trusted, other} {
		if err := certs.InitCA(dir, []string{"n1"}, now); err != nil {
			t.Fatal(err)
		}
	}
	pool := func(dir string) *x509.CertPool {
		caFile, _ := certs.CAFiles(dir)
		p, err := certs.LoadPool(caFile)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	certFile, _ := certs.NodeFiles(trusted, "n1")
	raw, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var c clientCerts
	inForce := pool(trusted)
	for i := range 2 {
		if err := c.verify(inForce, leaf, nil, now); err != nil {
			t.Fatalf("verify %d under the pool of its CA: %v", i+1, err)
		}
	}
	if err := c.verify(inForce, leaf, nil, leaf.NotAfter.Add(time.Second)); err == nil {
		t.Errorf("verified a second after the certificate's end (%v)", leaf.NotAfter)
	}
	if err := c.verify(pool(other), leaf, nil, now); err == nil {
		t.Error("verified under a reloaded pool without its CA")
	}
	if err := c.verify(inForce, leaf, nil, now); err != nil {
		t.Errorf("under the pool of its CA again: %v", err)
	}
}

// TestExpiredClientCertVerdictsAreForgotten: a verdict whose certificate
// has expired is dropped when the next certificate is verified. They were
// kept until the CA bundle changed, one per certificate ever seen: with
// short-lived peer certificates (renewed daily, say) and a CA bundle that
// never changes, the map grew for the node's life.
func TestExpiredClientCertVerdictsAreForgotten(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	leaf := func(node string, at time.Time) *x509.Certificate {
		t.Helper()
		if err := certs.InitCA(dir, []string{node}, at); err != nil {
			t.Fatal(err)
		}
		certFile, _ := certs.NodeFiles(dir, node)
		raw, err := os.ReadFile(certFile)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(raw)
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old, renewed := leaf("n1", now), leaf("n1-renewed", now.Add(24*time.Hour))
	caFile, _ := certs.CAFiles(dir)
	pool, err := certs.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	var c clientCerts
	if err := c.verify(pool, old, nil, now); err != nil {
		t.Fatal(err)
	}
	later := old.NotAfter.Add(time.Second)
	if err := c.verify(pool, renewed, nil, later); err != nil {
		t.Fatalf("the renewed certificate at %v: %v", later, err)
	}
	if len(c.until) != 1 {
		t.Errorf("%d verdicts remembered after the first certificate expired, want 1 (the renewed one's)", len(c.until))
	}
}
