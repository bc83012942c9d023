package supervision

import (
	"log/slog"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
)

// Panicked carries a panic of a goroutine an actor started for a call it
// must not wait on in Receive (a store round, a group commit) back to the
// actor, which panics with it there (Rethrow): its supervisor then restarts
// it within its Budget, as when the call was made in Receive. Left to
// itself, a panic on such a goroutine would end the process.
type Panicked struct {
	Value any
	Stack []byte
}

// CarryPanic, deferred first thing in such a goroutine, recovers its panic
// and sends it to the actor at pid as a *Panicked; before, when not nil,
// runs first (to answer the callers the goroutine would have answered).
func CarryPanic(root *actor.RootContext, pid *actor.PID, before func()) {
	if v := recover(); v != nil {
		stack := debug.Stack()
		if before != nil {
			before()
		}
		root.Send(pid, &Panicked{Value: v, Stack: stack})
	}
}

// Rethrow logs the panic (Log) and panics with its value: called in the
// actor's Receive.
func (p *Panicked) Rethrow(log *slog.Logger, what string) {
	p.Log(log, what)
	panic(p.Value)
}

// Log logs the panic; what names the call that panicked. Alone, it is for
// an actor that must not restart (it is stopping).
func (p *Panicked) Log(log *slog.Logger, what string) {
	log.Error(what+" panicked", "panic", p.Value, "stack", string(p.Stack))
}
