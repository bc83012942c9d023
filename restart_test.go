package switchboard_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/actors/bus/bustest"
	"github.com/switchboard-dev/switchboard/actors/delivery"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/persistence/postgres"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
	"github.com/switchboard-dev/switchboard/polltest"
)

// faultyStore panics inside chosen store calls, a set number of times:
// the actor making the call panics, as it would on a bug.
type faultyStore struct {
	persistence.Store
	mu      sync.Mutex
	armed   map[string]int
	caller  map[string]string // when set, only calls made from this function panic
	after   map[string]bool   // panic after the inner call returned (its commit done)
	tripped map[string]int
	holds   map[string]*heldCalls
}

func newFaultyStore(t *testing.T) *faultyStore {
	cfg := sqlite.DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "switchboard.db")
	s, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return faultyOver(s)
}

// faultyOver is a faultyStore over s.
func faultyOver(s persistence.Store) *faultyStore {
	return &faultyStore{Store: s, caller: map[string]string{}, armed: map[string]int{}, after: map[string]bool{}, tripped: map[string]int{}, holds: map[string]*heldCalls{}}
}

func (f *faultyStore) arm(method string, times int, afterCommit bool) {
	f.armFrom(method, "", times, afterCommit)
}

// armFrom panics in the next calls of method made from a function whose
// name contains caller (read off the stack: actors read the store
// concurrently at start, so call order cannot pick the victim).
func (f *faultyStore) armFrom(method, caller string, times int, afterCommit bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed[method] = times
	f.after[method] = afterCommit
	f.caller[method] = caller
}

func (f *faultyStore) trip(method string, after bool) {
	f.mu.Lock()
	fire := f.armed[method] > 0 && f.after[method] == after &&
		(f.caller[method] == "" || strings.Contains(string(debug.Stack()), f.caller[method]))
	if fire {
		f.armed[method]--
		f.tripped[method]++
	}
	f.mu.Unlock()
	if fire {
		panic("injected fault in " + method)
	}
}

// heldCalls are the calls of a store method, made from one function,
// that wait in the store until the test lets them go (faultyStore.hold).
type heldCalls struct {
	caller  string
	arrived chan *heldCall // each call as it comes to wait
	mu      sync.Mutex
	open    bool // from now on calls do not wait
	waiting []*heldCall
	inside  int // calls in the store now
	most    int // the most at once so far
}

// heldCall is one call that waits until let; done is closed once the
// store's call returned.
type heldCall struct {
	once sync.Once
	let  chan struct{}
	done chan struct{}
}

// release lets the call go.
func (c *heldCall) release() { c.once.Do(func() { close(c.let) }) }

// hold makes the calls of method (one of the faultyStore's) made from a
// function whose name contains caller wait, from now on, until let go.
func (f *faultyStore) hold(method, caller string) *heldCalls {
	h := &heldCalls{caller: caller, arrived: make(chan *heldCall, 64)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holds[method] = h
	return h
}

// enter makes a call of method wait if it is held; the func returned is
// to be called once the store's call returned.
func (f *faultyStore) enter(method string) func() {
	f.mu.Lock()
	h := f.holds[method]
	f.mu.Unlock()
	if h == nil || !strings.Contains(string(debug.Stack()), h.caller) {
		return func() {}
	}
	c := &heldCall{let: make(chan struct{}), done: make(chan struct{})}
	h.mu.Lock()
	h.inside++
	h.most = max(h.most, h.inside)
	if h.open {
		c.release()
	} else {
		h.waiting = append(h.waiting, c)
	}
	h.mu.Unlock()
	select {
	case h.arrived <- c:
	default: // nobody looks any more
	}
	<-c.let
	return func() {
		h.mu.Lock()
		h.inside--
		h.mu.Unlock()
		close(c.done)
	}
}

// next is the next call held (it fails the test after 20 s).
func (h *heldCalls) next(t *testing.T) *heldCall {
	t.Helper()
	select {
	case c := <-h.arrived:
		return c
	case <-time.After(20 * time.Second):
		t.Fatalf("no call from %s", h.caller)
		return nil
	}
}

// letAll lets every call go, those to come included.
func (h *heldCalls) letAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open = true
	for _, c := range h.waiting {
		c.release()
	}
}

// mostAtOnce is the most calls that were in the store at once since the
// last count (forget).
func (h *heldCalls) mostAtOnce() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.most
}

// forget starts the count of mostAtOnce again from the calls in the store
// now.
func (h *heldCalls) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.most = h.inside
}

// Write trips the one-part call each of its parts stands for; a held
// Write (hold) waits.
func (f *faultyStore) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	for name, in := range map[string]bool{"Accept": len(w.Accept) > 0, "CompleteWork": len(w.Outcomes) > 0, "ClaimWork": len(w.Claims) > 0} {
		if in {
			f.trip(name, false)
		}
	}
	defer f.enter("Write")()
	r, err := f.Store.Write(ctx, now, w)
	if len(w.Accept) > 0 {
		f.trip("Accept", true)
	}
	return r, err
}

func (f *faultyStore) Accept(ctx context.Context, now time.Time, b []persistence.NewMessage) ([]persistence.Accepted, error) {
	f.trip("Accept", false)
	r, err := f.Store.Accept(ctx, now, b)
	f.trip("Accept", true)
	return r, err
}

func (f *faultyStore) ClaimWork(ctx context.Context, req persistence.ClaimRequest) (persistence.Claim, error) {
	f.trip("ClaimWork", false)
	return f.Store.ClaimWork(ctx, req)
}

func (f *faultyStore) CompleteWork(ctx context.Context, now time.Time, o []persistence.Outcome) ([]persistence.Completion, error) {
	f.trip("CompleteWork", false)
	return f.Store.CompleteWork(ctx, now, o)
}

func (f *faultyStore) GetMessage(ctx context.Context, id string) (messages.Message, error) {
	f.trip("GetMessage", false)
	return f.Store.GetMessage(ctx, id)
}

func (f *faultyStore) Frontends(ctx context.Context) ([]persistence.Frontend, error) {
	f.trip("Frontends", false)
	return f.Store.Frontends(ctx)
}

func (f *faultyStore) ExpireMessages(ctx context.Context, r persistence.ExpireRequest) ([]messages.Message, error) {
	f.trip("ExpireMessages", false)
	return f.Store.ExpireMessages(ctx, r)
}

func restarts(t *testing.T, h *harness, kind string) float64 {
	t.Helper()
	mfs, err := h.node.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchboard_actor_restarts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func waitRestarts(t *testing.T, h *harness, kind string, want float64) {
	t.Helper()
	polltest.Eventually(t, 10*time.Second, func() error {
		if got := restarts(t, h, kind); got != want {
			return fmt.Errorf("restarts of %s: %v, want %v", kind, got, want)
		}
		return nil
	})
}

// TestEveryActorKindRestartsAndCarriesOn panics each of the node's actor
// kinds in turn and checks that it is restarted, counted, and that the node
// goes on with nothing lost: every accepted message is delivered once.
func TestEveryActorKindRestartsAndCarriesOn(t *testing.T) {
	fs := newFaultyStore(t)
	// The frontend supervisor and the janitor fail while starting.
	fs.armFrom("Frontends", "delivery.(*Supervisor).Receive", 1, false)
	fs.arm("ExpireMessages", 1, false)
	cfg := testConfig(t)
	cfg.Store = fs
	h := startNode(t, cfg)
	waitRestarts(t, h, "frontends", 1)
	waitRestarts(t, h, "janitor", 1)
	h.pullFrontend("fe1", "44")

	// intake, panicking before its commit: the submitter is told to retry
	// and its retry (same id) is accepted.
	fs.arm("Accept", 1, false)
	h.apiError(503, "unavailable", "POST", "/api/messages", `{"id":"i1","source_msisdn":"1","destination_msisdn":"441","message_body":"x"}`)
	waitRestarts(t, h, "intake", 1)
	h.submit("i1", "441")

	// intake, panicking after its commit: the retry finds the stored message.
	fs.arm("Accept", 1, true)
	h.apiError(503, "unavailable", "POST", "/api/messages", `{"id":"i2","source_msisdn":"1","destination_msisdn":"441","message_body":"x"}`)
	waitRestarts(t, h, "intake", 2)
	var stored messages.Message
	h.must(200, "POST", "/api/messages", map[string]string{"id": "i2", "source_msisdn": "1", "destination_msisdn": "441", "message_body": "x"}, &stored)
	if stored.ID != "i2" || stored.State != messages.StatePending {
		t.Fatalf("retry after a commit: %+v", stored)
	}

	// delivery worker, panicking in a claim: the poll is answered empty and
	// the next poll gets the work.
	fs.arm("ClaimWork", 1, false)
	if got := h.poll("fe1", 10, 1000, 30000); len(got) != 0 {
		t.Fatalf("poll through a panicking claim returned %+v", got)
	}
	waitRestarts(t, h, "delivery", 1)
	var offered []messages.Outgoing
	polltest.Eventually(t, 10*time.Second, func() error {
		offered = append(offered, h.poll("fe1", 10, 500, 30000)...)
		if len(offered) < 2 {
			return fmt.Errorf("offered %d of 2", len(offered))
		}
		return nil
	})

	// delivery worker, panicking in the commit of an ack: the ack fails and
	// acking again records it.
	fs.arm("CompleteWork", 1, false)
	results := []messages.DeliveryResult{{ID: "i1", Status: messages.Delivered}, {ID: "i2", Status: messages.Delivered}}
	h.apiError(503, "unavailable", "POST", "/api/frontends/fe1/ack", map[string]any{"results": results})
	waitRestarts(t, h, "delivery", 2)
	out := h.ack("fe1", results...)
	if out[0].Outcome != "applied" || out[1].Outcome != "applied" {
		t.Fatalf("ack after the panic: %+v", out)
	}
	for _, id := range []string{"i1", "i2"} {
		if m := h.message(id); m.State != messages.StateDelivered || len(m.History) != 2 {
			t.Fatalf("%s: %+v", id, m)
		}
	}
	problems, err := testutil.GatherAndLint(h.node.Registry())
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint %v %v", problems, err)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for k, n := range map[string]int{"Frontends": 1, "ExpireMessages": 1, "Accept": 2, "ClaimWork": 1, "CompleteWork": 1} {
		if fs.tripped[k] != n {
			t.Fatalf("%s tripped %d times, want %d (%v)", k, fs.tripped[k], n, fs.tripped)
		}
	}
}

// TestWorkerRestartDuringARound: a delivery worker that restarts while a
// store round of its runs (here a pull frontend's verdict, held in the
// store, and a panic in the read of another ack) gets that round's result
// in its next incarnation: same PID, same mailbox. That one took it for
// the end of its own round, which was still out (a claim for its poll),
// and started another beside it: two rounds of one worker at once. It now
// only reports what the earlier round committed (the verdict is recorded
// and published) and keeps to its own round.
func TestWorkerRestartDuringARound(t *testing.T) {
	fs := newFaultyStore(t)
	cfg := testConfig(t)
	cfg.Store = fs
	h := startNode(t, cfg)
	h.pullFrontend("pf", "44")
	h.submit("m-0", "44120")
	h.submit("m-1", "44121")
	if got := h.poll("pf", 2, 5000, 60000); len(got) != 2 {
		t.Fatalf("polled %+v, want m-0 and m-1", got)
	}
	recorded := make(chan struct{})
	var once sync.Once
	defer h.node.Subscribe(func(ev messages.StateChanged) {
		if ev.ID == "m-0" && ev.State == messages.StateDelivered {
			once.Do(func() { close(recorded) })
		}
	})()
	rounds := fs.hold("Write", "delivery.(*Worker).run")
	defer rounds.letAll()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The first incarnation's round records m-0's verdict; it waits in the
	// store. The read of the attempts of m-1's retry panics: the worker
	// restarts, and answers the first ack (unavailable).
	acked := make(chan error, 1)
	go func() {
		_, err := h.node.Ack(ctx, "pf", []messages.DeliveryResult{{ID: "m-0", Status: messages.Delivered}})
		acked <- err
	}()
	first := rounds.next(t)
	fs.armFrom("GetMessage", "delivery.(*Worker).ack", 1, false)
	go func() { _, _ = h.node.Ack(ctx, "pf", []messages.DeliveryResult{{ID: "m-1", Status: messages.Retry}}) }()
	waitRestarts(t, h, "delivery", 1)
	if err := <-acked; err == nil {
		t.Fatal("the ack of m-0 answered without error across the restart")
	}

	// The next incarnation's round: a claim for a poll, waiting in the
	// store too. Then the first round ends: from now on the worker's own
	// round is the only one it may have in the store.
	polled := make(chan error, 1)
	go func() {
		_, err := h.node.Poll(ctx, "pf", 1, 100*time.Millisecond, time.Minute)
		polled <- err
	}()
	rounds.next(t)
	first.release()
	<-first.done
	rounds.forget()
	select {
	case <-recorded:
	case <-time.After(20 * time.Second):
		t.Fatal("m-0's verdict, committed by the first round, not published")
	}
	// A poll that does not wait: answered, it went through the worker after
	// the first round's result.
	if _, err := h.node.Poll(ctx, "pf", 1, 0, time.Minute); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if n := rounds.mostAtOnce(); n != 1 {
		t.Fatalf("%d rounds of the worker in the store at once after the first one ended", n)
	}
	rounds.letAll()
	if err := <-polled; err != nil {
		t.Fatalf("poll: %v", err)
	}
	if m := h.message("m-0"); m.State != messages.StateDelivered {
		t.Fatalf("m-0 is %s", m.State)
	}
}

// TestWorkerRestartKeepsItsVerdicts: a webhook worker that restarts (a
// panic in the round of its first verdict) with verdicts not recorded yet
// (that round's, and the 2xx answers that came while it was out) hands
// them to its next incarnation, whose first round records them. They were
// dropped: each of those messages waited for its lease and was called
// again, though the webhook had answered 2xx, and a worker's panic with
// the process alive is not a crash. Each message is called once now,
// delivered in its first attempt, and counted once.
func TestWorkerRestartKeepsItsVerdicts(t *testing.T) {
	const n = 4
	// No call times out (they are held a moment); the lease (2 x 5 s +
	// 5 s) runs out within the wait for a message's state.
	hook, fs, h, ids := gatedHookNode(t, n, 5*time.Second, "m-%d")
	for range n {
		hook.next(t)
	}
	// The calls answer together: the round of the first verdict panics
	// before its commit; the verdicts that came meanwhile wait for the
	// next round (those that come after the restart are the next
	// incarnation's, late).
	fs.armFrom("CompleteWork", "delivery.(*Worker).run", 1, false)
	hook.letAll()
	waitRestarts(t, h, "delivery", 1)
	for _, id := range ids {
		if m := h.waitState(id, messages.StateDelivered); m.Attempts != 1 || hook.callsOf(id) != 1 {
			t.Fatalf("%s: %d attempts, %d calls; history %+v", id, m.Attempts, hook.callsOf(id), m.History)
		}
	}
	series := `switchboard_delivery_dispositions_total{frontend="hook",outcome="delivered"}`
	if got := metricValue(t, scrape(t, h), series); got != n {
		t.Fatalf("%s = %v, want %d", series, got, n)
	}
	if got := restarts(t, h, "delivery"); got != 1 {
		t.Fatalf("%v restarts of the worker, want 1", got)
	}
}

// TestPullAckAnsweredWhenItsReadPanics: an ack whose verdicts need the
// messages' attempt counts (a retry) has them read off the worker; a panic
// there restarted the worker and left the ack unanswered: its caller
// waited for its own timeout (the API's request timeout) instead of being
// told at once to ack again. It is answered unavailable now, and acking
// again records it.
func TestPullAckAnsweredWhenItsReadPanics(t *testing.T) {
	fs := newFaultyStore(t)
	cfg := testConfig(t)
	cfg.Store = fs
	h := startNode(t, cfg)
	h.pullFrontend("pf", "44")
	h.submit("m-1", "44121")
	if got := h.poll("pf", 1, 5000, 60000); len(got) != 1 {
		t.Fatalf("polled %+v, want m-1", got)
	}
	fs.armFrom("GetMessage", "delivery.(*Worker).ack", 1, false)
	retry := []messages.DeliveryResult{{ID: "m-1", Status: messages.Retry, Reason: "busy"}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := h.node.Ack(ctx, "pf", retry)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "ack again") {
		t.Fatalf("ack through a panicking read: %v (its wait: %v), want unavailable at once", err, ctx.Err())
	}
	waitRestarts(t, h, "delivery", 1)
	if out := h.ack("pf", retry...); out[0].Outcome != "applied" {
		t.Fatalf("ack again: %+v", out)
	}
}

// restartSite is a site of two instances, n1 and n2, on one Postgres
// schema with the delivery bus, n1 on a faultyStore and on clk.
type restartSite struct {
	hs []*harness
	fs *faultyStore
	js jetstream.JetStream
}

func startRestartSite(t *testing.T, clk clock.Clock) *restartSite {
	t.Helper()
	nats := bustest.Start(t)
	dsn := pgtest.DSN(t)
	pc := postgres.DefaultConfig()
	pc.DSN = dsn
	pg, err := postgres.Open(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	site := &restartSite{fs: faultyOver(pg)}
	for _, id := range []string{"n1", "n2"} {
		cfg := siteConfig(t, dsn, id)
		cfg.NatsURL = nats.URL()
		cfg.WebhookTimeout = time.Minute // no delivery times out meanwhile
		if id == "n1" {
			// The ring's election is the store's (persistence.Elector).
			cfg.Postgres, cfg.Clock, cfg.Store = "", clk, struct {
				*faultyStore
				persistence.Elector
			}{site.fs, pg}
		}
		site.hs = append(site.hs, startNode(t, cfg))
	}
	waitRing(t, site.hs, "n1", "n2")
	waitBus(t, site.hs, "up")
	nc, err := natsgo.Connect(nats.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if site.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return site
}

// consumer is the state of frontend's consumer on the bus.
func (s *restartSite) consumer(t *testing.T, frontend string) *jetstream.ConsumerInfo {
	t.Helper()
	var info *jetstream.ConsumerInfo
	polltest.Eventually(t, 20*time.Second, func() error {
		c, err := s.js.Consumer(context.Background(), bus.StreamName("site-a"), bus.ConsumerName(frontend))
		if err != nil {
			return err
		}
		info, err = c.Info(context.Background())
		return err
	})
	return info
}

// TestWorkerRestartDuringABusFetch: a delivery worker restarts while its
// fetch from the delivery bus is out (a panic in its backstop's claim);
// the fetch goes on for the next incarnation (same PID), whose messages
// and end are that one's (the restart cancelled it once: what the server
// had handed it and it had not read yet was dropped, and came back only
// after the bus's ack wait). The next incarnation keeps to one fetch and
// to its room: here an in-process frontend served by instance n1 alone
// (n2 has no actor for it, so its worker holds its claims and offers
// nothing: every message goes through the bus, to n1) answers nothing
// while the messages come, and n1 takes MaxInFlight of them, the rest
// staying on the bus; answered, each is delivered once.
// TestWorkerRestartDuringABusFetchKeepsOneFetch has the restart wait with
// a poll behind it, and TestBusLinkFetchOfAnEarlierIncarnation covers the
// guard of a fetch not handed on; this test checks that each fetch's
// messages are taken as its own through the worker on the real bus.
func TestWorkerRestartDuringABusFetch(t *testing.T) {
	site := startRestartSite(t, clock.Real{})
	hs, fs := site.hs, site.fs

	// The frontend's actor on n1 keeps the deliveries unanswered until
	// answering is set.
	var (
		mu        sync.Mutex
		got       = map[string]*actor.PID{} // message id: the worker to answer
		answering bool
	)
	delivered := func(id string) *messages.DeliveryResult {
		return &messages.DeliveryResult{ID: id, Status: messages.Delivered}
	}
	serveActor(t, hs[0].node, "gw", "gw", "46", actorFunc(func(c actor.Context) {
		d, ok := c.Message().(*messages.Delivery)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		got[d.Message.ID] = c.Sender()
		if answering {
			c.Respond(delivered(d.Message.ID))
		}
	}))

	consumer := func() *jetstream.ConsumerInfo { return site.consumer(t, "gw") }

	// n1's worker has room, so its fetch is out; a panic in its store
	// round (the backstop's claim, every 2 s) restarts it meanwhile. Its
	// next incarnation takes the fetch on, and fetches again once it ends.
	fs.armFrom("ClaimWork", "delivery.(*Worker).run", 1, false)
	waitRestarts(t, hs[0], "delivery", 1)
	polltest.Eventually(t, 20*time.Second, func() error {
		if info := consumer(); info.NumWaiting != 1 {
			return fmt.Errorf("%d fetches wait on the bus, want the worker's one", info.NumWaiting)
		}
		return nil
	})

	const n = 2 * delivery.DefaultMaxInFlight
	var ids []string
	for i := range n {
		ids = append(ids, hs[1].submit(fmt.Sprintf("m%03d", i), fmt.Sprintf("46%03d", i)))
	}
	polltest.Eventually(t, 20*time.Second, func() error {
		info := consumer()
		if info.NumAckPending != delivery.DefaultMaxInFlight || info.NumPending != n-delivery.DefaultMaxInFlight || info.NumWaiting != 0 {
			return fmt.Errorf("the bus handed out %d messages, holds %d, and %d fetches wait; want %d handed out (MaxInFlight), %d held, no fetch",
				info.NumAckPending, info.NumPending, info.NumWaiting, delivery.DefaultMaxInFlight, n-delivery.DefaultMaxInFlight)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != delivery.DefaultMaxInFlight {
			return fmt.Errorf("%d deliveries under way, want %d (MaxInFlight)", len(got), delivery.DefaultMaxInFlight)
		}
		return nil
	})

	// Answered, every message is delivered, once.
	mu.Lock()
	answering = true
	for id, worker := range got {
		hs[0].node.System().Root.Send(worker, delivered(id))
	}
	mu.Unlock()
	for _, id := range ids {
		if m := hs[1].waitState(id, messages.StateDelivered); m.Attempts != 1 {
			t.Errorf("%s delivered after %d attempts, want 1", id, m.Attempts)
		}
	}
}

// restartGate is the wall clock, but for a delivery worker as it restarts
// (its Receive of actor.Restarting reads the time first): while the gate
// is shut, that read waits. The messages sent to the worker meanwhile wait
// in its mailbox for its next incarnation, ahead of the end of the fetch
// the restart cancels.
type restartGate struct {
	clock.Real
	mu      sync.Mutex
	shut    chan struct{} // nil: open
	waiting chan struct{} // a restart waits at the gate
}

func (g *restartGate) Now() time.Time {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut != nil {
		if stack := string(debug.Stack()); strings.Contains(stack, "handleRestart") && strings.Contains(stack, "delivery.(*Worker).Receive") {
			select {
			case g.waiting <- struct{}{}:
			default:
			}
			<-shut
		}
	}
	return g.Real.Now()
}

// close shuts the gate.
func (g *restartGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut, g.waiting = make(chan struct{}), make(chan struct{}, 1)
}

// open lets the restart waiting at the gate go on, and those to come.
func (g *restartGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

// TestWorkerRestartDuringABusFetchKeepsOneFetch: a pull worker restarts
// (a panic in its claim for a waiting poll) while its fetch from the bus
// is out, and a poll waits in its mailbox as it does (the test holds the
// restart at its start until the poll is there). When the restart
// cancelled that fetch, its next incarnation fetched for the poll and the
// earlier fetch's end came after; that end cleared the fetch out: a
// second fetch went out beside it, and the two went on, each asking the
// bus for the poll's room, for as long as the poll waited. The fetch goes
// on for the next incarnation now, which fetches again once it ended: one
// fetch waits on the bus.
func TestWorkerRestartDuringABusFetchKeepsOneFetch(t *testing.T) {
	gate := &restartGate{}
	site := startRestartSite(t, gate)
	h := site.hs[0]
	h.pullFrontend("pf", "44")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	poll := func() {
		go func() { _, _ = h.node.Poll(ctx, "pf", 5, 30*time.Second, time.Minute) }()
	}

	// A poll waits at n1: its worker fetches for it (each fetch of a pull
	// worker waits a second, then the next goes out), and claims its room
	// of the overdue work every 2 s. That claim panics; the restart waits
	// at the gate.
	gate.close()
	defer gate.open()
	site.fs.armFrom("ClaimWork", "delivery.(*Worker).run", 1, false)
	poll()
	select {
	case <-gate.waiting:
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not restart")
	}
	poll()
	polltest.Eventually(t, 10*time.Second, func() error {
		if n := metricValue(t, scrape(t, h), `switchboard_actor_mailbox_depth{kind="delivery"}`); n < 1 {
			return fmt.Errorf("%v messages wait for the worker, want the poll", n)
		}
		return nil
	})
	gate.open()
	waitRestarts(t, h, "delivery", 1)

	// As long as the second poll waits, one fetch at a time waits on the
	// bus for it (each ends after a second, and the next goes out).
	polltest.Eventually(t, 10*time.Second, func() error {
		if n := site.consumer(t, "pf").NumWaiting; n != 1 {
			return fmt.Errorf("%d fetches wait on the bus, want the worker's one", n)
		}
		return nil
	})
	for i := range 100 {
		if n := site.consumer(t, "pf").NumWaiting; n > 1 {
			t.Fatalf("%d fetches of one worker wait on the bus at once (sample %d)", n, i)
		}
		time.Sleep(30 * time.Millisecond)
	}
}
