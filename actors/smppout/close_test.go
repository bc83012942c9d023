package smppout

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// heldReceiptStore is a receipt store whose RecordReceipts waits until release
// is closed or its context ends (a store under load); in counts the calls
// under way.
type heldReceiptStore struct {
	release chan struct{}
	in      atomic.Int32
}

func (s *heldReceiptStore) RecordReceipts(ctx context.Context, _ time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	s.in.Add(1)
	defer s.in.Add(-1)
	select {
	case <-s.release:
		return []persistence.Completion{persistence.NoWork}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestClientCloseWaitsForReceiptRecording: a receipt is recorded on a
// goroutine of its own (off the session's reading one). Close returned
// while that goroutine was still in the store, which the node's stop
// closes next. Close now cancels the recording (the receipt is not
// answered ESME_ROK: the SMSC sends it again) and waits for it.
func TestClientCloseWaitsForReceiptRecording(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	st := &heldReceiptStore{release: make(chan struct{})}
	c := boundClient(t, "smpp://sb@"+smsc.Addr, Config{Store: st})
	receipted := make(chan struct{})
	go func() {
		defer close(receipted)
		_, _ = smsc.Receipt("x-1", "DELIVRD") // ends with the connection, unanswered
	}()
	polltest.Until(t, 20*time.Second, "the receipt in the store", func() bool { return st.in.Load() == 1 })
	c.Close()
	in := st.in.Load()
	close(st.release)
	<-receipted
	if in != 0 {
		t.Fatalf("Close returned with %d receipt recordings still in the store", in)
	}
}

// commitStore is a receipt store in which the message's SMSC id is not
// stored yet at the receipt's first recording (its verdict's commit is to
// come: NoWork), and where a later recording waits until release is
// closed (a store's commit under load), failing if its context ended by
// then. in counts the later recordings begun, recorded those that stored
// the receipt.
type commitStore struct {
	release  chan struct{}
	calls    atomic.Int32
	in       atomic.Int32
	recorded atomic.Int32
}

func (s *commitStore) RecordReceipts(ctx context.Context, _ time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	if s.calls.Add(1) == 1 {
		return []persistence.Completion{persistence.NoWork}, nil // the verdict is not committed yet
	}
	s.in.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.recorded.Add(1)
	return []persistence.Completion{persistence.Applied}, nil
}

// TestClientCloseRecordsCommittedReceipts: a receipt that comes right
// after its submit_sm_resp, before the verdict's commit, is held and
// answered ESME_ROK at once (the SMSC will not send it again). The
// worker's Committed records it on an errand; a retiring worker stops in
// the very step that calls Committed, so its Release closes the client at
// once (and every client closes at the node's stop). Close canceled that
// errand's store call, and the receipt was lost for good; it now waits
// for it (while it cancels the recording of a receipt not answered yet).
func TestClientCloseRecordsCommittedReceipts(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	st := &commitStore{release: make(chan struct{})}
	c := boundClient(t, "smpp://sb@"+smsc.Addr, Config{Store: st})
	v := submitHi(c)
	if v.Status != messages.Delivered || len(v.SMSCMessageIDs) != 1 {
		t.Fatalf("submit: %+v", v)
	}
	status, err := smsc.Receipt(v.SMSCMessageIDs[0], "DELIVRD")
	if err != nil || status != smpp.StatusOK {
		t.Fatalf("receipt answered %v %v", status, err)
	}
	c.Committed(v.SMSCMessageIDs)
	polltest.Until(t, 20*time.Second, "the held receipt's recording in the store", func() bool { return st.in.Load() == 1 })
	closed := make(chan struct{})
	go func() { defer close(closed); c.Close() }()
	polltest.Until(t, 20*time.Second, "Close canceling the recordings of receipts not answered", func() bool { return c.errands.context().Err() != nil })
	close(st.release)
	<-closed
	if n := st.recorded.Load(); n != 1 {
		t.Fatalf("the SMSC had ESME_ROK for its receipt, but %d receipts were recorded: the receipt is lost", n)
	}
}

// TestClientEndLooksUpHeldReceipts: the receipts held for their message
// were answered ESME_ROK (the SMSC does not send them again). The client's
// end dropped them untried, even one whose message another instance had
// committed since the last recheck; a last look-up now records those
// found, and counts the others lost (error).
func TestClientEndLooksUpHeldReceipts(t *testing.T) {
	clk := newManualClock()
	m := newMetrics(t)
	st := &fakeReceipts{known: map[string]bool{}, lookups: map[string]int{}}
	c := bookkeeping(clk, st, m)
	for _, id := range []string{"A", "B"} {
		if !c.store(context.Background(), Receipt{ID: id, Stat: "DELIVRD", Err: "000"}, false) {
			t.Fatalf("the receipt for %s is not held", id)
		}
	}
	st.learn("A") // another instance committed A's message
	c.endRechecks()
	count := func(result string) float64 { return testutil.ToFloat64(m.receipts.WithLabelValues("smsc", result)) }
	if count("recorded") != 1 || count("error") != 1 || c.held != 0 || st.looked("A") != 2 || st.looked("B") != 2 {
		t.Fatalf("at the end: %v recorded, %v error, %d held; A looked up %d times, B %d",
			count("recorded"), count("error"), c.held, st.looked("A"), st.looked("B"))
	}
}

// dyingStore is a receipt store in which no message is stored under an
// SMSC id yet (NoWork) until it dies (dead): from then on each call hangs
// until its context ends, as on a store whose server is gone; in counts
// the calls under way.
type dyingStore struct {
	dead atomic.Bool
	in   atomic.Int32
}

func (s *dyingStore) RecordReceipts(ctx context.Context, _ time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	if !s.dead.Load() {
		return make([]persistence.Completion, len(rs)), nil // NoWork
	}
	s.in.Add(1)
	defer s.in.Add(-1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestClientCloseOnADeadStore: at Close, receipts answered ESME_ROK are
// being recorded (the one of a verdict just committed, on an errand; one
// for another instance's message, by the recheck) when the store dies.
// Close waited for each store call's own 30 s (the recheck's, then a
// last look-up's: a minute, past the node's stop); it now gives the
// store closeStoreWait, by the client's clock, and logs each receipt it
// could not record as lost, with its SMSC id and, when this client
// submitted it, the message's id, for an operator to reconcile.
func TestClientCloseOnADeadStore(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	clk := newManualClock()
	m := newMetrics(t)
	logger, logs := logtest.New()
	st := &dyingStore{}
	c := boundClient(t, "smpp://sb@"+smsc.Addr, Config{Store: st, Clock: clk, Metrics: m, Logger: logger})
	v := submitHi(c)
	if v.Status != messages.Delivered || len(v.SMSCMessageIDs) != 1 {
		t.Fatalf("submit: %+v", v)
	}
	ours := v.SMSCMessageIDs[0]
	for _, id := range []string{ours, "theirs-1"} {
		if status, err := smsc.Receipt(id, "DELIVRD"); err != nil || status != smpp.StatusOK {
			t.Fatalf("receipt for %s answered %v %v", id, status, err)
		}
	}
	st.dead.Store(true)
	c.Committed(v.SMSCMessageIDs)
	clk.Advance(receiptRecheck)
	polltest.Until(t, 20*time.Second, "the errand and the recheck in the dead store", func() bool { return st.in.Load() == 2 })
	closed := make(chan struct{})
	go func() { defer close(closed); c.Close() }()
	polltest.Until(t, 20*time.Second, "Close to return once closeStoreWait has passed", func() bool {
		if slices.Contains(clk.pending(closeStoreWait), closeStoreWait) {
			clk.Advance(closeStoreWait)
		}
		select {
		case <-closed:
			return true
		default:
			return false
		}
	})
	if n := testutil.ToFloat64(m.receipts.WithLabelValues("smsc", "error")); n != 2 {
		t.Errorf("%v receipts counted error, want 2", n)
	}
	lost := map[any]map[string]any{}
	for _, r := range logs.Records(t, "receipt lost") {
		lost[r["smsc_message_id"]] = r
	}
	if r := lost[ours]; len(lost) != 2 || r["message_id"] != "m-1" || r["stat"] != "DELIVRD" ||
		lost["theirs-1"]["message_id"] != nil || lost["theirs-1"]["stat"] != "DELIVRD" {
		t.Errorf("receipts logged lost %v; want %s's (message m-1) and theirs-1's (no message id), both DELIVRD", lost, ours)
	}
}

// slowStore is a receipt store in which no message is stored under an
// SMSC id yet (NoWork) until it slows down (slow): from then on each call
// waits until release is closed, as on a Postgres store in a failover,
// then records the receipts unless its context ended first; in counts the
// calls under way, recorded the receipts recorded.
type slowStore struct {
	slow     atomic.Bool
	release  chan struct{}
	in       atomic.Int32
	recorded atomic.Int32
}

func (s *slowStore) RecordReceipts(ctx context.Context, _ time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	if !s.slow.Load() {
		return make([]persistence.Completion, len(rs)), nil // NoWork
	}
	s.in.Add(1)
	defer s.in.Add(-1)
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.recorded.Add(int32(len(rs)))
	out := make([]persistence.Completion, len(rs))
	for i := range out {
		out[i] = persistence.Applied
	}
	return out, nil
}

// TestClientCloseWithinTheNodesStop: at the node's stop, receipts
// answered ESME_ROK are being recorded (as in TestClientCloseOnADeadStore)
// in a store that is slow but alive (a Postgres failover). The closing
// client gave the store a fixed closeStoreWait (5 s) for them, though the
// node's stop (--shutdown-timeout, 30 s by default) had more time left:
// they were lost. Told the stop's end (Stopping), it now gives the store
// the time left but stopReserve, by its clock: a store that answers
// after 10 s of a 30 s stop records both.
func TestClientCloseWithinTheNodesStop(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	clk := newManualClock()
	m := newMetrics(t)
	logger, logs := logtest.New()
	st := &slowStore{release: make(chan struct{})}
	c := boundClient(t, "smpp://sb@"+smsc.Addr, Config{Store: st, Clock: clk, Metrics: m, Logger: logger})
	v := submitHi(c)
	if v.Status != messages.Delivered || len(v.SMSCMessageIDs) != 1 {
		t.Fatalf("submit: %+v", v)
	}
	for _, id := range []string{v.SMSCMessageIDs[0], "theirs-1"} {
		if status, err := smsc.Receipt(id, "DELIVRD"); err != nil || status != smpp.StatusOK {
			t.Fatalf("receipt for %s answered %v %v", id, status, err)
		}
	}
	st.slow.Store(true)
	c.Committed(v.SMSCMessageIDs)
	clk.Advance(receiptRecheck)
	polltest.Until(t, 20*time.Second, "the errand and the recheck in the slow store", func() bool { return st.in.Load() == 2 })
	start := clk.Now()
	c.Stopping(start.Add(30 * time.Second))
	closed := make(chan struct{})
	go func() { defer close(closed); c.Close() }()
	polltest.Until(t, 20*time.Second, "the closing client's deadline for the store", func() bool { return !c.errands.until().IsZero() })
	clk.Advance(10 * time.Second)
	if !c.errands.until().After(clk.Now()) { // the deadline has passed: its cancel lands before the store answers
		polltest.Until(t, 20*time.Second, "the store calls canceled", func() bool { return c.errands.answeredContext().Err() != nil })
	}
	close(st.release) // the store answers, 10 s into the stop
	<-closed
	lost := logs.Records(t, "receipt lost")
	if n := testutil.ToFloat64(m.receipts.WithLabelValues("smsc", "recorded")); len(lost) != 0 || n != 2 || st.recorded.Load() != 2 {
		t.Fatalf("a store answering 10 s into a 30 s stop recorded %d receipts (%v counted recorded); %d lost: %v",
			st.recorded.Load(), n, len(lost), lost)
	}
	if got := c.errands.until().Sub(start); got != 30*time.Second-stopReserve {
		t.Errorf("the closing client gave the store %v of the stop's 30 s; want all but stopReserve (%v)", got, stopReserve)
	}
}

// failAfterFirst answers NoWork at its first call, then fails every call
// (the store went down after the receipt was held).
type failAfterFirst struct{ calls atomic.Int32 }

func (s *failAfterFirst) RecordReceipts(ctx context.Context, _ time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	if s.calls.Add(1) == 1 {
		return make([]persistence.Completion, len(rs)), nil
	}
	return nil, errors.New("store down")
}

// TestReceiptLostAtTheEndOfItsWaitNamesItsMessage: a receipt for this
// client's own message, held, whose look-ups fail until the end of its
// wait is logged "receipt lost" with the message's id, though by then the
// SMSC id has left the ids submitted within the receipt wait (it was
// stamped at the submit_sm_resp, a little before the receipt came).
func TestReceiptLostAtTheEndOfItsWaitNamesItsMessage(t *testing.T) {
	clk := newManualClock()
	m := newMetrics(t)
	logger, logs := logtest.New()
	st := &failAfterFirst{}
	c := bookkeeping(clk, st, m)
	c.log = logger
	c.noteRecent("X")
	c.noteMessage("m-1", []string{"X"})
	clk.Advance(100 * time.Millisecond) // the receipt comes right after the submit_sm_resp
	if !c.store(context.Background(), Receipt{ID: "X", Stat: "DELIVRD", Err: "000"}, false) {
		t.Fatal("not held")
	}
	lost := func() []map[string]any { return logs.Records(t, "receipt lost") }
	for i := 0; i < 40 && len(lost()) == 0; i++ {
		polltest.Until(t, 5*time.Second, "the recheck armed", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.stopRecheck != nil || c.held == 0
		})
		clk.Advance(receiptRecheck)
		time.Sleep(20 * time.Millisecond)
	}
	polltest.Until(t, 5*time.Second, "the receipt lost", func() bool { return len(lost()) == 1 })
	if got := lost(); got[0]["message_id"] != "m-1" {
		t.Fatalf("the receipt of m-1 (submitted by this client) lost without its message id: %v", got)
	}
}

// TestCloseWait: what a client's end gives the store for the receipts it
// answered: closeStoreWait outside a node's stop; within one, the stop's
// time left but stopReserve, less than closeStoreWait too, none once that
// is used up.
func TestCloseWait(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		by   time.Time
		want time.Duration
	}{
		{"no stop", time.Time{}, closeStoreWait},
		{"30 s left", now.Add(30 * time.Second), 30*time.Second - stopReserve},
		{"3 s left", now.Add(3 * time.Second), 3*time.Second - stopReserve},
		{"less than the reserve left", now.Add(stopReserve / 2), closeFloor},
		{"past the stop's end", now.Add(-time.Second), closeFloor},
	} {
		c := &Client{stopBy: tc.by}
		if got := c.closeWait(now); got != tc.want {
			t.Errorf("%s: closeWait = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClientsStoppingTellsEveryClient: the node's stop (a context's
// deadline) reaches the clients through Clients.Stopping, on the clients'
// clock: the client current at the stop (retired by a Get since, still
// draining) and the one that Get started during the stop.
func TestClientsStoppingTellsEveryClient(t *testing.T) {
	first, second := smsctest.New(t, "pw", nil), smsctest.New(t, "pw", nil)
	clk := newManualClock()
	cs := newClients(t, Config{Clock: clk})
	c1 := getBound(t, cs, "smpp://sb@"+first.Addr, "the first bind")
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	cs.Stopping(ctx)
	c2, err := cs.Get(smscFrontend("smpp://sb@" + second.Addr)) // c1 retired
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Client{"retired": c1, "started during the stop": c2} {
		if w := c.closeWait(clk.Now()); w <= closeStoreWait || w > time.Hour-stopReserve {
			t.Errorf("the %s client gives the store %v at its end; want about the stop's hour left, but stopReserve", name, w)
		}
	}
}

// TestClientsStoppingCutShort: a stop's context canceled leaves the
// clients closeFloor, not the deadline's time left: one canceled before
// Stopping (an embedder's "stop now"), and one canceled while a client
// closes, whose store wait is already armed (it is brought forward). The
// floor itself is kept when the stop's time has run out: a healthy store
// still records the receipts answered (before, a stop whose drain used
// its time, or a canceled one, gave them 0, or the whole deadline).
func TestClientsStoppingCutShort(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	clk := newManualClock()

	canceled, cancel := context.WithTimeout(context.Background(), time.Hour)
	cancel()
	cs := newClients(t, Config{Clock: clk})
	c := getBound(t, cs, "smpp://sb@"+smsc.Addr, "the bind")
	cs.Stopping(canceled)
	if w := c.closeWait(clk.Now()); w != closeFloor {
		t.Errorf("a stop canceled before it told the clients: closeWait %v, want closeFloor (%v)", w, closeFloor)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	cs2 := newClients(t, Config{Clock: clk})
	c2 := getBound(t, cs2, "smpp://sb@"+smsc.Addr, "the second bind")
	cs2.Stopping(ctx)
	c2.errands.deadline(clk, c2.closeWait(clk.Now())) // as its end arms it
	start := clk.Now()
	if got := c2.errands.until().Sub(start); got < 59*time.Minute {
		t.Fatalf("an hour's stop armed %v", got)
	}
	cancel()
	polltest.Until(t, 20*time.Second, "the armed store wait brought forward to closeFloor", func() bool {
		return c2.errands.until().Sub(start) == closeFloor
	})
	clk.Advance(closeFloor)
	polltest.Until(t, 20*time.Second, "the answered receipts' store calls given up", func() bool {
		return c2.errands.answeredContext().Err() != nil
	})
}
