// Command embedded-frontend embeds a Switchboard node in a Go program and
// serves one of its frontends in-process: a toy SMS gateway actor that the
// node supervises and delivers to, with no webhook and no polling.
//
//	go run ./examples/embedded-frontend --once     # the demo, then stop
//	go run ./examples/embedded-frontend            # the demo, then serve until Ctrl-C
//
// It starts a node on the embedded store, spawns the gateway under the node
// guardian, registers it as frontend "sms-gateway", routes destinations
// starting with 46 to it, subscribes to state changes, submits a few
// messages (one of which the gateway answers "retry" the first time), waits
// until every one is final and prints a summary. Without --once the node then
// keeps serving its HTTPS API on --listen, so more messages can be sent to
// the gateway:
//
//	curl -k https://127.0.0.1:8444/api/messages \
//	  -d '{"source_msisdn":"me","destination_msisdn":"46701234567","message_body":"hi"}'
//
// See docs/embedding.md for the API this uses.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/messages"
)

// The gateway's names. The frontend name is what routes point at; the actor
// name must be unique among the guardian's children; the kind labels the
// actor metrics and must stay low-cardinality (never a per-message value).
const (
	frontendName = "sms-gateway"
	actorName    = "sms-gateway"
	actorKind    = "sms-gateway"
	routePrefix  = "46"
)

// options are the demo's knobs; main fills them from flags, tests directly.
type options struct {
	// DataDir holds the embedded store. Empty: a temporary directory that is
	// removed at the end, so every run starts clean.
	DataDir string
	// Listen is the HTTPS API address; empty runs the node without one.
	Listen string
	// MetricsListen is the /metrics address; empty runs without one.
	MetricsListen string
	// RetryMin is where the delivery backoff starts. The node's default is a
	// minute; a demo wants the "busy" message's retry within seconds.
	RetryMin time.Duration
	// Once stops the node after the demo instead of serving until ctx ends.
	Once bool
	// Out receives what the gateway sends and the summary.
	Out io.Writer
	// Logger receives the node's logs and the state changes.
	Logger *slog.Logger
	// DeadLetterThrottle is the node's Config.DeadLetterThrottle: its
	// goroutine outlives a stop by that long, so a test that checks for
	// leaked goroutines sets it small. 0 keeps protoactor's 1s.
	DeadLetterThrottle time.Duration
}

// summary is what the demo observed.
type summary struct {
	// Addr is the HTTPS API's address ("" without a listener).
	Addr string
	// Messages are the demo's messages in submission order.
	Messages []outcome
	// Duplicate reports that submitting the first message again with the
	// same id returned the stored message instead of creating another.
	Duplicate bool
	// NoRouteCode is the error code a destination without a route got.
	NoRouteCode string
	// Sent is how many distinct messages the carrier sent.
	Sent int
	// GatewayReceives is switchboard_actor_messages_total for the gateway's
	// kind: every message its Receive handled, lifecycle messages included.
	GatewayReceives float64
}

// outcome is one message at the end of the demo.
type outcome struct {
	ID       string
	Body     string
	State    messages.State
	Attempts int
	// Seen is the states the subscription saw for it, in the order the
	// callbacks ran.
	Seen []messages.State
}

func main() {
	var o options
	flag.StringVar(&o.DataDir, "data-dir", "", "directory of the embedded store (default: a temporary directory removed on exit)")
	flag.StringVar(&o.Listen, "listen", "127.0.0.1:8444", "HTTPS API address; empty for none (8444 keeps clear of `make run`)")
	flag.StringVar(&o.MetricsListen, "metrics-listen", "", "plain HTTP /metrics address; empty for none")
	flag.DurationVar(&o.RetryMin, "retry-min", time.Second, "first delivery retry delay (the node's default is 1m)")
	flag.BoolVar(&o.Once, "once", false, "stop after the demo instead of serving until SIGINT/SIGTERM")
	flag.Parse()
	o.Out = os.Stdout
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

	// A signal cancels ctx: during the demo that ends the wait, afterwards it
	// ends the serving. Either way run stops the node before it returns.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err := run(ctx, o)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case err != nil && !interrupted:
		o.Logger.Error("demo failed", "err", err)
		os.Exit(1)
	case err != nil:
		o.Logger.Info("interrupted; node stopped", "err", err)
	}
}

// run is the whole demo: start, wire the gateway, submit, wait, summarise,
// then (without o.Once) serve until ctx ends, and stop. The node is stopped
// on every path out, error or not.
func run(ctx context.Context, o options) (sum summary, err error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RetryMin <= 0 {
		o.RetryMin = time.Second
	}
	if o.DataDir == "" {
		dir, err := os.MkdirTemp("", "switchboard-example-")
		if err != nil {
			return sum, err
		}
		defer os.RemoveAll(dir) // runs after the node's Stop (deferred later) has closed the store
		o.DataDir = dir
	}

	cfg := switchboard.DefaultConfig()
	cfg.Name, cfg.InstanceID = "example", "example"
	cfg.DataDir = o.DataDir
	// DefaultConfig listens on :8443 and :9568 like the binary; an embedder
	// chooses. Empty means no listener at all: the node is then driven only
	// through its Go API (or its Handler(), mounted on your own server).
	cfg.Listen, cfg.MetricsListen = o.Listen, o.MetricsListen
	cfg.DeliveryRetryMin, cfg.DeliveryRetryMax = o.RetryMin, 4*o.RetryMin
	cfg.Logger = o.Logger
	cfg.DeadLetterThrottle = o.DeadLetterThrottle

	node, err := switchboard.New(cfg) // validates cfg; nothing runs yet
	if err != nil {
		return sum, err
	}
	if err := node.Start(ctx); err != nil {
		return sum, fmt.Errorf("start: %w", err)
	}
	defer func() {
		// Not ctx: it is usually cancelled by now (that is how a signal
		// arrives), and Stop needs time to let in-flight commits finish.
		stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		if serr := node.Stop(stopCtx); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop: %w", serr))
		}
	}()
	sum.Addr = node.Addr()

	// Subscribe before submitting, so that no transition of the demo's
	// messages happens unseen. Subscribe works before Start too: subscribe
	// there to see the transitions of work resumed from an earlier run.
	rec := newRecorder(o.Logger)
	unsubscribe := node.Subscribe(rec.observe)
	defer unsubscribe()

	// The gateway runs under the node guardian: a panic restarts it (same
	// PID, so the registration below stays valid) within the restart budget,
	// and it is stopped with the node.
	k := newCarrier(o.Out)
	pid, err := node.Spawn(actorName, actorKind, newGateway(k))
	if err != nil {
		return sum, fmt.Errorf("spawn gateway: %w", err)
	}
	// The registration is stored; the PID is not. A program registers its
	// actor again after every start, and until it does, messages for the
	// frontend are still accepted and wait in the outbox (with a persistent
	// --data-dir, what an earlier run left undelivered goes out from here).
	if err := node.RegisterFrontend(ctx, frontendName, pid); err != nil {
		return sum, fmt.Errorf("register frontend: %w", err)
	}
	// A route may only name a registered frontend, hence this order.
	if _, err := node.PutRoute(ctx, messages.Route{Prefix: routePrefix, Frontend: frontendName}); err != nil {
		return sum, fmt.Errorf("put route: %w", err)
	}

	subs := demoSubmissions(strconv.FormatInt(time.Now().UnixNano(), 36))
	ids := make([]string, 0, len(subs))
	for _, s := range subs {
		// Submit returns after the commit: from here on the message survives
		// a crash. It is delivered asynchronously.
		m, _, err := node.Submit(ctx, s)
		if err != nil {
			return sum, fmt.Errorf("submit %s: %w", s.ID, err)
		}
		ids = append(ids, m.ID)
	}

	// A submit with an id is idempotent: a client that lost the answer
	// submits again with the same id and gets the stored message back
	// (created false) instead of a second SMS.
	_, created, err := node.Submit(ctx, subs[0])
	if err != nil {
		return sum, fmt.Errorf("resubmit %s: %w", subs[0].ID, err)
	}
	sum.Duplicate = !created

	// Errors are *messages.Error with a stable code (the same codes the HTTP
	// API returns): branch on the code, not on the text.
	_, _, err = node.Submit(ctx, messages.Submission{
		SourceMSISDN: "Switchboard", DestinationMSISDN: "4420794960000", Body: "nobody serves +44",
	})
	var merr *messages.Error
	if !errors.As(err, &merr) {
		return sum, fmt.Errorf("submit without a route: want a *messages.Error, got %v", err)
	}
	sum.NoRouteCode = merr.Code

	if err := rec.waitFinal(ctx, ids, node.Fatal()); err != nil {
		return sum, err
	}

	for _, id := range ids {
		m, err := node.Message(ctx, id)
		if err != nil {
			return sum, fmt.Errorf("read %s: %w", id, err)
		}
		sum.Messages = append(sum.Messages, outcome{
			ID: m.ID, Body: m.Body, State: m.State, Attempts: m.Attempts, Seen: rec.states(id),
		})
	}
	sum.Sent = k.sentCount()
	sum.GatewayReceives = counterValue(node.Registry(), "switchboard_actor_messages_total", "kind", actorKind)
	sum.print(o.Out)

	if o.Once {
		return sum, nil
	}
	if sum.Addr != "" {
		o.Logger.Info("demo done; serving until SIGINT or SIGTERM",
			"api", "https://"+sum.Addr+"/api/messages", "route", routePrefix+"* -> "+frontendName)
	} else {
		o.Logger.Info("demo done; no listener, waiting for SIGINT or SIGTERM")
	}
	select {
	case <-ctx.Done():
		return sum, nil
	case err := <-node.Fatal():
		// An actor exhausted its restart budget or a listener died: the
		// node cannot go on. Stop it (the deferred Stop) and report.
		return sum, fmt.Errorf("node failed: %w", err)
	}
}

// demoSubmissions are the demo's messages. The ids are chosen by the client
// (that is what makes a repeated submit safe) and carry a per-run tag, so a
// persistent --data-dir does not see the previous run's ids again.
func demoSubmissions(tag string) []messages.Submission {
	mk := func(n int, dest, body string) messages.Submission {
		return messages.Submission{
			ID:           fmt.Sprintf("demo-%s-%d", tag, n),
			SourceMSISDN: "Switchboard", DestinationMSISDN: dest, Body: body,
		}
	}
	return []messages.Submission{
		mk(1, "46701234567", "hello from an embedded node"),
		mk(2, "+46701234568", "the operator is busy: this one is retried"),
		mk(3, "46701234569", "goodbye"),
	}
}

// recorder keeps the state changes the subscription saw and wakes whoever
// waits for them.
type recorder struct {
	log *slog.Logger

	mu   sync.Mutex
	seen map[string][]messages.State
	// changed holds at most one wake-up: "something changed, look again".
	// A waiter that was busy when several changes came needs only one.
	changed chan struct{}
}

func newRecorder(log *slog.Logger) *recorder {
	return &recorder{log: log, seen: map[string][]messages.State{}, changed: make(chan struct{}, 1)}
}

// observe is the Subscribe callback. It runs on the goroutine of the actor
// that committed the transition (the intake, a delivery worker), so it must
// never block: it logs, records under a short lock and signals without
// waiting. Anything slower belongs on your own goroutine or actor.
func (r *recorder) observe(ev messages.StateChanged) {
	r.log.Info("state changed", "id", ev.ID, "state", ev.State, "frontend", ev.Frontend, "detail", ev.Detail, "reason", ev.Reason)
	r.mu.Lock()
	r.seen[ev.ID] = append(r.seen[ev.ID], ev.State)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// states returns a copy of what was seen for id.
func (r *recorder) states(id string) []messages.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]messages.State(nil), r.seen[id]...)
}

// allFinal reports whether every id has reached a state that no automatic
// transition leaves (delivered or failed). It asks whether such a state was
// seen at all, not whether it was seen last: a message's events come from
// different actors (pending from the intake, the verdicts from its delivery
// worker), so their order across those goroutines is not guaranteed.
func (r *recorder) allFinal(ids []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if !slices.ContainsFunc(r.seen[id], messages.State.Final) {
			return false
		}
	}
	return true
}

// waitFinal waits, without polling, until every id is final, ctx ends or the
// node fails. Checking before each wait closes the race with changes that
// came before the first wait: observe signals after recording.
func (r *recorder) waitFinal(ctx context.Context, ids []string, fatal <-chan error) error {
	for !r.allFinal(ids) {
		select {
		case <-r.changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for deliveries: %w", ctx.Err())
		case err := <-fatal:
			return fmt.Errorf("node failed: %w", err)
		}
	}
	return nil
}

// counterValue reads one counter from the node's registry: the actor
// metrics of a spawned actor are there under the kind it was spawned with.
func counterValue(reg *prometheus.Registry, name, label, value string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func (s summary) print(w io.Writer) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tATTEMPTS\tSEEN BY THE SUBSCRIPTION\tBODY")
	for _, m := range s.Messages {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%q\n", m.ID, m.State, m.Attempts, m.Seen, m.Body)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nsent by the carrier: %d; gateway actor messages (lifecycle included): %.0f\n", s.Sent, s.GatewayReceives)
	fmt.Fprintf(w, "same id submitted again returned the stored message: %v\n", s.Duplicate)
	fmt.Fprintf(w, "destination without a route: error code %s\n", s.NoRouteCode)
}
