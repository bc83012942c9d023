package certs

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Reloader holds a node's TLS material (its certificate and key, the CA
// bundle) and reads it again on demand: on SIGHUP, and when the node's
// watch sees the files change. New handshakes, of the server and of the
// peer client, use what it holds at that moment; connections already
// made keep theirs, so nothing in flight is dropped. A read that fails (a
// file missing, a key that does not match its certificate, a CA bundle
// without a certificate, a certificate not valid now or, with a CA file,
// not issued by that CA for both server and client use or not naming the
// node) changes nothing: the material in force stays.
type Reloader struct {
	certFile, keyFile, caFile string
	node                      string
	now                       func() time.Time
	cur                       atomic.Pointer[material]
	// reloading makes Reloads one at a time: two at once (SIGHUP and the
	// watch) would both take the same change.
	reloading sync.Mutex
}

// Option configures a Reloader.
type Option func(*Reloader)

// WithClock sets the clock Reload checks validity periods against
// (time.Now without it).
func WithClock(now func() time.Time) Option { return func(r *Reloader) { r.now = now } }

// WithNode names the node the certificate is for: with a CA file, a
// certificate that does not name it (Names) is refused, at the start and
// on Reload, since peers check that name.
func WithNode(node string) Option { return func(r *Reloader) { r.node = node } }

// material is one consistent read of the files.
type material struct {
	pair *tls.Certificate
	pool *x509.CertPool // nil without a CA file
	// certExpiry is the earliest end of validity of the chain served: the
	// certificate and the intermediates after it in its file (once one of
	// them ends, clients and peers refuse the node whatever the
	// certificate's own end). caExpiry is the earliest in the CA bundle.
	certExpiry, caExpiry time.Time
	sum                  [32]byte
}

// NewReloader reads certFile and keyFile (required) and caFile (optional).
// What it reads at the start is not checked against the clock or the CA
// (there is nothing else to serve, and a rotation mends it without a
// restart; Usable says why it would be refused); Reload checks what would
// replace it. A certificate that does not name the node (WithNode, with a
// CA file) is refused at the start too: it is the wrong file, not one
// that has aged.
func NewReloader(certFile, keyFile, caFile string, opts ...Option) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, caFile: caFile, now: time.Now}
	for _, o := range opts {
		o(r)
	}
	m, err := r.read()
	if err != nil {
		return nil, err
	}
	if err := r.namesNode(m); err != nil {
		return nil, err
	}
	r.cur.Store(m)
	return r, nil
}

// sum hashes the files' contents: Reload parses only when it changed.
func (r *Reloader) sum() ([32]byte, error) {
	h := sha256.New()
	for _, f := range []string{r.certFile, r.keyFile, r.caFile} {
		if f == "" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return [32]byte{}, fmt.Errorf("certs: %w", err)
		}
		h.Write(data)
		h.Write([]byte{0})
	}
	var s [32]byte
	h.Sum(s[:0])
	return s, nil
}

func (r *Reloader) read() (*material, error) {
	sum, err := r.sum()
	if err != nil {
		return nil, err
	}
	pair, err := LoadKeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, err
	}
	m := &material{pair: &pair, sum: sum, certExpiry: chainExpiry(&pair)}
	if r.caFile != "" {
		if m.pool, err = LoadPool(r.caFile); err != nil {
			return nil, err
		}
		if m.caExpiry, err = earliestExpiry(r.caFile); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Reload reads the files again when their contents changed. It reports
// whether new material is now in force; on an error the old one stays.
// The new certificate must be valid now and, with a CA file, chain to the
// new CA bundle for server and for client use (the node presents it to
// peers as its client certificate) and name the node (WithNode): one that
// peers or clients would refuse does not replace the one in force. Reloads
// at once take turns: a change is reported by one of them.
func (r *Reloader) Reload() (changed bool, err error) {
	r.reloading.Lock()
	defer r.reloading.Unlock()
	sum, err := r.sum()
	if err != nil {
		return false, err
	}
	if sum == r.cur.Load().sum {
		return false, nil
	}
	m, err := r.read()
	if err != nil {
		return false, err
	}
	if err := m.usable(r.now(), r.certFile); err != nil {
		return false, err
	}
	if err := r.namesNode(m); err != nil {
		return false, err
	}
	r.cur.Store(m)
	return true, nil
}

// usable reports why the material's certificate cannot be served at now:
// outside its validity period, or (with a CA pool) not issued under it for
// both server and client authentication.
func (m *material) usable(now time.Time, certFile string) error {
	leaf := m.pair.Leaf
	if now.Before(leaf.NotBefore) {
		return fmt.Errorf("certs: %s is not valid before %s", certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if !now.Before(leaf.NotAfter) {
		return fmt.Errorf("certs: %s expired at %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if m.pool == nil {
		return nil
	}
	inter := x509.NewCertPool()
	for _, der := range m.pair.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("certs: %s: %w", certFile, err)
		}
		inter.AddCert(c)
	}
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: m.pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{use}}
		if _, err := leaf.Verify(opts); err != nil {
			return fmt.Errorf("certs: %s is not trusted by the CA bundle: %w", certFile, err)
		}
	}
	return nil
}

// Usable reports why clients or peers would refuse the certificate in
// force now (nil when they would not), as Reload checks what would
// replace it: outside its validity period by the reloader's clock, or,
// with a CA file, not issued under it for both server and client use.
// NewReloader takes such a certificate (see there); its owner warns.
func (r *Reloader) Usable() error { return r.cur.Load().usable(r.now(), r.certFile) }

// namesNode reports, with a CA file and a node (WithNode), a certificate
// that does not name the node: peers verify that the certificate they are
// shown names the node they call, or the caller's X-Federation-Node
// (Names), and would refuse every call made with it. Without a CA file
// peers verify nothing.
func (r *Reloader) namesNode(m *material) error {
	if r.node == "" || m.pool == nil {
		return nil
	}
	return MustName(r.certFile, m.pair.Leaf, r.node)
}

// Certificate is the certificate in force (with its Leaf).
func (r *Reloader) Certificate() *tls.Certificate { return r.cur.Load().pair }

// Pool is the CA pool in force (nil without a CA file).
func (r *Reloader) Pool() *x509.CertPool { return r.cur.Load().pool }

// Expiry is when the chain in force (the certificate, or an intermediate
// served with it, whichever ends first) and the CA bundle's first
// certificate to expire end (zero without a CA file).
func (r *Reloader) Expiry() (cert, ca time.Time) {
	m := r.cur.Load()
	return m.certExpiry, m.caExpiry
}

// chainExpiry is the earliest end of validity of pair's leaf and the
// certificates served after it. One that does not parse is left out here
// (Reload's check refuses it under a CA).
func chainExpiry(pair *tls.Certificate) time.Time {
	end := pair.Leaf.NotAfter
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil && c.NotAfter.Before(end) {
			end = c.NotAfter
		}
	}
	return end
}

// Files names the files, for logs: the certificate, the key, the CA.
func (r *Reloader) Files() (cert, key, ca string) { return r.certFile, r.keyFile, r.caFile }

// ServerConfig is the gateway's TLS configuration (as ServerConfig
// describes it), reading the material in force at each handshake.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.cur.Load()
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*m.pair}}
			if m.pool != nil {
				cfg.ClientCAs = m.pool
				cfg.ClientAuth = tls.VerifyClientCertIfGiven
			}
			return cfg, nil
		},
	}
}

// earliestExpiry is the earliest NotAfter of the certificates in a PEM
// bundle.
func earliestExpiry(file string) (time.Time, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return time.Time{}, fmt.Errorf("certs: %w", err)
	}
	var first time.Time
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return time.Time{}, fmt.Errorf("certs: %s: %w", file, err)
		}
		if first.IsZero() || c.NotAfter.Before(first) {
			first = c.NotAfter
		}
	}
	if first.IsZero() {
		return time.Time{}, fmt.Errorf("certs: %s: %w", file, errNoCerts)
	}
	return first, nil
}
