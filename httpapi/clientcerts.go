package httpapi

import (
	"crypto/x509"
	"sync"
	"time"
)

// clientCerts verifies federation callers' client certificates against the
// CA pool in force on every request (Config.ClientCAs), and remembers each
// verdict for that pool until the verified chain's first certificate
// expires: a caller's requests then cost a map lookup, not a signature
// check each. A new pool (a reload) forgets every verdict, and a new
// verdict the expired ones, so the map holds at most the unexpired
// certificates seen under the pool in force.
type clientCerts struct {
	mu   sync.Mutex
	pool *x509.CertPool
	// until is, by the leaf's DER, when its verified chain stops being
	// valid.
	until map[string]time.Time
}

// verify reports whether leaf, with the intermediates the caller sent,
// chains to pool for client use at now (the wall clock, as a handshake
// verifies), checking the signatures only when no verdict for this pool
// holds.
func (c *clientCerts) verify(pool *x509.CertPool, leaf *x509.Certificate, sent []*x509.Certificate, now time.Time) error {
	key := string(leaf.Raw)
	c.mu.Lock()
	if c.pool != pool {
		c.pool, c.until = pool, map[string]time.Time{}
	}
	until, ok := c.until[key]
	c.mu.Unlock()
	if ok && now.Before(until) {
		return nil
	}
	inter := x509.NewCertPool()
	for _, s := range sent {
		inter.AddCert(s)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return err
	}
	end := leaf.NotAfter
	for _, chain := range chains {
		for _, cert := range chain {
			if cert.NotAfter.Before(end) {
				end = cert.NotAfter
			}
		}
	}
	c.mu.Lock()
	if c.pool == pool {
		// A new verdict is rare (a new or renewed certificate): the
		// expired ones go then, so that renewals do not grow the map.
		for k, u := range c.until {
			if !now.Before(u) {
				delete(c.until, k)
			}
		}
		c.until[key] = end
	}
	c.mu.Unlock()
	return nil
}
