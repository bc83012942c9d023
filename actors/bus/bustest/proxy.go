package bustest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy is a TCP proxy (toxiproxy, in process) in front of a server whose
// server-to-client direction can be held: what the server sends meanwhile
// waits in the proxy, in order, until Release, as behind a slow network,
// while what its clients send goes through. A test sees with it what a
// client does with messages the server has sent and the client has not
// read yet.
type Proxy struct {
	p *toxiproxy.Proxy
}

// hold is the toxic that holds: a latency far beyond any test, which
// toxiproxy's latency toxic gives up at once, passing on what it holds,
// when it is removed.
const hold = `{"name":"hold","type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":3600000}}`

// Proxy starts a proxy to the server on a loopback port; t's cleanup
// stops it (before the server: start it after).
func (s *Server) Proxy(t testing.TB) *Proxy {
	t.Helper()
	zerolog.SetGlobalLevel(zerolog.Disabled) // toxiproxy's toxics log through zerolog's global logger
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "nats", "127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", s.port))
	if err := p.Start(); err != nil {
		t.Fatalf("bustest: proxy: %v", err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{p: p}
}

// URL is the proxy's client URL.
func (p *Proxy) URL() string { return "nats://" + p.p.Listen }

// Hold holds what the server sends from now on until Release.
func (p *Proxy) Hold(t testing.TB) {
	t.Helper()
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(hold)); err != nil {
		t.Fatalf("bustest: hold: %v", err)
	}
}

// Release sends on what was held, and what comes after.
func (p *Proxy) Release(t testing.TB) {
	t.Helper()
	if err := p.p.Toxics.RemoveToxic(context.Background(), "hold"); err != nil {
		t.Fatalf("bustest: release: %v", err)
	}
}
