package bustest

import (
	"fmt"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a server whose server-to-client
// direction can be held: what the server sends meanwhile waits in the
// proxy, in order, until Release, as behind a slow network, while what
// its clients send goes through. A test sees with it what a client does
// with messages the server has sent and the client has not read yet.
type Proxy struct {
	ln net.Listener
	to string
	wg sync.WaitGroup

	mu    sync.Mutex
	held  chan struct{} // closed by Release; nil when not held
	conns []net.Conn
	done  bool
}

// Proxy starts a proxy to the server on a loopback port; t's cleanup
// stops it (before the server: start it after).
func (s *Server) Proxy(t testing.TB) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("bustest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, to: fmt.Sprintf("127.0.0.1:%d", s.port)}
	p.wg.Go(p.accept)
	t.Cleanup(p.stop)
	return p
}

// URL is the proxy's client URL.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Hold holds what the server sends from now on until Release.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// Release sends on what was held, and what comes after.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// wait waits while the proxy holds.
func (p *Proxy) wait() {
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	if held != nil {
		<-held
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // stopped
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Go(func() { pipe(s, c, func() {}) })
		p.wg.Go(func() { pipe(c, s, p.wait) })
	}
}

// track records a client's connection and its server's, to close at the
// stop; false: stopped already (both closed).
func (p *Proxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		_, _ = c.Close(), s.Close()
		return false
	}
	p.conns = append(p.conns, c, s)
	return true
}

// pipe copies from src to dst, calling wait before each write, until
// either fails; then it closes both.
func pipe(dst, src net.Conn, wait func()) {
	defer func() { _, _ = dst.Close(), src.Close() }()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF, or closed
		}
	}
}

// stop closes the listener and every connection, and waits for the
// proxy's goroutines.
func (p *Proxy) stop() {
	p.Release()
	p.mu.Lock()
	p.done = true
	conns := p.conns
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}
