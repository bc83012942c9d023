package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/actors/handover"
	"github.com/switchboard-dev/switchboard/actors/peer"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/telemetry"
	"github.com/switchboard-dev/switchboard/transport"
)

// Config is what a forward queue actor needs.
type Config struct {
	// Node is our name; Peer the peer this queue sends to (filled per
	// peer; Validate does not require it).
	Node, Peer string
	// Owner names this instance on the leases it takes.
	Owner     string
	Store     persistence.Store
	Transport transport.Peer
	Clock     clock.Clock
	Policy    Policy
	// Timeout bounds one request to the peer.
	Timeout time.Duration
	Logger  *slog.Logger
	Metrics *Metrics
	// Publish receives a StateChanged for every committed transition.
	Publish func(messages.StateChanged)
	// StoreTimeout bounds each store call (zero: persistence.CallTimeout).
	StoreTimeout time.Duration
	// Fence, when set, fences every claim by the site's ring: the queue
	// claims only work in this instance's forward ranges.
	Fence ring.Fence
	// Board, when set, is where the queue offers to take new forwards at
	// once (see package handover); only while the store is this
	// instance's alone (no Fence, or one without an idle poll): on a shared
	// store a forward is the ring owner's, so only claims take it.
	Board *handover.Board
	// Tracing makes the spans of the forwards and delivery_status reports
	// of traced messages (nil: none).
	Tracing *telemetry.Tracing
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
		batch   Batch
		forward []messages.ForwardResult
		status  []messages.StatusReply
		err     error
	}
	// roundDone is a store round's result.
	roundDone struct {
		round   *FlowRound
		written persistence.Written
		claims  []*persistence.Claim
		err     error
	}
	// panicked carries a panic of a store round's goroutine back to the
	// actor, which panics with it: its supervisor restarts it, as when the
	// call was made in Receive.
	panicked struct {
		value any
		stack []byte
	}
)

// Queue is the forward queue actor of one peer: the shell of a Flow. It
// sends the peer's forward work and the delivery_status reports owed to
// it, from the outbox, in batches, while the peer is healthy; it records
// their results and claims the next batches in one store round at a time,
// on a goroutine of its own, so Receive waits neither on the network nor on
// the store. Build it with New.
type Queue struct {
	cfg     Config
	log     *slog.Logger
	link    messages.PeerLink
	flow    *Flow
	self    *actor.PID
	parent  *actor.PID
	sys     *actor.ActorSystem
	wake    *clock.Wakeup
	parking bool
	offered int // what the queue last put on the handover board
}

// New returns the producer of a forward queue actor.
func New(cfg Config) actor.Producer {
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = persistence.CallTimeout
	}
	return func() actor.Actor {
		return &Queue{
			cfg:  cfg,
			log:  cfg.Logger.With("component", "forward", "peer", cfg.Peer),
			flow: NewFlow(cfg.Peer, cfg.Owner, cfg.Policy),
		}
	}
}

// Receive implements actor.Actor.
func (q *Queue) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		q.self, q.parent, q.sys = c.Self(), c.Parent(), c.ActorSystem()
		if q.cfg.Board != nil {
			// A queue spawned for a peer that was gone has the PID of the
			// one before it (handover.Board.Forget).
			q.cfg.Board.Forget(q.boardKey(), q.self)
		}
		q.wake = clock.NewWakeup(q.cfg.Clock, func(uint64) { q.sys.Root.Send(q.self, tick{}) })
		q.schedule()
		// Until the peer actor says otherwise the peer is not healthy: its
		// pending messages (from before a restart) are queued.
		q.startParking(c)
		return
	case *actor.Restarting, *actor.Stopping:
		if q.wake != nil {
			q.wake.Cancel()
		}
		q.offer(0)
		return
	case *handover.Work:
		m.Arrived(q.cfg.Board, q.self)
		q.flow.Handover(m.Work)
	case messages.PeerLink:
		q.setLink(c, m)
	case *messages.KickPeer:
		if !q.link.Healthy && !m.Status {
			// A pending message committed while the peer turned unhealthy
			// (the intake saw it healthy): queue it like the others.
			q.startParking(c)
		}
		if m.Status {
			q.flow.Lane(persistence.WorkStatus).Kick()
		} else {
			q.flow.Lane(persistence.WorkForward).Kick()
		}
	case tick:
		q.schedule()
		for _, k := range kinds {
			q.flow.Lane(k).Kick()
		}
	case parked:
		q.park(c)
		return
	case *sent:
		q.sent(c, m)
	case *roundDone:
		if m.err != nil {
			q.log.Error("recording forward results failed; the leases will run out and the work be retried", "err", m.err)
		}
		sends, changes := q.flow.Done(q.cfg.Clock.Now(), m.round, m.written, m.claims, m.err)
		for _, ch := range changes {
			q.cfg.Publish(ch)
		}
		for _, b := range sends {
			q.send(b)
		}
	case *panicked:
		q.log.Error("store call panicked", "panic", m.value, "stack", string(m.stack))
		panic(m.value)
	default:
		return
	}
	q.step()
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
	for _, k := range kinds {
		lane := q.flow.Lane(k)
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

// step sends the handed-over forwards there is room for, starts the store
// round the flow asks for and updates the queue's offer.
func (q *Queue) step() {
	for _, b := range q.flow.HandedOut() {
		q.send(b)
	}
	if r, ok := q.flow.Next(q.cfg.Clock.Now(), q.lease()); ok {
		go q.run(r)
	}
	if q.cfg.Fence == nil || q.cfg.Fence.IdlePoll() == 0 {
		q.offer(q.flow.Offer())
	}
}

// offer puts what the queue can send at once on the handover board, when
// it changed.
func (q *Queue) offer(n int) {
	if q.cfg.Board == nil || n == q.offered {
		return
	}
	q.offered = n
	q.cfg.Board.Offer(q.boardKey(), n, q.lease(), q.self)
}

// boardKey is this queue's work on the handover board.
func (q *Queue) boardKey() handover.Key {
	return handover.Key{Kind: persistence.WorkForward, Target: q.cfg.Peer}
}

// run does one store round: the results and the claims in one Write, each
// claim fenced by the ring (a claim of a service this instance owns none of
// now is not made).
func (q *Queue) run(r *FlowRound) {
	defer func() {
		if v := recover(); v != nil {
			q.sys.Root.Send(q.self, &panicked{value: v, stack: debug.Stack()})
		}
	}()
	res := &roundDone{round: r, claims: make([]*persistence.Claim, len(r.Claims))}
	w := persistence.Write{Outcomes: r.Outcomes, Statuses: r.Updates}
	var at []int // w.Claims[j] is r.Claims[at[j]]
	for i, req := range r.Claims {
		if q.cfg.Fence != nil {
			rc, ok := q.cfg.Fence.Claim(req.Kind)
			if !ok {
				continue // not ours now: a new assignment kicks us
			}
			req.Ring = rc
		}
		w.Claims = append(w.Claims, req)
		at = append(at, i)
	}
	if !w.Empty() {
		ctx, cancel := context.WithTimeout(context.Background(), q.cfg.StoreTimeout)
		res.written, res.err = q.cfg.Store.Write(ctx, q.cfg.Clock.Now(), w)
		cancel()
		if res.err == nil {
			for j, cl := range res.written.Claims {
				if cl.Refused {
					q.cfg.Fence.Refused(w.Claims[j].Kind)
					continue
				}
				res.claims[at[j]] = &res.written.Claims[j]
			}
		}
	}
	q.sys.Root.Send(q.self, res)
}

// lease outlives the request it covers (timeout plus the commit after it);
// a crash in between lets another claim take the work after it.
func (q *Queue) lease() time.Duration { return 2*q.cfg.Timeout + 10*time.Second }

// send runs one request in its own goroutine; its result comes back as a
// message, so Receive never waits on the network.
func (q *Queue) send(b Batch) {
	link, tr, timeout := q.link, q.cfg.Transport, q.cfg.Timeout
	self, root := q.self, q.sys.Root
	node, peerName, tracing := q.cfg.Node, q.cfg.Peer, q.cfg.Tracing
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		res := &sent{batch: b}
		if b.Kind == persistence.WorkForward {
			spans := startSpans(tracing, telemetry.SpanForward, peerName, b.Work)
			res.forward, res.err = sendForwards(ctx, tr, link, b.Work, spans)
			endSpans(spans, res.err, func(i int) *messages.Error {
				if res.forward == nil {
					return nil
				}
				return res.forward[i].Error
			})
		} else {
			spans := startSpans(tracing, telemetry.SpanStatus, peerName, b.Work)
			rs := make([]messages.StatusReport, len(b.Work))
			for i, w := range b.Work {
				rs[i] = ReportOf(node, w.Message)
				if !link.MessageFields {
					rs[i].Attempts = 0 // a field the peer did not announce
				}
				if link.TraceContext && spans != nil {
					rs[i].Traceparent = telemetry.Of(spans[i])
				}
			}
			res.status, res.err = tr.Status(ctx, link.Addr, link.StatusBatch, rs)
			if res.err == nil && len(res.status) != len(rs) {
				res.err = fmt.Errorf("peer answered %d results for %d reports", len(res.status), len(rs))
			}
			endSpans(spans, res.err, func(int) *messages.Error { return nil })
		}
		root.Send(self, res)
	}()
}

// startSpans starts span name (a client span to peer) for each traced
// message of work, as a child of its trace; nil when none is traced.
func startSpans(t *telemetry.Tracing, name, peerName string, work []persistence.Work) []trace.Span {
	if t == nil {
		return nil
	}
	var spans []trace.Span
	for i, w := range work {
		if w.Message.Trace == "" {
			continue
		}
		if spans == nil {
			spans = make([]trace.Span, len(work))
		}
		spans[i] = t.Start(w.Message.Trace, name, trace.SpanKindClient,
			attribute.String("switchboard.message_id", w.Message.ID), attribute.String("switchboard.peer", peerName))
	}
	return spans
}

// endSpans ends the spans of startSpans: failed with err (the request's),
// else with the message's own error.
func endSpans(spans []trace.Span, err error, of func(i int) *messages.Error) {
	for i, s := range spans {
		if s == nil {
			continue
		}
		switch e := of(i); {
		case err != nil:
			telemetry.Fail(s, err)
		case e != nil:
			telemetry.Fail(s, e)
		}
		s.End()
	}
}

// sendForwards sends the forwards of work in one call and returns a result for
// each, in order. A message that uses the optional fields is not sent to a
// peer that did not announce CapMessageFields (an older version would
// refuse it, or drop the fields and deliver it otherwise than asked): its
// result is a capability_missing error, which fails it (see Judge).
func sendForwards(ctx context.Context, tr transport.Peer, link messages.PeerLink, work []persistence.Work, spans []trace.Span) ([]messages.ForwardResult, error) {
	out := make([]messages.ForwardResult, len(work))
	fs := make([]messages.Forward, 0, len(work))
	at := make([]int, 0, len(work))
	for i, w := range work {
		f := messages.ForwardOf(w.Message)
		if f.Options.Used() && !link.MessageFields {
			out[i] = messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: f.ID},
				Error: messages.Errorf(messages.CodeCapabilityMissing, "the peer does not announce %s, which carries data_coding, "+
					"message_body_base64, validity_until and deliver_after", messages.CapMessageFields)}
			continue
		}
		if link.TraceContext && spans != nil && spans[i] != nil {
			// Only to a peer that announced it: it continues the trace.
			f.Traceparent = telemetry.Of(spans[i])
		}
		fs, at = append(fs, f), append(at, i)
	}
	if len(fs) == 0 {
		return out, nil
	}
	res, err := tr.Forward(ctx, link.Addr, link.ForwardBatch, fs)
	if err == nil && len(res) != len(fs) {
		err = fmt.Errorf("peer answered %d results for %d forwards", len(res), len(fs))
	}
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = res[j]
	}
	return out, nil
}

// ReportOf is the delivery_status report of a message final at node.
func ReportOf(node string, m messages.Message) messages.StatusReport {
	status := messages.ReportDelivered
	if m.State == messages.StateFailed {
		status = messages.ReportFailed
	}
	return messages.StatusReport{ID: m.ID, Node: node, Status: status, At: m.UpdatedAt, Reason: m.Reason, Attempts: m.Attempts}
}

// sent takes a request's result: its outcomes wait for the next round.
func (q *Queue) sent(c actor.Context, r *sent) {
	now := q.cfg.Clock.Now()
	if r.err != nil {
		q.log.Warn("request to peer failed", "kind", r.batch.Kind, "messages", len(r.batch.Work), "err", r.err)
		q.cfg.Metrics.failed(q.cfg.Peer, r.batch.Kind)
	}
	for _, f := range r.forward {
		if f.Error == nil {
			q.cfg.Metrics.completed(q.cfg.Peer)
		}
	}
	if q.flow.Sent(now, r.batch, r.forward, r.err) {
		// One failed check per broken link, not one per request that was
		// in flight when it broke (a busy peer closes nothing: it is up).
		c.Send(q.parent, messages.PeerContactFailed{Err: r.err})
	}
}
