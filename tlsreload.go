package switchboard

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
)

// Certificate rotation (docs/operations.md, "Rotating certificates"): the
// node's certificate, key and CA bundle are held by one certs.Reloader,
// read again on Reload (SIGHUP) and when the watch finds the files
// changed. The HTTPS listener and the peer client take what it holds at
// each new handshake; open connections keep theirs. A new file that does
// not load, or a certificate peers would refuse (with --tls-ca, one that
// does not name --name among them), is logged and the old material stays.
// Each reload that changed something is in the audit trail (tls.reload).

// tlsMaterial returns the node's TLS material, reading it the first time:
// --tls-cert, --tls-key and --tls-ca, or the self-signed development
// certificate (made in the data directory when missing). With --tls-ca a
// certificate that does not name the node is refused here too; one that
// clients or peers would refuse otherwise (expired, not valid yet, not of
// the CA) is served with a warning.
func (n *Node) tlsMaterial() (*certs.Reloader, error) {
	if n.tls != nil {
		return n.tls, nil
	}
	certFile, keyFile := n.cfg.TLSCert, n.cfg.TLSKey
	if certFile == "" {
		dir := n.cfg.DataDir
		if dir == "" {
			dir = "."
		}
		var err error
		if certFile, keyFile, err = certs.EnsureSelfSigned(dir, n.cfg.Name, n.clock.Now()); err != nil {
			return nil, fmt.Errorf("self-signed certificate: %w", err)
		}
		n.log.Warn("no --tls-cert given: serving a self-signed development certificate", "cert", certFile)
	}
	r, err := certs.NewReloader(certFile, keyFile, n.cfg.TLSCA, certs.WithClock(n.clock.Now), certs.WithNode(n.cfg.Name))
	if err != nil {
		return nil, field.Wrap("TLSCert", err)
	}
	if err := r.Usable(); err != nil {
		// Served all the same: there is nothing else, and new files put in
		// place mend it without a restart.
		n.log.Warn("the TLS certificate served is refused by clients and peers until a new one is put in place",
			"err", field.Wrap("TLSCert", err))
	}
	n.tls = r
	return r, nil
}

// reloadTLS reads the TLS files again when they changed (a no-op
// without material). why is what asked (reload, file changed).
func (n *Node) reloadTLS(why string) error {
	if n.tls == nil {
		return nil
	}
	changed, err := n.tls.Reload()
	if err != nil || !changed {
		return err
	}
	if n.peerClient != nil {
		// Connections to peers were verified with the old CA bundle and
		// show them the old certificate.
		n.peerClient.Renew()
	}
	certFile, _, caFile := n.tls.Files()
	leaf := n.tls.Certificate().Leaf
	certEnd, caEnd := n.tls.Expiry()
	n.log.Info("TLS certificate reloaded; new handshakes use it", "why", why, "cert", certFile,
		"serial", leaf.SerialNumber.String(), "not_after", certEnd, "ca", caFile, "ca_not_after", caEnd)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.audit(ctx, messages.AuditEntry{At: n.clock.Now(), Actor: "node", Remote: why, Action: messages.AuditTLSReload,
		Target: certFile, Detail: fmt.Sprintf("serial %s, valid until %s", leaf.SerialNumber, certEnd.UTC().Format(time.RFC3339))})
	return nil
}

// certExpiry is switchboard_tls_cert_expiry_timestamp_seconds{cert}: when
// the chain in force ("server": the certificate served and presented to
// peers, or an intermediate served with it, whichever ends first) and the
// first certificate of the CA bundle ("ca") expire.
type certExpiry struct {
	n    *Node
	desc *prometheus.Desc
}

func newCertExpiry(n *Node) *certExpiry {
	return &certExpiry{n: n, desc: prometheus.NewDesc("switchboard_tls_cert_expiry_timestamp_seconds",
		"When a TLS certificate of the node stops being valid (unix seconds): server is the certificate served and presented to peers (or an intermediate served with it, whichever ends first), ca the first of the --tls-ca bundle to expire.",
		[]string{"cert"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *certExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *certExpiry) Collect(ch chan<- prometheus.Metric) {
	r := c.n.tls
	if r == nil {
		return
	}
	cert, ca := r.Expiry()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(cert.Unix()), "server")
	if !ca.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(ca.Unix()), "ca")
	}
}
