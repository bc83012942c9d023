package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
)

// kill -9 of the node while a window of submit_sm is in flight to its
// SMSC: the SMSC has accepted them, but their responses are held, so the
// node never records them. After the restart every accepted message is
// delivered (nothing acknowledged is lost); the submits sent again are at
// most the window, each marked in its message's history, and no message
// the node had recorded delivered is sent again. Only a message whose
// submit_sm was outstanding at the kill is marked.
func TestSMPPFrontendCrashWithWindowInFlight(t *testing.T) {
	const (
		total    = 20
		window   = 5
		answered = 3 // submits answered before the responses are held
	)
	smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) {
		return smpp.StatusOK, s.N > answered
	})
	bin := nodetest.Binary(t)
	dir := t.TempDir()
	certDir, pool := nodetest.DevCerts(t, bin, dir, "e2e")
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "e2e"}}
	defer tr.CloseIdleConnections()
	addr := nodetest.FreeAddr(t)
	node := newE2ENode(t, bin, addr, &http.Client{Transport: tr, Timeout: 30 * time.Second}, []string{"run",
		"--name", "e2e", "--instance-id", "e2e-0",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen", addr, "--metrics-listen", "127.0.0.1:0",
		"--tls-cert", filepath.Join(certDir, "e2e.pem"), "--tls-key", filepath.Join(certDir, "e2e.key"),
		"--delivery-retry-min", "50ms", "--delivery-retry-max", "200ms",
		// Held responses must not time out before the kill.
		"--webhook-timeout", "60s",
		"--smpp-reconnect-min", "20ms", "--smpp-reconnect-max", "200ms",
		"--frontend", fmt.Sprintf("smsc=smpp://sb:pw@%s?window=%d", smsc.Addr, window), "--route", "33=smsc",
		"--log-format", "json", "--log-level", "info",
	}...)
	defer func() {
		if t.Failed() {
			for i, l := range node.RunLogs() {
				t.Logf("--- logs of run %d ---\n%s", i+1, tail(l, 8000))
			}
		}
	}()
	node.Start()
	id := func(i int) string { return fmt.Sprintf("sm-%02d", i) }
	for i := range total {
		node.Must(202, "POST", "/api/messages", map[string]string{"id": id(i), "source_msisdn": "Switchboard",
			"destination_msisdn": fmt.Sprintf("+336000000%02d", i), "message_body": "hello " + id(i)}, nil)
	}
	// The SMSC answered three submits and holds the window's five.
	polltest.Until(t, 60*time.Second, "the condition", func() bool { return len(smsc.Submits()) == answered+window })
	get := func(id string) messages.Message {
		var m messages.Message
		if status, err := node.Call("GET", "/api/messages/"+id, nil, &m); err != nil || status != 200 {
			t.Fatalf("GET %s: %d %v", id, status, err)
		}
		return m
	}
	recorded := map[string]bool{}
	polltest.Until(t, 30*time.Second, "the condition", func() bool {
		n := 0
		for _, s := range smsc.Submits()[:answered] {
			if get(bodyID(s)).State == messages.StateDelivered {
				recorded[bodyID(s)] = true
				n++
			}
		}
		return n == answered
	})
	node.Kill()
	if len(smsc.Submits()) != answered+window {
		t.Fatalf("%d submits before the kill, want %d (the window was full)", len(smsc.Submits()), answered+window)
	}
	before := map[string]bool{} // what the SMSC had before the kill
	for _, s := range smsc.Submits() {
		before[bodyID(s)] = true
	}
	smsc.SetAnswer(nil) // everything accepted at once from now on
	node.Start()

	polltest.Until(t, 60*time.Second, "the condition", func() bool {
		for i := range total {
			if get(id(i)).State != messages.StateDelivered {
				return false
			}
		}
		return true
	})
	count := map[string]int{}
	for _, s := range smsc.Submits() {
		count[bodyID(s)]++
	}
	resent := 0
	for i := range total {
		m := get(id(i))
		marked := false
		for _, h := range m.History {
			marked = marked || strings.Contains(h.Detail, "resent: attempt 1 left no recorded verdict")
		}
		switch n := count[id(i)]; {
		case n == 0:
			t.Errorf("%s delivered without a submit", id(i))
		case n > 2 || (n == 2 && recorded[id(i)]):
			t.Errorf("%s submitted %d times (recorded delivered before the kill: %v)", id(i), n, recorded[id(i)])
		case n == 2:
			resent++
			if !marked {
				t.Errorf("%s was sent again, its history does not say so: %+v", id(i), m.History)
			}
		case marked && before[id(i)]:
			t.Errorf("%s is marked resent, but the SMSC had it once, before the kill", id(i))
		case marked:
			// Its first attempt was leased at the kill and never left:
			// the worker held more leases than its window. A handover
			// racing a claim did that until the handover board counted
			// the rows it had granted (handover.Board.Owed).
			t.Errorf("%s is marked resent, but the SMSC never had it before the kill: more leases than the window", id(i))
		}
		if len(m.SMSC) != 1 {
			t.Errorf("%s: smsc ids %+v", id(i), m.SMSC)
		}
	}
	if resent == 0 || resent > window {
		t.Errorf("%d messages sent again, want 1 to the window (%d)", resent, window)
	}
	t.Logf("%d of %d messages were sent again after the kill (window %d)", resent, total, window)
	node.Stop()
	for _, l := range node.RunLogs() {
		checkLogs(t, l)
	}
}

// bodyID is the message id a submit carries in its text ("hello ID").
func bodyID(s smsctest.Submit) string {
	return strings.TrimPrefix(string(s.SM.ShortMessage), "hello ")
}
