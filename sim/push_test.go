package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// pushCluster is a cluster of one node for the push frontends' own
// code: its store faults f, its frontend faults none, no network.
func pushCluster(f StoreFault) *Cluster {
	return &Cluster{shared: []*shared{{log: newClaimLog()}}, clocks: []*nodeClock{{}},
		frontFaults: map[int]FrontendFault{}, storeFaults: map[int]StoreFault{0: f}, storeFailed: map[int]int{},
		frontRng: rand.New(rand.NewSource(1))}
}

// hook is node 0's webhook frontend "w".
var hook = frontend{name: "w", node: 0, kind: KindWebhook}

// handOver has incarnation n1#1 hand message id to hook's receiver and
// returns its answer's status and what the receiver recorded (false:
// nothing).
func handOver(t *testing.T, c *Cluster, id string) (int, Delivery, bool) {
	t.Helper()
	body, err := json.Marshal(messages.Outgoing{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, hookURL(hook.name), bytes.NewReader(body))
	req.RemoteAddr = "n1#1"
	w := httptest.NewRecorder()
	n := len(c.rec.deliveries)
	c.receive(hook, w, req)
	if len(c.rec.deliveries) == n {
		return w.Code, Delivery{}, false
	}
	return w.Code, c.rec.deliveries[len(c.rec.deliveries)-1], true
}

// delivered is a delivery outcome of message id at hook.
func delivered(id string) []persistence.Outcome {
	return []persistence.Outcome{{Kind: persistence.WorkDelivery, Target: hook.name, MessageID: id, Result: persistence.ResultDelivered}}
}

// TestHandOverLabelMovesOnlyWithItsOutcome: a push hand-over's label
// (Delivery.By) moves only when a write of that message's outcome
// failed, not when the store was slow or failed another write (or a
// crashed incarnation's): two hand-overs of one message by one
// incarnation after its "delivered" answer, with slow writes and other
// failed outcomes between them, are counted redelivered.
func TestHandOverLabelMovesOnlyWithItsOutcome(t *testing.T) {
	st := openTestStore(t)
	ctx := context.Background()
	c := pushCluster(StoreFault{Slow: time.Millisecond})
	v := &storeView{Store: &faultStore{Store: st, c: c, i: 0}, log: c.shared[0].log}

	_, first, _ := handOver(t, c, "a")
	if err := v.PutPeerRegistry(ctx, persistence.PeerRegistry{Peer: "n2", Frontends: []string{}, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.CompleteWork(ctx, time.Now(), delivered("b")); err != nil {
		t.Fatal(err)
	}
	c.storeFaults[0] = StoreFault{Full: true}
	if _, err := v.CompleteWork(ctx, time.Now(), delivered("b")); err == nil {
		t.Fatal("CompleteWork on a full store went through")
	}
	// A crashed incarnation's view fails a's outcome: it hands nothing
	// over again, n1#1 has no reason to.
	dead := &storeView{Store: v.Store, log: v.log}
	dead.kill()
	if _, err := dead.CompleteWork(ctx, time.Now(), delivered("a")); err == nil {
		t.Fatal("CompleteWork through a crashed view went through")
	}
	_, again, _ := handOver(t, c, "a")
	if first.By != "n1#1" || again.By != first.By {
		t.Errorf("hand-overs of a by n1#1 labelled %q, then %q after slow writes, b's failed outcome and a crashed incarnation's: want n1#1 both", first.By, again.By)
	}
	r := Check(History{
		Submits:    []Submit{{ID: "a", Node: "n1", Frontend: hook.name, Outcome: Accepted}},
		Origin:     map[string]messages.State{"a": messages.StateDelivered},
		Deliveries: []Delivery{first, again},
	})
	if r.Redelivered != 1 {
		t.Errorf("a handed twice by n1#1 after its delivered answer: redelivered=%d, want 1", r.Redelivered)
	}

	// b's outcome write failed: n1#1 may hand b over again.
	if _, b, _ := handOver(t, c, "b"); b.By == "n1#1" {
		t.Errorf("b handed over after its outcome's write failed, labelled %q like before it", b.By)
	}
}

// TestRetryAnswerIsAHandOver: a push frontend's "retry" answer (a
// webhook's 503, an actor's Retry) is recorded, offered, with the
// incarnation that handed the message over.
func TestRetryAnswerIsAHandOver(t *testing.T) {
	c := pushCluster(StoreFault{})
	c.frontFaults[0] = FrontendFault{Fail: 1}
	code, d, ok := handOver(t, c, "a")
	if code != http.StatusServiceUnavailable || !ok || d.Ack != Offered || d.By != "n1#1" || d.Kind != KindWebhook {
		t.Errorf("webhook answered %d; recorded %v %+v, want 503 and an offered hand-over by n1#1", code, ok, d)
	}

	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	f := frontend{name: "act", node: 0, kind: KindActor}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &actorFrontend{c: c, f: f, by: "n1#2"} }))
	got, err := sys.Root.RequestFuture(pid, &messages.Delivery{Message: messages.Outgoing{ID: "b"}, Deadline: time.Now().Add(time.Minute)}, time.Minute).Result()
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := got.(*messages.DeliveryResult); res == nil || res.Status != messages.Retry {
		t.Fatalf("actor frontend answered %+v, want retry", got)
	}
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	if n := len(c.rec.deliveries); n != 2 || c.rec.deliveries[1] != (Delivery{ID: "b", Frontend: "act", Node: "n1", Ack: Offered, Push: true, By: "n1#2", Kind: KindActor}) {
		t.Errorf("actor frontend's retry answer recorded as %+v", c.rec.deliveries)
	}
}
