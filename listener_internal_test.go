package switchboard

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestListenersBoundTheHeaders: a request whose headers are over
// maxHeaderBytes is refused 431 on the HTTPS and the metrics listener.
// Both took net/http's default, 1 MiB: a client without a token could make
// the node hold a megabyte and more for each connection it kept sending
// headers on (200 of them took the node from 45 MB to 324 MB resident).
func TestListenersBoundTheHeaders(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Name, cfg.InstanceID = "headers-node", "headers-node-0"
	cfg.DataDir = t.TempDir()
	cfg.Listen, cfg.MetricsListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
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
