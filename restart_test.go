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

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
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
}

func newFaultyStore(t *testing.T) *faultyStore {
	cfg := sqlite.DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "switchboard.db")
	s, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &faultyStore{Store: s, caller: map[string]string{}, armed: map[string]int{}, after: map[string]bool{}, tripped: map[string]int{}}
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

// Write trips the one-part call each of its parts stands for.
func (f *faultyStore) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	for name, in := range map[string]bool{"Accept": len(w.Accept) > 0, "CompleteWork": len(w.Outcomes) > 0, "ClaimWork": len(w.Claims) > 0} {
		if in {
			f.trip(name, false)
		}
	}
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
