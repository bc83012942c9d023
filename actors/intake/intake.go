package intake

import (
	"context"
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/supervision"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// Intake is the intake actor: the shell of a Pipeline of group commits,
// which it runs on goroutines of their own (Receive never waits on the
// store for a commit), and the owner of the directory. Build it with
// NewIntake.
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
	self  *actor.PID
	sys   *actor.ActorSystem
	// flushQueued is true while a flush message is in our mailbox.
	flushQueued bool
}

// flush starts the next commit; it is sent to ourselves behind the work
// already queued, so one transaction takes a whole mailbox drain.
type flush struct{}

// committed says a commit ended; its submitters have been answered.
type committed struct{ kicks []persistence.WorkSpec }

// DefaultMaxBatch is the most submissions one group commit takes: 512,
// large enough to absorb a burst, small enough that one transaction stays
// in the milliseconds.
const DefaultMaxBatch = 512

// NewIntake returns the producer of the intake actor.
func NewIntake(cfg Config) actor.Producer {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = persistence.CallTimeout
	}
	if cfg.CommitDepth <= 0 {
		cfg.CommitDepth = 1
	}
	commits, again := &sync.WaitGroup{}, &againQueue{}
	return func() actor.Actor {
		return &Intake{cfg: cfg, log: cfg.Logger.With("component", "intake"), commits: commits, again: again,
			pipe: Pipeline{Depth: cfg.CommitDepth, MaxBatch: cfg.MaxBatch}}
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
		for {
			a.routeAgain(c)
			b, ok := a.batch(c)
			if !ok {
				break
			}
			a.run(b)
			a.pipe.Done()
		}
	case *actor.Restarting:
		// The work queued dies with this incarnation: answer it now so its
		// senders retry at once rather than at their deadline. Commits out
		// answer their own; if a panic came after a commit, a retry with the
		// same id finds the stored message (submits with an id are
		// idempotent).
		entries, reports := a.pipe.Drop()
		entries = append(entries, a.again.take()...)
		failAll(entries, reports, messages.Errorf(messages.CodeUnavailable,
			"the intake restarted before answering; retry with the same id"))
	case *messages.Submit:
		a.submit(c, m)
	case *messages.AcceptForwards:
		if !a.pipe.Forwards(m) {
			m.Reply <- messages.AcceptForwardsReply{Results: []messages.ForwardResult{}}
			return
		}
		a.queued(c)
	case *messages.ApplyStatuses:
		a.pipe.Statuses(m)
		a.queued(c)
	case flush:
		a.flushQueued = false
		a.start(c)
	case *committed:
		a.pipe.Done()
		a.kick(c, m.kicks)
		a.routeAgain(c)
		a.start(c)
	case *supervision.Panicked:
		a.pipe.Done()
		m.Rethrow(a.log, "commit")
	case *messages.Resubmit:
		m.Reply <- a.resubmit(c, m.ID)
	case *messages.ResubmitBulk:
		if !m.State.Resubmittable() {
			m.Reply <- messages.BulkReply{Err: messages.Errorf(messages.CodeInvalidRequest,
				"state %q: only failed and forward_failed messages can be resubmitted", m.State)}
			return
		}
		a.bulk(c, bulkStep{req: m})
	case bulkStep:
		a.bulk(c, m)
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

// submit queues a submission for the next commit. It was validated by
// Node.Submit, the only sender of Submit.
func (a *Intake) submit(c actor.Context, m *messages.Submit) {
	// On a shared store the commit resolves it, after reading the
	// directory again if needed. One with an id goes to the commit all the
	// same: it may be a retry of one stored while it had a route.
	if m.Refusal == nil && m.Submission.ID == "" && !a.cfg.Shared {
		if _, err := a.table.Resolve(m.Submission.DestinationMSISDN); err != nil {
			m.Reply <- messages.SubmitReply{Err: err}
			return
		}
	}
	a.pipe.Submit(m)
	a.queued(c)
}

// routeAgain reads the directory again, once, when commits gave entries back
// for a frontend the store no longer has (another instance of a site
// deleted it, and the touch that would have told us never came), and
// queues them for the next commit: routed by the directory as it is, they
// go to the route's frontend now, or are answered no_route.
func (a *Intake) routeAgain(c actor.Context) {
	entries := a.again.take()
	if len(entries) == 0 {
		return
	}
	a.log.Info("frontend gone from the store; reading the directory again", "messages", len(entries))
	a.reload(c)
	a.pipe.Again(entries)
}

// queued starts a commit of a full batch, or makes sure a flush follows.
func (a *Intake) queued(c actor.Context) {
	if a.pipe.Full() {
		a.start(c)
		return
	}
	if !a.flushQueued {
		a.flushQueued = true
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
		defer supervision.CarryPanic(a.sys.Root, a.self, func() {
			b.abandon(messages.Errorf(messages.CodeUnavailable, "the intake restarted before answering; retry with the same id"))
		})
		a.sys.Root.Send(a.self, &committed{kicks: a.run(b)})
	}()
}

// batch takes the pipeline's next batch and routes it; the entries that
// cannot go are answered at once. On a shared store an entry without a
// route first has the directory read again.
func (a *Intake) batch(c actor.Context) (*Batch, bool) {
	entries, reports, ok := a.pipe.Take()
	if !ok {
		return nil, false
	}
	b := &Batch{Now: a.cfg.Clock.Now(), entries: entries, reports: reports}
	for _, r := range reports {
		b.Updates = append(b.Updates, r.updates...)
	}
	rt := router{table: a.table, node: a.cfg.Node, newID: a.cfg.NewID}
	errs := make([]error, len(entries))
	stored := make([]persistence.NewMessage, len(entries))
	missed := false
	for i, e := range entries {
		stored[i], errs[i] = rt.entryMessage(e, b.Now)
		missed = missed || isMiss(errs[i])
	}
	if missed && a.cfg.Shared {
		a.reload(c)
		rt.table = a.table
		for i, e := range entries {
			if isMiss(errs[i]) {
				stored[i], errs[i] = rt.entryMessage(e, b.Now)
			}
		}
	}
	for i, e := range entries {
		if errs[i] != nil && e.sub != nil && e.sub.Submission.ID != "" {
			// It may be a retry of one stored while it could be: the
			// commit answers the stored message, or this error.
			entries[i].refusal = errs[i]
			stored[i], errs[i] = storedOnly(e.sub.Submission), nil
		}
		if errs[i] != nil && e.fwd != nil {
			// Likewise a forward sent again (its answer was lost) after
			// this node stopped serving its frontend: the id is stored,
			// and the protocol answers it duplicate.
			entries[i].refusal = errs[i]
			stored[i], errs[i] = storedOnlyForward(e.fwd.m.Forwards[e.idx], e.fwd.m.From), nil
		}
		if errs[i] != nil {
			answer(e, persistence.Accepted{}, errs[i])
			continue
		}
		b.Stored = append(b.Stored, stored[i])
		b.from = append(b.from, i)
	}
	if len(b.Stored)+len(b.Updates) == 0 {
		a.pipe.Done()
		return a.batch(c)
	}
	if a.cfg.Board != nil {
		b.hand(a.cfg.Board, a.cfg.Owner)
	}
	if a.cfg.Relay != nil && a.cfg.Relay.Ready() {
		b.publish()
	}
	return b, true
}

// run commits a batch, answers everyone in it and publishes its changes;
// it returns the work to kick.
func (a *Intake) run(b *Batch) []persistence.WorkSpec {
	span := a.commitSpan(b)
	ctx, cancel := a.storeCtx()
	w, err := a.cfg.Store.Write(ctx, b.Now, b.Write())
	cancel()
	if span != nil {
		telemetry.Fail(span, err)
		span.End()
	}
	if err != nil {
		a.log.Error("commit failed", "messages", len(b.Stored), "reports", len(b.Updates), "err", err)
	}
	changes, kicks := b.settle(w, err)
	a.again.add(b.Again)
	for _, ch := range changes {
		a.cfg.Publish(ch)
	}
	if err == nil {
		b.handOver(w, func(to *actor.PID, work *handover.Work) { a.sys.Root.Send(to, work) })
		if a.cfg.Relay != nil {
			a.cfg.Relay.Publish(b.published(w))
		}
	}
	b.release()
	return kicks
}

// kick wakes the workers of the work a commit wrote, and the bus's relay
// for delivery work it has to take from the store.
func (a *Intake) kick(c actor.Context, kicks []persistence.WorkSpec) {
	relay := false
	for _, k := range kicks {
		switch {
		case k.Kind == persistence.WorkDelivery:
			c.Send(a.cfg.Frontends, &messages.Kick{Frontend: k.Target})
			relay = true
		case a.cfg.Peers != nil:
			c.Send(a.cfg.Peers, &messages.KickPeer{Peer: k.Target})
		}
	}
	if relay && a.cfg.Relay != nil {
		a.cfg.Relay.Kick()
	}
}

func (a *Intake) unavailable(op string, err error) error {
	a.log.Error("store call failed", "op", op, "err", err)
	return messages.Errorf(messages.CodeUnavailable, "the message store is unavailable (%s)", op)
}
