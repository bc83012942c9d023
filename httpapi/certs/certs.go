package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/atomicfile"
)

// File names inside the directory given to InitCA and EnsureSelfSigned.
const (
	CACertName         = "ca.pem"
	CAKeyName          = "ca.key"
	SelfSignedCertName = "selfsigned.pem"
	SelfSignedKeyName  = "selfsigned.key"
)

const (
	// caValidity is 10 years: the CA of a demo or small private deployment
	// should outlive every node certificate it signs; replacing it means
	// reissuing every node.
	caValidity = 10 * 365 * 24 * time.Hour
	// nodeValidity is 825 days, the longest server certificate lifetime that
	// macOS and iOS accept, so the web UI opens in their browsers too.
	nodeValidity = 825 * 24 * time.Hour
	// selfSignedValidity is one year; a node regenerates an expired
	// self-signed certificate at its next start.
	selfSignedValidity = 365 * 24 * time.Hour
	// backdate moves NotBefore one hour into the past so that a peer whose
	// clock runs a little behind ours accepts a certificate made just now.
	backdate = time.Hour

	keyPerm  os.FileMode = 0o600
	certPerm os.FileMode = 0o644
	dirPerm  os.FileMode = 0o700
)

// CAFiles returns the paths of the CA certificate and key in dir.
func CAFiles(dir string) (certFile, keyFile string) {
	return filepath.Join(dir, CACertName), filepath.Join(dir, CAKeyName)
}

// NodeFiles returns the paths of node's certificate and key in dir, as
// written by InitCA.
func NodeFiles(dir, node string) (certFile, keyFile string) {
	return filepath.Join(dir, node+".pem"), filepath.Join(dir, node+".key")
}

// InitCA writes a CA and a certificate for each of nodes into dir (created
// 0700 if missing): ca.pem, ca.key, <node>.pem and <node>.key. Each node
// certificate has CN = node, DNS SANs node and localhost, IP SANs 127.0.0.1
// and ::1, and may be used for both server and client authentication.
//
// When dir already holds ca.pem and ca.key, that CA signs the new
// certificates, so nodes can be added later. InitCA refuses (and writes
// nothing) when a node's certificate or key already exists; remove both to
// reissue. When writing fails part way, the files this call created are
// removed again.
func InitCA(dir string, nodes []string, now time.Time) (err error) {
	if len(nodes) == 0 {
		return errors.New("certs: no node names given")
	}
	seen := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		if err := checkNodeName(n); err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("certs: node %q given twice", n)
		}
		seen[n] = true
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return fmt.Errorf("certs: %w", err)
	}

	caCertFile, caKeyFile := CAFiles(dir)
	haveCert, err := exists(caCertFile)
	if err != nil {
		return err
	}
	haveKey, err := exists(caKeyFile)
	if err != nil {
		return err
	}
	switch {
	case haveCert && !haveKey:
		return fmt.Errorf("certs: %s exists but %s does not: restore the key, or remove both to make a new CA", caCertFile, caKeyFile)
	case haveKey && !haveCert:
		return fmt.Errorf("certs: %s exists but %s does not: restore the certificate, or remove both to make a new CA", caKeyFile, caCertFile)
	}
	// Refuse before writing anything, so a refusal leaves dir as it was.
	for _, n := range nodes {
		certFile, keyFile := NodeFiles(dir, n)
		for _, f := range []string{certFile, keyFile} {
			found, err := exists(f)
			if err != nil {
				return err
			}
			if found {
				return fmt.Errorf("certs: %s already exists; remove %s and %s to reissue node %q", f, certFile, keyFile, n)
			}
		}
	}

	var created []string
	defer func() {
		if err != nil {
			for _, f := range created {
				_ = os.Remove(f)
			}
		}
	}()
	write := func(path string, data []byte, perm os.FileMode) error {
		if err := writeNew(path, data, perm); err != nil {
			return err
		}
		created = append(created, path)
		return nil
	}

	var ca *x509.Certificate
	var caKey crypto.Signer
	if haveCert {
		if ca, caKey, err = loadCA(caCertFile, caKeyFile, now); err != nil {
			return err
		}
	} else {
		var keyPEM, certPEM []byte
		if ca, caKey, certPEM, keyPEM, err = newCA(now); err != nil {
			return err
		}
		if err = write(caKeyFile, keyPEM, keyPerm); err != nil {
			return err
		}
		if err = write(caCertFile, certPEM, certPerm); err != nil {
			return err
		}
	}

	for _, n := range nodes {
		certPEM, keyPEM, err := newLeaf(n, ca, caKey, now)
		if err != nil {
			return err
		}
		certFile, keyFile := NodeFiles(dir, n)
		if err = write(keyFile, keyPEM, keyPerm); err != nil {
			return err
		}
		if err = write(certFile, certPEM, certPerm); err != nil {
			return err
		}
	}
	return nil
}

// EnsureSelfSigned returns a self-signed certificate and key for name in dir
// (selfsigned.pem, selfsigned.key), for a node started without --tls-cert
// and --tls-key. It reuses the files when they hold a matching pair that is
// valid at now and covers name and localhost; otherwise (missing, expired,
// made for another name, unreadable PEM) it writes new ones, replacing the
// old files atomically. dir is created 0700 if missing.
func EnsureSelfSigned(dir, name string, now time.Time) (certFile, keyFile string, err error) {
	if name == "" {
		return "", "", errors.New("certs: self-signed certificate needs a name")
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return "", "", fmt.Errorf("certs: %w", err)
	}
	certFile = filepath.Join(dir, SelfSignedCertName)
	keyFile = filepath.Join(dir, SelfSignedKeyName)
	ok, err := reusableSelfSigned(certFile, keyFile, name, now)
	if err != nil {
		return "", "", err
	}
	if ok {
		return certFile, keyFile, nil
	}

	key, keyPEM, err := newKey()
	if err != nil {
		return "", "", err
	}
	serial, err := newSerial()
	if err != nil {
		return "", "", err
	}
	tmpl := leafTemplate(name, serial, now, now.Add(selfSignedValidity))
	tmpl.Subject.Organization = []string{"Switchboard (self-signed)"}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return "", "", fmt.Errorf("certs: self-signed certificate for %q: %w", name, err)
	}
	// Key first: a crash between the two renames leaves a mismatched pair,
	// which the next call detects and replaces.
	if err := writeReplace(keyFile, keyPEM, keyPerm); err != nil {
		return "", "", err
	}
	if err := writeReplace(certFile, encodeCert(der), certPerm); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// reusableSelfSigned reports whether certFile and keyFile hold a usable
// self-signed pair for name at now. Missing or unparsable files are not an
// error (they are regenerated); other read errors are.
func reusableSelfSigned(certFile, keyFile, name string, now time.Time) (bool, error) {
	certPEM, err := os.ReadFile(certFile)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("certs: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("certs: %w", err)
	}
	pair, err := parseKeyPair(certPEM, keyPEM)
	if err != nil {
		return false, nil
	}
	leaf := pair.Leaf
	if now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter) {
		return false, nil
	}
	if leaf.VerifyHostname(name) != nil || leaf.VerifyHostname("localhost") != nil {
		return false, nil
	}
	return true, nil
}

// checkNodeName rejects names that cannot be file names in dir or that would
// collide with the CA's or the self-signed certificate's files. Whether a
// name is a valid node name is the caller's business.
func checkNodeName(n string) error {
	switch {
	case n == "" || n == "." || n == "..":
		return fmt.Errorf("certs: invalid node name %q", n)
	case strings.ContainsAny(n, `/\`+"\x00") || strings.ContainsRune(n, os.PathSeparator):
		return fmt.Errorf("certs: node name %q must not contain a path separator", n)
	case strings.EqualFold(n, "ca"), strings.EqualFold(n, "selfsigned"):
		return fmt.Errorf("certs: node name %q is reserved (its files would clash with %s or %s)", n, CACertName, SelfSignedCertName)
	}
	return nil
}

func newCA(now time.Time) (ca *x509.Certificate, key crypto.Signer, certPEM, keyPEM []byte, err error) {
	k, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			// The serial in the name tells two CAs apart in error messages
			// ("certificate signed by unknown authority").
			CommonName:   fmt.Sprintf("Switchboard CA %x", serial.Bytes()[:4]),
			Organization: []string{"Switchboard"},
		},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		// It signs node certificates only, never another CA.
		MaxPathLenZero: true,
		KeyUsage:       x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("certs: creating CA certificate: %w", err)
	}
	ca, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("certs: parsing new CA certificate: %w", err)
	}
	return ca, k, encodeCert(der), keyPEM, nil
}

func loadCA(certFile, keyFile string, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	block, rest := pem.Decode(certPEM)
	for block != nil && block.Type != "CERTIFICATE" {
		block, rest = pem.Decode(rest)
	}
	if block == nil {
		return nil, nil, fmt.Errorf("certs: %s: no PEM CERTIFICATE block", certFile)
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %s: %w", certFile, err)
	}
	if !ca.IsCA || !ca.BasicConstraintsValid {
		return nil, nil, fmt.Errorf("certs: %s is not a CA certificate", certFile)
	}
	if ca.KeyUsage != 0 && ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, fmt.Errorf("certs: %s may not sign certificates (no certSign key usage)", certFile)
	}
	if now.Before(ca.NotBefore) || !now.Before(ca.NotAfter) {
		return nil, nil, fmt.Errorf("certs: CA %s is valid only from %s to %s", certFile,
			ca.NotBefore.UTC().Format(time.RFC3339), ca.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %s: %w", keyFile, err)
	}
	pub, ok := ca.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, nil, fmt.Errorf("certs: %s does not belong to %s", keyFile, certFile)
	}
	return ca, key, nil
}

// newLeaf makes a node certificate signed by ca. It never outlives ca, so a
// reused CA near its end does not sign certificates that could not verify.
func newLeaf(name string, ca *x509.Certificate, caKey crypto.Signer, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(nodeValidity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := leafTemplate(name, serial, now, notAfter)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: certificate for node %q: %w", name, err)
	}
	return encodeCert(der), keyPEM, nil
}

// leafTemplate is a certificate for name usable for server and client
// authentication (mutual TLS between peers), valid for name, localhost and
// the loopback addresses.
func leafTemplate(name string, serial *big.Int, now, notAfter time.Time) *x509.Certificate {
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Switchboard"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	// A node named by an IP address gets it as an IP SAN: Go and browsers
	// never match an IP against DNS SANs.
	if ip := net.ParseIP(name); ip != nil {
		if !ip.IsLoopback() {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		}
		tmpl.DNSNames = []string{"localhost"}
	} else if strings.EqualFold(name, "localhost") {
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.DNSNames = []string{name, "localhost"}
	}
	return tmpl
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: generating key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: encoding key: %w", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// newSerial returns a random positive 128-bit serial number (RFC 5280 allows
// up to 20 octets; randomness keeps serials of independent runs distinct).
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("certs: generating serial number: %w", err)
		}
		// At least 4 bytes long, so newCA can name the CA after them.
		if n.BitLen() > 32 {
			return n, nil
		}
	}
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// parsePrivateKey reads the first private key block of keyPEM: PKCS #8, SEC 1
// (EC PRIVATE KEY) or PKCS #1 (RSA PRIVATE KEY), so that a CA made by openssl
// can be reused too.
func parsePrivateKey(keyPEM []byte) (crypto.Signer, error) {
	rest := keyPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM private key block")
		}
		var key any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", key)
		}
		return signer, nil
	}
}

// exists reports whether path exists; errors other than "not found" (such
// as permission denied) are returned, naming the path.
func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("certs: %w", err)
	}
}

// writeNew creates path with data; it fails if path exists.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("certs: writing %s: %w", path, err)
	}
	return nil
}

// writeReplace writes path atomically (atomicfile).
func writeReplace(path string, data []byte, perm os.FileMode) error {
	if err := atomicfile.Write(path, data, perm); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}
