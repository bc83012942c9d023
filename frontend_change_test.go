package switchboard_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
)

// TestFrontendChangeKeepsInFlightSubmit: a PUT that changes an smpp
// frontend (here only its window) while a submit_sm awaits its response.
// The new worker's client closed the old one at once (unbind), and the old
// worker was stopped with its verdict to come: the submit failed with the
// session, the message waited for its lease and was submitted again (the
// SMSC had it twice). The old worker now drains what it has in flight on
// the old connection, which stays bound until then.
func TestFrontendChangeKeepsInFlightSubmit(t *testing.T) {
	smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) { return smpp.StatusOK, s.Conn == 1 })
	cfg := testConfig(t)
	cfg.WebhookTimeout = 5 * time.Second // the held submit waits for the change and the new bind
	h := startNode(t, cfg)
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr+"?window=4", "33")
	polltest.Until(t, 20*time.Second, "the bind", smsc.Bound)
	h.submit("m-1", "33600000001")
	polltest.Until(t, 20*time.Second, "the submit", func() bool { return len(smsc.Submits()) == 1 })
	h.must(200, "PUT", "/api/frontends/smsc", map[string]string{"mode": "smpp", "url": "smpp://sb:pw@" + smsc.Addr + "?window=5"}, nil)
	polltest.Until(t, 20*time.Second, "the new bind", func() bool { n, _ := smsc.Binds(); return n == 2 })
	if n := smsc.Release(); n != 1 {
		t.Fatalf("the SMSC answered %d held submit_sm: the old connection is gone", n)
	}
	m := h.waitState("m-1", messages.StateDelivered)
	if n := len(smsc.Submits()); n != 1 || m.Attempts != 1 {
		t.Fatalf("the SMSC read m-1 %d times; %d attempts; history %+v", n, m.Attempts, m.History)
	}
	// Drained, the old worker stops and its connection unbinds; the
	// frontend's bind_state is the new connection's.
	polltest.Until(t, 20*time.Second, "the old connection's unbind", func() bool {
		return strings.Contains(scrape(t, h), `switchboard_smpp_frontend_pdus_total{command="unbind",direction="sent",frontend="smsc",status="ESME_ROK"} 1`)
	})
	if st := metricValue(t, scrape(t, h), `switchboard_smpp_frontend_bind_state{frontend="smsc",state="bound_trx"}`); st != 1 {
		t.Fatalf("bind_state{bound_trx} %v once the old connection unbound, with the new one bound", st)
	}
}

// TestFrontendChangeKeepsInFlightWebhook: the same for a webhook frontend
// whose URL changes while a call is under way: its answer went to the old
// worker, stopped by then, and was lost; the message was called again (at
// the new URL) once its lease ran out. The old worker now records it.
func TestFrontendChangeKeepsInFlightWebhook(t *testing.T) {
	var old, nu atomic.Int32
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	mux := http.NewServeMux()
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		old.Add(1)
		arrived <- struct{}{}
		<-release
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) {
		nu.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer let()
	cfg := testConfig(t)
	cfg.WebhookTimeout = 5 * time.Second // the held call waits for the change
	h := startNode(t, cfg)
	h.webhookFrontend("hook", srv.URL+"/old", "44")
	h.submit("m-1", "44123")
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("no call to the webhook")
	}
	h.must(200, "PUT", "/api/frontends/hook", map[string]string{"mode": "webhook", "url": srv.URL + "/new"}, nil)
	let()
	m := h.waitState("m-1", messages.StateDelivered)
	if m.Attempts != 1 || old.Load() != 1 || nu.Load() != 0 {
		t.Fatalf("%d attempts, %d calls to the old URL, %d to the new; history %+v", m.Attempts, old.Load(), nu.Load(), m.History)
	}
}
