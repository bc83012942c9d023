package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	promclient "github.com/prometheus/client_golang/prometheus"
	promBridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/supervision/ratelog"
)

// ServiceName is the service.name resource attribute of every node.
const ServiceName = "switchboard"

// NodeAttribute is the resource attribute that carries the node's name
// (its federation identity).
const NodeAttribute = "switchboard.node"

// Config configures Start.
type Config struct {
	// Endpoint is the collector's OTLP/HTTP base URL;
	// metrics go to Endpoint/v1/metrics and spans to Endpoint/v1/traces.
	// Empty leaves the endpoints to the standard OTEL_EXPORTER_OTLP_*
	// variables; with none of them set, nothing is exported.
	Endpoint string
	// Node, InstanceID and Version are resource attributes
	// (NodeAttribute, service.instance.id, service.version).
	Node, InstanceID, Version string
	// Gatherer is the registry whose metrics are pushed (the one /metrics
	// serves).
	Gatherer promclient.Gatherer
	// Logger gets the export failures, at most one line per
	// ErrorLogWindow.
	Logger *slog.Logger
	// ErrorLogWindow bounds the export failure lines (1m: a collector that
	// is down for a day costs a line a minute, and a failure is seen
	// within a minute).
	ErrorLogWindow time.Duration
	// MetricInterval, when not 0, replaces OTEL_METRIC_EXPORT_INTERVAL
	// (whose default is 60s). Tests shorten it.
	MetricInterval time.Duration
	// SpanBatchTimeout, when not 0, replaces OTEL_BSP_SCHEDULE_DELAY
	// (whose default is 5s). Tests shorten it.
	SpanBatchTimeout time.Duration
	// Getenv reads the environment (os.Getenv when nil).
	Getenv func(string) string
	// Mask, when set, masks personal data in what the spans carry
	// (NewTracing): the node's --redact on gives redact.Text.
	Mask func(string) string
}

// DefaultConfig returns a Config with the defaults filled in.
func DefaultConfig() Config {
	return Config{ErrorLogWindow: time.Minute}
}

// Validate reports every problem of c, and of the OTEL_* variables that
// Start would use (ValidateEnv).
func (c Config) Validate() error {
	var errs []error
	if err := ValidateEndpoint(c.Endpoint); err != nil {
		errs = append(errs, field.Wrap("Endpoint", err))
	}
	if err := ValidateEnv(c.Getenv, c.Endpoint); err != nil {
		errs = append(errs, err)
	}
	if c.ErrorLogWindow <= 0 {
		errs = append(errs, errors.New("telemetry: ErrorLogWindow must be positive"))
	}
	if c.Gatherer == nil {
		errs = append(errs, errors.New("telemetry: Gatherer is required"))
	}
	return errors.Join(errs...)
}

// ValidateEndpoint checks a collector's OTLP/HTTP base URL ("" is none).
// The error says what is wrong with the value; the caller names its field.
func ValidateEndpoint(endpoint string) error {
	return validateURL(endpoint, true)
}

// validateURL checks an OTLP/HTTP URL ("" is none): a base URL (base: the
// signals' paths are added to it), or a signal's own, which the exporter
// uses as it is but for its query and fragment, dropped.
func validateURL(endpoint string, base bool) error {
	if endpoint == "" {
		return nil
	}
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return errors.New("is not a URL") // nor shown: it may hold a password
	case u.User != nil:
		// The exporter sends only the host and path: a user and password
		// were dropped in silence, the collector refusing every push.
		shown := *u
		shown.User = nil
		return fmt.Errorf("%q must carry no user or password: give the collector's credentials as a header (OTEL_EXPORTER_OTLP_HEADERS=\"Authorization=Basic ...\")", shown.String())
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q must be an http:// or https:// URL", endpoint)
	case u.Host == "":
		return fmt.Errorf("%q names no host", endpoint)
	case (u.RawQuery != "" || u.ForceQuery || u.Fragment != "") && base:
		// /v1/metrics and /v1/traces are appended to it (joinPath).
		return fmt.Errorf("%q must have no query or fragment: it is a base URL, /v1/metrics and /v1/traces are added to its path", endpoint)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return fmt.Errorf("%q must have no query or fragment: the exporter sends to its host and path only", endpoint)
	}
	return nil
}

// Samplers are the values of OTEL_TRACES_SAMPLER the SDK knows (the
// OpenTelemetry specification's, without those it leaves to other
// packages: jaeger_remote, parentbased_jaeger_remote, xray). The SDK
// traced everything for any other, with no more than a line at info.
var Samplers = []string{"always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

// ValidateEnv checks the OTEL_* variables Start reads itself or would hand
// to the SDK with endpoint as Config.Endpoint (getenv nil: os.Getenv),
// each error naming its variable: without endpoint, the endpoints
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL, as Endpoint),
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// (http:// or https:// URLs: the SDK took "collector:4318" for a URL of
// scheme "collector", or dropped it for its default, localhost); and when
// traces are exported OTEL_TRACES_SAMPLER (one of Samplers) and
// OTEL_TRACES_SAMPLER_ARG (a ratio from 0 to 1, for the ratio samplers):
// a value the SDK cannot use was replaced by its own default, tracing
// every request. Nothing is checked with OTEL_SDK_DISABLED=true.
func ValidateEnv(getenv func(string) string, endpoint string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil
	}
	var errs []error
	if endpoint == "" { // else the variables are not used
		for _, v := range []struct {
			name string
			base bool
		}{{"OTEL_EXPORTER_OTLP_ENDPOINT", true}, {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", false}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", false}} {
			if err := validateURL(getenv(v.name), v.base); err != nil {
				errs = append(errs, field.Wrap(v.name, err))
			}
		}
	}
	traces := endpoint != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if sampler := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))); traces && sampler != "" {
		switch {
		case !slices.Contains(Samplers, sampler):
			errs = append(errs, field.Errorf("OTEL_TRACES_SAMPLER", "%q is not a sampler: one of %s",
				getenv("OTEL_TRACES_SAMPLER"), strings.Join(Samplers, ", ")))
		case strings.HasSuffix(sampler, "traceidratio"):
			arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
			if arg == "" {
				break // 1, as the SDK has it
			}
			if r, err := strconv.ParseFloat(arg, 64); err != nil || !(r >= 0 && r <= 1) {
				errs = append(errs, field.Errorf("OTEL_TRACES_SAMPLER_ARG", "%q is not a ratio from 0 to 1 (0.01 is 1%%) for the sampler %s",
					getenv("OTEL_TRACES_SAMPLER_ARG"), sampler))
			}
		}
	}
	return errors.Join(errs...)
}

// EnvError is a bad OTEL_* variable of the process, as a configuration
// that does not name the variables reports it: under its own field
// (field.Errorf(path, "the process's %w", err)), naming the variable
// (EnvErrors).
type EnvError struct {
	Var string
	Err error
}

func (e *EnvError) Error() string { return e.Var + ": " + e.Err.Error() }

func (e *EnvError) Unwrap() error { return e.Err }

// EnvErrors are ValidateEnv's errors, each an *EnvError.
func EnvErrors(getenv func(string) string, endpoint string) []error {
	var out []error
	for _, err := range unjoin(ValidateEnv(getenv, endpoint)) {
		var fe *field.Error
		if errors.As(err, &fe) {
			err = &EnvError{Var: fe.Field, Err: fe.Err}
		}
		out = append(out, err)
	}
	return out
}

// unjoin is the errors errors.Join joined into err (err alone when it
// joins none; none when nil).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// Telemetry is the running export of one node. Its zero value exports
// nothing.
type Telemetry struct {
	meter   *sdkmetric.MeterProvider
	tracer  *sdktrace.TracerProvider
	tracing *Tracing
	logs    []*ratelog.Log
	// sdkLog is the logger the SDK's errors go to while this runs (nil
	// when they are not routed).
	sdkLog *slog.Logger
	// stop ends the exports under way (a collector that is down or slow
	// must not hold up a stop past its last flush).
	stop, abort context.Context
	cancel      context.CancelFunc
}

// Start starts the exports that are configured: metrics when Endpoint,
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is
// set; traces when Endpoint, OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. OTEL_SDK_DISABLED=true turns
// both off. The rest of the OTEL_* variables (headers, timeout,
// compression, intervals, OTEL_TRACES_SAMPLER) are read by the SDK.
func Start(ctx context.Context, cfg Config) (_ *Telemetry, err error) {
	if err = cfg.Validate(); err != nil {
		return nil, err
	}
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	routed := cfg.Logger != nil
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log := cfg.Logger.With("component", "telemetry")
	t := &Telemetry{}
	t.stop, t.cancel = context.WithCancel(context.Background())
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return t, nil
	}
	metrics := cfg.Endpoint != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""
	traces := cfg.Endpoint != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if !metrics && !traces {
		return t, nil
	}
	if routed {
		t.sdkLog = routeSDKLog(log)
		defer func() {
			if err != nil {
				unrouteSDKLog(log)
			}
		}()
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", ServiceName),
		attribute.String("service.version", cfg.Version),
		attribute.String("service.instance.id", cfg.InstanceID),
		attribute.String(NodeAttribute, cfg.Node),
	))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	newLog := func() (*ratelog.Log, error) {
		l, err := ratelog.New(ratelog.Config{Logger: log, Level: slog.LevelWarn,
			Msg: "otlp export failed", Summary: "otlp export failures not logged one by one",
			Burst: 1, Window: cfg.ErrorLogWindow})
		if err == nil {
			t.logs = append(t.logs, l)
		}
		return l, err
	}
	if metrics {
		var opts []otlpmetrichttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlpmetrichttp.WithEndpointURL(joinPath(cfg.Endpoint, "/v1/metrics")))
		}
		exp, err := otlpmetrichttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("otlp metrics exporter: %w", err)
		}
		l, err := newLog()
		if err != nil {
			return nil, err
		}
		ropts := []sdkmetric.PeriodicReaderOption{
			sdkmetric.WithProducer(promBridge.NewMetricProducer(promBridge.WithGatherer(cfg.Gatherer))),
		}
		if cfg.MetricInterval > 0 {
			ropts = append(ropts, sdkmetric.WithInterval(cfg.MetricInterval))
		}
		reader := sdkmetric.NewPeriodicReader(&metricExporter{Exporter: exp, log: l, stop: t.stop}, ropts...)
		t.meter = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader))
	}
	if traces {
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(joinPath(cfg.Endpoint, "/v1/traces")))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("otlp trace exporter: %w", err)
		}
		l, err := newLog()
		if err != nil {
			return nil, err
		}
		var bopts []sdktrace.BatchSpanProcessorOption
		if cfg.SpanBatchTimeout > 0 {
			bopts = append(bopts, sdktrace.WithBatchTimeout(cfg.SpanBatchTimeout))
		}
		popts := []sdktrace.TracerProviderOption{
			sdktrace.WithResource(res),
			sdktrace.WithBatcher(&spanExporter{SpanExporter: exp, log: l, stop: t.stop}, bopts...),
		}
		// OTEL_TRACES_SAMPLER, when set, is read by the SDK; otherwise
		// the default sampler (see DefaultSampler).
		if strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")) == "" {
			popts = append(popts, sdktrace.WithSampler(DefaultSampler()))
		}
		t.tracer = sdktrace.NewTracerProvider(popts...)
		t.tracing = NewTracing(t.tracer, cfg.Mask)
	}
	return t, nil
}

// routeSDKLog sends the OpenTelemetry SDK's own lines to log, in the
// node's format: its internal logger's (a setting it cannot read, say)
// and the errors it hands the process-wide error handler. By default both
// were printed as plain text on stderr, into a --log-format json stream.
// They are the process's: the last node started in it (and not shut down)
// gets them. The error handler the program had is put back once the last
// one shuts down (unrouteSDKLog); the logger cannot be read back, and
// stays the last node's.
func routeSDKLog(log *slog.Logger) *slog.Logger {
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
	sdkErrors.Lock()
	defer sdkErrors.Unlock()
	if len(sdkErrors.logs) == 0 {
		sdkErrors.before = otel.GetErrorHandler()
		otel.SetErrorHandler(sdkErrorRouter)
	}
	sdkErrors.logs = append(sdkErrors.logs, log)
	return log
}

// unrouteSDKLog ends routeSDKLog's routing of errors to log: they go to
// the node started before it that still runs, else to the handler the
// program had, unless the program set another since.
func unrouteSDKLog(log *slog.Logger) {
	sdkErrors.Lock()
	defer sdkErrors.Unlock()
	i := slices.Index(sdkErrors.logs, log)
	if i < 0 {
		return
	}
	sdkErrors.logs = slices.Delete(sdkErrors.logs, i, i+1)
	if len(sdkErrors.logs) == 0 {
		if otel.GetErrorHandler() == otel.ErrorHandler(sdkErrorRouter) {
			otel.SetErrorHandler(sdkErrors.before)
		}
		sdkErrors.before = nil
	}
}

// sdkErrors are the loggers of the nodes that take the SDK's errors, in
// the order they started, and the process's error handler before the
// first of them.
var sdkErrors struct {
	sync.Mutex
	logs   []*slog.Logger
	before otel.ErrorHandler
}

// sdkErrorRouter is the process-wide error handler while nodes run.
var sdkErrorRouter = &errorRouter{}

// errorRouter hands an error to the last node started that still runs.
// With none it prints it as the SDK's default handler does: the default
// hands its errors to the first handler set in the process for good, and
// that may be this one, after it was put back.
type errorRouter struct{ _ byte }

func (*errorRouter) Handle(err error) {
	sdkErrors.Lock()
	var log *slog.Logger
	if n := len(sdkErrors.logs); n > 0 {
		log = sdkErrors.logs[n-1]
	}
	sdkErrors.Unlock()
	if log == nil {
		stdlog.Print(err)
		return
	}
	log.Warn("opentelemetry sdk error", "err", err)
}

// joinPath appends path to the base URL's path.
func joinPath(base, path string) string {
	return strings.TrimRight(base, "/") + path
}

// Tracing is what the node's parts make spans with; nil when traces are
// not exported.
func (t *Telemetry) Tracing() *Tracing {
	if t == nil {
		return nil
	}
	return t.tracing
}

// Flush exports what is pending now (metrics read from the registry at
// this moment, spans ended so far).
func (t *Telemetry) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.meter != nil {
		errs = append(errs, t.meter.ForceFlush(ctx))
	}
	if t.tracer != nil {
		errs = append(errs, t.tracer.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// ShutdownFlush bounds the last push of a stop: a collector that does not
// take it within this (or ctx's deadline, when sooner) loses it (5s: a
// stop is not held up for long by a collector that is down). The node
// passes a ctx without deadline, so that a stop that used up its own time
// still pushes.
const ShutdownFlush = 5 * time.Second

// Shutdown pushes what is pending (a graceful stop's last push, within
// ShutdownFlush), then ends the exports, a retry under way included.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil || t.cancel == nil {
		return nil
	}
	fctx, cancel := context.WithTimeout(ctx, ShutdownFlush)
	err := t.Flush(fctx)
	cancel()
	t.cancel()
	errs := []error{err}
	if t.tracer != nil {
		errs = append(errs, t.tracer.Shutdown(context.Background()))
	}
	if t.meter != nil {
		errs = append(errs, t.meter.Shutdown(context.Background()))
	}
	for _, l := range t.logs {
		l.Close()
	}
	if t.sdkLog != nil {
		unrouteSDKLog(t.sdkLog)
	}
	return errors.Join(errs...)
}

// bounded is ctx, also cancelled when stop is: an export that waits on a
// collector (or on its retry) ends at once when the node stops.
func bounded(ctx, stop context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(stop, cancel)
	return ctx, func() {
		unhook()
		cancel()
	}
}

// metricExporter logs a failed export at a bounded rate and reports it
// handled: the SDK would otherwise hand it to the process-wide otel error
// handler, which logs every one.
type metricExporter struct {
	*otlpmetrichttp.Exporter
	log  *ratelog.Log
	stop context.Context
}

func (e *metricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if e.stop.Err() != nil {
		return nil
	}
	ctx, cancel := bounded(ctx, e.stop)
	defer cancel()
	if err := e.Exporter.Export(ctx, rm); err != nil && e.stop.Err() == nil {
		e.log.Write("signal", "metrics", "err", err)
	}
	return nil
}

// spanExporter does the same for spans.
type spanExporter struct {
	sdktrace.SpanExporter
	log  *ratelog.Log
	stop context.Context
}

func (e *spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stop.Err() != nil {
		return nil
	}
	ctx, cancel := bounded(ctx, e.stop)
	defer cancel()
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil && e.stop.Err() == nil {
		e.log.Write("signal", "traces", "spans", len(spans), "err", err)
	}
	return nil
}
