package smppout

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/smpp"
)

// Sender delivers a message to an actor: the delivery workers'
// supervisor, which is spawned after the clients (the node reads its PID
// at each send).
type Sender interface {
	Send(msg any)
}

// Config is what a Client needs.
type Config struct {
	// Frontend is the smpp frontend (its URL parsed by
	// messages.ParseSMPPURL, its Secret the bind's password).
	Frontend messages.Frontend
	// Store records the SMSC's delivery receipts.
	Store persistence.ReceiptStore
	Clock clock.Clock
	// Logger gets component=smpp and the frontend's name.
	Logger  *slog.Logger
	Metrics *Metrics
	// Fence, when set, is this instance's partitions of the ring
	// (*ring.Shares): its part of the frontend's submit rate is the part
	// of the ring its delivery partition covers (see Share); nil: all of
	// it.
	Fence ring.Fence
	// Workers, when set, is the delivery workers' supervisor: each time
	// the client has bound, and each time it lost its bind, it is sent a
	// messages.Kick for the frontend (its worker claims again, or stops
	// claiming and offering to take new work).
	Workers Sender
	// Dial opens the connection to the SMSC (default: a net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Reconnect paces the reconnects after a failed dial or bind or a
	// lost link (zero: DefaultReconnect). MaxAttempts is not used: the
	// client never gives up.
	Reconnect ring.Reconnect
	// ResponseTimeout bounds the dial, the bind and each response (zero:
	// the session's default, smpp.DefaultSessionConfig).
	ResponseTimeout time.Duration
	// ReceiptWait is how long a receipt whose SMSC id names no stored
	// message yet waits in memory for the commit of its message's verdict
	// (SMSCs send a receipt right after the submit_sm_resp, before the
	// group commit, some before the submit_sm_resp, and to any bound
	// session of the account: another instance's, whose commit this one
	// does not see; zero: DefaultReceiptWait). See store.
	ReceiptWait time.Duration
	// Refs are the references of the frontend's long texts (see Refs),
	// shared by its clients (Clients gives each client of a frontend its
	// frontend's); nil: a counter of the client's own, starting at a value
	// drawn from Seed.
	Refs *Refs
	// Seed seeds the reconnect jitter and the first reference of a Refs
	// the client makes.
	Seed uint64
}

// DefaultReconnect paces a client's reconnects: 1 s doubling up to 60 s,
// up to half of each wait taken off at random, so that a site's instances
// do not all come back to a restarted SMSC at once.
func DefaultReconnect() ring.Reconnect {
	return ring.Reconnect{MaxAttempts: 1, Min: time.Second, Max: time.Minute, Jitter: 0.5}
}

// noIDLogEvery is how often at most a client logs the submit_sm it
// accepted without a message id (idless): 10 min. An SMSC that gives none
// gives none for every message, a line each would flood the log; the
// metric and each message's history count them all.
const noIDLogEvery = 10 * time.Minute

func (c *Config) defaults() {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Dial == nil {
		d := &net.Dialer{}
		c.Dial = d.DialContext
	}
	if c.Reconnect == (ring.Reconnect{}) {
		c.Reconnect = DefaultReconnect()
	}
	if c.ResponseTimeout <= 0 {
		c.ResponseTimeout = smpp.DefaultSessionConfig(smpp.RoleESME).ResponseTimeout
	}
	if c.ReceiptWait <= 0 {
		c.ReceiptWait = DefaultReceiptWait
	}
	if c.Refs == nil {
		c.Refs = newRefs(c.Seed, c.Frontend.Name)
	}
}

// newRefs is the Refs of frontend fe, starting at a value drawn from seed
// (the node's is its start time: a restart begins elsewhere).
func newRefs(seed uint64, fe string) *Refs {
	return NewRefs(byte(rand.New(rand.NewPCG(seed, messages.TokenOf("refs "+fe))).Uint32()))
}

// Client is one smpp frontend's connection on this instance: it dials
// and binds, keeps the link up (reconnecting with backoff and jitter),
// submits the messages the delivery worker hands it, and records the
// SMSC's receipts. Its methods are safe for concurrent use.
type Client struct {
	cfg  Config
	opts messages.SMPPOptions
	log  *slog.Logger

	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{}
	// errands record the receipts (Close stops them).
	errands errands

	mu      sync.Mutex
	sess    *smpp.Session
	wake    chan struct{} // closed (and replaced) when sess changes
	lastErr error
	limiter Limiter
	// noID is the log of the submit_sm accepted without a message id
	// (idless): when it last logged one, and how many since.
	noID struct {
		logged time.Time
		since  int
	}
	// throttle pauses the submits after ESME_RTHROTTLED.
	throttle Throttle
	// recent are the SMSC ids accepted in the last ReceiptWait, with
	// when; committed those whose verdict was committed in that time.
	// Each has its entries in time order too (the queues), for prune to
	// take the old ones off their heads. messageOf names the message of
	// each recent id that a Submit of this client's was given (for the
	// log of a receipt lost).
	recent, committed   map[string]time.Time
	recentQ, committedQ queue
	messageOf           map[string]string
	// early are the receipts held for their message (see store), by SMSC
	// id, held of them at most maxHeld. stopRecheck stops the recheck of
	// them armed (nil: none is); rechecks counts the one armed or running,
	// for the client's end (endRechecks), after which ended arms none.
	early       map[string][]early
	held        int
	maxHeld     int
	stopRecheck func() bool
	rechecks    sync.WaitGroup
	ended       bool
	// stopBy is when the node's stop must end, on the client's clock
	// (zero: no stop under way): see Stopping.
	stopBy time.Time
}

// New starts the client of cfg.Frontend: it dials at once.
func New(cfg Config) (*Client, error) {
	cfg.defaults()
	if cfg.Store == nil {
		return nil, errors.New("smpp frontend: a store is required")
	}
	o, err := messages.ParseSMPPURL(cfg.Frontend.URL)
	if err != nil {
		return nil, fmt.Errorf("smpp frontend %s: %w", cfg.Frontend.Name, err)
	}
	if err := cfg.Reconnect.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, opts: o, log: cfg.Logger.With("component", "smpp", "frontend", cfg.Frontend.Name),
		closing: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}),
		lastErr: errors.New("connecting"), recent: map[string]time.Time{}, committed: map[string]time.Time{},
		messageOf: map[string]string{}, early: map[string][]early{}, maxHeld: maxHeldReceipts}
	// The frontend's gauges are this client's from now on (Get retired the
	// one it replaces): no session yet, nothing outstanding.
	cfg.Metrics.setState(cfg.Frontend.Name, smpp.StateClosed)
	cfg.Metrics.windowInUse(cfg.Frontend.Name, 0)
	go c.run(rand.New(rand.NewPCG(cfg.Seed, messages.TokenOf(cfg.Frontend.Name))))
	return c, nil
}

// Options are the frontend's settings as its URL gives them.
func (c *Client) Options() messages.SMPPOptions { return c.opts }

// Bound reports whether the client is bound now.
func (c *Client) Bound() bool { return c.State().Bound() }

// State is the bind state of the client's connection (closed while it
// has none).
func (c *Client) State() smpp.BindState {
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s == nil {
		return smpp.StateClosed
	}
	return s.State()
}

// Stopping tells the client that the node's stop has begun and must end
// by by, on the client's clock: when it closes, it gives the store the
// stop's time left for the receipts it answered, but stopReserve for the
// rest of the stop (at least closeFloor), instead of closeStoreWait (see
// Close). Told an earlier end while it closes (the stop was cut short),
// it gives the store no more than that.
func (c *Client) Stopping(by time.Time) {
	c.mu.Lock()
	c.stopBy = by
	c.mu.Unlock()
	c.errands.shorten(c.cfg.Clock, c.closeWait(c.cfg.Clock.Now()))
}

// Close unbinds (waiting at most the response timeout) and stops the
// client; a Submit under way ends with a retry. A receipt not answered
// yet that is being recorded is not (its store call is canceled: the SMSC
// sends it again); the receipts answered already (held for their
// message's verdict) are recorded first: those of a verdict committed
// (Committed) and those a last look-up finds, the store given the time
// the node's stop has left (Stopping, less stopReserve), or closeStoreWait
// outside a stop, for them once the client is unbound (those it has not
// recorded by then are lost, each logged). None runs on the store once
// Close returns. Safe to call more than once, at once too: each call
// returns once the client has stopped.
func (c *Client) Close() {
	c.closeOnce.Do(func() { close(c.closing) })
	<-c.done
	c.errands.stop()
}

// run is the client's connection loop. The reconnects after failures in
// a row wait longer and longer (Reconnect); a session that stayed bound
// at least Reconnect.Max ends the run, one dropped sooner (an SMSC that
// takes each bind and drops it at once) is one more failure in it.
func (c *Client) run(rng *rand.Rand) {
	defer close(c.done)
	defer c.endRechecks()
	failures := 0
	for {
		select {
		case <-c.closing:
			c.set(nil, errors.New("the frontend is stopping"))
			return
		default:
		}
		sess, err := c.connect()
		if err == nil {
			boundAt := c.cfg.Clock.Now()
			c.set(sess, nil)
			c.log.Info("bound to the SMSC", "addr", c.opts.Addr, "bind", c.opts.Bind)
			c.changed()
			select {
			case <-sess.Done():
				err = sess.Err()
				if err == nil {
					err = errors.New("the session ended")
				}
				c.log.Warn("the SMSC connection ended", "err", err)
				c.set(nil, err)
				c.changed()
				if c.cfg.Clock.Now().Sub(boundAt) >= c.cfg.Reconnect.Max {
					failures = 0
				}
			case <-c.closing:
				ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ResponseTimeout)
				_ = sess.Unbind(ctx)
				cancel()
				c.set(nil, errors.New("the frontend is stopping"))
				return
			}
		} else {
			c.log.Warn("cannot bind to the SMSC", "addr", c.opts.Addr, "err", err)
		}
		c.set(nil, err)
		failures++
		if !c.sleep(context.Background(), c.cfg.Reconnect.Delay(failures, rng)) {
			c.set(nil, errors.New("the frontend is stopping"))
			return
		}
	}
}

// changed kicks the frontend's worker.
func (c *Client) changed() {
	if c.cfg.Workers != nil {
		c.cfg.Workers.Send(&messages.Kick{Frontend: c.cfg.Frontend.Name})
	}
}

// connect dials and binds.
func (c *Client) connect() (*smpp.Session, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ResponseTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	fe := c.cfg.Frontend.Name
	conn, err := c.cfg.Dial(ctx, "tcp", c.opts.Addr)
	if err != nil {
		c.cfg.Metrics.bind(fe, "error")
		return nil, err
	}
	if c.opts.TLS {
		tcfg, err := c.tlsConfig()
		if err != nil {
			_ = conn.Close()
			c.cfg.Metrics.bind(fe, "error")
			return nil, err
		}
		tc := tls.Client(conn, tcfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			c.cfg.Metrics.bind(fe, "error")
			return nil, fmt.Errorf("TLS: %w", err)
		}
		conn = tc
	}
	sc := smpp.DefaultSessionConfig(smpp.RoleESME)
	// The window bounds the SMSC's requests in flight too (its receipts,
	// each awaiting its commit): an SMSC holds its deliver_sm to the
	// window agreed with the ESME; one beyond it is answered
	// ESME_RTHROTTLED.
	sc.Window, sc.InWindow = c.opts.Window, c.opts.Window
	sc.EnquireLink, sc.ResponseTimeout = c.opts.EnquireLink, c.cfg.ResponseTimeout
	sc.Clock, sc.Logger, sc.Handler = c.cfg.Clock, c.log, c.handle
	sc.Observe = func(sent bool, p smpp.PDU) {
		c.cfg.Metrics.pdu(fe, sent, p)
		if !sent && p.Command == smpp.SubmitSMResp && p.Status == smpp.StatusOK {
			if r, ok := p.Body.(*smpp.SMResp); ok && r.MessageID != "" {
				c.noteRecent(r.MessageID)
			}
		}
	}
	sc.OnState = func(st smpp.BindState) { c.cfg.Metrics.setState(fe, st) }
	sess, err := smpp.NewSession(conn, sc)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	cmd := smpp.BindTransceiver
	if c.opts.Bind == messages.BindTransmitter {
		cmd = smpp.BindTransmitter
	}
	c.cfg.Metrics.setState(fe, smpp.StateOpen)
	_, err = sess.Bind(ctx, cmd, smpp.Bind{SystemID: c.opts.SystemID, Password: c.cfg.Frontend.Secret, SystemType: c.opts.SystemType})
	if err != nil {
		_ = sess.Close()
		var se *smpp.StatusError
		if errors.As(err, &se) {
			c.cfg.Metrics.bind(fe, "refused")
			return nil, fmt.Errorf("%s refused: %s", cmd, se.Status)
		}
		c.cfg.Metrics.bind(fe, "error")
		return nil, err
	}
	c.cfg.Metrics.bind(fe, "bound")
	return sess, nil
}

// tlsConfig is the TLS configuration of a connection: the SMSC's
// certificate checked against tls_ca, read at each connect (a file put in
// place or renewed is taken at the next; an unreadable one is the
// connect's error, its reconnects wait as after any failure), else the
// system's roots.
func (c *Client) tlsConfig() (*tls.Config, error) {
	host, _, _ := net.SplitHostPort(c.opts.Addr)
	cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if c.opts.TLSCA == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(c.opts.TLSCA)
	if err != nil {
		return nil, fmt.Errorf("tls_ca: %w", err)
	}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls_ca %s holds no PEM certificate", c.opts.TLSCA)
	}
	return cfg, nil
}

// set records the current session (nil: none) and wakes the submits
// waiting for one.
func (c *Client) set(s *smpp.Session, err error) {
	c.mu.Lock()
	c.sess = s
	if err != nil {
		c.lastErr = err
	}
	close(c.wake)
	c.wake = make(chan struct{})
	c.mu.Unlock()
	if s == nil {
		c.cfg.Metrics.setState(c.cfg.Frontend.Name, smpp.StateClosed)
		c.cfg.Metrics.windowInUse(c.cfg.Frontend.Name, 0)
	}
}

// session waits for a bound session.
func (c *Client) session(ctx context.Context) (*smpp.Session, error) {
	for {
		c.mu.Lock()
		s, ch, last := c.sess, c.wake, c.lastErr
		c.mu.Unlock()
		if s != nil && s.State().Bound() {
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("not bound to the SMSC (%v)", last)
		}
	}
}

// sleep waits d on the client's clock; false when ctx ended or the
// client is closing.
func (c *Client) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	ch := make(chan struct{})
	stop := c.cfg.Clock.AfterFunc(d, func() { close(ch) })
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	case <-c.closing:
	}
	stop()
	return false
}

// Submit sends one message as its submit_sm (one per part) and returns
// the verdict on it (see Verdict), with note (the resend mark) added
// after the verdict's own and, when there is one, marked a resend
// (DeliveryResult.Resend, which its history entry keeps). It
// returns within ctx's deadline: a message not sent by then is a retry,
// deferred when the frontend's pacing kept it (see submit). A deferred
// message was not sent, so not resent either: its note keeps only what
// the mark says of the attempt before; its entry's mark tells the next
// claim that the deferred one was a resend (ResendNote).
func (c *Client) Submit(ctx context.Context, out messages.Outgoing, note string) messages.DeliveryResult {
	v := c.submit(ctx, out)
	v.Resend = note != ""
	if v.Deferred && note != "" {
		note = noVerdict(out.Attempt - 1)
	}
	v.ID = out.ID
	if v.Note != "" && note != "" {
		v.Note += "; "
	}
	v.Note += note
	return v
}

// share is this instance's part of the frontend's submit rate, in [0, 1].
func (c *Client) share() float64 {
	if c.cfg.Fence == nil {
		return 1
	}
	rc, ok := c.cfg.Fence.Claim(persistence.WorkDelivery)
	if !ok || rc == nil {
		return 0
	}
	return Share(rc.Ranges)
}

// InFlight is how many messages the frontend's worker may have under way
// on this instance, each with timeout to be delivered in: the window, or
// fewer when this instance's share of the submit rate sends fewer in time
// (see InFlight).
func (c *Client) InFlight(timeout time.Duration) int {
	if c.opts.Rate <= 0 {
		return c.opts.Window
	}
	rate := c.opts.Rate * c.share()
	if rate <= 0 {
		return 1 // no share of the rate: nothing goes (see submit)
	}
	return InFlight(c.opts.Window, rate, timeout)
}

// PacedUntil is until when the frontend takes no new message now that
// has timeout to be delivered in (zero: it takes one): the SMSC throttled
// it (Throttle: its submits wait), or the submit rate leaves no slot in
// time to such a message (the slots reserved reach past its SlotDeadline:
// the parts of long texts). Its worker then claims nothing, as while the
// client is not bound: a message claimed would wait on its lease, or be a
// retry without being sent (deferred: it uses no attempt, see kept).
func (c *Client) PacedUntil(timeout time.Duration) time.Time {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	until := c.throttle.Until(now)
	if c.opts.Rate > 0 {
		if p := c.limiter.Paced(now, SlotDeadline(now, now.Add(timeout)).Sub(now)); p.After(until) {
			until = p
		}
	}
	return until
}

// submit sends out and returns the verdict on it. A message the SMSC
// throttled and has nothing of (Verdict) is deferred: the frontend is
// busy, the message not attempted; it asks to be tried again once the
// pause ends (RetryAfter). So is one that the frontend's pacing kept from
// being sent (kept): the pause after a throttle, the submit rate, or this
// instance's share of it (none: no share of the ring) left no slot in its
// time, or the client closed while it waited for its slot. One not sent
// because the client is not bound is an ordinary retry that uses its
// attempt, as a webhook's refused connection does: the SMSC cannot be
// reached, which is what attempts are for (docs/smpp.md, "The
// connection"); its worker claims nothing meanwhile, so only a message
// claimed as the link drops sees it. Once a part of a long text is answered
// ESME_RTHROTTLED, the text's later parts are not sent: the text is
// retried whole, and they would go into the pause.
func (c *Client) submit(ctx context.Context, out messages.Outgoing) messages.DeliveryResult {
	fe := c.cfg.Frontend.Name
	// The parts, to count their slots. A long text takes its reference
	// (Refs.Next) only once it goes, below: one our pacing keeps, or one
	// not sent for want of a bind, takes none, so that the counter comes
	// back to a reference only after 256 long texts sent.
	long := false
	sms, err := Submits(out, c.opts, func() byte { long = true; return 0 })
	if err != nil {
		return messages.DeliveryResult{Status: messages.Failed, Reason: "cannot be sent over SMPP: " + err.Error()}
	}
	sess, err := c.session(ctx)
	if err != nil {
		return messages.DeliveryResult{Status: messages.Retry, Reason: err.Error()}
	}
	// The parts' slots: at, then every apart (unpaced: now, 0 apart), none
	// before a pause after ESME_RTHROTTLED ends.
	share := 1.0
	if c.opts.Rate > 0 {
		if share = c.share(); share <= 0 {
			// Our pacing (the ring gives this instance none of the rate),
			// not the SMSC's: not attempted. When a share comes back is the
			// ring's to say: the retry waits the backoff.
			return messages.DeliveryResult{Status: messages.Retry, Deferred: true,
				Reason: "this instance holds none of the ring's delivery work now: no share of the submit rate"}
		}
	}
	now := c.cfg.Clock.Now()
	deadline, has := ctx.Deadline()
	if !has {
		deadline = now.Add(time.Hour)
	}
	slotsBy, rate := SlotDeadline(now, deadline), c.opts.Rate*share
	ok := true
	c.mu.Lock()
	at, every := now, time.Duration(0)
	paused := c.throttle.Until(now)
	if !paused.IsZero() {
		at = paused
	}
	switch {
	case at.After(slotsBy):
		ok = false
	case rate > 0:
		at, every, ok = c.limiter.Reserve(at, rate, len(sms), slotsBy)
	}
	var fits time.Time
	ever := true
	if !ok {
		fits, ever = c.limiter.Fits(rate, len(sms), slotsBy.Sub(now))
	}
	c.mu.Unlock()
	if !ok {
		return c.kept(now, slotsBy.Sub(now), len(sms), share, paused, fits, ever)
	}
	if long {
		if sms, err = Submits(out, c.opts, c.cfg.Refs.Next); err != nil {
			return messages.DeliveryResult{Status: messages.Failed, Reason: "cannot be sent over SMPP: " + err.Error()}
		}
	}
	parts := make([]Part, len(sms))
	var unread error // why the body of an ESME_ROK could not be read
	calls := make([]*smpp.Call, len(sms))
	sent := make([]time.Time, len(sms))
	for i, sm := range sms {
		if !c.sleep(ctx, at.Add(time.Duration(i)*every).Sub(c.cfg.Clock.Now())) {
			if i == 0 {
				// Nothing sent: our pacing held it until the client closed
				// (the frontend changed or gone, the node stopping).
				return messages.DeliveryResult{Status: messages.Retry, Deferred: true, Reason: "stopped while waiting for the submit rate"}
			}
			parts[i] = Part{NotSent: true, Err: errors.New(unsentText(i, c.isClosing()))}
			break
		}
		if throttledAny(calls[:i]) {
			for j := i; j < len(sms); j++ {
				parts[j] = Part{NotSent: true, Err: errors.New("not sent: an earlier part was throttled")}
			}
			break
		}
		sent[i] = c.cfg.Clock.Now()
		if calls[i], parts[i].Err = sess.Send(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: sm}); parts[i].Err != nil {
			break
		}
	}
	c.cfg.Metrics.windowInUse(fe, sess.Outstanding())
	for i, call := range calls {
		switch {
		case call == nil:
			switch {
			case parts[i].NotSent:
			case parts[i].Err == nil:
				parts[i] = Part{NotSent: true, Err: errors.New("not sent: an earlier part failed")}
			default:
				c.cfg.Metrics.submit(fe, "not_sent", -1)
			}
			continue
		}
		select {
		case <-call.Done():
			resp, err := call.Result()
			switch parts[i] = PartOf(resp, err); {
			case err == nil || parts[i].Err != nil:
			case resp.Status == smpp.StatusOK:
				unread = err // logged with the id it did not give (idless)
			default:
				c.log.Warn("a submit_sm_resp whose body could not be read: its command_status stands", "message_id", out.ID,
					"status", resp.Status.String(), "err", err)
			}
		case <-ctx.Done():
			parts[i].Err = fmt.Errorf("no response within the delivery timeout: %w", ctx.Err())
		}
		if parts[i].Err != nil {
			c.cfg.Metrics.submit(fe, "no_response", -1)
		} else {
			c.answered(sent[i], parts[i].Resp.Status)
			c.cfg.Metrics.submit(fe, statusLabel(parts[i].Resp.Status), c.cfg.Clock.Now().Sub(sent[i]).Seconds())
		}
	}
	c.cfg.Metrics.windowInUse(fe, sess.Outstanding())
	v := Verdict(out.ID, parts)
	c.noteMessage(out.ID, v.SMSCMessageIDs)
	if v.Status == messages.Delivered && len(v.SMSCMessageIDs) < len(parts) {
		c.idless(out.ID, len(parts)-len(v.SMSCMessageIDs), unread)
	}
	if v.Deferred {
		now := c.cfg.Clock.Now()
		c.mu.Lock()
		if until := c.throttle.Until(now); !until.IsZero() {
			v.RetryAfter = until.Sub(now) // the pause its throttle began (or the one in force)
		}
		c.mu.Unlock()
	}
	return v
}

// idless counts the n submit_sm of message id that the SMSC accepted
// without a message id, and logs them, at most once per noIDLogEvery (the
// first at once), with how many there were since the last line; unread,
// when set, is why a body could not be read.
func (c *Client) idless(id string, n int, unread error) {
	c.cfg.Metrics.withoutID(c.cfg.Frontend.Name, n)
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	c.noID.since += n
	since := c.noID.since
	log := c.noID.logged.IsZero() || now.Sub(c.noID.logged) >= noIDLogEvery
	if log {
		c.noID.logged, c.noID.since = now, 0
	}
	c.mu.Unlock()
	if !log {
		return
	}
	attrs := []any{"message_id", id, "since", since, "every", noIDLogEvery}
	if unread != nil {
		attrs = append(attrs, "err", unread)
	}
	c.log.Warn("the SMSC accepted a submit_sm but gave no message id: its receipts cannot be matched to the message", attrs...)
}

// unsentText is why part i (from 0) of a text was not sent: its wait for
// its slot ended, the client closing (closing) or the submit's time
// running out, after its parts before it were sent (the SMSC may have
// them: the retry uses its attempt, see Verdict).
func unsentText(i int, closing bool) string {
	why := "its delivery time ran out"
	if closing {
		why = "the client closed"
	}
	sent := "part 1 was sent"
	switch {
	case i == 2:
		sent = "parts 1 and 2 were sent"
	case i > 2:
		sent = fmt.Sprintf("parts 1 to %d were sent", i)
	}
	return "not sent: " + why + " while it waited for its slot at the submit rate; " + sent
}

// isClosing reports whether Close was called.
func (c *Client) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// kept is the verdict on a message of n parts that the frontend's pacing
// keeps from being sent in time (its slots would come past their
// SlotDeadline, within from now): deferred, not attempted, as the SMSC
// has nothing of it and it is our pacing, not a failure of the SMSC's, so
// that a frontend's own rate never fails a message max_attempts. The retry
// is asked for (RetryAfter) when it would find its slots: once the pause
// after ESME_RTHROTTLED ends (paused, when in force) and the slots reserved
// before it let its own come in time (fits: Limiter.Fits); ever is false
// when its slots span more than within at this instance's share of the
// rate: then it is an ordinary retry that uses its attempt, its reason
// saying so. Nothing transient keeps such a text (the rate or share is
// too low for the delivery time), so waiting would only add a deferral to
// its history every backoff until its validity ends; spending its
// attempts fails it max_attempts within minutes, for an operator to raise
// the rate or --webhook-timeout and resubmit it.
func (c *Client) kept(now time.Time, within time.Duration, n int, share float64, paused, fits time.Time, ever bool) messages.DeliveryResult {
	v := messages.DeliveryResult{Status: messages.Retry, Deferred: true}
	switch {
	case !ever:
		v.Deferred = false
		v.Reason = fmt.Sprintf("its %d parts take %v at the submit rate (%g/s, %.0f%% of it this instance's), more than the %v left for its slots (the first half of its delivery time)",
			n, time.Duration(n-1)*time.Duration(float64(time.Second)/(c.opts.Rate*share)), c.opts.Rate, 100*share, within.Round(time.Millisecond))
		return v
	case !paused.IsZero():
		v.Reason = fmt.Sprintf("the SMSC throttled the frontend's submits: they wait until %s, past this one's time", paused.UTC().Format(time.RFC3339Nano))
		if fits.Before(paused) {
			fits = paused
		}
	default:
		v.Reason = fmt.Sprintf("the submit rate (%g/s, %.0f%% of it this instance's) leaves no slot in time", c.opts.Rate, 100*share)
	}
	v.RetryAfter = max(fits.Sub(now), 0)
	return v
}

// throttledAny reports whether one of calls has been answered
// ESME_RTHROTTLED already (without waiting for those not answered yet).
func throttledAny(calls []*smpp.Call) bool {
	for _, call := range calls {
		select {
		case <-call.Done():
			if p := PartOf(call.Result()); p.Err == nil && p.Resp.Status == smpp.StatusThrottled {
				return true
			}
		default:
		}
	}
	return false
}

// answered takes the SMSC's answer st to a submit_sm sent at sent into
// the pause of the frontend's submits (Throttle).
func (c *Client) answered(sent time.Time, st smpp.Status) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	paused := c.throttle.Answered(now, sent, st)
	until := c.throttle.Until(now)
	c.mu.Unlock()
	if paused {
		c.log.Info("the SMSC throttles: new submits wait", "until", until, "pause", until.Sub(now))
	}
}
