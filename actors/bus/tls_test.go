package bus_test

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/actors/bus/bustest"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
)

// TestTLSServerOfEveryTLSScheme: the bus takes --tls-ca (and the node's
// certificate, for a server that demands a client's) for a TLS server
// whatever the case of its URL's scheme (the client takes TLS:// as
// tls://), and for a websocket one over TLS (wss://). They were applied
// for a lower-case tls:// alone: with TLS:// or wss:// the client checked
// the server against the system roots only, and a server with a
// certificate of the site's own CA was never reached (unknown authority).
func TestTLSServerOfEveryTLSScheme(t *testing.T) {
	dir := t.TempDir()
	if err := certs.InitCA(dir, []string{"nats", "sb"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ca, _ := certs.CAFiles(dir)
	srvCert, srvKey := certs.NodeFiles(dir, "nats")
	cert, key := certs.NodeFiles(dir, "sb")
	tc, err := certs.ServerConfig(srvCert, srvKey, ca)
	if err != nil {
		t.Fatal(err)
	}
	tc.ClientAuth = tls.RequireAndVerifyClientCert // the node's certificate must be given too
	srv := bustest.StartTLS(t, tc)
	tlsURL, wssURL := srv.TLSURL(), srv.WSSURL()
	for _, url := range []string{
		tlsURL,
		"TLS" + strings.TrimPrefix(tlsURL, "tls"),
		"Tls" + strings.TrimPrefix(tlsURL, "tls"),
		wssURL,
		"WSS" + strings.TrimPrefix(wssURL, "wss"),
	} {
		t.Run(url, func(t *testing.T) {
			openWith(t, url, func(c *bus.Config) { c.TLSCA, c.TLSCert, c.TLSKey = ca, cert, key })
		})
	}
}
