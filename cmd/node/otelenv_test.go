package main

import (
	"strings"
	"testing"
)

// TestABadOTELSamplerIsRefusedAtStart: a mistyped OTEL_TRACES_SAMPLER or
// an OTEL_TRACES_SAMPLER_ARG that is no ratio had the node trace every
// submit, with one line at info; it is refused with the flags (runCommand
// prints it and exits 2), one line naming the variable and its value.
func TestABadOTELSamplerIsRefusedAtStart(t *testing.T) {
	for _, tc := range []struct{ sampler, arg, want string }{
		{"always-on", "", `OTEL_TRACES_SAMPLER: "always-on" is not a sampler`},
		{"parentbased_traceidratio", "1%", `OTEL_TRACES_SAMPLER_ARG: "1%" is not a ratio from 0 to 1`},
	} {
		t.Setenv("OTEL_TRACES_SAMPLER", tc.sampler)
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", tc.arg)
		_, _, err := parseStart([]string{"--data-dir", t.TempDir(), "--otlp-endpoint", "http://127.0.0.1:1"}, noEnv)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("OTEL_TRACES_SAMPLER=%q OTEL_TRACES_SAMPLER_ARG=%q: error %v; want one line %q", tc.sampler, tc.arg, err, tc.want)
		}
	}
}
