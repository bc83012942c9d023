package switchboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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

// heldHook is a webhook whose first call waits for let, then answers 200;
// the others answer 200 at once. It counts the calls.
type heldHook struct {
	*httptest.Server
	calls   atomic.Int32
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

// newHeldHook starts a heldHook; start it after the node, so that the
// test's end lets its held call go before the node stops.
func newHeldHook(t *testing.T) *heldHook {
	hk := &heldHook{arrived: make(chan struct{}), release: make(chan struct{})}
	hk.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hk.calls.Add(1) == 1 {
			close(hk.arrived)
			<-hk.release
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(func() { hk.let(); hk.Close() })
	return hk
}

// let lets the held call answer.
func (hk *heldHook) let() { hk.once.Do(func() { close(hk.release) }) }

// held waits for the first call.
func (hk *heldHook) held(t *testing.T) {
	t.Helper()
	select {
	case <-hk.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("no call to the webhook")
	}
}

// deleteFrontend deletes a frontend and the route to it.
func (h *harness) deleteFrontend(name, prefix string) {
	h.t.Helper()
	h.must(204, "DELETE", "/api/routes/"+prefix, nil, nil)
	h.must(204, "DELETE", "/api/frontends/"+name, nil, nil)
}

// TestFrontendDeleteKeepsInFlightWebhook: a DELETE of a webhook frontend
// while a call to it is under way stopped its worker at once: the call's
// answer (200) went to a dead PID, and the message stayed leased with its
// verdict lost; once the lease ran out it was called again if the
// frontend came back (or its message was routed again), else it waited.
// The deleted frontend's worker now retires as a changed one does: it
// records the verdict, even with a frontend of the same name back and
// its new worker running.
func TestFrontendDeleteKeepsInFlightWebhook(t *testing.T) {
	for _, back := range []bool{false, true} {
		t.Run(map[bool]string{false: "deleted", true: "back"}[back], func(t *testing.T) {
			cfg := testConfig(t)
			cfg.WebhookTimeout = 5 * time.Second // the held call waits for the delete
			h := startNode(t, cfg)
			hk := newHeldHook(t)
			h.webhookFrontend("hook", hk.URL, "44")
			h.submit("m-1", "44123")
			hk.held(t)
			h.deleteFrontend("hook", "44")
			if back {
				h.webhookFrontend("hook", hk.URL, "44")
			}
			hk.let()
			m := h.waitState("m-1", messages.StateDelivered)
			if m.Attempts != 1 || hk.calls.Load() != 1 {
				t.Fatalf("%d attempts, %d calls; history %+v", m.Attempts, hk.calls.Load(), m.History)
			}
		})
	}
}

// TestFrontendDeleteKeepsInFlightSubmit: the same for an smpp frontend
// whose submit_sm awaits its response: the worker's stop released its
// client, which unbound under the submit. The connection now stays bound
// until the retiring worker has the response and records it, then
// unbinds; a frontend of the same name and settings created meanwhile
// shares it (no second bind) and keeps it bound.
func TestFrontendDeleteKeepsInFlightSubmit(t *testing.T) {
	for _, back := range []bool{false, true} {
		t.Run(map[bool]string{false: "deleted", true: "back"}[back], func(t *testing.T) {
			smsc := smsctest.New(t, "pw", func(smsctest.Submit) (smpp.Status, bool) { return smpp.StatusOK, true })
			cfg := testConfig(t)
			cfg.WebhookTimeout = 5 * time.Second // the held submit waits for the delete
			h := startNode(t, cfg)
			url := "smpp://sb:pw@" + smsc.Addr + "?window=4"
			h.smppFrontend("smsc", url, "33")
			polltest.Until(t, 20*time.Second, "the bind", smsc.Bound)
			h.submit("m-1", "33600000001")
			polltest.Until(t, 20*time.Second, "the submit", func() bool { return len(smsc.Submits()) == 1 })
			h.deleteFrontend("smsc", "33")
			if back {
				h.smppFrontend("smsc", url, "33")
			}
			if n := smsc.Release(); n != 1 {
				t.Fatalf("the SMSC answered %d held submit_sm: the connection is gone", n)
			}
			m := h.waitState("m-1", messages.StateDelivered)
			if n := len(smsc.Submits()); n != 1 || m.Attempts != 1 {
				t.Fatalf("the SMSC read m-1 %d times; %d attempts; history %+v", n, m.Attempts, m.History)
			}
			if !back {
				polltest.Until(t, 20*time.Second, "the unbind once the worker retired", func() bool { return !smsc.Bound() })
				return
			}
			// The new worker's submits go on the same connection.
			h.submit("m-2", "33600000002")
			polltest.Until(t, 20*time.Second, "the second submit", func() bool { return len(smsc.Submits()) == 2 })
			smsc.Release()
			h.waitState("m-2", messages.StateDelivered)
			if n, _ := smsc.Binds(); n != 1 || smsc.Submits()[1].Conn != 1 {
				t.Fatalf("%d binds, m-2 on connection %d: the frontend back did not keep the bound client", n, smsc.Submits()[1].Conn)
			}
		})
	}
}

// TestNodeStopKeepsDeletedFrontendsInFlight: a node that stops while the
// worker of a deleted frontend still waits for a webhook's answer records
// the verdict before it closes the store (its drain waits for retiring
// workers): after a restart the message is delivered, once.
func TestNodeStopKeepsDeletedFrontendsInFlight(t *testing.T) {
	cfg := testConfig(t)
	cfg.WebhookTimeout = 5 * time.Second // the held call waits for the stop
	h := startNode(t, cfg)
	hk := newHeldHook(t)
	h.webhookFrontend("hook", hk.URL, "44")
	h.submit("m-1", "44123")
	hk.held(t)
	h.deleteFrontend("hook", "44")
	stopped := make(chan struct{})
	go func() { defer close(stopped); h.stop() }()
	polltest.Until(t, 20*time.Second, "the stop under way", func() bool {
		resp, err := h.client.Get(h.base + "/readyz")
		if err != nil {
			return true
		}
		resp.Body.Close()
		return resp.StatusCode != http.StatusOK
	})
	hk.let()
	<-stopped
	cfg.Listen, cfg.MetricsListen = "127.0.0.1:0", "127.0.0.1:0"
	m := startNode(t, cfg).message("m-1")
	if m.State != messages.StateDelivered || m.Attempts != 1 || hk.calls.Load() != 1 {
		t.Fatalf("after the restart m-1 is %s, %d attempts, %d calls; history %+v", m.State, m.Attempts, hk.calls.Load(), m.History)
	}
}

// heldFrontend is an in-process frontend actor that hands each Delivery
// to got as the function that answers it Delivered.
type heldFrontend struct{ got chan func() }

func (f *heldFrontend) Receive(c actor.Context) {
	if d, ok := c.Message().(*messages.Delivery); ok {
		sys, to := c.ActorSystem(), c.Sender()
		f.got <- func() {
			sys.Root.Send(to, &messages.DeliveryResult{ID: d.Message.ID, Attempt: d.Message.Attempt, Status: messages.Delivered})
		}
	}
}

// TestFrontendDeleteKeepsInFlightDelivery: the same for an in-process
// frontend whose actor answers a Delivery after DeleteFrontend
// unregistered it: the answer is recorded.
func TestFrontendDeleteKeepsInFlightDelivery(t *testing.T) {
	cfg := embeddedConfig(t)
	cfg.WebhookTimeout = 5 * time.Second // the held delivery waits for the delete
	n := startNode(t, cfg).node
	fe := &heldFrontend{got: make(chan func(), 1)}
	serveActor(t, n, "held-gateway", "gw", "46", fe)
	ctx := context.Background()
	m, _, err := n.Submit(ctx, messages.Submission{SourceMSISDN: "1", DestinationMSISDN: "46701", Body: "hej"})
	if err != nil {
		t.Fatal(err)
	}
	var answer func()
	select {
	case answer = <-fe.got:
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery to the actor")
	}
	if err := n.DeleteRoute(ctx, "46"); err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteFrontend(ctx, "gw"); err != nil {
		t.Fatal(err)
	}
	answer()
	polltest.Eventually(t, 20*time.Second, func() error {
		got, err := n.Message(ctx, m.ID)
		if err == nil && (got.State != messages.StateDelivered || got.Attempts != 1) {
			err = fmt.Errorf("%s is %s, %d attempts", m.ID, got.State, got.Attempts)
		}
		return err
	})
}
