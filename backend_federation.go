package switchboard

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/actors/discovery"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// The gateway's federation API: the calls of peers (docs/federation.md),
// admitted by caller, and the peers as GET /api/peers lists them.

// Identity implements httpapi.Backend.
func (g *gateway) Identity() messages.Identity {
	return messages.Identity{Node: g.n.cfg.Name, InstanceID: g.n.cfg.InstanceID,
		ProtocolVersion: messages.ProtocolVersion, Capabilities: append([]string{}, capabilities...)}
}

// caller admits a federation call from peer `from`: federation must be on
// and from a known peer. An admitted call is a contact: a peer we do
// not consider healthy is checked at once.
//
// A peer is known when discovery lists it now, or when it sent us its
// registry before (stored, so across restarts): a peer removed from
// --peers or from DNS still owes us the delivery_status of what we
// forwarded to it, and needs our health answers for its queue to send
// them. A node never seen is refused (unknown_peer); to cut a node off for
// good, the others stop trusting its certificate's CA (no revocation list
// is checked).
func (g *gateway) caller(from string) error {
	n := g.n
	if err := g.admit(from); err != nil {
		return err
	}
	if !n.book.Healthy(from) {
		n.system.Root.Send(n.peers, &messages.PeerContact{Peer: from})
	}
	return nil
}

// FederationCaller implements httpapi.Backend: the gateway asks it before
// it reads a call's body.
func (g *gateway) FederationCaller(from string) error { return g.admit(from) }

// admit is caller without the contact: federation on, the node running,
// from a known peer (an unknown one makes discovery look again).
func (g *gateway) admit(from string) error {
	n := g.n
	if !n.cfg.Federation {
		return messages.Errorf(messages.CodeFederationOff, "federation is off on %s (--federation=false)", n.cfg.Name)
	}
	if !n.ready.Load() {
		return unavailable("the node is not running")
	}
	if !n.book.Knows(from) {
		if n.discovery != nil {
			n.system.Root.Send(n.discovery, discovery.Rediscover{})
		}
		return messages.Errorf(messages.CodeUnknownPeer, "%s does not know a peer named %q (check --peers or --dns-srv)", n.cfg.Name, from)
	}
	return nil
}

// FederationHealth implements httpapi.Backend.
func (g *gateway) FederationHealth(_ context.Context, from string, _ messages.Health) (messages.Health, error) {
	if err := g.caller(from); err != nil {
		return messages.Health{}, err
	}
	return g.n.localHealth(), nil
}

// FederationRegistry implements httpapi.Backend.
func (g *gateway) FederationRegistry(_ context.Context, from string, r messages.Registry) (messages.Registry, error) {
	n := g.n
	if err := g.caller(from); err != nil {
		return messages.Registry{}, err
	}
	n.system.Root.Send(n.peers, &messages.PeerRegistryFrom{Peer: from, Frontends: r.Frontends})
	return n.localRegistry(), nil
}

// FederationForward implements httpapi.Backend.
func (g *gateway) FederationForward(ctx context.Context, from string, fs []messages.Forward) ([]messages.ForwardResult, error) {
	n := g.n
	if err := g.caller(from); err != nil {
		return nil, err
	}
	if err := n.roomForNew(); err != nil {
		return nil, err
	}
	// A batch is admitted while fewer than MaxPendingSubmits messages
	// wait, and always when none does: a peer's batch larger than the
	// bound (its forward batches are up to 256) would otherwise be
	// refused every time it is sent, and its messages fail for good.
	k := int64(len(fs))
	if now := n.inflight.Add(k); now > int64(n.cfg.MaxPendingSubmits) && now != k {
		n.inflight.Add(-k)
		return nil, messages.Errorf(messages.CodeOverloaded,
			"more than %d messages are waiting for their commit; retry shortly", n.cfg.MaxPendingSubmits)
	}
	defer n.inflight.Add(-k)
	// The peer's traceparent is never kept: a message keeps its receipt's
	// span here (its later spans on this node are children of it), or
	// nothing without tracing.
	var spans []trace.Span
	if n.tracing != nil {
		spans = g.receiptSpans(telemetry.SpanForwardReceive, from, len(fs),
			func(i int) (string, string) { return fs[i].Traceparent, fs[i].ID })
	}
	for i := range fs {
		fs[i].Traceparent = ""
		if spans != nil && spans[i] != nil {
			fs[i].Traceparent = telemetry.Of(spans[i])
		}
	}
	ch := make(chan messages.AcceptForwardsReply, 1)
	r, err := askNode(ctx, g, n.intake, &messages.AcceptForwards{From: from, Forwards: fs, Reply: ch}, ch)
	if err != nil {
		endReceipts(spans, err, nil)
		return nil, err
	}
	n.noteFull(r.Err)
	endReceipts(spans, r.Err, func(i int) error {
		if i < len(r.Results) && r.Results[i].Error != nil {
			return r.Results[i].Error
		}
		return nil
	})
	return r.Results, r.Err
}

// receiptSpans starts a server span name for each of the count documents
// a peer sent that carries a traceparent (of(i) is its traceparent and
// message id), as its child; nil without tracing or when none came. Only
// authenticated federation calls get here, and a peer sends one only when
// we announce CapTraceContext.
func (g *gateway) receiptSpans(name, from string, count int, of func(int) (tp, id string)) []trace.Span {
	tracing := g.n.tracing
	if tracing == nil {
		return nil
	}
	var spans []trace.Span
	for i := 0; i < count; i++ {
		tp, id := of(i)
		if _, ok := telemetry.Parse(tp); !ok {
			continue
		}
		if spans == nil {
			spans = make([]trace.Span, count)
		}
		spans[i] = tracing.Start(tp, name, trace.SpanKindServer,
			attribute.String("switchboard.message_id", id), attribute.String("switchboard.peer", from))
	}
	return spans
}

// endReceipts ends the spans of receiptSpans: failed with err (the whole
// call's), else with the message's own error.
func endReceipts(spans []trace.Span, err error, of func(int) error) {
	for i, s := range spans {
		if s == nil {
			continue
		}
		if err != nil {
			telemetry.Fail(s, err)
		} else if of != nil {
			telemetry.Fail(s, of(i))
		}
		s.End()
	}
}

// FederationStatus implements httpapi.Backend. A report can only touch
// messages whose dest_smsc is its sender.
func (g *gateway) FederationStatus(ctx context.Context, from string, rs []messages.StatusReport) ([]messages.StatusReply, error) {
	if err := g.caller(from); err != nil {
		return nil, err
	}
	spans := g.receiptSpans(telemetry.SpanStatusReceive, from, len(rs),
		func(i int) (string, string) { return rs[i].Traceparent, rs[i].ID })
	ch := make(chan messages.ApplyStatusesReply, 1)
	r, err := askNode(ctx, g, g.n.intake, &messages.ApplyStatuses{From: from, Reports: rs, Reply: ch}, ch)
	if err != nil {
		endReceipts(spans, err, nil)
		return nil, err
	}
	endReceipts(spans, r.Err, func(i int) error {
		if i < len(r.Results) {
			spans[i].SetAttributes(attribute.String("switchboard.outcome", r.Results[i].Outcome))
		}
		return nil
	})
	return r.Results, r.Err
}

// Peers implements httpapi.Backend: every peer of the book with its
// forward queue depth.
func (g *gateway) Peers(ctx context.Context) ([]messages.PeerInfo, error) {
	n := g.n
	if _, err := g.reads(); err != nil {
		return nil, err
	}
	if !n.cfg.Federation {
		return []messages.PeerInfo{}, nil
	}
	// A fresh count refreshes the book's queue depths (a removed peer is
	// listed while messages wait for it).
	if _, err := n.stats.get(ctx); err != nil {
		return nil, g.storeErr("stats", err, "")
	}
	return n.book.List(), nil
}
