package switchboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/telemetry"
	"github.com/switchboard-dev/switchboard/telemetry/otlptest"
)

// The client's trace of the traced tests: a sampled traceparent whose
// parent span (the client's) is not exported.
const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	clientParent  = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// submitTraced submits with a traceparent header and checks the 202.
func (h *harness) submitTraced(id, dest, traceparent string, state messages.State) {
	h.t.Helper()
	h.submitTracedAs(id, dest, traceparent, state)
}

// submitTracedAs is submitTraced that returns the id (the node's when id
// is empty).
func (h *harness) submitTracedAs(id, dest, traceparent string, state messages.State) string {
	h.t.Helper()
	idField := ""
	if id != "" {
		idField = fmt.Sprintf(`"id":%q,`, id)
	}
	body := fmt.Sprintf(`{%s"source_msisdn":"15550001","destination_msisdn":%q,"message_body":"hello"}`, idField, dest)
	req, err := http.NewRequest("POST", h.base+"/api/messages", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct{ ID, State string }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 202 || r.State != string(state) {
		h.t.Fatalf("traced submit %s: %d %+v %v", id, resp.StatusCode, r, err)
	}
	return r.ID
}

// promPoints reads the counters and gauges of a /metrics scrape by
// otlptest.Point.Key.
func promPoints(t *testing.T, text string) map[string]float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			default:
				continue
			}
			out[otlptest.Point{Metric: name, Labels: labels, Value: v}.Key()] = v
		}
	}
	return out
}

// TestOTLPMetricsAreTheRegistry: what is pushed over OTLP is what /metrics
// shows at that moment (same names, labels and values, read from the same
// registry), with the resource attributes of the node.
func TestOTLPMetricsAreTheRegistry(t *testing.T) {
	rcv := otlptest.New(t)
	cfg := testConfig(t)
	cfg.OTLPEndpoint = rcv.URL()
	cfg.OTLPInterval = time.Hour // only FlushTelemetry pushes
	cfg.Version = "v9.9.9-test"
	h := startNode(t, cfg)
	h.pullFrontend("fe", "1")
	for i := range 5 {
		h.submit(fmt.Sprintf("m-%d", i), "1555")
	}
	for _, o := range h.poll("fe", 10, 1000, 30000) {
		h.ack("fe", messages.DeliveryResult{ID: o.ID, Status: messages.Delivered, Attempt: o.Attempt})
	}
	// The push is compared with two scrapes around it: every series that
	// did not move between them must be pushed with that value.
	var before map[string]float64
	polltest.Eventually(t, 20*time.Second, func() error {
		before = promPoints(t, scrape(t, h))
		if before[`switchboard_messages{node="test-node",state="delivered"}`] != 5 {
			return fmt.Errorf("delivered gauge %v", before[`switchboard_messages{node="test-node",state="delivered"}`])
		}
		return nil
	})
	// A gauge may move and come back between the two scrapes (a mailbox
	// depth): a disagreement must hold on every try to fail the test.
	var res map[string]string
	var problems []string
	for try := 0; try < 5; try++ {
		if try > 0 {
			before = promPoints(t, scrape(t, h))
		}
		var compared int
		res, compared, problems = pushAndCompare(t, h, rcv, before)
		if compared < 20 {
			problems = append(problems, fmt.Sprintf("only %d stable switchboard_ series compared", compared))
		}
		if len(problems) == 0 {
			break
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	for k, want := range map[string]string{"service.name": "switchboard", "service.version": "v9.9.9-test",
		"service.instance.id": cfg.InstanceID, telemetry.NodeAttribute: cfg.Name} {
		if res[k] != want {
			t.Errorf("resource %s = %q, want %q (all: %v)", k, res[k], want, res)
		}
	}
}

// pushAndCompare pushes the metrics now, scrapes again, and compares the
// push with every switchboard_ series that stood still between the two
// scrapes; it returns the push's resource attributes, how many series it
// compared and the disagreements.
func pushAndCompare(t *testing.T, h *harness, rcv *otlptest.Receiver, before map[string]float64) (map[string]string, int, []string) {
	t.Helper()
	n := rcv.MetricRequests()
	if err := h.node.FlushTelemetry(t.Context()); err != nil {
		t.Fatalf("FlushTelemetry: %v", err)
	}
	after := promPoints(t, scrape(t, h))
	rcv.Wait(t, 20*time.Second, "a metrics push", func(r *otlptest.Receiver) bool { return r.MetricRequests() > n })
	res, points, _ := rcv.LastMetrics()
	pushed := map[string]float64{}
	for _, p := range points {
		pushed[p.Key()] = p.Value
	}
	var problems []string
	compared := 0
	var keys []string
	for k := range before {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, stable := before[k], after[k] == before[k]
		if !stable || !strings.HasPrefix(k, "switchboard_") {
			continue
		}
		got, ok := pushed[k]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s = %v on /metrics, not pushed", k, v))
		case got != v:
			problems = append(problems, fmt.Sprintf("%s: pushed %v, /metrics %v", k, got, v))
		}
		compared++
	}
	for _, k := range []string{`switchboard_messages{node="test-node",state="delivered"}`, `switchboard_delivery_dispositions_total{frontend="fe",outcome="delivered"}`} {
		if pushed[k] != before[k] || before[k] == 0 {
			problems = append(problems, fmt.Sprintf("%s: pushed %v, /metrics %v", k, pushed[k], before[k]))
		}
	}
	return res, compared, problems
}

// TestOneTraceAcrossAPartition: a message submitted with a traceparent
// while its peer is cut off waits forward_queued, drains after the heal
// and is delivered at the peer; the collector gets the spans of both
// nodes under the client's trace id, forming one tree under the client's
// span, and the group commit's span links to the trace.
func TestOneTraceAcrossAPartition(t *testing.T) {
	rcv := otlptest.New(t)
	fn, a, b := forwardingPair(t, pushingTo(rcv))

	fn.setCut("a", "b", true)
	a.waitPeer("b", messages.PeerUnhealthy)
	a.submitTraced("traced-1", "2555", clientParent, messages.StateForwardQueued)
	if m := a.message("traced-1"); m.TraceID != clientTraceID {
		t.Fatalf("a's message trace_id %q, want %q", m.TraceID, clientTraceID)
	}
	fn.setCut("a", "b", false)
	got := b.pollOne("fe-b")
	b.ack("fe-b", messages.DeliveryResult{ID: got.ID, Status: messages.Delivered, Attempt: got.Attempt})
	a.waitState("traced-1", messages.StateDelivered)
	if m := b.message("traced-1"); m.TraceID != clientTraceID {
		t.Fatalf("b's message trace_id %q, want %q", m.TraceID, clientTraceID)
	}

	want := map[string]string{ // span name -> the node that makes it
		telemetry.SpanSubmit: "a", telemetry.SpanForward: "a", telemetry.SpanForwardReceive: "b",
		telemetry.SpanDeliverPull: "b", telemetry.SpanStatus: "b", telemetry.SpanStatusReceive: "a",
	}
	var spans []otlptest.Span
	rcv.Wait(t, 30*time.Second, "the message's spans", func(r *otlptest.Receiver) bool {
		spans = nil
		names := map[string]bool{}
		for _, s := range r.Spans() {
			if s.TraceID == clientTraceID {
				spans = append(spans, s)
				names[s.Name] = true
			}
		}
		for name := range want {
			if !names[name] {
				return false
			}
		}
		return true
	})
	ids := map[string]otlptest.Span{}
	for _, s := range spans {
		ids[s.SpanID] = s
	}
	roots := 0
	for _, s := range spans {
		if node, ok := want[s.Name]; ok && s.Resource[telemetry.NodeAttribute] != node {
			t.Errorf("span %s from node %q, want %q", s.Name, s.Resource[telemetry.NodeAttribute], node)
		}
		if s.Resource["service.name"] != "switchboard" {
			t.Errorf("span %s: service.name %q", s.Name, s.Resource["service.name"])
		}
		switch _, ok := ids[s.ParentSpanID]; {
		case s.ParentSpanID == clientSpanID:
			roots++
			if s.Name != telemetry.SpanSubmit {
				t.Errorf("span %s hangs from the client's span; only the submit should", s.Name)
			}
		case !ok:
			t.Errorf("span %s: parent %q is not a span of the trace (not one tree)", s.Name, s.ParentSpanID)
		}
	}
	if roots != 1 {
		t.Errorf("%d spans hang from the client's span, want 1 (the submit)", roots)
	}
	// The chain: submit <- forward <- receipt <- {delivery, status} and
	// status <- its receipt.
	parentName := func(name string) []string {
		var out []string
		for _, s := range spans {
			if s.Name == name {
				out = append(out, ids[s.ParentSpanID].Name)
			}
		}
		return out
	}
	for child, parent := range map[string]string{
		telemetry.SpanForward: telemetry.SpanSubmit, telemetry.SpanForwardReceive: telemetry.SpanForward,
		telemetry.SpanDeliverPull: telemetry.SpanForwardReceive, telemetry.SpanStatus: telemetry.SpanForwardReceive,
		telemetry.SpanStatusReceive: telemetry.SpanStatus,
	} {
		for _, p := range parentName(child) {
			if p != parent {
				t.Errorf("span %s is a child of %q, want %s", child, p, parent)
			}
		}
	}
	// The group commits that carried it (at a, and at b) link to its trace.
	rcv.Wait(t, 30*time.Second, "the commits' spans linking to the trace", func(r *otlptest.Receiver) bool {
		nodes := map[string]bool{}
		for _, s := range r.Spans() {
			if s.Name != telemetry.SpanIntakeCommit || s.TraceID == clientTraceID {
				continue
			}
			for _, l := range s.Links {
				if l.TraceID == clientTraceID {
					nodes[s.Resource[telemetry.NodeAttribute]] = true
				}
			}
		}
		return nodes["a"] && nodes["b"]
	})
}

// TestWebhookGetsTheAttemptsTraceparent: a webhook call carries the
// traceparent of its attempt's span, in the message's trace.
func TestWebhookGetsTheAttemptsTraceparent(t *testing.T) {
	rcv := otlptest.New(t)
	var mu sync.Mutex
	var header string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		header = r.Header.Get("traceparent")
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer hook.Close()
	cfg := testConfig(t)
	pushingTo(rcv)(&cfg)
	h := startNode(t, cfg)
	h.webhookFrontend("hook", hook.URL, "3")
	h.submitTraced("hooked", "3555", clientParent, messages.StatePending)
	h.waitState("hooked", messages.StateDelivered)
	mu.Lock()
	tp := header
	mu.Unlock()
	sc, ok := telemetry.Parse(tp)
	if !ok || sc.TraceID().String() != clientTraceID || !sc.IsSampled() {
		t.Fatalf("webhook traceparent %q, want one in trace %s, sampled", tp, clientTraceID)
	}
	rcv.Wait(t, 20*time.Second, "the webhook attempt's span", func(r *otlptest.Receiver) bool {
		for _, s := range r.Spans() {
			if s.Name == telemetry.SpanDeliverWebhook && s.SpanID == sc.SpanID().String() && s.TraceID == clientTraceID {
				return true
			}
		}
		return false
	})
}

// TestUnsampledSubmitKeepsNoTrace: a traceparent that is not sampled is
// followed (nothing is exported, nothing kept with the message).
func TestUnsampledSubmitKeepsNoTrace(t *testing.T) {
	rcv := otlptest.New(t)
	cfg := testConfig(t)
	pushingTo(rcv)(&cfg)
	h := startNode(t, cfg)
	h.pullFrontend("fe", "1")
	h.submitTraced("quiet", "1555", "00-"+clientTraceID+"-"+clientSpanID+"-00", messages.StatePending)
	if m := h.message("quiet"); m.TraceID != "" {
		t.Fatalf("trace_id %q kept for an unsampled trace", m.TraceID)
	}
}

// TestCollectorDownOrSlow: a collector that is down, then one that does
// not answer, costs the node neither its submits nor memory that grows
// with the spans it cannot send (the span queue is bounded).
func TestCollectorDownOrSlow(t *testing.T) {
	// A smaller span queue than the default 2048 (the standard variable,
	// read by the SDK) fills within the first round.
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "256")
	rcv := otlptest.New(t)
	rcv.SetDown(true)
	cfg := testConfig(t)
	cfg.OTLPEndpoint, cfg.OTLPInterval = rcv.URL(), 20*time.Millisecond
	h := startNode(t, cfg)
	h.pullFrontend("fe", "1")
	round := func(prefix string) uint64 {
		for i := range 300 {
			tp := fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
			h.submitTraced(fmt.Sprintf("%s-%d", prefix, i), "1555", tp, messages.StatePending)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// The first round fills the span queue (two spans a message); the
	// ones after it may not grow the heap by more than the queue could
	// hold, whatever the number of spans dropped.
	round("down-a")
	rcv.Wait(t, 20*time.Second, "failed exports", func(r *otlptest.Receiver) bool { return r.Requests() >= 2 })
	h1 := round("down-b")
	rcv.SetDown(false)
	rcv.SetSlow(true)
	round("slow-a")
	h2 := round("slow-b")
	const bound = 16 << 20
	if h2 > h1+bound {
		t.Fatalf("heap grew from %d to %d bytes over 600 traced submits with the collector down or slow (bound %d)", h1, h2, bound)
	}
	// The counts of /api/status come from a snapshot a second old at most
	// (the OTLP push, every 20 ms here, keeps taking fresh ones).
	polltest.Eventually(t, 10*time.Second, func() error {
		if st := h.status(); st.Counts["pending"] != 1200 {
			return fmt.Errorf("pending %d, want 1200: %+v", st.Counts["pending"], st.Counts)
		}
		return nil
	})
}

// TestStatusBatchOfTracedAndUntracedMessages: two messages from a to b,
// one traced and one not, delivered at b together: b's delivery_status
// batch back to a holds a traced report and an untraced one, and sends
// both (it once took the untraced one's traceparent from its missing span
// and crashed the node).
func TestStatusBatchOfTracedAndUntracedMessages(t *testing.T) {
	rcv := otlptest.New(t)
	_, a, b := forwardingPair(t, pushingTo(rcv))
	a.submitTraced("mix-traced", "2555", clientParent, messages.StatePending)
	a.submitAs("mix-plain", "2556", messages.StatePending)
	var got []messages.Outgoing
	for len(got) < 2 {
		got = append(got, b.poll("fe-b", 10, 2000, 30000)...)
	}
	var rs []messages.DeliveryResult
	for _, o := range got {
		rs = append(rs, messages.DeliveryResult{ID: o.ID, Status: messages.Delivered, Attempt: o.Attempt})
	}
	b.ack("fe-b", rs...) // one ack: their reports leave b in one batch
	a.waitState("mix-traced", messages.StateDelivered)
	a.waitState("mix-plain", messages.StateDelivered)
	rcv.Wait(t, 20*time.Second, "the traced report's status span", func(r *otlptest.Receiver) bool {
		for _, s := range r.Spans() {
			if s.Name == telemetry.SpanStatusReceive && s.TraceID == clientTraceID {
				return true
			}
		}
		return false
	})
}

// TestStopAfterASlowDrainStillPushes: a stop whose drain uses up
// ShutdownTimeout (a webhook that does not answer) still makes its last
// push: the stop's context has run out by then, the push has its own
// bound (telemetry.ShutdownFlush).
func TestStopAfterASlowDrainStillPushes(t *testing.T) {
	rcv := otlptest.New(t)
	called, release := make(chan struct{}, 1), make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case called <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hook.Close()
	defer close(release)
	cfg := testConfig(t)
	cfg.ShutdownTimeout = 500 * time.Millisecond
	cfg.OTLPEndpoint, cfg.OTLPInterval = rcv.URL(), time.Hour // no push but the last
	h := startNode(t, cfg)
	h.webhookFrontend("hook", hook.URL, "3")
	h.submitTraced("slow-1", "3555", clientParent, messages.StatePending)
	select {
	case <-called:
	case <-time.After(20 * time.Second):
		t.Fatal("the webhook was not called")
	}
	if err := h.node.Stop(t.Context()); err == nil {
		t.Fatal("Stop did not report the drain that ran out of time")
	}
	submitted := false
	for _, s := range rcv.Spans() {
		submitted = submitted || (s.Name == telemetry.SpanSubmit && s.TraceID == clientTraceID)
	}
	if n := rcv.MetricRequests(); n == 0 || !submitted {
		t.Fatalf("after Stop the collector got %d metric pushes and the submit's span %v; want the last push", n, submitted)
	}
}

// TestRefusedSubmitMakesNoSpan: a submit with a sampled traceparent that
// the API refuses (no token, 401; a role that may not submit, 403) makes
// no span: only a caller let in starts or continues a trace, so that
// anyone who reaches the port cannot fill the span queue.
func TestRefusedSubmitMakesNoSpan(t *testing.T) {
	rcv := otlptest.New(t)
	cfg := testConfig(t)
	var f auth.File
	admin, adminHash := auth.NewToken()
	operator, operatorHash := auth.NewToken() // may not submit
	f.Credentials = []messages.Credential{
		{Name: "root", Role: messages.RoleAdmin, TokenHash: adminHash},
		{Name: "ops", Role: messages.RoleOperator, TokenHash: operatorHash},
	}
	cfg.Credentials = filepath.Join(cfg.DataDir, "credentials.json")
	if err := os.WriteFile(cfg.Credentials, f.Format(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.OTLPEndpoint, cfg.OTLPInterval = rcv.URL(), time.Hour // pushed by FlushTelemetry only
	h := startNode(t, cfg)
	h.token = admin
	refused := func(token, traceID string, want int) {
		t.Helper()
		req, _ := http.NewRequest("POST", h.base+"/api/messages",
			strings.NewReader(`{"source_msisdn":"1","destination_msisdn":"1555","message_body":"x"}`))
		req.Header.Set("traceparent", "00-"+traceID+"-"+clientSpanID+"-01")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("status %d, want %d", resp.StatusCode, want)
		}
	}
	const unauthenticated, forbidden = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2"
	refused("", unauthenticated, http.StatusUnauthorized)
	refused("not-a-token", unauthenticated, http.StatusUnauthorized)
	refused(operator, forbidden, http.StatusForbidden)
	// An accepted submit, pushed by the same flush: the refused ones'
	// spans would have gone with it.
	h.pullFrontend("fe", "1")
	h.submitTraced("let-in", "1555", clientParent, messages.StatePending)
	if err := h.node.FlushTelemetry(t.Context()); err != nil {
		t.Fatal(err)
	}
	accepted := false
	for _, s := range rcv.Spans() {
		switch s.TraceID {
		case unauthenticated, forbidden:
			t.Errorf("refused submit exported span %q %v", s.Name, s.Attributes)
		case clientTraceID:
			accepted = accepted || s.Name == telemetry.SpanSubmit
		}
	}
	if !accepted {
		t.Fatal("the accepted submit's span was not pushed")
	}
}

// pushingTo makes a node push its telemetry to rcv every 50 ms.
func pushingTo(rcv *otlptest.Receiver) func(*switchboard.Config) {
	return func(c *switchboard.Config) { c.OTLPEndpoint, c.OTLPInterval = rcv.URL(), 50*time.Millisecond }
}

// pullSpan waits for the switchboard.deliver.pull span of trace traceID
// made by instance (any when ""), and returns it.
func pullSpan(t *testing.T, rcv *otlptest.Receiver, traceID, instance string) otlptest.Span {
	t.Helper()
	var got otlptest.Span
	rcv.Wait(t, 20*time.Second, "the pull span of "+traceID, func(r *otlptest.Receiver) bool {
		for _, s := range r.Spans() {
			if s.Name == telemetry.SpanDeliverPull && s.TraceID == traceID &&
				(instance == "" || s.Resource["service.instance.id"] == instance) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

// TestPullSpanEndsWithItsLease: a polled message that is never acked (the
// consumer died; its message then waits for another poll, or expires)
// ends its switchboard.deliver.pull span when its lease ends, with the
// verdict retry, not only when the worker stops.
func TestPullSpanEndsWithItsLease(t *testing.T) {
	rcv := otlptest.New(t)
	cfg := testConfig(t)
	pushingTo(rcv)(&cfg)
	h := startNode(t, cfg)
	h.pullFrontend("fe", "1")
	h.submitTraced("unacked", "1555", clientParent, messages.StatePending)
	if got := h.poll("fe", 1, 5000, 1000); len(got) != 1 {
		t.Fatalf("polled %d messages, want 1", len(got))
	}
	s := pullSpan(t, rcv, clientTraceID, "")
	if v := s.Attributes["switchboard.verdict"]; v != string(messages.Retry) || !s.Error {
		t.Fatalf("pull span ended with verdict %q (error %v), want %s", v, s.Error, messages.Retry)
	}
}

// TestSitePullSpanEndsWhenAckedElsewhere: in a site, a consumer behind a
// load balancer polls instance a1 and acks through a2. a1 never sees the
// ack: its switchboard.deliver.pull span ends when the lease does.
func TestSitePullSpanEndsWhenAckedElsewhere(t *testing.T) {
	dsn := pgtest.DSN(t)
	rcv := otlptest.New(t)
	var hs []*harness
	for _, id := range []string{"a1", "a2"} {
		c := siteConfig(t, dsn, id)
		pushingTo(rcv)(&c)
		hs = append(hs, startNode(t, c))
	}
	waitRing(t, hs, "a1", "a2")
	hs[0].pullFrontend("fe", "44")
	hs[0].submitTraced("site-1", "4470001", clientParent, messages.StatePending)
	got := hs[0].poll("fe", 1, 5000, 2000)
	if len(got) != 1 {
		t.Fatalf("polled %d messages, want 1", len(got))
	}
	out := hs[1].ack("fe", messages.DeliveryResult{ID: got[0].ID, Status: messages.Delivered, Attempt: got[0].Attempt})
	if len(out) != 1 || out[0].Outcome != "applied" {
		t.Fatalf("ack at a2: %+v", out)
	}
	hs[0].waitState("site-1", messages.StateDelivered)
	pullSpan(t, rcv, clientTraceID, "a1")
}

// TestRedactMasksSpans: --redact on masks numbers "in logs, spans and the
// audit trail" (CONTRACT.md); a message id (a client picks its ids, often
// the number itself) went out whole in the spans pushed over OTLP.
func TestRedactMasksSpans(t *testing.T) {
	rcv := otlptest.New(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer hook.Close()
	cfg := testConfig(t)
	cfg.Redact = switchboard.RedactOn
	pushingTo(rcv)(&cfg)
	h := startNode(t, cfg)
	h.webhookFrontend("hook", hook.URL, "44")
	const number = "447700900123"
	h.submitTraced(number, "+"+number, clientParent, messages.StatePending)
	h.waitState(number, messages.StateDelivered)
	var got otlptest.Span
	rcv.Wait(t, 20*time.Second, "the webhook attempt's span", func(r *otlptest.Receiver) bool {
		for _, s := range r.Spans() {
			if s.Name == telemetry.SpanDeliverWebhook && s.TraceID == clientTraceID {
				got = s
				return true
			}
		}
		return false
	})
	for k, v := range got.Attributes {
		if strings.Contains(v, number) {
			t.Errorf("with --redact on, span %s carries %s=%q: the number whole", got.Name, k, v)
		}
	}
}
