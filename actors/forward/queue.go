package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/actors/clock"
	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Config is what a forward queue actor needs.
type Config struct {
	// Node is our name; Peer the peer this queue sends to (filled per
	// peer; Validate does not require it).
	Node, Peer string
	// Owner names this instance on the leases it takes.
	Owner     string
	Store     persistence.Store
	Transport peer.Transport
	Clock     clock.Clock
	Policy    Policy
	// Timeout bounds one request to the peer (--http-timeout).
	Timeout time.Duration
	Logger  *slog.Logger
	Metrics *Metrics
	// Publish receives a StateChanged for every committed transition.
	Publish func(messages.StateChanged)
	// StoreTimeout bounds each store call (default 30s).
	StoreTimeout time.Duration
	// Fence, when set, fences every claim by the site's ring: the queue
	// claims only work in this instance's forward ranges.
	Fence ring.Fence
}

// Validate reports what is missing or wrong.
func (c Config) Validate() error {
	var errs []error
	if c.Node == "" || c.Owner == "" || c.Store == nil || c.Transport == nil ||
		c.Clock == nil || c.Logger == nil || c.Publish == nil || c.Metrics == nil {
		errs = append(errs, errors.New("forward: Node, Owner, Store, Transport, Clock, Logger, Publish and Metrics are required"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("forward: Timeout must be positive"))
	}
	errs = append(errs, c.Policy.Validate())
	return errors.Join(errs...)
}

// Private messages.
type (
	tick   struct{}
	parked struct{}
	// sent is a request's result, sent back by its goroutine.
	sent struct {
		kind    persistence.WorkKind
		work    []persistence.Work
		forward []messages.ForwardResult
		status  []messages.StatusReply
		err     error
	}
)

// Queue is the forward queue actor of one peer: it sends the peer's
// forward work and the delivery_status reports owed to it, from the
// outbox, in batches, while the peer is healthy. Build it with New.
type Queue struct {
	cfg     Config
	log     *slog.Logger
	link    messages.PeerLink
	lanes   map[persistence.WorkKind]*Lane
	self    *actor.PID
	parent  *actor.PID
	sys     *actor.ActorSystem
	wake    *clock.Wakeup
	parking bool
}

// New returns the producer of a forward queue actor.
func New(cfg Config) actor.Producer {
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 30 * time.Second
	}
	return func() actor.Actor {
		return &Queue{
			cfg: cfg,
			log: cfg.Logger.With("component", "forward", "peer", cfg.Peer),
			lanes: map[persistence.WorkKind]*Lane{
				persistence.WorkForward: NewLane(cfg.Policy.InFlight),
				persistence.WorkStatus:  NewLane(cfg.Policy.InFlight),
			},
		}
	}
}

// kinds is the order lanes are served in.
var kinds = []persistence.WorkKind{persistence.WorkStatus, persistence.WorkForward}

// Receive implements actor.Actor.
func (q *Queue) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		q.self, q.parent, q.sys = c.Self(), c.Parent(), c.ActorSystem()
		q.wake = clock.NewWakeup(q.cfg.Clock, func(uint64) { q.sys.Root.Send(q.self, tick{}) })
		q.schedule()
		// Until the peer actor says otherwise the peer is not healthy: its
		// pending messages (from before a restart) are queued.
		q.startParking(c)
	case *actor.Restarting, *actor.Stopping:
		if q.wake != nil {
			q.wake.Cancel()
		}
	case messages.PeerLink:
		q.setLink(c, m)
	case *messages.KickPeer:
		if !q.link.Healthy && !m.Status {
			// A pending message committed while the peer turned unhealthy
			// (the intake saw it healthy): queue it like the others.
			q.startParking(c)
		}
		if m.Status {
			q.lanes[persistence.WorkStatus].Kick()
		} else {
			q.lanes[persistence.WorkForward].Kick()
		}
		q.pump(c)
	case tick:
		q.schedule()
		for _, l := range q.lanes {
			l.Kick()
		}
		q.pump(c)
	case parked:
		q.park(c)
	case *sent:
		q.done(c, m)
	}
}

// schedule arms the next tick: the retry interval, or sooner in a site of
// several instances, whose other instances commit work this queue owns
// without kicking it.
func (q *Queue) schedule() {
	every := q.cfg.Policy.RetryInterval
	if q.cfg.Fence != nil {
		if p := q.cfg.Fence.IdlePoll(); p > 0 {
			every = min(every, p)
		}
	}
	q.wake.Schedule(q.cfg.Clock.Now().Add(every))
}

func (q *Queue) setLink(c actor.Context, l messages.PeerLink) {
	was := q.link.Healthy
	q.link = l
	for _, lane := range q.lanes {
		// A lane closed by a failed request reopens on the next passed
		// check; an open lane stays as it is.
		if l.Healthy && (!was || !lane.Open()) {
			lane.SetOpen(true)
		} else if !l.Healthy {
			lane.SetOpen(false)
		}
	}
	if l.Healthy {
		q.parking = false
		q.pump(c)
	} else if was {
		q.startParking(c)
	}
}

func (q *Queue) startParking(c actor.Context) {
	if !q.parking {
		q.parking = true
		c.Send(c.Self(), parked{})
	}
}

// park moves one page of the peer's pending messages to forward_queued.
func (q *Queue) park(c actor.Context) {
	if !q.parking || q.link.Healthy {
		q.parking = false
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
	more, err := peer.Park(ctx, q.cfg.Store, q.cfg.Clock.Now(), q.cfg.Peer, "peer "+q.cfg.Peer+" is not healthy", q.cfg.Publish)
	cancel()
	if err != nil {
		q.log.Error("queueing pending forwards failed", "err", err)
		q.parking = false // the next change of link or restart tries again
		return
	}
	if more {
		c.Send(c.Self(), parked{})
		return
	}
	q.parking = false
}

// pump claims and sends while the lanes allow.
func (q *Queue) pump(c actor.Context) {
	for _, kind := range kinds {
		lane := q.lanes[kind]
		for lane.Claims() > 0 {
			work, ok := q.claim(kind)
			if !ok || !lane.Claimed(len(work), q.cfg.Policy.Batch) {
				break
			}
			q.send(kind, work)
		}
	}
}

func (q *Queue) claim(kind persistence.WorkKind) ([]persistence.Work, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
	defer cancel()
	req := persistence.ClaimRequest{
		Kind: kind, Target: q.cfg.Peer, Owner: q.cfg.Owner, Limit: q.cfg.Policy.Batch,
		Now: q.cfg.Clock.Now(), Lease: q.lease(),
	}
	claim, ok, err := ring.Claim(ctx, q.cfg.Store, q.cfg.Fence, req)
	if err != nil {
		q.log.Error("claim failed", "kind", kind, "err", err)
		return nil, false
	}
	if !ok {
		return nil, false // not ours now: a new assignment kicks us
	}
	return claim.Work, true
}

// lease outlives the request it covers (timeout plus the commit after it);
// a crash in between lets another claim take the work after it.
func (q *Queue) lease() time.Duration { return 2*q.cfg.Timeout + 10*time.Second }

// send runs one request in its own goroutine; its result comes back as a
// message, so Receive never waits on the network.
func (q *Queue) send(kind persistence.WorkKind, work []persistence.Work) {
	link, tr, timeout := q.link, q.cfg.Transport, q.cfg.Timeout
	self, root := q.self, q.sys.Root
	node := q.cfg.Node
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		res := &sent{kind: kind, work: work}
		if kind == persistence.WorkForward {
			fs := make([]messages.Forward, len(work))
			for i, w := range work {
				fs[i] = messages.ForwardOf(w.Message)
			}
			res.forward, res.err = tr.Forward(ctx, link.Addr, link.ForwardBatch, fs)
			if res.err == nil && len(res.forward) != len(fs) {
				res.err = fmt.Errorf("peer answered %d results for %d forwards", len(res.forward), len(fs))
			}
		} else {
			rs := make([]messages.StatusReport, len(work))
			for i, w := range work {
				rs[i] = ReportOf(node, w.Message)
			}
			res.status, res.err = tr.Status(ctx, link.Addr, link.StatusBatch, rs)
			if res.err == nil && len(res.status) != len(rs) {
				res.err = fmt.Errorf("peer answered %d results for %d reports", len(res.status), len(rs))
			}
		}
		root.Send(self, res)
	}()
}

// overloaded reports whether err is the peer shedding load.
func overloaded(err error) bool {
	var ce *peer.CallError
	return errors.As(err, &ce) && ce.Status == http.StatusTooManyRequests
}

// ReportOf is the delivery_status report of a message final at node.
func ReportOf(node string, m messages.Message) messages.StatusReport {
	status := messages.ReportDelivered
	if m.State == messages.StateFailed {
		status = messages.ReportFailed
	}
	return messages.StatusReport{ID: m.ID, Node: node, Status: status, At: m.UpdatedAt, Reason: m.Reason}
}

// done records a request's results and sends more.
func (q *Queue) done(c actor.Context, r *sent) {
	now := q.cfg.Clock.Now()
	// A peer that sheds load (429) is up: its work waits a retry interval
	// and the link stays open.
	busy := overloaded(r.err)
	closed := q.lanes[r.kind].Done(r.err == nil || busy)
	var outcomes []persistence.Outcome
	var updates []persistence.StatusUpdate
	if r.err != nil {
		q.log.Warn("request to peer failed", "kind", r.kind, "messages", len(r.work), "err", r.err)
		q.cfg.Metrics.failed(q.cfg.Peer, r.kind)
		for _, w := range r.work {
			o := q.cfg.Policy.Unsent(now, q.cfg.Peer, w, r.err)
			if busy {
				o.RetryAt = now.Add(q.cfg.Policy.RetryInterval)
			}
			outcomes = append(outcomes, o)
		}
		if closed {
			// One failed check per broken link, not one per request that
			// was in flight when it broke.
			c.Send(q.parent, messages.PeerContactFailed{Err: r.err})
		}
	} else if r.kind == persistence.WorkForward {
		for i, w := range r.work {
			v := q.cfg.Policy.Judge(now, q.cfg.Peer, w, r.forward[i])
			if v.Status != nil {
				updates = append(updates, *v.Status)
			} else {
				outcomes = append(outcomes, *v.Outcome)
			}
			if r.forward[i].Error == nil {
				q.cfg.Metrics.completed(q.cfg.Peer)
			}
		}
	} else {
		// Every answer is final for the report: applied, recorded before, or
		// unknown to the origin (nothing more we can tell it).
		for _, w := range r.work {
			outcomes = append(outcomes, persistence.Outcome{Kind: persistence.WorkStatus, Target: q.cfg.Peer,
				MessageID: w.MessageID, Result: persistence.ResultDelivered, Detail: "reported to " + q.cfg.Peer})
		}
	}
	q.record(now, r.work, outcomes, updates)
	q.pump(c)
}

// record commits outcomes and status updates. If the store fails, the
// leases run out and the work is claimed again (forwards are idempotent at
// the peer, reports at the origin).
func (q *Queue) record(now time.Time, work []persistence.Work, outcomes []persistence.Outcome, updates []persistence.StatusUpdate) {
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
	defer cancel()
	msg := make(map[string]messages.Message, len(work))
	epoch := make(map[string]uint64, len(work))
	for _, w := range work {
		msg[w.MessageID] = w.Message
		epoch[w.MessageID] = w.LeaseEpoch
	}
	for i := range outcomes {
		// Fenced by the claim they come from: if the ring moved the
		// token and its new owner claimed the row since, this answer is
		// not ours to record any more.
		if e := epoch[outcomes[i].MessageID]; e > 0 {
			outcomes[i].Epoch, outcomes[i].Owner = e, q.cfg.Owner
		}
	}
	if len(outcomes) > 0 {
		comps, err := q.cfg.Store.CompleteWork(ctx, now, outcomes)
		if err != nil {
			q.log.Error("recording forward outcomes failed; the leases will run out and the work be retried", "err", err)
		}
		for i, comp := range comps {
			o := outcomes[i]
			state := persistence.StateAfter(o.Kind, o.Result)
			if comp != persistence.Applied || state == "" || (state == msg[o.MessageID].State && o.Result == persistence.ResultRetry) {
				continue
			}
			q.cfg.Publish(messages.StateChanged{ID: o.MessageID, State: state, Frontend: msg[o.MessageID].Frontend,
				At: now, Detail: o.Detail, Reason: o.Reason})
		}
	}
	if len(updates) > 0 {
		comps, err := q.cfg.Store.ApplyStatus(ctx, now, updates)
		if err != nil {
			q.log.Error("recording final states failed; the leases will run out and the work be retried", "err", err)
		}
		for i, comp := range comps {
			if comp != persistence.Applied {
				continue
			}
			u := updates[i]
			state := messages.StateDelivered
			if u.Result == persistence.ResultFailed {
				state = messages.StateFailed
			}
			q.cfg.Publish(messages.StateChanged{ID: u.ID, State: state, Frontend: msg[u.ID].Frontend,
				At: now, Detail: "reported by " + q.cfg.Peer, Reason: u.Reason})
		}
	}
}
