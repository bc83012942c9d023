// Package smsctest is an SMSC for tests of the smpp frontend, built on
// smpp.Session in its SMSC role: it takes binds, answers each submit_sm
// as the test says (at once, or held until the test releases it), keeps
// what it was sent, and sends delivery receipts. Test-only.
package smsctest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/smpp"
)

// Submit is one submit_sm the SMSC read.
type Submit struct {
	// N numbers the submits from 1, across connections.
	N  int
	SM *smpp.SM
	// ID is the message id it answered with (when it answered OK).
	ID     string
	Status smpp.Status
	// Answered is false while the response is held.
	Answered bool
	// Conn numbers the connection it came on, from 1.
	Conn int
}

// SMSC is a test's SMSC on 127.0.0.1.
type SMSC struct {
	t *testing.T
	l net.Listener
	// Addr is host:port.
	Addr string
	// Password is what a bind must carry (SystemID is not checked); see
	// SetPassword.
	Password string

	mu      sync.Mutex
	answer  func(s Submit) (smpp.Status, bool)
	submits []Submit
	held    []held
	conns   []*smpp.Session
	binds   int
	refused int
	wg      sync.WaitGroup
}

type held struct {
	n    int
	sess *smpp.Session
	req  smpp.PDU
}

// New starts an SMSC whose binds need password. answer decides each
// submit's command_status and whether its response is held (nil: ESME_ROK
// at once).
func New(t *testing.T, password string, answer func(s Submit) (st smpp.Status, hold bool)) *SMSC {
	t.Helper()
	return NewTLS(t, password, answer, nil)
}

// NewTLS is New over TLS with cfg (nil: plain TCP).
func NewTLS(t *testing.T, password string, answer func(s Submit) (st smpp.Status, hold bool), cfg *tls.Config) *SMSC {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		l = tls.NewListener(l, cfg)
	}
	s := &SMSC{t: t, l: l, Addr: l.Addr().String(), Password: password, answer: answer}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// SetPassword changes the password binds need from now on.
func (s *SMSC) SetPassword(pw string) {
	s.mu.Lock()
	s.Password = pw
	s.mu.Unlock()
}

// SetAnswer replaces the answer function.
func (s *SMSC) SetAnswer(answer func(s Submit) (smpp.Status, bool)) {
	s.mu.Lock()
	s.answer = answer
	s.mu.Unlock()
}

func (s *SMSC) accept() {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		cfg := smpp.DefaultSessionConfig(smpp.RoleSMSC)
		// 1000 each way: the ESME's window is what a test checks, and a
		// test sends as many receipts in flight as it needs (Send).
		cfg.Window, cfg.InWindow = 1000, 1000
		s.mu.Lock()
		conn := len(s.conns) + 1
		cfg.Handler = func(sess *smpp.Session, p smpp.PDU) { s.handle(sess, conn, p) }
		sess, err := smpp.NewSession(c, cfg)
		if err != nil {
			s.mu.Unlock()
			_ = c.Close()
			continue
		}
		s.conns = append(s.conns, sess)
		s.mu.Unlock()
	}
}

func (s *SMSC) handle(sess *smpp.Session, conn int, p smpp.PDU) {
	switch {
	case p.Command.IsBind():
		s.mu.Lock()
		st := smpp.StatusOK
		if p.Body.(*smpp.Bind).Password != s.Password {
			st = smpp.StatusInvalidPassword
			s.refused++
		} else {
			s.binds++
		}
		s.mu.Unlock()
		_ = sess.Reply(p, st, &smpp.BindResp{SystemID: "testsmsc"})
	case p.Command == smpp.SubmitSM:
		s.mu.Lock()
		sub := Submit{N: len(s.submits) + 1, SM: p.Body.(*smpp.SM), Conn: conn}
		st, hold := smpp.StatusOK, false
		if s.answer != nil {
			st, hold = s.answer(sub)
		}
		sub.Status = st
		if st == smpp.StatusOK {
			sub.ID = fmt.Sprintf("smsc-%d", sub.N)
		}
		sub.Answered = !hold
		s.submits = append(s.submits, sub)
		if hold {
			s.held = append(s.held, held{n: sub.N, sess: sess, req: p})
		}
		s.mu.Unlock()
		if !hold {
			s.reply(sess, p, sub)
		}
	default:
		_ = sess.Reply(p, smpp.StatusInvalidCmdID, nil)
	}
}

func (s *SMSC) reply(sess *smpp.Session, p smpp.PDU, sub Submit) {
	var body smpp.Body
	if sub.Status == smpp.StatusOK {
		body = &smpp.SMResp{MessageID: sub.ID}
	}
	_ = sess.Reply(p, sub.Status, body)
}

// Release answers the held submits (on their connection, if it is still
// up) and returns how many it answered.
func (s *SMSC) Release() int {
	s.mu.Lock()
	hs := s.held
	s.held = nil
	var subs []Submit
	for _, h := range hs {
		s.submits[h.n-1].Answered = true
		subs = append(subs, s.submits[h.n-1])
	}
	s.mu.Unlock()
	n := 0
	for i, h := range hs {
		if h.sess.Reply(h.req, subs[i].Status, body(subs[i])) == nil {
			n++
		}
	}
	return n
}

func body(sub Submit) smpp.Body {
	if sub.Status == smpp.StatusOK {
		return &smpp.SMResp{MessageID: sub.ID}
	}
	return nil
}

// Submits are the submit_sm read so far, in order.
func (s *SMSC) Submits() []Submit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Submit(nil), s.submits...)
}

// Binds counts the binds taken, and those refused.
func (s *SMSC) Binds() (taken, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.binds, s.refused
}

// Bound reports whether a connection is bound now.
func (s *SMSC) Bound() bool { return s.bound() != nil }

func (s *SMSC) bound() *smpp.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.conns) - 1; i >= 0; i-- {
		if s.conns[i].State().Bound() {
			return s.conns[i]
		}
	}
	return nil
}

// BoundConns are the numbers of the connections bound now (see
// Submit.Conn), in order.
func (s *SMSC) BoundConns() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for i, c := range s.conns {
		if c.State().Bound() {
			out = append(out, i+1)
		}
	}
	return out
}

// Receipt sends a delivery receipt for SMSC message id with stat on the
// bound connection (the latest bound; as SMSCs do: the
// receipted_message_id and message_state TLVs and the Appendix B text)
// and returns the ESME's command_status.
func (s *SMSC) Receipt(id, stat string) (smpp.Status, error) {
	sess := s.bound()
	if sess == nil {
		return 0, fmt.Errorf("no bound connection")
	}
	return receipt(sess, id, stat)
}

// ReceiptOn is Receipt on connection conn (numbered from 1, see
// Submit.Conn), which must be bound: an SMSC hands a receipt to any bound
// session of the account.
func (s *SMSC) ReceiptOn(conn int, id, stat string) (smpp.Status, error) {
	s.mu.Lock()
	var sess *smpp.Session
	if conn >= 1 && conn <= len(s.conns) {
		sess = s.conns[conn-1]
	}
	s.mu.Unlock()
	if sess == nil || !sess.State().Bound() {
		return 0, fmt.Errorf("connection %d is not bound", conn)
	}
	return receipt(sess, id, stat)
}

// Send sends request p on the bound connection (the latest bound) and
// returns at once with its call (Result waits for the ESME's response):
// for a request the test writes itself, such as a receipt in a data_sm,
// or a burst of receipts in flight together.
func (s *SMSC) Send(ctx context.Context, p smpp.PDU) (*smpp.Call, error) {
	sess := s.bound()
	if sess == nil {
		return nil, fmt.Errorf("no bound connection")
	}
	return sess.Send(ctx, p)
}

// receipt sends the receipt for id with stat on sess.
func receipt(sess *smpp.Session, id, stat string) (smpp.Status, error) {
	state, ok := smpp.StateOfStat(stat)
	if !ok {
		return 0, fmt.Errorf("unknown stat %q", stat)
	}
	now := time.Now()
	text := smpp.Receipt{ID: id, Submitted: 1, Delivered: 1, SubmitDate: now, DoneDate: now, Stat: stat, Err: "000"}.String()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := sess.Request(ctx, smpp.PDU{Command: smpp.DeliverSM, Body: &smpp.SM{ESMClass: smpp.ESMClassReceipt,
		ShortMessage: []byte(text), TLVs: smpp.TLVs{{Tag: smpp.TagReceiptedMessageID, Value: smpp.CStringValue(id)},
			{Tag: smpp.TagMessageState, Value: []byte{byte(state)}}}}})
	return resp.Status, err
}

// DropAll closes every connection (the link is lost); new ones are still
// accepted.
func (s *SMSC) DropAll() {
	s.mu.Lock()
	conns := append([]*smpp.Session(nil), s.conns...)
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Close stops the SMSC: no new connections, every one closed.
func (s *SMSC) Close() {
	_ = s.l.Close()
	s.wg.Wait()
	s.DropAll()
}
