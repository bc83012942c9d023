package smppout

import (
	"context"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/smpp"
	"github.com/switchboard-dev/switchboard/smsc"
)

// DefaultReceiptWait is how long a receipt waits for its verdict's commit:
// 30 s; a commit takes milliseconds, a verdict waits for every part of its
// message.
const DefaultReceiptWait = 30 * time.Second

// receiptRecheck is how often the receipts held for their message are
// looked up in the store again (those not waiting for a commit of this
// instance's, which records them itself: Committed): each second, so that
// one whose message another instance of the site committed is recorded
// within about a second of that commit.
const receiptRecheck = time.Second

// maxHeldReceipts bounds the receipts a client holds for their message
// (a few hundred bytes each: a few MB). One more is refused with a
// temporary status, for the SMSC to send it again later.
const maxHeldReceipts = 10000

// storeTimeout bounds a look-up of receipts in the store.
const storeTimeout = 30 * time.Second

// closeStoreWait is how long a closing client, once unbound, still gives
// the store to record the receipts it answered ESME_ROK already (those of
// a verdict committed, the recheck under way, the last look-up of those
// held) when no node's stop tells it more (Stopping: its frontend was
// changed or deleted, or its owner gave no deadline): 5 s, by the
// client's clock. A store records them in milliseconds; one that has not
// in 5 s is taken as down, and each receipt not recorded is logged as
// lost (see lost), so that a client's end on a dead store does not hold
// its worker for each store call's storeTimeout in turn.
const closeStoreWait = 5 * time.Second

// stopReserve is what a client closing within a node's stop leaves of the
// stop's time to the steps after it (the other actors' stops, the bus,
// the store's close: milliseconds as a rule): the store gets the rest
// for the receipts answered (closeWait), so that a store slow but alive
// (a Postgres failover takes seconds) records them and a dead one still
// lets the stop end in time. 1 s.
const stopReserve = time.Second

// closeFloor is the least a closing client gives the store for the
// receipts it answered, even when the node's stop has no time left (its
// drain used it, or its context was canceled): a store that works records
// them in milliseconds, and the SMSC does not send them again; a dead one
// holds the stop this much longer. 1 s.
const closeFloor = time.Second

// early is a receipt held for its message: it came before the commit of
// the verdict naming its SMSC id, here or on another instance.
type early struct {
	r  Receipt
	at time.Time
	// msg is the message this client submitted under the SMSC id, as far
	// as it knew when the receipt came (messageOf; "" for none): a receipt
	// lost after its id left recent is still logged with it (lost).
	msg string
}

// errands are the client's goroutines that record receipts (off the
// session's reading goroutine, or the worker's): Client.Close waits for
// them, so that none runs on a store the node closes next. It cancels the
// store calls of those recording receipts not answered yet (run: the SMSC
// sends them again) at once, those of receipts answered already
// (runAnswered, and the client's own on the answered context: the SMSC
// does not send them again) only once the time the client's end gives
// them has passed (deadline). The zero value is ready.
type errands struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	// answered is the context of the store calls of receipts answered
	// already, canceled by giveUp; stopGiveUp stops the timer of the
	// deadline that calls it (nil: none armed).
	answered   context.Context
	giveUp     context.CancelFunc
	stopGiveUp func() bool
	// giveUpAt is when the deadline cancels them, on the client's clock
	// (zero: none armed).
	giveUpAt time.Time
	stopped  bool
}

// context is the context of the errands run runs, canceled by stop.
func (e *errands) context() context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	return e.ctx
}

func (e *errands) init() {
	if e.ctx == nil {
		e.ctx, e.cancel = context.WithCancel(context.Background())
		e.answered, e.giveUp = context.WithCancel(context.Background())
	}
}

// answeredContext is the context of the store calls of receipts answered
// already: canceled once the time deadline gives them has passed.
func (e *errands) answeredContext() context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	return e.answered
}

// deadline gives the store calls of receipts answered already d more on
// clk (the client has ended), then cancels them. The first call arms it.
func (e *errands) deadline(clk clock.Clock, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	if e.stopGiveUp == nil {
		e.giveUpAt = clk.Now().Add(d)
		e.stopGiveUp = clk.AfterFunc(d, e.giveUp)
	}
}

// shorten brings an armed deadline forward to d from now on clk, when
// that is earlier (the node's stop was cut short); one not armed yet, or
// fired, stays as it is.
func (e *errands) shorten(clk clock.Clock, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	at := clk.Now().Add(d)
	if e.stopGiveUp == nil || !at.Before(e.giveUpAt) || !e.stopGiveUp() {
		return
	}
	e.giveUpAt = at
	e.stopGiveUp = clk.AfterFunc(d, e.giveUp)
}

// until is when the deadline cancels the store calls of receipts answered
// already (zero: none armed yet).
func (e *errands) until() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.giveUpAt
}

// run runs f, which records receipts not answered yet, on a goroutine of
// its own, with the errands' context (canceled by stop); once stopped (the
// client is closed) it drops f: a receipt it would record goes
// unanswered, and the SMSC sends it again.
func (e *errands) run(f func(ctx context.Context)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	e.start(e.ctx, f)
}

// runAnswered runs f, which records receipts answered ESME_ROK already,
// on a goroutine of its own, with the answered context (which stop does
// not cancel: the deadline does) within storeTimeout. Once stopped, it
// runs f no more and returns false: the receipts are lost.
func (e *errands) runAnswered(f func(ctx context.Context)) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.init()
	return e.start(e.answered, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, storeTimeout)
		defer cancel()
		f(ctx)
	})
}

// start runs f(ctx) on a goroutine of its own, unless stopped. e.mu held.
func (e *errands) start(ctx context.Context, f func(ctx context.Context)) bool {
	if e.stopped {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f(ctx)
	}()
	return true
}

// stop cancels the context of the errands run runs and waits for all
// those under way (those of receipts answered already until their
// deadline at most), then drops the deadline.
func (e *errands) stop() {
	e.mu.Lock()
	e.init()
	e.stopped = true
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
	e.mu.Lock()
	if e.stopGiveUp != nil {
		e.stopGiveUp()
	}
	e.mu.Unlock()
	e.giveUp()
}

// noteRecent remembers an SMSC id the SMSC just accepted (see
// ReceiptWait).
func (c *Client) noteRecent(id string) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prune(now)
	c.recent[id] = now
	c.recentQ.push(id, now)
}

// noteMessage remembers that the recent SMSC ids were given to message
// id (see messageOf).
func (c *Client) noteMessage(id string, smscIDs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range smscIDs {
		if _, recent := c.recent[s]; recent {
			c.messageOf[s] = id
		}
	}
}

// message is the id of the message that this client submitted, in the
// last ReceiptWait, under SMSC id smscID ("" when none).
func (c *Client) message(smscID string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.messageOf[smscID]
}

// queue is a map's entries in the order they were set: (id, when). An
// entry set again leaves its older stamp behind in the queue, which prune
// then skips (the map holds the newer time).
type queue struct {
	q    []stamp
	head int
}

type stamp struct {
	id string
	at time.Time
}

func (q *queue) push(id string, at time.Time) { q.q = append(q.q, stamp{id, at}) }

// popOlder takes off the head each stamp older than wait at now, in
// order, and calls f with it.
func (q *queue) popOlder(now time.Time, wait time.Duration, f func(stamp)) {
	for q.head < len(q.q) && now.Sub(q.q[q.head].at) > wait {
		s := q.q[q.head]
		q.q[q.head] = stamp{}
		q.head++
		f(s)
	}
	switch {
	case q.head == len(q.q):
		q.q, q.head = q.q[:0], 0
	case q.head > 1024 && q.head > len(q.q)/2:
		// Half of the backing array is taken off: move the rest down, so
		// that it does not grow for ever (amortized O(1) a stamp).
		n := copy(q.q, q.q[q.head:])
		clear(q.q[n:])
		q.q, q.head = q.q[:n], 0
	}
}

// prune forgets the recent and committed ids older than ReceiptWait. c.mu
// held. It takes the old entries off the heads of the queues, so it costs
// O(1) amortized per entry, whatever the maps hold (at 1000 submits/s,
// ~30,000 ids each).
func (c *Client) prune(now time.Time) {
	wait := c.cfg.ReceiptWait
	forget := func(m map[string]time.Time, also map[string]string) func(stamp) {
		return func(s stamp) {
			if at, ok := m[s.id]; ok && at.Equal(s.at) {
				delete(m, s.id)
				delete(also, s.id)
			}
		}
	}
	c.recentQ.popOlder(now, wait, forget(c.recent, c.messageOf))
	c.committedQ.popOlder(now, wait, forget(c.committed, nil))
}

// Committed tells the client that the verdict naming these SMSC ids is
// committed: the receipts held for them are recorded now (off the
// caller's goroutine).
func (c *Client) Committed(ids []string) {
	now := c.cfg.Clock.Now()
	var es []early
	c.mu.Lock()
	for _, id := range ids {
		c.committed[id] = now
		c.committedQ.push(id, now)
		es = append(es, c.early[id]...)
		c.held -= len(c.early[id])
		delete(c.early, id)
	}
	c.prune(now)
	c.mu.Unlock()
	if len(es) == 0 {
		return
	}
	ran := c.errands.runAnswered(func(ctx context.Context) {
		c.recordAnswered(ctx, es, func(e early) { c.unknown(e.r) })
	})
	if !ran {
		for _, e := range es {
			c.lost(e, "the client was closed before its message's verdict was committed", nil)
		}
	}
}

// handle answers the SMSC's requests: a delivery receipt, in a
// deliver_sm or a data_sm (SMPP v3.4 allows either; a data_sm is read as
// the deliver_sm it would be, its message_payload the text), is recorded
// (off the session's reading goroutine) and answered after its commit (or
// held for its message's verdict, see store); a
// mobile-originated message is refused (an outbound frontend has no
// intake: that is --smpp-listen's); a malformed receipt is taken and
// dropped (sending it again would not mend it).
func (c *Client) handle(s *smpp.Session, p smpp.PDU) {
	fe := c.cfg.Frontend.Name
	short, ok := smsc.ShortOf(p)
	if p.Command != smpp.DeliverSM && p.Command != smpp.DataSM || !ok {
		_ = s.Reply(p, smpp.StatusPermAppError, nil)
		return
	}
	sm := short.SM
	r, isReceipt, err := ReceiptOf(sm)
	switch {
	case !isReceipt:
		c.log.Warn("mobile-originated message refused: an smpp frontend takes only receipts", "source", sm.Source.Addr)
		_ = s.Reply(p, smpp.StatusPermAppError, nil)
	case err != nil:
		c.cfg.Metrics.receipt(fe, "malformed")
		c.log.Warn("malformed receipt dropped", "err", err)
		_ = s.Reply(p, smpp.StatusOK, &smpp.SMResp{})
	default:
		c.errands.run(func(ctx context.Context) { c.record(ctx, s, p, r) })
	}
}

// record records a receipt and answers it: ESME_ROK once it is in the
// store, or held for its message (see store); ESME_RX_T_APPN when the
// store failed, or too many receipts are held, for the SMSC to send it
// again.
func (c *Client) record(ctx context.Context, s *smpp.Session, p smpp.PDU, r Receipt) {
	st := smpp.StatusOK
	if !c.store(ctx, r, false) {
		st = smpp.StatusTempAppError
	}
	_ = s.Reply(p, st, &smpp.SMResp{}) // the body goes only with ESME_ROK
}

// store records r; false when the store failed, or r cannot be held. A
// receipt whose SMSC id names no stored message is held (the SMSC sent it
// before the commit of its message's verdict: right after the
// submit_sm_resp, before it, or on another instance's session of the
// account) for ReceiptWait: recorded when that commit is this instance's
// (Committed), or when a look-up in the store again finds its message
// (recheck: another instance's commit); at the end of its wait, a last
// look-up not finding it makes it about no known message (counted
// unknown). After the commit (late), a receipt not found is unknown at
// once. ctx bounds the store call.
func (c *Client) store(ctx context.Context, r Receipt, late bool) bool {
	fe := c.cfg.Frontend.Name
	res, err := c.lookUp(ctx, []Receipt{r})
	switch {
	case err != nil:
		c.cfg.Metrics.receipt(fe, "error")
		c.log.Error("receipt not recorded", "smsc_message_id", r.ID, "err", err)
		return false
	case res[0] == persistence.Applied:
		c.recorded(r)
		return true
	case late:
		c.unknown(r)
		return true
	}
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	c.prune(now)
	if _, committed := c.committed[r.ID]; committed {
		c.mu.Unlock()
		return c.store(ctx, r, true) // committed since our read
	}
	if held := c.held; held >= c.maxHeld {
		c.mu.Unlock()
		c.cfg.Metrics.receipt(fe, "error")
		c.log.Warn("receipt refused for now: too many receipts wait for their message", "smsc_message_id", r.ID, "held", held)
		return false
	}
	c.hold(early{r: r, at: now, msg: c.messageOf[r.ID]})
	c.mu.Unlock()
	return true
}

// lookUp records rs in the store (see persistence.ReceiptStore), within
// ctx and storeTimeout.
func (c *Client) lookUp(ctx context.Context, rs []Receipt) ([]persistence.Completion, error) {
	prs := make([]persistence.Receipt, len(rs))
	for i, r := range rs {
		prs[i] = persistence.Receipt{Frontend: c.cfg.Frontend.Name, SMSCMessageID: r.ID, Stat: r.Stat, Detail: r.Detail()}
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	return c.cfg.Store.RecordReceipts(ctx, c.cfg.Clock.Now(), prs)
}

// recorded counts r recorded.
func (c *Client) recorded(r Receipt) {
	c.cfg.Metrics.receipt(c.cfg.Frontend.Name, "recorded")
	if r.Dated {
		c.cfg.Metrics.receiptDelay(c.cfg.Frontend.Name, r.Took.Seconds())
	}
}

// unknown counts and logs r about no known message.
func (c *Client) unknown(r Receipt) {
	c.cfg.Metrics.receipt(c.cfg.Frontend.Name, "unknown")
	c.log.Warn("receipt for no known message (never recorded, or purged)", "smsc_message_id", r.ID, "stat", r.Stat)
}

// hold holds e for its message and arms the recheck. c.mu held.
func (c *Client) hold(e early) {
	c.early[e.r.ID] = append(c.early[e.r.ID], e)
	c.held++
	c.armRecheck()
}

// armRecheck arms the recheck of the receipts held, unless one is armed
// or running, none is held, or the client ended. c.mu held.
func (c *Client) armRecheck() {
	if c.stopRecheck != nil || c.held == 0 || c.ended {
		return
	}
	c.rechecks.Add(1)
	c.stopRecheck = c.cfg.Clock.AfterFunc(receiptRecheck, c.recheck)
}

// recheck looks the receipts held up in the store again, but those whose
// id this instance accepted moments ago (its own commit records them,
// Committed) until their wait is over: found, they are recorded; after
// their wait (ReceiptWait), they are unknown (or, the store failing,
// errors); else held on. A commit of this instance's since the look-up
// (Committed found them out) records them after it.
func (c *Client) recheck() {
	defer c.rechecks.Done()
	now, wait := c.cfg.Clock.Now(), c.cfg.ReceiptWait
	c.mu.Lock()
	c.stopRecheck = nil
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.prune(now)
	var look []early
	for id, es := range c.early {
		if _, recent := c.recent[id]; recent && now.Sub(es[0].at) < wait {
			continue
		}
		look = append(look, es...)
		c.held -= len(es)
		delete(c.early, id)
	}
	c.mu.Unlock()
	var found, gone []Receipt
	var again, failed []early
	if len(look) > 0 {
		rs := make([]Receipt, len(look))
		for i, e := range look {
			rs[i] = e.r
		}
		res, err := c.lookUp(c.errands.answeredContext(), rs)
		c.mu.Lock()
		for i, e := range look {
			_, committed := c.committed[e.r.ID]
			switch {
			case err == nil && res[i] == persistence.Applied:
				found = append(found, e.r)
			case committed:
				again = append(again, e)
			case now.Sub(e.at) >= wait && err != nil:
				failed = append(failed, e)
			case now.Sub(e.at) >= wait:
				gone = append(gone, e.r)
			default:
				c.early[e.r.ID] = append(c.early[e.r.ID], e)
				c.held++
			}
		}
		c.mu.Unlock()
		for _, r := range found {
			c.recorded(r)
		}
		for _, r := range gone {
			c.unknown(r)
		}
		for _, e := range failed {
			c.lost(e, "the store failed until the end of its wait", err)
		}
		if len(again) > 0 {
			c.recordAnswered(c.errands.answeredContext(), again, func(e early) { c.unknown(e.r) })
		}
	}
	c.mu.Lock()
	c.armRecheck()
	c.mu.Unlock()
}

// endRechecks stops the rechecks of the receipts held and waits for one
// under way: the client is ending (unbound). The receipts still held
// (answered ESME_ROK: the SMSC does not send them again) are looked up a
// last time: those whose message is stored now are recorded, the others
// are lost (counted error, logged), as in a crash. The store calls of
// receipts answered already, these and those under way, get closeWait
// from now.
func (c *Client) endRechecks() {
	c.errands.deadline(c.cfg.Clock, c.closeWait(c.cfg.Clock.Now()))
	c.mu.Lock()
	c.ended = true
	stop := c.stopRecheck
	c.stopRecheck = nil
	c.mu.Unlock()
	if stop != nil && stop() {
		c.rechecks.Done() // it will not run
	}
	c.rechecks.Wait()
	c.mu.Lock()
	var held []early
	for id, es := range c.early {
		held = append(held, es...)
		delete(c.early, id)
	}
	c.held = 0
	c.mu.Unlock()
	if len(held) == 0 {
		return
	}
	c.recordAnswered(c.errands.answeredContext(), held, func(e early) {
		c.lost(e, "the client was closed before its message's verdict was committed", nil)
	})
}

// closeWait is how long the client, ending at now, gives the store for
// the receipts it answered already: within a node's stop (Stopping), the
// stop's time left but stopReserve, and at least closeFloor (the stop's
// time may have gone to the delivery workers' drain, or been cut short);
// closeStoreWait otherwise.
func (c *Client) closeWait(now time.Time) time.Duration {
	c.mu.Lock()
	by := c.stopBy
	c.mu.Unlock()
	if by.IsZero() {
		return closeStoreWait
	}
	return max(by.Sub(now)-stopReserve, closeFloor)
}

// recordAnswered records es, receipts held and answered ESME_ROK already
// (the SMSC does not send them again), in one store call within ctx: each
// whose message is stored is recorded, each other is notFound's; when the
// store fails, each is lost.
func (c *Client) recordAnswered(ctx context.Context, es []early, notFound func(early)) {
	rs := make([]Receipt, len(es))
	for i, e := range es {
		rs[i] = e.r
	}
	res, err := c.lookUp(ctx, rs)
	for i, e := range es {
		switch {
		case err != nil:
			c.lost(e, "the store failed", err)
		case res[i] == persistence.Applied:
			c.recorded(e.r)
		default:
			notFound(e)
		}
	}
}

// lost counts and logs r, answered ESME_ROK, never recorded: why (err,
// when a store call failed). The line names what an operator needs to
// add it by hand: the SMSC id, the message's id when this client
// submitted it (known when the receipt came, or still within ReceiptWait
// of the submit), and the history detail the receipt would have had.
func (c *Client) lost(e early, why string, err error) {
	r := e.r
	c.cfg.Metrics.receipt(c.cfg.Frontend.Name, "error")
	attrs := []any{"why", why, "smsc_message_id", r.ID, "stat", r.Stat, "detail", r.Detail()}
	id := e.msg
	if id == "" {
		id = c.message(r.ID)
	}
	if id != "" {
		attrs = append(attrs, "message_id", id)
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	c.log.Error("receipt lost", attrs...)
}
