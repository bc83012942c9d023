package smpp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/clock"
)

// SessionConfig are the settings of a Session. Start from
// DefaultSessionConfig, which holds every default and its reason.
type SessionConfig struct {
	// Role is the side this end plays (RoleESME dials and binds, RoleSMSC
	// accepts binds). Required.
	Role Role
	// Window is the number of requests this end may have sent without
	// their response; Send waits for a free slot.
	Window int
	// InWindow is the number of the peer's requests handed to Handler and
	// not yet answered with Reply; a request beyond it is answered
	// ESME_RTHROTTLED without reaching Handler.
	InWindow int
	// EnquireLink is how long the link may be silent (nothing read)
	// before this end sends an enquire_link. Negative turns the keepalive
	// off.
	EnquireLink time.Duration
	// ResponseTimeout is how long a request waits for its response; a
	// request past it fails with ErrTimeout, and an enquire_link past it
	// closes the session (the link is dead). The peer's unbind waits as
	// long, at most, for the answers to the requests it sent before it.
	ResponseTimeout time.Duration
	// WriteTimeout bounds one write to the connection; a write past it
	// closes the session.
	WriteTimeout time.Duration
	// MaxPDULen is the largest command_length read; a longer one is
	// answered generic_nack ESME_RINVCMDLEN and closes the session.
	MaxPDULen int
	// Handler receives the peer's requests other than enquire_link and
	// unbind (which the session answers: an unbind once the requests
	// handed on before it are answered), once Allowed lets them through
	// in the session's state: binds (on the SMSC side), submit_sm,
	// deliver_sm, data_sm, query_sm. It runs on the session's reading
	// goroutine, so it must not block: it answers with Reply, at once or
	// later from another goroutine. Nil answers every such request
	// ESME_RINVCMDID. A Handler that panics is recovered: the panic is
	// logged with its stack, the request answered ESME_RSYSERR, and the
	// session goes on.
	Handler func(s *Session, req PDU)
	// Observe, when set, sees every PDU the session writes (sent true) or
	// reads, for metrics. It must not block.
	Observe func(sent bool, p PDU)
	// OnState, when set, is called with each new bind state, in order.
	OnState func(BindState)
	// Clock runs the timers of the keepalive and the response timeout.
	// Default clock.Real.
	Clock clock.Clock
	// Logger gets the session's warnings. Default: discarded.
	Logger *slog.Logger
}

// DefaultSessionConfig is a SessionConfig of role r with the defaults.
func DefaultSessionConfig(r Role) SessionConfig {
	return SessionConfig{
		Role: r,
		// 10: the window SMSCs commonly grant, and the most a crash may
		// leave unanswered; the peer gets as many.
		Window: 10, InWindow: 10,
		// 30 s: common SMSC practice, well inside the idle timeouts of
		// firewalls and NATs.
		EnquireLink: 30 * time.Second,
		// 10 s: an SMSC answers in milliseconds, a slow one in a second or
		// two; a write is bounded alike.
		ResponseTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		MaxPDULen: DefaultMaxLen,
	}
}

// Validate reports every problem of c.
func (c SessionConfig) Validate() error {
	var errs []error
	if c.Role != RoleESME && c.Role != RoleSMSC {
		errs = append(errs, fmt.Errorf("smpp session: role %d is neither ESME nor SMSC", c.Role))
	}
	if c.Window < 1 || c.InWindow < 1 {
		errs = append(errs, fmt.Errorf("smpp session: window %d and in-window %d must be at least 1", c.Window, c.InWindow))
	}
	if c.ResponseTimeout <= 0 || c.WriteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("smpp session: response timeout %v and write timeout %v must be positive", c.ResponseTimeout, c.WriteTimeout))
	}
	if c.EnquireLink == 0 {
		errs = append(errs, fmt.Errorf("smpp session: enquire_link interval 0 (negative turns it off)"))
	}
	if c.MaxPDULen < HeaderLen {
		errs = append(errs, fmt.Errorf("smpp session: max PDU length %d is under a header's %d", c.MaxPDULen, HeaderLen))
	}
	return errors.Join(errs...)
}

// The ways a request or a session ends without a response.
var (
	// ErrClosed: the session was closed (by either end, or the link
	// broke) before the response came.
	ErrClosed = errors.New("smpp: session closed")
	// ErrTimeout: no response within the ResponseTimeout.
	ErrTimeout = errors.New("smpp: no response in time")
	// ErrUnbound: the peer unbound the session (a clean end).
	ErrUnbound = errors.New("smpp: the peer unbound")
)

// StatusError is a response whose command_status is not ESME_ROK, or a
// request refused in the session's state before it was sent.
type StatusError struct {
	Command CommandID
	Status  Status
}

func (e *StatusError) Error() string { return fmt.Sprintf("smpp: %s: %s", e.Command, e.Status) }

// Session is one SMPP connection of either role: it writes requests with
// sequence numbers, keeps at most Window of them outstanding and matches
// their responses (a generic_nack included), answers enquire_link and
// unbind, refuses what the bind state does not allow, keeps the link
// alive with enquire_link, and hands the rest of the peer's requests to
// the Handler. Its methods are safe for concurrent use.
type Session struct {
	cfg  SessionConfig
	conn net.Conn
	log  *slog.Logger

	slots chan struct{} // a token per free slot of the window
	done  chan struct{} // closed when the session has ended

	wmu sync.Mutex // serializes writes

	mu       sync.Mutex
	state    BindState
	seq      uint32
	pending  map[uint32]*Call
	inbound  map[uint32]CommandID // the peer's requests awaiting Reply
	peakIn   int                  // the most of them there were at once
	lastRead time.Time
	err      error
	closing  bool
	stopKeep func() bool
	// replying is the number of Replies writing their response: taken
	// off inbound, not yet on the wire.
	replying int
	// drain is the peer's unbind while requests it sent before it await
	// their Reply (nil otherwise).
	drain *drain
}

// drain is the peer's unbind held until every request it sent before it
// is answered: its sequence number, and the stop of the ResponseTimeout
// that bounds the wait.
type drain struct {
	seq  uint32
	stop func() bool
}

// Call is a request sent on a session.
type Call struct {
	Req  PDU
	done chan struct{}
	resp PDU
	err  error
	// window is whether the request holds a slot of the window
	// (enquire_link and unbind do not).
	window bool
	stop   func() bool
}

// Done is closed when the call has its response or has failed.
func (c *Call) Done() <-chan struct{} { return c.done }

// Result is the response, or why there is none (ErrClosed, ErrTimeout, a
// *DecodeError of a response that could not be read). A response with an
// error status is a response: its Status says so. A response whose body
// could not be decoded comes with its *DecodeError and its header (its
// Command, Status and Seq, no Body): the peer did answer, with that
// command_status.
func (c *Call) Result() (PDU, error) {
	<-c.done
	return c.resp, c.err
}

// NewSession starts a session on conn (already connected, TLS included)
// and takes ownership of it: the session closes it when it ends.
func NewSession(conn net.Conn, cfg SessionConfig) (*Session, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Session{cfg: cfg, conn: conn, log: log.With("remote", conn.RemoteAddr().String()),
		slots: make(chan struct{}, cfg.Window), done: make(chan struct{}),
		pending: map[uint32]*Call{}, inbound: map[uint32]CommandID{}, lastRead: cfg.Clock.Now()}
	for range cfg.Window {
		s.slots <- struct{}{}
	}
	if cfg.EnquireLink > 0 {
		s.mu.Lock()
		s.stopKeep = cfg.Clock.AfterFunc(cfg.EnquireLink, s.keepalive)
		s.mu.Unlock()
	}
	go s.read()
	return s, nil
}

// State is the session's bind state.
func (s *Session) State() BindState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Outstanding is the number of window slots in use: requests sent
// without their response.
func (s *Session) Outstanding() int { return s.cfg.Window - len(s.slots) }

// Unanswered is the number of the peer's requests handed to the Handler
// and not yet answered, and the most there were at once in the session's
// life. A peer whose requests all wait now, never more than now, has
// likely sent what its window allows.
func (s *Session) Unanswered() (now, peak int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inbound), s.peakIn
}

// Done is closed when the session has ended; Err then says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended: nil after this end's Unbind or Close,
// ErrUnbound when the peer unbound, else the error that broke it.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// RemoteAddr is the peer's address.
func (s *Session) RemoteAddr() net.Addr { return s.conn.RemoteAddr() }

// Bind binds an ESME's session with bind request cmd (BindTransmitter,
// BindReceiver or BindTransceiver) and b; b.InterfaceVersion 0 is sent as
// v3.4. A refusal is a *StatusError.
func (s *Session) Bind(ctx context.Context, cmd CommandID, b Bind) (*BindResp, error) {
	if !cmd.IsBind() {
		return nil, fmt.Errorf("smpp: %s is not a bind", cmd)
	}
	if b.InterfaceVersion == 0 {
		b.InterfaceVersion = InterfaceVersion34
	}
	resp, err := s.Request(ctx, PDU{Command: cmd, Body: &b})
	if err != nil {
		return nil, err
	}
	if resp.Status != StatusOK {
		return nil, &StatusError{Command: resp.Command, Status: resp.Status}
	}
	st, _ := BoundState(cmd)
	s.setState(st)
	br, _ := resp.Body.(*BindResp)
	if br == nil {
		br = &BindResp{}
	}
	return br, nil
}

// Request sends p and waits for its response (see Send).
func (s *Session) Request(ctx context.Context, p PDU) (PDU, error) {
	c, err := s.Send(ctx, p)
	if err != nil {
		return PDU{}, err
	}
	select {
	case <-c.done:
		return c.resp, c.err
	case <-ctx.Done():
		// The response, when it comes, is matched and dropped.
		return PDU{}, ctx.Err()
	}
}

// Send writes request p with the next sequence number (p.Seq is set)
// once a slot of the window is free, and returns the call its response
// completes. It refuses at once (a *StatusError) a request the session's
// state does not allow from this end, and returns ErrClosed once the
// session has ended.
func (s *Session) Send(ctx context.Context, p PDU) (*Call, error) {
	if p.Command.IsResponse() {
		return nil, fmt.Errorf("smpp: %s is a response (use Reply)", p.Command)
	}
	window := p.Command != EnquireLink && p.Command != Unbind
	if window {
		select {
		case <-s.slots:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.done:
			return nil, ErrClosed
		}
	}
	c := &Call{Req: p, done: make(chan struct{}), window: window}
	s.mu.Lock()
	if st := s.allowedOut(p.Command); st != StatusOK {
		s.mu.Unlock()
		s.release(c)
		return nil, &StatusError{Command: p.Command, Status: st}
	}
	if s.closing {
		s.mu.Unlock()
		s.release(c)
		return nil, ErrClosed
	}
	for {
		s.seq++
		if s.seq > MaxSeq {
			s.seq = 1
		}
		if _, busy := s.pending[s.seq]; !busy {
			break
		}
	}
	c.Req.Seq = s.seq
	seq := c.Req.Seq
	s.pending[seq] = c
	c.stop = s.cfg.Clock.AfterFunc(s.cfg.ResponseTimeout, func() {
		if s.finish(seq, PDU{}, ErrTimeout) && c.Req.Command == EnquireLink {
			s.fail(fmt.Errorf("smpp: enquire_link unanswered for %v", s.cfg.ResponseTimeout))
		}
	})
	s.mu.Unlock()
	if err := s.write(c.Req); err != nil {
		s.finish(seq, PDU{}, err)
		return nil, err
	}
	return c, nil
}

// allowedOut is whether this end may send a request of c now (s.mu held).
func (s *Session) allowedOut(c CommandID) Status {
	if c.IsBind() && s.cfg.Role == RoleESME && s.state == StateOpen {
		for _, p := range s.pending {
			if p.Req.Command.IsBind() {
				return StatusAlreadyBound
			}
		}
	}
	return Allowed(s.state, s.cfg.Role, c)
}

// release gives back c's window slot.
func (s *Session) release(c *Call) {
	if c.window {
		s.slots <- struct{}{}
	}
}

// finish completes the pending call of seq with resp or err; false when
// no call of seq was pending (it was finished already).
func (s *Session) finish(seq uint32, resp PDU, err error) bool {
	s.mu.Lock()
	c, ok := s.pending[seq]
	if ok {
		delete(s.pending, seq)
	}
	s.mu.Unlock()
	if !ok {
		return false
	}
	c.stop()
	c.resp, c.err = resp, err
	// The slot goes back before the call is done, so whoever sees the
	// result sees the window without it.
	s.release(c)
	close(c.done)
	return true
}

// Reply answers the peer's request req with status and body (nil for a
// response without one: every error response, enquire_link, unbind). A
// successful answer to a bind binds the session. A request answered
// already, or never received, is an error. The last answer the peer's
// unbind waited for is followed by the unbind's response.
func (s *Session) Reply(req PDU, status Status, body Body) error {
	s.mu.Lock()
	cmd, ok := s.inbound[req.Seq]
	if !ok || cmd != req.Command {
		s.mu.Unlock()
		return fmt.Errorf("smpp: %s #%d is not a request awaiting its response", req.Command, req.Seq)
	}
	delete(s.inbound, req.Seq)
	s.replying++
	s.mu.Unlock()
	if status == StatusOK && req.Command.IsBind() {
		st, _ := BoundState(req.Command)
		s.setState(st)
	}
	if status != StatusOK {
		body = nil
	}
	err := s.write(PDU{Command: req.Command.Response(), Status: status, Seq: req.Seq, Body: body})
	s.mu.Lock()
	s.replying--
	d := s.drained()
	s.mu.Unlock()
	if d != nil {
		s.unbound(d)
	}
	return err
}

// drained takes the peer's unbind once nothing it sent before it awaits
// its answer, on the wire included (s.mu held); nil while something does,
// or when there is no such unbind.
func (s *Session) drained() *drain {
	d := s.drain
	if d == nil || len(s.inbound) > 0 || s.replying > 0 {
		return nil
	}
	s.drain = nil
	return d
}

// unbound answers the peer's unbind d and ends the session.
func (s *Session) unbound(d *drain) {
	d.stop()
	_ = s.write(PDU{Command: UnbindResp, Seq: d.seq})
	s.setState(StateClosed)
	s.end(ErrUnbound)
}

// drainTimedOut answers the peer's unbind that waited the ResponseTimeout
// for the answers of the requests it sent before it: the session ends
// without them.
func (s *Session) drainTimedOut() {
	s.mu.Lock()
	d := s.drain
	s.drain = nil
	n := len(s.inbound) + s.replying
	s.mu.Unlock()
	if d == nil {
		return
	}
	s.log.Warn("smpp unbind answered with requests of the peer unanswered", "unanswered", n, "waited", s.cfg.ResponseTimeout.String())
	s.unbound(d)
}

// Unbind ends the session cleanly: unbind, its response (or the
// ResponseTimeout), then the connection is closed. A session that is not
// bound is just closed.
func (s *Session) Unbind(ctx context.Context) error {
	var err error
	if s.State().Bound() {
		var resp PDU
		resp, err = s.Request(ctx, PDU{Command: Unbind})
		if err == nil && resp.Status != StatusOK {
			err = &StatusError{Command: resp.Command, Status: resp.Status}
		}
	}
	s.end(nil)
	return err
}

// Close ends the session at once: the connection is closed and every
// pending call fails with ErrClosed.
func (s *Session) Close() error {
	s.end(nil)
	<-s.done
	return nil
}

// fail ends the session because of err.
func (s *Session) fail(err error) {
	s.log.Warn("smpp session ends", "err", err)
	s.end(err)
}

// end closes the connection once, recording why; the reading goroutine
// then fails what is pending and closes done.
func (s *Session) end(err error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	s.closing, s.err = true, err
	stop := s.stopKeep
	d := s.drain
	s.drain = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	if d != nil {
		d.stop()
	}
	_ = s.conn.Close()
}

// setState moves the session to st and tells OnState.
func (s *Session) setState(st BindState) {
	s.mu.Lock()
	changed := s.state != st && s.state != StateClosed
	if changed {
		s.state = st
	}
	s.mu.Unlock()
	if changed && s.cfg.OnState != nil {
		s.cfg.OnState(st)
	}
}

// write writes p, bounded by the WriteTimeout; a failed write ends the
// session.
func (s *Session) write(p PDU) error {
	b, err := p.Marshal()
	if err != nil {
		return err
	}
	s.wmu.Lock()
	_ = s.conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	_, err = s.conn.Write(b)
	s.wmu.Unlock()
	if err != nil {
		s.end(fmt.Errorf("smpp: writing %s: %w", p.Command, err))
		return ErrClosed
	}
	if s.cfg.Observe != nil {
		s.cfg.Observe(true, p)
	}
	return nil
}

// read is the session's reading goroutine: it reads and dispatches PDUs
// until the connection ends, then fails what is pending.
func (s *Session) read() {
	defer s.shutdown()
	for {
		p, err := ReadPDU(s.conn, s.cfg.MaxPDULen)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				s.mu.Lock()
				closing := s.closing
				s.mu.Unlock()
				if !closing {
					if errors.Is(err, io.EOF) {
						err = fmt.Errorf("smpp: the peer closed the connection: %w", err)
					}
					s.end(err)
				}
				return
			}
			if !s.refuse(p, de) {
				return
			}
			continue
		}
		s.mu.Lock()
		s.lastRead = s.cfg.Clock.Now()
		s.mu.Unlock()
		if s.cfg.Observe != nil {
			s.cfg.Observe(false, p)
		}
		if p.Command.IsResponse() {
			s.response(p)
			continue
		}
		if !s.request(p) {
			return
		}
	}
}

// refuse answers a PDU that could not be decoded (header: what its header
// said, without a body); false when the stream cannot be read further
// (the session ends).
func (s *Session) refuse(header PDU, de *DecodeError) bool {
	s.log.Warn("smpp pdu refused", "err", de)
	switch {
	case de.Framing || !de.HeaderRead:
		_ = s.write(PDU{Command: GenericNack, Status: de.Status, Seq: de.Seq & MaxSeq})
		s.fail(de)
		return false
	case de.Command.IsResponse():
		// A response we cannot read still ends its request, with what its
		// header says (the peer's command_status), when it is that
		// request's response, as response checks for one it can read.
		s.mu.Lock()
		c, ok := s.pending[de.Seq]
		s.mu.Unlock()
		if !ok || (de.Command != GenericNack && de.Command != c.Req.Command.Response()) {
			return true // logged above; the request waits for its own
		}
		header.Body = nil
		s.finish(de.Seq, header, de)
	case !de.Command.Known() || de.Seq > MaxSeq:
		_ = s.write(PDU{Command: GenericNack, Status: de.Status, Seq: de.Seq & MaxSeq})
	default:
		_ = s.write(PDU{Command: de.Command.Response(), Status: de.Status, Seq: de.Seq})
	}
	return true
}

// response matches a response to its request.
func (s *Session) response(p PDU) {
	s.mu.Lock()
	c, ok := s.pending[p.Seq]
	s.mu.Unlock()
	if !ok || (p.Command != GenericNack && p.Command != c.Req.Command.Response()) {
		s.log.Warn("smpp response without its request", "command", p.Command.String(), "seq", p.Seq, "status", p.Status.String())
		return
	}
	if st, ok := BoundState(p.Command); ok && p.Status == StatusOK && s.cfg.Role == RoleESME {
		// Bound before the next PDU is read: an SMSC may send a
		// deliver_sm right behind its bind response.
		s.setState(st)
	}
	if p.Command == UnbindResp {
		// Our unbind is answered: the end is clean, whatever the peer's
		// closing of the connection makes the reader see next.
		s.setState(StateClosed)
		s.end(nil)
	}
	s.finish(p.Seq, p, nil)
}

// request answers or hands on a request of the peer; false when it ended
// the session.
func (s *Session) request(p PDU) bool {
	s.mu.Lock()
	st := Allowed(s.state, s.cfg.Role.Peer(), p.Command)
	full := len(s.inbound) >= s.cfg.InWindow
	if st == StatusOK && !(p.Command.IsBind() && s.bindAnswerPending()) {
		if p.Command == Unbind && (len(s.inbound) > 0 || s.replying > 0) {
			// An ESME that stops sends unbind right behind its last
			// submits: answering it now, and closing, would lose their
			// answers though their messages are stored, and the ESME
			// would send them again. So the unbind waits for them (at
			// most the ResponseTimeout), the session closed meanwhile to
			// new requests both ways (ESME_RINVBNDSTS).
			d := &drain{seq: p.Seq}
			d.stop = s.cfg.Clock.AfterFunc(s.cfg.ResponseTimeout, s.drainTimedOut)
			s.drain = d
			s.mu.Unlock()
			s.setState(StateClosed)
			return true
		}
		if p.Command == EnquireLink || p.Command == Unbind {
			s.mu.Unlock()
			_ = s.write(PDU{Command: p.Command.Response(), Seq: p.Seq})
			if p.Command == Unbind {
				s.setState(StateClosed)
				s.end(ErrUnbound)
				return false
			}
			return true
		}
		if full || s.cfg.Handler == nil {
			s.mu.Unlock()
			st = StatusThrottled
			if s.cfg.Handler == nil {
				st = StatusInvalidCmdID
			}
			_ = s.write(PDU{Command: p.Command.Response(), Status: st, Seq: p.Seq})
			return true
		}
		s.inbound[p.Seq] = p.Command
		s.peakIn = max(s.peakIn, len(s.inbound))
		s.mu.Unlock()
		s.handle(p)
		return true
	}
	if st == StatusOK {
		st = StatusAlreadyBound // a second bind while the first is being answered
	}
	s.mu.Unlock()
	_ = s.write(PDU{Command: p.Command.Response(), Status: st, Seq: p.Seq})
	return true
}

// handle hands the peer's request p to the Handler. A Handler that
// panics (a peer's malformed PDU meeting a bug of ours) must not take the
// process down with this goroutine, which nothing else recovers; and
// since a peer sends the same PDU again after a reconnect, the node would
// die again on every restart. So the panic is logged with its stack, p is
// answered ESME_RSYSERR (a temporary status: the peer may try again
// later) unless the Handler had answered it, and the session goes on.
func (s *Session) handle(p PDU) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("smpp handler panicked: the request is answered ESME_RSYSERR", "command", p.Command.String(),
				"seq", p.Seq, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			_ = s.Reply(p, StatusSystemError, nil) // an error when the Handler answered it already
		}
	}()
	s.cfg.Handler(s, p)
}

// bindAnswerPending is whether a bind of the peer awaits its Reply (s.mu
// held).
func (s *Session) bindAnswerPending() bool {
	for _, c := range s.inbound {
		if c.IsBind() {
			return true
		}
	}
	return false
}

// keepalive sends an enquire_link when nothing was read for the
// EnquireLink interval, and re-arms itself.
func (s *Session) keepalive() {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	idle := s.cfg.Clock.Now().Sub(s.lastRead)
	next := s.cfg.EnquireLink - idle
	if next <= 0 {
		next = s.cfg.EnquireLink
	}
	s.stopKeep = s.cfg.Clock.AfterFunc(next, s.keepalive)
	s.mu.Unlock()
	if idle >= s.cfg.EnquireLink {
		// Its timeout ends the session (Send); the answer needs no waiting.
		_, _ = s.Send(context.Background(), PDU{Command: EnquireLink})
	}
}

// shutdown marks the session closed and fails the pending calls, in that
// order: whoever sees a call fail (the delivery worker deciding whether to
// hold its claims) then sees the session closed, not still bound.
func (s *Session) shutdown() {
	s.end(ErrClosed) // a no-op when the session was already ending
	s.setState(StateClosed)
	s.mu.Lock()
	seqs := make([]uint32, 0, len(s.pending))
	for seq := range s.pending {
		seqs = append(seqs, seq)
	}
	s.mu.Unlock()
	for _, seq := range seqs {
		s.finish(seq, PDU{}, ErrClosed)
	}
	close(s.done)
}
