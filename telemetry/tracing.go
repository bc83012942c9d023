package telemetry

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultRatio is the share of new traces the default sampler keeps: 1%
// of the submits that come without a traceparent. A submit whose
// traceparent is sampled is always followed; one that is not sampled is
// not.
const DefaultRatio = 0.01

// DefaultSampler is the sampler when OTEL_TRACES_SAMPLER is not set:
// parent-based, with DefaultRatio for new traces; and a new root whose
// links include a sampled span (a group commit linking the messages it
// carries) is kept, so that every sampled message's commit is seen.
func DefaultSampler() sdktrace.Sampler {
	return linkSampler{base: sdktrace.ParentBased(sdktrace.TraceIDRatioBased(DefaultRatio))}
}

type linkSampler struct{ base sdktrace.Sampler }

func (s linkSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if !trace.SpanContextFromContext(p.ParentContext).IsValid() {
		for _, l := range p.Links {
			if l.SpanContext.IsSampled() {
				return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
			}
		}
	}
	return s.base.ShouldSample(p)
}

func (s linkSampler) Description() string {
	return "LinkSampled{" + s.base.Description() + "}"
}

// The span names (docs/observability.md).
const (
	// SpanSubmit is the submit's HTTP server span.
	SpanSubmit = "POST /api/messages"
	// SpanSubmitSMPP is a message's submit over the SMPP listener
	// (server): its submit_sm or data_sm (the last part's, for a long
	// message) to the commit; a new trace, as the sampler decides.
	SpanSubmitSMPP = "switchboard.submit.smpp"
	// SpanIntakeCommit is one group commit, linked to each message's trace.
	SpanIntakeCommit = "switchboard.intake.commit"
	// SpanForward is one forward to a peer (client), a child of the
	// message's trace context.
	SpanForward = "switchboard.forward"
	// SpanForwardReceive is the peer's receipt of a forward (server), a
	// child of SpanForward; the message's trace context at the peer.
	SpanForwardReceive = "switchboard.forward.receive"
	// SpanDeliverWebhook is one webhook attempt (client); the webhook
	// gets its traceparent.
	SpanDeliverWebhook = "switchboard.deliver.webhook"
	// SpanDeliverSMPP is one attempt of an smpp frontend (client): the
	// message's submit_sm, every part, to the verdict.
	SpanDeliverSMPP = "switchboard.deliver.smpp"
	// SpanDeliverPull covers a pull frontend's lease of the message until
	// its ack (or the lease's end).
	SpanDeliverPull = "switchboard.deliver.pull"
	// SpanDeliverActor is one attempt of an in-process actor frontend.
	SpanDeliverActor = "switchboard.deliver.actor"
	// SpanStatus is a delivery_status sent back to the origin (client).
	SpanStatus = "switchboard.delivery_status"
	// SpanStatusReceive is the origin's receipt of it (server).
	SpanStatusReceive = "switchboard.delivery_status.receive"
)

// TracerName is the instrumentation scope of Switchboard's spans.
const TracerName = "github.com/switchboard-dev/switchboard"

// Tracing makes the spans of messages. A nil *Tracing makes none: its
// methods return at once (a node without an OTLP endpoint pays nothing).
type Tracing struct {
	tracer trace.Tracer
	// mask, when set, masks every text a span of Start or StartLinked
	// carries (see NewTracing).
	mask func(string) string
}

// NewTracing makes spans with tp. mask, when not nil, masks personal data
// (--redact on: redact.Text, numbers in message ids and failure texts)
// in every text the spans of Start and StartLinked carry: their string
// attributes, set at the start or later, their status and the errors they
// record. The submit's server span (Handler) carries the method, the
// fixed path and the status only.
func NewTracing(tp trace.TracerProvider, mask func(string) string) *Tracing {
	return &Tracing{tracer: tp.Tracer(TracerName), mask: mask}
}

// masked is attrs with their string values masked (attrs as they are
// without a mask).
func (t *Tracing) masked(attrs []attribute.KeyValue) []attribute.KeyValue {
	if t.mask == nil {
		return attrs
	}
	out := make([]attribute.KeyValue, len(attrs))
	for i, kv := range attrs {
		out[i] = kv
		if kv.Value.Type() == attribute.STRING {
			out[i] = attribute.String(string(kv.Key), t.mask(kv.Value.AsString()))
		}
	}
	return out
}

// wrap is span, masking what is set on it later when t masks.
func (t *Tracing) wrap(span trace.Span) trace.Span {
	if t.mask == nil {
		return span
	}
	return maskedSpan{Span: span, t: t}
}

// maskedSpan masks the attributes, status and errors set on its span.
type maskedSpan struct {
	trace.Span
	t *Tracing
}

func (s maskedSpan) SetAttributes(kv ...attribute.KeyValue) { s.Span.SetAttributes(s.t.masked(kv)...) }

func (s maskedSpan) SetStatus(code codes.Code, description string) {
	s.Span.SetStatus(code, s.t.mask(description))
}

func (s maskedSpan) RecordError(err error, opts ...trace.EventOption) {
	if err != nil {
		err = errors.New(s.t.mask(err.Error()))
	}
	s.Span.RecordError(err, opts...)
}

// Start starts span name as a child of parent, a W3C traceparent (a new
// root when it is empty or not valid). Its caller ends it. On a nil
// Tracing the span does nothing.
func (t *Tracing) Start(parent, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) trace.Span {
	if t == nil {
		return trace.SpanFromContext(context.Background())
	}
	ctx := context.Background()
	if sc, ok := Parse(parent); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	_, span := t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(t.masked(attrs)...))
	return t.wrap(span)
}

// StartLinked starts a new root span name linked to each of the traces
// (W3C traceparents; the empty and invalid ones are skipped): work done
// for many messages at once, such as a group commit.
func (t *Tracing) StartLinked(name string, traces []string, attrs ...attribute.KeyValue) trace.Span {
	if t == nil {
		return trace.SpanFromContext(context.Background())
	}
	links := make([]trace.Link, 0, len(traces))
	for _, tp := range traces {
		if sc, ok := Parse(tp); ok {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	_, span := t.tracer.Start(context.Background(), name, trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(t.masked(attrs)...))
	return t.wrap(span)
}

// Handler wraps h in the HTTP server span named name: an incoming
// traceparent is its parent, else it starts a new trace (as the sampler
// decides). A request whose span is not sampled goes to h as it came (no
// copy of the request, no wrapped writer): most submits cost a sampling
// decision only. On a nil Tracing it is h.
func (t *Tracing) Handler(h http.Handler, name string) http.Handler {
	if t == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if tp := r.Header.Get("traceparent"); tp != "" {
			ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		if !span.SpanContext().IsSampled() {
			span.End()
			h.ServeHTTP(w, r)
			return
		}
		span.SetAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
		span.End()
	})
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Sampled is the traceparent of the span in ctx when it is sampled, else
// "": only a sampled trace is kept with a message, so that a message of
// an unsampled trace costs nothing later on.
func Sampled(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return Format(sc)
}

// Of is the traceparent of span when it is sampled, else "" (also for no
// span: an untraced message's slot in a batch of spans is nil).
func Of(span trace.Span) string {
	if span == nil {
		return ""
	}
	sc := span.SpanContext()
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return Format(sc)
}

// Fail marks span failed with err (nothing when err is nil).
func Fail(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// Format is the W3C traceparent of sc (version 00).
func Format(sc trace.SpanContext) string {
	const hexdigits = "0123456789abcdef"
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	for i, x := range tid {
		b[3+2*i], b[4+2*i] = hexdigits[x>>4], hexdigits[x&0xf]
	}
	b[35] = '-'
	for i, x := range sid {
		b[36+2*i], b[37+2*i] = hexdigits[x>>4], hexdigits[x&0xf]
	}
	b[52] = '-'
	f := sc.TraceFlags()
	b[53], b[54] = hexdigits[f>>4], hexdigits[f&0xf]
	return string(b[:])
}

// Parse reads a W3C traceparent (version 00, or a later version's first
// four fields); ok is false when it is not valid.
func Parse(tp string) (trace.SpanContext, bool) {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || (len(tp) > 55 && tp[55] != '-') {
		return trace.SpanContext{}, false
	}
	if tp[:2] == "ff" || (tp[:2] == "00" && len(tp) != 55) {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(tp[3:35])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(tp[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags byte
	for _, c := range []byte(tp[53:55]) {
		switch {
		case c >= '0' && c <= '9':
			flags = flags<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			flags = flags<<4 | (c - 'a' + 10)
		default:
			return trace.SpanContext{}, false
		}
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags), Remote: true})
	return sc, sc.IsValid()
}
