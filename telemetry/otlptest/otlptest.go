// Package otlptest is an in-process OTLP/HTTP collector for tests: an
// httptest server that decodes the protobuf requests of /v1/metrics and
// /v1/traces (go.opentelemetry.io/proto/otlp) and keeps what it got. It
// can also play a collector that is down (every export answered 503) or
// slow (each request held until the test lets it go).
package otlptest

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	Name                          string
	TraceID, SpanID, ParentSpanID string // hex; ParentSpanID "" for a root
	Kind                          string
	Links                         []Link
	Attributes                    map[string]string
	// Resource are the attributes of the span's resource.
	Resource map[string]string
	Error    bool
}

// Link is a span's link.
type Link struct{ TraceID, SpanID string }

// Point is one received number data point of a metric (a counter or a
// gauge), or a histogram's count.
type Point struct {
	Metric string
	Labels map[string]string
	Value  float64
}

// Receiver is the collector.
type Receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []Span
	metrics  []*colmetricpb.ExportMetricsServiceRequest
	requests int
	down     bool
	hold     chan struct{} // non-nil: requests wait for it to close
	changed  chan struct{}
}

// New starts a receiver, closed when the test ends.
func New(t testing.TB) *Receiver {
	r := &Receiver{changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.traces)
	mux.HandleFunc("POST /v1/metrics", r.metricsHandler)
	r.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		r.SetSlow(false)
		r.srv.Close()
	})
	return r
}

// URL is the receiver's base URL (an --otlp-endpoint).
func (r *Receiver) URL() string { return r.srv.URL }

// SetDown makes every export fail with 503 (true) or succeed (false).
func (r *Receiver) SetDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

// SetSlow holds every request until SetSlow(false) (a collector that does
// not answer).
func (r *Receiver) SetSlow(slow bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case slow && r.hold == nil:
		r.hold = make(chan struct{})
	case !slow && r.hold != nil:
		close(r.hold)
		r.hold = nil
	}
}

// Requests counts the export requests that came (answered or not).
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// body reads a request's body (gzip when it says so); ok is false when
// the request was answered here (down, or the body unreadable).
func (r *Receiver) body(w http.ResponseWriter, req *http.Request) ([]byte, bool) {
	r.mu.Lock()
	r.requests++
	down, hold := r.down, r.hold
	r.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
			return nil, false
		}
	}
	if down {
		http.Error(w, "collector down (test)", http.StatusServiceUnavailable)
		return nil, false
	}
	var rd io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return nil, false
		}
		rd = gz
	}
	data, err := io.ReadAll(rd)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return data, true
}

func reply(w http.ResponseWriter, m proto.Message) {
	out, _ := proto.Marshal(m)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) traces(w http.ResponseWriter, req *http.Request) {
	data, ok := r.body(w, req)
	if !ok {
		return
	}
	var in coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range in.ResourceSpans {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Name: s.Name, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					ParentSpanID: hex.EncodeToString(s.ParentSpanId), Kind: s.Kind.String(),
					Attributes: attrs(s.Attributes), Resource: res, Error: s.GetStatus().GetCode() == 2}
				for _, l := range s.Links {
					sp.Links = append(sp.Links, Link{TraceID: hex.EncodeToString(l.TraceId), SpanID: hex.EncodeToString(l.SpanId)})
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.notify()
	r.mu.Unlock()
	reply(w, &coltracepb.ExportTraceServiceResponse{})
}

func (r *Receiver) metricsHandler(w http.ResponseWriter, req *http.Request) {
	data, ok := r.body(w, req)
	if !ok {
		return
	}
	in := &colmetricpb.ExportMetricsServiceRequest{}
	if err := proto.Unmarshal(data, in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.metrics = append(r.metrics, in)
	r.notify()
	r.mu.Unlock()
	reply(w, &colmetricpb.ExportMetricsServiceResponse{})
}

// notify wakes the waiters (r.mu held).
func (r *Receiver) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// MetricRequests counts the metric exports received.
func (r *Receiver) MetricRequests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.metrics)
}

// LastMetrics returns the resource attributes and the points of the last
// metrics export received (ok false before the first).
func (r *Receiver) LastMetrics() (resource map[string]string, points []Point, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.metrics) == 0 {
		return nil, nil, false
	}
	last := r.metrics[len(r.metrics)-1]
	for _, rm := range last.ResourceMetrics {
		resource = attrs(rm.GetResource().GetAttributes())
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				points = append(points, pointsOf(m)...)
			}
		}
	}
	sort.Slice(points, func(i, j int) bool { return points[i].Key() < points[j].Key() })
	return resource, points, true
}

// Key names a point as the Prometheus text format does: name{k="v",...}
// with the labels sorted.
func (p Point) Key() string {
	keys := make([]string, 0, len(p.Labels))
	for k := range p.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString(p.Metric)
	if len(keys) > 0 {
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%q", k, p.Labels[k])
		}
		b.WriteByte('}')
	}
	return b.String()
}

func pointsOf(m *metricpb.Metric) []Point {
	var out []Point
	number := func(dps []*metricpb.NumberDataPoint) {
		for _, dp := range dps {
			v := dp.GetAsDouble()
			if _, ok := dp.Value.(*metricpb.NumberDataPoint_AsInt); ok {
				v = float64(dp.GetAsInt())
			}
			out = append(out, Point{Metric: m.Name, Labels: attrs(dp.Attributes), Value: v})
		}
	}
	switch d := m.Data.(type) {
	case *metricpb.Metric_Gauge:
		number(d.Gauge.DataPoints)
	case *metricpb.Metric_Sum:
		number(d.Sum.DataPoints)
	case *metricpb.Metric_Histogram:
		for _, dp := range d.Histogram.DataPoints {
			out = append(out, Point{Metric: m.Name + "_count", Labels: attrs(dp.Attributes), Value: float64(dp.Count)})
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = valueString(kv.Value)
	}
	return out
}

func valueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// Wait waits until cond holds for the receiver (checked after each
// request it gets, and at once), or fails t after timeout.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, what string, cond func(r *Receiver) bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		if cond(r) {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("otlp receiver: gave up after %v waiting for %s", timeout, what)
		}
	}
}
