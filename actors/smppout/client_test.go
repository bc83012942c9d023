package smppout

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// oneBind is a reconnect policy that does not redial within a test: an
// hour after a lost bind.
var oneBind = ring.Reconnect{MaxAttempts: 1, Min: time.Hour, Max: time.Hour, Jitter: 0.5}

// smscFrontend is frontend smsc at url, password pw.
func smscFrontend(url string) messages.Frontend {
	return messages.Frontend{Name: "smsc", Mode: messages.ModeSMPP, URL: url, Secret: "pw"}
}

// newClient is a client of frontend smsc at url (password pw) with cfg's
// other settings, closed at the test's end: on a SQLite store of its own
// if cfg names none, reconnecting as oneBind if cfg does not say.
func newClient(t *testing.T, url string, cfg Config) *Client {
	t.Helper()
	cfg.Frontend = smscFrontend(url)
	if cfg.Store == nil {
		cfg.Store = sqlitetest.Open(t)
	}
	if cfg.Reconnect == (ring.Reconnect{}) {
		cfg.Reconnect = oneBind
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// boundClient is newClient once it has bound.
func boundClient(t *testing.T, url string, cfg Config) *Client {
	t.Helper()
	c := newClient(t, url, cfg)
	polltest.Until(t, 20*time.Second, "the bind", c.Bound)
	return c
}

// submitHi is c's verdict on message m-1 ("hi"), submitted with 10 s to
// go.
func submitHi(c *Client) messages.DeliveryResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return submitHiWithin(ctx, c)
}

// submitHiWithin is submitHi under ctx: for a test that holds the answer
// while it does other work, whose own waits bound it.
func submitHiWithin(ctx context.Context, c *Client) messages.DeliveryResult {
	return c.Submit(ctx, messages.Outgoing{ID: "m-1", SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: "hi"}, "")
}

// newMetrics is the client metrics on a registry of their own.
func newMetrics(t *testing.T) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// smpps://: the client checks the SMSC's certificate against tls_ca and
// submits over TLS; without that CA it never binds, and a submit is a
// retry naming why. A lost link is bound again.
func TestClientTLSAndReconnect(t *testing.T) {
	dir := t.TempDir()
	if err := certs.InitCA(dir, []string{"smsc"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := certs.NodeFiles(dir, "smsc")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := certs.CAFiles(dir)
	smsc := smsctest.NewTLS(t, "pw", nil, &tls.Config{Certificates: []tls.Certificate{pair}})
	out := messages.Outgoing{ID: "m-1", SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: "over TLS"}
	redial := Config{Reconnect: ring.Reconnect{MaxAttempts: 1, Min: 10 * time.Millisecond, Max: 50 * time.Millisecond, Jitter: 0.5}}

	c := boundClient(t, "smpps://sb@"+smsc.Addr+"?tls_ca="+caFile, redial)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := c.Submit(ctx, out, "")
	if v.Status != messages.Delivered || len(v.SMSCMessageIDs) != 1 || string(smsc.Submits()[0].SM.ShortMessage) != "over TLS" {
		t.Fatalf("submit over TLS: %+v", v)
	}
	smsc.DropAll()
	polltest.Until(t, 20*time.Second, "the second bind", func() bool { n, _ := smsc.Binds(); return n == 2 && c.Bound() })
	if v := c.Submit(ctx, out, "resent: test"); v.Status != messages.Delivered || v.Note != "resent: test" {
		t.Fatalf("submit after the reconnect: %+v", v)
	}

	untrusting := newClient(t, "smpps://sb@"+smsc.Addr, redial)
	if v := submitAfterFailure(t, untrusting, "TLS", out); v.Status != messages.Retry || !strings.Contains(v.Reason, "not bound to the SMSC (TLS") {
		t.Fatalf("submit without the CA: %+v", v)
	}
	if n, _ := smsc.Binds(); n != 2 {
		t.Fatalf("%d binds: the client without the CA bound", n)
	}
	// A tls_ca that cannot be read is each connect's error (it is read at
	// each, see TestSMPPFrontendTLSCAIsReadAtEachConnect): the client
	// starts, does not bind, and says why.
	missing := newClient(t, "smpps://sb@"+smsc.Addr+"?tls_ca="+filepath.Join(dir, "nonexistent.pem"), redial)
	if v := submitAfterFailure(t, missing, "tls_ca", out); v.Status != messages.Retry || !strings.Contains(v.Reason, "not bound to the SMSC (tls_ca: open ") {
		t.Fatalf("submit with a missing tls_ca: %+v", v)
	}
	if n, _ := smsc.Binds(); n != 2 {
		t.Fatalf("%d binds: the client without its CA bound", n)
	}
}

// submitAfterFailure waits until c's last connect error starts with
// prefix, then submits out with 300 ms to go: c, not bound, answers why.
func submitAfterFailure(t *testing.T, c *Client, prefix string, out messages.Outgoing) messages.DeliveryResult {
	t.Helper()
	polltest.Until(t, 20*time.Second, "the "+prefix+" failure", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return strings.HasPrefix(c.lastErr.Error(), prefix)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	return c.Submit(ctx, out, "")
}

// stepClock is a clock the test moves by hand (its timers never fire).
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time                              { return c.now }
func (c *stepClock) AfterFunc(time.Duration, func()) func() bool { return func() bool { return true } }

// bookkeeping is a client with only its receipt bookkeeping, on clk.
func bookkeeping(clk clock.Clock, st persistence.ReceiptStore, m *Metrics) *Client {
	return &Client{cfg: Config{Frontend: messages.Frontend{Name: "smsc"}, Clock: clk, ReceiptWait: DefaultReceiptWait, Store: st, Metrics: m},
		log: slog.New(slog.DiscardHandler), recent: map[string]time.Time{}, committed: map[string]time.Time{}, messageOf: map[string]string{}, early: map[string][]early{},
		maxHeld: maxHeldReceipts}
}

// fakeReceipts is a receipt store that knows the SMSC ids in known, and
// counts the look-ups of each.
type fakeReceipts struct {
	mu      sync.Mutex
	known   map[string]bool
	lookups map[string]int
}

func (f *fakeReceipts) RecordReceipts(_ context.Context, _ time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]persistence.Completion, len(rs))
	for i, r := range rs {
		f.lookups[r.SMSCMessageID]++
		out[i] = persistence.NoWork
		if f.known[r.SMSCMessageID] {
			out[i] = persistence.Applied
		}
	}
	return out, nil
}

func (f *fakeReceipts) learn(id string) {
	f.mu.Lock()
	f.known[id] = true
	f.mu.Unlock()
}

func (f *fakeReceipts) looked(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups[id]
}

// A receipt whose SMSC id names no stored message is held for its
// message, whether or not this instance submitted under that id yet: it
// is recorded when its message turns up in the store (another instance
// of the site committed it: looked up each second) or when this
// instance's commit names it (Committed; its own are not looked up
// meanwhile); after ReceiptWait a last look-up not finding it makes it
// unknown. The receipts held are bounded: one more is refused, for the
// SMSC to send it again.
func TestClientHoldsReceiptsForTheirMessage(t *testing.T) {
	clk := newManualClock()
	m := newMetrics(t)
	st := &fakeReceipts{known: map[string]bool{}, lookups: map[string]int{}}
	c := bookkeeping(clk, st, m)
	c.cfg.ReceiptWait = 3 * time.Second
	count := func(result string) float64 { return testutil.ToFloat64(m.receipts.WithLabelValues("smsc", result)) }
	held := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.held
	}
	armed := func() bool { return len(clk.pending(receiptRecheck)) == 1 }
	receipt := func(id string) Receipt { return Receipt{ID: id, Stat: "DELIVRD", Err: "000"} }

	// A: another instance commits its message after the receipt came.
	if !c.store(context.Background(), receipt("A"), false) || held() != 1 || !armed() {
		t.Fatalf("the receipt for A is not held: %d held", held())
	}
	st.learn("A")
	clk.Advance(receiptRecheck)
	polltest.Until(t, 20*time.Second, "A recorded", func() bool { return count("recorded") == 1 })
	if held() != 0 || st.looked("A") != 2 {
		t.Fatalf("after A's recheck: %d held, A looked up %d times", held(), st.looked("A"))
	}

	// B: accepted here (before or after its receipt): this instance's
	// commit records it, no look-up meanwhile.
	c.noteRecent("B")
	if !c.store(context.Background(), receipt("B"), false) {
		t.Fatal("the receipt for B is not held")
	}
	polltest.Until(t, 20*time.Second, "the recheck armed", armed)
	clk.Advance(receiptRecheck)
	polltest.Until(t, 20*time.Second, "the recheck armed again", armed)
	if n := st.looked("B"); n != 1 {
		t.Fatalf("B, accepted here, looked up %d times before its commit", n)
	}
	st.learn("B")
	c.Committed([]string{"B"})
	polltest.Until(t, 20*time.Second, "B recorded", func() bool { return count("recorded") == 2 })

	// C (never submitted) and G (accepted here, its verdict never
	// committed here) are looked up a last time at the end of their wait,
	// then unknown.
	c.noteRecent("G")
	c.store(context.Background(), receipt("C"), false)
	c.store(context.Background(), receipt("G"), false)
	for range 3 {
		polltest.Until(t, 20*time.Second, "the recheck armed", armed)
		clk.Advance(receiptRecheck)
	}
	polltest.Until(t, 20*time.Second, "C and G unknown", func() bool { return count("unknown") == 2 })
	if c, g := st.looked("C"), st.looked("G"); c != 4 || g != 2 || held() != 0 {
		t.Fatalf("C looked up %d times (want 4: at once, then each second), G %d (want 2: at once, at the end); %d held", c, g, held())
	}

	// The bound: one receipt more than maxHeld is refused.
	c.maxHeld = 2
	if !c.store(context.Background(), receipt("D"), false) || !c.store(context.Background(), receipt("E"), false) || c.store(context.Background(), receipt("F"), false) || count("error") != 1 || held() != 2 {
		t.Fatalf("with 2 held at most: %d held, %v errors", held(), count("error"))
	}
}

// SMPP v3.4 lets an SMSC send a delivery receipt as a data_sm (SMSCs
// whose default operation is data_sm do): it is read as a deliver_sm's
// (the TLVs, or the text in message_payload), recorded, and answered
// data_sm_resp ESME_ROK.
func TestClientReadsReceiptsInDataSM(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	st := &fakeReceipts{known: map[string]bool{"4f1a": true, "4f1b": true}, lookups: map[string]int{}}
	m := newMetrics(t)
	boundClient(t, "smpp://sb@"+smsc.Addr, Config{Store: st, Metrics: m})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, d := range []*smpp.DataSMBody{
		{ESMClass: smpp.ESMClassReceipt, TLVs: smpp.TLVs{{Tag: smpp.TagReceiptedMessageID, Value: smpp.CStringValue("4f1a")},
			{Tag: smpp.TagMessageState, Value: []byte{byte(smpp.StateDelivered)}}}},
		{ESMClass: smpp.ESMClassReceipt, TLVs: smpp.TLVs{{Tag: smpp.TagMessagePayload,
			Value: []byte("id:4f1b sub:001 dlvrd:001 submit date:2612021120 done date:2612021121 stat:UNDELIV err:001")}}},
	} {
		call, err := smsc.Send(ctx, smpp.PDU{Command: smpp.DataSM, Body: d})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := call.Result()
		if err != nil || resp.Command != smpp.DataSMResp || resp.Status != smpp.StatusOK {
			t.Fatalf("a receipt in a data_sm answered %v %v, %v; want data_sm_resp ESME_ROK", resp.Command, resp.Status, err)
		}
	}
	recorded := testutil.ToFloat64(m.receipts.WithLabelValues("smsc", "recorded"))
	if st.looked("4f1a") != 1 || st.looked("4f1b") != 1 || recorded != 2 {
		t.Fatalf("4f1a looked up %d times, 4f1b %d; %v recorded; want 1, 1, 2", st.looked("4f1a"), st.looked("4f1b"), recorded)
	}
}

// gatedReceipts is a receipt store whose calls wait for gate (a store
// under load, its commits slow); entered counts the calls begun.
type gatedReceipts struct {
	fakeReceipts
	gate    chan struct{}
	entered atomic.Int32
}

func (g *gatedReceipts) RecordReceipts(ctx context.Context, now time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	g.entered.Add(1)
	<-g.gate
	return g.fakeReceipts.RecordReceipts(ctx, now, rs)
}

// The frontend's window (agreed with the SMSC, which holds its deliver_sm
// to it too) bounds the receipts in flight to the node as well: with
// window=20, 20 receipts awaiting their commit are all taken, none
// answered ESME_RTHROTTLED.
func TestClientReceiptWindowIsTheFrontendsWindow(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	st := &gatedReceipts{fakeReceipts: fakeReceipts{known: map[string]bool{}, lookups: map[string]int{}}, gate: make(chan struct{})}
	for i := range 20 {
		st.known[fmt.Sprint("id-", i)] = true
	}
	var once sync.Once
	release := func() { once.Do(func() { close(st.gate) }) }
	boundClient(t, "smpp://sb@"+smsc.Addr+"?window=20", Config{Store: st, Metrics: newMetrics(t)})
	t.Cleanup(release) // before the client's Close: cleanups run last first
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var calls []*smpp.Call
	for i := range 20 {
		c, err := smsc.Send(ctx, smpp.PDU{Command: smpp.DeliverSM, Body: &smpp.SM{ESMClass: smpp.ESMClassReceipt,
			TLVs: smpp.TLVs{{Tag: smpp.TagReceiptedMessageID, Value: smpp.CStringValue(fmt.Sprint("id-", i))},
				{Tag: smpp.TagMessageState, Value: []byte{byte(smpp.StateDelivered)}}}}})
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	// Each receipt is either at the store (held by the gate) or answered
	// already (throttled): wait for all 20 to be one or the other.
	answered := func() int {
		n := 0
		for _, c := range calls {
			select {
			case <-c.Done():
				n++
			default:
			}
		}
		return n
	}
	polltest.Until(t, 20*time.Second, "every receipt at the store or answered", func() bool {
		return int(st.entered.Load())+answered() == 20
	})
	release()
	throttled := 0
	for _, c := range calls {
		resp, err := c.Result()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status == smpp.StatusThrottled {
			throttled++
		}
	}
	if throttled > 0 {
		t.Fatalf("%d of 20 receipts answered ESME_RTHROTTLED on a window=20 session", throttled)
	}
}

// The recent and committed ids are forgotten once older than
// ReceiptWait, however few the client holds; an id the SMSC accepted
// again is kept from its latest acceptance.
func TestClientForgetsIdsOnTime(t *testing.T) {
	clk := &stepClock{now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	c := bookkeeping(clk, nil, nil)
	c.noteRecent("X")
	c.noteRecent("Z")
	clk.now = clk.now.Add(20 * time.Second)
	c.noteRecent("Z") // the SMSC reuses its id
	clk.now = clk.now.Add(DefaultReceiptWait - 20*time.Second + time.Millisecond)
	c.noteRecent("Y")
	c.mu.Lock()
	_, x := c.recent["X"]
	_, z := c.recent["Z"]
	c.mu.Unlock()
	if x || !z {
		t.Fatalf("after %v: X recent %v, Z recent %v (forgotten from its first acceptance, not its latest)", DefaultReceiptWait, x, z)
	}
	clk.now = clk.now.Add(DefaultReceiptWait + time.Millisecond)
	c.Committed([]string{"Y"})
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.recent) != 0 || len(c.committed) != 1 {
		t.Fatalf("recent %v, committed %v: want only Y's commit", c.recent, c.committed)
	}
}

// BenchmarkReceiptBookkeeping is the cost per message of the receipt
// bookkeeping (noteRecent at its submit_sm_resp, Committed at its
// verdict's commit; both under c.mu on the session's reading goroutine
// or the worker's) at a steady rate: the maps hold the ids of the last
// ReceiptWait (30 s), 30,000 at 1000/s.
func BenchmarkReceiptBookkeeping(b *testing.B) {
	for _, rate := range []int{100, 1000} {
		b.Run(fmt.Sprintf("%d/s", rate), func(b *testing.B) {
			clk := &stepClock{now: time.Unix(0, 0)}
			c := bookkeeping(clk, nil, nil)
			step := time.Second / time.Duration(rate)
			live := int(DefaultReceiptWait / step)
			ids := make([]string, 2*live)
			for i := range ids {
				ids[i] = fmt.Sprint("id-", i)
			}
			for i := range live {
				clk.now = clk.now.Add(step)
				c.noteRecent(ids[i])
				c.Committed(ids[i : i+1])
			}
			i := live
			for b.Loop() {
				clk.now = clk.now.Add(step)
				id := ids[i%len(ids)]
				c.noteRecent(id)
				c.Committed([]string{id})
				i++
			}
		})
	}
}

// A submit_sm_resp whose header says ESME_ROK but whose body does not
// decode (a message_id without its NUL, as some SMSCs send) is the SMSC's
// acceptance: the message is delivered (without that id), not a retry
// that would submit it again, and it counts as ESME_ROK.
func TestUndecodableOKRespIsDelivered(t *testing.T) {
	smsc := newRawSMSC(t, &rawSMSC{answerUnbind: true, submit: func(req smpp.PDU) []byte {
		b := binary.BigEndian.AppendUint32(nil, 16+6)
		b = binary.BigEndian.AppendUint32(b, uint32(smpp.SubmitSMResp))
		b = binary.BigEndian.AppendUint32(b, uint32(smpp.StatusOK))
		b = binary.BigEndian.AppendUint32(b, req.Seq)
		return append(b, "abc123"...) // no NUL
	}})
	m := newMetrics(t)
	c := boundClient(t, "smpp://sb@"+smsc.Addr, Config{Metrics: m})
	v := submitHi(c)
	if v.Status != messages.Delivered || len(v.SMSCMessageIDs) != 0 {
		t.Fatalf("the SMSC answered ESME_ROK, the verdict is %+v", v)
	}
	if ok := testutil.ToFloat64(m.submits.WithLabelValues("smsc", "ESME_ROK")); ok != 1 {
		t.Fatalf("submits{status=ESME_ROK} = %v", ok)
	}
}

// TestOKRespWithoutAnIDIsFlagged: a submit_sm_resp ESME_ROK that gives
// no message id (an empty message_id, or a body that cannot be read) is
// an acceptance: delivered. Its receipts can never be matched to the
// message (they count unknown), which went unsaid. Its history detail
// now says so, the frontend's log says so once (then at most once per
// noIDLogEvery, counting those since), and
// switchboard_smpp_frontend_submits_without_id_total counts each.
func TestOKRespWithoutAnIDIsFlagged(t *testing.T) {
	var mu sync.Mutex
	answered := 0
	smsc := newRawSMSC(t, &rawSMSC{answerUnbind: true, submit: func(req smpp.PDU) []byte {
		mu.Lock()
		answered++
		n := answered
		mu.Unlock()
		body := "\x00" // an empty message_id
		if n == 3 {
			body = "abc123" // no NUL: the body cannot be read
		}
		b := binary.BigEndian.AppendUint32(nil, uint32(16+len(body)))
		b = binary.BigEndian.AppendUint32(b, uint32(smpp.SubmitSMResp))
		b = binary.BigEndian.AppendUint32(b, uint32(smpp.StatusOK))
		b = binary.BigEndian.AppendUint32(b, req.Seq)
		return append(b, body...)
	}})
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	clk := newManualClock()
	logger, logs := logtest.New()
	c := boundClient(t, "smpp://sb@"+smsc.Addr, Config{Metrics: m, Clock: clk, Logger: logger})
	for i := range 4 {
		if i == 3 {
			clk.Advance(time.Hour)
		}
		// Its delivery time by the client's clock, which runs an hour ahead.
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(10*time.Second))
		v := c.Submit(ctx, messages.Outgoing{ID: "m-1", SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: "hi"}, "")
		cancel()
		if v.Status != messages.Delivered || len(v.SMSCMessageIDs) != 0 || !strings.Contains(v.Note, "the SMSC gave no message id") {
			t.Fatalf("submit %d: the SMSC answered ESME_ROK without an id, the verdict is %+v", i+1, v)
		}
	}
	if got := logs.Records(t, "the SMSC accepted a submit_sm but gave no message id: its receipts cannot be matched to the message"); len(got) != 2 ||
		got[0]["message_id"] != "m-1" || got[1]["since"] != float64(3) {
		t.Errorf("the log lines about the missing ids %v, want 2 (the first, and one an hour later counting 3 since)", got)
	}
	want := `
# HELP switchboard_smpp_frontend_submits_without_id_total submit_sm answered ESME_ROK whose submit_sm_resp gave no message id (an empty message_id, or a body that could not be read): the message is delivered, its receipts cannot be matched to it (they count unknown).
# TYPE switchboard_smpp_frontend_submits_without_id_total counter
switchboard_smpp_frontend_submits_without_id_total{frontend="smsc"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "switchboard_smpp_frontend_submits_without_id_total"); err != nil {
		t.Error(err)
	}
}

// recClock is the real clock that records the delays asked of AfterFunc.
type recClock struct {
	clock.Real
	mu     sync.Mutex
	delays []time.Duration
}

func (c *recClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.delays = append(c.delays, d)
	c.mu.Unlock()
	return c.Real.AfterFunc(d, f)
}

// upTo are the recorded delays of at most max, in order.
func (c *recClock) upTo(max time.Duration) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, d := range c.delays {
		if d <= max {
			out = append(out, d)
		}
	}
	return out
}

// An SMSC that takes every bind and drops the connection at once (too
// many sessions, an account it will not serve) is redialled with the
// backoff doubling per drop: a bind that did not last is a failure in a
// row, not the end of the run.
func TestBackoffGrowsWhenEveryBindIsDropped(t *testing.T) {
	smsc := newRawSMSC(t, &rawSMSC{dropAfterBind: true})
	clk := &recClock{}
	const min, max = 5 * time.Millisecond, 2 * time.Second
	newClient(t, "smpp://sb@"+smsc.Addr+"?enquire_link=1h", Config{Clock: clk, ResponseTimeout: 5 * time.Second,
		Reconnect: ring.Reconnect{MaxAttempts: 1, Min: min, Max: max}})
	polltest.Until(t, 20*time.Second, "6 binds", func() bool { n, _ := smsc.counts(); return n >= 6 })
	ds := clk.upTo(max) // the session's timers are 5 s and 1 h
	want := []time.Duration{min, 2 * min, 4 * min, 8 * min, 16 * min}
	if len(ds) < len(want) || !slices.Equal(ds[:len(want)], want) {
		t.Fatalf("the reconnect waits after each dropped bind: %v, want %v...", ds, want)
	}
}

// manualClock is a clock the test moves by hand: a timer fires (in its
// own goroutine, as clock.Real's do) when Advance passes its time.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	at      time.Time
	d       time.Duration
	f       func()
	stopped bool
}

func newManualClock() *manualClock { return &manualClock{now: time.Now()} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{at: c.now.Add(d), d: d, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the time by d and fires the timers then due.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if !t.stopped && !t.at.After(c.now) {
			t.stopped = true
			due = append(due, t.f)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		go f()
	}
}

// pending are the durations of the timers not fired nor stopped that
// were armed for at most max.
func (c *manualClock) pending(max time.Duration) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, t := range c.timers {
		if !t.stopped && t.d <= max {
			out = append(out, t.d)
		}
	}
	return out
}

// The parts of a long text are paced like messages (docs/smpp.md: slots
// 1/rate apart, no burst): at rate=2 the three parts go 500 ms apart,
// each at its own slot, not together at the last one.
func TestLongTextPartsArePaced(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	clk := newManualClock()
	c := boundClient(t, "smpp://sb@"+smsc.Addr+"?rate=2", Config{Clock: clk})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	verdict := make(chan messages.DeliveryResult, 1)
	go func() {
		body := strings.Repeat("0123456789", 40) // 400 septets: 3 parts
		verdict <- c.Submit(ctx, messages.Outgoing{ID: "m-1", SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: body}, "")
	}()
	// The session's timers are 10 s (responses) and 30 s (keepalive).
	paced := func() bool { return len(clk.pending(time.Second)) == 1 }
	for part := 1; part < 3; part++ {
		polltest.Until(t, 20*time.Second, fmt.Sprintf("the wait for part %d's slot", part+1), paced)
		if d := clk.pending(time.Second); d[0] != 500*time.Millisecond {
			t.Fatalf("%d parts sent, then a wait of %v for the next slot, want 500ms", len(smsc.Submits()), d)
		}
		polltest.Until(t, 20*time.Second, fmt.Sprintf("part %d sent", part), func() bool { return len(smsc.Submits()) == part })
		clk.Advance(500 * time.Millisecond)
	}
	if v := <-verdict; v.Status != messages.Delivered || len(v.SMSCMessageIDs) != 3 {
		t.Fatalf("%+v", v)
	}
}

// The frontend's own pacing is no attempt: a message that its submit
// rate keeps from being sent in its time is a deferred retry (it uses
// none of --delivery-max-attempts), unsent, that asks to be tried when its
// slots would come in time, and so is a message still waiting for its
// slot when the client closes. A long text whose parts never fit (the
// rate too low for the delivery timeout) is an ordinary retry that uses
// its attempt: nothing transient keeps it. A text whose
// first part went was attempted: stopped before its second, it is an
// ordinary retry. At rate=0.5 (slots 2 s apart) with 20 s to go (the
// slots within 10 s), a text of 6 parts takes the slots up to 10 s.
func TestPacingDefersWhatItKeeps(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	clk := newManualClock()
	c := boundClient(t, "smpp://sb@"+smsc.Addr+"?rate=0.5", Config{Clock: clk})
	out := func(id string, tens int) messages.Outgoing {
		return messages.Outgoing{ID: id, SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: strings.Repeat("0123456789", tens)}
	}
	submit := func(o messages.Outgoing, within time.Duration) <-chan messages.DeliveryResult {
		v := make(chan messages.DeliveryResult, 1)
		go func() {
			ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(2*within))
			defer cancel()
			v <- c.Submit(ctx, o, "")
		}()
		return v
	}
	waiting := func(d time.Duration) func() bool {
		return func() bool { return slices.Contains(clk.pending(time.Minute), d) }
	}
	long := submit(out("m-long", 80), 10*time.Second) // 800 septets: 6 parts, slots at 0, 2, ... 10 s
	polltest.Until(t, 20*time.Second, "m-long's first part sent, the wait for its second", func() bool {
		return len(smsc.Submits()) == 1 && waiting(2*time.Second)()
	})
	if v := <-submit(out("m-short", 1), 10*time.Second); v.Status != messages.Retry || !v.Deferred || v.RetryAfter != 2*time.Second ||
		v.Reason != "the submit rate (0.5/s, 100% of it this instance's) leaves no slot in time" {
		t.Errorf("m-short, its slot at 12 s, 10 s to go: %+v; want a deferred retry after 2s (its slot then within 10 s)", v)
	}
	if v := <-submit(out("m-longer", 100), 10*time.Second); v.Status != messages.Retry || v.Deferred || v.RetryAfter != 0 ||
		!strings.HasPrefix(v.Reason, "its 7 parts take 12s at the submit rate (0.5/s, 100% of it this instance's), more than the 10s left for its slots") {
		t.Errorf("m-longer, 7 parts that never fit in 10 s: %+v; want an ordinary retry saying so", v)
	}
	later := submit(out("m-later", 1), 30*time.Second) // its slot at 12 s
	polltest.Until(t, 20*time.Second, "m-later waiting for its slot", waiting(12*time.Second))
	c.Close()
	if v := <-later; v.Status != messages.Retry || !v.Deferred || v.Reason != "stopped while waiting for the submit rate" {
		t.Errorf("m-later, the client closed before its slot: %+v; want a deferred retry", v)
	}
	// Its second part was never sent: no "no submit_sm_resp" for it.
	want := "part 2 of 6: not sent: the client closed while it waited for its slot at the submit rate; part 1 was sent"
	if v := <-long; v.Status != messages.Retry || v.Deferred || v.Reason != want {
		t.Errorf("m-long, closed after its first part: %+v; want an ordinary retry (its first part went), reason %q", v, want)
	}
	if n := len(smsc.Submits()); n != 1 {
		t.Errorf("%d submit_sm at the SMSC, want m-long's first part only", n)
	}
}

// TestUnsentText: a part whose wait for its slot ended says it was not
// sent, why, and which parts before it were.
func TestUnsentText(t *testing.T) {
	for _, c := range []struct {
		i       int
		closing bool
		want    string
	}{
		{1, true, "not sent: the client closed while it waited for its slot at the submit rate; part 1 was sent"},
		{3, true, "not sent: the client closed while it waited for its slot at the submit rate; parts 1 to 3 were sent"},
		{2, false, "not sent: its delivery time ran out while it waited for its slot at the submit rate; parts 1 and 2 were sent"},
	} {
		if got := unsentText(c.i, c.closing); got != c.want {
			t.Errorf("part %d, closing %v: %q, want %q", c.i+1, c.closing, got, c.want)
		}
	}
}

// TestSubmitWithoutADeadline: a submit whose context has no deadline (an
// embedder's call, say) on a frontend without a rate was a retry, "the
// submit rate (0/s ...) leaves no slot in time", once the throttle's pause
// was woven into the slot reservation; it is sent, as before, with an hour
// to go.
func TestSubmitWithoutADeadline(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	c := boundClient(t, "smpp://sb@"+smsc.Addr, Config{})
	v := c.Submit(context.Background(), messages.Outgoing{ID: "m-1", SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: "hi"}, "")
	if v.Status != messages.Delivered {
		t.Fatalf("a submit without a deadline: %+v, want delivered", v)
	}
}
