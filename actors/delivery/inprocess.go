package delivery

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Actors maps in-process frontend names to their actors. PIDs live only as
// long as the process: after a restart an embedder registers its actors
// again, and until then their messages wait in the outbox.
//
// Each registration has a number of its own, so that undoing one (the end
// of its actor, a failed registration) never undoes a later registration of
// the same name, not even one with an equal PID: an actor spawned again
// under the same name has the same PID as the one that ended.
type Actors struct {
	m   sync.Map // name -> Registration
	seq atomic.Uint64
	// changed is called after every change of the registrations (nil:
	// nobody listens yet).
	changed atomic.Pointer[func()]
}

// Registration is one registration of an actor as a frontend's.
type Registration struct {
	Frontend string
	PID      *actor.PID
	// Seq tells this registration from any other of the same frontend and
	// PID.
	Seq uint64
}

// OnChange makes fn be called after every change of the registrations (the
// Watcher is told with it). fn must not block.
func (a *Actors) OnChange(fn func()) { a.changed.Store(&fn) }

func (a *Actors) notify() {
	if fn := a.changed.Load(); fn != nil {
		(*fn)()
	}
}

// Swap registers (or replaces) the actor of a frontend. undo gives back the
// registration it replaced (or none) when the registration fails, unless
// name has had another registration since, which stays.
func (a *Actors) Swap(name string, pid *actor.PID) (undo func()) {
	r := Registration{Frontend: name, PID: pid, Seq: a.seq.Add(1)}
	prev, had := a.m.Swap(name, r)
	a.notify()
	return func() {
		if had {
			a.m.CompareAndSwap(name, r, prev)
		} else {
			a.m.CompareAndDelete(name, r)
		}
		a.notify()
	}
}

// Get returns the actor of a frontend, if registered.
func (a *Actors) Get(name string) (*actor.PID, bool) {
	v, ok := a.m.Load(name)
	if !ok {
		return nil, false
	}
	return v.(Registration).PID, true
}

// Delete forgets a frontend's actor.
func (a *Actors) Delete(name string) {
	if _, ok := a.m.LoadAndDelete(name); ok {
		a.notify()
	}
}

// Forget unregisters pid (compared by address and id, not by pointer) from
// every frontend it serves and returns their names, sorted. A frontend
// registered again with another actor meanwhile keeps that one.
func (a *Actors) Forget(pid *actor.PID) []string {
	var names []string
	a.m.Range(func(k, v any) bool {
		if v.(Registration).PID.Equal(pid) && a.m.CompareAndDelete(k, v) {
			names = append(names, k.(string))
		}
		return true
	})
	sort.Strings(names)
	if len(names) > 0 {
		a.notify()
	}
	return names
}

// End unregisters r if it is still the frontend's registration, and tells
// whether it was.
func (a *Actors) End(r Registration) bool {
	if !a.m.CompareAndDelete(r.Frontend, r) {
		return false
	}
	a.notify()
	return true
}

// Registrations returns every registration, sorted by frontend.
func (a *Actors) Registrations() []Registration {
	var rs []Registration
	a.m.Range(func(_, v any) bool {
		rs = append(rs, v.(Registration))
		return true
	})
	sort.Slice(rs, func(i, j int) bool { return rs[i].Frontend < rs[j].Frontend })
	return rs
}

// Rewatch tells the Watcher that the registrations changed.
type Rewatch struct{}

// NewWatcher builds the actor that notices the end of registered actors:
// it watches the actor of every registration in a, and when one ends (it
// stopped, by itself or not, exhausted its supervisor's budget, or was
// never alive) it ends the registration and calls onEnd with it, unless
// the frontend was registered again meanwhile. onEnd runs on the watcher's
// goroutine and must not block.
//
// Each registration is watched by a child of its own: protoactor's
// *actor.Terminated names only the PID, and with one watcher the end of an
// actor could not be told from the end of another spawned later under the
// same name (an equal PID) and registered again. A child's Watch reaches
// the actor that had the PID when the child started, at or after the
// registration, so the end it hears of is that actor's.
func NewWatcher(a *Actors, onEnd func(Registration)) actor.Producer {
	return func() actor.Actor { return &watcher{actors: a, onEnd: onEnd} }
}

type watcher struct {
	actors  *Actors
	onEnd   func(Registration)
	watches map[Registration]*actor.PID // registration -> its watch child
}

// watchEnded is a watch child's news that the actor of r ended.
type watchEnded struct{ r Registration }

func (w *watcher) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		// After a restart as well: the watch children stopped with the
		// struct that spawned them, and the registrations, kept in
		// Actors, are watched again (an actor that ended meanwhile is
		// heard of at once: a Watch of a PID with no actor is answered
		// with Terminated).
		w.watches = map[Registration]*actor.PID{}
		w.rewatch(c)
	case *Rewatch:
		w.rewatch(c)
	case *watchEnded:
		if w.actors.End(m.r) {
			w.onEnd(m.r)
		}
		w.rewatch(c)
	}
}

// rewatch gives every registration a watch child, and stops the children
// of registrations that are gone (replaced, deleted, ended).
func (w *watcher) rewatch(c actor.Context) {
	current := map[Registration]bool{}
	for _, r := range w.actors.Registrations() {
		current[r] = true
		if _, ok := w.watches[r]; !ok {
			w.watches[r] = c.Spawn(actor.PropsFromProducer(func() actor.Actor { return &watch{r: r} }))
		}
	}
	for r, pid := range w.watches {
		if !current[r] {
			c.Stop(pid)
			delete(w.watches, r)
		}
	}
}

// watch watches the actor of one registration and tells its parent when
// that actor ends.
type watch struct {
	r     Registration
	ended bool
}

func (w *watch) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		c.Watch(w.r.PID)
	case *actor.Terminated:
		if m.Who.Equal(w.r.PID) && !w.ended {
			w.ended = true
			c.Send(c.Parent(), &watchEnded{r: w.r})
		}
	case *actor.Stopping:
		// A registration replaced or deleted while its actor lives: the
		// actor forgets this watcher. One that ended needs no Unwatch
		// (it would only be a dead letter).
		if !w.ended {
			c.Unwatch(w.r.PID)
		}
	}
}
