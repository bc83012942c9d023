package bustest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
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
	p  *toxiproxy.Proxy
	mu sync.Mutex
	// held is the toxic of the Hold under way (nil: none).
	held *holding
}

// hold is the toxic that holds (holding).
const hold = `{"name":"hold","type":"switchboard_hold","stream":"downstream","toxicity":1}`

func init() { toxics.Register("switchboard_hold", new(holding)) }

// holding is the toxic of Hold: it keeps what it is given, connection by
// connection and in order, until it is removed, and then sends it on
// before what comes after. toxiproxy's latency toxic held too (a latency
// far beyond any test), but what it held could not be seen, and a test
// needs to see it (Held): that the server counts a message handed out
// says only that it will write it, not that it has.
type holding struct {
	mu   sync.Mutex
	kept map[*toxics.ToxicStub][]*stream.StreamChunk
}

func (h *holding) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			// What is kept stays: Cleanup sends it on once the toxic is
			// removed; another interruption (a toxic added after it) runs
			// Pipe again.
			return
		case c := <-stub.Input:
			if c == nil {
				// The connection is gone: nothing reads what it kept (a
				// send would wait for ever).
				h.mu.Lock()
				delete(h.kept, stub)
				h.mu.Unlock()
				stub.Close()
				return
			}
			h.mu.Lock()
			if h.kept == nil {
				h.kept = map[*toxics.ToxicStub][]*stream.StreamChunk{}
			}
			h.kept[stub] = append(h.kept[stub], c)
			h.mu.Unlock()
		}
	}
}

// Cleanup sends on what the connection's stub kept: toxiproxy calls it
// once the toxic is removed and its Pipe has returned, before it passes
// on what is still waiting at the toxic's input, so the order holds.
func (h *holding) Cleanup(stub *toxics.ToxicStub) {
	h.mu.Lock()
	kept := h.kept[stub]
	delete(h.kept, stub)
	h.mu.Unlock()
	for _, c := range kept {
		stub.Output <- c
	}
}

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

// Hold holds what the server sends from now on until Release. A
// connection that ends meanwhile (the server or the proxy closed it) is
// closed at once, and what it held is dropped.
func (p *Proxy) Hold(t testing.TB) {
	t.Helper()
	w, err := p.p.Toxics.AddToxicJson(strings.NewReader(hold))
	if err != nil {
		t.Fatalf("bustest: hold: %v", err)
	}
	p.mu.Lock()
	p.held = w.Toxic.(*holding)
	p.mu.Unlock()
}

// Held is what the server has sent since Hold and the proxy holds, the
// bytes of each connection in order (nil when nothing is held).
func (p *Proxy) Held() []byte {
	p.mu.Lock()
	h := p.held
	p.mu.Unlock()
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var b bytes.Buffer
	for _, kept := range h.kept {
		for _, c := range kept {
			b.Write(c.Data)
		}
	}
	return b.Bytes()
}

// Release sends on what was held, and what comes after.
func (p *Proxy) Release(t testing.TB) {
	t.Helper()
	if err := p.p.Toxics.RemoveToxic(context.Background(), "hold"); err != nil {
		t.Fatalf("bustest: release: %v", err)
	}
	p.mu.Lock()
	p.held = nil
	p.mu.Unlock()
}
