// Package telemetry pushes a node's metrics and traces over OTLP/HTTP
// (protobuf) to an OpenTelemetry collector, and carries a message's W3C
// trace context through its life.
//
// Metrics are not a second set: a bridge reads the node's Prometheus
// registry at each export (go.opentelemetry.io/contrib/bridges/prometheus),
// so /metrics and OTLP never disagree. Traces come from the OpenTelemetry
// Go SDK with a batch span processor whose queue is bounded: a collector
// that is down or slow costs dropped spans and one log line per
// ErrorLogWindow, never a blocked caller or memory that grows with the
// outage.
//
// With no endpoint configured (neither Config.Endpoint nor an
// OTEL_EXPORTER_OTLP_* endpoint variable) Start returns a Telemetry whose
// Tracing is nil: every span helper of a nil *Tracing returns at once,
// without allocating, so the hot path pays nothing.
//
// The span names (docs/observability.md):
//
//	POST /api/messages               the submit (HTTP server span)
//	switchboard.intake.commit        one group commit; links to each message's trace
//	switchboard.forward              one forward to a peer (client)
//	switchboard.forward.receive      the peer's receipt of it (server, on the peer)
//	switchboard.deliver.webhook      one webhook attempt (client; traceparent header)
//	switchboard.deliver.pull         a pull frontend's lease until its ack
//	switchboard.deliver.actor        one attempt of an in-process actor frontend
//	switchboard.delivery_status      a delivery_status sent back to the origin (client)
//	switchboard.delivery_status.receive  the origin's receipt of it (server)
package telemetry
