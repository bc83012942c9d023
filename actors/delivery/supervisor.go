package delivery

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
)

// Supervisor is the parent of the delivery workers ("frontends" in the actor
// tree): one worker per local frontend, spawned from the store at start and
// on FrontendUp, stopped on FrontendDown. It routes kicks, polls and acks to
// the right worker.
type Supervisor struct {
	d       *Deps
	log     *slog.Logger
	workers map[string]workerRef
	gen     int
	// draining: a Drain arrived; workers spawned later start drained too.
	draining bool
}

type workerRef struct {
	pid *actor.PID
	fe  messages.Frontend
}

// NewSupervisor returns the producer of the frontend supervisor.
func NewSupervisor(d *Deps) (actor.Producer, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	d = d.withDefaults()
	return func() actor.Actor {
		return &Supervisor{d: d, log: d.Logger.With("component", "frontends"), workers: map[string]workerRef{}}
	}, nil
}

// Receive implements actor.Actor.
func (s *Supervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		ctx, cancel := s.d.storeCtx()
		fes, err := s.d.Store.Frontends(ctx)
		cancel()
		if err != nil {
			panic(fmt.Errorf("frontends: load: %w", err))
		}
		for _, fe := range fes {
			s.up(c, fe)
		}
	case *messages.FrontendUp:
		s.up(c, m.Frontend)
	case *messages.FrontendDown:
		if w, ok := s.workers[m.Name]; ok {
			c.Poison(w.pid)
			delete(s.workers, m.Name)
		}
	case *messages.Kick:
		if m.Frontend == "" { // every worker (the ring moved this instance's ranges)
			for _, w := range s.workers {
				c.Send(w.pid, m)
			}
			return
		}
		if w, ok := s.workers[m.Frontend]; ok {
			c.Send(w.pid, m)
		}
	case *messages.Poll:
		if w, ok := s.pullWorker(m.Frontend, func(err error) { m.Reply <- messages.PollReply{Err: err} }); ok {
			c.Send(w, m)
		}
	case *messages.Ack:
		if w, ok := s.pullWorker(m.Frontend, func(err error) { m.Reply <- messages.AckReply{Err: err} }); ok {
			c.Send(w, m)
		}
	case *messages.Drain:
		s.draining = true
		s.drain(c, m)
	}
}

// up spawns the worker of a frontend, replacing one whose mode, URL or
// secret changed.
func (s *Supervisor) up(c actor.Context, fe messages.Frontend) {
	if w, ok := s.workers[fe.Name]; ok {
		if w.fe.Mode == fe.Mode && w.fe.URL == fe.URL && w.fe.Secret == fe.Secret {
			c.Send(w.pid, &messages.Kick{Frontend: fe.Name})
			return
		}
		// The old worker finishes what it has in flight; its leases keep the
		// new one from taking the same messages.
		c.Poison(w.pid)
	}
	s.gen++
	pid, err := c.SpawnNamed(s.d.Props("delivery", NewWorker(s.d, fe)), fmt.Sprintf("%s#%d", fe.Name, s.gen))
	if err != nil {
		panic(fmt.Errorf("frontends: spawn worker of %s: %w", fe.Name, err))
	}
	s.workers[fe.Name] = workerRef{pid: pid, fe: fe}
	if s.draining {
		c.Send(pid, &messages.Drain{Done: make(chan struct{})})
	}
}

func (s *Supervisor) pullWorker(name string, fail func(error)) (*actor.PID, bool) {
	w, ok := s.workers[name]
	switch {
	case !ok:
		fail(messages.Errorf(messages.CodeNotFound, "no frontend named %q", name))
	case w.fe.Mode != messages.ModePull:
		fail(messages.Errorf(messages.CodeNotPull, "frontend %q is a %s frontend; only pull frontends poll and ack", name, w.fe.Mode))
	default:
		return w.pid, true
	}
	return nil, false
}

// drain asks every worker to finish what it has in flight and closes done
// when all have.
func (s *Supervisor) drain(c actor.Context, m *messages.Drain) {
	var wg sync.WaitGroup
	for _, w := range s.workers {
		ch := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ch:
			case <-m.Abandon: // nil (never) when the sender waits for good
			}
		}()
		c.Send(w.pid, &messages.Drain{Done: ch})
	}
	go func() { wg.Wait(); close(m.Done) }()
}
