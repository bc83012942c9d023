package delivery

import (
	"sort"
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

// Swap registers (or replaces) the actor of a frontend and returns the one
// it replaced (nil when none was registered), for Restore.
func (a *Actors) Swap(name string, pid *actor.PID) (prev *actor.PID) {
	v, ok := a.m.Swap(name, pid)
	if !ok {
		return nil
	}
	return v.(*actor.PID)
}

// Restore undoes a Swap of pid whose registration failed: prev (nil: no
// actor) is registered again, unless name has had another registration
// since, which stays.
func (a *Actors) Restore(name string, pid, prev *actor.PID) {
	if prev == nil {
		a.m.CompareAndDelete(name, pid)
		return
	}
	a.m.CompareAndSwap(name, pid, prev)
}

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

// Forget unregisters pid (compared by address and id, not by pointer) from
// every frontend it serves and returns their names, sorted. A frontend
// registered again with another actor meanwhile keeps that one.
func (a *Actors) Forget(pid *actor.PID) []string {
	var names []string
	a.m.Range(func(k, v any) bool {
		if v.(*actor.PID).Equal(pid) && a.m.CompareAndDelete(k, v) {
			names = append(names, k.(string))
		}
		return true
	})
	sort.Strings(names)
	return names
}
