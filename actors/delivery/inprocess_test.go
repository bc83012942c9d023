package delivery

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Forget finds a PID by value (an embedder may hold another *PID of the
// same actor) across every frontend it serves; undoing a Swap gives back
// the registration it replaced, unless another came since.
func TestActorsForgetAndUndo(t *testing.T) {
	var a Actors
	gw := actor.NewPID("nonhost", "node/gw")
	other := actor.NewPID("nonhost", "node/other")
	a.Swap("b", gw)
	a.Swap("a", actor.NewPID("nonhost", "node/gw"))
	a.Swap("c", other)
	if got := fmt.Sprint(a.Forget(actor.NewPID("nonhost", "node/gw"))); got != "[a b]" {
		t.Fatalf("Forget = %s, want [a b]", got)
	}
	if _, ok := a.Get("c"); !ok {
		t.Fatal("Forget dropped another actor's frontend")
	}

	next := actor.NewPID("nonhost", "node/next")
	a.Swap("c", next)()
	if pid, _ := a.Get("c"); pid != other {
		t.Fatalf("after undo: %v, want the previous actor", pid)
	}
	a.Swap("d", next)()
	if _, ok := a.Get("d"); ok {
		t.Fatal("undo of a first registration left it registered")
	}
	undo := a.Swap("c", next)
	a.Swap("c", gw) // registered again meanwhile
	undo()
	if pid, _ := a.Get("c"); pid != gw {
		t.Fatalf("undo overwrote a later registration: %v", pid)
	}
}

// End undoes only the registration it is given: not a later one of the
// same frontend, even with an equal PID (the same name spawned again).
func TestActorsEndOnlyItsRegistration(t *testing.T) {
	var a Actors
	a.Swap("gw", actor.NewPID("nonhost", "gw-actor"))
	first := a.Registrations()[0]
	a.Swap("gw", actor.NewPID("nonhost", "gw-actor"))
	if a.End(first) {
		t.Fatal("End of the first registration ended the second")
	}
	if _, ok := a.Get("gw"); !ok {
		t.Fatal("the second registration is gone")
	}
	if !a.End(a.Registrations()[0]) {
		t.Fatal("End of the registration in place did not end it")
	}
	if _, ok := a.Get("gw"); ok {
		t.Fatal("ended, yet still registered")
	}
}

func newSystem(t *testing.T) *actor.ActorSystem {
	system := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(system.Shutdown)
	return system
}

// startWatcher spawns a Watcher of a; onEnd sends each ended registration
// to the returned channel.
func startWatcher(system *actor.ActorSystem, a *Actors) (*actor.PID, <-chan Registration) {
	ended := make(chan Registration, 10)
	w := system.Root.Spawn(actor.PropsFromProducer(NewWatcher(a, func(r Registration) { ended <- r })))
	a.OnChange(func() { system.Root.Send(w, &Rewatch{}) })
	return w, ended
}

// quitter stops itself, through its own context, when told to.
type quitter struct{}

type quit struct{}

func (quitter) Receive(c actor.Context) {
	if _, ok := c.Message().(quit); ok {
		c.Stop(c.Self())
	}
}

func awaitEnded(t *testing.T, ended <-chan Registration, frontend string) Registration {
	t.Helper()
	select {
	case r := <-ended:
		if r.Frontend != frontend {
			t.Fatalf("ended %+v, want frontend %s", r, frontend)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("the end of %s's actor was not noticed", frontend)
		return Registration{}
	}
}

// An actor that stops by itself is unregistered, and so is a PID with no
// actor; the same name spawned again and registered is watched anew.
func TestWatcherUnregistersAnActorThatEnded(t *testing.T) {
	var a Actors
	system := newSystem(t)
	_, ended := startWatcher(system, &a)
	props := actor.PropsFromProducer(func() actor.Actor { return quitter{} })
	pid, err := system.Root.SpawnNamed(props, "gw-actor")
	if err != nil {
		t.Fatal(err)
	}
	a.Swap("gw", pid)
	system.Root.Send(pid, quit{})
	if r := awaitEnded(t, ended, "gw"); !r.PID.Equal(pid) {
		t.Fatalf("ended %v, want %v", r.PID, pid)
	}
	if _, ok := a.Get("gw"); ok {
		t.Fatal("the actor ended and is still registered")
	}

	again, err := system.Root.SpawnNamed(props, "gw-actor")
	if err != nil {
		t.Fatal(err)
	}
	a.Swap("gw", again)
	system.Root.Send(again, quit{})
	awaitEnded(t, ended, "gw")

	a.Swap("ghost", actor.NewPID(system.Address(), "nobody"))
	awaitEnded(t, ended, "ghost")
}

// The end of an actor heard after the frontend was registered again, with
// an equal PID (the same name spawned again), leaves the new registration
// in place: it is another registration.
func TestWatcherIgnoresTheEndOfAReplacedRegistration(t *testing.T) {
	var a Actors
	system := newSystem(t)
	a.Swap("gw", actor.NewPID(system.Address(), "gw-actor"))
	stale := a.Registrations()[0]
	live, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return quitter{} }), "gw-actor")
	if err != nil {
		t.Fatal(err)
	}
	a.Swap("gw", live)
	// Started only now, the watcher never watched the stale registration:
	// its end comes as its watch child would tell it, late.
	w, ended := startWatcher(system, &a)
	system.Root.Send(w, &watchEnded{r: stale})
	if err := system.Root.PoisonFuture(w).Wait(); err != nil {
		t.Fatal(err)
	}
	if pid, ok := a.Get("gw"); !ok || pid != live {
		t.Fatalf("after a stale end: registered %v (%v), want %v", pid, ok, live)
	}
	select {
	case r := <-ended:
		t.Fatalf("a stale end was reported: %+v", r)
	default:
	}
}

// A watcher that restarts (here onEnd panics) watches every registration
// again: the watch children stopped with the struct that spawned them.
func TestWatcherWatchesAgainAfterARestart(t *testing.T) {
	var a Actors
	system := newSystem(t)
	props := actor.PropsFromProducer(func() actor.Actor { return quitter{} })
	pids := map[string]*actor.PID{}
	for _, name := range []string{"a", "b"} {
		pid, err := system.Root.SpawnNamed(props, name+"-actor")
		if err != nil {
			t.Fatal(err)
		}
		pids[name] = pid
		a.Swap(name, pid)
	}
	// No OnChange: the watcher learns of the registrations only when it
	// starts (and starts again).
	ended := make(chan Registration, 10)
	var panicked bool
	system.Root.Spawn(actor.PropsFromProducer(NewWatcher(&a, func(r Registration) {
		ended <- r
		if !panicked {
			panicked = true
			panic("injected: onEnd fails")
		}
	})))
	system.Root.Send(pids["a"], quit{})
	awaitEnded(t, ended, "a")
	system.Root.Send(pids["b"], quit{})
	awaitEnded(t, ended, "b")
}
