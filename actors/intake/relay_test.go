package intake_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/intake"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// fakeRelay stands for the bus's relay: Ready as set, the rows handed to
// Publish and the kicks recorded.
type fakeRelay struct {
	ready atomic.Bool
	kicks atomic.Int64
	mu    sync.Mutex
	rows  []persistence.Relay
}

func (r *fakeRelay) Ready() bool { return r.ready.Load() }
func (r *fakeRelay) Kick()       { r.kicks.Add(1) }
func (r *fakeRelay) Publish(rows []persistence.Relay) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, rows...)
}

func (r *fakeRelay) published() []persistence.Relay {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]persistence.Relay(nil), r.rows...)
}

// kicked counts the delivery kicks the frontend supervisor is sent; a
// channel sent to it is closed once what came before was counted.
type kicked struct{ n *atomic.Int64 }

func (k kicked) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.Kick:
		if m.Frontend != "" {
			k.n.Add(1)
		}
	case chan struct{}:
		close(m)
	}
}

// TestIntakePublishesThroughTheBusRelay: while the bus's relay is ready, a
// commit writes its new delivery work marked relayed and hands the rows to
// the relay (no relay round takes them from the store, no worker is
// kicked to claim them), except work scheduled ahead (deliver_after),
// which is written unrelayed for the relay to take once it is due (on the
// bus it would wait, naked, in its consumer's ack-pending); while the
// relay is not ready, the work is written unrelayed and the relay and the
// workers are kicked.
func TestIntakePublishesThroughTheBusRelay(t *testing.T) {
	st := sqlitetest.Open(t)
	withFrontend(t, st, "44")
	ctx := context.Background()
	var workerKicks atomic.Int64
	relay := &fakeRelay{}
	relay.ready.Store(true)
	sys, pid, frontends := startIntake(t, st, kicked{&workerKicks}, intake.Config{Relay: relay})
	submitAt := func(id string, after *time.Time) messages.Message {
		t.Helper()
		reply := make(chan messages.SubmitReply, 1)
		sub := messages.Submission{ID: id, SourceMSISDN: "15550001", DestinationMSISDN: "447700900001", Body: "hi"}
		sub.DeliverAfter = after
		sys.Root.Send(pid, &messages.Submit{Submission: sub, Reply: reply})
		r := <-reply
		if r.Err != nil || !r.Created {
			t.Fatalf("submit %s: %+v", id, r)
		}
		return r.Message
	}
	submit := func(id string) messages.Message { t.Helper(); return submitAt(id, nil) }
	relayedAt := func(now time.Time, want ...string) {
		t.Helper()
		rs, err := st.RelayWork(ctx, persistence.RelayRequest{Now: now, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.MessageID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("RelayWork took %q, want %q", got, want)
		}
	}
	relayed := func(want ...string) { t.Helper(); relayedAt(clock.Real{}.Now(), want...) }

	m := submit("via-bus")
	polltest.Until(t, 10*time.Second, "the row handed to the relay", func() bool { return len(relay.published()) == 1 })
	if r := relay.published()[0]; r.MessageID != m.ID || r.Target != "fe-a" || r.Row <= 0 {
		t.Fatalf("published %+v, want the row of %s for fe-a", r, m.ID)
	}
	relayed() // written relayed: no round takes it again

	relay.ready.Store(false)
	submit("via-store")
	// The relay is kicked after the workers, in the order of the commits:
	// once it is, every kick of both commits has been sent.
	polltest.Until(t, 10*time.Second, "the relay kicked", func() bool { return relay.kicks.Load() == 1 })
	counted := make(chan struct{})
	sys.Root.Send(frontends, counted)
	<-counted
	if n := workerKicks.Load(); n != 1 {
		t.Fatalf("%d worker kicks, want 1 (work handed to the relay is the bus's)", n)
	}
	if n := len(relay.published()); n != 1 {
		t.Fatalf("%d rows handed to the relay, want still 1", n)
	}
	relayed("via-store")

	relay.ready.Store(true)
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	submitAt("later", &later)
	submit("after-later")
	polltest.Until(t, 10*time.Second, "the next row handed to the relay", func() bool { return len(relay.published()) >= 2 })
	if r := relay.published()[1]; r.MessageID != "after-later" {
		t.Fatalf("handed to the relay: %+v, want after-later (the scheduled message waits in the outbox)", relay.published())
	}
	relayed()                 // not due yet: no round takes it
	relayedAt(later, "later") // once due, a round does
}
