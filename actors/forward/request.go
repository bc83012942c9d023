package forward

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/telemetry"
	"github.com/switchboard-dev/switchboard/transport"
)

// sent is a request's result, sent back by its goroutine.
type sent struct {
	batch   Batch
	forward []messages.ForwardResult
	status  []messages.StatusReply
	err     error
}

// answered counts the work the peer answered (all of it unless the call
// failed: then the answers to its requests that completed).
func (s *sent) answered() int {
	n := 0
	for i := range s.batch.Work {
		if s.batch.Kind == persistence.WorkForward && forwardAnswered(s.forward, i, s.err) ||
			s.batch.Kind == persistence.WorkStatus && statusAnswered(s.status, i, s.err) {
			n++
		}
	}
	return n
}

// send runs one request in its own goroutine; its result comes back as a
// message, so Receive never waits on the network.
func (q *Queue) send(b Batch) {
	link, cfg, g := q.link.Peer(), q.cfg, q.gate
	go func() { q.deliver(g, cfg.request(link, b)) }()
}

// request makes the call that sends b to the peer at link and returns its
// result: the whole call is bounded by callTimeout, each of its requests
// by the transport's own timeout, and the answers of the requests that
// completed are kept when a later one fails (transport.Peer).
func (c Config) request(link messages.PeerLink, b Batch) *sent {
	ctx, cancel := context.WithTimeout(context.Background(), c.callTimeout())
	defer cancel()
	tr, node, peerName := c.Transport, c.Node, c.Peer
	res := &sent{batch: b}
	if b.Kind == persistence.WorkForward {
		spans := startSpans(c.Tracing, telemetry.SpanForward, peerName, b.Work)
		res.forward, res.err = sendForwards(ctx, tr, peerName, link, b.Work, spans)
		endSpans(spans, func(i int) error {
			if !forwardAnswered(res.forward, i, res.err) {
				return res.err
			}
			if e := res.forward[i].Error; e != nil {
				return e
			}
			return settled(spans[i], peerName, res.forward[i].ForwardReply)
		})
		return res
	}
	spans := startSpans(c.Tracing, telemetry.SpanStatus, peerName, b.Work)
	rs := make([]messages.StatusReport, len(b.Work))
	for i, w := range b.Work {
		var ok bool
		if rs[i], ok = ReportOf(node, w.Message); !ok {
			// Flow.sendable holds such work back; never report a
			// guess: the request fails and its work is retried.
			res.err = fmt.Errorf("message %s is %s here: no final outcome to report", w.MessageID, w.Message.State)
		}
		if !link.MessageFields {
			rs[i].Attempts = 0 // a field the peer did not announce
		}
		if link.TraceContext && spans != nil && spans[i] != nil {
			// An untraced message shares the batch with traced ones.
			rs[i].Traceparent = telemetry.Of(spans[i])
		}
	}
	if res.err == nil {
		res.status, res.err = tr.Status(ctx, transport.Target{Node: peerName, Addr: link.Addr}, link.StatusBatch, rs)
	}
	if (res.err == nil || res.status != nil) && len(res.status) != len(rs) {
		res.status, res.err = nil, fmt.Errorf("peer answered %d results for %d reports", len(res.status), len(rs))
	}
	endSpans(spans, func(i int) error {
		if !statusAnswered(res.status, i, res.err) {
			return res.err
		}
		return nil
	})
	return res
}

// startSpans starts span name (a client span to peer) for each traced
// message of work, as a child of its trace; nil when none is traced.
func startSpans(t *telemetry.Tracing, name, peerName string, work []persistence.Work) []trace.Span {
	if t == nil {
		return nil
	}
	var spans []trace.Span
	for i, w := range work {
		if w.Message.Trace == "" {
			continue
		}
		if spans == nil {
			spans = make([]trace.Span, len(work))
		}
		spans[i] = t.Start(w.Message.Trace, name, trace.SpanKindClient,
			attribute.String("switchboard.message_id", w.Message.ID), attribute.String("switchboard.peer", peerName))
	}
	return spans
}

// settled records on a forward's span the final state the peer answered
// it with (a message it holds already and has delivered or failed: the
// origin records that state as the peer's report, Policy.Judge) as
// switchboard.outcome, and returns the error that fails the span when
// that state is failed. Before, the span of such a forward showed nothing
// of it, and no span showed the message's outcome.
func settled(span trace.Span, peerName string, r messages.ForwardReply) error {
	if r.State != messages.StateDelivered && r.State != messages.StateFailed {
		return nil
	}
	span.SetAttributes(attribute.String("switchboard.outcome", string(r.State)), attribute.Bool("switchboard.duplicate", r.Duplicate))
	if r.State != messages.StateFailed {
		return nil
	}
	if r.Reason != "" {
		return fmt.Errorf("%s holds the message already, failed: %s", peerName, r.Reason)
	}
	return fmt.Errorf("%s holds the message already, failed", peerName)
}

// endSpans ends the spans of startSpans, each failed with errOf(i) (the
// request's error for a message without an answer, else the message's
// own) when that is not nil.
func endSpans(spans []trace.Span, errOf func(i int) error) {
	for i, s := range spans {
		if s == nil {
			continue
		}
		telemetry.Fail(s, errOf(i))
		s.End()
	}
}

// missingCapability is why a forward of o cannot go to the peer of link
// (a capability_missing error), or nil: a message that uses the optional
// fields needs CapMessageFields, one with a message class CapMessageClass
// too (an older version would refuse the field, or ignore it and deliver
// the message otherwise than asked).
func missingCapability(o messages.Options, link messages.PeerLink) *messages.Error {
	switch {
	case o.Used() && !link.MessageFields:
		return messages.Errorf(messages.CodeCapabilityMissing, "the peer does not announce %s, which carries data_coding, "+
			"message_body_base64, validity_until and deliver_after", messages.CapMessageFields)
	case o.MessageClass != nil && !link.MessageClass:
		return messages.Errorf(messages.CodeCapabilityMissing, "the peer does not announce %s, which carries message_class", messages.CapMessageClass)
	}
	return nil
}

// sendForwards sends the forwards of work in one call to peerName and
// returns a result for each, in order. A message the peer cannot take
// (missingCapability) is not sent: its result is a capability_missing
// error, which fails it (see Judge). With an error, the results known are
// returned all the same (those of the requests that completed, and the
// messages not sent): see forwardAnswered.
func sendForwards(ctx context.Context, tr transport.Peer, peerName string, link messages.PeerLink, work []persistence.Work, spans []trace.Span) ([]messages.ForwardResult, error) {
	out := make([]messages.ForwardResult, len(work))
	fs := make([]messages.Forward, 0, len(work))
	at := make([]int, 0, len(work))
	for i, w := range work {
		f := messages.ForwardOf(w.Message)
		if e := missingCapability(f.Options, link); e != nil {
			out[i] = messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: f.ID}, Error: e}
			continue
		}
		if link.TraceContext && spans != nil && spans[i] != nil {
			// Only to a peer that announced it: it continues the trace.
			f.Traceparent = telemetry.Of(spans[i])
		}
		fs, at = append(fs, f), append(at, i)
	}
	if len(fs) == 0 {
		return out, nil
	}
	res, err := tr.Forward(ctx, transport.Target{Node: peerName, Addr: link.Addr}, link.ForwardBatch, fs)
	if (err == nil || res != nil) && len(res) != len(fs) {
		res, err = nil, fmt.Errorf("peer answered %d results for %d forwards", len(res), len(fs))
	}
	for j, i := range at[:len(res)] {
		out[i] = res[j]
	}
	return out, err
}

// ReportOf is the delivery_status report of a message final at node, and
// whether it has one: only delivered is reported delivered; failed and
// forward_failed (no frontend took it) are failed; a message not final has
// no report (Flow holds such work back).
func ReportOf(node string, m messages.Message) (messages.StatusReport, bool) {
	var status string
	switch m.State {
	case messages.StateDelivered:
		status = messages.ReportDelivered
	case messages.StateFailed, messages.StateForwardFailed:
		status = messages.ReportFailed
	default:
		return messages.StatusReport{}, false
	}
	return messages.StatusReport{ID: m.ID, Node: node, Status: status, At: m.UpdatedAt, Reason: m.Reason, Attempts: m.Attempts}, true
}
