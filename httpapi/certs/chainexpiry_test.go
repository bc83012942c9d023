package certs_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/certs"
)

// TestExpiryCountsTheServedChain: a --tls-cert file that holds the leaf
// and its intermediate serves both; once the intermediate ends, every
// client and peer refuses the node, whatever the leaf's own NotAfter.
// Expiry (switchboard_tls_cert_expiry_timestamp_seconds{cert="server"},
// which SwitchboardCertificateExpiring watches) must be the earliest end
// of the chain served, not the leaf's alone.
func TestExpiryCountsTheServedChain(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	mk := func(tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c, key, der
	}
	root, rootKey, rootDER := mk(&x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	interEnd := now.Add(5 * 24 * time.Hour) // the intermediate ends in 5 days
	inter, interKey, interDER := mk(&x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "intermediate"},
		NotBefore: now.Add(-time.Hour), NotAfter: interEnd, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, root, rootKey)
	_, leafKey, leafDER := mk(&x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "a"}, DNSNames: []string{"a"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}, inter, interKey)
	certFile, keyFile, caFile := filepath.Join(dir, "a.pem"), filepath.Join(dir, "a.key"), filepath.Join(dir, "ca.pem")
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: interDER})...)
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	for f, data := range map[string][]byte{certFile: chain, keyFile: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		caFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rootDER})} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := certs.NewReloader(certFile, keyFile, caFile, certs.WithNode("a"))
	if err != nil {
		t.Fatal(err)
	}
	served, _ := r.Expiry()
	if served.After(inter.NotAfter) {
		t.Fatalf("Expiry() of the served certificate = %s, but the intermediate it is served with ends %s: "+
			"the node is refused from then on and no alert fires before", served.UTC().Format(time.RFC3339), inter.NotAfter.UTC().Format(time.RFC3339))
	}
}
