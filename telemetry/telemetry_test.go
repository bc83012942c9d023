package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/switchboard-dev/switchboard/telemetry"
	"github.com/switchboard-dev/switchboard/telemetry/otlptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestParseFormat(t *testing.T) {
	sc, ok := telemetry.Parse(parent)
	if !ok || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsSampled() {
		t.Fatalf("Parse(%q) = %v %v", parent, sc, ok)
	}
	if got := telemetry.Format(sc); got != parent {
		t.Fatalf("Format = %q, want %q", got, parent)
	}
	for _, bad := range []string{
		"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", // too short
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span id
		"00-4bf92f3577b34da6a3ce929d0e0e473x-00f067aa0ba902b7-01", // not hex
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
	} {
		if _, ok := telemetry.Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	// A later version may add fields after the four it shares.
	if _, ok := telemetry.Parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more"); !ok {
		t.Error("a later version's traceparent refused")
	}
}

// TestOfNoSpan: the traceparent of no span (an untraced message's slot
// in a batch's spans) is none, not a panic.
func TestOfNoSpan(t *testing.T) {
	if got := telemetry.Of(nil); got != "" {
		t.Fatalf("Of(nil) = %q, want none", got)
	}
}

func TestDefaultSampler(t *testing.T) {
	s := telemetry.DefaultSampler()
	sampled, _ := telemetry.Parse(parent)
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: sampled.TraceID(), SpanID: sampled.SpanID(), Remote: true})
	decide := func(p sdktrace.SamplingParameters) sdktrace.SamplingDecision { return s.ShouldSample(p).Decision }
	ctxOf := func(sc trace.SpanContext) context.Context {
		return trace.ContextWithRemoteSpanContext(context.Background(), sc)
	}
	if d := decide(sdktrace.SamplingParameters{ParentContext: ctxOf(sampled), TraceID: sampled.TraceID()}); d != sdktrace.RecordAndSample {
		t.Errorf("child of a sampled parent: %v", d)
	}
	if d := decide(sdktrace.SamplingParameters{ParentContext: ctxOf(unsampled), TraceID: sampled.TraceID()}); d != sdktrace.Drop {
		t.Errorf("child of an unsampled parent: %v", d)
	}
	if d := decide(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: sampled.TraceID(),
		Links: []trace.Link{{SpanContext: unsampled}, {SpanContext: sampled}}}); d != sdktrace.RecordAndSample {
		t.Errorf("a root linked to a sampled span: %v", d)
	}
	// New traces: about DefaultRatio of them.
	kept := 0
	const n = 20000
	for i := range n {
		var tid trace.TraceID
		for j := range 8 {
			tid[8+j] = byte(uint64(i) * 0x9e3779b97f4a7c15 >> (8 * j))
		}
		if decide(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: tid}) == sdktrace.RecordAndSample {
			kept++
		}
	}
	if r := float64(kept) / n; r < telemetry.DefaultRatio/2 || r > telemetry.DefaultRatio*2 {
		t.Errorf("new traces kept: %v, want about %v", r, telemetry.DefaultRatio)
	}
}

// TestOffCostsNothing: without an endpoint there is no tracing, and a nil
// Tracing's spans allocate nothing.
func TestOffCostsNothing(t *testing.T) {
	cfg := telemetry.DefaultConfig()
	cfg.Gatherer = prometheus.NewRegistry()
	cfg.Getenv = func(string) string { return "" }
	tel, err := telemetry.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	tr := tel.Tracing()
	if tr != nil {
		t.Fatal("tracing without an endpoint")
	}
	if a := testing.AllocsPerRun(100, func() {
		s := tr.Start(parent, telemetry.SpanForward, trace.SpanKindClient)
		s.End()
	}); a != 0 {
		t.Errorf("a nil Tracing's span allocates %v times", a)
	}
}

func TestEndpointFromEnvironment(t *testing.T) {
	rcv := otlptest.New(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv.URL() + "/v1/traces"}
	cfg := telemetry.DefaultConfig()
	cfg.Gatherer = prometheus.NewRegistry()
	cfg.Getenv = func(k string) string { return env[k] }
	tel, err := telemetry.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.Tracing() == nil {
		t.Fatal("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT did not turn tracing on")
	}
	env["OTEL_SDK_DISABLED"] = "true"
	off, err := telemetry.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if off.Tracing() != nil {
		t.Fatal("OTEL_SDK_DISABLED=true left tracing on")
	}
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// TestCollectorDown: spans that cannot be sent are dropped once the
// bounded queue is full (the heap stays flat however many are made), and
// the failures are logged at most once a window per signal.
func TestCollectorDown(t *testing.T) {
	// Nothing listens there: every export is refused at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	var logs logBuffer
	cfg := telemetry.DefaultConfig()
	cfg.Endpoint, cfg.Gatherer = down, prometheus.NewRegistry()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.MetricInterval, cfg.SpanBatchTimeout = 10*time.Millisecond, 10*time.Millisecond
	cfg.Getenv = func(string) string { return "" }
	tel, err := telemetry.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := tel.Tracing()
	spans := func(n int) uint64 {
		for range n {
			s := tr.Start(parent, telemetry.SpanForward, trace.SpanKindClient)
			s.End()
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	h1 := spans(10000) // fills the queue (2048)
	h2 := spans(50000)
	// Kept, 50000 spans would be tens of megabytes.
	if h2 > h1+8<<20 {
		t.Errorf("heap grew from %d to %d bytes over 50000 spans the collector could not take", h1, h2)
	}
	// Each signal logs its first failure; the exports fail every 10ms
	// but the next lines wait for the window (a minute).
	deadline := time.Now().Add(20 * time.Second)
	for logs.count("signal=traces") == 0 || logs.count("signal=metrics") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no export failure logged for each signal:\n%s", logs.b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	spans(100)
	if n := logs.count("otlp export failed"); n != 2 {
		t.Errorf("%d export failure lines, want 2 (one per signal in the window):\n%s", n, logs.b.String())
	}
	start := time.Now()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Logf("shutdown: %v", err)
	}
	if d := time.Since(start); d > telemetry.ShutdownFlush+5*time.Second {
		t.Errorf("shutdown took %v with the collector down", d)
	}
}

// TestTracingMasks: with a mask (--redact on) every text a message's span
// carries is masked: the attributes it starts with or is given later, its
// status and the errors it records (a message id that is the number
// itself, a peer's "no route for +44..."). They went out whole over OTLP.
// Without one, nothing is changed.
func TestTracingMasks(t *testing.T) {
	const number = "447700900123"
	mask := func(s string) string { return strings.ReplaceAll(s, number, "44770*******") }
	for _, masked := range []bool{true, false} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		var m func(string) string
		if masked {
			m = mask
		}
		tr := telemetry.NewTracing(tp, m)
		for _, span := range []trace.Span{
			tr.Start(parent, "one", trace.SpanKindClient, attribute.String("switchboard.message_id", number), attribute.Int("n", 1)),
			tr.StartLinked("many", []string{parent}, attribute.String("switchboard.message_id", number)),
		} {
			span.SetAttributes(attribute.String("switchboard.verdict", "failed for "+number))
			telemetry.Fail(span, errors.New("no route for +"+number))
			span.End()
		}
		_ = tp.Shutdown(context.Background())
		for _, s := range rec.Ended() {
			texts := []string{s.Status().Description}
			for _, kv := range s.Attributes() {
				texts = append(texts, kv.Value.Emit())
			}
			for _, e := range s.Events() {
				for _, kv := range e.Attributes {
					texts = append(texts, kv.Value.Emit())
				}
			}
			if whole := strings.Contains(strings.Join(texts, " "), number); whole == masked {
				t.Errorf("masked %v: span %s carries %q", masked, s.Name(), texts)
			}
		}
	}
}

// TestTheSamplerVariablesAreChecked: a sampler the SDK does not know
// (always-on for always_on) or a ratio it cannot read (1%) had the SDK
// trace every request, with no more than a line at info; they are
// refused, naming the variable and its value. Unset, or with nothing
// traced, they are not looked at.
func TestTheSamplerVariablesAreChecked(t *testing.T) {
	rcv := otlptest.New(t)
	for _, tc := range []struct {
		sampler, arg string
		want         string // "": accepted
	}{
		{"", "", ""},
		{"always_on", "", ""},
		{" ParentBased_TraceIDRatio ", "0.5", ""},
		{"traceidratio", "", ""},
		{"traceidratio", "0", ""},
		{"parentbased_traceidratio", "1", ""},
		{"always_off", "1%", ""}, // not read by that sampler
		{"always-on", "", `OTEL_TRACES_SAMPLER: "always-on" is not a sampler: one of always_on,`},
		{"jaeger_remote", "", `OTEL_TRACES_SAMPLER: "jaeger_remote" is not a sampler`},
		{"parentbased_traceidratio", "1%", `OTEL_TRACES_SAMPLER_ARG: "1%" is not a ratio from 0 to 1`},
		{"traceidratio", "1.5", `OTEL_TRACES_SAMPLER_ARG: "1.5" is not a ratio from 0 to 1`},
		{"traceidratio", "-0.1", `OTEL_TRACES_SAMPLER_ARG: "-0.1" is not a ratio`},
		{"traceidratio", "NaN", `OTEL_TRACES_SAMPLER_ARG: "NaN" is not a ratio`},
	} {
		env := map[string]string{"OTEL_TRACES_SAMPLER": tc.sampler, "OTEL_TRACES_SAMPLER_ARG": tc.arg}
		cfg := telemetry.DefaultConfig()
		cfg.Endpoint, cfg.Gatherer = rcv.URL(), prometheus.NewRegistry()
		cfg.Getenv = func(k string) string { return env[k] }
		tel, err := telemetry.Start(context.Background(), cfg)
		if err == nil {
			_ = tel.Shutdown(context.Background())
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q %q: %v", tc.sampler, tc.arg, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%q %q: error %v, want one line starting %q", tc.sampler, tc.arg, err, tc.want)
		}
		if tc.want == "" {
			continue
		}
		// Nothing traced: nothing to refuse.
		if err := telemetry.ValidateEnv(cfg.Getenv, ""); err != nil {
			t.Errorf("%q %q with no endpoint: %v", tc.sampler, tc.arg, err)
		}
		env["OTEL_SDK_DISABLED"] = "true"
		if err := telemetry.ValidateEnv(cfg.Getenv, rcv.URL()); err != nil {
			t.Errorf("%q %q with OTEL_SDK_DISABLED=true: %v", tc.sampler, tc.arg, err)
		}
	}
}

// TestTheEndpointVariablesAreChecked: the OTEL_EXPORTER_OTLP_*ENDPOINT
// variables were handed to the SDK unchecked, which took a value without
// a scheme ("collector:4318") for a URL of scheme "collector", or dropped
// it for its default (localhost), in silence; they are refused as
// --otlp-endpoint is, naming the variable. With Endpoint set they are not
// used, and not looked at.
func TestTheEndpointVariablesAreChecked(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", `OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" must be an http:// or https:// URL`},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318", `OTEL_EXPORTER_OTLP_ENDPOINT: is not a URL`},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/otlp?x=1", "OTEL_EXPORTER_OTLP_ENDPOINT: \"http://c:4318/otlp?x=1\" must have no query or fragment: it is a base URL"},
		{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "collector:4318/v1/metrics", `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "collector:4318/v1/metrics" must be an http:// or https:// URL`},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://u:p@c/v1/traces", `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://c/v1/traces" must carry no user or password`},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://", `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://" names no host`},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces", ""},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://c/otlp/", ""},
	} {
		getenv := func(k string) string {
			if k == tc.name {
				return tc.value
			}
			return ""
		}
		err := telemetry.ValidateEnv(getenv, "")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s=%q: %v", tc.name, tc.value, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s=%q: error %v, want one line starting %q", tc.name, tc.value, err, tc.want)
		}
		cfg := telemetry.DefaultConfig()
		cfg.Gatherer, cfg.Getenv = prometheus.NewRegistry(), getenv
		if tel, err := telemetry.Start(context.Background(), cfg); (err != nil) != (tc.want != "") {
			t.Errorf("%s=%q: Start: %v", tc.name, tc.value, err)
		} else if err == nil {
			_ = tel.Shutdown(context.Background())
		}
		if err := telemetry.ValidateEnv(getenv, "http://c:4318"); err != nil {
			t.Errorf("%s=%q with Endpoint set (the variable unused): %v", tc.name, tc.value, err)
		}
	}
}

// TestTheSDKLogsThroughTheNodesLog: the SDK's own lines (its logger's, and
// the errors handed to the process-wide handler) were printed as plain
// text on stderr, into a JSON log stream; they go to the node's logger.
func TestTheSDKLogsThroughTheNodesLog(t *testing.T) {
	t.Cleanup(func() {
		otel.SetLogger(logr.Discard())
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	})
	// A timeout the exporter cannot read: it logs that and goes on.
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")
	rcv := otlptest.New(t)
	var logs logBuffer
	cfg := telemetry.DefaultConfig()
	cfg.Endpoint, cfg.Gatherer = rcv.URL(), prometheus.NewRegistry()
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	cfg.Getenv = func(string) string { return "" }
	tel, err := telemetry.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	otel.Handle(errors.New("an error the sdk could not return"))
	logs.mu.Lock()
	out := logs.b.String()
	logs.mu.Unlock()
	for _, want := range []string{"parse duration", "an error the sdk could not return"} {
		if !strings.Contains(out, want) {
			t.Errorf("the node's log has no line with %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("not a JSON line: %q", line)
		} else if v["component"] != "telemetry" {
			t.Errorf("line without component=telemetry: %q", line)
		}
	}
}

// TestTheProgramsErrorHandlerIsPutBack: a node's Start replaced the
// process's OpenTelemetry error handler with one that logs to the node's
// Logger, and kept it after the node stopped: a program that embeds nodes
// and set its own handler (for its own SDK use) lost its errors for good.
// The errors go to the last node started that still runs, and to the
// program's handler again once none does.
func TestTheProgramsErrorHandlerIsPutBack(t *testing.T) {
	t.Cleanup(func() {
		otel.SetLogger(logr.Discard())
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	})
	var mu sync.Mutex
	var mine []string
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		mine = append(mine, err.Error())
	}))
	rcv := otlptest.New(t)
	start := func(logs *logBuffer) *telemetry.Telemetry {
		t.Helper()
		cfg := telemetry.DefaultConfig()
		cfg.Endpoint, cfg.Gatherer = rcv.URL(), prometheus.NewRegistry()
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		cfg.Getenv = func(string) string { return "" }
		tel, err := telemetry.Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return tel
	}
	var logsA, logsB logBuffer
	a := start(&logsA)
	b := start(&logsB)
	otel.Handle(errors.New("error 1"))
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	otel.Handle(errors.New("error 2"))
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	otel.Handle(errors.New("error 3"))
	if logsB.count("error 1") != 1 || logsB.count("error 2") != 0 {
		t.Errorf("the last node started got %d of the errors handed while it ran and %d of those after it stopped, want 1, 0:\n%s",
			logsB.count("error 1"), logsB.count("error 2"), logsB.b.String())
	}
	if logsA.count("error 1") != 0 || logsA.count("error 2") != 1 || logsA.count("error 3") != 0 {
		t.Errorf("the node started first got errors 1, 2, 3 %d, %d, %d times, want 0, 1, 0:\n%s",
			logsA.count("error 1"), logsA.count("error 2"), logsA.count("error 3"), logsA.b.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(mine, []string{"error 3"}) {
		t.Errorf("the program's error handler got %q, want the error handed once no node runs: the nodes kept its place", mine)
	}
}

// TestEndpointQueriesAreRefusedAsDocumented: docs/observability.md said
// only OTEL_EXPORTER_OTLP_ENDPOINT must have no query, while a query (or
// fragment) on the signals' own endpoints is refused too (the SDK sends
// to their host and path only).
func TestEndpointQueriesAreRefusedAsDocumented(t *testing.T) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		for _, value := range []string{"http://c:4318/v1/x?tenant=a", "http://c:4318/v1/x#a"} {
			getenv := func(k string) string {
				if k == name {
					return value
				}
				return ""
			}
			if err := telemetry.ValidateEnv(getenv, ""); err == nil || !strings.Contains(err.Error(), "must have no query or fragment") {
				t.Errorf("%s=%q: %v; want it refused for its query or fragment", name, value, err)
			}
		}
	}
	doc, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(strings.Fields(string(doc)), " "); !strings.Contains(text, "none may have a query or fragment") {
		t.Error("docs/observability.md does not say that none of the endpoint variables may have a query or fragment")
	}
}
