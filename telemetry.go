package switchboard

import (
	"context"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/supervision/redact"
	"github.com/switchboard-dev/switchboard/telemetry"
)

// Telemetry (OTLPEndpoint, TraceURL; docs/observability.md): the
// registry's metrics pushed over OTLP, and one trace per message across
// every node it crosses. Without an endpoint n.tracing is nil and no span
// is made.

// validateTelemetry checks the telemetry settings.
func (c Config) validateTelemetry() []error {
	var errs []error
	if err := telemetry.ValidateEndpoint(c.OTLPEndpoint); err != nil {
		errs = append(errs, field.Wrap("OTLPEndpoint", err))
	}
	// The process's OTEL_* variables, as Start reads them: a bad one is
	// refused with the flags, not found out later. Each is the field
	// OTLPEndpoint's, the Config field of the export they configure, its
	// text naming the variable (telemetry.EnvError).
	for _, err := range telemetry.EnvErrors(nil, c.OTLPEndpoint) {
		errs = append(errs, field.Errorf("OTLPEndpoint", "the process's %w", err))
	}
	if c.TraceURL != "" {
		u, err := url.Parse(strings.ReplaceAll(c.TraceURL, "{trace_id}", "0"))
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			errs = append(errs, field.Errorf("TraceURL", "%q must be an http:// or https:// URL", c.TraceURL))
		case !strings.Contains(c.TraceURL, "{trace_id}"):
			errs = append(errs, field.Errorf("TraceURL", "%q must hold {trace_id}, where the trace's id goes", c.TraceURL))
		}
	}
	return errs
}

// startTelemetry starts the OTLP export when an endpoint is configured.
func (n *Node) startTelemetry(ctx context.Context) error {
	tc := telemetry.DefaultConfig()
	tc.Endpoint, tc.Node, tc.InstanceID, tc.Version = n.cfg.OTLPEndpoint, n.cfg.Name, n.cfg.InstanceID, n.cfg.Version
	// Nothing is gathered before Start has set everything up: the
	// registry's collectors read what it is still setting up (the peer
	// book), and /metrics is not served before then either. The last push
	// of a stop gathers.
	tc.Gatherer = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		if !n.gathering.Load() {
			return nil, nil
		}
		return n.registry.Gather()
	})
	tc.Logger = n.log
	if n.cfg.Redact == RedactOn {
		tc.Mask = redact.Text // numbers in message ids and failure texts, as in the logs
	}
	tc.MetricInterval, tc.SpanBatchTimeout = n.cfg.OTLPInterval, n.cfg.OTLPInterval
	t, err := telemetry.Start(ctx, tc)
	if err != nil {
		return field.Rename(err, field.Map(map[string]string{"Endpoint": "OTLPEndpoint"}))
	}
	n.telemetry, n.tracing = t, t.Tracing()
	return nil
}

// FlushTelemetry pushes the metrics as they are now and the spans ended so
// far (nothing without an OTLP endpoint). A graceful Stop does it last.
func (n *Node) FlushTelemetry(ctx context.Context) error {
	return n.telemetry.Flush(ctx)
}
