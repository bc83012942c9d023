package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Bus is the node's connection to the delivery bus: the stream, one
// durable pull consumer per frontend, and whether the bus is up. It
// reconnects by itself for good; while it is down Up is false (the relay
// waits, the workers claim from the store) and a log line and
// switchboard_bus_up say so. Safe for concurrent use.
type Bus struct {
	cfg Config
	log *slog.Logger
	m   *Metrics
	// workers and relay are told whenever the bus goes up or down.
	workers Sender
	relay   atomic.Pointer[Relayer]

	nc *nats.Conn
	js jetstream.JetStream

	up atomic.Bool
	// logged says the bus was logged up or down once: a bus that starts
	// down (the first connect failed) never goes from up to down, and is
	// logged at the first check that knows why (the client reports its
	// connect error a moment after Open, a second later for a server that
	// refused the connection), or CheckEvery after opened without it. The
	// keeper's alone.
	logged bool
	opened time.Time
	// notReady is the error last logged for a stream that is not ready
	// (a connection whose stream cannot be made or brought up to date):
	// each check tries again, the log says so once per error, not at
	// every check. The keeper's alone.
	notReady string
	// degraded says publishes keep failing with the connection up (the
	// relay's Publishes): Up is false until one succeeds.
	degraded atomic.Bool
	// stale says the stream must be made sure of again: the connection
	// was lost (or a publish found no stream) since it last was.
	stale     atomic.Bool
	changed   chan struct{}
	stop      chan struct{}
	closeOnce sync.Once
	done      chan struct{}

	mu        sync.Mutex
	consumers map[string]jetstream.Consumer
	// making are the consumers being made sure of (consumer), by
	// frontend: one that forget, forgetConsumers or the stop of the
	// frontend's last worker drops while it is made is not kept in
	// consumers (it came back after the frontend's last worker stopped,
	// or was made before the failure or reconnect that dropped it).
	making map[string]*making
	// gauged are the frontends whose consumer counts the gauges show:
	// only frontends served (set under mu, as served is).
	gauged map[string]bool
	// served counts the workers of each frontend this instance runs
	// (Serve): the keeper makes sure of their consumers, and reads their
	// counts, whether they fetched yet or not.
	served map[string]int
	// lastErr is why the stream is not ready (the connection up).
	lastErr string
	// connErr is why the connection is not up: the client's last failed
	// connect or the error it lost the connection with.
	connErr string
	// degradedWhy is why the bus is degraded: the last publish's error.
	degradedWhy string
}

// errDown is what a publish or a fetch returns while the bus is down.
var errDown = errors.New("the delivery bus is down")

// Work is the document of a bus message: one outbox row of delivery work.
type Work struct {
	ID       string `json:"id"`
	Frontend string `json:"frontend"`
	Row      int64  `json:"row"`
}

// Sender delivers a message to an actor: the delivery workers'
// supervisor, which is spawned after the bus (the node reads its PID at
// each send).
type Sender interface {
	Send(msg any)
}

// Open connects to the bus (a server that is down is waited for in the
// background: Open does not fail for it) and starts the keeper that makes
// sure of the stream after every (re)connect. Whenever the bus goes up or
// down it kicks its relay (StartRelay) and, when workers is set, sends
// it a messages.Kick for every delivery worker: the workers switch
// between the bus and claims from the store.
func Open(cfg Config, m *Metrics, workers Sender) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Bus{cfg: cfg, log: cfg.Logger.With("component", "bus", "stream", cfg.Stream), m: m, workers: workers,
		changed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		consumers: map[string]jetstream.Consumer{}, making: map[string]*making{}, served: map[string]int{},
		gauged: map[string]bool{}, opened: time.Now()}
	connected := func(nc *nats.Conn) {
		b.mu.Lock()
		b.connErr = ""
		b.mu.Unlock()
		b.recheck(nc)
	}
	nc, err := nats.Connect(cfg.URL, cfg.options(
		nats.ConnectHandler(connected), nats.ReconnectHandler(connected),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			b.connFailed(err)
			b.recheck(nil)
		}),
		// Each failed (re)connect, the first one too (RetryOnFailedConnect
		// retries it in the background, and Connect returns no error).
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			b.connFailed(err)
			b.signal()
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			b.connFailed(nc.LastError())
			b.signal()
		}),
	)...)
	if err != nil {
		return nil, field.Wrap("URL", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, field.Wrap("URL", err)
	}
	b.nc, b.js = nc, js
	if m != nil {
		m.up.Set(0)
	}
	go b.keep()
	b.signal()
	return b, nil
}

// recheck makes the keeper make sure of the stream again even if the bus
// is up by then: a server that came back at once may have lost it.
func (b *Bus) recheck(*nats.Conn) {
	b.stale.Store(true)
	b.signal()
}

func (b *Bus) signal() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

func (b *Bus) note(err error) {
	b.mu.Lock()
	b.lastErr = err.Error()
	b.mu.Unlock()
}

// connFailed records why the connection is not up: err, a connect that
// failed or the error a connection was lost with (nil: none, kept as it
// was). ErrNoServers says nothing more than "not connected": the client
// reports it for a first connect refused at every server, and the dial
// error of its next attempt, a second later, says why.
func (b *Bus) connFailed(err error) {
	if err == nil || errors.Is(err, nats.ErrNoServers) {
		return
	}
	b.mu.Lock()
	b.connErr = redactSecrets(err.Error(), b.cfg.URL)
	b.mu.Unlock()
}

// Up reports whether the bus is connected, its stream ready and its
// publishes not failing (degraded): whether work should go through it.
func (b *Bus) Up() bool { return b.connected() && !b.degraded.Load() }

// connected reports whether the bus is connected and its stream ready,
// degraded or not: the relay publishes then (a publish that succeeds ends
// the degradation).
func (b *Bus) connected() bool { return b != nil && b.up.Load() }

// State is "up" or "down", with why it is down when known (degraded: why
// the publishes fail; not connected: the URL and the client's last connect
// error). why is shown to anyone who asks /readyz: the URL in it and its
// secrets in the errors are redacted.
func (b *Bus) State() (state, why string) {
	if b.Up() {
		return "up", ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.connected():
		return "down", "degraded: publishes to the stream keep failing: " + b.degradedWhy
	case b.nc != nil && b.nc.IsConnected() && b.lastErr != "":
		return "down", b.lastErr
	case b.connErr == "":
		return "down", "not connected to " + RedactURL(b.cfg.URL)
	}
	return "down", "not connected to " + RedactURL(b.cfg.URL) + ": " + b.connErr
}

// Stream is the stream's name.
func (b *Bus) Stream() string { return b.cfg.Stream }

// keep follows the connection: after a (re)connect it makes sure of the
// stream, then marks the bus up; a lost connection marks it down.
func (b *Bus) keep() {
	defer close(b.done)
	t := time.NewTicker(b.cfg.CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-b.changed:
		case <-t.C:
			b.readConsumers()
		}
		b.check()
	}
}

func (b *Bus) check() {
	if !b.nc.IsConnected() {
		// A handshake that failed after the dial (TLS, authorization) is
		// reported by no handler when the client retries: it keeps it.
		b.connFailed(b.nc.LastError())
		b.set(false)
		return
	}
	if !b.stale.Swap(false) && b.up.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.PublishTimeout)
	defer cancel()
	made, err := b.ensureStream(ctx)
	if err != nil {
		b.note(err)
		if err.Error() != b.notReady {
			b.notReady = err.Error()
			b.log.Warn("the delivery bus is connected but its stream is not ready; it is tried again every check until it is", "err", err,
				"every", b.cfg.CheckEvery)
		}
		b.set(false)
		b.stale.Store(true) // and again at the next check
		return
	}
	if b.notReady != "" {
		b.notReady = ""
		b.log.Info("the delivery bus's stream is ready")
	}
	b.mu.Lock()
	b.lastErr = "" // it no longer says why the bus is down
	b.mu.Unlock()
	if made {
		// A stream made anew holds nothing: what the site had relayed
		// and not done (the server lost its store, or a memory stream its
		// messages) is relayed again. The consumers went with it.
		b.log.Info("the delivery bus's stream was made anew: the site's undone delivery work is relayed again")
		b.forgetConsumers()
		if r := b.relay.Load(); r != nil {
			r.Again()
		}
	}
	b.set(true)
}

func (b *Bus) set(up bool) {
	if b.up.Swap(up) == up {
		// It starts down (the first connect failed): logged once, with
		// why when the client reported it.
		if !b.logged && !up && (b.knowsWhy() || time.Since(b.opened) >= b.cfg.CheckEvery) {
			b.logged = true
			b.logDown()
		}
		return
	}
	b.logged = true
	if up {
		// Not ConnectedUrlRedacted: it shows a token (a user without a
		// password).
		b.log.Info("the delivery bus is up", "url", RedactURL(b.nc.ConnectedUrl()), "degraded", b.degraded.Load())
	} else {
		b.logDown()
		// A server that lost its store loses its consumers too: make sure
		// of them again once it is back.
		b.forgetConsumers()
	}
	b.upChanged()
}

// knowsWhy reports whether the client reported why it is not connected.
func (b *Bus) knowsWhy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.connErr != ""
}

// logDown logs that the bus is down, with its URL (redacted) and why.
func (b *Bus) logDown() {
	_, why := b.State()
	b.log.Warn("the delivery bus is down: submits are still accepted (the outbox holds the work) and delivery goes on from the store until it returns",
		"url", RedactURL(b.cfg.URL), "why", why)
}

// setDegraded marks the bus degraded (publishes keep failing with the
// connection up: why is the last one's error) or not. While it is, Up is
// false: the intake writes its work unrelayed, the workers claim from the
// store, and the relay's rounds go on publishing until one succeeds.
func (b *Bus) setDegraded(degraded bool, why string) {
	b.mu.Lock()
	if degraded {
		b.degradedWhy = why
	}
	b.mu.Unlock()
	if b.degraded.Swap(degraded) == degraded {
		return
	}
	if degraded {
		b.log.Warn("the delivery bus is degraded: publishes to its stream keep failing; the workers claim from the store until a publish succeeds",
			"err", why)
	} else {
		b.log.Info("the delivery bus is up again: a publish succeeded")
	}
	b.upChanged()
}

// upChanged tells the metric, the relay and the workers that Up changed.
func (b *Bus) upChanged() {
	if b.m != nil {
		up := 0.0
		if b.Up() {
			up = 1
		}
		b.m.up.Set(up)
	}
	if r := b.relay.Load(); r != nil {
		r.Kick()
	}
	b.kickWorkers()
}

// kickWorkers wakes every delivery worker: the bus came or went, or work
// it did not take was given back to the store.
func (b *Bus) kickWorkers() {
	if b.workers != nil {
		b.workers.Send(&messages.Kick{})
	}
}

// SiteMetadata is the key of the stream's metadata that names the site
// whose stream it is. Its description names it too (streamDescription):
// a server before NATS 2.10 keeps no metadata.
const SiteMetadata = "switchboard_site"

// siteDescription starts the description of a stream that names its site.
const siteDescription = "Switchboard delivery work of site "

// streamDescription is the description of the stream of site ("": none
// named).
func streamDescription(site string) string {
	if site == "" {
		return "Switchboard delivery work (one subject per frontend)"
	}
	return siteDescription + strconv.Quote(site) + " (one subject per frontend)"
}

// streamSite is the site a stream's configuration names: its metadata's,
// else its description's; "" when it names none.
func streamSite(c jetstream.StreamConfig) string {
	if site := c.Metadata[SiteMetadata]; site != "" {
		return site
	}
	rest, ok := strings.CutPrefix(c.Description, siteDescription)
	if !ok {
		return ""
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return ""
	}
	site, _ := strconv.Unquote(q)
	return site
}

// ErrOtherSite is why a bus does not use a stream made by another site
// (its metadata names it): two sites on one stream take each other's work.
var ErrOtherSite = errors.New("the delivery bus's stream is another site's")

// ensureStream creates the work-queue stream or brings its settings up to
// date (each message is removed once acked or termed), and reports
// whether it made it. A stream's storage cannot change: one made with the
// other kind keeps it, with a warning (docs/nats.md says how to change it).
// The stream's metadata and description name its site (Config.Site): a
// stream that names another is refused (ErrOtherSite) and left as it is. Sites whose names
// differ only in characters a stream name may not hold (dc1.example and
// dc1_example) have one default stream, and each took the other's work:
// its consumers' subjects are the same. A stream that names no site (made
// before, or by hand) is taken and named this site's.
func (b *Bus) ensureStream(ctx context.Context) (made bool, err error) {
	storage, err := storageType(b.cfg.Storage)
	if err != nil {
		return false, err
	}
	want := jetstream.StreamConfig{
		Name:        b.cfg.Stream,
		Description: streamDescription(b.cfg.Site),
		Subjects:    []string{b.cfg.Stream + ".>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     storage,
		Duplicates:  b.cfg.DuplicateWindow(),
		Discard:     jetstream.DiscardNew,
	}
	if b.cfg.Site != "" {
		want.Metadata = map[string]string{SiteMetadata: b.cfg.Site}
	}
	s, err := b.js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err = b.js.CreateStream(ctx, want); err == nil {
			return true, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return false, err
		}
		// Another instance made it a moment ago: bring it up to date.
		s, err = b.js.Stream(ctx, want.Name)
	}
	if err != nil {
		return false, err
	}
	have := s.CachedInfo().Config
	if site := streamSite(have); b.cfg.Site != "" && site != "" && site != b.cfg.Site {
		return false, fmt.Errorf("%w: stream %s was made by site %q, and this is site %q: sites on one stream take each other's work; give this site a stream of its own with --nats-stream",
			ErrOtherSite, want.Name, site, b.cfg.Site)
	}
	// Metadata others set (the server's own, an operator's) is kept.
	for k, v := range have.Metadata {
		if _, ours := want.Metadata[k]; !ours {
			if want.Metadata == nil {
				want.Metadata = map[string]string{}
			}
			want.Metadata[k] = v
		}
	}
	if have.Storage != want.Storage {
		b.log.Warn("the delivery bus's stream keeps the storage it was made with; to change it, delete the stream (its work is in the outbox and is relayed again)",
			"storage", strings.ToLower(have.Storage.String()), "configured", b.cfg.Storage)
		want.Storage = have.Storage
	}
	// Replicas are the operator's (R3 on a cluster, say): an update with
	// none would scale the stream down to one replica at every reconnect.
	want.Replicas = have.Replicas
	_, err = b.js.UpdateStream(ctx, want)
	return false, err
}

// making is one making sure of a frontend's consumer, shared by the
// calls of consumer under way for it (n).
type making struct{ n int }

// consumer is the durable consumer of a frontend, created (or brought up
// to date) on first use. It is kept for the next use unless the frontend's
// consumer was dropped (forget, forgetConsumers, the stop of its last
// worker) while it was made.
func (b *Bus) consumer(ctx context.Context, frontend string) (jetstream.Consumer, error) {
	b.mu.Lock()
	c, ok := b.consumers[frontend]
	mk := b.making[frontend]
	if !ok {
		if mk == nil {
			mk = &making{}
			b.making[frontend] = mk
		}
		mk.n++
	}
	b.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := b.js.CreateOrUpdateConsumer(ctx, b.cfg.Stream, jetstream.ConsumerConfig{
		Durable:       ConsumerName(frontend),
		Description:   "Switchboard delivery to frontend " + frontend,
		FilterSubject: Subject(b.cfg.Stream, frontend),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.cfg.AckWait,
		MaxDeliver:    b.cfg.MaxDeliver,
		MaxAckPending: b.cfg.MaxAckPending,
	})
	b.mu.Lock()
	current := b.making[frontend] == mk
	if mk.n--; current && mk.n == 0 {
		delete(b.making, frontend)
	}
	if current && err == nil {
		b.consumers[frontend] = c
	}
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	b.m.frontend(frontend)
	return c, nil
}

// forgetConsumers drops every consumer, so that each is made sure of
// again at its next use.
func (b *Bus) forgetConsumers() {
	b.mu.Lock()
	b.consumers = map[string]jetstream.Consumer{}
	b.making = map[string]*making{}
	b.mu.Unlock()
}

// forget drops a frontend's consumer after a failure, so that the next
// fetch makes sure of it again.
func (b *Bus) forget(frontend string) {
	b.mu.Lock()
	delete(b.consumers, frontend)
	delete(b.making, frontend)
	b.mu.Unlock()
}

// Serve says this instance runs a delivery worker of frontend until the
// function it returns is called (once). The keeper makes sure of the
// consumer of every frontend served, at its next read once the bus is up
// (after a start and after every reconnect), so that its gauges show a
// pull frontend's backlog before anyone polls it: only a fetch made sure
// of it before, and a pull frontend's worker fetches only while a poll
// waits. Once none serves it, its consumer is no longer in use here and
// its gauges go, before done returns.
func (b *Bus) Serve(frontend string) (done func()) {
	b.mu.Lock()
	b.served[frontend]++
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.served[frontend]--; b.served[frontend] <= 0 {
				delete(b.served, frontend)
				delete(b.consumers, frontend)
				delete(b.making, frontend)
				b.unGauge(frontend)
			}
		})
	}
}

// readConsumers reads the pending counts of the consumers of the
// frontends served (Serve), within one second in all and no longer than
// the bus runs: a server that stops answering (hung, a partition that
// drops packets) still counts as connected until the client's pings time
// out, minutes, and a read of each consumer one after the other, a second
// each, held Close (and the node's stop) a second a frontend. The gauges
// show what was read: none while the bus is down (the last counts read
// before it went are gone by now, and a dashboard's max over the
// instances takes them for a backlog), and none for a frontend no longer
// served. They are set under mu, and only for a frontend still served
// then: the stop of a frontend's last worker (Serve's done) drops its
// series, and a read that began before it does not set them again.
func (b *Bus) readConsumers() {
	if b.m == nil {
		return
	}
	if !b.Up() {
		b.mu.Lock()
		b.m.pending.Reset()
		b.m.ackPending.Reset()
		clear(b.gauged)
		b.mu.Unlock()
		return
	}
	b.mu.Lock()
	cs := make(map[string]jetstream.Consumer, len(b.served))
	var unmade []string
	for fe := range b.served {
		if c, ok := b.consumers[fe]; ok {
			cs[fe] = c
		} else {
			unmade = append(unmade, fe)
		}
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	go func() {
		select {
		case <-b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	slices.Sort(unmade)
	for _, fe := range unmade {
		c, err := b.consumer(ctx, fe)
		if err != nil {
			continue // tried again at the next read, or by the next fetch
		}
		cs[fe] = c
	}
	read := make(map[string]*jetstream.ConsumerInfo, len(cs))
	for fe, c := range cs {
		info, err := c.Info(ctx)
		if err != nil {
			continue // its last counts stay: a read that failed once says nothing new
		}
		read[fe] = info
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for fe, info := range read {
		if b.served[fe] <= 0 {
			continue // its last worker stopped while it was read
		}
		b.gauged[fe] = true
		b.m.pending.WithLabelValues(fe).Set(float64(info.NumPending))
		b.m.ackPending.WithLabelValues(fe).Set(float64(info.NumAckPending))
	}
	for fe := range b.gauged {
		if b.served[fe] <= 0 {
			b.unGauge(fe)
		}
	}
}

// unGauge drops a frontend's consumer gauges (b.mu held).
func (b *Bus) unGauge(fe string) {
	delete(b.gauged, fe)
	if b.m != nil {
		b.m.pending.DeleteLabelValues(fe)
		b.m.ackPending.DeleteLabelValues(fe)
	}
}

// Msg is a bus message a worker holds: the work it names and how to
// settle it. It is read by Fetch's own pull request (a plain NATS
// message): nats.go settles it from its reply subject, JetStream's ack
// subject, as it would one its jetstream package read.
type Msg struct {
	Work
	// Delivered counts the times the bus handed it out (1 the first time).
	Delivered uint64
	raw       *nats.Msg
	m         *Metrics
}

// Settle does what d says (nothing for Keep). An error means the bus did
// not hear it: the message comes back after AckWait, and its next holder
// finds out from the store what became of its work.
func (m *Msg) Settle(d Decision) error {
	m.m.Settle(m.Frontend, d.Action)
	switch d.Action {
	case Ack:
		return m.raw.Ack()
	case Nak:
		if d.Delay <= 0 {
			return m.raw.Nak()
		}
		return m.raw.NakWithDelay(d.Delay)
	case Term:
		return m.raw.Term()
	}
	return nil
}

// read appends the message raw carries to out; one without readable work
// is termed instead.
func (b *Bus) read(frontend string, out []*Msg, raw *nats.Msg) []*Msg {
	m := &Msg{raw: raw, Delivered: 1, m: b.m}
	if md, err := raw.Metadata(); err == nil {
		m.Delivered = md.NumDelivered
	}
	if err := json.Unmarshal(raw.Data, &m.Work); err != nil || m.ID == "" {
		b.log.Error("a bus message without readable work was termed", "subject", raw.Subject, "err", err)
		_ = raw.Term()
		return out
	}
	if m.Delivered > 1 && b.m != nil {
		b.m.Redelivered(frontend)
	}
	return append(out, m)
}

// Touch tells the bus the work is still under way (InProgress).
func (m *Msg) Touch() error { return m.raw.InProgress() }

// Fetch asks the frontend's consumer for up to n messages, waiting up to
// wait (or until ctx ends), and calls got (in the caller's goroutine) with
// the messages as they arrive: each call has every message that had
// arrived by then, so that a backlog handed out at once is claimed in one
// store round, not one message first and the rest after. A message whose
// document cannot be read is termed: no worker could do anything with it.
//
// Every message the server sent the fetch reaches got before Fetch
// returns, those that come after ctx ended too (the caller settles them:
// a worker that cancelled its fetch refuses them), and once it has
// returned the server hands its pull request nothing more: a message
// naked then goes to another fetch, never back to this one (withdraw says
// how, and what a cluster leaves open). nats.go's jetstream Fetch dropped
// what the server had sent a fetch whose context ended and it had not
// read yet (it came back after the consumer's AckWait), and unsubscribed
// the request's inbox only after it had returned.
func (b *Bus) Fetch(ctx context.Context, frontend string, n int, wait time.Duration, got func([]*Msg)) error {
	if !b.Up() {
		return errDown
	}
	if _, err := b.consumer(ctx, frontend); err != nil {
		b.lost(frontend, err)
		return err
	}
	if err := b.pull(ctx, frontend, n, wait, got); err != nil {
		b.lost(frontend, err)
		return err
	}
	return nil
}

// apiNext is the subject prefix of a consumer's pull requests,
// $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer> (JetStream's API under its
// default prefix, as the bus's jetstream client uses it).
const apiNext = "$JS.API.CONSUMER.MSG.NEXT."

// pullRequest is a pull request's document (JetStream's, as nats.go's
// jetstream writes it): up to Batch messages, the request waiting at the
// server for Expires (nanoseconds; never 0, which waits for ever).
type pullRequest struct {
	Batch   int           `json:"batch"`
	Expires time.Duration `json:"expires"`
}

// pull sends the frontend's consumer one pull request for up to n
// messages on an inbox of its own and reads what the server sends it
// until the request ends there (its n messages, its expiry, a status
// that ends it) or, locally, wait is over or ctx ends. The server's
// expiry is a tenth of wait (at most a second) short of it, as nats.go's
// jetstream has it, so that the request usually ends there first.
//
// A request that may still wait at the server is withdrawn (withdraw) before
// pull returns, and what the server sent it meanwhile goes to got too.
// It returns the error a status reported (the consumer deleted, no
// responders: Fetch's lost), or why the request could not be sent.
func (b *Bus) pull(ctx context.Context, frontend string, n int, wait time.Duration, got func([]*Msg)) error {
	sub, err := b.nc.SubscribeSync(b.nc.NewInbox())
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	expires := max(wait-min(wait/10, time.Second), time.Millisecond)
	req, _ := json.Marshal(pullRequest{Batch: n, Expires: expires})
	if err := b.nc.PublishRequest(apiNext+b.cfg.Stream+"."+ConsumerName(frontend), sub.Subject, req); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	p := &pulled{b: b, frontend: frontend, left: n}
	for !p.ended && p.next(wctx, sub) {
		for !p.ended && p.ready(sub) { // what arrived with it joins it
		}
		p.hand(got)
	}
	if !p.ended {
		b.withdraw(sub, p)
		p.hand(got)
	}
	return p.err
}

// withdraw withdraws the interest of a pull request that may still wait at
// the server, and reads every message the server sent it before: Drain
// unsubscribes at the server and keeps the subscription here, and a
// flush's round trip later (the server answers the PING after the UNSUB,
// on the same connection, so after every message it sent the inbox
// before) they are all at hand. The server then hands the request
// nothing more: it delivers a message only to a request with interest,
// and one it decided to send just before finds no subscriber and is
// handed out again at once (its didNotDeliver), not after the AckWait.
// Where the consumer's leader is another server of a cluster, the
// unsubscribe reaches it over a route a moment after the round trip; a
// message it sends the request in that moment is lost to it and comes
// back after the AckWait. A flush that fails (the connection was lost)
// leaves what came after it to the AckWait too.
func (b *Bus) withdraw(sub *nats.Subscription, p *pulled) {
	if err := sub.Drain(); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.PublishTimeout)
	defer cancel()
	_ = b.nc.FlushWithContext(ctx)
	for p.ready(sub) {
	}
}

// pulled is what a pull request got: the messages read and not yet handed
// to got, how many it may still get, whether it ended at the server, and
// the error a status reported.
type pulled struct {
	b        *Bus
	frontend string
	out      []*Msg
	left     int
	ended    bool
	err      error
}

// next reads the next message the request got, waiting for it until ctx
// ends: a stream's message (read), or a status of the request
// (pullStatus). false: none came (ctx ended, or the connection closed).
func (p *pulled) next(ctx context.Context, sub *nats.Subscription) bool {
	raw, err := sub.NextMsgWithContext(ctx)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		p.status("503", "") // nats.go reads this status itself
		return true
	case err != nil:
		return false
	}
	if code := raw.Header.Get("Status"); len(raw.Data) == 0 && code != "" {
		p.status(code, raw.Header.Get("Description"))
		return true
	}
	p.out = p.b.read(p.frontend, p.out, raw)
	if p.left--; p.left <= 0 {
		p.ended = true // its batch: the server dropped the request
	}
	return true
}

// ready reads the next message the request got if it is at hand (next);
// false: none is.
func (p *pulled) ready(sub *nats.Subscription) bool {
	if k, _, err := sub.Pending(); err != nil || k == 0 {
		return false
	}
	return p.next(context.Background(), sub)
}

// status notes a status the request got.
func (p *pulled) status(code, description string) {
	end, err := pullStatus(code, description)
	p.ended = p.ended || end
	if p.err == nil {
		p.err = err
	}
}

// hand calls got with the messages read since the last call, if any.
func (p *pulled) hand(got func([]*Msg)) {
	if len(p.out) > 0 {
		got(p.out)
		p.out = nil
	}
}

// pullStatus reads a status message a pull request got (as nats.go's
// jetstream reads them): whether the request ended at the server, and the
// error it reports. 100 is an idle heartbeat (not asked for); 404 and 408
// end a request without messages (none, its expiry); 409 "Consumer
// Deleted" and 503 (no responders: no consumer, or no stream) are the
// errors that have Fetch make sure of the consumer and the stream again,
// as nats.go's errors did; any other status ends the request with an
// error.
func pullStatus(code, description string) (end bool, err error) {
	switch code {
	case "100":
		return false, nil
	case "404", "408":
		return true, nil
	case "409":
		if strings.Contains(strings.ToLower(description), "consumer deleted") {
			return true, jetstream.ErrConsumerDeleted
		}
	case "503":
		return true, nats.ErrNoResponders
	}
	return true, fmt.Errorf("nats: pull request: %s %s", code, description)
}

// lost drops a frontend's consumer after a failed fetch, so that the next
// fetch makes sure of it again, and has the stream made sure of again when
// the failure says it is gone (deleted, or lost by a server that kept the
// connection): otherwise only a publish would notice, and a site whose
// relay has nothing to publish would fetch from a stream that is not
// there until the next reconnect.
func (b *Bus) lost(frontend string, err error) {
	b.forget(frontend)
	if streamGone(err) {
		b.recheck(nil)
	}
}

// streamGone reports whether err says the stream may be gone: JetStream
// answers that it does not know it, or nobody answers for it (or for its
// consumer) at all. A consumer that alone is gone is made again by the
// next fetch (forget); should its stream be gone too, making it fails
// with ErrStreamNotFound.
func streamGone(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrNoResponders)
}

// Publish publishes the rows to the stream, each with its MsgID as
// Nats-Msg-Id, and waits (up to PublishTimeout) for the stream to take
// them. It returns the rows the stream took (a duplicate it dropped
// counts as taken: the first copy is in it) and the first error.
func (b *Bus) Publish(ctx context.Context, rows []persistence.Relay) ([]int64, error) {
	if !b.connected() {
		return nil, errDown
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.PublishTimeout)
	defer cancel()
	futures := make([]jetstream.PubAckFuture, len(rows))
	var firstErr error
	for i, r := range rows {
		data, _ := json.Marshal(Work{ID: r.MessageID, Frontend: r.Target, Row: r.Row})
		msg := nats.NewMsg(Subject(b.cfg.Stream, r.Target))
		msg.Data = data
		f, err := b.js.PublishMsgAsync(msg, jetstream.WithMsgID(MsgID(r)))
		if err != nil {
			firstErr = err
			break
		}
		futures[i] = f
	}
	var ok []int64
	for i, f := range futures {
		if f == nil {
			break
		}
		select {
		case <-f.Ok():
			ok = append(ok, rows[i].Row)
		case err := <-f.Err():
			if firstErr == nil {
				firstErr = err
			}
			if streamGone(err) {
				b.recheck(nil) // the stream is gone: make it again
			}
		case <-ctx.Done():
			if firstErr == nil {
				firstErr = ctx.Err()
			}
		}
	}
	if b.m != nil {
		b.m.published.Add(float64(len(ok)))
	}
	return ok, firstErr
}

// MsgID is a row's Nats-Msg-Id: its message id, outbox row and due time
// (unix microseconds), stable across every publish of that row for that
// due time (a publish whose answer was lost is dropped as a copy), and new
// for each retry of it, which the relay publishes again when it is due:
// without the due time the stream's duplicate window would drop a retry
// that falls due within it.
func MsgID(r persistence.Relay) string {
	return fmt.Sprintf("%s/%d/%d", r.MessageID, r.Row, r.DueAt.UnixMicro())
}

// SetLag records the relay's lag.
func (b *Bus) SetLag(d time.Duration) {
	if b.m != nil {
		b.m.lag.Set(d.Seconds())
	}
}

// Close disconnects (after the relay and the workers stopped). Closing
// again does nothing.
func (b *Bus) Close() {
	b.closeOnce.Do(func() { close(b.stop) })
	<-b.done
	b.nc.Close()
	b.up.Store(false)
}
