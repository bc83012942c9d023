package switchboard

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestListenersBoundTheHeaders: a request whose headers are over
// maxHeaderBytes is refused 431 on the HTTPS and the metrics listener.
// Both took net/http's default, 1 MiB: a client without a token could make
// the node hold a megabyte and more for each connection it kept sending
// headers on (200 of them took the node from 45 MB to 324 MB resident).
func TestListenersBoundTheHeaders(t *testing.T) {
	n := startListening(t, "headers-node", "127.0.0.1:0", "127.0.0.1:0")
	pad := strings.Repeat("X-Pad: "+strings.Repeat("a", 1000)+"\r\n", 2*maxHeaderBytes/1000)
	for _, l := range []struct {
		name, path string
		dial       func() (net.Conn, error)
	}{
		{"https", "/healthz", func() (net.Conn, error) {
			// The node's self-signed certificate: only the listener's bound is tested.
			return tls.Dial("tcp", n.Addr(), &tls.Config{InsecureSkipVerify: true})
		}},
		{"metrics", "/metrics", func() (net.Conn, error) { return net.Dial("tcp", n.MetricsAddr()) }},
	} {
		conn, err := l.dial()
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", l.path, pad); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s: %d KiB of headers: %d, want 431", l.name, len(pad)>>10, res.StatusCode)
		}
		conn.Close()
	}
}

// TestHTTPAcceptFailuresAreWarned: a connection an HTTP listener could
// not accept (the process out of file descriptors) is logged "http
// connection not accepted" at warn, at most 10 a minute, naming the
// listener; a failed handshake stays at debug. The HTTPS listener's were
// at debug (an operator saw nothing while the node took no connection),
// the metrics listener's at info, once a second for as long as it lasted.
func TestHTTPAcceptFailuresAreWarned(t *testing.T) {
	rec := &records{}
	cfg := DefaultConfig()
	cfg.Name, cfg.InstanceID = "accept-node", "accept-node-0"
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(rec)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, listener := range []string{"https", "metrics"} {
		l := n.httpErrors(listener)
		for range 10 {
			l.Printf("http: Accept error: accept tcp 127.0.0.1:8443: accept4: too many open files; retrying in 1s")
		}
		l.Printf("http: TLS handshake error from 192.0.2.1:4711: EOF")
	}
	n.notAccepted.Close()
	var warned, debug, summed int
	for _, r := range rec.all() {
		switch {
		case r.Message == "http connection not accepted" && r.Level == slog.LevelWarn:
			warned++
		case strings.HasPrefix(r.Message, "http: TLS handshake error") && r.Level == slog.LevelDebug:
			debug++
		case r.Message == "http connections not accepted not logged one by one":
			summed++
		case strings.Contains(r.Message, "ccept"):
			t.Errorf("logged %q at %v", r.Message, r.Level)
		}
	}
	if warned != 10 || summed != 1 || debug != 2 {
		t.Errorf("%d accept failures at warn, %d counts of the rest, %d handshake failures at debug; want 10 (the rate's burst), 1 and 2",
			warned, summed, debug)
	}
}

// records is a slog.Handler that keeps every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r)
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }
func (h *records) all() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.recs)
}

// startListening starts a node called name on the embedded store with
// the listeners listen and metricsListen ("" for none), its logs
// discarded; it is stopped when the test ends.
func startListening(t *testing.T, name, listen, metricsListen string) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Name, cfg.InstanceID = name, name+"-0"
	cfg.DataDir = t.TempDir()
	cfg.Listen, cfg.MetricsListen = listen, metricsListen
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return n
}
