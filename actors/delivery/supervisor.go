package delivery

import (
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Supervisor is the parent of the delivery workers ("frontends" in the actor
// tree): one worker per local frontend, spawned from the store at start and
// on FrontendUp. It routes kicks, polls and acks to the right worker. A
// worker whose frontend changed (planUp) or went away (FrontendDown,
// planDown) retires: it finishes what it has in flight (beside its
// successor, if any), then stops. A worker that stops otherwise (its
// restart budget used up) is replaced a moment later (lost).
type Supervisor struct {
	d       *Deps
	log     *slog.Logger
	workers map[string]workerRef
	// ends holds a channel for each worker, by PID id, closed once it
	// has stopped (Terminated): a Drain waits for a worker's drain or its
	// end, and for the retiring workers' end.
	ends map[string]chan struct{}
	// retiring are the workers that retire, by PID id; retiringPull the
	// last retiring pull worker of each frontend, by name, which takes its
	// acks while the frontend has no pull worker (ackWorker).
	retiring     map[string]*actor.PID
	retiringPull map[string]*actor.PID
	gen          int
	// draining: a Drain arrived; workers spawned later start drained too,
	// and none is spawned again (lost).
	draining bool
	// stopping: the supervisor stops or restarts, and its workers with it.
	stopping bool
	// respawns are the frontends whose worker stopped for good, by name
	// (lost); wake wakes the supervisor when the next is due.
	respawns map[string]respawn
	wake     *clock.Wakeup
}

// respawn is a frontend whose worker stopped for good (lost): a new one
// is spawned with fe at at, when due; stopped and wait are when it
// stopped and the wait before the new one (respawnAfter).
type respawn struct {
	fe          messages.Frontend
	at, stopped time.Time
	wait        time.Duration
	due         bool
}

// respawnMsg wakes the supervisor to spawn the workers due (respawns).
type respawnMsg struct{}

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
		return &Supervisor{d: d, log: d.Logger.With("component", "frontends"), workers: map[string]workerRef{},
			ends: map[string]chan struct{}{}, retiring: map[string]*actor.PID{},
			retiringPull: map[string]*actor.PID{}, respawns: map[string]respawn{}}
	}, nil
}

// Receive implements actor.Actor.
func (s *Supervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		s.d.Down.reset() // the workers are spawned afresh
		self, sys := c.Self(), c.ActorSystem()
		s.wake = clock.NewWakeup(s.d.Clock, func(uint64) { sys.Root.Send(self, respawnMsg{}) })
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
		s.down(c, m.Name)
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
		if w, ok := s.ackWorker(m.Frontend, func(err error) { m.Reply <- messages.AckReply{Err: err} }); ok {
			c.Send(w, m)
		}
	case *messages.Drain:
		s.draining = true
		s.wake.Cancel()
		s.drain(c, m)
	case *actor.Terminated:
		s.ended(m.Who)
	case respawnMsg:
		s.respawnDue(c)
	case *actor.Stopping, *actor.Restarting:
		s.stopping = true
		if s.wake != nil {
			s.wake.Cancel()
		}
	}
}

// ended is the end of a worker: a retiring one is done; the frontend's
// own worker stopped for good (its restart budget used up) and is lost.
func (s *Supervisor) ended(pid *actor.PID) {
	if end, ok := s.ends[pid.Id]; ok {
		close(end)
		delete(s.ends, pid.Id)
	}
	if _, ok := s.retiring[pid.Id]; ok {
		delete(s.retiring, pid.Id)
		maps.DeleteFunc(s.retiringPull, func(_ string, p *actor.PID) bool { return p.Id == pid.Id })
		return
	}
	for name, w := range s.workers {
		if w.pid.Id == pid.Id {
			delete(s.workers, name)
			if !s.stopping {
				s.lost(name, w.fe)
			}
		}
	}
}

// Respawn waits: a frontend's worker that stopped for good is replaced
// after respawnMin, doubled for each such stop within respawnQuiet of the
// last one, up to respawnMax.
const (
	respawnMin   = time.Second
	respawnMax   = 5 * time.Minute
	respawnQuiet = 10 * time.Minute
)

// respawnAfter is how long after its worker stopped for good at now a
// frontend's next worker is spawned, the last such stop having been at
// stopped and waited wait (zero: none).
func respawnAfter(now, stopped time.Time, wait time.Duration) time.Duration {
	if wait == 0 || now.Sub(stopped) > respawnQuiet {
		return respawnMin
	}
	return min(2*wait, respawnMax)
}

// lost drops the worker of the frontend name that stopped for good (its
// restart budget used up: it panicked over and over), and spawns a new one
// a moment later (respawnAfter), unless the node stops or the frontend
// changes or goes away meanwhile. Left dead, the frontend delivered
// nothing until it was changed or the node restarted, and nothing but the
// panics told; a node-wide stop (as for the node's own actors) would stop
// every other frontend for one's fault. The waits keep a fault that stays
// from looping fast.
func (s *Supervisor) lost(name string, fe messages.Frontend) {
	now := s.d.Clock.Now()
	r := s.respawns[name]
	r.wait = respawnAfter(now, r.stopped, r.wait)
	r.fe, r.stopped, r.at, r.due = fe, now, now.Add(r.wait), !s.draining
	s.respawns[name] = r
	due := r.at
	if !r.due {
		due = time.Time{} // none: the node stops
	}
	s.d.Down.set(name, due)
	s.log.Error("delivery worker stopped: its restart budget is used up; the frontend delivers nothing until a new one starts",
		"frontend", name, "respawn_in", r.wait, "respawn", r.due)
	if r.due {
		s.wake.Schedule(r.at)
	}
}

// respawnDue spawns the workers due (lost).
func (s *Supervisor) respawnDue(c actor.Context) {
	if s.draining || s.stopping {
		return
	}
	now := s.d.Clock.Now()
	var next time.Time
	for name, r := range s.respawns {
		switch {
		case !r.due:
		case r.at.After(now):
			next = clock.Earliest(next, r.at)
		default:
			s.log.Info("delivery worker starts again", "frontend", name)
			s.settled(name)
			s.up(c, r.fe)
		}
	}
	if !next.IsZero() {
		s.wake.Schedule(next)
	}
}

// settled says the frontend name came up or went away: a new worker for it
// is no longer due (lost), and none is down.
func (s *Supervisor) settled(name string) {
	s.d.Down.clear(name)
	if r, ok := s.respawns[name]; ok && r.due {
		r.due = false
		s.respawns[name] = r
	}
}

// waits reports whether fe coming up finds its worker lost and waiting
// to be spawned again (respawnAfter) with the same settings: it waits on.
// A frontend comes up again unchanged whenever the directory is read again
// (any route or frontend changed through the API, another instance's
// change): that spawned the worker at once, so a fault that stays looped
// as fast as the directory changed, and the wait was for nothing. A
// change (planUp) spawns a worker with the new settings at once.
func (s *Supervisor) waits(fe messages.Frontend) bool {
	r, ok := s.respawns[fe.Name]
	if !ok || !r.due || planUp(s.d.Clock.Now(), &r.fe, fe, 0).spawn {
		return false
	}
	r.fe = fe
	s.respawns[fe.Name] = r
	return true
}

// workerPlan is what a frontend that comes up (planUp) or goes away
// (planDown) does to its worker.
type workerPlan struct {
	// kick the worker (it claims again).
	kick bool
	// retire the worker: it drains, and stops once drained, at the
	// latest by.
	retire bool
	by     time.Time
	// spawn a worker with the frontend's settings.
	spawn bool
}

// planUp decides what fe coming up (the store's frontends at the start,
// or a FrontendUp) does at now, old being the settings of its worker (nil:
// it has none). A worker with the same mode, URL and secret is kicked.
// Otherwise a new worker is spawned at once, and the old one, if any,
// retires: it takes no new work, records the verdicts of what it has in
// flight, and stops (an smpp frontend's old client, held by the old worker,
// closes then); within drain (Deps.retireDrain) whatever it still has.
// Stopped at once, its verdicts went nowhere: each message it had in
// flight waited for its lease and was delivered again. The old worker's
// leases keep the new one from taking the same messages.
func planUp(now time.Time, old *messages.Frontend, fe messages.Frontend, drain time.Duration) workerPlan {
	switch {
	case old == nil:
		return workerPlan{spawn: true}
	case old.Mode == fe.Mode && old.URL == fe.URL && old.Secret == fe.Secret:
		return workerPlan{kick: true}
	}
	p := planDown(now, old, drain)
	p.spawn = true
	return p
}

// planDown decides what a frontend going away (FrontendDown: deleted here,
// or by another instance of the site) does at now to its worker, old being
// its settings (nil: it has none): it retires as on a change (planUp), so
// that the webhook calls and submit_sm it has under way are answered and
// recorded (an smpp frontend's client stays bound until then). Stopped at
// once, each such message waited for its lease, and was delivered again
// if the frontend came back (or its message was routed elsewhere).
func planDown(now time.Time, old *messages.Frontend, drain time.Duration) workerPlan {
	if old == nil {
		return workerPlan{}
	}
	return workerPlan{retire: true, by: now.Add(drain)}
}

// up spawns the worker of a frontend, replacing one whose mode, URL or
// secret changed (planUp). A frontend whose worker waits to be spawned
// again (lost) waits on unless it changed (waits).
func (s *Supervisor) up(c actor.Context, fe messages.Frontend) {
	if s.waits(fe) {
		return
	}
	s.settled(fe.Name)
	w, old := s.worker(fe.Name)
	plan := planUp(s.d.Clock.Now(), old, fe, s.d.retireDrain())
	if plan.kick {
		c.Send(w.pid, &messages.Kick{Frontend: fe.Name})
	}
	s.retireWorker(c, fe.Name, plan)
	if !plan.spawn {
		return
	}
	s.gen++
	// The client is got here, in the order of the frontend's changes (see
	// Deps.smppClient).
	pid, err := c.SpawnNamed(s.d.Props("delivery", NewWorker(s.d, fe, s.d.smppClient(fe, s.log))), fmt.Sprintf("%s#%d", fe.Name, s.gen))
	if err != nil {
		panic(fmt.Errorf("frontends: spawn worker of %s: %w", fe.Name, err))
	}
	s.workers[fe.Name] = workerRef{pid: pid, fe: fe}
	s.ends[pid.Id] = make(chan struct{})
	if s.draining {
		c.Send(pid, &messages.Drain{Done: make(chan struct{})})
	}
}

// down retires the worker of a frontend that went away (planDown).
func (s *Supervisor) down(c actor.Context, name string) {
	s.settled(name)
	_, old := s.worker(name)
	s.retireWorker(c, name, planDown(s.d.Clock.Now(), old, s.d.retireDrain()))
}

// worker returns the worker of the frontend name and its settings (nil:
// the frontend has no worker).
func (s *Supervisor) worker(name string) (workerRef, *messages.Frontend) {
	w, ok := s.workers[name]
	if !ok {
		return w, nil
	}
	return w, &w.fe
}

// retireWorker retires the worker of the frontend name when plan says so:
// it is the frontend's worker no more (a poll or an ack finds its
// successor, or no frontend), and a Drain waits for its end. Its handover
// offer is withdrawn at once, not when the worker handles its retire: the
// intake takes no more of it meanwhile (what it took still comes to the
// worker, which gives it back: Dispatcher.Retire).
func (s *Supervisor) retireWorker(c actor.Context, name string, plan workerPlan) {
	if !plan.retire {
		return
	}
	w := s.workers[name]
	if s.d.Board != nil {
		s.d.Board.Withdraw(handover.Key{Kind: persistence.WorkDelivery, Target: name}, w.pid)
	}
	c.Send(w.pid, &retire{by: plan.by})
	s.retiring[w.pid.Id] = w.pid
	if w.fe.Mode == messages.ModePull {
		s.retiringPull[name] = w.pid
	}
	delete(s.workers, name)
}

// pullWorker is the worker of the pull frontend name, for its polls and
// acks; fail answers them when there is none: no such frontend, not a
// pull frontend, or its worker is down (lost) until its respawn. Answered
// not_found then, its consumer took the frontend for deleted.
func (s *Supervisor) pullWorker(name string, fail func(error)) (*actor.PID, bool) {
	w, ok := s.workers[name]
	r, lost := s.respawns[name]
	if !ok && lost && r.due {
		w.fe, ok = r.fe, true
	}
	switch {
	case !ok:
		fail(messages.Errorf(messages.CodeNotFound, "no frontend named %q", name))
	case w.fe.Mode != messages.ModePull:
		fail(messages.Errorf(messages.CodeNotPull, "frontend %q is a %s frontend; only pull frontends poll and ack", name, w.fe.Mode))
	case w.pid == nil:
		fail(errUnavailable(fmt.Sprintf("the delivery worker of frontend %q is down on this instance (its restart budget is used up) until %s; poll and ack again then",
			name, r.at.UTC().Format(time.RFC3339))))
	default:
		return w.pid, true
	}
	return nil, false
}

// ackWorker is the worker that takes the acks of the frontend name: its
// pull worker (pullWorker), or, while it has none that runs (changed to
// another mode, deleted, or its worker down), its retiring pull worker if
// any: that one offered the messages its consumers ack, and takes their
// acks while their leases run (Dispatcher.Retire). Refused, the verdict of
// a message polled before the change was lost, and the message delivered
// again once its lease ran out.
func (s *Supervisor) ackWorker(name string, fail func(error)) (*actor.PID, bool) {
	if w, ok := s.workers[name]; !ok || w.fe.Mode != messages.ModePull {
		if pid, ok := s.retiringPull[name]; ok {
			return pid, true
		}
	}
	return s.pullWorker(name, fail)
}

// drain asks every worker to finish what it has in flight and closes done
// when all have (or stopped), and the retiring workers have stopped (they
// drain already).
func (s *Supervisor) drain(c actor.Context, m *messages.Drain) {
	var wg sync.WaitGroup
	wait := func(ch, end <-chan struct{}) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ch:
			case <-end: // the worker stopped without draining (its budget used up)
			case <-m.Abandon: // nil (never) when the sender waits for good
			}
		}()
	}
	for _, w := range s.workers {
		ch := make(chan struct{})
		wait(ch, s.ends[w.pid.Id])
		c.Send(w.pid, &messages.Drain{Done: ch})
	}
	for id, pid := range s.retiring {
		wait(s.ends[id], nil)
		// It no longer waits for acks (Dispatcher.Drain).
		c.Send(pid, &messages.Drain{Done: make(chan struct{})})
	}
	go func() { wg.Wait(); close(m.Done) }()
}
