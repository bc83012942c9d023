package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
)

// The ingest-traced figure: the ingest figure on a node that exports its
// metrics and traces over OTLP (--otlp-endpoint) with the default sampler
// (parent-based, 1% of new traces; the clients send no traceparent), to a
// collector in this process that takes every export. Its baseline is the
// ingest figure of the same run; goal 7: ratio >= 0.95.

// otlpSink is the collector: it reads each export and answers 200 with
// an empty response (a valid empty protobuf message).
type otlpSink struct {
	srv            *httptest.Server
	spans, metrics atomic.Int64 // export requests taken
	bytes          atomic.Int64
}

func newOTLPSink() *otlpSink {
	s := &otlpSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.bytes.Add(n)
		switch r.URL.Path {
		case "/v1/traces":
			s.spans.Add(1)
		case "/v1/metrics":
			s.metrics.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	return s
}

// runIngestTraced is runIngest on a node exporting to a sink.
func runIngestTraced(o options, bodies [][]byte, dir string, prof *profiler) (r runResult, err error) {
	sink := newOTLPSink()
	defer sink.srv.Close()
	cfg := nodeConfig("bench", dir)
	cfg.OTLPEndpoint = sink.srv.URL
	b, err := startNodeConfig(cfg, len(bodies))
	if err != nil {
		return r, err
	}
	client := b.api
	defer func() {
		if serr := b.close(client); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := b.pullFrontend(); err != nil {
		return r, err
	}
	if err := b.route(); err != nil {
		return r, err
	}
	submitWindow(b, client, o, bodies, prof, nil, &r)
	r.note = fmt.Sprintf("the collector took %d span and %d metric exports (%d KiB) during the run; %s",
		sink.spans.Load(), sink.metrics.Load(), sink.bytes.Load()>>10, b.actorLoad(r.window))
	if r.count == 0 {
		return r, fmt.Errorf("no submit completed in the window (%d failed; first: %s)", r.errors, r.firstErr)
	}
	return r, nil
}
