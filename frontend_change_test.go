package switchboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/actors/delivery"
	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/clock"
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
	h := smppSubmitOut(t, cfg, smsc)
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

// heldCallConfig is a node's config whose webhook calls may be held for 5 s
// (held for a change, a delete or a stop).
func heldCallConfig(t *testing.T) switchboard.Config {
	cfg := testConfig(t)
	cfg.WebhookTimeout = 5 * time.Second
	return cfg
}

// heldWebhookCall starts a node of cfg whose webhook frontend "hook"
// (route 44) holds its call of m-1, and returns once the call has arrived.
func heldWebhookCall(t *testing.T, cfg switchboard.Config) (*harness, *heldHook) {
	t.Helper()
	h := startNode(t, cfg)
	hk := newHeldHook(t)
	h.webhookFrontend("hook", hk.URL, "44")
	h.submit("m-1", "44123")
	hk.held(t)
	return h, hk
}

// smppSubmitOut starts a node of cfg whose smpp frontend "smsc" (window=4,
// route 33) binds to smsc, and returns once m-1's submit_sm has reached it.
func smppSubmitOut(t *testing.T, cfg switchboard.Config, smsc *smsctest.SMSC) *harness {
	t.Helper()
	h := startNode(t, cfg)
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr+"?window=4", "33")
	polltest.Until(t, 20*time.Second, "the bind", smsc.Bound)
	h.submit("m-1", "33600000001")
	polltest.Until(t, 20*time.Second, "the submit", func() bool { return len(smsc.Submits()) == 1 })
	return h
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
			h, hk := heldWebhookCall(t, heldCallConfig(t)) // the held call waits for the delete
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
	cfg := heldCallConfig(t) // the held call waits for the stop
	h, hk := heldWebhookCall(t, cfg)
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

// TestFrontendChangeRestartKeepsInFlightWebhook: a retiring worker that
// restarts (a panic in a store round; workerLife keeps it retiring) started
// with a new dispatcher that had nothing in flight, so it was drained at
// once and stopped: the answer of the webhook call its previous incarnation
// still had under way went to a dead PID, and the message was called again
// (at the new URL) once its lease ran out. It now waits for the calls its
// previous incarnation had under way, until their deadline, and records
// their verdicts (late), as a worker that does not retire does ("kept").
func TestFrontendChangeRestartKeepsInFlightWebhook(t *testing.T) {
	for _, change := range []bool{false, true} {
		t.Run(map[bool]string{false: "kept", true: "changed"}[change], func(t *testing.T) { restartKeepsInFlight(t, change) })
	}
}

func restartKeepsInFlight(t *testing.T, change bool) {
	var mu sync.Mutex
	calls := map[string]int{}
	arrived := map[string]chan struct{}{"m-1": make(chan struct{}), "m-2": make(chan struct{})}
	release := map[string]chan struct{}{"m-1": make(chan struct{}), "m-2": make(chan struct{})}
	letAll := releaseAll(release)
	handler := func(path string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var m messages.Outgoing
			_ = jsonDecode(r, &m)
			mu.Lock()
			calls[path+" "+m.ID]++
			first := calls[path+" "+m.ID] == 1
			mu.Unlock()
			if path == "/old" && first {
				if ch, ok := arrived[m.ID]; ok {
					close(ch)
					<-release[m.ID]
				}
			}
			w.WriteHeader(http.StatusNoContent)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/old", handler("/old"))
	mux.HandleFunc("/new", handler("/new"))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer letAll()
	fs := newFaultyStore(t)
	cfg := testConfig(t)
	cfg.Store = fs
	cfg.WebhookTimeout = 3 * time.Second
	h := startNode(t, cfg)
	h.webhookFrontend("hook", srv.URL+"/old", "44")
	h.submit("m-1", "44123")
	h.submit("m-2", "44124")
	for _, id := range []string{"m-1", "m-2"} {
		select {
		case <-arrived[id]:
		case <-time.After(20 * time.Second):
			t.Fatalf("no call for %s", id)
		}
	}
	if change {
		h.must(200, "PUT", "/api/frontends/hook", map[string]string{"mode": "webhook", "url": srv.URL + "/new"}, nil)
	}
	// m-2's verdict: its round panics, the (retiring) worker restarts.
	fs.armFrom("CompleteWork", "delivery.(*Worker).run", 1, false)
	close(release["m-2"])
	waitRestarts(t, h, "delivery", 1)
	close(release["m-1"])
	m := h.waitState("m-1", messages.StateDelivered)
	mu.Lock()
	old, nu := calls["/old m-1"], calls["/new m-1"]
	mu.Unlock()
	if m.Attempts != 1 || old != 1 || nu != 0 {
		t.Fatalf("m-1: %d attempts, %d calls to the old URL, %d to the new; history %+v", m.Attempts, old, nu, m.History)
	}
}

// TestNodeStopRestartedWorkerKeepsDraining: a worker that restarts while
// the node drains (a panic in the round of a verdict) kept neither its
// drain nor what it had in flight: its next incarnation claimed again, and
// the stop waited for a drain that nobody would end, until
// --shutdown-timeout. It now drains on, and ends the drain once the
// verdicts of its previous incarnation's calls are recorded.
func TestNodeStopRestartedWorkerKeepsDraining(t *testing.T) {
	hold := map[string]chan struct{}{"m-1": make(chan struct{}), "m-2": make(chan struct{})}
	release := map[string]chan struct{}{"m-1": make(chan struct{}), "m-2": make(chan struct{})}
	var calls atomic.Int32
	letAll := releaseAll(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m messages.Outgoing
		_ = jsonDecode(r, &m)
		if calls.Add(1) <= 2 {
			close(hold[m.ID])
			<-release[m.ID]
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	defer letAll()
	fs := newFaultyStore(t)
	cfg := testConfig(t)
	cfg.Store = fs
	cfg.WebhookTimeout = 5 * time.Second
	cfg.ShutdownTimeout = 15 * time.Second
	h := startNode(t, cfg)
	h.webhookFrontend("hook", srv.URL, "44")
	h.submit("m-1", "44123")
	h.submit("m-2", "44124")
	for _, id := range []string{"m-1", "m-2"} {
		select {
		case <-hold[id]:
		case <-time.After(20 * time.Second):
			t.Fatalf("no call for %s", id)
		}
	}
	stopped := make(chan error, 1)
	go func() { stopped <- h.node.Stop(context.Background()) }()
	// The API is shut once the stop is past it: the drain comes next.
	polltest.Until(t, 20*time.Second, "the API shut", func() bool {
		resp, err := h.client.Get(h.base + "/healthz")
		if err != nil {
			return true
		}
		resp.Body.Close()
		return false
	})
	fs.armFrom("CompleteWork", "delivery.(*Worker).run", 1, false)
	close(release["m-2"])
	polltest.Eventually(t, 20*time.Second, func() error {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		if fs.tripped["CompleteWork"] < 1 {
			return fmt.Errorf("m-2's round has not panicked")
		}
		return nil
	})
	close(release["m-1"])
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	m, err := fs.GetMessage(context.Background(), "m-1")
	if err != nil || m.State != messages.StateDelivered || m.Attempts != 1 || calls.Load() != 2 {
		t.Fatalf("m-1 is %s, %d attempts (%v), %d calls; history %+v", m.State, m.Attempts, err, calls.Load(), m.History)
	}
}

// TestFrontendQuickChangesKeepTheirClient: changes of an smpp frontend
// close together (PUTs at once, or a shared directory's batch) spawned
// their workers back to back, and each worker's Started got its client
// (Clients.Get), in either order: when the later worker's Get ran first,
// the earlier one's retired the later one's client and became the
// registry's current client; that worker retired at once, and its Release
// closed its client and forgot the frontend: the frontend's worker
// delivered on a client the registry called retired, GET /api/frontends
// said bind_state closed and the bind_state series was gone. The
// supervisor now gets the clients itself, in the order of the changes.
func TestFrontendQuickChangesKeepTheirClient(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	h := startNode(t, testConfig(t))
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr+"?window=4", "33")
	polltest.Until(t, 20*time.Second, "the bind", smsc.Bound)
	state := func() string {
		var fes struct{ Frontends []messages.Frontend }
		h.must(200, "GET", "/api/frontends", nil, &fes)
		return fes.Frontends[0].BindState
	}
	for i := range 150 {
		var wg sync.WaitGroup
		for _, w := range []int{10 + 3*i, 11 + 3*i, 12 + 3*i} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.must(200, "PUT", "/api/frontends/smsc", map[string]string{"mode": "smpp", "url": fmt.Sprintf("smpp://sb:pw@%s?window=%d", smsc.Addr, w)}, nil)
			}()
		}
		wg.Wait()
		polltest.Eventually(t, 20*time.Second, func() error {
			if st := state(); st != "bound_trx" || !smsc.Bound() {
				return fmt.Errorf("round %d: GET /api/frontends says bind_state %q (SMSC bound: %v); bind_state series scraped: %v",
					i, st, smsc.Bound(), strings.Contains(scrape(t, h), `switchboard_smpp_frontend_bind_state{frontend="smsc"`))
			}
			return nil
		})
	}
	h.submit("m-1", "33600000001")
	if m := h.waitState("m-1", messages.StateDelivered); m.Attempts != 1 {
		t.Fatalf("m-1: %d attempts", m.Attempts)
	}
}

// TestFrontendWorkerOverBudget: a worker that used up its restart budget
// was stopped by its supervisor, which ignored the Terminated of a worker
// that did not retire: it stayed the frontend's worker, a dead PID, and
// the frontend delivered nothing ("kept"); a DELETE or a PUT then retired
// that dead worker, and the node's stop waited for its end, which had come
// already, until --shutdown-timeout ("deleted"). The supervisor now drops
// it, logs it, and spawns a new one a moment later (Supervisor.lost);
// neither a retirement nor a drain waits for a dead worker. Until the new
// one starts, GET /api/frontends says the frontend's worker is down and
// when the next starts, and switchboard_delivery_workers_down counts it
// (only a log line at error told before).
func TestFrontendWorkerOverBudget(t *testing.T) {
	for _, del := range []bool{false, true} {
		t.Run(map[bool]string{false: "kept", true: "deleted"}[del], func(t *testing.T) { workerOverBudget(t, del) })
	}
}

// heldClock is the wall clock but for the wake-ups scheduled from a
// function whose name contains caller: they wait until let go (release).
type heldClock struct {
	clock.Real
	caller string
	mu     sync.Mutex
	held   []func()
}

func (c *heldClock) AfterFunc(d time.Duration, f func()) func() bool {
	if !strings.Contains(string(debug.Stack()), c.caller) {
		return c.Real.AfterFunc(d, f)
	}
	var once sync.Once
	ran := false
	run := func() { once.Do(func() { ran = true; f() }) }
	c.mu.Lock()
	c.held = append(c.held, run)
	c.mu.Unlock()
	return func() bool {
		stopped := false
		once.Do(func() { stopped = true })
		return stopped && !ran
	}
}

// release fires the wake-ups held so far (those cancelled do nothing).
func (c *heldClock) release() {
	c.mu.Lock()
	held := c.held
	c.held = nil
	c.mu.Unlock()
	for _, f := range held {
		go f()
	}
}

func workerOverBudget(t *testing.T, del bool) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	fs := newFaultyStore(t)
	clk := &heldClock{caller: "delivery.(*Supervisor).lost"} // the respawn's wake-up
	cfg := testConfig(t)
	cfg.Store = fs
	cfg.Clock = clk
	cfg.ShutdownTimeout = 15 * time.Second
	h := startNode(t, cfg)
	// More panics than the budget's 10 restarts: the worker is stopped.
	fs.armFrom("ClaimWork", "delivery.(*Worker).run", 11, false)
	before := time.Now()
	h.webhookFrontend("hook", srv.URL, "44")
	polltest.Eventually(t, 20*time.Second, func() error {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		if n := fs.tripped["ClaimWork"]; n < 11 {
			return fmt.Errorf("%d panics", n)
		}
		return nil
	})
	const down = "switchboard_delivery_workers_down"
	hook := func() messages.Frontend {
		var fes struct{ Frontends []messages.Frontend }
		h.must(200, "GET", "/api/frontends", nil, &fes)
		if len(fes.Frontends) != 1 {
			t.Fatalf("frontends %+v", fes.Frontends)
		}
		return fes.Frontends[0]
	}
	polltest.Eventually(t, 20*time.Second, func() error {
		if fe := hook(); fe.Worker != messages.WorkerDown || fe.WorkerRestartAt == nil {
			return fmt.Errorf("GET /api/frontends: worker %q, restart at %v while it is down", fe.Worker, fe.WorkerRestartAt)
		}
		return nil
	})
	if at := *hook().WorkerRestartAt; at.Before(before.Add(time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("worker_restart_at %v: want a second after the worker stopped (between %v and now)", at, before)
	}
	if n := metricValue(t, scrape(t, h), down); n != 1 {
		t.Errorf("%s = %v while the worker is down", down, n)
	}
	var st struct{ Frontends []messages.Frontend }
	if h.must(200, "GET", "/api/status", nil, &st); len(st.Frontends) != 1 || st.Frontends[0].Worker != messages.WorkerDown {
		t.Errorf("GET /api/status: frontends %+v while the worker is down", st.Frontends)
	}
	if del {
		h.deleteFrontend("hook", "44")
	} else {
		h.submit("m-1", "44123")
		clk.release()
		if m := h.waitState("m-1", messages.StateDelivered); m.Attempts != 1 || calls.Load() != 1 {
			t.Fatalf("m-1: %d attempts, %d calls", m.Attempts, calls.Load())
		}
		if fe := hook(); fe.Worker != "" || fe.WorkerRestartAt != nil {
			t.Errorf("GET /api/frontends: worker %q, restart at %v once the new worker delivered", fe.Worker, fe.WorkerRestartAt)
		}
	}
	if n := metricValue(t, scrape(t, h), down); n != 0 {
		t.Errorf("%s = %v once the frontend has a worker again, or is gone", down, n)
	}
	if err := h.node.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// TestWorkerRestartInheritedCallsTakeTheirSlots: a webhook worker that
// restarts (a panic in the round of a verdict) with calls under way hands
// them to its next incarnation, whose verdicts they are. That one counted
// none of them against its bound (delivery.DefaultMaxInFlight): it claimed
// every slot again, and the frontend had up to twice the bound of calls at
// once until the inherited ones ended. They now take their slots until
// their verdict comes (or their deadline passes): the next incarnation
// claims only what they leave, and the rest once they end.
func TestWorkerRestartInheritedCallsTakeTheirSlots(t *testing.T) {
	const bound = delivery.DefaultMaxInFlight
	const n = bound + 8
	// No call times out: the inherited ones end with their verdicts.
	hook, fs, h, ids := gatedHookNode(t, n, time.Minute, "m-%02d")
	// The worker has its bound of calls under way, held at the frontend.
	first := hook.next(t)
	for range bound - 1 {
		hook.next(t)
	}
	// first's verdict: its round panics, the worker restarts with the
	// other calls under way.
	fs.armFrom("CompleteWork", "delivery.(*Worker).run", 1, false)
	hook.let(first)
	waitRestarts(t, h, "delivery", 1)

	// The next incarnation claims: a call comes. Then every message
	// claimed (an attempt counted) is called.
	hook.next(t)
	polltest.Eventually(t, 20*time.Second, func() error {
		claimed := 0
		for _, id := range ids {
			if h.message(id).Attempts > 0 {
				claimed++
			}
		}
		if called := hook.calledCount(); called != claimed {
			return fmt.Errorf("%d messages called of %d claimed", called, claimed)
		}
		return nil
	})
	if most := hook.mostAtOnce(); most > bound {
		t.Fatalf("the frontend had %d calls at once after the worker restarted, more than its bound of %d", most, bound)
	}

	// The inherited calls end: their verdicts are recorded, their slots
	// freed, and the messages left are delivered within the bound. first's
	// verdict, in the round that panicked, was recorded by the next
	// incarnation's first round (TestWorkerRestartKeepsItsVerdicts).
	hook.letAll()
	for _, id := range ids {
		if m := h.waitState(id, messages.StateDelivered); m.Attempts != 1 {
			t.Fatalf("%s: %d attempts; history %+v", id, m.Attempts, m.History)
		}
	}
	if most := hook.mostAtOnce(); most > bound {
		t.Fatalf("the frontend had %d calls at once, more than the worker's bound of %d", most, bound)
	}
}

// gatedHook is a webhook frontend that holds each call until it is let go
// (let, letAll), and counts the calls under way at once.
type gatedHook struct {
	arrived chan string // the id of each call as it comes
	mu      sync.Mutex
	open    bool                     // from now on calls are not held
	gates   map[string]chan struct{} // by message id
	called  map[string]int           // calls, by message id
	now     int
	most    int
}

// gatedHookNode starts a node on a faulty store whose webhook frontend
// "hook" (prefix 44) is a gatedHook for n messages, with webhookTimeout,
// and submits the n messages (ids after idFormat), each to its own number.
func gatedHookNode(t *testing.T, n int, webhookTimeout time.Duration, idFormat string) (*gatedHook, *faultyStore, *harness, []string) {
	t.Helper()
	hook := newGatedHook(n)
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	fs := newFaultyStore(t)
	cfg := testConfig(t)
	cfg.Store = fs
	cfg.WebhookTimeout = webhookTimeout
	h := startNode(t, cfg)
	t.Cleanup(hook.letAll) // first: the node's stop and the server's close wait for the calls held
	h.webhookFrontend("hook", srv.URL, "44")
	ids := make([]string, n)
	for i := range ids {
		ids[i] = h.submit(fmt.Sprintf(idFormat, i), fmt.Sprintf("44%03d", i))
	}
	return hook, fs, h, ids
}

func newGatedHook(n int) *gatedHook {
	return &gatedHook{arrived: make(chan string, 4*n), gates: map[string]chan struct{}{}, called: map[string]int{}}
}

func (g *gatedHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m messages.Outgoing
	_ = jsonDecode(r, &m)
	gate := make(chan struct{})
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	g.called[m.ID]++
	if g.open {
		close(gate)
	} else {
		g.gates[m.ID] = gate
	}
	g.mu.Unlock()
	select {
	case g.arrived <- m.ID:
	default: // nobody looks any more
	}
	<-gate
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// next is the id of the next call (it fails the test after 20 s).
func (g *gatedHook) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-g.arrived:
		return id
	case <-time.After(20 * time.Second):
		t.Fatal("no call")
		return ""
	}
}

// let lets the call of id go.
func (g *gatedHook) let(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gate, ok := g.gates[id]; ok {
		close(gate)
		delete(g.gates, id)
	}
}

// letAll lets every call go, those to come included.
func (g *gatedHook) letAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = true
	for id, gate := range g.gates {
		close(gate)
		delete(g.gates, id)
	}
}

func (g *gatedHook) calledCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.called)
}

// callsOf is how many calls of id came.
func (g *gatedHook) callsOf(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.called[id]
}

func (g *gatedHook) mostAtOnce() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// releaseAll is a func that closes every channel of release not closed
// yet, once: a test's cleanup lets all held calls go.
func releaseAll(release map[string]chan struct{}) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, ch := range release {
				select {
				case <-ch:
				default:
					close(ch)
				}
			}
		})
	}
}

// TestFrontendChangeLosesNoHandedOverWork: a webhook frontend is
// re-pointed again and again (PUT), and after each PUT has returned a few
// messages are submitted at once. The webhook answers every call 204; a
// message gets one attempt (--delivery-max-attempts 1). Every message must
// be delivered, each with one call. The retired worker's handover offer
// outlived the PUT: the intake wrote new messages leased to it, and it
// stopped (nothing in flight) before its Work arrived, which was lost with
// its mailbox. Such a message waited for the push lease (2 x
// --webhook-timeout + 5 s) with an attempt counted and no call made, and
// here failed max_attempts ("no verdict after 1 attempts") although the
// frontend never saw it. The retiring worker now waits for what the board
// owes it and gives it back to its successor.
func TestFrontendChangeLosesNoHandedOverWork(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	cfg := testConfig(t)
	cfg.DeliveryMaxAttempts = 1
	h := startNode(t, cfg)
	h.webhookFrontend("hook", srv.URL+"/u0", "44")
	const changes, per = 200, 3
	var ids []string
	for i := 1; i <= changes; i++ {
		h.must(200, "PUT", "/api/frontends/hook", map[string]string{"mode": "webhook", "url": fmt.Sprintf("%s/u%d", srv.URL, i)}, nil)
		var wg sync.WaitGroup
		for j := range per {
			id := fmt.Sprintf("m-%d-%d", i, j)
			ids = append(ids, id)
			wg.Go(func() {
				if status, body := h.do("POST", "/api/messages", map[string]string{"id": id, "source_msisdn": "15550001", "destination_msisdn": "44123", "message_body": "hello"}); status != 202 {
					t.Errorf("submit %s: %d %s", id, status, body)
				}
			})
		}
		wg.Wait()
	}
	var bad []string
	for _, id := range ids {
		m := h.final(id, 30*time.Second)
		mu.Lock()
		c := calls[id]
		mu.Unlock()
		if m.State != messages.StateDelivered || c != 1 {
			bad = append(bad, fmt.Sprintf("%s: %s (%s) after %d calls, %d attempts; history %+v", id, m.State, m.Reason, c, m.Attempts, m.History))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d of %d messages not delivered once:\n%v", len(bad), len(ids), bad)
	}
}

// TestPullFrontendChangeKeepsPolledVerdict: a pull frontend's consumer
// polled a message (leased to it for 2 s) and delivered it; before its
// ack, the operator changes the frontend to a webhook (a migration from
// pull to push). docs/api.md: what a worker has under way at a change is
// still answered and recorded. The consumer's ack was refused 409
// not_pull_frontend: the verdict was lost, and once the lease ran out the
// webhook got the message a second time. The old pull worker stays while
// the leases of what it offered run (within its retirement's bound) and
// takes the acks meanwhile.
func TestPullFrontendChangeKeepsPolledVerdict(t *testing.T) {
	h := startNode(t, testConfig(t))
	var calls atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	h.pullFrontend("p", "46")
	id := h.submit("", "46123")
	if got := h.poll("p", 1, 2000, 5000); len(got) != 1 { // leased for 5 s: the PUT and the ack come well within it
		t.Fatalf("poll %+v", got)
	}
	h.must(200, "PUT", "/api/frontends/p", map[string]string{"mode": "webhook", "url": hook.URL}, nil)
	status, body := h.do("POST", "/api/frontends/p/ack", map[string]any{"results": []messages.DeliveryResult{{ID: id, Status: messages.Delivered}}})
	time.Sleep(6 * time.Second) // past the poll's lease
	m := h.message(id)
	if status != 200 || calls.Load() != 0 || m.State != messages.StateDelivered {
		t.Fatalf("the consumer's ack of a message it polled before the change: %d %s; the webhook got it %d times; message %s, %d attempts",
			status, body, calls.Load(), m.State, m.Attempts)
	}
}
