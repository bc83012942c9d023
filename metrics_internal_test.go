package switchboard

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestMetricsListenerLetsClientsGo: the metrics listener, plain HTTP on
// any network an operator lets scrape it, lets go of a connection left
// idle after a scrape (metricsIdle) and of a request whose body does not
// come (metricsWait), as the HTTPS listener does. It bounded only the
// headers' reading: both held their connection, and a goroutine, for
// ever, so that a few hundred such clients used up the node's file
// descriptors.
func TestMetricsListenerLetsClientsGo(t *testing.T) {
	defer func(idle, wait time.Duration) { metricsIdle, metricsWait = idle, wait }(metricsIdle, metricsWait)
	metricsIdle, metricsWait = 300*time.Millisecond, 300*time.Millisecond
	n := startListening(t, "metrics-node", "", "127.0.0.1:0")
	for _, c := range []struct {
		what, request string
		scrape        bool
	}{
		{"a connection idle after a scrape", "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"a request whose body does not come", "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", false},
	} {
		conn, err := net.Dial("tcp", n.MetricsAddr())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprint(conn, c.request); err != nil {
			t.Fatal(err)
		}
		// The scrape is answered; then the node closes the connection
		// (the body that never came may go unanswered).
		br := bufio.NewReader(conn)
		if c.scrape {
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: no answer: %v", c.what, err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		if _, err := io.Copy(io.Discard, br); err != nil {
			t.Errorf("%s: the connection is still open (%v), want it closed by the node", c.what, err)
		}
		conn.Close()
	}
}
