package sim

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The push frontends: a webhook receiver (an HTTPS server of the sim on
// the network, certificate of the run's CA) and an in-process actor
// (registered on every incarnation of its node), each with its own
// faults. Every hand-over is recorded, whatever its answer, with the
// incarnation that made it (Delivery.By): within one incarnation a
// message answered delivered must not be handed over again (redelivered)
// unless its node's store failed to record that outcome; a new
// incarnation may (at least once, after a crash).

// Frontend kinds.
const (
	KindPull    = "pull"
	KindWebhook = "webhook"
	KindActor   = "actor"
)

// FrontendFault is the fault state of a node's push frontends.
type FrontendFault struct {
	// Slow holds every hand-over this long before answering (below the
	// nodes' webhook timeout, so that the answer still counts).
	Slow time.Duration
	// Fail is the probability of answering "retry" (a webhook's 503)
	// without taking the message.
	Fail float64
	// LoseAnswer is the probability that the frontend takes the message
	// but its answer never reaches the node (a webhook's connection reset
	// after acting, an actor that never replies).
	LoseAnswer float64
}

func (f FrontendFault) String() string {
	return fmt.Sprintf("slow=%v fail=%.2f lose-answer=%.2f", f.Slow, f.Fail, f.LoseAnswer)
}

// hookHost is the network name of a webhook frontend's receiver.
func hookHost(name string) string { return "hook-" + name }

// hookURL is a webhook frontend's URL.
func hookURL(name string) string { return "https://" + hookHost(name) + ":443/deliver" }

// pushFault draws what a push frontend of node i does with one hand-over.
func (c *Cluster) pushFault(i int) (slow time.Duration, fail, lose bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.frontFaults[i]
	x, y := c.frontRng.Float64(), c.frontRng.Float64()
	return f.Slow, x < f.Fail, y < f.LoseAnswer
}

// startReceiver serves webhook frontend f's receiver until the cluster
// closes.
func (c *Cluster) startReceiver(f frontend) error {
	host := hookHost(f.name)
	c.net.AddInstance(host, host, host+":443")
	certFile, keyFile := certs.NodeFiles(c.certDir(), host)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("%s: %w", host, err)
	}
	ep := c.net.Endpoint(host)
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.receive(f, w, r) }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		ErrorLog:  slog.NewLogLogger(slog.DiscardHandler, slog.LevelDebug),
	}
	ep.Attach()
	c.receivers = append(c.receivers, srv)
	c.bg.Go(func() { _ = srv.ServeTLS(ep.Listener(), "", "") })
	return nil
}

// receive is a webhook receiver's handler.
func (c *Cluster) receive(f frontend, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var m messages.Outgoing
	if err != nil || json.Unmarshal(body, &m) != nil || m.ID == "" {
		http.Error(w, "bad delivery", http.StatusBadRequest)
		return
	}
	slow, fail, lose := c.pushFault(f.node)
	d := Delivery{ID: m.ID, Frontend: f.name, Node: nodeName(f.node), Push: true, By: c.handedBy(f, m.ID, r.RemoteAddr), Ack: Offered, Kind: KindWebhook}
	if slow > 0 && !wait(r.Context(), slow) {
		c.rec.delivery(d) // the node stopped waiting before the answer
		return
	}
	if fail {
		c.rec.delivery(d)
		http.Error(w, "not now", http.StatusServiceUnavailable)
		return
	}
	if lose {
		d.Ack = AckUnknown
		c.rec.delivery(d)
		panic(http.ErrAbortHandler)
	}
	w.WriteHeader(http.StatusOK)
	// The node got the answer unless it gave up first.
	d.Ack = Acked
	if r.Context().Err() != nil {
		d.Ack = AckUnknown
	}
	c.rec.delivery(d)
}

// handedBy is the label of a hand-over of message id to push frontend f
// by incarnation by: by, qualified by how many outcomes of that delivery
// f's node's store did not record so far (a write that failed, an
// outcome refused as stale). A node whose store did not record a
// delivery's outcome hands the message over again, legitimately; any
// other write, failed or slow, changes nothing.
func (c *Cluster) handedBy(f frontend, id, by string) string {
	if n := c.shared[f.node].log.unrecordedOf(workKey{persistence.WorkDelivery, f.name, id}); n > 0 {
		return fmt.Sprintf("%s/store%d", by, n)
	}
	return by
}

// registerActors spawns node n's actor frontends (incarnation by) and
// registers them.
func (c *Cluster) registerActors(ctx context.Context, i int, n *switchboard.Node, by string) error {
	for _, f := range c.fronts {
		if f.node != i || f.kind != KindActor {
			continue
		}
		pid, err := n.Spawn("sim-"+f.name, "sim_frontend", func() actor.Actor { return &actorFrontend{c: c, f: f, by: by} })
		if err != nil {
			return fmt.Errorf("spawn %s: %w", f.name, err)
		}
		if err := n.RegisterFrontend(ctx, f.name, pid); err != nil {
			return fmt.Errorf("register %s: %w", f.name, err)
		}
	}
	return nil
}

// actorFrontend is an in-process frontend of one incarnation.
type actorFrontend struct {
	c  *Cluster
	f  frontend
	by string
}

func (a *actorFrontend) Receive(ctx actor.Context) {
	d, ok := ctx.Message().(*messages.Delivery)
	if !ok {
		return
	}
	slow, fail, lose := a.c.pushFault(a.f.node)
	rec := Delivery{ID: d.Message.ID, Frontend: a.f.name, Node: nodeName(a.f.node), Push: true, By: a.c.handedBy(a.f, d.Message.ID, a.by), Ack: Offered, Kind: KindActor}
	if slow > 0 {
		time.Sleep(slow)
	}
	if fail {
		a.c.rec.delivery(rec)
		ctx.Respond(&messages.DeliveryResult{ID: d.Message.ID, Status: messages.Retry, Reason: "not now (sim)"})
		return
	}
	rec.Ack = Acked
	if lose {
		rec.Ack = AckUnknown
		a.c.rec.delivery(rec)
		return
	}
	// The deadline is on the node's clock (skewed, jumped), not the
	// bubble's: the node gives up by its own clock.
	if !a.c.clocks[a.f.node].Now().Before(d.Deadline) {
		rec.Ack = AckUnknown // the node stopped waiting
	}
	a.c.rec.delivery(rec)
	ctx.Respond(&messages.DeliveryResult{ID: d.Message.ID, Status: messages.Delivered})
}

// wait waits d or until ctx ends (false).
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
