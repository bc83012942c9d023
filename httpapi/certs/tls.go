package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
)

// ServerConfig is the TLS configuration of the gateway: it serves certFile
// and keyFile. When caFile is set, client certificates are verified against
// it (ClientCAs) but not demanded at the handshake
// (tls.VerifyClientCertIfGiven): only the federation paths require one, and
// the gateway checks that per request. Without caFile, client certificates
// are not requested.
func ServerConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	pair, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
	}
	if caFile != "" {
		pool, err := LoadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// ClientConfig is the TLS configuration of outbound calls (peers, webhooks):
// server certificates are verified against the system roots plus caFile (when
// set), and certFile/keyFile (when set) are presented as the client
// certificate to servers that ask for one from caFile's CA. insecureSkipVerify
// disables server verification (development only).
func ClientConfig(certFile, keyFile, caFile string, insecureSkipVerify bool) (*tls.Config, error) {
	roots, err := x509.SystemCertPool()
	if err != nil {
		// No system roots (some minimal containers): trust caFile only.
		roots = x509.NewCertPool()
	}
	if caFile != "" {
		if err := appendPEMFile(roots, caFile); err != nil {
			return nil, err
		}
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		RootCAs:            roots,
		InsecureSkipVerify: insecureSkipVerify,
	}
	if certFile != "" || keyFile != "" {
		pair, err := LoadKeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// Names reports whether cert names node: its CN or one of its DNS SANs,
// compared exactly. It is the one rule of federation names: the gateway
// holds a caller's client certificate to it, the peer client a peer's
// server certificate, and the Reloader the node's own certificate.
func Names(cert *x509.Certificate, node string) bool {
	return node != "" && (cert.Subject.CommonName == node || slices.Contains(cert.DNSNames, node))
}

// MustName is the refusal of a node's own certificate (from certFile) that
// does not name it: peers, which hold it to Names, would refuse it. Nil
// when it names node.
func MustName(certFile string, cert *x509.Certificate, node string) error {
	if Names(cert, node) {
		return nil
	}
	return fmt.Errorf("certs: %s does not name node %q (it has %s): peers would refuse it", certFile, node, NamesOf(cert))
}

// NamesOf lists the names a certificate offers, for error messages.
func NamesOf(cert *x509.Certificate) string {
	return fmt.Sprintf("CN %q and DNS names %q", cert.Subject.CommonName, cert.DNSNames)
}

// LoadPool reads a PEM bundle of CA certificates into a new pool.
func LoadPool(caFile string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if err := appendPEMFile(pool, caFile); err != nil {
		return nil, err
	}
	return pool, nil
}

// LoadKeyPair reads a PEM certificate (chain) and its private key; the
// returned certificate has Leaf set.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	if certFile == "" || keyFile == "" {
		return tls.Certificate{}, fmt.Errorf("certs: a certificate file and a key file are both needed (got %q and %q)", certFile, keyFile)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: %w", err)
	}
	pair, err := parseKeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: key pair %s, %s: %w", certFile, keyFile, err)
	}
	return pair, nil
}

func parseKeyPair(certPEM, keyPEM []byte) (tls.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return tls.Certificate{}, err
		}
	}
	return pair, nil
}

func appendPEMFile(pool *x509.CertPool, caFile string) error {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if !pool.AppendCertsFromPEM(data) {
		return fmt.Errorf("certs: %s: %w", caFile, errNoCerts)
	}
	return nil
}

var errNoCerts = errors.New("no PEM certificates found")
