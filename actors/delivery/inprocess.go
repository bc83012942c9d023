package delivery

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// Actors maps in-process frontend names to their actors. PIDs live only as
// long as the process: after a restart an embedder registers its actors
// again, and until then their messages wait in the outbox.
type Actors struct {
	m sync.Map // name -> *actor.PID
}

// Set registers (or replaces) the actor of a frontend.
func (a *Actors) Set(name string, pid *actor.PID) { a.m.Store(name, pid) }

// Get returns the actor of a frontend, if registered.
func (a *Actors) Get(name string) (*actor.PID, bool) {
	v, ok := a.m.Load(name)
	if !ok {
		return nil, false
	}
	return v.(*actor.PID), true
}

// Delete forgets a frontend's actor.
func (a *Actors) Delete(name string) { a.m.Delete(name) }
