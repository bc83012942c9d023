package smsc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/smpp"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// Backend is the node as the listener needs it: the intake of POST
// /api/messages, a message by id (query_sm), and the credentials in force.
type Backend interface {
	Submit(ctx context.Context, s messages.Submission) (messages.Message, bool, error)
	Message(ctx context.Context, id string) (messages.Message, error)
	Credentials() *auth.Set
}

// Outbox is the part of the store the receipts are worked from: the
// outbox's receipt rows of an account.
type Outbox interface {
	ClaimWork(ctx context.Context, req persistence.ClaimRequest) (persistence.Claim, error)
	CompleteWork(ctx context.Context, now time.Time, outcomes []persistence.Outcome) ([]persistence.Completion, error)
}

// Config are the listener's settings.
type Config struct {
	// Listener is where ESMEs connect (bound by the node, so that a port
	// taken stops the start before the store opens). Required.
	Listener net.Listener
	// TLS, when set, makes every connection TLS (the node's certificate).
	TLS *tls.Config
	// SystemID is what bind responses name (the node's name, cut to 15).
	SystemID string
	// Owner names this instance in the leases of receipt rows.
	Owner string
	// Window is how many of an ESME's requests may await their answer on
	// one session (a part of a concatenated message waits for the rest);
	// one more is answered ESME_RTHROTTLED.
	Window int
	// ReassemblyWait bounds the wait of a concatenated message for its
	// next part from its latest part; an account with a submit rate r
	// gets 1/r more, at most a minute (it may pace its parts at its
	// rate).
	ReassemblyWait time.Duration
	// MaxHeldParts bounds the parts held in all; one more is answered
	// ESME_RMSGQFUL.
	MaxHeldParts int
	// MaxHeldBytes bounds the octets of the held parts' data in all; a
	// part beyond it is answered ESME_RMSGQFUL. (A part carries at most
	// MaxPartData, 254 octets; a longer one is answered ESME_RINVMSGLEN.)
	MaxHeldBytes int
	// SubmitTimeout bounds one submission's wait for its commit.
	SubmitTimeout time.Duration
	// BindTimeout is how long a connection may stay without a bind: one
	// not bound by then is closed (else it could be kept open for ever by
	// answering enquire_link).
	BindTimeout time.Duration
	// ReceiptPoll is how often a bound receiver's account looks for
	// receipts due when nothing woke it (Kick).
	ReceiptPoll time.Duration
	// ReceiptLease is how long a receipt being sent stays leased to this
	// instance.
	ReceiptLease time.Duration
	// ReceiptRetry is the wait before a receipt the ESME refused with a
	// temporary status is sent again.
	ReceiptRetry time.Duration
	// Session are the settings of each session (Role, Window and Handler
	// are the listener's).
	Session smpp.SessionConfig

	Backend Backend
	Store   Outbox
	Metrics *Metrics
	Clock   clock.Clock
	Logger  *slog.Logger
	// Tracing, when set, starts each message's trace (as the sampler
	// decides: the SMPP has no traceparent of its ESME's) with its submit's
	// span (telemetry.SpanSubmitSMPP), the parent of its later spans.
	Tracing *telemetry.Tracing
}

// DefaultConfig is a Config with the defaults of the durations and bounds.
func DefaultConfig() Config {
	return Config{
		// 64: an ESME's usual window of 10, with room for the parts of
		// long messages, which wait for their last part.
		Window: 64,
		// 5 s: a windowed ESME sends the parts within milliseconds, and
		// gives up on a response after 10-30 s, so the refusal of a
		// message whose parts stopped coming must reach it before that.
		ReassemblyWait: 5 * time.Second,
		// 10000 parts and 4 MiB of their data: 10000 parts of at most
		// 254 octets are 2.5 MB of data, about 7 MB of memory with the
		// table's bookkeeping (measured, each part a message of its own);
		// the byte budget holds whatever the count is raised to.
		MaxHeldParts: 10000, MaxHeldBytes: 4 << 20,
		// 30 s: an ESME has given up on its response long before.
		SubmitTimeout: 30 * time.Second,
		// 30 s, the enquire_link interval: an ESME binds as soon as it
		// has connected (and TLS adds a round trip or two).
		BindTimeout: 30 * time.Second,
		// 1 s: a receipt nothing announced still leaves within a second.
		ReceiptPoll: time.Second,
		// A minute: a deliver_sm_resp takes milliseconds.
		ReceiptLease: time.Minute,
		// 30 s: an ESME that refused for now is given time to recover.
		ReceiptRetry: 30 * time.Second,
		Session:      smpp.DefaultSessionConfig(smpp.RoleSMSC),
	}
}

// Server is the SMPP listener: ESMEs bind to it, submit messages into the
// node's intake and receive their delivery receipts.
type Server struct {
	cfg Config
	log *slog.Logger
	// peer bounds the lines an ESME's input makes (the sessions' own
	// included): at most 10 a minute of each kind, then counted.
	peer *peerLogs

	mu       sync.Mutex
	conns    map[*conn]bool
	bound    map[string][]*conn // account -> its receiver and transceiver sessions
	pumps    map[string]chan struct{}
	table    *Reassembly[owed]
	stopExp  func() bool
	expireAt time.Time
	closed   bool

	limiter  *auth.Limiter
	accepts  sync.WaitGroup // submissions on their way to the intake
	routines sync.WaitGroup // the accept loop, sessions' watchers, pumps
	stop     chan struct{}
}

// conn is one ESME's session and who it is bound as.
type conn struct {
	s       *smpp.Session
	account string
	who     auth.Principal
	state   smpp.BindState
	// hash is the token hash of the credential it bound with ("" on a
	// node without credentials); revoked is set once the credentials in
	// force no longer let it be bound (StillBound): it is being unbound,
	// and its requests are refused meanwhile.
	hash    string
	revoked bool
	// stopBindTimer stops the timer that closes the connection if it has
	// not bound within the BindTimeout.
	stopBindTimer func() bool
	// refused: a bind was refused, and the connection is closing; nothing
	// it sent behind the bind is taken (on the session's reading
	// goroutine only).
	refused bool
}

// owed is a request owed its answer: a submit_sm or data_sm (or each part
// of a concatenated message).
type owed struct {
	s    *smpp.Session
	req  smpp.PDU
	read time.Time
	// account and rate are the account's and the submit rate the request
	// took a submit of (rate 0: none), given back if it is refused as
	// malformed.
	account string
	rate    float64
}

// New checks cfg and makes the listener; Serve runs it.
func New(cfg Config) (*Server, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if cfg.Listener == nil || cfg.Backend == nil || cfg.Store == nil || cfg.Metrics == nil {
		errs = append(errs, errors.New("smsc: Listener, Backend, Store and Metrics are required"))
	}
	if cfg.Window < 1 || cfg.MaxHeldParts < 1 {
		errs = append(errs, fmt.Errorf("smsc: window %d and held parts %d must be at least 1", cfg.Window, cfg.MaxHeldParts))
	}
	if cfg.MaxHeldBytes < MaxPartData {
		errs = append(errs, fmt.Errorf("smsc: held bytes %d must be at least a part's %d", cfg.MaxHeldBytes, MaxPartData))
	}
	for name, d := range map[string]time.Duration{"reassembly wait": cfg.ReassemblyWait, "submit timeout": cfg.SubmitTimeout,
		"bind timeout": cfg.BindTimeout,
		"receipt poll": cfg.ReceiptPoll, "receipt lease": cfg.ReceiptLease, "receipt retry": cfg.ReceiptRetry} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("smsc: %s %v must be positive", name, d))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "smpp-listen")
	return &Server{cfg: cfg, log: log, peer: newPeerLogs(log, cfg.Clock), conns: map[*conn]bool{},
		bound: map[string][]*conn{}, pumps: map[string]chan struct{}{}, table: NewReassembly[owed](cfg.ReassemblyWait, cfg.MaxHeldParts, cfg.MaxHeldBytes),
		limiter: auth.NewLimiter(), stop: make(chan struct{})}, nil
}

// Addr is the listener's address.
func (srv *Server) Addr() net.Addr { return srv.cfg.Listener.Addr() }

// Serve accepts connections until Close.
func (srv *Server) Serve() error {
	srv.routines.Add(1)
	defer srv.routines.Done()
	var pause time.Duration // after an accept that failed for now
	for {
		nc, err := srv.cfg.Listener.Accept()
		if err != nil {
			select {
			case <-srv.stop:
				return nil
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.As(err, &ne) && ne.Temporary() {
				// Out of file descriptors (EMFILE, ENFILE: a flood of
				// connections), a connection aborted before it was
				// accepted: tried again after a pause (5 ms doubling to
				// 1 s), as net/http does. Serve's end would end the node.
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				srv.peer.write(slog.LevelWarn, "smpp connection not accepted", "err", err, "retry_in", pause.String())
				waited := make(chan struct{})
				stopTimer := srv.cfg.Clock.AfterFunc(pause, func() { close(waited) })
				select {
				case <-waited:
				case <-srv.stop:
					stopTimer()
					return nil
				}
				continue
			}
			return fmt.Errorf("smpp listener: %w", err)
		}
		pause = 0
		if srv.cfg.TLS != nil {
			nc = tls.Server(nc, srv.cfg.TLS)
		}
		srv.open(nc)
	}
}

// open starts the session of a new connection.
func (srv *Server) open(nc net.Conn) {
	c := &conn{}
	sc := srv.cfg.Session
	sc.Role, sc.InWindow, sc.Clock, sc.Logger = smpp.RoleSMSC, srv.cfg.Window, srv.cfg.Clock, slog.New(srv.peer.handler())
	sc.Handler = func(s *smpp.Session, req smpp.PDU) { srv.handle(c, s, req) }
	sc.Observe = srv.cfg.Metrics.observe
	s, err := smpp.NewSession(nc, sc)
	if err != nil {
		srv.log.Error("smpp session not started", "err", err)
		nc.Close()
		return
	}
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		s.Close()
		return
	}
	c.s = s
	srv.conns[c] = true
	if !c.state.Bound() {
		c.stopBindTimer = srv.cfg.Clock.AfterFunc(srv.cfg.BindTimeout, func() { srv.bindTimeout(c, s) })
	}
	srv.routines.Add(1)
	srv.mu.Unlock()
	go func() {
		defer srv.routines.Done()
		<-s.Done()
		srv.closeConn(c)
	}()
}

// bindTimeout closes s, c's session, unless it has bound.
func (srv *Server) bindTimeout(c *conn, s *smpp.Session) {
	srv.mu.Lock()
	bound := c.state.Bound()
	srv.mu.Unlock()
	if bound || s.State().Bound() {
		return
	}
	srv.peer.write(slog.LevelWarn, "smpp connection closed: no bind in time", "remote", s.RemoteAddr().String(), "bind_timeout", srv.cfg.BindTimeout.String())
	s.Close()
}

// closeConn forgets an ended session.
func (srv *Server) closeConn(c *conn) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if c.stopBindTimer != nil {
		c.stopBindTimer()
	}
	delete(srv.conns, c)
	if c.state.Bound() {
		srv.cfg.Metrics.binds.WithLabelValues(accountLabel(c.who), c.state.String()).Dec()
		srv.log.Info("esme unbound", "account", c.account, "remote", c.s.RemoteAddr().String(), "why", errString(c.s.Err()))
	}
	list := srv.bound[c.account]
	for i, x := range list {
		if x == c {
			srv.bound[c.account] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(srv.bound[c.account]) == 0 {
		delete(srv.bound, c.account)
	}
}

func errString(err error) string {
	if err == nil {
		return "unbind"
	}
	return err.Error()
}

// handle receives an ESME's request on the session's reading goroutine:
// nothing here blocks.
func (srv *Server) handle(c *conn, s *smpp.Session, req smpp.PDU) {
	if c.refused {
		// Read before the close took effect: a bind behind the refused
		// one is another guess of a password, which would cost no
		// connection. Left unanswered.
		return
	}
	switch {
	case req.Command.IsBind():
		// Answered here, before the next request is read: a credential
		// check is a map lookup and a hash.
		srv.bind(c, s, req)
	case req.Command == smpp.SubmitSM || req.Command == smpp.DataSM:
		srv.submit(c, s, req)
	case req.Command == smpp.QuerySM:
		go srv.query(c, s, req)
	default:
		srv.reply(s, req, smpp.StatusInvalidCmdID, nil)
	}
}

func (srv *Server) reply(s *smpp.Session, req smpp.PDU, st smpp.Status, body smpp.Body) {
	if err := s.Reply(req, st, body); err != nil {
		srv.log.Debug("smpp response not written", "command", req.Command.String(), "seq", req.Seq, "err", err)
	}
}

// bind answers a bind: the account's credentials decide. A refused bind
// is answered and its connection closed (each guess of a password costs
// a connection); nothing else happens.
func (srv *Server) bind(c *conn, s *smpp.Session, req smpp.PDU) {
	b, _ := req.Body.(*smpp.Bind)
	creds := srv.cfg.Backend.Credentials()
	who, st := Authenticate(creds, b.SystemID, b.Password)
	if st != smpp.StatusOK {
		srv.cfg.Metrics.bindRefused.WithLabelValues(st.String()).Inc()
		srv.peer.write(slog.LevelWarn, "smpp bind refused", "system_id", b.SystemID, "remote", s.RemoteAddr().String(), "status", st.String())
		srv.reply(s, req, st, nil)
		c.refused = true
		go s.Close() // not on the reading goroutine, which Close waits for
		return
	}
	state, _ := smpp.BoundState(req.Command)
	srv.reply(s, req, smpp.StatusOK, &smpp.BindResp{SystemID: clip(srv.cfg.SystemID, 15),
		TLVs: smpp.TLVs{{Tag: smpp.TagSCInterfaceVersion, Value: []byte{smpp.InterfaceVersion34}}}})
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.closed || !s.State().Bound() {
		return
	}
	c.s, c.account, c.who, c.state = s, who.Name, who, state // c.s too: a bind may come before open has set it
	if cr, ok := creds.Credential(who.Name); ok && !creds.Open() {
		c.hash = cr.TokenHash
	}
	if c.stopBindTimer != nil {
		c.stopBindTimer()
	}
	srv.cfg.Metrics.binds.WithLabelValues(accountLabel(who), state.String()).Inc()
	srv.log.Info("esme bound", "account", c.account, "type", state.String(), "remote", s.RemoteAddr().String())
	if state == smpp.StateBoundRX || state == smpp.StateBoundTRX {
		srv.bound[c.account] = append(srv.bound[c.account], c)
		srv.startPump(c.account)
	}
	// The credentials may have changed since creds was read, their
	// change (CredentialsChanged) done before this session was listed.
	if _, ok := StillBound(srv.cfg.Backend.Credentials(), c.account, c.hash); !ok {
		srv.unbindRevoked(c)
	}
}

// CredentialsChanged puts creds, the credentials now in force, to the
// sessions bound already, as the HTTP API puts them to every request: a
// session whose account creds no longer let bind with the password it
// bound with (revoked, its password changed, no longer an SMPP account)
// is unbound and closed, its requests refused meanwhile; the others take
// their account's settings of now (its submit rate), but on a node whose
// credentials are all gone (open), where they keep theirs (and their
// metrics' account label). The node calls it once creds are in force,
// so that a bind either saw them or is ended.
func (srv *Server) CredentialsChanged(creds *auth.Set) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for c := range srv.conns {
		if !c.state.Bound() || c.revoked {
			continue
		}
		who, ok := StillBound(creds, c.account, c.hash)
		switch {
		case ok && !creds.Open():
			c.who = who
		case !ok:
			srv.unbindRevoked(c)
		}
	}
}

// unbindRevoked unbinds c, whose account's credential no longer lets it
// be bound, and closes it (srv.mu held).
func (srv *Server) unbindRevoked(c *conn) {
	c.revoked = true
	if srv.closed {
		return // Close unbinds every session
	}
	srv.log.Warn("smpp session unbound: its account's credential was revoked or changed", "account", c.account,
		"remote", c.s.RemoteAddr().String())
	s := c.s
	srv.routines.Add(1)
	go func() {
		defer srv.routines.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Unbind(ctx)
		s.Close()
	}()
}

// account is who c is bound as; revoked is set once its account's
// credential no longer lets it be bound (it is being unbound).
func (srv *Server) account(c *conn) (account string, who auth.Principal, revoked bool) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return c.account, c.who, c.revoked
}

// submit takes a submit_sm or data_sm: a whole message goes to the
// intake, a part to the reassembly table (and its message to the intake
// once whole). Every answer waits for the commit.
func (srv *Server) submit(c *conn, s *smpp.Session, req smpp.PDU) {
	now := srv.cfg.Clock.Now()
	o := owed{s: s, req: req, read: now}
	srv.cfg.Metrics.pending.Inc()
	sh, _ := ShortOf(req)
	if r := sh.Check(); r != nil {
		srv.refuse(r, o)
		return
	}
	account, who, revoked := srv.account(c)
	if revoked {
		srv.refuse(refuse(smpp.StatusInvalidBindState, "the account's credential was revoked or changed: the session is being unbound"), o)
		return
	}
	p, isPart, err := smpp.PartOf(sh.SM)
	k := PartKey{Account: account, Source: sh.Source, Dest: sh.Dest, Ref: p.Ref, Total: p.Total}
	if who.SubmitRate > 0 {
		// Taken before the content is read and the node checks the
		// times: a refusal of those gives it back (refuse). A part of a
		// message held already is not refused by the rate: its message
		// was let in, and refusing its later parts would let none of a
		// long text through at a low rate. It takes its submit all the
		// same, into debt: the account's next message waits for it.
		switch {
		case err == nil && isPart && p.Total > 1 && srv.holds(k):
			srv.limiter.Take(account, who.SubmitRate, now)
		default:
			if ok, _ := srv.limiter.Allow(account, who.SubmitRate, now); !ok {
				srv.refuse(refuse(smpp.StatusThrottled, "the account's submit rate (%g/s) is used up", who.SubmitRate), o)
				return
			}
		}
		o.account, o.rate = account, who.SubmitRate
	}
	switch {
	case err != nil && sh.ESMClass&smpp.ESMClassUDHI != 0:
		srv.refuse(malformed(smpp.StatusInvalidESMClass, "user data header: %v", err), o)
		return
	case err != nil:
		srv.refuse(malformed(smpp.StatusInvalidTLVValue, "sar_*: %v", err), o)
		return
	case !isPart && sh.ESMClass&smpp.ESMClassUDHI != 0:
		srv.refuse(malformed(smpp.StatusInvalidESMClass, "a user data header without concatenation is not carried (its message would lose it)"), o)
		return
	case !isPart:
		srv.toIntake(who, sh, sh.SM.Payload(), sh.DataCoding, []owed{o})
		return
	case p.Total == 1:
		srv.toIntake(who, sh, p.Data, sh.DataCoding, []owed{o})
		return
	}
	// A part's class is checked as it comes (a reserved subunit, or one
	// against its data_coding), and the table holds every part of one
	// message to the same subunit: the whole message takes the last
	// part's.
	if _, r := sh.class(sh.DataCoding); r != nil {
		srv.refuse(r, o)
		return
	}
	// The table holds what the answer needs (the command and its sequence
	// number) and a copy of the part's data, not the PDU: its other TLVs
	// would be held too, outside the table's byte budget.
	o.req = smpp.PDU{Command: req.Command, Seq: req.Seq}
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		srv.refuse(refuse(smpp.StatusSystemError, "the node is stopping"), o)
		return
	}
	whole, err := srv.table.Add(k, p, Asks{DataCoding: sh.DataCoding, Subunit: sh.Subunit, Validity: sh.Validity, Schedule: sh.Schedule,
		RegisteredDelivery: sh.RegisteredDelivery}, o, now, pace(who.SubmitRate))
	srv.cfg.Metrics.partsHeld.Set(float64(srv.table.Held()))
	srv.armExpiry()
	srv.mu.Unlock()
	switch {
	case errors.Is(err, ErrTableFull):
		srv.refuse(refuse(smpp.StatusMsgQueueFull, "%v", err), o)
	case errors.Is(err, ErrPartTooLong):
		srv.refuse(malformed(smpp.StatusInvalidMsgLen, "%v", err), o)
	case errors.Is(err, ErrMixedSubunit):
		srv.refuse(malformed(smpp.StatusInvalidTLVValue, "%v", err), o)
	case errors.Is(err, ErrMixedValidity):
		srv.refuse(malformed(smpp.StatusInvalidExpiry, "%v", err), o)
	case errors.Is(err, ErrMixedSchedule):
		srv.refuse(malformed(smpp.StatusInvalidSched, "%v", err), o)
	case err != nil:
		srv.refuse(malformed(smpp.StatusSubmitFailed, "%v", err), o)
	case whole != nil:
		// The message is what all its parts asked for, not what the part
		// that completed it did.
		sh.RegisteredDelivery, sh.Validity, sh.Schedule = whole.Asks.RegisteredDelivery, whole.Asks.Validity, whole.Asks.Schedule
		srv.toIntake(who, sh, whole.Content, whole.Asks.DataCoding, partsOwed(*whole))
	}
}

// holds reports whether a part of message k is held.
func (srv *Server) holds(k PartKey) bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.table.Holds(k)
}

// maxPace bounds pace: a minute, so that a message of an account with a
// rate of a few a day is not held for hours (the table's room, and the
// ESME's window, held with it); such an ESME sends a message's parts
// together, which the rate does not refuse.
const maxPace = time.Minute

// pace is the interval at which an account of submit rate r may submit
// (0 without a rate), at most maxPace: a message of its waits that much
// more for its next part.
func pace(r float64) time.Duration {
	if r <= 0 {
		return 0
	}
	if d := float64(time.Second) / r; d < float64(maxPace) {
		return time.Duration(d)
	}
	return maxPace
}

// partsOwed are the requests a message's parts are owed answers for.
func partsOwed(w Whole[owed]) []owed {
	owe := make([]owed, len(w.Parts))
	for i, h := range w.Parts {
		owe[i] = h.Owed
	}
	return owe
}

// answer answers a submit owed its answer.
func (srv *Server) answer(o owed, st smpp.Status, body smpp.Body) {
	srv.reply(o.s, o.req, st, body)
	srv.cfg.Metrics.pending.Dec()
}

// refuse answers every request of owe with r's status. A request
// refused as malformed gives back the submit it took of its account's
// rate (as the API does for a 400): it uses none of it.
func (srv *Server) refuse(r *Refusal, owe ...owed) {
	for _, o := range owe {
		if r.Malformed {
			srv.limiter.Refund(o.account, o.rate)
		}
		srv.peer.write(slog.LevelInfo, "smpp submit refused", "command", o.req.Command.String(), "seq", o.req.Seq, "status", r.Status.String(), "why", r.Why)
		srv.answer(o, r.Status, nil)
	}
}

// toIntake submits a whole message of who and answers every request it
// came in after the commit, each with the message's id.
func (srv *Server) toIntake(who auth.Principal, sh Short, content []byte, dc byte, owe []owed) {
	account := who.Name
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		srv.refuse(refuse(smpp.StatusSystemError, "the node is stopping"), owe...)
		return
	}
	srv.accepts.Add(1)
	srv.mu.Unlock()
	go func() {
		defer srv.accepts.Done()
		// The message's trace starts here, as a submit's over the API
		// starts at its request: a new one, as the sampler decides.
		span := srv.cfg.Tracing.Start("", telemetry.SpanSubmitSMPP, trace.SpanKindServer,
			attribute.String("smpp.command", owe[0].req.Command.String()), attribute.Int("switchboard.parts", len(owe)))
		defer span.End()
		now := srv.cfg.Clock.Now()
		sub, r := sh.Submission(content, dc, account, now)
		if r != nil {
			refused(span, r)
			srv.refuse(r, owe...)
			return
		}
		if !srv.cfg.Backend.Credentials().Open() {
			sub.SubmittedBy = account
		}
		sub.Trace = telemetry.Of(span)
		ctx, cancel := context.WithTimeout(context.Background(), srv.cfg.SubmitTimeout)
		defer cancel()
		m, _, err := srv.cfg.Backend.Submit(ctx, sub)
		if err != nil {
			r := refusalOf(err)
			refused(span, r)
			srv.refuse(r, owe...)
			return
		}
		span.SetAttributes(attribute.String("switchboard.message_id", m.ID))
		srv.cfg.Metrics.submits.WithLabelValues(accountLabel(who)).Inc()
		done := srv.cfg.Clock.Now()
		for _, o := range owe {
			srv.answer(o, smpp.StatusOK, &smpp.SMResp{MessageID: m.ID})
			srv.cfg.Metrics.submitTime.Observe(done.Sub(o.read).Seconds())
		}
	}()
}

// refused records on a submit's span the status its requests are refused
// with; a refusal of the node's own (ESME_RSYSERR: unavailable, an
// internal error), as an API submit's 5xx, fails it.
func refused(span trace.Span, r *Refusal) {
	span.SetAttributes(attribute.String("smpp.command_status", r.Status.String()))
	if r.Status == smpp.StatusSystemError {
		telemetry.Fail(span, errors.New(r.Why))
	}
}

// armExpiry sets the timer of the reassembly table's next expiry (srv.mu
// held).
func (srv *Server) armExpiry() {
	next := srv.table.Next()
	if next.IsZero() || (!srv.expireAt.IsZero() && !next.Before(srv.expireAt)) {
		return
	}
	if srv.stopExp != nil {
		srv.stopExp()
	}
	srv.expireAt = next
	srv.stopExp = srv.cfg.Clock.AfterFunc(next.Sub(srv.cfg.Clock.Now()), srv.expire)
}

// expire refuses the parts of messages whose wait ran out.
func (srv *Server) expire() {
	srv.mu.Lock()
	srv.expireAt, srv.stopExp = time.Time{}, nil
	gone := srv.table.Expire(srv.cfg.Clock.Now())
	srv.cfg.Metrics.partsHeld.Set(float64(srv.table.Held()))
	if !srv.closed {
		srv.armExpiry()
	}
	srv.mu.Unlock()
	for _, w := range gone {
		reason, why := "timeout", fmt.Sprintf("its next part did not come within %v of its latest (plus the account's submit interval)", srv.cfg.ReassemblyWait)
		if n, ok := windowBound(w); ok {
			reason = "window"
			why = fmt.Sprintf("the ESME sent parts 1-%d of %d, then nothing more while they waited for their answers "+
				"(never more than %d requests awaiting theirs on its session): its window is likely %d, smaller than "+
				"the message's parts, and a part is answered only once its whole message is stored",
				n, w.Key.Total, len(w.Parts), len(w.Parts))
		}
		srv.cfg.Metrics.incomplete.WithLabelValues(reason).Inc()
		srv.log.Warn("smpp long message refused: not every part came", "message", w.Key.String(), "reason", reason, "why", why)
		srv.refuse(refuse(smpp.StatusSubmitFailed, "%s: %s", w.Key, why), partsOwed(w)...)
	}
}

// refuseEach refuses the parts of messages gone (ESME_RSYSERR, why),
// each session's on a goroutine of its own, and returns once all are
// answered: an ESME that does not read holds back its own answers (up to
// the write timeout), not another's.
func (srv *Server) refuseEach(gone []Whole[owed], why string) {
	type part struct {
		r *Refusal
		o owed
	}
	bySession := map[*smpp.Session][]part{}
	for _, w := range gone {
		r := refuse(smpp.StatusSystemError, "%s: %s", w.Key, why)
		for _, o := range partsOwed(w) {
			bySession[o.s] = append(bySession[o.s], part{r, o})
		}
	}
	var wg sync.WaitGroup
	for _, parts := range bySession {
		wg.Go(func() {
			for _, p := range parts {
				srv.refuse(p.r, p.o)
			}
		})
	}
	wg.Wait()
}

// windowBound is whether the parts of an incomplete message stopped
// coming because the ESME's window is full of them, and how many came:
// they came on one session, in order from the first (1..n), and every
// request of that session awaiting its answer is one of them, as many
// as it ever had awaiting at once. Such an ESME waits for answers that
// come only once the message is whole (the listener never answers a part
// before its message is stored), so it never sends the rest. An ESME
// that sent parts 1..n and then simply nothing looks the same; one whose
// window was seen larger, or that skipped a part, does not.
func windowBound(w Whole[owed]) (int, bool) {
	s := w.Parts[0].Owed.s
	seqs := map[byte]bool{}
	for _, h := range w.Parts {
		if h.Owed.s != s {
			return 0, false
		}
		seqs[h.Seq] = true
	}
	for seq := 1; seq <= len(seqs); seq++ {
		if !seqs[byte(seq)] {
			return 0, false
		}
	}
	now, peak := s.Unanswered()
	return len(seqs), now == len(w.Parts) && peak == now
}

// query answers a query_sm about a message the account submitted.
func (srv *Server) query(c *conn, s *smpp.Session, req smpp.PDU) {
	q, _ := req.Body.(*smpp.Query)
	account, _, revoked := srv.account(c)
	if revoked {
		srv.reply(s, req, smpp.StatusInvalidBindState, nil)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), srv.cfg.SubmitTimeout)
	defer cancel()
	m, err := srv.cfg.Backend.Message(ctx, q.MessageID)
	// A message without a submitter (the embedding API's, a peer's
	// forward, one from before the node had credentials) is no account's:
	// answered only on a node without credentials, where none owns any.
	own := m.SubmittedBy == account || m.SubmittedBy == "" && srv.cfg.Backend.Credentials().Open()
	if err != nil || !own {
		srv.reply(s, req, smpp.StatusQueryFailed, nil)
		return
	}
	resp := &smpp.QueryResp{MessageID: m.ID, MessageState: smpp.StateEnroute}
	if m.State.Final() {
		resp.MessageState = StateOf(m)
		resp.FinalDate = smppTime(finalAt(m))
	}
	srv.reply(s, req, smpp.StatusOK, resp)
}

// finalAt is when final message m reached its state: the first entry of
// the last run of its history in that state (an SMSC's receipt noted
// after it is one more entry in the same state), its updated_at when it
// has no history. Not updated_at alone: such a note moves it on.
func finalAt(m messages.Message) time.Time {
	at := m.UpdatedAt
	for i := len(m.History) - 1; i >= 0 && m.History[i].State == m.State; i-- {
		at = m.History[i].At
	}
	return at
}

// smppTime is t as an absolute SMPP time in UTC.
func smppTime(t time.Time) string {
	t = t.UTC()
	return t.Format("060102150405") + fmt.Sprintf("%d00+", t.Nanosecond()/100_000_000)
}

// Kick wakes the receipt senders: a message may have become final.
func (srv *Server) Kick() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, ch := range srv.pumps {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// startPump starts the receipt sender of account unless it runs (srv.mu
// held).
func (srv *Server) startPump(account string) {
	if _, ok := srv.pumps[account]; ok {
		return
	}
	kick := make(chan struct{}, 1)
	srv.pumps[account] = kick
	srv.routines.Add(1)
	go func() {
		defer srv.routines.Done()
		srv.pump(account, kick)
	}()
}

// receivers are the sessions of account that take receipts: bound, not
// one whose ESME has unbound and that waits for the answers it is owed
// before it ends (a receipt sent there would be refused at once, and due
// again at once). None ends its sender (under the lock, so that a bind
// starts a new one).
func (srv *Server) receivers(account string) []*conn {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	var list []*conn
	for _, c := range srv.bound[account] {
		if c.s.State().Bound() {
			list = append(list, c)
		}
	}
	if len(list) == 0 || srv.closed {
		delete(srv.pumps, account)
		return nil
	}
	return list
}

// pump sends account's receipts while one of its sessions takes them:
// claim what is due, send each as deliver_sm over the account's
// receiver sessions in turn (their windows bound what is in flight),
// record each answer. A receipt not answered (the session ended, no
// response in time) is due again at once, for the next session; one the
// ESME refused for now after ReceiptRetry; one refused for good is
// given up (recorded failed).
func (srv *Server) pump(account string, kick chan struct{}) {
	log := srv.log.With("account", account)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-srv.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	turn := 0
	for {
		list := srv.receivers(account)
		if list == nil {
			return
		}
		now := srv.cfg.Clock.Now()
		claim, err := srv.cfg.Store.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkReceipt, Target: account,
			Owner: srv.cfg.Owner, Limit: srv.cfg.Session.Window * len(list), Now: now, Lease: srv.cfg.ReceiptLease})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("receipts not claimed", "err", err)
		}
		if len(claim.Work) == 0 {
			wait := srv.cfg.ReceiptPoll
			if !claim.NextDue.IsZero() && claim.NextDue.Sub(now) < wait {
				wait = max(claim.NextDue.Sub(now), 10*time.Millisecond)
			}
			if !srv.sleep(ctx, kick, wait) {
				return
			}
			continue
		}
		type sent struct {
			w    persistence.Work
			call *smpp.Call
			err  error
		}
		calls := make([]sent, len(claim.Work))
		for i, w := range claim.Work {
			c := list[turn%len(list)]
			turn++
			calls[i].w = w
			calls[i].call, calls[i].err = c.s.Send(ctx, ReceiptOf(w.Message, w.CreatedAt))
		}
		outcomes := make([]persistence.Outcome, 0, len(calls))
		for _, x := range calls {
			// Fenced by its claim: once the lease ran out and another
			// instance claimed the receipt, that claim speaks for it.
			o := persistence.Outcome{Kind: persistence.WorkReceipt, Target: account, MessageID: x.w.MessageID,
				Owner: srv.cfg.Owner, Epoch: x.w.LeaseEpoch}
			var resp smpp.PDU
			err := x.err
			if err == nil {
				resp, err = x.call.Result()
			}
			var de *smpp.DecodeError
			if errors.As(err, &de) && (resp.Command == smpp.DeliverSMResp || resp.Command == smpp.GenericNack) {
				// The ESME answered, with its header's command_status;
				// only the body could not be read (and a deliver_sm_resp's
				// carries nothing of use). Taken for no answer, the
				// receipt was sent again at once, and so answered again:
				// a loop without a pause.
				err = nil
			}
			switch {
			case err != nil:
				o.Result, o.RetryAt, o.Detail = persistence.ResultRetry, srv.cfg.Clock.Now(), "receipt not answered: "+err.Error()
			case resp.Status == smpp.StatusOK:
				o.Result, o.Detail = persistence.ResultDelivered, "receipt sent"
			case resp.Status.Temporary() || resp.Status == smpp.StatusInvalidBindState:
				// ESME_RINVBNDSTS: an ESME that reads the receipt before it
				// has taken in its bind's answer; later it will take it.
				o.Result, o.RetryAt, o.Detail = persistence.ResultRetry, srv.cfg.Clock.Now().Add(srv.cfg.ReceiptRetry), "receipt refused for now: "+resp.Status.String()
			default:
				o.Result, o.Detail = persistence.ResultFailed, "receipt refused: "+resp.Status.String()
			}
			srv.cfg.Metrics.receipts.WithLabelValues(string(o.Result)).Inc()
			outcomes = append(outcomes, o)
		}
		// The outcomes are recorded even when the node stops: what the
		// ESME answered is known.
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = srv.cfg.Store.CompleteWork(wctx, srv.cfg.Clock.Now(), outcomes)
		wcancel()
		if err != nil {
			log.Warn("receipt outcomes not recorded (the receipts are sent again when their lease ends)", "err", err)
			if !srv.sleep(ctx, nil, srv.cfg.ReceiptPoll) {
				return
			}
		}
	}
}

// sleep waits d, a kick or the stop; false on the stop.
func (srv *Server) sleep(ctx context.Context, kick chan struct{}, d time.Duration) bool {
	done := make(chan struct{})
	stopTimer := srv.cfg.Clock.AfterFunc(d, func() { close(done) })
	defer stopTimer()
	select {
	case <-done:
	case <-kick:
	case <-ctx.Done():
		return false
	}
	return true
}

// Close stops the listener: no new connection; the parts of long
// messages held are refused (ESME_RSYSERR); submissions on their way to
// the intake get their commit and their answer (within ctx); then every
// session is unbound and closed, and the receipt senders stop.
func (srv *Server) Close(ctx context.Context) error {
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		return nil
	}
	srv.closed = true
	if srv.stopExp != nil {
		srv.stopExp()
	}
	// Parts still held: their messages cannot come whole now (a part
	// that comes from now on is refused as it comes). Refused before
	// their sessions are unbound, so that the ESME hears of them.
	gone := srv.table.Flush()
	srv.cfg.Metrics.partsHeld.Set(0)
	srv.mu.Unlock()
	srv.refuseEach(gone, "the node is stopping before every part came")
	close(srv.stop)
	err := srv.cfg.Listener.Close()
	done := make(chan struct{})
	go func() { srv.accepts.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, errors.New("smpp listener: submissions did not finish in time"))
	}
	srv.mu.Lock()
	conns := make([]*conn, 0, len(srv.conns))
	for c := range srv.conns {
		conns = append(conns, c)
	}
	srv.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_ = c.s.Unbind(uctx)
			c.s.Close()
		}()
	}
	wg.Wait()
	srv.routines.Wait()
	srv.peer.close()
	return err
}
