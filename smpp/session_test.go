package smpp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

func TestAllowed(t *testing.T) {
	cases := []struct {
		st   BindState
		from Role
		c    CommandID
		want Status
	}{
		{StateOpen, RoleESME, BindTransceiver, StatusOK},
		{StateOpen, RoleESME, BindReceiver, StatusOK},
		{StateBoundTX, RoleESME, BindTransmitter, StatusAlreadyBound},
		{StateOpen, RoleSMSC, BindTransmitter, StatusInvalidBindState},
		{StateOpen, RoleESME, SubmitSM, StatusInvalidBindState},
		{StateOpen, RoleESME, EnquireLink, StatusOK},
		{StateOpen, RoleESME, Unbind, StatusInvalidBindState},
		{StateBoundTX, RoleESME, SubmitSM, StatusOK},
		{StateBoundTRX, RoleESME, SubmitSM, StatusOK},
		{StateBoundRX, RoleESME, SubmitSM, StatusInvalidBindState},
		{StateBoundTX, RoleESME, QuerySM, StatusOK},
		{StateBoundTX, RoleSMSC, DeliverSM, StatusInvalidBindState},
		{StateBoundRX, RoleSMSC, DeliverSM, StatusOK},
		{StateBoundTRX, RoleSMSC, DeliverSM, StatusOK},
		{StateBoundTRX, RoleESME, DeliverSM, StatusInvalidBindState},
		{StateBoundRX, RoleSMSC, SubmitSM, StatusInvalidBindState},
		{StateBoundTX, RoleESME, DataSM, StatusOK},
		{StateBoundTX, RoleSMSC, DataSM, StatusInvalidBindState},
		{StateBoundRX, RoleSMSC, DataSM, StatusOK},
		{StateBoundTRX, RoleESME, Unbind, StatusOK},
		{StateBoundRX, RoleSMSC, Unbind, StatusOK},
		{StateBoundTRX, RoleESME, CommandID(0x0000_0099), StatusInvalidCmdID},
		{StateClosed, RoleESME, EnquireLink, StatusInvalidBindState},
	}
	for _, c := range cases {
		if got := Allowed(c.st, c.from, c.c); got != c.want {
			t.Errorf("Allowed(%s, %s, %s) = %s, want %s", c.st, c.from, c.c, got, c.want)
		}
	}
}

func TestSessionConfigValidate(t *testing.T) {
	if err := DefaultSessionConfig(RoleESME).Validate(); err != nil {
		t.Fatal(err)
	}
	bad := SessionConfig{EnquireLink: 0, MaxPDULen: 3}
	err := bad.Validate()
	for _, want := range []string{"role", "window", "timeout", "enquire_link", "max PDU"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate of %+v: %v, want it to name %q", bad, err, want)
		}
	}
}

// tcpPair is two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	return client, server
}

func newSession(t *testing.T, c net.Conn, cfg SessionConfig) *Session {
	t.Helper()
	s, err := NewSession(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// smscHandler answers binds (password "pw"), and hands each submit_sm to
// the test through subs.
func smscHandler(subs chan<- PDU) func(s *Session, p PDU) {
	return func(s *Session, p PDU) {
		switch {
		case p.Command.IsBind():
			st := StatusOK
			if p.Body.(*Bind).Password != "pw" {
				st = StatusInvalidPassword
			}
			_ = s.Reply(p, st, &BindResp{SystemID: "smsc"})
		default:
			subs <- p
		}
	}
}

// Both roles over TCP: a bind, a window of submits answered in reverse
// order (each response matched to its request), a deliver_sm the other
// way, and an unbind that ends both sides cleanly.
func TestSessionBothRoles(t *testing.T) {
	cc, sc := tcpPair(t)
	subs := make(chan PDU, 10)
	var states []BindState
	var smu sync.Mutex
	scfg := DefaultSessionConfig(RoleSMSC)
	scfg.Handler = smscHandler(subs)
	smsc := newSession(t, sc, scfg)
	delivered := make(chan PDU, 1)
	ecfg := DefaultSessionConfig(RoleESME)
	ecfg.Window = 4
	ecfg.OnState = func(st BindState) { smu.Lock(); states = append(states, st); smu.Unlock() }
	ecfg.Handler = func(s *Session, p PDU) {
		delivered <- p
		_ = s.Reply(p, StatusOK, &SMResp{})
	}
	esme := newSession(t, cc, ecfg)
	ctx := context.Background()

	if _, err := esme.Bind(ctx, BindTransceiver, Bind{SystemID: "me", Password: "bad"}); !isStatus(err, StatusInvalidPassword) {
		t.Fatalf("bind with a wrong password: %v", err)
	}
	if esme.State() != StateOpen {
		t.Fatalf("state after a refused bind: %s", esme.State())
	}
	br, err := esme.Bind(ctx, BindTransceiver, Bind{SystemID: "me", Password: "pw"})
	if err != nil || br.SystemID != "smsc" || esme.State() != StateBoundTRX || smsc.State() != StateBoundTRX {
		t.Fatalf("bind: %+v %v, states %s %s", br, err, esme.State(), smsc.State())
	}
	if _, err := esme.Bind(ctx, BindTransmitter, Bind{SystemID: "me", Password: "pw"}); !isStatus(err, StatusAlreadyBound) {
		t.Fatalf("second bind: %v", err)
	}

	calls := make([]*Call, 4)
	for i := range calls {
		calls[i], err = esme.Send(ctx, PDU{Command: SubmitSM, Body: &SM{Dest: Address{Addr: fmt.Sprint(i)}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if esme.Outstanding() != 4 {
		t.Fatalf("outstanding %d, want 4", esme.Outstanding())
	}
	got := make([]PDU, 4)
	for i := range got {
		got[i] = <-subs
	}
	for i := len(got) - 1; i >= 0; i-- {
		p := got[i]
		if err := smsc.Reply(p, StatusOK, &SMResp{MessageID: "id-" + p.Body.(*SM).Dest.Addr}); err != nil {
			t.Fatal(err)
		}
	}
	if err := smsc.Reply(got[0], StatusOK, &SMResp{}); err == nil {
		t.Fatal("a second reply to the same request was accepted")
	}
	for i, c := range calls {
		resp, err := c.Result()
		if err != nil || resp.Status != StatusOK || resp.Body.(*SMResp).MessageID != fmt.Sprint("id-", i) {
			t.Fatalf("call %d: %+v %v", i, resp, err)
		}
	}
	polltest.Until(t, 20*time.Second, "the window to empty", func() bool { return esme.Outstanding() == 0 })

	resp, err := smsc.Request(ctx, PDU{Command: DeliverSM, Body: &SM{ESMClass: ESMClassReceipt, ShortMessage: []byte("id:x stat:DELIVRD")}})
	if err != nil || resp.Command != DeliverSMResp || resp.Status != StatusOK {
		t.Fatalf("deliver_sm: %+v %v", resp, err)
	}
	if p := <-delivered; string(p.Body.(*SM).ShortMessage) != "id:x stat:DELIVRD" {
		t.Fatalf("delivered %+v", p.Body)
	}
	if resp, err := esme.Request(ctx, PDU{Command: EnquireLink}); err != nil || resp.Command != EnquireLinkResp {
		t.Fatalf("enquire_link: %+v %v", resp, err)
	}

	if err := esme.Unbind(ctx); err != nil {
		t.Fatal(err)
	}
	<-esme.Done()
	<-smsc.Done()
	if esme.Err() != nil || !errors.Is(smsc.Err(), ErrUnbound) {
		t.Fatalf("ends: esme %v, smsc %v", esme.Err(), smsc.Err())
	}
	if _, err := esme.Send(ctx, PDU{Command: SubmitSM, Body: &SM{}}); err == nil {
		t.Fatal("a send after the end was accepted")
	}
	smu.Lock()
	defer smu.Unlock()
	if fmt.Sprint(states) != "[bound_trx closed]" {
		t.Fatalf("states %v", states)
	}
}

func isStatus(err error, st Status) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == st
}

// rawPeer is the other end of a session as bytes: the test writes PDUs
// and reads what the session writes.
type rawPeer struct {
	t  *testing.T
	c  net.Conn
	in chan PDU // what the session wrote, read on a goroutine of its own
}

func newRawPeer(t *testing.T, c net.Conn) rawPeer {
	r := rawPeer{t: t, c: c, in: make(chan PDU, 100)}
	go func() {
		defer close(r.in)
		for {
			p, err := ReadPDU(c, 0)
			if err != nil {
				return
			}
			r.in <- p
		}
	}()
	return r
}

func (r rawPeer) send(p PDU) {
	r.t.Helper()
	b, err := p.Marshal()
	if err != nil {
		r.t.Fatal(err)
	}
	r.sendRaw(b)
}

func (r rawPeer) sendRaw(b []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r rawPeer) read() PDU {
	r.t.Helper()
	p, ok := <-r.in
	if !ok {
		r.t.Fatal("the connection ended")
	}
	return p
}

func (r rawPeer) expect(c CommandID, st Status, seq uint32) PDU {
	r.t.Helper()
	p := r.read()
	if p.Command != c || p.Status != st || p.Seq != seq {
		r.t.Fatalf("got %s %s #%d, want %s %s #%d", p.Command, p.Status, p.Seq, c, st, seq)
	}
	return p
}

// An SMSC session refuses what a peer may not send: a submit before the
// bind, an unknown command, a malformed body, a request over its
// in-window; an oversize command_length ends it. Nothing reaches the
// handler but what is allowed.
func TestSessionRefusals(t *testing.T) {
	cc, sc := tcpPair(t)
	subs := make(chan PDU, 10)
	cfg := DefaultSessionConfig(RoleSMSC)
	cfg.InWindow = 2
	cfg.Handler = smscHandler(subs)
	smsc := newSession(t, sc, cfg)
	peer := newRawPeer(t, cc)
	_ = cc.SetDeadline(time.Now().Add(20 * time.Second))

	peer.send(PDU{Command: SubmitSM, Seq: 1, Body: &SM{}})
	peer.expect(SubmitSMResp, StatusInvalidBindState, 1)
	peer.send(PDU{Command: Unbind, Seq: 2})
	peer.expect(UnbindResp, StatusInvalidBindState, 2)
	peer.send(PDU{Command: EnquireLink, Seq: 3})
	peer.expect(EnquireLinkResp, StatusOK, 3)
	unknown := make([]byte, 16)
	binary.BigEndian.PutUint32(unknown, 16)
	binary.BigEndian.PutUint32(unknown[4:], 0x00000777)
	binary.BigEndian.PutUint32(unknown[12:], 4)
	peer.sendRaw(unknown)
	peer.expect(GenericNack, StatusInvalidCmdID, 4)
	// A bind whose system_id has no NUL within its 16 octets.
	badBind := []byte{0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 5}
	badBind = append(badBind, []byte("abcdefghijklmnopqrstuvwxyz")...)
	binary.BigEndian.PutUint32(badBind, uint32(len(badBind)))
	peer.sendRaw(badBind)
	peer.expect(BindTransceiverResp, StatusInvalidParamLen, 5)
	peer.send(PDU{Command: BindTransmitter, Seq: 6, Body: &Bind{SystemID: "me", Password: "pw"}})
	peer.expect(BindTransmitterResp, StatusOK, 6)
	peer.send(PDU{Command: BindTransmitter, Seq: 7, Body: &Bind{SystemID: "me", Password: "pw"}})
	peer.expect(BindTransmitterResp, StatusAlreadyBound, 7)
	// The handler holds two submits unanswered: the third is throttled.
	for seq := uint32(8); seq <= 10; seq++ {
		peer.send(PDU{Command: SubmitSM, Seq: seq, Body: &SM{}})
	}
	peer.expect(SubmitSMResp, StatusThrottled, 10)
	if len(subs) != 2 {
		t.Fatalf("%d submits reached the handler, want 2", len(subs))
	}
	_ = smsc.Reply(<-subs, StatusOK, &SMResp{MessageID: "a"})
	peer.expect(SubmitSMResp, StatusOK, 8)
	// A transmitter is not delivered to: the SMSC may not send deliver_sm.
	if _, err := smsc.Send(context.Background(), PDU{Command: DeliverSM, Body: &SM{}}); !isStatus(err, StatusInvalidBindState) {
		t.Fatalf("deliver_sm to a transmitter: %v", err)
	}
	// An oversize command_length: generic_nack, and the session ends.
	huge := make([]byte, 16)
	binary.BigEndian.PutUint32(huge, DefaultMaxLen+1)
	binary.BigEndian.PutUint32(huge[4:], uint32(SubmitSM))
	binary.BigEndian.PutUint32(huge[12:], 11)
	peer.sendRaw(huge)
	peer.expect(GenericNack, StatusInvalidCmdLen, 11)
	<-smsc.Done()
	var de *DecodeError
	if !errors.As(smsc.Err(), &de) || smsc.State() != StateClosed {
		t.Fatalf("end: %v, state %s", smsc.Err(), smsc.State())
	}
	if len(subs) != 1 {
		t.Fatalf("%d submits left, want 1", len(subs))
	}
}

// A Handler that panics on a peer's request (a malformed PDU meeting a
// bug of ours) does not take the process down: the panic is logged with
// its stack, the request is answered ESME_RSYSERR, and the session goes
// on reading and handing on the next requests.
func TestSessionHandlerPanicIsAnsweredAndTheSessionGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := make(chan PDU, 10)
		logger, logs := logtest.New()
		cfg := DefaultSessionConfig(RoleSMSC)
		cfg.EnquireLink = -1
		cfg.Logger = logger
		answer := smscHandler(subs)
		cfg.Handler = func(s *Session, p PDU) {
			if sm, ok := p.Body.(*SM); ok && string(sm.ShortMessage) == "boom" {
				var m map[string]int
				m["boom"]++ // a nil map: panics
			}
			answer(s, p)
		}
		s, peer := pipeSession(t, cfg)
		peer.send(PDU{Command: BindTransmitter, Seq: 1, Body: &Bind{SystemID: "me", Password: "pw"}})
		peer.expect(BindTransmitterResp, StatusOK, 1)
		peer.send(PDU{Command: SubmitSM, Seq: 2, Body: &SM{ShortMessage: []byte("boom")}})
		peer.expect(SubmitSMResp, StatusSystemError, 2)
		if l := logs.String(); !strings.Contains(l, "smpp handler panicked") || !strings.Contains(l, "assignment to entry in nil map") ||
			!strings.Contains(l, "session_test.go") {
			t.Errorf("the log does not tell the panic and its stack:\n%s", l)
		}
		// The session goes on: the next submit reaches the handler and
		// its answer goes out; enquire_link is answered.
		peer.send(PDU{Command: SubmitSM, Seq: 3, Body: &SM{ShortMessage: []byte("fine")}})
		if err := s.Reply(<-subs, StatusOK, &SMResp{MessageID: "m3"}); err != nil {
			t.Fatal(err)
		}
		peer.expect(SubmitSMResp, StatusOK, 3)
		peer.send(PDU{Command: EnquireLink, Seq: 4})
		peer.expect(EnquireLinkResp, StatusOK, 4)
		select {
		case <-s.Done():
			t.Fatalf("the session ended: %v", s.Err())
		default:
		}
		if s.State() != StateBoundTX {
			t.Fatalf("state %s, want bound_tx", s.State())
		}
	})
}

// boundTCPTransmitter is an ESME session over loopback TCP, bound as a
// transmitter: the raw peer (its connection's deadline 20 s ahead) has
// answered the bind and the bind has returned.
func boundTCPTransmitter(t *testing.T) (*Session, rawPeer) {
	t.Helper()
	cc, sc := tcpPair(t)
	esme := newSession(t, cc, DefaultSessionConfig(RoleESME))
	peer := newRawPeer(t, sc)
	_ = sc.SetDeadline(time.Now().Add(20 * time.Second))
	bound := make(chan error, 1)
	go func() {
		_, err := esme.Bind(context.Background(), BindTransmitter, Bind{SystemID: "me", Password: "pw"})
		bound <- err
	}()
	b := peer.read()
	peer.send(PDU{Command: BindTransmitterResp, Seq: b.Seq, Body: &BindResp{SystemID: "x"}})
	if err := <-bound; err != nil {
		t.Fatal(err)
	}
	return esme, peer
}

// An ESME session matches a generic_nack to its request, and fails what
// is pending when the link breaks.
func TestSessionNackAndBreak(t *testing.T) {
	esme, peer := boundTCPTransmitter(t)
	ctx := context.Background()
	c1, _ := esme.Send(ctx, PDU{Command: SubmitSM, Body: &SM{}})
	c2, _ := esme.Send(ctx, PDU{Command: SubmitSM, Body: &SM{}})
	s1, s2 := peer.read(), peer.read()
	// A response to a request never sent is dropped.
	peer.send(PDU{Command: SubmitSMResp, Seq: 999, Body: &SMResp{MessageID: "stray"}})
	peer.send(PDU{Command: GenericNack, Status: StatusInvalidCmdLen, Seq: s1.Seq})
	if resp, err := c1.Result(); err != nil || resp.Command != GenericNack || resp.Status != StatusInvalidCmdLen {
		t.Fatalf("nacked call: %+v %v", resp, err)
	}
	// A deliver_sm to a transmitter is refused without a handler.
	peer.send(PDU{Command: DeliverSM, Seq: 5, Body: &SM{}})
	peer.expect(DeliverSMResp, StatusInvalidBindState, 5)
	_ = s2
	_ = peer.c.Close()
	if _, err := c2.Result(); !errors.Is(err, ErrClosed) {
		t.Fatalf("pending call after the break: %v", err)
	}
	<-esme.Done()
	if esme.Err() == nil || esme.Outstanding() != 0 {
		t.Fatalf("end %v, outstanding %d", esme.Err(), esme.Outstanding())
	}
}

// pipeSession is a session of role r on one end of a net.Pipe (inside a
// synctest bubble, where its timers run on the bubble's clock).
func pipeSession(t *testing.T, cfg SessionConfig) (*Session, rawPeer) {
	a, b := net.Pipe()
	s, err := NewSession(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(); _ = b.Close() })
	return s, newRawPeer(t, b)
}

// boundPipeSession is pipeSession bound as a transceiver: the peer has
// answered the bind and the session has taken the answer (call it inside
// the synctest bubble).
func boundPipeSession(t *testing.T, cfg SessionConfig) (*Session, rawPeer) {
	s, peer := pipeSession(t, cfg)
	go func() { _, _ = s.Bind(context.Background(), BindTransceiver, Bind{SystemID: "me"}) }()
	b := peer.read()
	peer.send(PDU{Command: BindTransceiverResp, Seq: b.Seq, Body: &BindResp{}})
	synctest.Wait()
	return s, peer
}

// The window: a Send beyond it waits until a response frees a slot; a
// request without a response fails with ErrTimeout and frees its slot.
func TestSessionWindowAndTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultSessionConfig(RoleESME)
		cfg.Window = 2
		cfg.EnquireLink = -1
		s, peer := boundPipeSession(t, cfg)
		ctx := context.Background()
		start := time.Now()
		c1, err := s.Send(ctx, PDU{Command: SubmitSM, Body: &SM{}})
		if err != nil {
			t.Fatal(err)
		}
		r1 := peer.read()
		c2, _ := s.Send(ctx, PDU{Command: SubmitSM, Body: &SM{}})
		peer.read()
		third := make(chan *Call, 1)
		go func() {
			c, _ := s.Send(ctx, PDU{Command: SubmitSM, Body: &SM{}})
			third <- c
		}()
		synctest.Wait()
		if len(third) != 0 || s.Outstanding() != 2 {
			t.Fatalf("a third send went through a window of 2 (outstanding %d)", s.Outstanding())
		}
		peer.send(PDU{Command: SubmitSMResp, Seq: r1.Seq, Body: &SMResp{MessageID: "1"}})
		peer.read() // the third submit
		c3 := <-third
		if resp, err := c1.Result(); err != nil || resp.Body.(*SMResp).MessageID != "1" {
			t.Fatalf("c1: %+v %v", resp, err)
		}
		if _, err := c2.Result(); !errors.Is(err, ErrTimeout) {
			t.Fatalf("c2: %v", err)
		}
		if waited := time.Since(start); waited != cfg.ResponseTimeout {
			t.Fatalf("c2 failed after %v, want the response timeout %v", waited, cfg.ResponseTimeout)
		}
		if _, err := c3.Result(); !errors.Is(err, ErrTimeout) {
			t.Fatalf("c3: %v", err)
		}
		if s.Outstanding() != 0 || s.State() != StateBoundTRX {
			t.Fatalf("outstanding %d, state %s", s.Outstanding(), s.State())
		}
	})
}

// A session that ends is closed before its pending calls fail: whoever
// sees a call fail with ErrClosed (the delivery worker deciding whether to
// hold its claims until the next bind) sees the session closed, not still
// bound. OnState runs where the state changes, so it tells the order.
func TestSessionIsClosedBeforeItsCallsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultSessionConfig(RoleESME)
		cfg.EnquireLink = -1
		var pending atomic.Pointer[Call]
		doneAtClose := make(chan bool, 1)
		cfg.OnState = func(st BindState) {
			if c := pending.Load(); st == StateClosed && c != nil {
				select {
				case <-c.Done():
					doneAtClose <- true
				default:
					doneAtClose <- false
				}
			}
		}
		s, peer := boundPipeSession(t, cfg)
		ctx := context.Background()
		c, err := s.Send(ctx, PDU{Command: SubmitSM, Body: &SM{}})
		if err != nil {
			t.Fatal(err)
		}
		pending.Store(c)
		peer.read()
		_ = peer.c.Close() // the SMSC goes away with the submit unanswered
		if _, err := c.Result(); !errors.Is(err, ErrClosed) {
			t.Fatalf("the pending submit ended with %v, want ErrClosed", err)
		}
		if s.State() != StateClosed {
			t.Fatalf("state %s after a call failed with ErrClosed", s.State())
		}
		if <-doneAtClose {
			t.Fatal("the pending call had failed before the session was closed")
		}
	})
}

// The keepalive: an enquire_link after the interval of silence, none
// while PDUs come, and an unanswered one ends the session.
func TestSessionKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultSessionConfig(RoleESME)
		s, peer := pipeSession(t, cfg)
		start := time.Now()
		el := peer.read()
		if el.Command != EnquireLink || time.Since(start) != cfg.EnquireLink {
			t.Fatalf("%s after %v, want enquire_link after %v", el.Command, time.Since(start), cfg.EnquireLink)
		}
		peer.send(PDU{Command: EnquireLinkResp, Seq: el.Seq})
		// The peer's own enquire_link 20 s later is read: the next one of
		// ours waits for 30 s of silence after it.
		time.Sleep(20 * time.Second)
		peer.send(PDU{Command: EnquireLink, Seq: 77})
		peer.expect(EnquireLinkResp, StatusOK, 77)
		mark := time.Now()
		el = peer.read()
		if time.Since(mark) != cfg.EnquireLink {
			t.Fatalf("second enquire_link %v after the last read, want %v", time.Since(mark), cfg.EnquireLink)
		}
		// Unanswered: the session ends after the response timeout.
		<-s.Done()
		if s.Err() == nil || time.Since(mark) != cfg.EnquireLink+cfg.ResponseTimeout {
			t.Fatalf("end after %v: %v", time.Since(mark), s.Err())
		}
	})
}

// Close fails the pending calls with ErrClosed and leaves no goroutine.
func TestSessionClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultSessionConfig(RoleSMSC)
		cfg.Handler = smscHandler(make(chan PDU, 1))
		s, peer := pipeSession(t, cfg)
		peer.send(PDU{Command: BindReceiver, Seq: 1, Body: &Bind{SystemID: "r", Password: "pw"}})
		peer.expect(BindReceiverResp, StatusOK, 1)
		c, err := s.Send(context.Background(), PDU{Command: DeliverSM, Body: &SM{}})
		if err != nil {
			t.Fatal(err)
		}
		peer.read()
		_ = s.Close()
		if _, err := c.Result(); !errors.Is(err, ErrClosed) {
			t.Fatalf("pending call: %v", err)
		}
		if s.Err() != nil || s.State() != StateClosed {
			t.Fatalf("after Close: %v %s", s.Err(), s.State())
		}
	})
}

// A response whose body cannot be decoded still ends its request, with
// its header (command_id, command_status, sequence_number: what the peer
// answered) and the *DecodeError; the session goes on.
func TestSessionUndecodableResponseKeepsItsHeader(t *testing.T) {
	esme, peer := boundTCPTransmitter(t)
	ctx := context.Background()
	for _, st := range []Status{StatusOK, StatusThrottled} {
		c, err := esme.Send(ctx, PDU{Command: SubmitSM, Body: &SM{}})
		if err != nil {
			t.Fatal(err)
		}
		s := peer.read()
		raw := binary.BigEndian.AppendUint32(nil, 16+6)
		raw = binary.BigEndian.AppendUint32(raw, uint32(SubmitSMResp))
		raw = binary.BigEndian.AppendUint32(raw, uint32(st))
		raw = binary.BigEndian.AppendUint32(raw, s.Seq)
		peer.sendRaw(append(raw, "abc123"...)) // a message_id without its NUL
		resp, err := c.Result()
		var de *DecodeError
		if !errors.As(err, &de) || resp.Command != SubmitSMResp || resp.Status != st || resp.Seq != s.Seq || resp.Body != nil {
			t.Fatalf("%s: %+v %v", st, resp, err)
		}
	}
	if esme.State() != StateBoundTX || esme.Outstanding() != 0 {
		t.Fatalf("state %s, %d outstanding", esme.State(), esme.Outstanding())
	}
}

// A response that cannot be decoded ends its request only when it is
// that request's response (or a generic_nack), as a decoded one does: a
// response of another command, one this codec does not know included
// (0x80000099), is dropped, and the request waits for its own. It ended
// the request with the stray header: the listener's receipt sender took
// it for no answer and sent the receipt again at once, to be answered the
// same way, in a loop.
func TestSessionUndecodableResponseOfAnotherCommandIsDropped(t *testing.T) {
	esme, peer := boundTCPTransmitter(t)
	c, err := esme.Send(context.Background(), PDU{Command: SubmitSM, Body: &SM{}})
	if err != nil {
		t.Fatal(err)
	}
	s := peer.read()
	for _, cmd := range []CommandID{0x80000099, DeliverSMResp} {
		raw := binary.BigEndian.AppendUint32(nil, 16+3)
		raw = binary.BigEndian.AppendUint32(raw, uint32(cmd))
		raw = binary.BigEndian.AppendUint32(raw, uint32(StatusOK))
		raw = binary.BigEndian.AppendUint32(raw, s.Seq)
		peer.sendRaw(append(raw, "abc"...)) // no NUL: does not decode
	}
	peer.send(PDU{Command: SubmitSMResp, Status: StatusThrottled, Seq: s.Seq})
	if resp, err := c.Result(); err != nil || resp.Command != SubmitSMResp || resp.Status != StatusThrottled {
		t.Fatalf("the submit_sm after two stray responses of its sequence number: %+v %v; want its own submit_sm_resp", resp, err)
	}
}

// boundTransmitter is an SMSC-side session (no enquire_link) whose peer
// has bound as a transmitter (sequence 1); its submits go to subs.
func boundTransmitter(t *testing.T, subs chan<- PDU) (*Session, rawPeer, SessionConfig) {
	t.Helper()
	cfg := DefaultSessionConfig(RoleSMSC)
	cfg.EnquireLink = -1
	cfg.Handler = smscHandler(subs)
	s, peer := pipeSession(t, cfg)
	peer.send(PDU{Command: BindTransmitter, Seq: 1, Body: &Bind{SystemID: "me", Password: "pw"}})
	peer.expect(BindTransmitterResp, StatusOK, 1)
	return s, peer, cfg
}

// The peer's unbind right behind its submits (an ESME that stops) waits
// for their answers: a request sent meanwhile is refused ESME_RINVBNDSTS,
// each submit is answered as its Reply comes, and only then is the
// unbind answered and the session ended.
func TestSessionPeerUnbindWaitsForTheAnswersOwed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := make(chan PDU, 10)
		s, peer, _ := boundTransmitter(t, subs)
		peer.send(PDU{Command: SubmitSM, Seq: 2, Body: &SM{}})
		peer.send(PDU{Command: SubmitSM, Seq: 3, Body: &SM{}})
		peer.send(PDU{Command: Unbind, Seq: 4})
		peer.send(PDU{Command: SubmitSM, Seq: 5, Body: &SM{}})
		peer.expect(SubmitSMResp, StatusInvalidBindState, 5)
		if s.State() != StateClosed {
			t.Fatalf("state %s while the unbind waits, want closed", s.State())
		}
		if _, err := s.Send(context.Background(), PDU{Command: EnquireLink}); !isStatus(err, StatusInvalidBindState) {
			t.Fatalf("a request of ours after the peer's unbind: %v", err)
		}
		first, second := <-subs, <-subs
		if err := s.Reply(second, StatusOK, &SMResp{MessageID: "m3"}); err != nil {
			t.Fatal(err)
		}
		peer.expect(SubmitSMResp, StatusOK, 3)
		synctest.Wait()
		if len(peer.in) != 0 {
			t.Fatalf("%s written while a submit awaits its answer", (<-peer.in).Command)
		}
		if err := s.Reply(first, StatusOK, &SMResp{MessageID: "m2"}); err != nil {
			t.Fatal(err)
		}
		if resp := peer.expect(SubmitSMResp, StatusOK, 2); resp.Body.(*SMResp).MessageID != "m2" {
			t.Fatalf("message id %q", resp.Body.(*SMResp).MessageID)
		}
		peer.expect(UnbindResp, StatusOK, 4)
		<-s.Done()
		if !errors.Is(s.Err(), ErrUnbound) {
			t.Fatalf("end: %v", s.Err())
		}
	})
}

// The peer's unbind waits at most the ResponseTimeout for the answers it
// is owed: then it is answered and the session ends without them.
func TestSessionPeerUnbindWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := make(chan PDU, 10)
		s, peer, cfg := boundTransmitter(t, subs)
		peer.send(PDU{Command: SubmitSM, Seq: 2, Body: &SM{}})
		sub := <-subs
		peer.send(PDU{Command: Unbind, Seq: 3})
		mark := time.Now()
		peer.expect(UnbindResp, StatusOK, 3)
		if waited := time.Since(mark); waited != cfg.ResponseTimeout {
			t.Fatalf("the unbind was answered after %v, want the response timeout %v", waited, cfg.ResponseTimeout)
		}
		<-s.Done()
		if !errors.Is(s.Err(), ErrUnbound) {
			t.Fatalf("end: %v", s.Err())
		}
		if err := s.Reply(sub, StatusOK, &SMResp{MessageID: "late"}); !errors.Is(err, ErrClosed) {
			t.Fatalf("a late answer: %v", err)
		}
	})
}
