package smppout

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
)

// sent records what the clients send to the workers.
type sent struct {
	mu   sync.Mutex
	msgs []any
}

func (s *sent) Send(msg any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, msg)
}

// kicks counts the kicks of frontend smsc's worker; anything else sent
// fails t.
func (s *sent) kicks(t *testing.T) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		if k, ok := m.(*messages.Kick); !ok || k.Frontend != "smsc" {
			t.Fatalf("a client sent %#v, want a kick of its frontend's worker", m)
		}
	}
	return len(s.msgs)
}

// newClients is a Clients with cfg's settings, on a SQLite store of its
// own and reconnecting as oneBind, closed at the test's end.
func newClients(t *testing.T, cfg Config) *Clients {
	t.Helper()
	cfg.Store, cfg.Reconnect = sqlitetest.Open(t), oneBind
	cs := NewClients(cfg)
	t.Cleanup(cs.Close)
	return cs
}

// getBound is cs's client of smscFrontend(url), once it has bound (what
// names that wait).
func getBound(t *testing.T, cs *Clients, url, what string) *Client {
	t.Helper()
	c, err := cs.Get(smscFrontend(url))
	if err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 20*time.Second, what, c.Bound)
	return c
}

// checkBindStateBound fails t unless c is bound and frontend smsc's
// bind_state says bound_trx, not closed.
func checkBindStateBound(t *testing.T, m *Metrics, c *Client) {
	t.Helper()
	bound := testutil.ToFloat64(m.state.WithLabelValues("smsc", "bound_trx"))
	closed := testutil.ToFloat64(m.state.WithLabelValues("smsc", "closed"))
	if !c.Bound() || bound != 1 || closed != 0 {
		t.Fatalf("the new client is bound (%v), but bind_state{bound_trx}=%v, {closed}=%v", c.Bound(), bound, closed)
	}
}

// TestClientsKickTheWorker: a client kicks its frontend's worker when it
// has bound and when it lost its bind.
func TestClientsKickTheWorker(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	workers := &sent{}
	cs := newClients(t, Config{Workers: workers})
	getBound(t, cs, "smpp://sb@"+smsc.Addr, "the bind")
	polltest.Until(t, 10*time.Second, "a kick once bound", func() bool { return workers.kicks(t) == 1 })
	smsc.DropAll()
	polltest.Until(t, 10*time.Second, "a kick once the bind is lost", func() bool { return workers.kicks(t) == 2 })
}

// TestClientRateShareFromTheFence: with a submit rate, a client submits
// only while this instance holds part of the ring's delivery work; a
// message it holds back meanwhile is deferred (our pacing: no attempt).
func TestClientRateShareFromTheFence(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	shares := ring.NewShares(0, nil)
	cs := newClients(t, Config{Fence: shares})
	c := getBound(t, cs, "smpp://sb@"+smsc.Addr+"?rate=100", "the bind")
	if v := submitHi(c); v.Status != messages.Retry || !v.Deferred || !strings.Contains(v.Reason, "no share of the submit rate") {
		t.Fatalf("a submit with no partition: %+v", v)
	}
	self := messages.RingMember{InstanceID: "i-0", Services: messages.AllServices,
		Ranges: []messages.TokenRange{{Lo: 0, Hi: math.MaxUint64}}}
	shares.Apply(messages.RingAssignment{Epoch: 1, Master: "i-0", Members: []messages.RingMember{self}}, "i-0", messages.AllServices)
	if v := submitHi(c); v.Status != messages.Delivered {
		t.Fatalf("a submit holding the whole ring: %+v", v)
	}
}

// newDeafSMSC starts an SMSC that takes every bind and answers
// enquire_link, but never answers an unbind (nor a submit_sm): a client
// closing on it waits its whole response timeout for the unbind_resp.
func newDeafSMSC(t *testing.T) *rawSMSC { return newRawSMSC(t, &rawSMSC{}) }

// TestReplacedClientDoesNotClobberBindState: Get with a changed URL
// replaces the frontend's client. The old one closed in the background,
// and its end (after its SMSC's unbind_resp, or the response timeout)
// set the frontend's bind_state to closed after the new client had bound:
// the gauge said closed while the frontend was bound. A replaced client
// writes the frontend's gauges no more.
func TestReplacedClientDoesNotClobberBindState(t *testing.T) {
	old := newDeafSMSC(t)
	nu := smsctest.New(t, "pw", nil)
	m := newMetrics(t)
	cs := newClients(t, Config{Metrics: m, ResponseTimeout: time.Second})
	c1 := getBound(t, cs, "smpp://sb@"+old.Addr, "the first bind")
	c2 := getBound(t, cs, "smpp://sb@"+nu.Addr, "the second bind")
	c1.Close() // the old client's end, whenever it comes
	checkBindStateBound(t, m, c2)
}

// TestClientsCloseWaitsForReplacedClient: a client that Get replaced was
// closed on a goroutine nobody waited for: it outlived Clients.Close (and
// the node's stop) while its SMSC did not answer the unbind. Close waits
// for it.
func TestClientsCloseWaitsForReplacedClient(t *testing.T) {
	old := newDeafSMSC(t)
	nu := smsctest.New(t, "pw", nil)
	cs := newClients(t, Config{ResponseTimeout: 3 * time.Second})
	c1 := getBound(t, cs, "smpp://sb@"+old.Addr, "the first bind")
	if _, err := cs.Get(smscFrontend("smpp://sb@" + nu.Addr)); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	select {
	case <-c1.done:
	default:
		c1.Close() // let the test end clean
		t.Fatal("Clients.Close returned while the client it replaced still runs")
	}
}

// TestClientsCloseWaitsForAReleasedClient: a client that its last
// worker's Release is closing (its unbind unanswered) is gone from the
// registry's clients, yet Close still waits for it: the node closes its
// store after Close, and the closing client may be recording the
// receipts it answered.
func TestClientsCloseWaitsForAReleasedClient(t *testing.T) {
	deaf := newDeafSMSC(t)
	cs := newClients(t, Config{ResponseTimeout: 3 * time.Second})
	c := getBound(t, cs, "smpp://sb@"+deaf.Addr, "the bind")
	released := make(chan struct{})
	go func() { defer close(released); cs.Release(c) }()
	polltest.Until(t, 20*time.Second, "the release to take the client out", func() bool {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		_, held := cs.users[c]
		return !held
	})
	cs.Close()
	select {
	case <-c.done:
	default:
		t.Error("Clients.Close returned while a client its Release was closing still runs")
	}
	<-released
}

// TestClientsKeepAReplacedClientForItsWorker: Get with a changed URL
// closed the old client at once, under the old worker's submits in flight.
// The old client is retired now: it stays bound for the worker that holds
// it (its submits are answered), no later Get returns it, and it closes
// when that worker releases it. A client two workers hold (a worker and
// the one that replaced it, same settings) closes with the last release.
func TestClientsKeepAReplacedClientForItsWorker(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	cs := newClients(t, Config{})
	c1 := getBound(t, cs, "smpp://sb@"+smsc.Addr+"?window=4", "the first bind")
	c2 := getBound(t, cs, "smpp://sb@"+smsc.Addr+"?window=5", "the second bind")
	if again, err := cs.Get(smscFrontend("smpp://sb@" + smsc.Addr + "?window=5")); err != nil || again != c2 {
		t.Fatalf("Get of the same settings: %p %v, want the client it has (%p)", again, err, c2)
	}
	if v := submitHi(c1); v.Status != messages.Delivered {
		t.Fatalf("the replaced client's submit: %+v", v)
	}
	cs.Release(c1)
	select {
	case <-c1.done:
	default:
		t.Fatal("the replaced client runs on once its worker released it")
	}
	cs.Release(c2)
	if !c2.Bound() || cs.States()["smsc"] != smpp.StateBoundTRX {
		t.Fatalf("a client still held stopped at a release: %v", cs.States())
	}
	cs.Release(c2)
	if _, ok := cs.States()["smsc"]; ok || c2.Bound() {
		t.Fatalf("the last release left the client: %v", cs.States())
	}
}

// TestReleaseLeavesTheNewClientsGauges: the last Release of a frontend's
// current client (its frontend deleted: the retiring worker drained)
// takes it out of the registry, closes it (unbind: up to the response
// timeout) and then drops the frontend's series (forget). A client Get
// made for a frontend of the same name meanwhile (created again) binds;
// the old client's end wrote closed on the gauges (its hold was not
// retired) and forget deleted them: bind_state said nothing of the bound
// client. Release now retires the old client's hold as it takes it out,
// and forgets the series only if no client of that name came since.
func TestReleaseLeavesTheNewClientsGauges(t *testing.T) {
	old := newDeafSMSC(t)
	nu := smsctest.New(t, "pw", nil)
	m := newMetrics(t)
	cs := newClients(t, Config{Metrics: m, ResponseTimeout: 2 * time.Second})
	c1 := getBound(t, cs, "smpp://sb@"+old.Addr, "the first bind")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); cs.Release(c1) }() // the deleted frontend's worker retired
	polltest.Until(t, 20*time.Second, "the release under way", func() bool { _, ok := cs.States()["smsc"]; return !ok })
	c2 := getBound(t, cs, "smpp://sb@"+nu.Addr, "the second bind") // created again
	wg.Wait()
	checkBindStateBound(t, m, c2)
}

// TestWindowInUseAfterReplace: Get retires the frontend's old client
// while a submit_sm of its worker is outstanding. The last window_in_use
// it wrote (1) stayed, since a retired client writes the gauges no more,
// and the new client wrote it only after a submit of its own or when its
// session ended: once that submit was answered nothing was outstanding on
// either connection, yet the gauge said 1 until the new client submitted
// something. The gauge is the new client's from its start, which writes
// its own (0).
func TestWindowInUseAfterReplace(t *testing.T) {
	smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) { return smpp.StatusOK, s.Conn == 1 })
	m := newMetrics(t)
	cs := newClients(t, Config{Metrics: m})
	c1 := getBound(t, cs, "smpp://sb@"+smsc.Addr+"?window=4", "the first bind")
	done := make(chan messages.DeliveryResult, 1)
	// The SMSC holds the answer until the second client has bound: the
	// submit's deadline must outlast the test's own waits for that (20 s
	// each), or a slow machine fails the submit instead (submitHi's 10 s).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { done <- submitHiWithin(ctx, c1) }()
	window := func() float64 { return testutil.ToFloat64(m.window.WithLabelValues("smsc")) }
	polltest.Until(t, 20*time.Second, "the submit outstanding", func() bool { return window() == 1 })
	getBound(t, cs, "smpp://sb@"+smsc.Addr+"?window=5", "the second bind")
	smsc.Release()
	if v := <-done; v.Status != messages.Delivered {
		t.Fatalf("the old client's submit: %+v", v)
	}
	if w := window(); w != 0 {
		t.Fatalf("window_in_use %v with no submit_sm outstanding on either connection", w)
	}
}
