package switchboard_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/actors/bus/bustest"
	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// busSite starts instances of one site on one Postgres schema with the
// delivery bus at url, and waits for their ring.
func busSite(t *testing.T, url string, ids ...string) []*harness {
	t.Helper()
	dsn := pgtest.DSN(t)
	var hs []*harness
	for _, id := range ids {
		cfg := siteConfig(t, dsn, id)
		cfg.NatsURL = url
		hs = append(hs, startNode(t, cfg))
	}
	waitRing(t, hs, ids...)
	return hs
}

// busState is the bus part of /api/status.
type busState struct {
	Delivery string
	Bus      *struct{ State, Stream, Reason string }
}

func (h *harness) busState() busState {
	h.t.Helper()
	var s busState
	h.must(200, "GET", "/api/status", nil, &s)
	return s
}

func (h *harness) readyz() map[string]string {
	h.t.Helper()
	var doc map[string]string
	h.must(200, "GET", "/readyz", nil, &doc)
	return doc
}

// waitBus waits until every instance says its delivery comes from the bus.
func waitBus(t *testing.T, hs []*harness, state string) {
	t.Helper()
	polltest.Eventually(t, 20*time.Second, func() error {
		for _, h := range hs {
			if st := h.busState(); st.Bus == nil || st.Bus.State != state {
				return fmt.Errorf("%s: bus %+v, want %s", h.cfg.InstanceID, st.Bus, state)
			}
		}
		return nil
	})
}

// countingHook counts the deliveries a webhook frontend received by id.
type countingHook struct {
	mu  sync.Mutex
	got map[string]int
}

func (c *countingHook) calls(w *webhookFrontend) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = map[string]int{}
	for _, call := range w.seen() {
		if call.Status/100 == 2 {
			c.got[call.ID]++
		}
	}
	return c.got
}

// TestBusSiteDeliversEachMessageOnce: two instances of one site with the
// bus deliver every message once to a pull frontend polled at both and to
// a webhook (one that asks for a retry first: the retry's row goes back to
// the outbox, and the relay publishes it when it is due), whichever
// instance accepted it; the bus's metrics count what was published and
// settled.
func TestBusSiteDeliversEachMessageOnce(t *testing.T) {
	nats := bustest.Start(t)
	hs := busSite(t, nats.URL(), "n1", "n2")
	waitBus(t, hs, "up")
	if st := hs[0].busState(); st.Delivery != "bus" || st.Bus.Stream != "SWITCHBOARD_site-a" {
		t.Fatalf("status %+v, want delivery bus on stream SWITCHBOARD_site-a", st)
	}
	if doc := hs[1].readyz(); doc["bus"] != "up" {
		t.Fatalf("readyz %v, want bus up", doc)
	}
	if st := hs[1].ringStatus(); st.Delivery != "bus" {
		t.Fatalf("ring status delivery %q, want bus", st.Delivery)
	}
	hs[0].pullFrontend("fe", "44")
	wh := newWebhook(t, 503)
	hs[1].webhookFrontend("hook", wh.srv.URL, "45")

	var pulled, pushed []string
	for i := range 60 {
		pulled = append(pulled, hs[i%2].submit(fmt.Sprintf("p%03d", i), "4470000"+fmt.Sprint(i)))
		pushed = append(pushed, hs[(i+1)%2].submit(fmt.Sprintf("w%03d", i), "4570000"+fmt.Sprint(i)))
	}
	got := map[string]int{}
	consume(t, hs, got, len(pulled))
	for _, id := range append(pulled, pushed...) {
		hs[i2(id)].waitState(id, messages.StateDelivered)
	}
	hook := &countingHook{}
	calls := hook.calls(wh)
	for _, id := range pushed {
		if calls[id] != 1 {
			t.Errorf("%s delivered to the webhook %d times", id, calls[id])
		}
	}
	// Nobody polled while the messages were submitted: the pull frontend's
	// work went through the bus, but for what waited longer than the bus's
	// overdue time (10 s) before the first poll came, which the backstop
	// claimed from the store, as designed: on a loaded machine the 120
	// submits before the first poll take that long (a CI run acked 47 of
	// 60 on the bus). The webhook's work was mostly handed over in memory
	// by the instance that accepted it (its worker was ready); its retries
	// were published by the relay as they fell due. consume checked each message was offered
	// once, whichever way it came. A bus message is acked after its
	// outcome's commit: the last acks may still be on their way when the
	// store says delivered.
	var published, acked float64
	read := func() {
		published, acked = 0, 0
		for _, h := range hs {
			text := scrape(t, h)
			published += metricValue(t, text, "switchboard_bus_published_total")
			acked += metricValue(t, text, `switchboard_bus_settled_total{action="acked",frontend="fe"}`)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for read(); acked < float64(len(pulled)) && time.Now().Before(deadline); read() {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("pull messages acked on the bus: %v of %d (the rest claimed by the backstop)", acked, len(pulled))
	for _, h := range hs {
		if up := metricValue(t, scrape(t, h), "switchboard_bus_up"); up != 1 {
			t.Errorf("%s: switchboard_bus_up %v", h.cfg.InstanceID, up)
		}
	}
	if published < float64(len(pulled)+1) {
		t.Errorf("published %v, want at least the %d pull messages and the webhook's retry", published, len(pulled))
	}
	if acked < 1 {
		t.Errorf("no pull message was acked on the bus (published %v)", published)
	}
}

// i2 spreads reads over two instances by id.
func i2(id string) int { return int(id[len(id)-1]) % 2 }

// TestBusDownSubmitsGoOnAndWorkIsRelayedWhenItReturns: with NATS stopped
// an instance stays ready (readyz 200, bus down), accepts submits and
// delivers them from the store; work committed while it was down is
// relayed when NATS returns (the relay's lag goes back to 0), and delivery
// goes through the bus again, each message once.
func TestBusDownSubmitsGoOnAndWorkIsRelayedWhenItReturns(t *testing.T) {
	nats := bustest.Start(t)
	hs := busSite(t, nats.URL(), "d1")
	h := hs[0]
	waitBus(t, hs, "up")
	wh := newWebhook(t)
	h.webhookFrontend("hook", wh.srv.URL, "45")
	h.pullFrontend("fe", "44") // nobody polls it while NATS is down

	nats.Stop()
	waitBus(t, hs, "down")
	doc := h.readyz()
	if doc["status"] != "ready" || doc["bus"] != "down" {
		t.Fatalf("readyz with NATS down: %v", doc)
	}
	if st := h.busState(); st.Delivery != "store" {
		t.Fatalf("delivery %q with the bus down, want store", st.Delivery)
	}
	if st := h.ringStatus(); st.Delivery != "ring" {
		t.Fatalf("ring status delivery %q with the bus down, want ring", st.Delivery)
	}
	var ids, waiting []string
	for i := range 20 {
		ids = append(ids, h.submit(fmt.Sprintf("down-%02d", i), "4570000"+fmt.Sprint(i)))
		waiting = append(waiting, h.submit(fmt.Sprintf("wait-%02d", i), "4470000"+fmt.Sprint(i)))
	}
	for _, id := range ids {
		h.waitState(id, messages.StateDelivered) // from the store, the ring's path
	}
	if lag := metricValue(t, scrape(t, h), `switchboard_bus_relay_lag_seconds{node="site-a"}`); lag < 0 {
		t.Fatalf("lag %v", lag)
	}

	nats.Restart()
	waitBus(t, hs, "up")
	polltest.Eventually(t, 20*time.Second, func() error {
		text := scrape(t, h)
		if lag := metricValue(t, text, `switchboard_bus_relay_lag_seconds{node="site-a"}`); lag != 0 {
			return fmt.Errorf("relay lag %v", lag)
		}
		if p := metricValue(t, text, "switchboard_bus_published_total"); p < float64(len(waiting)) {
			return fmt.Errorf("published %v of the %d waiting", p, len(waiting))
		}
		return nil
	})
	// The pull frontend's work, relayed on the bus's return, is delivered
	// through the bus.
	got := map[string]int{}
	consume(t, hs, got, len(waiting))
	for _, id := range waiting {
		h.waitState(id, messages.StateDelivered)
	}
	if a := metricValue(t, scrape(t, h), `switchboard_bus_settled_total{action="acked",frontend="fe"}`); a < float64(len(waiting)) {
		t.Errorf("%v pull messages acked on the bus after its return, want %d", a, len(waiting))
	}
	more := h.submit("after", "45123")
	h.waitState(more, messages.StateDelivered)
	hook := &countingHook{}
	calls := hook.calls(wh)
	for _, id := range append(ids, more) {
		if calls[id] != 1 {
			t.Errorf("%s delivered to the webhook %d times", id, calls[id])
		}
	}
}

// TestBusRefusedWithTheEmbeddedStore: --nats-url needs the shared store.
func TestBusRefusedWithTheEmbeddedStore(t *testing.T) {
	cfg := testConfig(t)
	cfg.NatsURL = "nats://127.0.0.1:4222"
	_, err := switchboard.New(cfg)
	if err == nil || !strings.Contains(err.Error(), "NatsURL: the delivery bus needs the shared store (Postgres)") {
		t.Fatalf("New with --nats-url on the embedded store: %v", err)
	}
	cfg = testConfig(t)
	cfg.NatsStream = "S"
	if _, err := switchboard.New(cfg); err == nil || !strings.Contains(err.Error(), "NatsStream: given without NatsURL") {
		t.Fatalf("New with --nats-stream alone: %v", err)
	}
	cfg = testConfig(t)
	cfg.Postgres, cfg.NatsURL, cfg.NatsStream = "postgres://x", "nats://127.0.0.1:4222", "a.b"
	if _, err := switchboard.New(cfg); err == nil || !strings.Contains(err.Error(), "NatsStream:") {
		t.Fatalf("New with a stream name holding '.': %v", err)
	}
}

// TestBusURLPasswordIsNeverShown: a --nats-url may carry a user and
// password. While the bus is not connected, GET /readyz (which needs no
// token) and GET /api/status say which servers it waits for, with the
// password as xxxxx; so does a start-up error about the URL.
func TestBusURLPasswordIsNeverShown(t *testing.T) {
	const secret = "hunter2-nats-secret"
	cfg := testConfig(t)
	cfg.Postgres, cfg.NatsURL = "postgres://db/x", "nats://alice:"+secret+"@127.0.0.1:99999"
	if _, err := switchboard.New(cfg); err == nil || strings.Contains(err.Error(), secret) ||
		!strings.Contains(err.Error(), "alice:xxxxx@127.0.0.1:99999") {
		t.Errorf("New with a bad port in --nats-url: %v, want the error to name the URL without its password", err)
	}

	cfg = siteConfig(t, pgtest.DSN(t), "site-a-0")
	cfg.NatsURL = "nats://alice:" + secret + "@127.0.0.1:1" // nothing listens there: the bus stays down
	h := startNode(t, cfg)
	anon := h.as("")
	status, body := anon.do("GET", "/readyz", nil)
	if status != 200 || strings.Contains(string(body), secret) || !strings.Contains(string(body), "nats://alice:xxxxx@127.0.0.1:1") {
		t.Errorf("GET /readyz without a token: %d %s, want the bus's URL without its password", status, body)
	}
	if st := h.busState(); st.Bus == nil || strings.Contains(st.Bus.Reason, secret) {
		t.Errorf("GET /api/status: bus %+v shows the password", st.Bus)
	}
}

// TestBusQuietPollsGoRoundTheInstances: at a quiet time a consumer whose
// long polls go round the instances (a load balancer that spreads its
// requests) gets each message at once, through the bus, from whichever
// instance accepted it. An instance whose consumer polls elsewhere now
// keeps no work at hand for it: neither new work (a poll that waited
// before its answer opens no window of room for the next poll) nor what
// its own fetch, started for a poll that has left, brings in after (it
// is handed back to the bus). Before, the first message went to the
// fetch the check of the frontend's poll had started at the other
// instance, and waited there at hand for its 30 s lease.
func TestBusQuietPollsGoRoundTheInstances(t *testing.T) {
	nats := bustest.Start(t)
	hs := busSite(t, nats.URL(), "q1", "q2")
	waitBus(t, hs, "up")
	hs[0].pullFrontend("fe", "44")
	apis := []*apiclient.Client{hs[0].api().API, hs[1].api().API}
	polltest.Eventually(t, 20*time.Second, func() error { // every instance knows the frontend
		_, err := apis[1].Poll(context.Background(), "fe", 1, 0, 0)
		return err
	})
	type polled struct {
		ms  []messages.Outgoing
		err error
	}
	for k := range 8 {
		at, by := k%2, (k+1)%2
		got := make(chan polled, 1)
		go func() {
			ms, err := apis[at].Poll(context.Background(), "fe", 10, 5000, 30_000)
			got <- polled{ms, err}
		}()
		time.Sleep(300 * time.Millisecond) // the poll waits at hs[at]
		id := hs[by].submit(fmt.Sprintf("q%02d", k), fmt.Sprintf("44700%02d", k))
		start := time.Now()
		p := <-got
		if p.err != nil || len(p.ms) != 1 || p.ms[0].ID != id {
			t.Fatalf("poll %d at %s: %d messages %+v, err %v; want %s, accepted at %s, within the poll's 5s", k,
				hs[at].cfg.InstanceID, len(p.ms), p.ms, p.err, id, hs[by].cfg.InstanceID)
		}
		t.Logf("poll %d at %s answered %v after the submit at %s", k, hs[at].cfg.InstanceID,
			time.Since(start).Round(time.Millisecond), hs[by].cfg.InstanceID)
		hs[at].ack("fe", messages.DeliveryResult{ID: id, Status: messages.Delivered})
	}
}

// TestBusScheduledWorkWaitsInTheOutboxUntilDue: a message scheduled ahead
// (deliver_after) is not published to the bus before it falls due. On the
// bus it would wait in its frontend's consumer, naked until its time and
// holding one of the consumer's MaxAckPending (4096): as many scheduled
// messages stopped the consumer, and every message due now behind them
// waited for the backstop. It waits unrelayed in the outbox; the relay
// publishes it once due, and it is delivered through the bus, once.
func TestBusScheduledWorkWaitsInTheOutboxUntilDue(t *testing.T) {
	nats := bustest.Start(t)
	hs := busSite(t, nats.URL(), "s1", "s2")
	waitBus(t, hs, "up")
	hs[0].pullFrontend("fe", "44")
	api := hs[0].api().API
	at := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	const n = 20
	for i := range n {
		if _, err := api.Submit(context.Background(), map[string]string{"id": fmt.Sprintf("sch-%02d", i),
			"source_msisdn": "15550001", "destination_msisdn": fmt.Sprintf("44700%02d", i), "message_body": "later",
			"deliver_after": at}); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody polls: the due message, accepted after the scheduled ones,
	// is published by the instance that accepted it, behind whatever it
	// published before.
	hs[0].submit("due-now", "4470099")
	published := func() float64 {
		var p float64
		for _, h := range hs {
			p += metricValue(t, scrape(t, h), "switchboard_bus_published_total")
		}
		return p
	}
	polltest.Until(t, 20*time.Second, "the due message published", func() bool { return published() >= 1 })
	if p := published(); p != 1 {
		t.Fatalf("%v messages published to the bus by the time the due one was, want 1: the %d scheduled ones wait in the outbox until due", p, n)
	}
	got := map[string]int{}
	consume(t, hs, got, n+1)
	// The relay published each as it fell due.
	polltest.Until(t, 20*time.Second, "every message published", func() bool { return published() >= n+1 })
}

// TestBusWorkReachesPollsThatDoNotWait: a pull consumer that polls with
// wait_ms 0 ("a poll with wait_ms 0 gets the messages due now",
// docs/api.md) gets its messages on a Postgres site with --nats-url as it
// does without the bus. Before, it never did: work accepted while no poll
// waits goes to the bus; a pull worker fetched from it only for a waiting
// poll, and a poll that does not wait was answered (empty) before the
// fetch brought the message, which was then naked back to the stream; the
// backstop claims from the store only with room, a poll waiting at its
// 2 s tick, which such a consumer never has. The message waited in the
// stream for good (until its validity ended). Now such a poll is served
// from the store too; the message's bus copy finds its row leased or done
// and is acked, and the message is offered once.
func TestBusWorkReachesPollsThatDoNotWait(t *testing.T) {
	srv := bustest.Start(t)
	for _, withBus := range []bool{false, true} {
		name := map[bool]string{false: "without the bus", true: "with the bus"}[withBus]
		t.Run(name, func(t *testing.T) {
			url := ""
			if withBus {
				url = srv.URL()
			}
			hs := busSite(t, url, "z1")
			if withBus {
				waitBus(t, hs, "up")
			}
			hs[0].pullFrontend("fe", "44")
			api := hs[0].api().API
			time.Sleep(time.Second) // no poll waits: nothing to hand the work to in memory
			id := hs[0].submit("nowait-1", "447000001")
			const leaseMS = 2_000
			poll := func() []messages.Outgoing {
				ms, err := api.Poll(context.Background(), "fe", 10, 0, leaseMS)
				if err != nil {
					t.Fatal(err)
				}
				return ms
			}
			start := time.Now()
			var got []messages.Outgoing
			for time.Since(start) < 30*time.Second {
				if got = poll(); len(got) > 0 {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			if len(got) == 0 {
				t.Fatalf("%s: %s was not offered to polls with wait_ms 0 (one every 500 ms) in 30 s", name, id)
			}
			if len(got) != 1 || got[0].ID != id {
				t.Fatalf("polled %+v", got)
			}
			t.Logf("polled after %v", time.Since(start).Round(time.Millisecond))
			out, err := api.Ack(context.Background(), "fe", messages.DeliveryResult{ID: id, Status: messages.Delivered})
			if err != nil || len(out) != 1 || out[0].Outcome != "applied" {
				t.Fatalf("ack = %+v, %v; want applied", out, err)
			}
			if !withBus {
				return
			}
			// The bus copy of the work finds its row leased or done: it
			// is acked (a lease that ends within a second has it naked
			// until then), and the message is not offered again.
			acked := func() float64 {
				return metricValue(t, scrape(t, hs[0]), `switchboard_bus_settled_total{action="acked",frontend="fe"}`)
			}
			deadline := time.Now().Add(leaseMS*time.Millisecond + 15*time.Second)
			for acked() < 1 {
				if time.Now().After(deadline) {
					t.Fatalf("the bus copy of %s was not acked %v after the consumer's ack", id, 15*time.Second+leaseMS*time.Millisecond)
				}
				if ms := poll(); len(ms) > 0 {
					t.Fatalf("polled %+v again after it was acked", ms)
				}
				time.Sleep(200 * time.Millisecond)
			}
			for range 5 {
				if ms := poll(); len(ms) > 0 {
					t.Fatalf("polled %+v again after it was acked", ms)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// TestBusStateRacingStop: an embedder's health probe calling BusState while
// the node stops raced with stopBus's write of the bus (go test -race).
func TestBusStateRacingStop(t *testing.T) {
	cfg := embeddedConfig(t)
	cfg.Postgres, cfg.DataDir = pgtest.DSN(t), ""
	cfg.NatsURL = "nats://127.0.0.1:1" // down: the node starts and waits for it
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The prober runs on a clock of its own (no channel, no lock shared
	// with Stop), as a health probe does, until well after Stop returned.
	until := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	wg.Go(func() {
		for time.Now().Before(until) {
			n.BusState()
			time.Sleep(time.Millisecond)
		}
	})
	time.Sleep(50 * time.Millisecond)
	err = n.Stop(ctx)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
}
