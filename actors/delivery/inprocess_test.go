package delivery

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// Forget finds a PID by value (an embedder may hold another *PID of the
// same actor) across every frontend it serves; Restore gives back the
// registration a failed one replaced, unless another came since.
func TestActorsForgetAndRestore(t *testing.T) {
	var a Actors
	gw := actor.NewPID("nonhost", "node/gw")
	other := actor.NewPID("nonhost", "node/other")
	a.Set("b", gw)
	a.Set("a", actor.NewPID("nonhost", "node/gw"))
	a.Set("c", other)
	if got := fmt.Sprint(a.Forget(actor.NewPID("nonhost", "node/gw"))); got != "[a b]" {
		t.Fatalf("Forget = %s, want [a b]", got)
	}
	if _, ok := a.Get("c"); !ok {
		t.Fatal("Forget dropped another actor's frontend")
	}

	next := actor.NewPID("nonhost", "node/next")
	if prev := a.Swap("c", next); prev != other {
		t.Fatalf("Swap returned %v", prev)
	}
	a.Restore("c", next, other)
	if pid, _ := a.Get("c"); pid != other {
		t.Fatalf("after Restore: %v, want the previous actor", pid)
	}
	a.Swap("d", next)
	a.Restore("d", next, nil)
	if _, ok := a.Get("d"); ok {
		t.Fatal("Restore of a first registration left it registered")
	}
	a.Swap("c", next)
	a.Set("c", gw) // registered again meanwhile
	a.Restore("c", next, other)
	if pid, _ := a.Get("c"); pid != gw {
		t.Fatalf("Restore overwrote a later registration: %v", pid)
	}
}
