package switchboard_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestOversizeBodyGets413WhenSentWhole: a client that writes its whole
// request before it reads a byte (Python's urllib, curl without
// Expect, most simple clients) gets the 413 with its error document,
// whatever the size over the limit and however the body is framed. The
// node reads and discards what follows the limit before it closes, so the
// connection is not reset under the client while it still sends.
func TestOversizeBodyGets413WhenSentWhole(t *testing.T) {
	h := startNode(t, testConfig(t))
	h.pullFrontend("fe", "44")
	tr := h.client.Transport.(*http.Transport)
	for _, c := range []struct {
		name    string
		size    int
		chunked bool
	}{
		{"slightly over, with Content-Length", 1<<20 + 64<<10, false},
		{"4 MiB, with Content-Length", 4 << 20, false},
		{"2 MiB, chunked", 2 << 20, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for round := range 3 {
				conn, err := tls.Dial("tcp", h.node.Addr(), tr.TLSClientConfig)
				if err != nil {
					t.Fatal(err)
				}
				body := `{"source_msisdn":"1","destination_msisdn":"441","message_body":"` + strings.Repeat("x", c.size) + `"}`
				var req bytes.Buffer
				fmt.Fprintf(&req, "POST /api/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n")
				if c.chunked {
					fmt.Fprintf(&req, "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
				} else {
					fmt.Fprintf(&req, "Content-Length: %d\r\n\r\n%s", len(body), body)
				}
				// Everything first, as those clients do; a node that stopped
				// reading would leave this write blocked, then reset.
				conn.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := conn.Write(req.Bytes()); err != nil {
					t.Fatalf("round %d: writing the request: %v", round, err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatalf("round %d: reading the answer: %v", round, err)
				}
				data, err := io.ReadAll(resp.Body)
				conn.Close()
				if err != nil {
					t.Fatalf("round %d: reading the answer's body: %v", round, err)
				}
				var doc struct{ Error struct{ Code string } }
				if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(data, &doc) != nil || doc.Error.Code != messages.CodeBodyTooLarge {
					t.Fatalf("round %d: %d %s, want 413 body_too_large", round, resp.StatusCode, data)
				}
			}
		})
	}
	if st := h.status(); st.Counts["pending"] != 0 {
		t.Errorf("an oversize submit stored a message: %v", st.Counts)
	}
}
