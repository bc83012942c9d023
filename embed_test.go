package switchboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/actors/delivery"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// recordingFrontend is an in-process frontend actor: it fails the first
// delivery of every id with a retry, then accepts it.
type recordingFrontend struct {
	mu   *sync.Mutex
	seen map[string][]int
}

func (f *recordingFrontend) Receive(c actor.Context) {
	d, ok := c.Message().(*messages.Delivery)
	if !ok {
		return
	}
	f.mu.Lock()
	f.seen[d.Message.ID] = append(f.seen[d.Message.ID], d.Message.Attempt)
	n := len(f.seen[d.Message.ID])
	f.mu.Unlock()
	status := messages.Delivered
	if n == 1 {
		status = messages.Retry
	}
	c.Respond(&messages.DeliveryResult{ID: d.Message.ID, Status: status, Reason: "first try"})
}

// serveActor spawns fe as the node's child actor (the test-frontend
// kind), registers it as the in-process frontend named frontend and routes
// prefix to it.
func serveActor(t *testing.T, n *switchboard.Node, actorName, frontend, prefix string, fe actor.Actor) {
	t.Helper()
	pid, err := n.Spawn(actorName, "test-frontend", func() actor.Actor { return fe })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := n.RegisterFrontend(ctx, frontend, pid); err != nil {
		t.Fatal(err)
	}
	if _, err := n.PutRoute(ctx, messages.Route{Prefix: prefix, Frontend: frontend}); err != nil {
		t.Fatal(err)
	}
}

// servePull makes frontend a pull frontend of n that serves prefix.
func servePull(t *testing.T, n *switchboard.Node, frontend, prefix string) {
	t.Helper()
	ctx := context.Background()
	if _, err := n.PutFrontend(ctx, messages.Frontend{Name: frontend, Mode: messages.ModePull}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.PutRoute(ctx, messages.Route{Prefix: prefix, Frontend: frontend}); err != nil {
		t.Fatal(err)
	}
}

// embeddedConfig is testConfig for a node used as a library: no listeners.
func embeddedConfig(t *testing.T) switchboard.Config {
	cfg := testConfig(t)
	cfg.Listen, cfg.MetricsListen = "", ""
	return cfg
}

// TestNodeOnAGivenStoreMakesNoDataDir: a node given its store keeps
// nothing in DataDir when it serves no HTTPS (no self-signed certificate
// to make), so Start makes no DataDir (the default is ./data).
func TestNodeOnAGivenStoreMakesNoDataDir(t *testing.T) {
	cfg := embeddedConfig(t)
	cfg.Store = newFaultyStore(t)
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	startNode(t, cfg)
	if _, err := os.Stat(cfg.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat %s after Start: %v, want it not made", cfg.DataDir, err)
	}
}

func TestEmbeddedActorFrontendAndSubscriptions(t *testing.T) {
	cfg := embeddedConfig(t)
	h := startNode(t, cfg)
	n := h.node

	var mu sync.Mutex
	events := map[string][]messages.State{}
	cancel := n.Subscribe(func(ev messages.StateChanged) {
		mu.Lock()
		events[ev.ID] = append(events[ev.ID], ev.State)
		mu.Unlock()
	})
	defer cancel()

	fe := &recordingFrontend{mu: &sync.Mutex{}, seen: map[string][]int{}}
	serveActor(t, n, "sms-gateway", "gw", "46", fe)
	ctx := context.Background()
	m, created, err := n.Submit(ctx, messages.Submission{SourceMSISDN: "1", DestinationMSISDN: "46701", Body: "hej"})
	if err != nil || !created {
		t.Fatalf("Submit: %v %v", created, err)
	}
	polltest.Eventually(t, 10*time.Second, func() error {
		got, err := n.Message(ctx, m.ID)
		if err != nil {
			return err
		}
		if got.State != messages.StateDelivered {
			return fmt.Errorf("state %s: %+v", got.State, got)
		}
		return nil
	})
	fe.mu.Lock()
	attempts := fmt.Sprint(fe.seen[m.ID])
	fe.mu.Unlock()
	if attempts != "[1 2]" {
		t.Fatalf("frontend saw attempts %s, want [1 2]", attempts)
	}
	polltest.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if got := fmt.Sprint(events[m.ID]); got != "[pending retry delivered]" {
			return fmt.Errorf("events %s", got)
		}
		return nil
	})
	if _, err := n.Spawn("sms-gateway", "test-frontend", func() actor.Actor { return fe }); err == nil {
		t.Fatal("a second child with the same name was spawned")
	}
}

func TestSubscribeBeforeStartAndStopActor(t *testing.T) {
	cfg := embeddedConfig(t)
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n.Handler() != nil {
		t.Fatal("Handler() before Start must be nil")
	}
	seen := make(chan messages.StateChanged, 16)
	cancel := n.Subscribe(func(ev messages.StateChanged) { seen <- ev })
	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	servePull(t, n, "fe", "1")
	if _, _, err := n.Submit(ctx, messages.Submission{ID: "s1", SourceMSISDN: "1", DestinationMSISDN: "12", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	if ev := <-seen; ev.ID != "s1" || ev.State != messages.StatePending {
		t.Fatalf("event %+v", ev)
	}
	cancel()
	if _, _, err := n.Submit(ctx, messages.Submission{ID: "s2", SourceMSISDN: "1", DestinationMSISDN: "12", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-seen:
		t.Fatalf("event after cancel: %+v", ev)
	default:
	}

	// An embedder's actor, with a supervised child of its own, stopped on
	// purpose: not a fatal error for the node.
	childStarted := make(chan struct{})
	parent := actorFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Started); ok {
			c.Spawn(n.Props("test-child", func() actor.Actor {
				return actorFunc(func(c actor.Context) {
					if _, ok := c.Message().(*actor.Started); ok {
						close(childStarted)
					}
				})
			}))
		}
	})
	if _, err := n.Spawn("mine", "test-parent", func() actor.Actor { return parent }); err != nil {
		t.Fatal(err)
	}
	<-childStarted
	if err := n.StopActor(ctx, "mine"); err != nil {
		t.Fatalf("StopActor: %v", err)
	}
	if err := n.StopActor(ctx, "intake"); err == nil {
		t.Fatal("StopActor stopped one of the node's own actors")
	}
	select {
	case err := <-n.Fatal():
		t.Fatalf("stopping an embedder's actor was fatal: %v", err)
	default:
	}
}

type actorFunc func(actor.Context)

func (f actorFunc) Receive(c actor.Context) { f(c) }

// slowFrontend answers each delivery "delivered" after a pause, from its
// own goroutine (an actor must not block its mailbox).
type slowFrontend struct {
	got   chan string
	pause time.Duration
}

func (f *slowFrontend) Receive(c actor.Context) {
	d, ok := c.Message().(*messages.Delivery)
	if !ok {
		return
	}
	f.got <- d.Message.ID
	sender, sys := c.Sender(), c.ActorSystem()
	time.AfterFunc(f.pause, func() {
		sys.Root.Send(sender, &messages.DeliveryResult{ID: d.Message.ID, Status: messages.Delivered})
	})
}

// TestStopFinishesDeliveriesInFlight: Stop while a delivery is under way
// waits for its verdict and commits it before the store closes.
func TestStopFinishesDeliveriesInFlight(t *testing.T) {
	cfg := embeddedConfig(t)
	fs := newFaultyStore(t) // a store the test can read after the node stopped
	cfg.Store = fs
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fe := &slowFrontend{got: make(chan string, 1), pause: 300 * time.Millisecond}
	serveActor(t, n, "slow", "slow", "7", fe)
	if _, _, err := n.Submit(ctx, messages.Submission{ID: "inflight", SourceMSISDN: "1", DestinationMSISDN: "71", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	<-fe.got // the delivery is under way
	if err := n.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	m, err := fs.GetMessage(ctx, "inflight")
	if err != nil || m.State != messages.StateDelivered {
		t.Fatalf("after Stop: %+v %v; the verdict in flight was not committed", m, err)
	}
}

// countingFrontend answers each delivery after a moment, on a goroutine of
// its own, and keeps the most deliveries it had under way at once.
type countingFrontend struct {
	now, most atomic.Int64
	delivered sync.Map
}

func (f *countingFrontend) Receive(c actor.Context) {
	d, ok := c.Message().(*messages.Delivery)
	if !ok {
		return
	}
	n := f.now.Add(1)
	for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
	}
	sender, sys := c.Sender(), c.ActorSystem()
	go func() {
		time.Sleep(time.Duration(500+rand.IntN(3000)) * time.Microsecond)
		f.now.Add(-1)
		f.delivered.Store(d.Message.ID, true)
		sys.Root.Send(sender, &messages.DeliveryResult{ID: d.Message.ID, Status: messages.Delivered})
	}()
}

// A push frontend never has more deliveries under way than the worker's
// bound (DefaultMaxInFlight), however the intake's handovers and the
// worker's claims race. Before the handover board counted the rows it had
// granted and not yet delivered (handover.Board.Owed), a worker whose
// offer changed while a grant was on its way was granted the same slots
// again, and claimed them too: 48 to 63 under way in half the runs.
func TestPushFrontendInFlightStaysBounded(t *testing.T) {
	cfg := embeddedConfig(t)
	h := startNode(t, cfg)
	n := h.node
	fe := &countingFrontend{}
	serveActor(t, n, "counting", "counting", "46", fe)
	ctx := context.Background()
	const clients, each = 64, 45 // more submitters than the bound, so that commits race the worker's claims
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				if _, _, err := n.Submit(ctx, messages.Submission{SourceMSISDN: "1", DestinationMSISDN: fmt.Sprintf("46%d%03d", c, i), Body: "x"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	polltest.Eventually(t, 60*time.Second, func() error {
		got := 0
		fe.delivered.Range(func(any, any) bool { got++; return true })
		if got < clients*each {
			return fmt.Errorf("%d of %d delivered", got, clients*each)
		}
		return nil
	})
	if most := fe.most.Load(); most > delivery.DefaultMaxInFlight {
		t.Fatalf("the frontend had %d deliveries under way at once, more than the worker's bound of %d", most, delivery.DefaultMaxInFlight)
	}
	t.Logf("most under way at once: %d", fe.most.Load())
}

// deliveredBy is an in-process frontend that accepts every delivery and
// tells who it is on got.
func deliveredBy(who string, got chan<- string) actorFunc {
	return func(c actor.Context) {
		if d, ok := c.Message().(*messages.Delivery); ok {
			got <- who + ":" + d.Message.ID
			c.Respond(&messages.DeliveryResult{ID: d.Message.ID, Status: messages.Delivered})
		}
	}
}

// refusingStore fails PutFrontend while refuse is set, as a store that
// cannot write would.
type refusingStore struct {
	persistence.Store
	refuse atomic.Bool
}

func (s *refusingStore) PutFrontend(ctx context.Context, f persistence.Frontend) error {
	if s.refuse.Load() {
		return errors.New("injected: the store cannot write")
	}
	return s.Store.PutFrontend(ctx, f)
}

// A RegisterFrontend that fails (here: the store refuses the write) keeps
// the actor registered before. It used to drop it: the frontend's
// messages then waited for good, served by neither actor.
func TestFailedRegisterFrontendKeepsThePreviousActor(t *testing.T) {
	cfg := embeddedConfig(t)
	st := &refusingStore{Store: newFaultyStore(t)}
	cfg.Store = st
	n := startNode(t, cfg).node
	got := make(chan string, 10)
	serveActor(t, n, "gw", "gw", "46", deliveredBy("old", got))
	pid2, err := n.Spawn("gw2", "test-frontend", func() actor.Actor { return deliveredBy("new", got) })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st.refuse.Store(true)
	err = n.RegisterFrontend(ctx, "gw", pid2)
	st.refuse.Store(false)
	if err == nil {
		t.Fatal("RegisterFrontend succeeded on a store that refused the write")
	}
	if _, _, err := n.Submit(ctx, messages.Submission{ID: "after", SourceMSISDN: "1", DestinationMSISDN: "467", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	awaitDelivery(t, got, "old:after", func() string {
		m, _ := n.Message(ctx, "after")
		return fmt.Sprintf("not delivered after a failed re-registration: state %s after %d attempts (no actor registered any more)", m.State, m.Attempts)
	})
}

// awaitDelivery waits up to 10 s for the next "actor:id" on got and fails
// unless it is want; missing is the failure when none comes.
func awaitDelivery(t *testing.T, got <-chan string, want string, missing func() string) {
	t.Helper()
	select {
	case who := <-got:
		if who != want {
			t.Fatalf("delivered %s, want %s", who, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(missing())
	}
}

// A frontend's actor stopped with StopActor is unregistered: its messages
// wait, pending, as for a frontend not registered yet, and go to the next
// actor registered. The dead PID used to stay registered: the worker kept
// sending to it and each message used up its attempts (here its one) to
// failed max_attempts.
func TestStopActorUnregistersItsFrontend(t *testing.T) {
	cfg := embeddedConfig(t)
	cfg.DeliveryMaxAttempts = 1
	cfg.WebhookTimeout = 200 * time.Millisecond
	n := startNode(t, cfg).node
	got := make(chan string, 10)
	serveActor(t, n, "gw", "gw", "46", deliveredBy("old", got))
	ctx := context.Background()
	if err := n.StopActor(ctx, "gw"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Submit(ctx, messages.Submission{ID: "held", SourceMSISDN: "1", DestinationMSISDN: "467", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	// Nothing to wait for: the message must stay as it is. Before the fix
	// it was claimed (attempts 1) within milliseconds and failed after
	// WebhookTimeout+1s.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		m, err := n.Message(ctx, "held")
		if err != nil {
			t.Fatal(err)
		}
		if m.State != messages.StatePending || m.Attempts != 0 {
			t.Fatalf("a message for a stopped frontend actor: state %s after %d attempts, want pending, not attempted", m.State, m.Attempts)
		}
	}
	pid, err := n.Spawn("gw2", "test-frontend", func() actor.Actor { return deliveredBy("new", got) })
	if err != nil {
		t.Fatal(err)
	}
	if err := n.RegisterFrontend(ctx, "gw", pid); err != nil {
		t.Fatal(err)
	}
	awaitDelivery(t, got, "new:held", func() string { return "the held message was not delivered to the actor registered next" })
	if m := waitState(t, n, "held", messages.StateDelivered); m.Attempts != 1 {
		t.Fatalf("delivered after %d attempts, want 1", m.Attempts)
	}
}

type quit struct{}

// quitting is fe that stops itself, through its own context, on quit.
func quitting(fe actorFunc) actorFunc {
	return func(c actor.Context) {
		if _, ok := c.Message().(quit); ok {
			c.Stop(c.Self())
			return
		}
		fe(c)
	}
}

// awaitEndNoticed waits until the node has logged count unregistrations of
// frontend's actor for its end.
func awaitEndNoticed(t *testing.T, logs *logtest.Buffer, frontend string, count int) {
	t.Helper()
	polltest.Eventually(t, 10*time.Second, func() error {
		seen := 0
		for _, rec := range logs.Records(t, "in-process frontend unregistered") {
			if rec["frontend"] == frontend && rec["why"] == "its actor ended" {
				seen++
			}
		}
		if seen < count {
			return fmt.Errorf("the actor of %s stopped by itself, and the node unregistered it %d times of %d", frontend, seen, count)
		}
		return nil
	})
}

// A frontend's actor that stops by itself (not through StopActor, not a
// child of the guardian) is unregistered as by StopActor: its messages
// wait, pending and without using attempts, and go to the next actor
// registered, here one spawned again under the same name (an equal PID),
// whose end is noticed in turn. The dead PID used to stay registered: the
// worker kept sending to it and each message used up its attempts (here
// its one) to failed max_attempts.
func TestFrontendActorThatStopsItselfIsUnregistered(t *testing.T) {
	cfg := embeddedConfig(t)
	cfg.DeliveryMaxAttempts = 1
	var logs *logtest.Buffer
	cfg.Logger, logs = logtest.New()
	n := startNode(t, cfg).node
	ctx := context.Background()
	got := make(chan string, 10)
	spawn := func(who string) *actor.PID {
		t.Helper()
		fe := quitting(deliveredBy(who, got))
		pid, err := n.System().Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return fe }), "gw-actor")
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	first := spawn("first")
	if err := n.RegisterFrontend(ctx, "gw", first); err != nil {
		t.Fatal(err)
	}
	if _, err := n.PutRoute(ctx, messages.Route{Prefix: "46", Frontend: "gw"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Submit(ctx, messages.Submission{ID: "before", SourceMSISDN: "1", DestinationMSISDN: "467", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	awaitDelivery(t, got, "first:before", func() string { return "not delivered to the first actor" })

	n.System().Root.Send(first, quit{})
	awaitEndNoticed(t, logs, "gw", 1)
	if _, _, err := n.Submit(ctx, messages.Submission{ID: "held", SourceMSISDN: "1", DestinationMSISDN: "467", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	// As after StopActor, the frontend stays stored (its routes accept
	// submits); only its actor is forgotten.
	fes, err := n.Frontends(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fes) != 1 || fes[0].Name != "gw" || fes[0].Mode != messages.ModeActor {
		t.Fatalf("frontends %+v, want gw (actor) still stored", fes)
	}

	again := spawn("again")
	if err := n.RegisterFrontend(ctx, "gw", again); err != nil {
		t.Fatal(err)
	}
	awaitDelivery(t, got, "again:held", func() string {
		m, _ := n.Message(ctx, "held")
		return fmt.Sprintf("not delivered to the actor registered next: state %s after %d attempts", m.State, m.Attempts)
	})
	if m := waitState(t, n, "held", messages.StateDelivered); m.Attempts != 1 {
		t.Fatalf("delivered after %d attempts, want 1 (none used while no actor was registered)", m.Attempts)
	}
	n.System().Root.Send(again, quit{})
	awaitEndNoticed(t, logs, "gw", 2)
}

// waitState waits until message id is in state.
func waitState(t *testing.T, n *switchboard.Node, id string, state messages.State) messages.Message {
	t.Helper()
	var m messages.Message
	polltest.Eventually(t, 10*time.Second, func() error {
		var err error
		if m, err = n.Message(context.Background(), id); err != nil {
			return err
		}
		if m.State != state {
			return fmt.Errorf("message %s is %s, want %s", id, m.State, state)
		}
		return nil
	})
	return m
}

// nodeCalls calls every exported method of n that reads or changes what it
// serves and reports what each returned; none may panic.
func nodeCalls(t *testing.T, n *switchboard.Node) map[string]error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := map[string]error{}
	call := func(name string, f func() error) {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v", name, r)
			}
		}()
		got[name] = f()
	}
	call("Message", func() error { _, err := n.Message(ctx, "x"); return err })
	call("Submit", func() error {
		_, _, err := n.Submit(ctx, messages.Submission{SourceMSISDN: "1", DestinationMSISDN: "46", Body: "x"})
		return err
	})
	call("PutRoute", func() error { _, err := n.PutRoute(ctx, messages.Route{Prefix: "1", Frontend: "a"}); return err })
	call("PutFrontend", func() error {
		_, err := n.PutFrontend(ctx, messages.Frontend{Name: "a", Mode: messages.ModePull})
		return err
	})
	call("RegisterFrontend", func() error { return n.RegisterFrontend(ctx, "a", actor.NewPID("nonhost", "node/a")) })
	call("Ack", func() error { _, err := n.Ack(ctx, "a", nil); return err })
	call("Messages", func() error { _, err := n.Messages(ctx, persistence.ListQuery{Limit: 1}); return err })
	call("Routes", func() error { _, err := n.Routes(ctx); return err })
	call("Frontends", func() error { _, err := n.Frontends(ctx); return err })
	call("Status", func() error { _, err := n.Status(ctx); return err })
	call("DeleteRoute", func() error { return n.DeleteRoute(ctx, "1") })
	call("DeleteFrontend", func() error { return n.DeleteFrontend(ctx, "a") })
	call("Resubmit", func() error { _, err := n.Resubmit(ctx, "x"); return err })
	call("ResubmitBulk", func() error { _, err := n.ResubmitBulk(ctx, messages.StateFailed); return err })
	call("Peers", func() error { _, err := n.Peers(ctx); return err })
	call("StopActor", func() error { return n.StopActor(ctx, "a") })
	call("Spawn", func() error {
		_, err := n.Spawn("a", "k", func() actor.Actor { return actorFunc(func(actor.Context) {}) })
		return err
	})
	call("Reload", n.Reload)
	// These answer as documented, and must not panic either.
	call("Poll", func() error { _, err := n.Poll(ctx, "a", 1, 0, time.Second); return err })
	call("FlushTelemetry", func() error { return n.FlushTelemetry(ctx) })
	call("Subscribe", func() error { n.Subscribe(func(messages.StateChanged) {})(); return nil })
	call("accessors", func() error {
		_, _, _, _, _, _ = n.Addr(), n.MetricsAddr(), n.SMPPAddr(), n.RingPartitions(), n.Registry(), n.System()
		n.BusState()
		if n.Store() != nil {
			return errors.New("Store() is not nil")
		}
		return nil
	})
	return got
}

// checkNotRunning wants every call of a node that is not running refused
// with unavailable "the node is not running" (or an error at all, for the
// calls that are not the gateway's).
func checkNotRunning(t *testing.T, when string, got map[string]error) {
	t.Helper()
	gateway := []string{"Message", "Submit", "PutRoute", "PutFrontend", "RegisterFrontend", "Ack", "Peers",
		"Messages", "Routes", "Frontends", "Status", "DeleteRoute", "DeleteFrontend", "Resubmit", "ResubmitBulk"}
	for _, name := range gateway {
		var merr *messages.Error
		if err := got[name]; !errors.As(err, &merr) || merr.Code != messages.CodeUnavailable || !strings.Contains(err.Error(), "not running") {
			t.Errorf("%s %s: %v, want unavailable: the node is not running", name, when, err)
		}
	}
	for _, name := range []string{"StopActor", "Spawn", "Reload"} {
		if got[name] == nil {
			t.Errorf("%s %s succeeded", name, when)
		}
	}
	for _, name := range []string{"FlushTelemetry", "Subscribe", "accessors"} {
		if err := got[name]; err != nil {
			t.Errorf("%s %s: %v", name, when, err)
		}
	}
}

// A node not started yet, and one stopped, answers every call: reads
// used to dereference a store that was not opened (Message before Start
// panicked) or was closed.
func TestNodeCallsBeforeStartAndAfterStop(t *testing.T) {
	cfg := embeddedConfig(t)
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := nodeCalls(t, n)
	checkNotRunning(t, "before Start", got)
	if err := got["Poll"]; err == nil {
		t.Error("Poll before Start succeeded")
	}
	if n.Handler() != nil {
		t.Error("Handler() before Start is not nil")
	}
	propsBeforeStart(t, n)

	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	got = nodeCalls(t, n)
	checkNotRunning(t, "after Stop", got)
	if err := got["Poll"]; err != nil {
		t.Errorf("Poll after Stop: %v, want an empty answer (docs: the node's stop answers it empty)", err)
	}
}

// propsBeforeStart wants Props refused with a panic that says why: it used
// to return props whose actor's panics went unlogged and unmeasured.
func propsBeforeStart(t *testing.T, n *switchboard.Node) {
	t.Helper()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Props needs a started node") {
			t.Errorf("Props before Start: panic %v, want \"Props needs a started node\"", r)
		}
	}()
	n.Props("early", func() actor.Actor { return nil })
}

// Reads racing Start see the store whole or not at all (go test -race).
func TestNodeReadsRacingStart(t *testing.T) {
	cfg := embeddedConfig(t)
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = n.Message(ctx, "x")
			_, _ = n.Peers(ctx)
			_, _, _ = n.Submit(ctx, messages.Submission{SourceMSISDN: "1", DestinationMSISDN: "46", Body: "x"})
			_ = n.Store()
			_ = n.Handler()
		}
	})
	err = n.Start(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Subscribe callback that panics (an embedder's bug) is recovered and
// logged with its stack; the node and the other subscribers go on. It ran
// unguarded on the committing goroutine: a dozen panics exhausted the
// intake's restart budget and stopped the node.
func TestPanickingSubscriberDoesNotStopTheNode(t *testing.T) {
	cfg := embeddedConfig(t)
	logs := &logtest.Buffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	n := startNode(t, cfg).node
	ctx := context.Background()
	servePull(t, n, "fe", "1")
	n.Subscribe(func(messages.StateChanged) { panic("subscriber bug") })
	seen := make(chan string, 100)
	n.Subscribe(func(ev messages.StateChanged) { seen <- ev.ID })
	const submits = 15 // more than a restart budget (10 a minute)
	for i := range submits {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _, err := n.Submit(sctx, messages.Submission{ID: fmt.Sprint("s", i), SourceMSISDN: "1", DestinationMSISDN: "12", Body: "x"})
		cancel()
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	for range submits {
		select {
		case <-seen:
		case <-time.After(10 * time.Second):
			t.Fatal("the other subscriber missed events")
		}
	}
	select {
	case err := <-n.Fatal():
		t.Fatalf("a panicking subscriber stopped the node: %v", err)
	default:
	}
	if l := logs.String(); !strings.Contains(l, "state change subscriber panicked") || !strings.Contains(l, "subscriber bug") || !strings.Contains(l, "runtime/debug.Stack") {
		t.Fatalf("the panic was not logged with its stack:\n%s", l)
	}
}

// wantCode fails unless err is a *messages.Error with code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var merr *messages.Error
	if !errors.As(err, &merr) || merr.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// The embedding API reads and changes what the HTTP API does: list
// messages, routes and frontends, the status, delete routes and frontends,
// resubmit failed messages (docs/embedding.md named these methods; they
// did not exist).
func TestNodeDirectoryReadsAndResubmits(t *testing.T) {
	cfg := embeddedConfig(t)
	n := startNode(t, cfg).node
	ctx := context.Background()
	servePull(t, n, "fe", "1")
	for _, id := range []string{"a", "b"} {
		if _, _, err := n.Submit(ctx, messages.Submission{ID: id, SourceMSISDN: "1", DestinationMSISDN: "12", Body: "x"}); err != nil {
			t.Fatal(err)
		}
	}

	page, err := n.Messages(ctx, persistence.ListQuery{Limit: 10})
	if err != nil || len(page.Messages) != 2 || page.Messages[0].ID != "b" {
		t.Fatalf("Messages = %+v, %v; want b then a", page, err)
	}
	_, err = n.Messages(ctx, persistence.ListQuery{})
	wantCode(t, "Messages with no limit", err, messages.CodeInvalidRequest)
	routes, err := n.Routes(ctx)
	if err != nil || len(routes) != 1 || routes[0].Prefix != "1" || routes[0].Frontend != "fe" {
		t.Fatalf("Routes = %+v, %v", routes, err)
	}
	fes, err := n.Frontends(ctx)
	if err != nil || len(fes) != 1 || fes[0].Name != "fe" || fes[0].Mode != messages.ModePull {
		t.Fatalf("Frontends = %+v, %v", fes, err)
	}
	polltest.Eventually(t, 10*time.Second, func() error {
		st, err := n.Status(ctx)
		if err != nil {
			return err
		}
		if st.Node != cfg.Name || st.Counts[string(messages.StatePending)] != 2 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})

	// Fail both through the pull frontend, then resubmit them.
	out, err := n.Poll(ctx, "fe", 10, time.Second, time.Minute)
	if err != nil || len(out) != 2 {
		t.Fatalf("Poll = %d, %v", len(out), err)
	}
	var results []messages.DeliveryResult
	for _, o := range out {
		results = append(results, messages.DeliveryResult{ID: o.ID, Status: messages.Failed, Reason: "test"})
	}
	if _, err := n.Ack(ctx, "fe", results); err != nil {
		t.Fatal(err)
	}
	if m, err := n.Resubmit(ctx, "a"); err != nil || m.State != messages.StatePending {
		t.Fatalf("Resubmit = %s, %v", m.State, err)
	}
	_, err = n.Resubmit(ctx, "a")
	if err == nil {
		t.Fatal("Resubmit of a pending message succeeded")
	}
	if r, err := n.ResubmitBulk(ctx, messages.StateFailed); err != nil || r.Resubmitted != 1 {
		t.Fatalf("ResubmitBulk = %+v, %v; want b resubmitted", r, err)
	}
	waitState(t, n, "b", messages.StatePending)

	wantCode(t, "DeleteFrontend named by a route", n.DeleteFrontend(ctx, "fe"), messages.CodeFrontendInUse)
	if err := n.DeleteRoute(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "DeleteRoute again", n.DeleteRoute(ctx, "1"), messages.CodeNotFound)
	if err := n.DeleteFrontend(ctx, "fe"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "DeleteFrontend again", n.DeleteFrontend(ctx, "fe"), messages.CodeNotFound)
	if fes, err := n.Frontends(ctx); err != nil || len(fes) != 0 {
		t.Fatalf("Frontends after delete = %+v, %v", fes, err)
	}
}

// TestNodeChangesOfTextPostgresRefuses: an embedder's message id, prefix or
// frontend name holding NUL or bytes that are not UTF-8 (the HTTP API
// answers 404 before the store is asked) is refused by Postgres (SQLSTATE
// 22021). That is the call's fault: invalid_request; it was unavailable,
// which tells the caller to make the same call again.
func TestNodeChangesOfTextPostgresRefuses(t *testing.T) {
	cfg := embeddedConfig(t)
	cfg.Postgres = pgtest.DSN(t)
	n := startNode(t, cfg).node
	ctx := context.Background()
	_, err := n.Resubmit(ctx, "a\x00b")
	wantCode(t, "Resubmit", err, messages.CodeInvalidRequest)
	wantCode(t, "DeleteRoute", n.DeleteRoute(ctx, "4\xff"), messages.CodeInvalidRequest)
	wantCode(t, "DeleteFrontend", n.DeleteFrontend(ctx, "a\x00b"), messages.CodeInvalidRequest)
}

// TestSpawnRefusesNamesUnderOtherActors: protoactor names a child
// "<parent>/<child>", so Spawn("frontends/gw#1") took the name of the
// delivery worker the frontends supervisor gives frontend gw: that worker
// could not start, the supervisor failed until its budget was gone, the
// node failed and gw's messages stayed pending. Every name holding "/" is
// refused, and the node goes on serving.
func TestSpawnRefusesNamesUnderOtherActors(t *testing.T) {
	n := startNode(t, embeddedConfig(t)).node
	ctx := context.Background()
	idle := func() actor.Actor { return actorFunc(func(actor.Context) {}) }
	for _, name := range []string{"frontends/gw#0", "frontends/gw#1", "frontends/gw#2", "intake/x", "mine/child"} {
		if _, err := n.Spawn(name, "test-idle", idle); err == nil {
			t.Errorf("Spawn(%q) accepted a name under another actor's", name)
		} else if !strings.Contains(err.Error(), "/") {
			t.Errorf("Spawn(%q): %v, want the error to say why", name, err)
		}
		if err := n.StopActor(ctx, name); err == nil {
			t.Errorf("StopActor(%q) accepted a name under another actor's", name)
		}
	}
	got := make(chan string, 4)
	serveActor(t, n, "gw", "gw", "46", deliveredBy("gw", got))
	if _, _, err := n.Submit(ctx, messages.Submission{ID: "n1", SourceMSISDN: "Switchboard", DestinationMSISDN: "46701234567", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, n, "n1", messages.StateDelivered)
	select {
	case err := <-n.Fatal():
		t.Fatalf("the node failed: %v", err)
	default:
	}
}

// TestStopAfterTheWorkersSupervisorFailed: once the delivery workers'
// supervisor is gone (the node failed), Stop's drain sent it a Drain that
// nobody answered and waited all of ShutdownTimeout, then failed with
// "delivery workers did not drain in time". A supervisor that is gone is
// not waited for.
func TestStopAfterTheWorkersSupervisorFailed(t *testing.T) {
	cfg := embeddedConfig(t)
	cfg.ShutdownTimeout = 5 * time.Second
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Stopped behind the guardian's back, as a supervisor whose restart
	// budget ran out is.
	n.System().Root.Stop(actor.NewPID(n.System().Address(), "node/frontends"))
	select {
	case <-n.Fatal():
	case <-time.After(10 * time.Second):
		t.Fatal("the supervisor's end did not make the node fail")
	}
	t0 := time.Now()
	err = n.Stop(context.Background())
	if took := time.Since(t0); took > cfg.ShutdownTimeout/2 || err != nil && strings.Contains(err.Error(), "drain") {
		t.Errorf("Stop after the supervisor failed: %v, after %v", err, took.Round(time.Millisecond))
	}
}
