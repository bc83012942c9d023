package intake_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/intake"
	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// idle stands for the frontend supervisor: it ignores what it is sent.
type idle struct{}

func (idle) Receive(actor.Context) {}

// startIntake starts an intake of node alpha on st, in an actor system of
// its own, beside frontends standing for the frontend supervisor; cfg
// holds what the test adds (Remote, Local, Relay, Publish), opts what it
// adds to the intake's props. It returns the system, the intake and the
// frontend supervisor; both actors stop, and the system shuts down, when
// the test ends (before the store closes).
func startIntake(t *testing.T, st persistence.Store, frontends actor.Actor, cfg intake.Config, opts ...actor.PropsOption) (*actor.ActorSystem, *actor.PID, *actor.PID) {
	t.Helper()
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	fe := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return frontends }))
	cfg.Node, cfg.Store, cfg.Clock, cfg.Logger, cfg.Frontends = "alpha", st, clock.Real{}, slog.New(slog.DiscardHandler), fe
	cfg.NewID = func() string { return "m-1" }
	if cfg.Publish == nil {
		cfg.Publish = func(messages.StateChanged) {}
	}
	pid := sys.Root.Spawn(actor.PropsFromProducer(intake.NewIntake(cfg), opts...))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	return sys, pid, fe
}

// withFrontend puts the pull frontend fe-a in st's directory, and a route
// to it from each of prefixes.
func withFrontend(t *testing.T, st persistence.Store, prefixes ...string) {
	t.Helper()
	ctx, now := context.Background(), clock.Real{}.Now()
	if err := st.PutFrontend(ctx, messages.Frontend{Name: "fe-a", Mode: messages.ModePull, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	for _, p := range prefixes {
		if err := st.PutRoute(ctx, messages.Route{Prefix: p, Frontend: "fe-a", UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIntakeKeepsTheBookOfPeers: the intake keeps the local frontends'
// names in the peer book (our registry for peers) from its start and at
// every change, and routes to a frontend the book says a peer serves.
func TestIntakeKeepsTheBookOfPeers(t *testing.T) {
	st := sqlitetest.Open(t)
	withFrontend(t, st)
	book := peer.NewBook()
	book.SetRegistry("beta", []string{"fe-remote"})
	sys, pid, _ := startIntake(t, st, idle{}, intake.Config{Remote: book, Local: book})
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

// TestResubmitKeepsDeliverAfter: a scheduled message resubmitted, alone or
// in bulk, is still not offered before its deliver_after.
func TestResubmitKeepsDeliverAfter(t *testing.T) {
	st := sqlitetest.Open(t)
	withFrontend(t, st, "44")
	ctx := context.Background()
	now := clock.Real{}.Now()
	later := now.Add(time.Hour)
	var failed []persistence.NewMessage
	for _, id := range []string{"alone", "bulk"} {
		failed = append(failed, persistence.NewMessage{ID: id, SourceMSISDN: "15550001", DestinationMSISDN: "447700900123",
			Body: "at nine", Options: messages.Options{DeliverAfter: &later}, SourceSMSC: "alpha", DestSMSC: "gone",
			Frontend: "fe-gone", State: messages.StateForwardFailed, Detail: "forward_timeout"})
	}
	if _, err := st.Accept(ctx, now, failed); err != nil {
		t.Fatal(err)
	}
	sys, pid, _ := startIntake(t, st, idle{}, intake.Config{})

	one := make(chan messages.ResubmitReply, 1)
	sys.Root.Send(pid, &messages.Resubmit{ID: "alone", Reply: one})
	if r := <-one; r.Err != nil {
		t.Fatalf("resubmit alone: %v", r.Err)
	}
	bulk := make(chan messages.BulkReply, 1)
	sys.Root.Send(pid, &messages.ResubmitBulk{State: messages.StateForwardFailed, Reply: bulk})
	if r := <-bulk; r.Err != nil || r.Resubmitted != 1 {
		t.Fatalf("bulk resubmit: %+v, want bulk resubmitted", r)
	}
	claim := func(at time.Time) []string {
		t.Helper()
		c, err := st.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: "fe-a", Owner: "o",
			Limit: 10, Now: at, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, w := range c.Work {
			ids = append(ids, w.MessageID)
		}
		slices.Sort(ids)
		return ids
	}
	if got := claim(clock.Real{}.Now()); len(got) != 0 {
		t.Fatalf("resubmitted %v offered now, an hour before their deliver_after", got)
	}
	if got := claim(later.Add(time.Second)); !slices.Equal(got, []string{"alone", "bulk"}) {
		t.Fatalf("claimed %v at deliver_after, want alone and bulk", got)
	}
}

// TestResubmitRefusedWhileTheSiteLacksWhatTheMessageNeeds: a failed
// message with a class is not put back to work while the site does not
// take classes (Config.Site: an instance of an earlier version in its
// ring, which could claim it and deliver it without its class): a
// single resubmit is refused with the site's reason, a bulk's skips it;
// one without a class is resubmitted. Once the site takes classes, so is
// the classed one. Before, the resubmit ignored the site.
func TestResubmitRefusedWhileTheSiteLacksWhatTheMessageNeeds(t *testing.T) {
	st := sqlitetest.Open(t)
	withFrontend(t, st, "44")
	ctx := context.Background()
	now := clock.Real{}.Now()
	var failed []persistence.NewMessage
	for _, id := range []string{"flash", "flash-bulk", "plain"} {
		o := messages.Options{}
		if id != "plain" {
			o.MessageClass = messages.Class(0)
		}
		failed = append(failed, persistence.NewMessage{ID: id, SourceMSISDN: "15550001", DestinationMSISDN: "447700900123",
			Body: "now", Options: o, SourceSMSC: "alpha", DestSMSC: "gone", Frontend: "fe-gone",
			State: messages.StateForwardFailed, Detail: "forward_timeout"})
	}
	if _, err := st.Accept(ctx, now, failed); err != nil {
		t.Fatal(err)
	}
	var mixed atomic.Bool
	mixed.Store(true)
	site := func(o messages.Options) error {
		if mixed.Load() && len(o.Needs()) > 0 {
			return messages.Errorf(messages.CodeUnavailable, "message_class: instance old lacks it")
		}
		return nil
	}
	sys, pid, _ := startIntake(t, st, idle{}, intake.Config{Site: site})

	one := make(chan messages.ResubmitReply, 1)
	sys.Root.Send(pid, &messages.Resubmit{ID: "flash", Reply: one})
	if r := <-one; !isCode(r.Err, messages.CodeUnavailable) {
		t.Fatalf("resubmit of a flash SMS while the site lacks message_class: %v, want unavailable", r.Err)
	}
	bulk := make(chan messages.BulkReply, 1)
	sys.Root.Send(pid, &messages.ResubmitBulk{State: messages.StateForwardFailed, Reply: bulk})
	if r := <-bulk; r.Err != nil || r.Resubmitted != 1 || r.Skipped != 2 {
		t.Fatalf("bulk resubmit while the site lacks message_class: %+v, want the plain one resubmitted, the two flash skipped", r)
	}
	for id, want := range map[string]messages.State{"flash": messages.StateForwardFailed, "flash-bulk": messages.StateForwardFailed, "plain": messages.StatePending} {
		if m, err := st.GetMessage(ctx, id); err != nil || m.State != want {
			t.Errorf("%s: %v %v, want %s", id, m.State, err, want)
		}
	}
	mixed.Store(false)
	sys.Root.Send(pid, &messages.Resubmit{ID: "flash", Reply: one})
	if r := <-one; r.Err != nil {
		t.Fatalf("resubmit of a flash SMS once the site takes classes: %v", r.Err)
	}
}

// isCode reports whether err is a *messages.Error of code.
func isCode(err error, code string) bool {
	var e *messages.Error
	return errors.As(err, &e) && e.Code == code
}
