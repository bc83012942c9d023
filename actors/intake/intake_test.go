package intake_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/intake"
	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// idle stands for the frontend supervisor: it ignores what it is sent.
type idle struct{}

func (idle) Receive(actor.Context) {}

// TestIntakeKeepsTheBookOfPeers: the intake keeps the local frontends'
// names in the peer book (our registry for peers) from its start and at
// every change, and routes to a frontend the book says a peer serves.
func TestIntakeKeepsTheBookOfPeers(t *testing.T) {
	st := sqlitetest.Open(t)
	now := clock.Real{}.Now()
	if err := st.PutFrontend(context.Background(), messages.Frontend{Name: "fe-a", Mode: messages.ModePull, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	book := peer.NewBook()
	book.SetRegistry("beta", []string{"fe-remote"})
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	frontends := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return idle{} }))
	pid := sys.Root.Spawn(actor.PropsFromProducer(intake.NewIntake(intake.Config{
		Node: "alpha", Store: st, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler), Frontends: frontends,
		Remote: book, Local: book, Publish: func(messages.StateChanged) {}, NewID: func() string { return "m-1" },
	})))
	defer func() { _ = sys.Root.StopFuture(pid).Wait() }()
	local := func(want ...string) {
		t.Helper()
		polltest.Until(t, 10*time.Second, fmt.Sprintf("local frontends %v", want),
			func() bool { return slices.Equal(book.Local(), want) })
	}
	local("fe-a")

	ask := func(m func(chan<- error) any) error {
		t.Helper()
		reply := make(chan error, 1)
		sys.Root.Send(pid, m(reply))
		return <-reply
	}
	if err := ask(func(r chan<- error) any {
		return &messages.PutFrontend{Frontend: messages.Frontend{Name: "fe-b", Mode: messages.ModePull}, Reply: r}
	}); err != nil {
		t.Fatal(err)
	}
	local("fe-a", "fe-b")
	if err := ask(func(r chan<- error) any { return &messages.DeleteFrontend{Name: "fe-a", Reply: r} }); err != nil {
		t.Fatal(err)
	}
	local("fe-b")

	// A route may name a frontend only a peer serves.
	if err := ask(func(r chan<- error) any {
		return &messages.PutRoute{Route: messages.Route{Prefix: "46", Frontend: "fe-remote"}, Reply: r}
	}); err != nil {
		t.Fatalf("a route to a peer's frontend: %v", err)
	}
	if err := ask(func(r chan<- error) any {
		return &messages.PutRoute{Route: messages.Route{Prefix: "47", Frontend: "fe-nobody"}, Reply: r}
	}); err == nil {
		t.Fatal("a route to a frontend nobody serves was taken")
	}
}
