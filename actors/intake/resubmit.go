package intake

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/supervision"
)

// Resubmits: a failed or forward_failed message goes back to work on the
// route its destination has now, one at a time or in bulk by state.
//
// The store calls of a resubmit run on a goroutine of their own, as the
// commits do, so that submits and commits go on while an operator
// resubmits. A resubmit is a job (a single message's, or one page of a
// bulk's) of two store calls: the read (GetMessage, or ListMessages), and
// the write (Resubmit, and for a single message the read back). Between
// them the intake decides the re-routing on its own goroutine (the table
// is the actor's), and after the write it publishes the changes, kicks the
// workers and answers. The jobs queue in the resubmitQueue, one out at a
// time, so that two resubmits never race and a bulk keeps its cursor: the
// next page of a bulk queues behind the resubmits asked for meanwhile.

// bulkPage is how many messages one step of a bulk resubmit handles.
const bulkPage = 256

// bulkStep continues a bulk resubmit after `before`.
type bulkStep struct {
	req    *messages.ResubmitBulk
	before int64
	acc    messages.BulkReply
}

// resubmitJob is a single message's resubmit (one) or a step of a bulk's
// (bulk).
type resubmitJob struct {
	one  *messages.Resubmit
	bulk *bulkStep
}

// fail answers the job's caller with err (for a bulk, with what its steps
// before this one resubmitted).
func (j resubmitJob) fail(err error) {
	if j.one != nil {
		j.one.Reply <- messages.ResubmitReply{Err: err}
		return
	}
	acc := j.bulk.acc
	acc.Err = err
	j.bulk.req.Reply <- acc
}

// resubmitRead is the read of a job, back from its goroutine: the message
// of a single resubmit, the page of a bulk step.
type resubmitRead struct {
	job  resubmitJob
	msg  messages.Message
	page persistence.Page
	err  error
}

// resubmitWritten is the write of a job, back from its goroutine: the
// reroutes it asked for at now, the store's results, and for a single
// resubmit the message read back (or why it was not: readErr, and
// panicked when the read back panicked), for a bulk step the cursor of
// its next page (0: none).
type resubmitWritten struct {
	job      resubmitJob
	now      time.Time
	rs       []persistence.Reroute
	res      []persistence.ResubmitResult
	err      error
	msg      messages.Message
	readErr  error
	panicked *supervision.Panicked
	next     int64
}

// resubmitPanicked says the goroutine of the job out panicked; its
// supervision.Panicked follows.
type resubmitPanicked struct{}

// resubmit queues a job and starts it if none is out.
func (a *Intake) resubmit(j resubmitJob) {
	a.resubmits.Add(j)
	a.nextResubmit()
}

// nextResubmit starts the read of the next job queued, when none is out.
func (a *Intake) nextResubmit() {
	j, ok := a.resubmits.Next()
	if !ok {
		return
	}
	if j.one != nil {
		id := j.one.ID
		a.storeCall(j, func(ctx context.Context) any {
			m, err := a.cfg.Store.GetMessage(ctx, id)
			return &resubmitRead{job: j, msg: m, err: err}
		})
		return
	}
	q := persistence.ListQuery{State: j.bulk.req.State, Limit: bulkPage, Before: j.bulk.before}
	a.storeCall(j, func(ctx context.Context) any {
		page, err := a.cfg.Store.ListMessages(ctx, q)
		return &resubmitRead{job: j, page: page, err: err}
	})
}

// storeCall runs a store call of job j on a goroutine of its own and sends
// what it returns to the intake, having left it in the queue too (Back),
// where a stopping intake finds it. It touches only what is safe from any
// goroutine: the store (through call), the queue's result, and sends
// through the system's root.
func (a *Intake) storeCall(j resubmitJob, call func(ctx context.Context) any) {
	a.resubmits.Out(j)
	a.calls.Add(1)
	go func() {
		defer a.calls.Done()
		defer supervision.CarryPanic(a.sys.Root, a.self, func() { a.sys.Root.Send(a.self, resubmitPanicked{}) })
		ctx, cancel := a.storeCtx()
		defer cancel()
		r := call(ctx)
		a.resubmits.Back(r)
		a.sys.Root.Send(a.self, r)
	}()
}

// read goes on with a job whose read came back: it decides the reroutes
// and starts the write, or answers.
func (a *Intake) read(m *resubmitRead) {
	a.resubmits.Done()
	defer a.nextResubmit()
	j := m.job
	if j.one != nil {
		a.readOne(j.one, m.msg, m.err)
		return
	}
	step := j.bulk
	if m.err != nil {
		j.fail(a.storeFailed("list messages", m.err))
		return
	}
	now := a.cfg.Clock.Now()
	var rs []persistence.Reroute
	for _, msg := range m.page.Messages {
		r, err := a.reroute(msg, now)
		if err != nil {
			step.acc.Skipped++
			continue
		}
		rs = append(rs, r)
	}
	next := m.page.Next
	if len(rs) == 0 {
		a.stepped(step, next)
		return
	}
	a.storeCall(j, func(ctx context.Context) any {
		res, err := a.cfg.Store.Resubmit(ctx, now, rs)
		return &resubmitWritten{job: j, now: now, rs: rs, res: res, err: err, next: next}
	})
}

// readOne goes on with a single resubmit whose message was read.
func (a *Intake) readOne(req *messages.Resubmit, m messages.Message, err error) {
	j := resubmitJob{one: req}
	if errors.Is(err, persistence.ErrNotFound) {
		req.Reply <- messages.ResubmitReply{Err: messages.Errorf(messages.CodeNotFound, "no message with id %q", req.ID)}
		return
	}
	if err != nil {
		req.Reply <- messages.ResubmitReply{Err: a.storeFailed("get message", err)}
		return
	}
	if !m.State.Resubmittable() {
		req.Reply <- messages.ResubmitReply{Err: notResubmittable(req.ID, m.State)}
		return
	}
	now := a.cfg.Clock.Now()
	r, err := a.reroute(m, now)
	if err != nil {
		req.Reply <- messages.ResubmitReply{Err: err}
		return
	}
	rs := []persistence.Reroute{r}
	a.storeCall(j, func(ctx context.Context) any {
		w := &resubmitWritten{job: j, now: now, rs: rs}
		w.res, w.err = a.cfg.Store.Resubmit(ctx, now, rs)
		if w.err == nil && w.res[0].Applied {
			// Read the message as resubmitted before the worker is kicked
			// (and claims it), so the reply shows it as the resubmit left it.
			w.msg, w.panicked, w.readErr = a.readBack(ctx, req.ID)
		}
		return w
	})
}

// readBack reads the message of a single resubmit made, on its write's
// goroutine. A panic there must not reach storeCall, whose answer
// (restarted(): "retry with the same id") would say nothing was done: it
// is recovered as the read's error, so that the reply says the resubmit
// was made (ErrNotReadBack), and returned with its stack, for written to
// rethrow once the reply is sent, so that the intake still restarts.
func (a *Intake) readBack(ctx context.Context, id string) (m messages.Message, p *supervision.Panicked, err error) {
	defer func() {
		if v := recover(); v != nil {
			p = &supervision.Panicked{Value: v, Stack: debug.Stack()}
			err = fmt.Errorf("panicked: %v", v)
		}
	}()
	m, err = a.cfg.Store.GetMessage(ctx, id)
	return m, nil, err
}

// written ends a job whose write came back (wrote), kicking for the
// reroutes applied, and starts the next job; then a panic of its read
// back restarts the intake, as one in Receive would have.
func (a *Intake) written(c actor.Context, m *resubmitWritten) {
	a.resubmits.Done()
	a.wrote(m, func(work []persistence.WorkSpec) { a.kick(c, work) }, false)
	a.nextResubmit()
	if m.panicked != nil {
		m.panicked.Rethrow(a.log, "resubmit read back")
	}
}

// wrote settles a job whose write came back: it publishes the changes of
// the reroutes applied and hands their work to kick, then answers, or
// queues the bulk's next step. stopping: the intake is stopping, and a
// bulk with pages left is answered what it resubmitted so far, with
// stopped().
func (a *Intake) wrote(m *resubmitWritten, kick func([]persistence.WorkSpec), stopping bool) {
	j := m.job
	if m.err != nil {
		j.fail(a.storeFailed("resubmit", m.err))
		return
	}
	if req := j.one; req != nil {
		if !m.res[0].Applied {
			req.Reply <- messages.ResubmitReply{Err: notResubmittable(req.ID, m.res[0].State)}
			return
		}
		r := m.rs[0]
		kick(a.resubmitted(m.rs, m.now))
		if m.readErr != nil {
			// The resubmit was made: the reply says so, with what it set, so
			// that its caller records the change all the same.
			req.Reply <- messages.ResubmitReply{Message: messages.Message{ID: req.ID, Frontend: r.Frontend, DestSMSC: r.DestSMSC, State: r.State},
				Err: fmt.Errorf("%w: %w", messages.ErrNotReadBack, a.storeFailed("get message", m.readErr))}
			return
		}
		req.Reply <- messages.ResubmitReply{Message: m.msg}
		return
	}
	applied := m.rs[:0]
	for i, r := range m.res {
		if r.Applied {
			applied = append(applied, m.rs[i])
		}
	}
	j.bulk.acc.Resubmitted += len(applied)
	kick(a.resubmitted(applied, m.now))
	if stopping && m.next != 0 {
		// Resubmitted > 0 still says changes were made (the audit trail).
		j.fail(stopped())
		return
	}
	a.stepped(j.bulk, m.next)
}

// stepped answers a bulk resubmit whose last page is done (next is 0), or
// queues its step after next.
func (a *Intake) stepped(step *bulkStep, next int64) {
	if next == 0 {
		step.req.Reply <- step.acc
		return
	}
	step.before = next
	a.resubmits.Add(resubmitJob{bulk: step})
}

// bulk starts a bulk resubmit; only the states that may be resubmitted may
// be asked for.
func (a *Intake) bulk(req *messages.ResubmitBulk) {
	if !req.State.Resubmittable() {
		req.Reply <- messages.BulkReply{Err: messages.Errorf(messages.CodeInvalidRequest,
			"state %q: only failed and forward_failed messages can be resubmitted", req.State)}
		return
	}
	a.resubmit(resubmitJob{bulk: &bulkStep{req: req}})
}

// reroute builds the re-routing of a message to whichever frontend serves
// its destination now; one the site does not take now (Config.Site: a
// message class while an instance of an earlier version is in its ring)
// is refused, as its submit would be: put back to work, that instance
// could claim it and deliver it without the field.
func (a *Intake) reroute(m messages.Message, now time.Time) (persistence.Reroute, error) {
	if a.cfg.Site != nil {
		if err := a.cfg.Site(m.Options); err != nil {
			return persistence.Reroute{}, err
		}
	}
	t, err := a.table.Resolve(m.DestinationMSISDN)
	if err != nil {
		return persistence.Reroute{}, err
	}
	// Its options go with it: a delivery it schedules (deliver_after)
	// still waits for its time.
	nm := router{node: a.cfg.Node}.newMessage(messages.Submission{ID: m.ID, Options: m.Options}, t, now)
	return persistence.Reroute{
		ID: m.ID, Frontend: nm.Frontend, DestSMSC: nm.DestSMSC, State: nm.State,
		Detail: fmt.Sprintf("resubmitted from %s: %s", m.State, nm.Detail),
		Work:   nm.Work,
	}, nil
}

// resubmitted publishes the changes of applied reroutes and returns their
// work, to kick.
func (a *Intake) resubmitted(rs []persistence.Reroute, now time.Time) []persistence.WorkSpec {
	var kl kickList
	for _, r := range rs {
		a.cfg.Publish(messages.StateChanged{ID: r.ID, State: r.State, Frontend: r.Frontend, At: now, Detail: r.Detail})
		kl.add(*r.Work, r.State)
	}
	return kl.work
}

// notResubmittable is the refusal of a resubmit of message id in state:
// whether the intake read that state or the store found it at the resubmit
// (another instance resubmitted it, or it was delivered, in between).
func notResubmittable(id string, state messages.State) error {
	return messages.Errorf(messages.CodeInvalidState,
		"message %s is %s; only failed and forward_failed messages can be resubmitted", id, state)
}
