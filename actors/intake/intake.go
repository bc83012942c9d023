package intake

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/supervision"
	"github.com/switchboard-dev/switchboard/supervision/ratelog"
)

// Intake is the intake actor: the shell of a Pipeline of group commits,
// which it runs on goroutines of their own (Receive never waits on the
// store for a commit, nor for a resubmit: resubmit.go), and the owner of
// the directory. Build it with NewIntake.
type Intake struct {
	cfg   Config
	log   *slog.Logger
	table *Table
	pipe  Pipeline
	// commits counts the commits out, across incarnations: a stop waits
	// for them, so that their submitters are answered before the store
	// closes.
	commits *sync.WaitGroup
	// again holds the entries commits gave back (Batch.Again) until the
	// intake routes them again; across incarnations, like commits.
	again *againQueue
	// resubmits queues the resubmit jobs, and calls counts their store
	// calls out; across incarnations, like commits.
	resubmits *resubmitQueue
	calls     *sync.WaitGroup
	// resubmitPanic: the Panicked to come is a resubmit's store call's.
	resubmitPanic bool
	self          *actor.PID
	sys           *actor.ActorSystem
	// failures logs the commits that fail, at a bounded rate: while a
	// store is away every group commit fails (thousands a minute under
	// load); across incarnations, like commits.
	failures *ratelog.Log
}

// A store that fails logs at most commitFailureBurst "commit failed" lines
// per commitFailureWindow, the rest counted.
const (
	commitFailureBurst  = 10
	commitFailureWindow = time.Minute
)

// flush starts the next commit; it is sent to ourselves behind the work
// already queued, so one transaction takes a whole mailbox drain.
type flush struct{}

// committed says a commit ended; its submitters have been answered.
type committed struct{ kicks []persistence.WorkSpec }

// NewIntake returns the producer of the intake actor.
func NewIntake(cfg Config) actor.Producer {
	cfg = cfg.withDefaults()
	commits, again := &sync.WaitGroup{}, &againQueue{}
	resubmits, calls := &resubmitQueue{}, &sync.WaitGroup{}
	log := cfg.Logger.With("component", "intake")
	failures, err := ratelog.New(ratelog.Config{Logger: log, Level: slog.LevelError,
		Msg: "commit failed", Summary: "commit failures not logged one by one",
		Burst: commitFailureBurst, Window: commitFailureWindow, Now: cfg.Clock.Now, AfterFunc: cfg.Clock.AfterFunc})
	if err != nil {
		panic(err) // a Logger is required (Config), the rest is constant
	}
	return func() actor.Actor {
		return &Intake{cfg: cfg, log: log, commits: commits, again: again,
			resubmits: resubmits, calls: calls, failures: failures,
			pipe: Pipeline{Depth: cfg.CommitDepth, MaxBatch: cfg.MaxBatch, Shared: cfg.Shared}}
	}
}

func (a *Intake) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.cfg.StoreTimeout)
}

// Receive implements actor.Actor.
func (a *Intake) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.self, a.sys = c.Self(), c.ActorSystem()
		a.load()
	case *actor.Stopping:
		// A flush queued behind the poison pill never runs: once every
		// commit out has ended, commit what is left now (the store is still
		// open).
		a.commits.Wait()
		a.pipe.Settled()
		// A resubmit's result sent back after the stop is never read: once
		// its store call has ended, a write it made is answered from the
		// result the call left in the queue (its changes published, nothing
		// kicked, as a commit's here; a bulk with pages left answered what
		// it resubmitted, with stopped()), and the callers of the other
		// jobs are told stopped().
		a.calls.Wait()
		w, jobs := a.resubmits.Stop()
		if w != nil {
			a.wrote(w, func([]persistence.WorkSpec) {}, true)
			if w.panicked != nil {
				// Logged only: a panic here would restart the intake,
				// which is stopping.
				w.panicked.Log(a.log, "resubmit read back")
			}
		}
		for _, j := range jobs {
			j.fail(stopped())
		}
		for {
			a.routeAgain(c)
			b, ok := a.batch(c)
			if !ok {
				break
			}
			a.run(b)
			a.pipe.Done()
		}
		a.failures.Close()
	case *actor.Restarting:
		// The work queued dies with this incarnation: answer it now so its
		// senders retry at once rather than at their deadline. Commits out
		// answer their own; if a panic came after a commit, a retry with the
		// same id finds the stored message (submits with an id are
		// idempotent).
		entries, reports := a.pipe.Drop()
		failAll(append(entries, a.again.take()...), reports, restarted())
		// So are the resubmits queued; the one whose store call is out
		// comes back to the next incarnation, which goes on with it.
		for _, j := range a.resubmits.Drop() {
			j.fail(restarted())
		}
	case *messages.Submit:
		if a.pipe.Submit(m, a.table) {
			a.queued(c)
		}
	case *messages.AcceptForwards:
		if a.pipe.Forwards(m) {
			a.queued(c)
		}
	case *messages.ApplyStatuses:
		a.pipe.Statuses(m)
		a.queued(c)
	case flush:
		a.pipe.Flushed()
		a.start(c)
	case *committed:
		a.pipe.Done()
		a.kick(c, m.kicks)
		a.routeAgain(c)
		a.start(c)
	case *supervision.Panicked:
		if a.resubmitPanic {
			m.Rethrow(a.log, "resubmit")
		}
		a.pipe.Done()
		m.Rethrow(a.log, "commit")
	case *messages.Resubmit:
		a.resubmit(resubmitJob{one: m})
	case *messages.ResubmitBulk:
		a.bulk(m)
	case *resubmitRead:
		a.read(m)
	case *resubmitWritten:
		a.written(c, m)
	case resubmitPanicked:
		// Its Panicked comes next, from the same goroutine.
		if j, ok := a.resubmits.Done(); ok {
			j.fail(restarted())
		}
		a.resubmitPanic = true
	case *messages.PutRoute:
		m.Reply <- a.putRoute(c, m.Route)
	case *messages.DeleteRoute:
		m.Reply <- a.deleteRoute(m.Prefix)
	case *messages.PutFrontend:
		m.Reply <- a.putFrontend(c, m.Frontend)
	case *messages.DeleteFrontend:
		m.Reply <- a.deleteFrontend(c, m.Name)
	case *messages.ReloadDirectory:
		a.reload(c)
	}
}

// routeAgain queues the entries commits gave back for a frontend the store
// no longer has (another instance of a site deleted it, and the touch that
// would have told us never came) and reads the directory again, once:
// routed by the directory as it is, they go to the route's frontend now,
// or are answered no_route.
func (a *Intake) routeAgain(c actor.Context) {
	if n := a.pipe.Again(a.again.take()); n > 0 {
		a.log.Info("frontend gone from the store; reading the directory again", "messages", n)
		a.reload(c)
	}
}

// queued starts a commit of a full batch, or sends the flush the pipeline
// asks for.
func (a *Intake) queued(c actor.Context) {
	if start, send := a.pipe.Queued(); start {
		a.start(c)
	} else if send {
		c.Send(c.Self(), flush{})
	}
}

// start starts the next commit when the pipeline gives one out.
func (a *Intake) start(c actor.Context) {
	b, ok := a.batch(c)
	if !ok {
		return
	}
	a.commits.Add(1)
	go func() {
		defer a.commits.Done()
		defer supervision.CarryPanic(a.sys.Root, a.self, func() { b.abandon(restarted()) })
		a.sys.Root.Send(a.self, &committed{kicks: a.run(b)})
	}()
}

// batch takes the pipeline's next batch (Pipeline.Next, which reads the
// directory again through reload) and the workers' offers and the bus's
// publishing for its new work.
func (a *Intake) batch(c actor.Context) (*Batch, bool) {
	rt := router{table: a.table, node: a.cfg.Node, newID: a.cfg.NewID, site: a.cfg.Site}
	b, ok := a.pipe.Next(a.cfg.Clock.Now(), rt, func() *Table { a.reload(c); return a.table })
	if !ok {
		return nil, false
	}
	if a.cfg.Board != nil {
		b.hand(a.cfg.Board, a.cfg.Owner)
	}
	if a.cfg.Relay != nil && a.cfg.Relay.Ready() {
		b.publish()
	}
	return b, true
}

// kick sends the kicks planned for the work a commit or a resubmit wrote:
// the frontends' workers, the peers' (with federation), then the bus's
// relay.
func (a *Intake) kick(c actor.Context, work []persistence.WorkSpec) {
	k := planKicks(work)
	for _, fe := range k.frontends {
		c.Send(a.cfg.Frontends, &messages.Kick{Frontend: fe})
	}
	for _, p := range k.peers {
		if a.cfg.Peers != nil {
			c.Send(a.cfg.Peers, &messages.KickPeer{Peer: p})
		}
	}
	if k.relay() && a.cfg.Relay != nil {
		a.cfg.Relay.Kick()
	}
}

// storeFailed logs a store call that failed and is what its caller is
// told (storeError).
func (a *Intake) storeFailed(op string, err error) error {
	if errors.Is(err, persistence.ErrInvalid) {
		a.log.Warn("store refused a call's input", "op", op, "err", err)
	} else {
		a.log.Error("store call failed", "op", op, "err", err)
	}
	return storeError(op, err)
}
