package delivery

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// kicks counts the relay's kicks.
type kicks struct{ n atomic.Int64 }

func (k *kicks) Kick() { k.n.Add(1) }

// TestSupervisorKicksTheRelay: a kick for a frontend (new delivery work
// was committed) kicks the bus's relay too; a kick of every worker (the
// ring moved this instance's ranges) does not.
func TestSupervisorKicksTheRelay(t *testing.T) {
	cfg := sqlite.DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "delivery.db")
	st, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	relay := &kicks{}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	prod, err := NewSupervisor(&Deps{
		Owner: "me", Store: st, Clock: clock.Real{}, Policy: dispatchPolicy, Logger: slog.New(slog.DiscardHandler),
		Metrics: m, Publish: func(messages.StateChanged) {}, HTTPClient: http.DefaultClient, Actors: &Actors{},
		SendTimeout: time.Second, Relay: relay,
		Props: func(_ string, p actor.Producer) *actor.Props { return actor.PropsFromProducer(p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	pid := sys.Root.Spawn(actor.PropsFromProducer(prod))
	// handled answers once what was sent before it has been handled.
	handled := func() {
		t.Helper()
		reply := make(chan messages.PollReply, 1)
		sys.Root.Send(pid, &messages.Poll{Frontend: "none", Reply: reply})
		<-reply
	}
	sys.Root.Send(pid, &messages.Kick{Frontend: "fe"})
	handled()
	if n := relay.n.Load(); n != 1 {
		t.Fatalf("%d relay kicks after a frontend's kick, want 1", n)
	}
	sys.Root.Send(pid, &messages.Kick{})
	handled()
	if n := relay.n.Load(); n != 1 {
		t.Fatalf("%d relay kicks after a kick of every worker, want still 1", n)
	}
}
