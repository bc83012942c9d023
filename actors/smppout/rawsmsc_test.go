package smppout

import (
	"net"
	"sync"
	"testing"

	"github.com/switchboard-dev/switchboard/smpp"
)

// rawSMSC is a hand-written SMSC on raw PDUs, for what smsctest (a
// well-behaved SMSC on smpp.Session) cannot do: it answers binds ESME_ROK
// and enquire_link; dropAfterBind closes each connection right after its
// bind_resp; answerUnbind answers unbind (else it is ignored); submit,
// when set, writes the answer to a submit_sm as raw bytes (else none).
type rawSMSC struct {
	Addr string

	dropAfterBind bool
	answerUnbind  bool
	submit        func(req smpp.PDU) []byte

	l       net.Listener
	mu      sync.Mutex
	binds   int
	submits int
	conns   []net.Conn
}

// newRawSMSC starts r on 127.0.0.1; the test's cleanup stops it.
func newRawSMSC(t *testing.T, r *rawSMSC) *rawSMSC {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.l, r.Addr = l, l.Addr().String()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns = append(r.conns, c)
			r.mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); r.serve(c) }()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			_ = c.Close()
		}
		r.mu.Unlock()
		wg.Wait()
	})
	return r
}

func (r *rawSMSC) write(c net.Conn, p smpp.PDU) {
	b, err := p.Marshal()
	if err != nil {
		panic(err)
	}
	_, _ = c.Write(b)
}

func (r *rawSMSC) serve(c net.Conn) {
	defer c.Close()
	for {
		p, err := smpp.ReadPDU(c, 0)
		if err != nil {
			return
		}
		switch {
		case p.Command.IsBind():
			r.mu.Lock()
			r.binds++
			r.mu.Unlock()
			r.write(c, smpp.PDU{Command: p.Command.Response(), Seq: p.Seq, Body: &smpp.BindResp{SystemID: "raw"}})
			if r.dropAfterBind {
				return
			}
		case p.Command == smpp.EnquireLink:
			r.write(c, smpp.PDU{Command: smpp.EnquireLinkResp, Seq: p.Seq})
		case p.Command == smpp.Unbind:
			if r.answerUnbind {
				r.write(c, smpp.PDU{Command: smpp.UnbindResp, Seq: p.Seq})
				return
			}
		case p.Command == smpp.SubmitSM:
			r.mu.Lock()
			r.submits++
			r.mu.Unlock()
			if r.submit != nil {
				_, _ = c.Write(r.submit(p))
			}
		}
	}
}

// counts are the binds and the submit_sm read so far.
func (r *rawSMSC) counts() (binds, submits int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.binds, r.submits
}
