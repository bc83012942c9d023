package smsc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/smpp"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// pipeListener hands out the server ends of in-memory connections.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}
func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

func (l *pipeListener) dial() net.Conn {
	c, s := net.Pipe()
	l.conns <- s
	return c
}

// backend is the intake and the credentials, in memory: creds, or none
// (the node is open) when nil.
type backend struct {
	mu    sync.Mutex
	subs  []messages.Submission
	creds *auth.Set
	// stored are the messages Message reads.
	stored map[string]messages.Message
}

func (b *backend) Submit(_ context.Context, s messages.Submission) (messages.Message, bool, error) {
	// The node's checks: the fields, then the times against its clock
	// (--message-validity 48h).
	if err := s.Validate(); err != nil {
		return messages.Message{}, false, err
	}
	if err := s.CheckTimes(time.Now(), 48*time.Hour); err != nil {
		return messages.Message{}, false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs = append(b.subs, s)
	return messages.Message{ID: "m" + string(rune('0'+len(b.subs)))}, true, nil
}
func (b *backend) Message(_ context.Context, id string) (messages.Message, error) {
	if m, ok := b.stored[id]; ok {
		return m, nil
	}
	return messages.Message{}, errors.New("none")
}
func (b *backend) Credentials() *auth.Set {
	if b.creds != nil {
		return b.creds
	}
	return auth.NewSet(nil, false)
}

func (b *backend) submissions() []messages.Submission {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]messages.Submission(nil), b.subs...)
}

// receipts is an outbox of receipt rows in memory.
type receipts struct {
	mu       sync.Mutex
	due      map[string]time.Time // message id -> due
	outcomes []persistence.Outcome
	// made is when each row was made (the message became final);
	// created and updated are the message's created_at and updated_at.
	made, created, updated time.Time
}

func (r *receipts) ClaimWork(_ context.Context, req persistence.ClaimRequest) (persistence.Claim, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var c persistence.Claim
	for id, due := range r.due {
		if due.After(req.Now) {
			if c.NextDue.IsZero() || due.Before(c.NextDue) {
				c.NextDue = due
			}
			continue
		}
		r.due[id] = req.Now.Add(req.Lease)
		c.Work = append(c.Work, persistence.Work{Kind: req.Kind, Target: req.Target, MessageID: id, CreatedAt: r.made,
			Message: messages.Message{ID: id, SourceMSISDN: "S", DestinationMSISDN: "1", State: messages.StateDelivered,
				CreatedAt: r.created, UpdatedAt: r.updated}})
	}
	return c, nil
}

func (r *receipts) CompleteWork(_ context.Context, _ time.Time, os []persistence.Outcome) ([]persistence.Completion, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range os {
		r.outcomes = append(r.outcomes, o)
		if o.Result == persistence.ResultRetry {
			r.due[o.MessageID] = o.RetryAt
		} else {
			delete(r.due, o.MessageID)
		}
	}
	return make([]persistence.Completion, len(os)), nil
}

func (r *receipts) results() []persistence.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]persistence.Outcome(nil), r.outcomes...)
}

// serve starts a listener on ln, stopped with the test.
func serve(t *testing.T, b Backend, r *receipts) (*pipeListener, *Metrics) {
	t.Helper()
	ln := newPipeListener()
	return ln, serveOn(t, ln, b, r, nil).cfg.Metrics
}

// serveOn starts a listener on ln, stopped with the test; Serve's end is
// sent to ended when it is not nil, else checked to be nil at the stop.
// Each of set changes the configuration first.
func serveOn(t *testing.T, ln net.Listener, b Backend, r *receipts, ended chan<- error, set ...func(*Config)) *Server {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Listener, cfg.SystemID, cfg.Owner, cfg.Backend, cfg.Store, cfg.Metrics = ln, "sb", "i0", b, r, m
	// No keepalive: a net.Pipe has no buffer, and two ends writing at once
	// (an enquire_link each way) would wait for each other for ever.
	cfg.Session.EnquireLink = -1
	for _, f := range set {
		f(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := srv.Serve()
		if ended != nil {
			ended <- err
		}
		done <- err
	}()
	t.Cleanup(func() {
		if err := srv.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil && ended == nil {
			t.Error(err)
		}
	})
	return srv
}

// esme binds a session over ln as the account acct; its deliver_sm go to
// handle.
func esme(t *testing.T, ln *pipeListener, bind smpp.CommandID, handle func(*smpp.Session, smpp.PDU)) *smpp.Session {
	t.Helper()
	return esmeAs(t, ln, bind, smpp.Bind{SystemID: "acct", Password: "pw"}, handle)
}

// esmeAs binds a session over ln with the credentials of b.
func esmeAs(t *testing.T, ln *pipeListener, bind smpp.CommandID, b smpp.Bind, handle func(*smpp.Session, smpp.PDU)) *smpp.Session {
	t.Helper()
	cfg := smpp.DefaultSessionConfig(smpp.RoleESME)
	cfg.Handler, cfg.EnquireLink, cfg.ResponseTimeout = handle, -1, 30*time.Second
	s, err := smpp.NewSession(ln.dial(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Bind(context.Background(), bind, b); err != nil {
		t.Fatal(err)
	}
	return s
}

func partSM(ref, total, seq byte, text string) *smpp.SM {
	return &smpp.SM{Source: smpp.Address{Addr: "S"}, Dest: smpp.Address{Addr: "4477"}, ESMClass: smpp.ESMClassUDHI,
		ShortMessage: append([]byte{5, 0, 3, ref, total, seq}, text...)}
}

// A message's parts are answered together after its one submission; a
// message whose last part never comes has its parts refused after the
// reassembly wait, and nothing is submitted for it.
func TestServerReassembles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{}
		ln, m := serve(t, b, &receipts{due: map[string]time.Time{}})
		s := esme(t, ln, smpp.BindTransmitter, nil)
		ctx := context.Background()
		c2, err := s.Send(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: partSM(7, 2, 2, "world")})
		if err != nil {
			t.Fatal(err)
		}
		lone, err := s.Send(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: partSM(8, 2, 1, "alone")})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if len(b.submissions()) != 0 {
			t.Fatal("a part was submitted alone")
		}
		if held, pending := testutil.ToFloat64(m.partsHeld), testutil.ToFloat64(m.pending); held != 2 || pending != 2 {
			t.Errorf("parts held %v, window in use %v; want 2 and 2", held, pending)
		}
		c1, err := s.Send(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: partSM(7, 2, 1, "hello ")})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []*smpp.Call{c1, c2} {
			resp, err := c.Result()
			if err != nil || resp.Status != smpp.StatusOK || resp.Body.(*smpp.SMResp).MessageID != "m1" {
				t.Fatalf("part answered %+v, %v; want the message's id", resp, err)
			}
		}
		if subs := b.submissions(); len(subs) != 1 || subs[0].Body != "hello world" || subs[0].DataCoding != messages.CodingGSM7 {
			t.Fatalf("submitted %+v", subs)
		}
		start := time.Now()
		resp, err := lone.Result()
		if err != nil || resp.Status != smpp.StatusSubmitFailed {
			t.Fatalf("the part of an incomplete message: %+v, %v", resp, err)
		}
		if waited := time.Since(start); waited < 4*time.Second || waited > 5*time.Second {
			t.Errorf("refused after %v, want the 5 s reassembly wait", waited)
		}
		if len(b.submissions()) != 1 {
			t.Error("the incomplete message was submitted")
		}
		synctest.Wait() // the gauge moves just after the answer is written
		if held, pending := testutil.ToFloat64(m.partsHeld), testutil.ToFloat64(m.pending); held != 0 || pending != 0 {
			t.Errorf("parts held %v, window in use %v after every answer; want 0 and 0", held, pending)
		}
		// The session had three requests awaiting at once: its window is
		// no reason for the missing part.
		if tm, win := testutil.ToFloat64(m.incomplete.WithLabelValues("timeout")), testutil.ToFloat64(m.incomplete.WithLabelValues("window")); tm != 1 || win != 0 {
			t.Errorf("incomplete messages: %v timeout, %v window; want 1 and 0", tm, win)
		}
	})
}

// An ESME whose window is smaller than a message's parts can never send
// it: the listener answers no part before the whole message is stored
// (an answer says it is), and the ESME sends the next part only once an
// answer frees its window. Its parts are refused after the reassembly
// wait, and the refusal says the window is why (reason="window"), not
// a part gone missing.
func TestServerTellsAWindowSmallerThanTheParts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{}
		ln, m := serve(t, b, &receipts{due: map[string]time.Time{}})
		cfg := smpp.DefaultSessionConfig(smpp.RoleESME)
		cfg.EnquireLink, cfg.ResponseTimeout, cfg.Window = -1, 30*time.Second, 2
		s, err := smpp.NewSession(ln.dial(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Bind(context.Background(), smpp.BindTransmitter, smpp.Bind{SystemID: "acct", Password: "pw"}); err != nil {
			t.Fatal(err)
		}
		var calls []*smpp.Call
		for seq := byte(1); seq <= 3; seq++ { // the third waits for a free slot
			c, err := s.Send(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: partSM(9, 3, seq, "part")})
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, c)
		}
		for i, c := range calls {
			if resp, err := c.Result(); err != nil || resp.Status != smpp.StatusSubmitFailed {
				t.Fatalf("part %d: %v, %v; want ESME_RSUBMITFAIL", i+1, resp.Status, err)
			}
		}
		synctest.Wait()
		if len(b.submissions()) != 0 {
			t.Fatal("an incomplete message was submitted")
		}
		// Parts 1-2 waited with the window full: the window; part 3 came
		// alone after their refusal: a part missing.
		if win, tm := testutil.ToFloat64(m.incomplete.WithLabelValues("window")), testutil.ToFloat64(m.incomplete.WithLabelValues("timeout")); win != 1 || tm != 1 {
			t.Fatalf("incomplete messages: %v window, %v timeout; want 1 and 1", win, tm)
		}
	})
}

// A part whose data comes in a message_payload longer than a
// short_message is refused ESME_RINVMSGLEN and not held: 10,000 of them
// would hold 650 MB.
func TestServerRefusesAPartLongerThanAShortMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{}
		ln, m := serve(t, b, &receipts{due: map[string]time.Time{}})
		s := esme(t, ln, smpp.BindTransmitter, nil)
		sar := func(seq byte, payload []byte) *smpp.SM {
			return &smpp.SM{Source: smpp.Address{Addr: "S"}, Dest: smpp.Address{Addr: "4477"}, TLVs: smpp.TLVs{
				{Tag: smpp.TagSARMsgRefNum, Value: []byte{0, 9}}, {Tag: smpp.TagSARTotalSegments, Value: []byte{2}},
				{Tag: smpp.TagSARSegmentSeqnum, Value: []byte{seq}}, {Tag: smpp.TagMessagePayload, Value: payload}}}
		}
		resp, err := s.Request(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: sar(1, make([]byte, 65000))})
		if err != nil || resp.Status != smpp.StatusInvalidMsgLen {
			t.Fatalf("a part of 65000 octets: %v, %v; want ESME_RINVMSGLEN", resp.Status, err)
		}
		synctest.Wait()
		if held, pending := testutil.ToFloat64(m.partsHeld), testutil.ToFloat64(m.pending); held != 0 || pending != 0 || len(b.submissions()) != 0 {
			t.Fatalf("parts held %v, window in use %v, %d submitted; want nothing", held, pending, len(b.submissions()))
		}
		// Parts of a short_message's length in message_payload are taken.
		c1, err := s.Send(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: sar(1, []byte("hello "))})
		if err != nil {
			t.Fatal(err)
		}
		c2, err := s.Send(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: sar(2, []byte("world"))})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []*smpp.Call{c1, c2} {
			if resp, err := c.Result(); err != nil || resp.Status != smpp.StatusOK {
				t.Fatalf("a part in message_payload: %v, %v", resp.Status, err)
			}
		}
		if subs := b.submissions(); len(subs) != 1 || subs[0].Body != "hello world" {
			t.Fatalf("submitted %+v", subs)
		}
	})
}

// A part whose user data header holds an element besides the
// concatenation (a national language shift, a port) is refused
// ESME_RINVESMCLASS as a single message with such a header is: the
// element would be lost, and the text read wrong (a Turkish single shift
// makes ESC 0x73 'ş', read without it as 's') or the port dropped. Every
// part is refused and nothing is stored.
func TestServerRefusesAPartWithAnotherHeaderElement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{}
		ln, m := serve(t, b, &receipts{due: map[string]time.Time{}})
		s := esme(t, ln, smpp.BindTransmitter, nil)
		ctx := context.Background()
		for _, c := range []struct {
			name  string
			dc    byte
			udh   func(seq byte) []byte
			parts [][]byte
		}{
			{"turkish single shift (IEI 0x24)", smpp.DCDefault,
				func(seq byte) []byte { return []byte{8, 0x00, 3, 42, 2, seq, 0x24, 1, 0x01} },
				[][]byte{[]byte("Te"), {0x1B, 0x73, 'e', 'k', 'k', 'u', 'r'}}},
			{"wap push port (IEI 0x05) before the concatenation", smpp.DCBinary,
				func(seq byte) []byte { return []byte{11, 0x05, 4, 0x0B, 0x84, 0x23, 0xF0, 0x00, 3, 43, 2, seq} },
				[][]byte{[]byte("wsp-1"), []byte("wsp-2")}},
			{"8-bit port (IEI 0x04) beside a 16-bit reference", smpp.DCBinary,
				func(seq byte) []byte { return []byte{10, 0x08, 4, 1, 44, 2, seq, 0x04, 2, 0x10, 0x20} },
				[][]byte{[]byte("a"), []byte("b")}},
			{"one part of one, with a language locking shift (IEI 0x25)", smpp.DCDefault,
				func(seq byte) []byte { return []byte{8, 0x00, 3, 45, 1, seq, 0x25, 1, 0x01} },
				[][]byte{[]byte("Tesekkur")}},
		} {
			var calls []*smpp.Call
			for i, d := range c.parts {
				sm := &smpp.SM{Source: smpp.Address{Addr: "S"}, Dest: smpp.Address{Addr: "4477"}, ESMClass: smpp.ESMClassUDHI,
					DataCoding: c.dc, ShortMessage: append(c.udh(byte(i+1)), d...)}
				call, err := s.Send(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: sm})
				if err != nil {
					t.Fatal(err)
				}
				calls = append(calls, call)
			}
			for i, call := range calls {
				if resp, err := call.Result(); err != nil || resp.Status != smpp.StatusInvalidESMClass {
					t.Errorf("%s, part %d: %v, %v; want ESME_RINVESMCLASS", c.name, i+1, resp.Status, err)
				}
			}
		}
		synctest.Wait()
		if subs := b.submissions(); len(subs) != 0 {
			t.Fatalf("stored %+v; want nothing", subs)
		}
		if held := testutil.ToFloat64(m.partsHeld); held != 0 {
			t.Errorf("%v parts held; want none", held)
		}
	})
}

// A connection that does not bind within the bind timeout is closed,
// though it keeps the link alive with enquire_link (answered until
// then); a bound one stays.
func TestServerClosesAConnectionThatDoesNotBind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln, _ := serve(t, &backend{}, &receipts{due: map[string]time.Time{}})
		bound := esme(t, ln, smpp.BindTransmitter, nil)
		cfg := smpp.DefaultSessionConfig(smpp.RoleESME)
		cfg.EnquireLink, cfg.ResponseTimeout = 5*time.Second, 30*time.Second
		idle, err := smpp.NewSession(ln.dial(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { idle.Close() })
		timeout := DefaultConfig().BindTimeout
		time.Sleep(timeout - time.Second)
		select {
		case <-idle.Done():
			t.Fatalf("closed before the bind timeout: %v", idle.Err())
		default:
		}
		resp, err := idle.Request(context.Background(), smpp.PDU{Command: smpp.EnquireLink})
		if err != nil || resp.Status != smpp.StatusOK {
			t.Fatalf("enquire_link before the bind: %v, %v", resp.Status, err)
		}
		select { // on the bubble's clock: deterministic
		case <-idle.Done():
		case <-time.After(2 * time.Second):
			t.Fatalf("still open %v after connecting, unbound", timeout+time.Second)
		}
		if idle.Err() == nil {
			t.Fatal("the unbound connection ended without an error")
		}
		synctest.Wait()
		select {
		case <-bound.Done():
			t.Fatalf("the bound session was closed: %v", bound.Err())
		default:
		}
		if _, err := bound.Request(context.Background(), smpp.PDU{Command: smpp.EnquireLink}); err != nil {
			t.Fatalf("the bound session after the bind timeout: %v", err)
		}
	})
}

// TestReceiptDoneDateIsWhenTheMessageBecameFinal: a receipt's done date
// is when the message became final (its receipt row was made then), its
// submit date when it was accepted. Before, the done date was the
// message's updated_at, which moves on after it is final: an SMSC's
// receipt for it (dlr: DELIVRD) is a history entry that touches it, so a
// receipt sent once the ESME bound a receiver, after such a dlr, gave the
// dlr's time as the time the message was done.
func TestReceiptDoneDateIsWhenTheMessageBecameFinal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		final := time.Now().UTC().Add(-time.Hour)
		r := &receipts{due: map[string]time.Time{"m1": time.Now()}, made: final, created: final.Add(-5 * time.Minute),
			updated: final.Add(10 * time.Minute)}
		ln, _ := serve(t, &backend{}, r)
		texts := make(chan string, 4)
		esme(t, ln, smpp.BindReceiver, func(s *smpp.Session, p smpp.PDU) {
			texts <- string(p.Body.(*smpp.SM).ShortMessage)
			_ = s.Reply(p, smpp.StatusOK, &smpp.SMResp{})
		})
		rc, err := smpp.ParseReceipt(<-texts)
		if err != nil {
			t.Fatal(err)
		}
		if want := final.Truncate(time.Minute); !rc.DoneDate.Equal(want) {
			t.Errorf("done date %v, want %v (when the message became final; its updated_at is %v)", rc.DoneDate, want, r.updated)
		}
		if want := r.created.Truncate(time.Minute); !rc.SubmitDate.Equal(want) {
			t.Errorf("submit date %v, want %v", rc.SubmitDate, want)
		}
	})
}

// TestQueryFinalDateIsWhenTheMessageBecameFinal: query_sm_resp's
// final_date is when the message reached its final state (SMPP v3.4
// 4.8.2), the first entry of its history in that state. Before, it was
// its updated_at, which an SMSC's receipt for the message, noted in its
// history minutes later, moves on.
func TestQueryFinalDateIsWhenTheMessageBecameFinal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		m := messages.Message{ID: "m1", SourceMSISDN: "S", DestinationMSISDN: "4477", State: messages.StateDelivered,
			CreatedAt: at, UpdatedAt: at.Add(10 * time.Minute), History: []messages.HistoryEntry{
				{State: messages.StatePending, At: at, Detail: "accepted"},
				{State: messages.StateDelivered, At: at.Add(2*time.Second + 300*time.Millisecond), Detail: "delivered to fe"},
				{State: messages.StateDelivered, At: at.Add(10 * time.Minute), Detail: "dlr: DELIVRD err:000"},
			}}
		ln, _ := serve(t, &backend{stored: map[string]messages.Message{"m1": m}}, &receipts{due: map[string]time.Time{}})
		s := esme(t, ln, smpp.BindTransceiver, nil)
		resp, err := s.Request(context.Background(), smpp.PDU{Command: smpp.QuerySM, Body: &smpp.Query{MessageID: "m1"}})
		if err != nil || resp.Status != smpp.StatusOK {
			t.Fatalf("query_sm: %v %v", resp.Status, err)
		}
		if got, want := resp.Body.(*smpp.QueryResp).FinalDate, "261201100002300+"; got != want {
			t.Errorf("final_date %q, want %q (when it was delivered, not its updated_at)", got, want)
		}
	})
}

// A receipt waits for a receiver; one the ESME refuses for now is sent
// again after the retry wait, one it takes is recorded delivered. Each
// outcome is fenced by its claim: this instance's owner and the lease's
// epoch.
func TestServerSendsReceipts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &receipts{due: map[string]time.Time{"m1": time.Now()}}
		ln, _ := serve(t, &backend{}, r)
		esme(t, ln, smpp.BindTransmitter, nil)
		time.Sleep(5 * time.Second)
		if got := r.results(); len(got) != 0 {
			t.Fatalf("receipts sent to a transmitter: %+v", got)
		}
		var mu sync.Mutex
		answers := []smpp.Status{smpp.StatusTempAppError, smpp.StatusOK}
		var sentAt []time.Time
		esme(t, ln, smpp.BindReceiver, func(s *smpp.Session, p smpp.PDU) {
			mu.Lock()
			st := answers[0]
			answers = answers[1:]
			sentAt = append(sentAt, time.Now())
			mu.Unlock()
			var body smpp.Body
			if st == smpp.StatusOK {
				body = &smpp.SMResp{}
			}
			_ = s.Reply(p, st, body)
		})
		time.Sleep(time.Minute)
		got := r.results()
		if len(got) != 2 || got[0].Result != persistence.ResultRetry || got[1].Result != persistence.ResultDelivered ||
			got[0].Kind != persistence.WorkReceipt || got[0].Target != "acct" {
			t.Fatalf("outcomes %+v", got)
		}
		for _, o := range got {
			if o.Owner != "i0" || o.Epoch != 0 {
				t.Errorf("%s outcome: owner %q, epoch %d; want fenced by its claim (i0, 0)", o.Result, o.Owner, o.Epoch)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if gap := sentAt[1].Sub(sentAt[0]); gap < 30*time.Second || gap > 32*time.Second {
			t.Errorf("sent again after %v, want the 30 s retry wait", gap)
		}
	})
}

// The metrics' account label is the SMPP account an ESME bound as, and
// "other" for every ESME no account names (a node without credentials
// lets any system_id bind): binds and submits from many system_ids make
// one series, not one each.
func TestServerMetricsAccountLabel(t *testing.T) {
	sm := &smpp.SM{Source: smpp.Address{Addr: "S"}, Dest: smpp.Address{Addr: "4477"}, ShortMessage: []byte("hi")}
	for _, c := range []struct {
		name  string
		creds *auth.Set
		binds []string // system_ids, each with the password pw
		want  string   // the one account label
	}{
		{"open node", nil, []string{"esme-0", "esme-1", "esme-2", "anything", "ESME 4", "x"}, "other"},
		{"smpp account", auth.NewSet([]messages.Credential{{Name: "esme1", Role: messages.RoleClient, TokenHash: auth.Hash("pw"), SMPP: true}}, false),
			[]string{"esme1", "esme1"}, "esme1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ln, m := serve(t, &backend{creds: c.creds}, &receipts{due: map[string]time.Time{}})
				for _, id := range c.binds {
					s := esmeAs(t, ln, smpp.BindTransmitter, smpp.Bind{SystemID: id, Password: "pw"}, nil)
					if resp, err := s.Request(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: sm}); err != nil || resp.Status != smpp.StatusOK {
						t.Fatalf("submit as %s: %v, %v", id, resp.Status, err)
					}
				}
				synctest.Wait()
				if n := testutil.CollectAndCount(m.binds); n != 1 {
					t.Errorf("%d series of binds from %d system_ids, want 1", n, len(c.binds))
				}
				if n := testutil.CollectAndCount(m.submits); n != 1 {
					t.Errorf("%d series of submits from %d system_ids, want 1", n, len(c.binds))
				}
				if got := testutil.ToFloat64(m.binds.WithLabelValues(c.want, "bound_tx")); got != float64(len(c.binds)) {
					t.Errorf("binds{account=%q} = %v, want %d", c.want, got, len(c.binds))
				}
				if got := testutil.ToFloat64(m.submits.WithLabelValues(c.want)); got != float64(len(c.binds)) {
					t.Errorf("submits{account=%q} = %v, want %d", c.want, got, len(c.binds))
				}
			})
		})
	}
}

// A submit_sm refused for what it carries uses none of its account's
// submit rate, as a malformed submit on the API uses none: one refused
// after the rate was taken (a bad esm_class, sar_* TLVs, content or SMPP
// time read by the listener; a validity or schedule the node's clock
// refuses) gives its submit back, each part of a long message too. The
// rate still holds for the submits taken. A validity the node refuses
// (passed, past --message-validity) is ESME_RINVEXPIRY, a schedule it
// refuses (not before the message would expire) ESME_RINVSCHED, as an
// unreadable one is: before, both were the generic ESME_RSUBMITFAIL, and
// the ESME could not tell which of its times to change.
func TestRefusedSubmitsDoNotUseTheSubmitRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		creds := auth.NewSet([]messages.Credential{{Name: "acct", Role: messages.RoleClient, TokenHash: auth.Hash("pw"), SMPP: true,
			SubmitRate: 2}}, false)
		b := &backend{creds: creds}
		ln, _ := serve(t, b, &receipts{due: map[string]time.Time{}})
		s := esme(t, ln, smpp.BindTransmitter, nil)
		ctx := context.Background()
		sm := func(text string, edit func(*smpp.SM)) *smpp.SM {
			m := &smpp.SM{Source: smpp.Address{Addr: "S"}, Dest: smpp.Address{Addr: "4477"}, ShortMessage: []byte(text)}
			if edit != nil {
				edit(m)
			}
			return m
		}
		passed := smppTime(time.Now().Add(-time.Hour))
		expired := func(m *smpp.SM) *smpp.SM { m.ValidityPeriod = passed; return m }
		for _, c := range []struct {
			name  string
			parts []*smpp.SM
			want  smpp.Status
		}{
			{"user data header without concatenation", []*smpp.SM{sm("\x04\x05\x02\x0b\x84hi", func(m *smpp.SM) { m.ESMClass = smpp.ESMClassUDHI })},
				smpp.StatusInvalidESMClass},
			{"sar_* out of range", []*smpp.SM{sm("hi", func(m *smpp.SM) {
				m.TLVs = smpp.TLVs{{Tag: smpp.TagSARMsgRefNum, Value: []byte{0, 9}}, {Tag: smpp.TagSARTotalSegments, Value: []byte{2}},
					{Tag: smpp.TagSARSegmentSeqnum, Value: []byte{3}}}
			})}, smpp.StatusInvalidTLVValue},
			{"empty message", []*smpp.SM{sm("", nil)}, smpp.StatusInvalidMsgLen},
			{"odd UCS-2", []*smpp.SM{sm("abc", func(m *smpp.SM) { m.DataCoding = smpp.DCUCS2 })}, smpp.StatusSubmitFailed},
			{"validity_period unreadable", []*smpp.SM{sm("hi", func(m *smpp.SM) { m.ValidityPeriod = "soon" })}, smpp.StatusInvalidExpiry},
			{"validity passed (the node's clock)", []*smpp.SM{expired(sm("hi", nil))}, smpp.StatusInvalidExpiry},
			{"validity past the node's (48h)", []*smpp.SM{sm("hi", func(m *smpp.SM) { m.ValidityPeriod = "000003000000000R" })},
				smpp.StatusInvalidExpiry},
			{"schedule after the validity (the node's checks)", []*smpp.SM{sm("hi", func(m *smpp.SM) {
				m.ScheduleDeliveryTime, m.ValidityPeriod = "000000020000000R", "000000010000000R"
			})}, smpp.StatusInvalidSched},
			{"schedule after the node's validity (48h)", []*smpp.SM{sm("hi", func(m *smpp.SM) { m.ScheduleDeliveryTime = "000003000000000R" })},
				smpp.StatusInvalidSched},
			{"long message whose validity passed", []*smpp.SM{expired(partSM(5, 2, 1, "hello ")), expired(partSM(5, 2, 2, "world"))},
				smpp.StatusInvalidExpiry},
		} {
			calls := make([]*smpp.Call, len(c.parts))
			for i, p := range c.parts {
				var err error
				if calls[i], err = s.Send(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: p}); err != nil {
					t.Fatal(err)
				}
			}
			for i, call := range calls {
				if resp, err := call.Result(); err != nil || resp.Status != c.want {
					t.Errorf("%s (part %d): %v, %v; want %v", c.name, i+1, resp.Status, err, c.want)
				}
			}
		}
		for i, want := range []smpp.Status{smpp.StatusOK, smpp.StatusOK, smpp.StatusThrottled} {
			if resp, err := s.Request(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: sm("hi", nil)}); err != nil || resp.Status != want {
				t.Fatalf("valid submit %d after the refused ones, within the same second: %v, %v; want %v", i+1, resp.Status, err, want)
			}
		}
		if subs := b.submissions(); len(subs) != 2 {
			t.Fatalf("%d submissions stored, want the two valid submits taken", len(subs))
		}
	})
}

// TestLongTextSubunitOfEveryPart: a long text's class asked for by
// dest_addr_subunit is every part's, not its last part's alone (the
// whole message was read with the last part's submit): a flash SMS asked
// for by its parts is stored as one; parts asking for different classes
// (or one reserved) are refused ESME_RINVOPTPARAMVAL and nothing is
// stored. Before, the first stored no class, the others the last
// part's.
func TestLongTextSubunitOfEveryPart(t *testing.T) {
	for _, tc := range []struct {
		name       string
		subunits   [2]byte
		wantClass  int // -1: none stored
		wantStatus [2]smpp.Status
	}{
		{"both parts ask for a flash SMS", [2]byte{1, 1}, 0, [2]smpp.Status{smpp.StatusOK, smpp.StatusOK}},
		{"only the first part asks", [2]byte{1, 0}, -1, [2]smpp.Status{0, smpp.StatusInvalidTLVValue}},
		{"the parts ask for class 0 and class 1", [2]byte{1, 2}, -1, [2]smpp.Status{0, smpp.StatusInvalidTLVValue}},
		{"the first part's subunit is reserved", [2]byte{9, 0}, -1, [2]smpp.Status{smpp.StatusInvalidTLVValue, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &backend{}
				ln, _ := serve(t, b, &receipts{due: map[string]time.Time{}})
				s := esme(t, ln, smpp.BindTransmitter, nil)
				var calls []*smpp.Call
				for i, text := range []string{"hello ", "world"} {
					sm := partSM(7, 2, byte(i+1), text)
					if u := tc.subunits[i]; u != 0 {
						sm.TLVs = sm.TLVs.With(smpp.TagDestAddrSubunit, []byte{u})
					}
					c, err := s.Send(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: sm})
					if err != nil {
						t.Fatal(err)
					}
					calls = append(calls, c)
				}
				var got [2]smpp.Status
				for i, c := range calls {
					resp, err := c.Result()
					if err != nil {
						t.Fatal(err)
					}
					got[i] = resp.Status
				}
				subs := b.submissions()
				switch {
				case tc.wantClass >= 0 && (len(subs) != 1 || subs[0].MessageClass == nil || *subs[0].MessageClass != tc.wantClass):
					t.Errorf("answers %v, stored %+v; want one message of class %d", got, subs, tc.wantClass)
				case tc.wantClass < 0 && len(subs) != 0:
					t.Errorf("answers %v, stored %+v; want nothing stored", got, subs)
				}
				for i, want := range tc.wantStatus {
					if want != 0 && got[i] != want {
						t.Errorf("part %d answered %s, want %s", i+1, got[i], want)
					}
				}
			})
		})
	}
}

// gatedBackend is a backend whose Submit waits for gate (a commit that
// takes a moment).
type gatedBackend struct {
	*backend
	gate chan struct{}
}

func (g gatedBackend) Submit(ctx context.Context, s messages.Submission) (messages.Message, bool, error) {
	<-g.gate
	return g.backend.Submit(ctx, s)
}

// An ESME that sends unbind right behind its last submit_sm (as ESMEs
// do when they stop) gets the submit's answer, with its
// message id, before the unbind_resp: the message is stored, and an ESME
// that saw its submit fail would send it again (a duplicate). While the
// unbind waits, the session takes no receipt: the receipt due then
// stays due for the next bind.
func TestServerAnswersTheSubmitsBeforeAnUnbindBehindThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{}
		g := gatedBackend{backend: b, gate: make(chan struct{})}
		r := &receipts{due: map[string]time.Time{}}
		ln, _ := serve(t, g, r)
		s := esme(t, ln, smpp.BindTransceiver, nil)
		ctx := context.Background()
		call, err := s.Send(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: &smpp.SM{Source: smpp.Address{Addr: "S"},
			Dest: smpp.Address{Addr: "4477"}, ShortMessage: []byte("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the listener has read the submit_sm: its commit waits
		unbound := make(chan error, 1)
		go func() { unbound <- s.Unbind(ctx) }()
		synctest.Wait() // the listener has read the unbind
		r.mu.Lock()
		r.due["r1"] = time.Now()
		r.mu.Unlock()
		time.Sleep(2 * DefaultConfig().ReceiptPoll) // the receipt sender looks for work
		close(g.gate)                               // the commit completes
		uerr := <-unbound
		resp, rerr := call.Result()
		synctest.Wait() // the commit is done, whatever became of its answer
		if n := len(b.submissions()); n != 1 {
			t.Fatalf("%d messages stored, want 1", n)
		}
		if rerr != nil || resp.Status != smpp.StatusOK || resp.Body.(*smpp.SMResp).MessageID != "m1" {
			t.Fatalf("the stored message's submit_sm was answered %v, %v (unbind: %v); want ESME_ROK with its id before the unbind_resp",
				resp.Status, rerr, uerr)
		}
		if uerr != nil {
			t.Fatalf("unbind: %v", uerr)
		}
		if got := r.results(); len(got) != 0 {
			t.Fatalf("receipts sent to the session that unbound: %+v", got)
		}
	})
}

// Whether a long message gets a receipt does not depend on which part
// completes it: the message asks for the strongest receipt any part
// asked for. Its parts must give the same validity_period and
// schedule_delivery_time: a part that differs is refused for it
// (ESME_RINVEXPIRY, ESME_RINVSCHED), and the message is not stored.
func TestServerLongMessageReceiptAskedOnAnyPart(t *testing.T) {
	const final, failure = smpp.RegisteredFinal, smpp.RegisteredFailure
	for _, tc := range []struct {
		name               string
		receipts           [2]byte
		validity, schedule [2]string
		want               [2]smpp.Status
		// The receipt the message stored asks for: to whom ("" none),
		// of a failure only.
		receiptTo  string
		failedOnly bool
	}{
		{name: "the first part asks, the second completes the message", receipts: [2]byte{final, 0},
			want: [2]smpp.Status{smpp.StatusOK, smpp.StatusOK}, receiptTo: "acct"},
		{name: "a failure only, then the final outcome", receipts: [2]byte{failure, final},
			want: [2]smpp.Status{smpp.StatusOK, smpp.StatusOK}, receiptTo: "acct"},
		{name: "the first part asks for a failure only", receipts: [2]byte{failure, 0},
			want: [2]smpp.Status{smpp.StatusOK, smpp.StatusOK}, receiptTo: "acct", failedOnly: true},
		{name: "none asks", want: [2]smpp.Status{smpp.StatusOK, smpp.StatusOK}},
		{name: "a validity on the first part only", validity: [2]string{"000001000000000R", ""},
			want: [2]smpp.Status{smpp.StatusSubmitFailed, smpp.StatusInvalidExpiry}},
		{name: "the parts schedule differently", schedule: [2]string{"000000000500000R", "000000001000000R"},
			want: [2]smpp.Status{smpp.StatusSubmitFailed, smpp.StatusInvalidSched}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &backend{}
				ln, _ := serve(t, b, &receipts{due: map[string]time.Time{}})
				s := esme(t, ln, smpp.BindTransceiver, nil)
				var calls []*smpp.Call
				for i, text := range []string{"hello ", "world"} {
					sm := partSM(3, 2, byte(i+1), text)
					sm.RegisteredDelivery, sm.ValidityPeriod, sm.ScheduleDeliveryTime = tc.receipts[i], tc.validity[i], tc.schedule[i]
					c, err := s.Send(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: sm})
					if err != nil {
						t.Fatal(err)
					}
					calls = append(calls, c)
				}
				for i, c := range calls {
					if resp, err := c.Result(); err != nil || resp.Status != tc.want[i] {
						t.Errorf("part %d: %v, %v; want %v", i+1, resp.Status, err, tc.want[i])
					}
				}
				subs := b.submissions()
				switch {
				case tc.want[1] != smpp.StatusOK:
					if len(subs) != 0 {
						t.Errorf("stored %+v; want nothing", subs)
					}
				case len(subs) != 1 || subs[0].ReceiptTo != tc.receiptTo || subs[0].ReceiptFailedOnly != tc.failedOnly:
					t.Errorf("stored %+v; want one message, receipt_to %q, failed only %v", subs, tc.receiptTo, tc.failedOnly)
				}
			})
		})
	}
}

// An account with a low submit rate sends long texts: an ESME that paces
// its parts at the rate (one a second at 1/s) is never refused by the
// reassembly wait, which runs from the latest part and grows by the
// rate's interval; one that sends the parts at once is not refused by
// the rate for the parts after the first (they go into debt), and its
// next message waits the debt out.
func TestSubmitRateLetsALongTextThrough(t *testing.T) {
	creds := func() *auth.Set {
		return auth.NewSet([]messages.Credential{{Name: "acct", Role: messages.RoleClient, TokenHash: auth.Hash("pw"), SMPP: true,
			SubmitRate: 1}}, false)
	}
	send := func(t *testing.T, s *smpp.Session, sm *smpp.SM) *smpp.Call {
		c, err := s.Send(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: sm})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	answered := func(t *testing.T, c *smpp.Call) smpp.Status {
		resp, err := c.Result()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status
	}
	t.Run("paced at the rate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := &backend{creds: creds()}
			ln, _ := serve(t, b, &receipts{due: map[string]time.Time{}})
			s := esme(t, ln, smpp.BindTransmitter, nil)
			var calls []*smpp.Call
			for seq := byte(1); seq <= 7; seq++ {
				if seq > 1 {
					time.Sleep(time.Second) // the ESME paces at the account's rate
				}
				calls = append(calls, send(t, s, partSM(4, 7, seq, "part ")))
			}
			for i, c := range calls {
				if st := answered(t, c); st != smpp.StatusOK {
					t.Errorf("part %d: %v; want ESME_ROK", i+1, st)
				}
			}
			if n := len(b.submissions()); n != 1 {
				t.Fatalf("%d messages stored, want 1", n)
			}
		})
	})
	t.Run("at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := &backend{creds: creds()}
			ln, _ := serve(t, b, &receipts{due: map[string]time.Time{}})
			s := esme(t, ln, smpp.BindTransmitter, nil)
			var calls []*smpp.Call
			for seq := byte(1); seq <= 7; seq++ {
				calls = append(calls, send(t, s, partSM(5, 7, seq, "part ")))
			}
			for i, c := range calls {
				if st := answered(t, c); st != smpp.StatusOK {
					t.Errorf("part %d: %v; want ESME_ROK", i+1, st)
				}
			}
			start := time.Now()
			short := func(text string) *smpp.SM {
				return &smpp.SM{Source: smpp.Address{Addr: "S"}, Dest: smpp.Address{Addr: "4477"}, ShortMessage: []byte(text)}
			}
			// Seven parts are seven seconds of the rate, six of them in
			// debt: the next message waits for them.
			time.Sleep(6 * time.Second)
			if st := answered(t, send(t, s, short("too soon"))); st != smpp.StatusThrottled {
				t.Fatalf("the next message %v after the text: %v; want ESME_RTHROTTLED", time.Since(start), st)
			}
			time.Sleep(time.Second)
			if st := answered(t, send(t, s, short("in time"))); st != smpp.StatusOK {
				t.Fatalf("the next message %v after the text: %v; want ESME_ROK", time.Since(start), st)
			}
			if n := len(b.submissions()); n != 2 {
				t.Fatalf("%d messages stored, want the text and the message after it", n)
			}
		})
	})
}

// rawESME binds a raw connection over ln as a receiver of acct: the test
// reads and writes its PDUs itself (what no smpp.Session would send).
func rawESME(t *testing.T, ln *pipeListener) net.Conn {
	t.Helper()
	nc := ln.dial()
	t.Cleanup(func() { nc.Close() })
	bind, err := smpp.PDU{Command: smpp.BindReceiver, Seq: 1, Body: &smpp.Bind{SystemID: "acct", Password: "pw",
		InterfaceVersion: smpp.InterfaceVersion34}}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(bind); err != nil {
		t.Fatal(err)
	}
	if p, err := smpp.ReadPDU(nc, 0); err != nil || p.Command != smpp.BindReceiverResp || p.Status != smpp.StatusOK {
		t.Fatalf("bind: %+v %v", p, err)
	}
	return nc
}

// A deliver_sm_resp whose body does not decode (here a message_id without
// its NUL) is the ESME's answer all the same: its command_status stands,
// as the smpp frontend takes such a submit_sm_resp. It was taken for no
// answer, and the receipt sent again at once: an ESME that always
// answers so got the same receipt in a loop without a pause, and never
// had it recorded.
func TestServerTakesAnUndecodableReceiptAnswerAsItsStatus(t *testing.T) {
	for _, c := range []struct {
		status smpp.Status
		want   persistence.Result
	}{
		{smpp.StatusOK, persistence.ResultDelivered},
		{smpp.StatusPermAppError, persistence.ResultFailed},
		{smpp.StatusTempAppError, persistence.ResultRetry},
	} {
		t.Run(c.status.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &receipts{due: map[string]time.Time{"m1": time.Now()}}
				ln, _ := serve(t, &backend{}, r)
				nc := rawESME(t, ln)
				var mu sync.Mutex
				sent := 0
				go func() {
					for {
						p, err := smpp.ReadPDU(nc, 0)
						if err != nil {
							return
						}
						if p.Command != smpp.DeliverSM {
							continue
						}
						mu.Lock()
						sent++
						n := sent
						mu.Unlock()
						if n > 3 {
							continue // the later ones go unanswered: the loop, if any, pauses
						}
						raw := binary.BigEndian.AppendUint32(nil, smpp.HeaderLen+3)
						raw = binary.BigEndian.AppendUint32(raw, uint32(smpp.DeliverSMResp))
						raw = binary.BigEndian.AppendUint32(raw, uint32(c.status))
						raw = binary.BigEndian.AppendUint32(raw, p.Seq)
						if _, err := nc.Write(append(raw, "abc"...)); err != nil {
							return
						}
					}
				}()
				time.Sleep(20 * time.Second) // less than the retry wait of a temporary refusal
				got := r.results()
				mu.Lock()
				defer mu.Unlock()
				if len(got) != 1 || got[0].Result != c.want || sent != 1 {
					t.Fatalf("receipt answered %s with a body that does not decode: sent %d times, outcomes %+v; want it sent once, %s",
						c.status, sent, got, c.want)
				}
			})
		})
	}
}

// failingListener fails its first accepts as a process out of file
// descriptors does (EMFILE), then hands out pipes.
type failingListener struct {
	*pipeListener
	fails atomic.Int32 // the accepts still to fail
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.pipeListener.Accept()
}

// An accept that fails for now (EMFILE, ENFILE: a flood of connections
// used up the file descriptors; a connection aborted before it was
// accepted) is tried again after a pause, as net/http does. It ended
// Serve, and the node takes the end of a listener for fatal: a flood of
// connections, before any bind, stopped the whole node.
func TestServerGoesOnAfterAnAcceptFailedForNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := &failingListener{pipeListener: newPipeListener()}
		ln.fails.Store(20)
		ended := make(chan error, 1)
		log, buf := logtest.New()
		serveOn(t, ln, &backend{}, &receipts{due: map[string]time.Time{}}, ended, func(c *Config) { c.Logger = log })
		time.Sleep(time.Minute)
		select {
		case err := <-ended:
			t.Fatalf("Serve ended after accepts failed with EMFILE: %v", err)
		default:
		}
		if ln.fails.Load() >= 0 {
			t.Fatalf("%d failing accepts not tried", ln.fails.Load()+1)
		}
		// Each failed accept is a line, within the bound of the lines a
		// flood of connections makes: it may last.
		if n := len(buf.Records(t, "smpp connection not accepted")); n != peerLogBurst {
			t.Errorf("20 accepts failed within a minute: %d lines; want %d, then a count", n, peerLogBurst)
		}
		s := esme(t, ln.pipeListener, smpp.BindTransmitter, nil)
		resp, err := s.Request(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: &smpp.SM{Source: smpp.Address{Addr: "S"},
			Dest: smpp.Address{Addr: "4477"}, ShortMessage: []byte("hi")}})
		if err != nil || resp.Status != smpp.StatusOK {
			t.Fatalf("submit_sm after the failed accepts: %v, %v", resp.Status, err)
		}
	})
}

// A refused bind is the last thing its connection is used for: binds
// sent behind it in one write (a client guessing passwords) are not
// checked. The reading goroutine went on reading while the close it had
// started was on its way, and checked the binds already read, several
// guesses a connection where the documentation promises one.
func TestServerChecksOneBindOfARefusedConnection(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{creds: auth.NewSet([]messages.Credential{{Name: "acct", Role: messages.RoleClient, TokenHash: auth.Hash("pw"), SMPP: true}}, false)}
	m := serveOn(t, tcp, b, &receipts{due: map[string]time.Time{}}, nil).cfg.Metrics
	nc, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const guesses = 200
	var burst []byte
	for i := range guesses {
		if burst, err = (smpp.PDU{Command: smpp.BindTransmitter, Seq: uint32(i + 1), Body: &smpp.Bind{SystemID: "acct",
			Password: fmt.Sprintf("g%d", i), InterfaceVersion: smpp.InterfaceVersion34}}).AppendTo(burst); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.Write(burst); err != nil {
		t.Fatal(err)
	}
	// A bound on a broken listener's wait, not a synchronisation: the
	// connection ends on its own.
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	answered := 0
	for {
		p, err := smpp.ReadPDU(nc, 0)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the connection of a refused bind was not closed")
			}
			break
		}
		if p.Command == smpp.BindTransmitterResp && p.Status == smpp.StatusInvalidPassword {
			answered++
		}
	}
	if n := testutil.ToFloat64(m.bindRefused.WithLabelValues(smpp.StatusInvalidPassword.String())); answered != 1 || n != 1 {
		t.Fatalf("%d binds sent in one write on one connection: %d answered ESME_RINVPASWD, %v counted; want one checked",
			guesses, answered, n)
	}
}

// The lines an ESME's input makes are bounded as the API's refusals are:
// each kind at most 10 a minute over all sessions, then a count. A
// client that had not bound wrote a Warn line for each PDU it sent that
// did not decode, and one for each bind refused: as many lines as it
// could send PDUs or open connections.
func TestServerBoundsTheLinesOfWhatESMEsSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, buf := logtest.New()
		ln := newPipeListener()
		b := &backend{creds: auth.NewSet([]messages.Credential{{Name: "acct", Role: messages.RoleClient, TokenHash: auth.Hash("pw"), SMPP: true}}, false)}
		serveOn(t, ln, b, &receipts{due: map[string]time.Time{}}, nil, func(c *Config) { c.Logger = log })
		const n = 100
		nc := ln.dial()
		defer nc.Close()
		for i := range n {
			raw := binary.BigEndian.AppendUint32(nil, smpp.HeaderLen)
			raw = binary.BigEndian.AppendUint32(raw, 0x21) // submit_multi, which the listener does not read
			raw = binary.BigEndian.AppendUint32(raw, 0)
			raw = binary.BigEndian.AppendUint32(raw, uint32(i+1))
			if _, err := nc.Write(raw); err != nil {
				t.Fatal(err)
			}
			if p, err := smpp.ReadPDU(nc, 0); err != nil || p.Command != smpp.GenericNack || p.Status != smpp.StatusInvalidCmdID {
				t.Fatalf("PDU %d: %+v %v", i+1, p, err)
			}
		}
		for range n {
			cfg := smpp.DefaultSessionConfig(smpp.RoleESME)
			cfg.EnquireLink = -1
			s, err := smpp.NewSession(ln.dial(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Bind(context.Background(), smpp.BindTransmitter, smpp.Bind{SystemID: "acct", Password: "guess"}); err == nil {
				t.Fatal("a wrong password bound")
			}
			s.Close()
		}
		time.Sleep(peerLogWindow + time.Second) // the counts are written once their window has passed
		synctest.Wait()
		for _, msg := range []string{"smpp pdu refused", "smpp bind refused"} {
			lines, sums := buf.Records(t, msg), buf.Records(t, msg+": lines not logged one by one")
			if len(lines) != peerLogBurst || len(sums) != 1 || sums[0]["suppressed"] != float64(n-peerLogBurst) {
				t.Errorf("%d of %q: %d lines, counts %v; want %d lines and a count of the %d others",
					n, msg, len(lines), sums, peerLogBurst, n-peerLogBurst)
			}
		}
	})
}

// A stop refuses the parts of long messages still waiting for the rest
// (ESME_RSYSERR: the ESME sends the message again later) before it
// unbinds their sessions, as it answers the submits on their way to the
// intake: nothing of such a message is stored. They were answered only
// after their sessions had been closed: the ESME got the unbind with its
// parts unanswered.
func TestServerStopRefusesThePartsItHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{}
		ln := newPipeListener()
		srv := serveOn(t, ln, b, &receipts{due: map[string]time.Time{}}, nil)
		s := esme(t, ln, smpp.BindTransmitter, nil)
		call, err := s.Send(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: partSM(9, 2, 1, "hello ")})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the part is held
		if err := srv.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		resp, err := call.Result()
		if err != nil || resp.Status != smpp.StatusSystemError {
			t.Fatalf("a part held at the stop: %v, %v; want ESME_RSYSERR before the unbind", resp.Status, err)
		}
		<-s.Done()
		if !errors.Is(s.Err(), smpp.ErrUnbound) {
			t.Errorf("the session ended with %v, want the listener's unbind", s.Err())
		}
		if n := len(b.submissions()); n != 0 {
			t.Errorf("%d messages stored", n)
		}
		if n := testutil.ToFloat64(srv.cfg.Metrics.pending); n != 0 {
			t.Errorf("window_in_use %v after the stop", n)
		}
	})
}

// The refusals of the parts held at a stop go to each session on its
// own: an ESME that does not read (its answers wait for the write
// timeout) holds back its own, not another's. They were written one
// after the other, every ESME behind such a one waiting its 10 s.
func TestServerStopRefusesEachSessionsPartsOnItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		srv := serveOn(t, ln, &backend{}, &receipts{due: map[string]time.Time{}}, nil)
		// A: bound, one part held (ref 1, refused first), then it reads
		// nothing more.
		deaf := ln.dial()
		defer deaf.Close()
		for i, p := range []smpp.PDU{
			{Command: smpp.BindTransmitter, Seq: 1, Body: &smpp.Bind{SystemID: "acct", Password: "pw", InterfaceVersion: smpp.InterfaceVersion34}},
			{Command: smpp.SubmitSM, Seq: 2, Body: partSM(1, 2, 1, "hello ")},
		} {
			raw, err := p.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := deaf.Write(raw); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				if r, err := smpp.ReadPDU(deaf, 0); err != nil || r.Status != smpp.StatusOK {
					t.Fatalf("bind: %+v %v", r, err)
				}
			}
		}
		// B: one part held (ref 2), reading.
		s := esme(t, ln, smpp.BindTransmitter, nil)
		call, err := s.Send(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: partSM(2, 2, 1, "hello ")})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // both parts are held
		start := time.Now()
		go srv.Close(context.Background())
		resp, err := call.Result()
		if err != nil || resp.Status != smpp.StatusSystemError {
			t.Fatalf("B's part at the stop: %v, %v; want ESME_RSYSERR", resp.Status, err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("B's part refused %v into the stop, behind A's answer that A does not read; want at once", waited)
		}
	})
}
