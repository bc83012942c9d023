package main

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/switchboard-dev/switchboard/messages"
)

// carrier stands in for the outside world an SMS gateway talks to (an SMPP
// link, an operator's HTTP API). It is the side effect that must happen once
// per message even though the node delivers at least once.
//
// It lives outside the actor on purpose: a supervised actor that panics is
// rebuilt from its producer, so anything kept in the actor struct is lost on
// restart. A real gateway would get the same guarantee by passing the message
// id to its carrier as the deduplication key.
type carrier struct {
	out io.Writer

	mu   sync.Mutex
	sent map[string]int // message id -> attempt that reached the handset
}

func newCarrier(out io.Writer) *carrier {
	return &carrier{out: out, sent: map[string]int{}}
}

// send hands m to the handset unless it already has it: the node redelivers
// with the same id after a crash between our side effect and its commit, and
// the handset must not get the SMS twice.
func (k *carrier) send(m messages.Outgoing) (duplicate bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.sent[m.ID]; ok {
		fmt.Fprintf(k.out, "sms  %s  already sent; acknowledging the redelivery (attempt %d)\n", m.ID, m.Attempt)
		return true
	}
	k.sent[m.ID] = m.Attempt
	fmt.Fprintf(k.out, "sms  %s  %s -> %s  %q (attempt %d)\n", m.ID, m.SourceMSISDN, m.DestinationMSISDN, m.Body, m.Attempt)
	return false
}

// sentCount is how many distinct messages reached a handset.
func (k *carrier) sentCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.sent)
}

// gateway is the in-process frontend: the node's delivery worker for the
// frontend it is registered as sends it a *messages.Delivery per message and
// waits for a *messages.DeliveryResult. It keeps no state of its own, so a
// restart after a panic loses nothing.
type gateway struct {
	carrier *carrier
}

// newGateway returns the producer node.Spawn needs. The producer is called
// again on every restart; the carrier it closes over outlives restarts.
func newGateway(k *carrier) actor.Producer {
	return func() actor.Actor { return &gateway{carrier: k} }
}

func (g *gateway) Receive(c actor.Context) {
	d, ok := c.Message().(*messages.Delivery)
	if !ok {
		return // lifecycle messages (Started, Stopping, ...) need nothing here
	}
	m := d.Message
	// A toy congested operator: a body containing "busy" is refused on its
	// first attempt. Deciding from m.Attempt rather than from a counter in
	// the actor keeps the gateway stateless and correct across restarts.
	if strings.Contains(m.Body, "busy") && m.Attempt < 2 {
		fmt.Fprintf(g.carrier.out, "sms  %s  operator busy; asking for a retry (attempt %d)\n", m.ID, m.Attempt)
		c.Respond(&messages.DeliveryResult{ID: m.ID, Attempt: m.Attempt, Status: messages.Retry, Reason: "operator busy"})
		return
	}
	g.carrier.send(m)
	// Respond goes to the delivery worker that sent the Delivery. It must
	// come by d.Deadline (Config.WebhookTimeout after the worker handed the
	// delivery out; the worker allows one second more for the trip back),
	// or the attempt counts as a retry.
	// The carrier call here is instant. A gateway doing slow I/O would not
	// block Receive: it would take sender := c.Sender() and
	// system := c.ActorSystem() here, do the I/O on its own goroutine and
	// answer with system.Root.Send(sender, result).
	c.Respond(&messages.DeliveryResult{ID: m.ID, Attempt: m.Attempt, Status: messages.Delivered})
}
