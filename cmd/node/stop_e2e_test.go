package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/nodetest"
)

// TestStopDoesNotWaitForAStalledBody: a request whose body stopped coming
// (a client or a peer cut off mid-request, its connection not closed) held
// a graceful stop for the body's 30 s: the HTTPS server's shutdown waited
// for its handler, which waited for the body, so the stop used up
// --shutdown-timeout, left the delivery workers no time to drain and
// exited 1 ("https shutdown: context deadline exceeded"). Now the stop
// cuts the body's wait: the request, nothing done for it, is answered
// 503 unavailable, and the node exits 0.
func TestStopDoesNotWaitForAStalledBody(t *testing.T) {
	// Longer than the test needs, shorter than the body's 30 s: a stop
	// that waits for the body runs out of it.
	node, addr, tlsConf := startStoppingNode(t, "10s")

	conn, err := tls.Dial("tcp", addr, tlsConf)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The headers and a part of the body, then nothing.
	if _, err := fmt.Fprint(conn, "POST /api/messages HTTP/1.1\r\nHost: e2e\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"id\":"); err != nil {
		t.Fatal(err)
	}
	// By the answer to a request sent after it on another connection the
	// node has read the stalled request's headers (they were sent whole)
	// and its handler waits for the rest of the body.
	node.Must(200, "GET", "/api/status", nil, nil)

	node.Signal(syscall.SIGTERM)
	node.WaitStopped() // exit 0

	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the stalled request got no answer: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"unavailable"`) {
		t.Errorf("the stalled request: %d %s, want 503 unavailable", res.StatusCode, body)
	}
}

// TestStopClosesConnectionsThatAskedNothing: a connection on which no
// request had begun (a load balancer's TCP check, a scanner, a client's
// preconnect; here one that sent nothing) held a graceful stop for 5 s:
// the HTTPS server's shutdown takes such a connection for idle only
// once it is 5 s old. With a --shutdown-timeout below that the stop ran
// out of time, left the delivery workers no drain and exited 1. Now the
// stop closes such connections at once and exits 0.
func TestStopClosesConnectionsThatAskedNothing(t *testing.T) {
	node, addr, _ := startStoppingNode(t, "2s") // below the server's 5 s for a new connection

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The node has accepted it once a request on another connection,
	// made after it, is answered.
	node.Must(200, "GET", "/api/status", nil, nil)

	node.Signal(syscall.SIGTERM)
	node.WaitStopped() // exit 0
}

// startStoppingNode starts the binary on its dev certificates with
// --shutdown-timeout given, ended at the test's end; it returns the node,
// its API address and a TLS configuration that trusts it.
func startStoppingNode(t *testing.T, shutdownTimeout string) (*e2eNode, string, *tls.Config) {
	t.Helper()
	bin := nodetest.Binary(t)
	dir := t.TempDir()
	certDir, pool := nodetest.DevCerts(t, bin, dir, "e2e")
	tlsConf := &tls.Config{RootCAs: pool, ServerName: "e2e"}
	tr := &http.Transport{TLSClientConfig: tlsConf}
	t.Cleanup(tr.CloseIdleConnections)
	addr := nodetest.FreeAddr(t)
	node := newE2ENode(t, bin, addr, &http.Client{Transport: tr, Timeout: 30 * time.Second}, "run",
		"--name", "e2e", "--data-dir", filepath.Join(dir, "data"),
		"--listen", addr, "--metrics-listen", "127.0.0.1:0",
		"--tls-cert", filepath.Join(certDir, "e2e.pem"), "--tls-key", filepath.Join(certDir, "e2e.key"),
		"--shutdown-timeout", shutdownTimeout, "--log-format", "json")
	t.Cleanup(node.End)
	node.Start()
	return node, addr, tlsConf
}
