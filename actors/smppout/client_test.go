package smppout

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
	"github.com/switchboard-dev/switchboard/polltest"
)

func newClient(t *testing.T, url, password string) *Client {
	t.Helper()
	st := sqlitetest.Open(t)
	c, err := New(Config{Frontend: messages.Frontend{Name: "smsc", Mode: messages.ModeSMPP, URL: url, Secret: password},
		Store: st, Reconnect: ring.Reconnect{MaxAttempts: 1, Min: 10 * time.Millisecond, Max: 50 * time.Millisecond, Jitter: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// smpps://: the client checks the SMSC's certificate against tls_ca and
// submits over TLS; without that CA it never binds, and a submit is a
// retry naming why. A lost link is bound again.
func TestClientTLSAndReconnect(t *testing.T) {
	dir := t.TempDir()
	if err := certs.InitCA(dir, []string{"smsc"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := certs.NodeFiles(dir, "smsc")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := certs.CAFiles(dir)
	smsc := smsctest.NewTLS(t, "pw", nil, &tls.Config{Certificates: []tls.Certificate{pair}})
	out := messages.Outgoing{ID: "m-1", SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: "over TLS"}

	c := newClient(t, "smpps://sb@"+smsc.Addr+"?tls_ca="+caFile, "pw")
	polltest.Until(t, 20*time.Second, "the bind", c.Bound)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := c.Submit(ctx, out, "")
	if v.Status != messages.Delivered || len(v.SMSCMessageIDs) != 1 || string(smsc.Submits()[0].SM.ShortMessage) != "over TLS" {
		t.Fatalf("submit over TLS: %+v", v)
	}
	smsc.DropAll()
	polltest.Until(t, 20*time.Second, "the second bind", func() bool { n, _ := smsc.Binds(); return n == 2 && c.Bound() })
	if v := c.Submit(ctx, out, "resent: test"); v.Status != messages.Delivered || v.Note != "resent: test" {
		t.Fatalf("submit after the reconnect: %+v", v)
	}

	untrusting := newClient(t, "smpps://sb@"+smsc.Addr, "pw")
	polltest.Until(t, 20*time.Second, "the TLS failure", func() bool {
		untrusting.mu.Lock()
		defer untrusting.mu.Unlock()
		return strings.HasPrefix(untrusting.lastErr.Error(), "TLS")
	})
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if v := untrusting.Submit(short, out, ""); v.Status != messages.Retry || !strings.Contains(v.Reason, "not bound to the SMSC (TLS") {
		t.Fatalf("submit without the CA: %+v", v)
	}
	if n, _ := smsc.Binds(); n != 2 {
		t.Fatalf("%d binds: the client without the CA bound", n)
	}
	if _, err := New(Config{Frontend: messages.Frontend{Name: "x", Mode: messages.ModeSMPP, URL: "smpps://sb@127.0.0.1:1?tls_ca=/nonexistent"},
		Store: untrusting.cfg.Store}); err == nil || !strings.Contains(err.Error(), "tls_ca") {
		t.Fatalf("a missing tls_ca: %v", err)
	}
}
