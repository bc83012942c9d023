package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/persistence/space"
	"github.com/switchboard-dev/switchboard/persistence/space/spacetest"
)

// envMap is a lookupEnv backed by a map.
func envMap(m map[string]string) lookupEnv {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func noEnv(string) (string, bool) { return "", false }

func TestEnvName(t *testing.T) {
	for flagName, want := range map[string]string{
		"name":                  "SWITCHBOARD_NAME",
		"delivery-max-attempts": "SWITCHBOARD_DELIVERY_MAX_ATTEMPTS",
		"tls-ca":                "SWITCHBOARD_TLS_CA",
	} {
		if got := envName(flagName); got != want {
			t.Errorf("envName(%q) = %q, want %q", flagName, got, want)
		}
	}
}

func TestParseRunDefaults(t *testing.T) {
	cfg, lo, err := parseRun(nil, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := switchboard.DefaultConfig()
	want.Version = version
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config = %+v\nwant %+v", cfg, want)
	}
	if lo != (logOptions{Level: slog.LevelInfo, Format: "auto"}) {
		t.Errorf("log options = %+v", lo)
	}
	if cfg.Logger != nil {
		t.Error("parseRun set a logger")
	}
}

// flagCase gives two valid values of one flag and how to read the result.
type flagCase struct {
	flag           string
	v1, v2         string
	want1, want2   any
	get            func(switchboard.Config, logOptions) any
	needsOtherFlag []string // flags that make v1/v2 valid (e.g. --tls-key with --tls-cert)
	boolean        bool     // given alone, or as --flag=value
}

var flagCases = []flagCase{
	{flag: "name", v1: "dc1", v2: "dc-2.example", want1: "dc1", want2: "dc-2.example",
		get: func(c switchboard.Config, _ logOptions) any { return c.Name }},
	{flag: "instance-id", v1: "dc1-0", v2: "dc1-1", want1: "dc1-0", want2: "dc1-1",
		get: func(c switchboard.Config, _ logOptions) any { return c.InstanceID }},
	{flag: "listen", v1: "127.0.0.1:0", v2: "[::1]:8443", want1: "127.0.0.1:0", want2: "[::1]:8443",
		get: func(c switchboard.Config, _ logOptions) any { return c.Listen }},
	{flag: "metrics-listen", v1: ":9999", v2: "", want1: ":9999", want2: "",
		get: func(c switchboard.Config, _ logOptions) any { return c.MetricsListen }},
	{flag: "smpp-listen", v1: "127.0.0.1:2775", v2: ":2776", want1: "127.0.0.1:2775", want2: ":2776",
		get: func(c switchboard.Config, _ logOptions) any { return c.SMPPListen }},
	{flag: "smpp-tls", v1: "true", v2: "false", want1: true, want2: false, boolean: true, needsOtherFlag: []string{"--smpp-listen", ":2775"},
		get: func(c switchboard.Config, _ logOptions) any { return c.SMPPTLS }},
	{flag: "smpp-window", v1: "10", v2: "200", want1: 10, want2: 200,
		get: func(c switchboard.Config, _ logOptions) any { return c.SMPPWindow }},
	{flag: "data-dir", v1: "/var/lib/sb", v2: "rel/dir", want1: "/var/lib/sb", want2: "rel/dir",
		get: func(c switchboard.Config, _ logOptions) any { return c.DataDir }},
	{flag: "postgres", v1: "postgres://u:p@db/sb", v2: "host=db", want1: "postgres://u:p@db/sb", want2: "host=db",
		get: func(c switchboard.Config, _ logOptions) any { return c.Postgres }},
	{flag: "tls-cert", v1: "a.pem", v2: "b.pem", want1: "a.pem", want2: "b.pem", needsOtherFlag: []string{"--tls-key", "k.key"},
		get: func(c switchboard.Config, _ logOptions) any { return c.TLSCert }},
	{flag: "tls-key", v1: "a.key", v2: "b.key", want1: "a.key", want2: "b.key", needsOtherFlag: []string{"--tls-cert", "c.pem"},
		get: func(c switchboard.Config, _ logOptions) any { return c.TLSKey }},
	{flag: "tls-ca", v1: "ca.pem", v2: "other.pem", want1: "ca.pem", want2: "other.pem",
		get: func(c switchboard.Config, _ logOptions) any { return c.TLSCA }},
	{flag: "api-token", v1: "s3cret-0123456789", v2: "other-0123456789", want1: "s3cret-0123456789", want2: "other-0123456789",
		get: func(c switchboard.Config, _ logOptions) any { return c.APIToken }},
	{flag: "api-token-file", v1: "/run/secrets/token", v2: "token.txt", want1: "/run/secrets/token", want2: "token.txt",
		get: func(c switchboard.Config, _ logOptions) any { return c.APITokenFile }},
	{flag: "credentials", v1: "/etc/switchboard/credentials.json", v2: "creds.json", want1: "/etc/switchboard/credentials.json", want2: "creds.json",
		get: func(c switchboard.Config, _ logOptions) any { return c.Credentials }},
	{flag: "redact", v1: "on", v2: "OFF", want1: "on", want2: "off",
		get: func(c switchboard.Config, _ logOptions) any { return c.Redact }},
	{flag: "audit-retention", v1: "2160h", v2: "0s", want1: 2160 * time.Hour, want2: time.Duration(0),
		get: func(c switchboard.Config, _ logOptions) any { return c.AuditRetention }},
	{flag: "route", v1: "44=uk", v2: "1=us",
		want1: []switchboard.RouteSpec{{Prefix: "44", Frontend: "uk"}},
		want2: []switchboard.RouteSpec{{Prefix: "1", Frontend: "us"}},
		get:   func(c switchboard.Config, _ logOptions) any { return c.Routes }},
	{flag: "frontend", v1: "uk=https://uk.example/sms", v2: "us=smpp://acme:pw@127.0.0.1:2775?window=5",
		want1: []switchboard.WebhookSpec{{Name: "uk", URL: "https://uk.example/sms"}},
		want2: []switchboard.WebhookSpec{{Name: "us", URL: "smpp://acme:pw@127.0.0.1:2775?window=5"}},
		get:   func(c switchboard.Config, _ logOptions) any { return c.Webhooks }},
	{flag: "delivery-retry-min", v1: "30s", v2: "2m", want1: 30 * time.Second, want2: 2 * time.Minute,
		get: func(c switchboard.Config, _ logOptions) any { return c.DeliveryRetryMin }},
	{flag: "delivery-retry-max", v1: "10m", v2: "1h30m", want1: 10 * time.Minute, want2: 90 * time.Minute,
		get: func(c switchboard.Config, _ logOptions) any { return c.DeliveryRetryMax }},
	{flag: "delivery-max-attempts", v1: "1", v2: "12", want1: 1, want2: 12,
		get: func(c switchboard.Config, _ logOptions) any { return c.DeliveryMaxAttempts }},
	{flag: "message-validity", v1: "1h", v2: "72h", want1: time.Hour, want2: 72 * time.Hour,
		get: func(c switchboard.Config, _ logOptions) any { return c.MessageValidity }},
	{flag: "webhook-timeout", v1: "500ms", v2: "1m", want1: 500 * time.Millisecond, want2: time.Minute,
		get: func(c switchboard.Config, _ logOptions) any { return c.WebhookTimeout }},
	{flag: "smpp-reconnect-min", v1: "100ms", v2: "5s", want1: 100 * time.Millisecond, want2: 5 * time.Second,
		get: func(c switchboard.Config, _ logOptions) any { return c.SMPPReconnectMin }},
	{flag: "smpp-reconnect-max", v1: "2m", v2: "1h", want1: 2 * time.Minute, want2: time.Hour,
		get: func(c switchboard.Config, _ logOptions) any { return c.SMPPReconnectMax }},
	{flag: "shutdown-timeout", v1: "5s", v2: "2m", want1: 5 * time.Second, want2: 2 * time.Minute,
		get: func(c switchboard.Config, _ logOptions) any { return c.ShutdownTimeout }},
	{flag: "max-pending-submits", v1: "1", v2: "500000", want1: 1, want2: 500000,
		get: func(c switchboard.Config, _ logOptions) any { return c.MaxPendingSubmits }},
	{flag: "retention", v1: "1h", v2: "0s", want1: time.Hour, want2: time.Duration(0),
		get: func(c switchboard.Config, _ logOptions) any { return c.Retention }},
	{flag: "retention-failed", v1: "720h", v2: "10m", want1: 720 * time.Hour, want2: 10 * time.Minute,
		get: func(c switchboard.Config, _ logOptions) any { return c.RetentionFailed }},
	{flag: "cdr-file", v1: "/var/lib/switchboard/cdr.jsonl", v2: "cdr.jsonl", want1: "/var/lib/switchboard/cdr.jsonl", want2: "cdr.jsonl",
		get: func(c switchboard.Config, _ logOptions) any { return c.CDRFile }},
	{flag: "cdr-rotate-size", v1: "1GiB", v2: "5000000", want1: int64(1 << 30), want2: int64(5000000),
		get: func(c switchboard.Config, _ logOptions) any { return c.CDRRotateBytes }},
	{flag: "min-free-space", v1: "1GiB", v2: "5%", want1: space.Reserve{Bytes: 1 << 30}, want2: space.Reserve{Percent: 5},
		get: func(c switchboard.Config, _ logOptions) any { return c.MinFreeSpace }},
	{flag: "nats-url", v1: "nats://127.0.0.1:4222", v2: "nats://a:4222,nats://b:4222", want1: "nats://127.0.0.1:4222", want2: "nats://a:4222,nats://b:4222",
		get:            func(c switchboard.Config, _ logOptions) any { return c.NatsURL },
		needsOtherFlag: []string{"--postgres", "postgres://db/x"}},
	// The credentials file must hold NATS user credentials: testdata's two
	// (made for the tests with nkeys and jwt, for no server).
	{flag: "nats-creds", v1: "testdata/a.creds", v2: "testdata/b.creds", want1: "testdata/a.creds", want2: "testdata/b.creds",
		get:            func(c switchboard.Config, _ logOptions) any { return c.NatsCreds },
		needsOtherFlag: []string{"--postgres", "postgres://db/x", "--nats-url", "nats://n:4222"}},
	{flag: "nats-stream", v1: "SB_DC1", v2: "deliveries", want1: "SB_DC1", want2: "deliveries",
		get:            func(c switchboard.Config, _ logOptions) any { return c.NatsStream },
		needsOtherFlag: []string{"--postgres", "postgres://db/x", "--nats-url", "nats://n:4222"}},
	{flag: "nats-storage", v1: "file", v2: "memory", want1: "file", want2: "memory",
		get:            func(c switchboard.Config, _ logOptions) any { return c.NatsStorage },
		needsOtherFlag: []string{"--postgres", "postgres://db/x", "--nats-url", "nats://n:4222"}},
	{flag: "otlp-endpoint", v1: "http://collector:4318", v2: "https://otel.example/otlp", want1: "http://collector:4318", want2: "https://otel.example/otlp",
		get: func(c switchboard.Config, _ logOptions) any { return c.OTLPEndpoint }},
	{flag: "trace-url", v1: "https://jaeger.example/trace/{trace_id}", v2: "http://tempo:3000/explore?trace={trace_id}",
		want1: "https://jaeger.example/trace/{trace_id}", want2: "http://tempo:3000/explore?trace={trace_id}",
		get: func(c switchboard.Config, _ logOptions) any { return c.TraceURL }},
	{flag: "federation", v1: "true", v2: "false", want1: true, want2: false, boolean: true,
		needsOtherFlag: []string{"--peers", "b.example:8443", "--insecure-skip-verify"},
		get:            func(c switchboard.Config, _ logOptions) any { return c.Federation }},
	{flag: "peers", v1: "b.example,c.example:9443", v2: "[::1]:8443",
		want1: []string{"b.example:8443", "c.example:9443"}, want2: []string{"[::1]:8443"},
		get: func(c switchboard.Config, _ logOptions) any { return c.Peers }},
	{flag: "dns-srv", v1: "_smsc._tcp.example.com", v2: "_sb._tcp.dc2.example", want1: "_smsc._tcp.example.com", want2: "_sb._tcp.dc2.example",
		get: func(c switchboard.Config, _ logOptions) any { return c.DNSSRV }},
	{flag: "dns-server", v1: "127.0.0.1:5353", v2: "10.0.0.2:53", want1: "127.0.0.1:5353", want2: "10.0.0.2:53",
		get: func(c switchboard.Config, _ logOptions) any { return c.DNSServer }},
	{flag: "dns-poll-interval", v1: "5s", v2: "2m", want1: 5 * time.Second, want2: 2 * time.Minute,
		get: func(c switchboard.Config, _ logOptions) any { return c.DNSPollInterval }},
	{flag: "health-interval", v1: "1s", v2: "30s", want1: time.Second, want2: 30 * time.Second,
		get: func(c switchboard.Config, _ logOptions) any { return c.HealthInterval }},
	{flag: "registry-interval", v1: "2s", v2: "1m", want1: 2 * time.Second, want2: time.Minute,
		get: func(c switchboard.Config, _ logOptions) any { return c.RegistryInterval }},
	{flag: "forward-retry-interval", v1: "500ms", v2: "10s", want1: 500 * time.Millisecond, want2: 10 * time.Second,
		get: func(c switchboard.Config, _ logOptions) any { return c.ForwardRetryInterval }},
	{flag: "forward-max-retries", v1: "1", v2: "1000", want1: 1, want2: 1000,
		get: func(c switchboard.Config, _ logOptions) any { return c.ForwardMaxRetries }},
	{flag: "http-timeout", v1: "250ms", v2: "30s", want1: 250 * time.Millisecond, want2: 30 * time.Second,
		get: func(c switchboard.Config, _ logOptions) any { return c.HTTPTimeout }},
	{flag: "api-port", v1: "443", v2: "18443", want1: 443, want2: 18443,
		get: func(c switchboard.Config, _ logOptions) any { return c.APIPort }},
	{flag: "insecure-skip-verify", v1: "true", v2: "false", want1: true, want2: false, boolean: true,
		get: func(c switchboard.Config, _ logOptions) any { return c.InsecureSkipVerify }},
	{flag: "smpp-account", v1: "esme1=pw=12345", v2: "esme2=x",
		want1: []switchboard.SMPPAccount{{SystemID: "esme1", Password: "pw=12345"}}, want2: []switchboard.SMPPAccount{{SystemID: "esme2", Password: "x"}},
		get: func(c switchboard.Config, _ logOptions) any { return c.SMPPAccounts }},
	{flag: "ring-role", v1: "master", v2: "auto", want1: "master", want2: "auto",
		get: func(c switchboard.Config, _ logOptions) any { return c.RingRole }},
	{flag: "ring-master", v1: "https://a-0.a:8443", v2: "10.0.0.1:9443", want1: "https://a-0.a:8443", want2: "10.0.0.1:9443",
		get: func(c switchboard.Config, _ logOptions) any { return c.RingMaster }},
	{flag: "ring-address", v1: "10.0.0.5:8443", v2: "a-1.a:8443", want1: "10.0.0.5:8443", want2: "a-1.a:8443",
		get: func(c switchboard.Config, _ logOptions) any { return c.RingAddress }},
	{flag: "cluster", v1: "eu", v2: "prod-1", want1: "eu", want2: "prod-1",
		get: func(c switchboard.Config, _ logOptions) any { return c.Cluster }},
	{flag: "region", v1: "eu-west", v2: "us", want1: "eu-west", want2: "us",
		get: func(c switchboard.Config, _ logOptions) any { return c.Region }},
	{flag: "zone", v1: "a", v2: "eu-west-1b", want1: "a", want2: "eu-west-1b",
		get: func(c switchboard.Config, _ logOptions) any { return c.Zone }},
	{flag: "ring-services", v1: "delivery", v2: "forward,delivery", needsOtherFlag: []string{"--postgres", "host=db"},
		want1: []string{"delivery"}, want2: []string{"forward", "delivery"},
		get: func(c switchboard.Config, _ logOptions) any { return c.RingServices }},
	{flag: "ring-publish-interval", v1: "5s", v2: "1m", want1: 5 * time.Second, want2: time.Minute,
		get: func(c switchboard.Config, _ logOptions) any { return c.RingPublishInterval }},
	{flag: "ring-reconnect-max-attempts", v1: "1", v2: "100", want1: 1, want2: 100,
		get: func(c switchboard.Config, _ logOptions) any { return c.RingReconnectMaxAttempts }},
	{flag: "ring-reconnect-backoff-min", v1: "100ms", v2: "1s", want1: 100 * time.Millisecond, want2: time.Second,
		get: func(c switchboard.Config, _ logOptions) any { return c.RingReconnectBackoffMin }},
	{flag: "ring-reconnect-backoff-max", v1: "10s", v2: "1m", want1: 10 * time.Second, want2: time.Minute,
		get: func(c switchboard.Config, _ logOptions) any { return c.RingReconnectBackoffMax }},
	{flag: "ring-reconnect-jitter", v1: "0", v2: "0.25", want1: 0.0, want2: 0.25,
		get: func(c switchboard.Config, _ logOptions) any { return c.RingReconnectJitter }},
	{flag: "log-level", v1: "debug", v2: "WARN", want1: slog.LevelDebug, want2: slog.LevelWarn,
		get: func(_ switchboard.Config, lo logOptions) any { return lo.Level }},
	{flag: "log-format", v1: "json", v2: "text", want1: "json", want2: "text",
		get: func(_ switchboard.Config, lo logOptions) any { return lo.Format }},
}

func TestFlagCasesCoverEveryFlag(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range flagCases {
		covered[c.flag] = true
	}
	for _, f := range runFlags {
		if !covered[f.name] {
			t.Errorf("--%s has no case in flagCases", f.name)
		}
	}
	if len(runFlags) != len(covered) {
		t.Errorf("%d flags, %d cases", len(runFlags), len(covered))
	}
}

func TestParseRunEveryFlag(t *testing.T) {
	for _, c := range flagCases {
		t.Run(c.flag, func(t *testing.T) {
			env := envName(c.flag)
			check := func(name string, args []string, envm map[string]string, want any) {
				t.Helper()
				cfg, lo, err := parseRun(append(args, c.needsOtherFlag...), envMap(envm))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if got := c.get(cfg, lo); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: got %#v, want %#v", name, got, want)
				}
			}
			if c.boolean {
				// A boolean flag takes no separate value: alone it is true.
				check("command line --flag", []string{"--" + c.flag}, nil, true)
			} else {
				check("command line --flag value", []string{"--" + c.flag, c.v1}, nil, c.want1)
			}
			check("command line -flag=value", []string{"-" + c.flag + "=" + c.v2}, nil, c.want2)
			check("environment", nil, map[string]string{env: c.v1}, c.want1)
			check("command line beats environment", []string{"--" + c.flag + "=" + c.v2}, map[string]string{env: c.v1}, c.want2)
			// Look-alike variables are ignored: the default stays.
			cfg, lo, err := parseRun(nil, envMap(map[string]string{env + "_X": c.v1, "SWITCHBOARD": c.v1, strings.ToLower(env): c.v1}))
			if err != nil {
				t.Fatal(err)
			}
			def := switchboard.DefaultConfig()
			if got, want := c.get(cfg, lo), c.get(def, defaultLogOptions()); !reflect.DeepEqual(got, want) {
				t.Errorf("look-alike variables: got %#v, want the default %#v", got, want)
			}
		})
	}
}

func TestParseRunRepeatable(t *testing.T) {
	routes := func(pairs ...string) []switchboard.RouteSpec {
		var out []switchboard.RouteSpec
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, switchboard.RouteSpec{Prefix: pairs[i], Frontend: pairs[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []switchboard.RouteSpec
	}{
		{"repeated on the command line, in order", []string{"--route", "44=uk", "--route=1=us", "--route", "4478=uk-mobile"}, nil,
			routes("44", "uk", "1", "us", "4478", "uk-mobile")},
		{"comma list in the environment", nil, map[string]string{"SWITCHBOARD_ROUTE": "44=uk, 1=us,,4478=uk-mobile,"},
			routes("44", "uk", "1", "us", "4478", "uk-mobile")},
		{"command line replaces the whole environment list", []string{"--route", "33=fr"}, map[string]string{"SWITCHBOARD_ROUTE": "44=uk,1=us"},
			routes("33", "fr")},
		{"empty environment list", nil, map[string]string{"SWITCHBOARD_ROUTE": ""}, nil},
		{"spaces around the parts", []string{"--route", " 44 = uk "}, nil, routes("44", "uk")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := parseRun(tc.args, envMap(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Routes, tc.want) {
				t.Errorf("routes = %v, want %v", cfg.Routes, tc.want)
			}
		})
	}

	cfg, _, err := parseRun(nil, envMap(map[string]string{
		"SWITCHBOARD_FRONTEND": "a=http://a.example/x?k=v, b=https://b.example",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []switchboard.WebhookSpec{{Name: "a", URL: "http://a.example/x?k=v"}, {Name: "b", URL: "https://b.example"}}
	if !reflect.DeepEqual(cfg.Webhooks, want) {
		t.Errorf("webhooks = %v, want %v", cfg.Webhooks, want)
	}
}

// TestShortRetentionWithoutFederation: the retention's floor (what a peer
// may still send again) is a federating node's; one without --federation
// has no peer, and --retention 1m was refused naming forward flags that
// do not apply to it.
func TestShortRetentionWithoutFederation(t *testing.T) {
	cfg, _, err := parseRun([]string{"--retention", "1m", "--retention-failed", "1m"}, noEnv)
	if err != nil {
		t.Fatalf("--retention 1m --retention-failed 1m without --federation: %v", err)
	}
	if cfg.Retention != time.Minute || cfg.RetentionFailed != time.Minute {
		t.Errorf("retention %v, retention-failed %v, want 1m each", cfg.Retention, cfg.RetentionFailed)
	}
}

func TestParseRunBadValues(t *testing.T) {
	for _, tc := range []struct {
		flag  string
		value string
		want  string   // in the error, besides the flag
		extra []string // other flags needed
	}{
		{"name", "bad name!", "not a valid name", nil},
		{"name", "", "not a valid name", nil},
		{"instance-id", "-x", "not a valid name", nil},
		{"listen", "8443", "not host:port", nil},
		{"listen", "127.0.0.1:99999", "not a number from 0 to 65535", nil},
		{"listen", "127.0.0.1:http", "not a number from 0 to 65535", nil},
		{"listen", "bad host!:8443", "not a host name or IP address", nil},
		// Empty (SWITCHBOARD_LISTEN= from an unset template variable) ran a
		// node without its API, /healthz or UI, federation or not.
		{"listen", "", "must not be empty", nil},
		{"listen", "", "federation needs an address peers reach this node at", []string{"--federation", "--insecure-skip-verify", "--peers", "b:8443"}},
		{"metrics-listen", "localhost", "not host:port", nil},
		{"metrics-listen", ":-1", "not a number from 0 to 65535", nil},
		{"metrics-listen", "127.0.0.1:8443", "is --listen too", []string{"--listen", "127.0.0.1:8443"}},
		{"smpp-listen", "2775", "not host:port", nil},
		{"smpp-listen", "127.0.0.1:70000", "not a number from 0 to 65535", nil},
		{"smpp-listen", "127.0.0.1:8443", "is --listen too", []string{"--listen", "127.0.0.1:8443"}},
		{"smpp-window", "0", "at least 1", nil},
		{"postgres", "postgres://u@h:notaport/db", "does not parse", nil},
		{"data-dir", "", "must not be empty", nil},
		{"tls-cert", "c.pem", "given without --tls-key; they must be given together", nil},
		{"tls-key", "k.key", "given without --tls-cert; they must be given together", nil},
		{"delivery-retry-min", "x", "must be a duration", nil},
		{"delivery-retry-min", "10", "must be a duration", nil},
		{"delivery-retry-min", "0s", "must be positive", nil},
		{"delivery-retry-min", "-1m", "must be positive", nil},
		{"delivery-retry-max", "soon", "must be a duration", nil},
		{"delivery-retry-max", "30s", "at least --delivery-retry-min", nil},
		{"delivery-max-attempts", "x", "must be an integer", nil},
		{"delivery-max-attempts", "1.5", "must be an integer", nil},
		{"delivery-max-attempts", "0", "at least 1", nil},
		{"message-validity", "1d", "must be a duration", nil},
		{"message-validity", "0", "must be positive", nil},
		{"webhook-timeout", "fast", "must be a duration", nil},
		{"webhook-timeout", "-1s", "must be positive", nil},
		{"smpp-reconnect-min", "0s", "must be positive", nil},
		{"smpp-reconnect-max", "500ms", "at least --smpp-reconnect-min", nil},
		{"shutdown-timeout", "x", "must be a duration", nil},
		{"shutdown-timeout", "0s", "must be positive", nil},
		{"max-pending-submits", "many", "must be an integer", nil},
		{"max-pending-submits", "0", "at least 1", nil},
		{"retention", "a day", "must be a duration", nil},
		{"retention", "-1h", "must not be negative", nil},
		{"retention", "4m", "shorter than a peer may still send a message again (--forward-max-retries 50 x --forward-retry-interval 5s + 4 x --http-timeout 5s = 4m30s)", []string{"--federation", "--insecure-skip-verify", "--peers", "b:8443"}},
		{"retention-failed", "1m", "shorter than a peer may still send a message again", []string{"--federation", "--insecure-skip-verify", "--peers", "b:8443", "--retention", "1h"}},
		{"retention", "10m", "--forward-max-retries 200", []string{"--federation", "--insecure-skip-verify", "--peers", "b:8443", "--forward-max-retries", "200"}},
		{"min-free-space", "plenty", "must be a size such as 256MiB or a percentage", nil},
		{"min-free-space", "95%", "from 0% to 90%", nil},
		// ParseFloat reads NaN, which every comparison is false with: it
		// passed both range checks and kept no reserve at all.
		{"min-free-space", "NaN%", "from 0% to 90%", nil},
		{"min-free-space", "nan%", "from 0% to 90%", nil},
		{"nats-url", "nats://127.0.0.1:4222", "the delivery bus needs the shared store (--postgres)", nil},
		// Not a URL: the client refused it only when it dialled, after the
		// store was migrated and the ring's leadership taken.
		{"nats-url", "not a url", "is not a URL", []string{"--postgres", "postgres://db/x"}},
		// A bare host:port is nats:// as the client takes it: the second
		// item is the one refused.
		{"nats-url", "127.0.0.1:4222 ,n:1x", `"n:1x" is not a URL`, []string{"--postgres", "postgres://db/x"}},
		{"nats-url", "http://n:4222", `scheme "http" is not nats, tls, ws or wss`, []string{"--postgres", "postgres://db/x"}},
		{"nats-url", "nats://", "names no host", []string{"--postgres", "postgres://db/x"}},
		{"nats-url", "nats://n:4222/x", "no path", []string{"--postgres", "postgres://db/x"}},
		{"nats-url", "nats://n:99999", "not a number from 1 to 65535", []string{"--postgres", "postgres://db/x"}},
		{"nats-url", "nats://a:4222,ws://b:8080", "mixes websocket", []string{"--postgres", "postgres://db/x"}},
		{"nats-url", " , ", "names no server", []string{"--postgres", "postgres://db/x"}},
		{"nats-stream", "a.b", "a stream name may not", []string{"--postgres", "postgres://db/x", "--nats-url", "nats://n:4222"}},
		{"nats-stream", "S", "given without --nats-url", nil},
		{"nats-storage", "disk", `"disk" is not a storage: want memory or file`, []string{"--postgres", "postgres://db/x", "--nats-url", "nats://n:4222"}},
		{"nats-storage", "file", "given without --nats-url", nil},
		{"nats-creds", "/nonexistent/nats.creds", "no such file", []string{"--postgres", "postgres://db/x", "--nats-url", "nats://n:4222"}},
		{"otlp-endpoint", "collector:4318", "must be an http:// or https:// URL", nil},
		{"otlp-endpoint", "http://", "names no host", nil},
		// The exporter sent only the host and path: the credentials were
		// dropped in silence. Neither is shown.
		{"otlp-endpoint", "https://sb:s3cret@collector:4318", `"https://collector:4318" must carry no user or password`, nil},
		{"otlp-endpoint", "https://sb:s3cret@collector:43x8", "is not a URL", nil},
		// /v1/metrics and /v1/traces are appended to it: they went after the query.
		{"otlp-endpoint", "http://collector:4318/otlp?tenant=a", "must have no query or fragment", nil},
		{"otlp-endpoint", "http://collector:4318/otlp?", "must have no query or fragment", nil},
		{"otlp-endpoint", "http://collector:4318/otlp#x", "must have no query or fragment", nil},
		{"trace-url", "https://jaeger.example/trace/", "must hold {trace_id}", nil},
		{"trace-url", "jaeger/{trace_id}", "must be an http:// or https:// URL", nil},
		{"cdr-rotate-size", "big", "must be a size", nil},
		{"cdr-rotate-size", "1.5GiB", "must be a size", nil},
		{"cdr-rotate-size", "0", "must be positive", nil},
		{"log-level", "loud", "one of debug, info, warn, error", nil},
		{"log-format", "xml", "one of auto, text, json", nil},
		{"route", "44", "PREFIX=FRONTEND", nil},
		{"route", "=uk", "PREFIX=FRONTEND", nil},
		{"route", "44=", "PREFIX=FRONTEND", nil},
		{"route", "+44=uk", "1-20 digits", nil},
		{"route", "44=bad name", "not a valid name", nil},
		{"route", "44=b", "already routed", []string{"--route", "44=a"}},
		{"frontend", "hook", "NAME=URL", nil},
		{"frontend", "hook=", "NAME=URL", nil},
		{"frontend", "hook=ftp://x/y", "not an http(s) URL", nil},
		{"frontend", "hook=/relative", "not an http(s) URL", nil},
		{"frontend", "smsc=smpp://acme:pw@h:2775?window=0", "window", nil},
		{"frontend", "smsc=smpp://acme:toolongpw@h:2775", "at most 8 printable ASCII characters", nil},
		{"frontend", "bad name=http://x", "not a valid name", nil},
		{"frontend", "a=http://y", "given twice", []string{"--frontend", "a=http://x"}},
		{"peers", "b:1:2", "not host:port", nil},
		{"peers", "b:port", "not a number in 1-65535", nil},
		{"peers", "", "federation needs --peers or --dns-srv", []string{"--federation", "--insecure-skip-verify"}},
		{"dns-srv", "_sb._tcp.example", "either --dns-srv or --peers", []string{"--federation", "--insecure-skip-verify", "--peers", "b:8443"}},
		{"dns-server", "::1::", "host:port", nil},
		// An SRV name that cannot be one was never refused: NXDOMAIN each poll.
		{"dns-srv", "bad name.example", "is not a DNS name", nil},
		{"dns-srv", "_smsc._tcp..example.com", "is not a DNS name", nil},
		{"dns-srv", "10.0.0.1", "is not a DNS name", nil},
		{"dns-srv", "peers.example.com", "is not an SRV name _service._proto.domain", nil},
		{"dns-srv", "_smsc._tcp.example.com:53", "is not a DNS name", []string{"--federation", "--insecure-skip-verify"}},
		{"tls-ca", "", "federation needs a CA", []string{"--federation", "--peers", "b:8443"}},
		{"tls-ca", "ca.pem", "needs --tls-cert and --tls-key", []string{"--federation", "--peers", "b:8443"}},
		{"dns-poll-interval", "0s", "must be positive", nil},
		{"health-interval", "often", "must be a duration", nil},
		{"registry-interval", "-1s", "must be positive", nil},
		{"forward-retry-interval", "0", "must be positive", nil},
		{"forward-max-retries", "0", "at least 1", nil},
		// retries x interval wrapped past int64: negative (passing the
		// retention check) or a second or two (failing queued messages at once).
		{"forward-max-retries", "2147483647", "2147483647 x --forward-retry-interval 5s is longer than 10 years", nil},
		{"forward-max-retries", "3689348815", "3689348815 x --forward-retry-interval 5s is longer than 10 years", nil},
		{"forward-max-retries", "9223372036854775807", "is longer than 10 years", nil},
		{"forward-max-retries", "63072001", "is longer than 10 years", []string{"--retention", "0", "--retention-failed", "0"}},
		{"forward-retry-interval", "87601h", "is longer than 10 years", nil},
		{"forward-max-retries", "2", "is longer than 10 years", []string{"--forward-retry-interval", "50000h"}},
		{"http-timeout", "2562047h", "must be at most 24h0m0s", nil},
		{"http-timeout", "0s", "must be positive", nil},
		{"api-port", "70000", "1-65535", nil},
		{"api-port", "0", "1-65535", nil},
		{"ring-role", "leader", "must be master, slave, index or auto", nil},
		{"ring-role", "slave", "needs --postgres", nil},
		// Refused late (exit 1, restarted over and over) when its ring
		// actor started.
		{"tls-ca", "", "this instance is a ring slave and has no way to reach its master (--ring-role slave): give it the site's CA bundle (or --insecure-skip-verify",
			[]string{"--postgres", "postgres://u@h/db", "--ring-role", "slave"}},
		{"ring-master", "ftp://m:1", "must be https://host:port", nil},
		{"ring-master", "ht!tp://x", "must be https://host:port", nil},
		{"ring-address", "nohost", "not host:port", nil},
		{"cluster", "bad name", "not a valid name", nil},
		{"region", "-x", "not a valid name", nil},
		{"zone", "a/b", "not a valid name", nil},
		{"ring-services", "billing", "unknown service", nil},
		{"ring-services", "delivery,delivery,forward", "given twice", nil},
		{"ring-services", "forward", "embedded store's single instance", nil},
		{"ring-publish-interval", "0s", "must be positive", nil},
		{"ring-reconnect-max-attempts", "0", "at least 1", nil},
		{"ring-reconnect-backoff-min", "0s", "must be positive", nil},
		{"ring-reconnect-backoff-max", "1s", "at least --ring-reconnect-backoff-min", nil},
		{"ring-reconnect-jitter", "1.5", "must be in [0, 1]", nil},
		{"ring-reconnect-jitter", "lots", "must be a number", nil},
		{"redact", "partly", "must be off or on", nil},
		{"audit-retention", "a year", "must be a duration", nil},
		{"audit-retention", "-1h", "must not be negative", nil},
		{"api-token-file", "token.txt", "given with --api-token", []string{"--api-token", "abc"}},
		{"smpp-account", "esme1", "must be SYSTEM_ID=PASSWORD", nil},
		{"smpp-account", "=pw", "must be SYSTEM_ID=PASSWORD", nil},
		{"smpp-account", "esme1=", "password must be 1-8 printable ASCII characters", nil},
		{"smpp-account", "esme1=toolongpw", "password must be 1-8 printable ASCII characters", nil},
		{"smpp-account", "bad name=pw", "not a valid name", nil},
		{"smpp-account", "esme1=b", "given twice", []string{"--smpp-account", "esme1=a"}},
		{"api-token", "two words", "16-512 printable ASCII characters without blanks", nil},
		// Taken before, while --api-token-file refused the same token.
		{"api-token", "s3cret", "16-512 printable ASCII characters without blanks", nil},
		{"api-token", strings.Repeat("x", 513), "16-512 printable ASCII characters without blanks", nil},
		{"credentials", "creds.json", "the credentials live in the database", []string{"--postgres", "postgres://u@h/db"}},
	} {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			checkErr := func(err error, fromEnv bool) {
				t.Helper()
				if err == nil {
					t.Fatal("no error")
				}
				msg := err.Error()
				if strings.Contains(msg, "\n") {
					t.Fatalf("more than one line: %q", msg)
				}
				if !strings.HasPrefix(msg, "--"+tc.flag+": ") {
					t.Errorf("error %q does not start with --%s:", msg, tc.flag)
				}
				if !strings.Contains(msg, tc.want) {
					t.Errorf("error %q does not say %q", msg, tc.want)
				}
				suffix := " (from " + envName(tc.flag) + ")"
				if fromEnv != strings.HasSuffix(msg, suffix) {
					t.Errorf("error %q: from environment = %v", msg, fromEnv)
				}
			}
			_, _, err := parseRun(append(append([]string{}, tc.extra...), "--"+tc.flag, tc.value), noEnv)
			checkErr(err, false)
			if tc.extra == nil { // the duplicate cases need both values on one source
				_, _, err = parseRun(nil, envMap(map[string]string{envName(tc.flag): tc.value}))
				checkErr(err, true)
			}
		})
	}
}

// TestParseRunBadValuesHideTheirPasswords: an error about a value that
// holds a password (an SMPP account, a frontend's URL) names the value
// without it, whether it came from the command line or the environment:
// flag errors go to logs and journals.
func TestParseRunBadValuesHideTheirPasswords(t *testing.T) {
	for _, tc := range []struct{ flag, value, shown string }{
		{"smpp-account", "esme1=toolongpw", `"esme1=xxxxx"`},
		{"frontend", "smsc=smpp://acme:s3cret@smsc.example:99999", `"smsc=smpp://acme:xxxxx@smsc.example:99999"`},
		{"frontend", "hook=ftp://u:s3cret@h", `"hook=ftp://u:xxxxx@h"`},
	} {
		for _, env := range []bool{false, true} {
			args, vars := []string{"--" + tc.flag, tc.value}, map[string]string{}
			if env {
				args, vars = nil, map[string]string{envName(tc.flag): tc.value}
			}
			_, _, err := parseRun(args, envMap(vars))
			if err == nil {
				t.Fatalf("%s %q (env %v): no error", tc.flag, tc.value, env)
			}
			msg := err.Error()
			if strings.Contains(msg, "toolongpw") || strings.Contains(msg, "s3cret") || !strings.Contains(msg, tc.shown) {
				t.Errorf("%s (env %v): error %q: want the value shown as %s, without its password", tc.flag, env, msg, tc.shown)
			}
		}
	}
	// The environment's list is split at commas: a password holding one
	// (which the flag takes) is cut in two, and the piece after the comma,
	// no SYSTEM_ID=PASSWORD, was shown as it is: the password's tail.
	for _, tc := range []struct{ flag, value, hidden, shown string }{
		{"smpp-account", "esme1=ab,cd3fgh", "cd3fgh", `"xxxxx"`},
	} {
		_, _, err := parseRun(nil, envMap(map[string]string{envName(tc.flag): tc.value}))
		if err == nil || strings.Contains(err.Error(), tc.hidden) || !strings.Contains(err.Error(), tc.shown) {
			t.Errorf("%s=%q in the environment: error %v: want the piece after the comma shown as %s", envName(tc.flag), tc.value, err, tc.shown)
		}
	}
}

// TestParseRunDataDirOnAFullDisk: a data directory on a full disk (where
// even a mkdir fails with ENOSPC) is writable, only full: the node starts
// and refuses new work with 507 until space comes back. The preflight's
// probe took it for unwritable, so a node restarted on a full disk stopped
// with exit 2, which systemd does not restart, for good.
func TestParseRunDataDirOnAFullDisk(t *testing.T) {
	disk := spacetest.TmpfsInodes(t, 1<<20, 16)
	data := filepath.Join(disk, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "switchboard.db"), nil, 0o600); err != nil { // a node ran here
		t.Fatal(err)
	}
	for i := 0; ; i++ { // use up the inodes: every mkdir fails now
		err := os.Mkdir(filepath.Join(data, fmt.Sprintf("d%d", i)), 0o700)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil || i > 1000 {
			t.Fatalf("filling the inodes of %s: %v after %d", disk, err, i)
		}
	}
	if _, _, err := parseStart([]string{"--data-dir", data}, noEnv); err != nil {
		t.Fatalf("a data directory on a full disk: %v, want it taken", err)
	}
}

// TestParseRunDataDirRoomByUse: a data directory still to be made needs
// the room of what the node's first start writes there: the embedded
// store (1 MiB), or, for a node on Postgres without --tls-cert, the
// self-signed certificate alone. 256 KiB free is refused for the first
// and taken for the second (it was refused for both).
func TestParseRunDataDirRoomByUse(t *testing.T) {
	disk := spacetest.Tmpfs(t, 1<<20)
	spacetest.Fill(t, disk, 768<<10)
	data := filepath.Join(disk, "data")
	if _, _, err := parseStart([]string{"--data-dir", data}, noEnv); err == nil ||
		!strings.Contains(err.Error(), "--data-dir: cannot make "+data) || !strings.Contains(err.Error(), "needs 1MiB") {
		t.Errorf("the embedded store's new data directory with 256 KiB free: %v, want it refused for its room", err)
	}
	if _, _, err := parseStart([]string{"--data-dir", data, "--postgres", "postgres://sb@127.0.0.1:1/sb"}, noEnv); err != nil {
		t.Errorf("a Postgres node's new data directory (its certificate alone) with 256 KiB free: %v, want it taken", err)
	}
}

// TestParseRunChecksFiles: the files the flags name are read before
// anything opens.
func TestParseRunChecksFiles(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	garbage := filepath.Join(dir, "garbage.pem")
	for _, f := range []string{notDir, garbage} {
		if err := os.WriteFile(f, []byte("not a certificate"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-dir", notDir}, "--data-dir: " + notDir + " is a file, not a directory"},
		// A data directory that cannot be made failed after the listeners
		// were bound: exit 1, a log line instead of the flag's.
		{[]string{"--data-dir", filepath.Join(notDir, "sub")}, "--data-dir: cannot make " + filepath.Join(notDir, "sub") + ": " + notDir + " is a file, not a directory"},
		{[]string{"--data-dir", "/proc/switchboard-nope"}, "--data-dir: cannot make /proc/switchboard-nope in /proc: "},
		{[]string{"--tls-cert", garbage, "--tls-key", garbage}, "--tls-cert: "},
		{[]string{"--tls-ca", garbage}, "--tls-ca: "},
		{[]string{"--tls-cert", "missing.pem", "--tls-key", "missing.key"}, "--tls-cert: "},
		{[]string{"--tls-ca", "missing-ca.pem"}, "--tls-ca: "},
		{[]string{"--credentials", garbage}, "--credentials: " + garbage + ": not a credentials file"},
		{[]string{"--credentials", "missing.json"}, "--credentials: "},
		{[]string{"--api-token-file", "missing.txt"}, "--api-token-file: "},
		{[]string{"--api-token-file", emptyFile}, "--api-token-file: " + emptyFile + " is empty"},
		{[]string{"--api-token-file", garbage}, "--api-token-file: " + garbage + ": the token must be one line"},
		// The call records file was opened after the store: exit 1, migrated.
		{[]string{"--cdr-file", filepath.Join(dir, "missing", "cdr.jsonl")}, "--cdr-file: the directory of " + filepath.Join(dir, "missing", "cdr.jsonl") + ": "},
		{[]string{"--cdr-file", filepath.Join(notDir, "cdr.jsonl")}, "--cdr-file: the directory of " + filepath.Join(notDir, "cdr.jsonl") + ", " + notDir + ", is not a directory"},
		{[]string{"--cdr-file", dir}, "--cdr-file: " + dir + " is a directory, not a file"},
		// A device (/dev/null) was taken: every batch failed its sync
		// (nothing was purged), and a rotation renamed the device aside
		// and made a plain file in its place. A pipe: TestParseRunRefusesAPipeForCallRecords.
		{[]string{"--cdr-file", "/dev/null"}, "--cdr-file: call records: /dev/null is not a regular file"},
		// A file of something else, and the node's own database (there
		// or still to be made): the cleaner took the bytes after its last
		// newline for a half-written line, cut them off and appended
		// records (a database so named was corrupt after the first batch).
		{[]string{"--cdr-file", garbage}, "--cdr-file: call records: " + garbage + " holds something else than call records"},
		{[]string{"--data-dir", dir, "--cdr-file", filepath.Join(dir, "switchboard.db")},
			"--cdr-file: " + filepath.Join(dir, "switchboard.db") + " is the node's own " + filepath.Join(dir, "switchboard.db") + ": "},
		{[]string{"--data-dir", dir, "--cdr-file", filepath.Join(dir, ".", "switchboard.db-wal")}, "--cdr-file: "},
		{[]string{"--data-dir", dir, "--cdr-file", filepath.Join(dir, certs.SelfSignedKeyName)}, "--cdr-file: "},
	} {
		_, _, err := parseStart(tc.args, noEnv)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("parseRun(%q) = %v, want one line starting %q", tc.args, err, tc.want)
		}
	}
	// With a CA, a certificate that does not name the node (b's, for a) is
	// refused before anything opens; its own passes.
	if err := certs.InitCA(dir, []string{"a", "b"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ca, _ := certs.CAFiles(dir)
	for node, want := range map[string]string{"b": "--tls-cert: certs: ", "a": ""} {
		cert, key := certs.NodeFiles(dir, node)
		_, _, err := parseStart([]string{"--name", "a", "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca}, noEnv)
		switch {
		case want == "" && err != nil:
			t.Errorf("a with its own certificate: %v", err)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), `does not name node "a"`)):
			t.Errorf("a with %s's certificate: %v, want one line starting %q naming the node", node, err, want)
		}
	}
	// A data directory still to be made passes, and is not made (nor
	// anything in its parent) before the node starts.
	missing := filepath.Join(dir, "data", "deeper")
	before, _ := os.ReadDir(dir)
	if _, _, err := parseStart([]string{"--data-dir", missing}, noEnv); err != nil {
		t.Errorf("--data-dir %s: %v", missing, err)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("the preflight of --data-dir %s left %v in %s (was %v)", missing, after, dir, before)
	}
	// A call records file still to be made, an empty one, one of records
	// and one whose first line a crash cut short pass.
	written, cut, zero := filepath.Join(dir, "written.jsonl"), filepath.Join(dir, "cut.jsonl"), filepath.Join(dir, "zero.jsonl")
	for f, content := range map[string]string{written: `{"record":"switchboard.cdr.v1","node":"a"}` + "\n", cut: `{"rec`, zero: ""} {
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, cdr := range []string{filepath.Join(dir, "cdr.jsonl"), written, cut, zero} {
		if _, _, err := parseStart([]string{"--cdr-file", cdr}, noEnv); err != nil {
			t.Errorf("--cdr-file %s: %v", cdr, err)
		}
	}
}

// TestParseRunFederationAlone: --federation with neither peers nor a CA
// is one line naming what it lacks (it was two, --peers and --tls-ca).
func TestParseRunFederationAlone(t *testing.T) {
	_, _, err := parseRun([]string{"--federation"}, noEnv)
	want := "--federation: needs --peers or --dns-srv, and --tls-ca (a CA for mutual TLS; or --insecure-skip-verify, for development only)"
	if err == nil || err.Error() != want {
		t.Fatalf("parseRun(--federation) = %v, want %q", err, want)
	}
}

func TestParseRunSeveralProblems(t *testing.T) {
	// Every bad value is reported, one line each, before validation runs.
	_, _, err := parseRun([]string{"--delivery-max-attempts", "x", "--route", "nope"},
		envMap(map[string]string{"SWITCHBOARD_LOG_LEVEL": "loud"}))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		`--route: invalid value "nope": must be PREFIX=FRONTEND, e.g. 4478=smpp-uk`,
		`--delivery-max-attempts: invalid value "x": must be an integer`,
		`--log-level: invalid value "loud": must be one of debug, info, warn, error (from SWITCHBOARD_LOG_LEVEL)`,
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("lines =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	// Every validation problem is reported, one line each.
	_, _, err = parseRun([]string{"--delivery-max-attempts", "0", "--shutdown-timeout", "0s"},
		envMap(map[string]string{"SWITCHBOARD_NAME": "-bad"}))
	if err == nil {
		t.Fatal("no error")
	}
	lines = strings.Split(err.Error(), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines = %q, want 3", lines)
	}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "--name: "):
			if !strings.HasSuffix(l, "(from SWITCHBOARD_NAME)") {
				t.Errorf("%q does not say it came from SWITCHBOARD_NAME", l)
			}
		case strings.HasPrefix(l, "--delivery-max-attempts: "), strings.HasPrefix(l, "--shutdown-timeout: "):
			if strings.Contains(l, "(from ") {
				t.Errorf("%q claims to come from the environment", l)
			}
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
}

// TestParseRunNamesEverySource: an error about two flags says where each
// value that came from the environment came from, not only the first
// flag's.
func TestParseRunNamesEverySource(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		// Only the second flag from the environment.
		{[]string{"--retention", "5m", "--federation", "--insecure-skip-verify", "--peers", "b:8443"},
			map[string]string{"SWITCHBOARD_FORWARD_MAX_RETRIES": "200"}, "(from SWITCHBOARD_FORWARD_MAX_RETRIES)"},
		// Both, and a third the text names.
		{[]string{"--federation", "--insecure-skip-verify", "--peers", "b:8443"}, map[string]string{"SWITCHBOARD_RETENTION": "5m", "SWITCHBOARD_FORWARD_MAX_RETRIES": "200", "SWITCHBOARD_HTTP_TIMEOUT": "10s"},
			"(from SWITCHBOARD_RETENTION, SWITCHBOARD_FORWARD_MAX_RETRIES, SWITCHBOARD_HTTP_TIMEOUT)"},
		{[]string{"--delivery-retry-max", "30s"}, map[string]string{"SWITCHBOARD_DELIVERY_RETRY_MIN": "2m"},
			"--delivery-retry-max: must be at least --delivery-retry-min (2m0s), got 30s (from SWITCHBOARD_DELIVERY_RETRY_MIN)"},
	} {
		_, _, err := parseRun(tc.args, envMap(tc.env))
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("parseRun(%q, %v) = %v; want one line ending %q", tc.args, tc.env, err, tc.want)
		}
	}
	// No variable: no note.
	if _, _, err := parseRun([]string{"--retention", "5m", "--forward-max-retries", "200", "--federation", "--insecure-skip-verify", "--peers", "b:8443"}, noEnv); err == nil || strings.Contains(err.Error(), "(from ") {
		t.Errorf("command line only: %v", err)
	}
}

func TestParseRunCommandLineErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "--bogus: unknown flag"},
		{[]string{"--name"}, "--name: needs a value"},
		{[]string{"--name", "dc1", "extra"}, `unexpected argument "extra"`},
	} {
		_, _, err := parseRun(tc.args, noEnv)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("parseRun(%q) = %v, want one line with %q", tc.args, err, tc.want)
		}
	}
	for _, h := range []string{"-h", "--help"} {
		if _, _, err := parseRun([]string{h}, noEnv); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("parseRun(%s) = %v, want flag.ErrHelp", h, err)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Minute:                "1m",
		24 * time.Hour:             "24h",
		90 * time.Minute:           "1h30m",
		10 * time.Second:           "10s",
		1500 * time.Millisecond:    "1.5s",
		time.Hour + 30*time.Second: "1h0m30s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestRunUsageListsEveryFlag(t *testing.T) {
	var b strings.Builder
	printRunUsage(&b)
	for _, f := range runFlags {
		listed := "--" + f.name + " " + f.arg
		if f.boolean {
			listed = "--" + f.name + "[=BOOL]" // its value never apart: --federation false is refused
		}
		if !strings.Contains(b.String(), listed) || !strings.Contains(b.String(), "["+envName(f.name)+"]") {
			t.Errorf("usage does not list %s with %s", listed, envName(f.name))
		}
	}
}

// TestRingRoleIndexOrdinal: role index takes the StatefulSet ordinal from
// --instance-id, else POD_NAME, else HOSTNAME; without one it is refused.
func TestRingRoleIndexOrdinal(t *testing.T) {
	t.Setenv("POD_NAME", "")
	t.Setenv("HOSTNAME", "")
	// --insecure-skip-verify: a slave (ordinal past 0) needs a way to
	// call its master.
	args := []string{"--ring-role", "index", "--postgres", "host=db", "--insecure-skip-verify"}
	if _, _, err := parseRun(append(args, "--instance-id", "solo"), noEnv); err == nil ||
		!strings.HasPrefix(err.Error(), "--ring-role: index: no ordinal") {
		t.Fatalf("without an ordinal: %v", err)
	}
	if _, _, err := parseRun(append(args, "--instance-id", "ring-2"), noEnv); err != nil {
		t.Fatalf("--instance-id ring-2: %v", err)
	}
	t.Setenv("POD_NAME", "ring-0")
	if _, _, err := parseRun(append(args, "--instance-id", "solo"), noEnv); err != nil {
		t.Fatalf("POD_NAME ring-0: %v", err)
	}
}

// TestFlagDefaultsAreDefaultConfigs: the default each flag's usage shows
// is switchboard.DefaultConfig's value of the flag's field, read back
// exactly by the flag itself; a flag whose field has a default shows it
// (or says in words what it is); and no usage text restates its numeric
// default by hand.
func TestFlagDefaultsAreDefaultConfigs(t *testing.T) {
	defaults, lo := switchboard.DefaultConfig(), defaultLogOptions()
	for _, f := range runFlags {
		t.Run(f.name, func(t *testing.T) {
			shown := ""
			if f.def != nil {
				shown = f.def(defaults, lo)
			}
			if f.field == "" { // a log option
				got := logOptions{Level: slog.LevelDebug - 4, Format: "unset"} // neither a default
				if err := f.set(&switchboard.Config{}, &got, shown); err != nil {
					t.Fatalf("the default %q shown does not parse: %v", shown, err)
				}
				if got.Level != lo.Level && got.Format != lo.Format {
					t.Errorf("the default %q shown reads as %+v, want %+v", shown, got, lo)
				}
				return
			}
			want := reflect.ValueOf(defaults).FieldByName(f.field)
			if !want.IsValid() {
				t.Fatalf("field %q is no field of switchboard.Config", f.field)
			}
			if shown == "" {
				if !want.IsZero() && !strings.Contains(f.usage, "(default: ") {
					t.Errorf("DefaultConfig's %s is %v, but the usage shows no default", f.field, want)
				}
				return
			}
			var got switchboard.Config
			if err := f.set(&got, &logOptions{}, shown); err != nil {
				t.Fatalf("the default %q shown does not parse: %v", shown, err)
			}
			if g := reflect.ValueOf(got).FieldByName(f.field); !reflect.DeepEqual(g.Interface(), want.Interface()) {
				t.Errorf("the default %q shown reads as %v, DefaultConfig's %s is %v", shown, g, f.field, want)
			}
			if shown[0] >= '0' && shown[0] <= '9' && strings.Contains(f.usage, shown) {
				t.Errorf("usage %q restates the default %s", f.usage, shown)
			}
		})
	}
}

// TestEveryConfigFieldHasAFlag: a field of switchboard.Config is set by
// exactly one flag or is for embedders only, so that each error of the
// library about a field is given under a flag's name (or the field's, for
// the embedding-only ones, which no operator sets).
func TestEveryConfigFieldHasAFlag(t *testing.T) {
	embeddingOnly := map[string]bool{
		"OTLPInterval": true, "Version": true, "WatchInterval": true, "Logger": true, "Registry": true, "Store": true,
		"Clock": true, "Transport": true, "Listener": true, "Dial": true, "Intercept": true, "Elector": true,
		"DeadLetterThrottle": true, "SMPPReceiptWait": true,
	}
	flags := map[string]string{}
	for _, f := range runFlags {
		if f.field == "" {
			continue
		}
		if other, ok := flags[f.field]; ok {
			t.Errorf("--%s and --%s both set %s", other, f.name, f.field)
		}
		flags[f.field] = f.name
	}
	for sf := range reflect.TypeFor[switchboard.Config]().Fields() {
		_, flagged := flags[sf.Name]
		switch {
		case !flagged && !embeddingOnly[sf.Name]:
			t.Errorf("Config.%s has no flag and is not listed as embedding only", sf.Name)
		case flagged && embeddingOnly[sf.Name]:
			t.Errorf("Config.%s has a flag but is listed as embedding only", sf.Name)
		}
	}
}

// TestFlagErrorsNameFlags: the library's errors about fields are given
// under the flags' names, those in their texts too, and the environment
// variable a value came from is named.
func TestFlagErrorsNameFlags(t *testing.T) {
	_, _, err := parseRun([]string{"--ring-reconnect-backoff-max", "1s"},
		envMap(map[string]string{"SWITCHBOARD_RING_RECONNECT_BACKOFF_MIN": "3s"}))
	// The minimum came from the environment: the line says so.
	want := "--ring-reconnect-backoff-max: must be at least --ring-reconnect-backoff-min (3s), got 1s (from SWITCHBOARD_RING_RECONNECT_BACKOFF_MIN)"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	err = flagErrors(fmt.Errorf("start: %w", field.Errorf("NatsURL", "down, see %s", field.Ref("Postgres"))))
	if want := "start: --nats-url: down, see --postgres"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if err := flagErrors(field.Errorf("WatchInterval", "x")); err.Error() != "WatchInterval: x" {
		t.Errorf("a field without a flag: %q", err)
	}
}

// TestReadmeDefaultsAreDefaultConfigs: the defaults the README's flag
// table shows are DefaultConfig's (read back through each flag's parser),
// so that the table cannot drift from the one place they are set.
func TestReadmeDefaultsAreDefaultConfigs(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]runFlag{}
	for _, f := range runFlags {
		byName[f.name] = f
	}
	quoted := regexp.MustCompile("`([^`]*)`")
	defaults, rows := switchboard.DefaultConfig(), 0
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`--") {
			continue
		}
		var names []string
		for _, m := range quoted.FindAllStringSubmatch(cells[1], -1) {
			name, _, _ := strings.Cut(m[1], " ")
			if !strings.HasPrefix(name, "--") && len(names) > 0 { // `--delivery-retry-min`/`-max`
				prev := names[len(names)-1]
				name = prev[:strings.LastIndexByte(prev, '-')] + name
			}
			names = append(names, strings.TrimPrefix(name, "--"))
		}
		shown := quoted.FindAllStringSubmatch(cells[2], -1)
		if len(shown) == 0 {
			continue // no default shown, or one in words ("host name")
		}
		rows++
		if len(shown) != len(names) {
			t.Errorf("README row %q: %d flags, %d defaults", strings.TrimSpace(cells[1]), len(names), len(shown))
			continue
		}
		for i, name := range names {
			f, ok := byName[name]
			if !ok || f.field == "" {
				t.Errorf("README names --%s, which is no flag of a Config field", name)
				continue
			}
			var got switchboard.Config
			if err := f.set(&got, &logOptions{}, shown[i][1]); err != nil {
				t.Errorf("README's default %q of --%s does not parse: %v", shown[i][1], name, err)
				continue
			}
			g, want := reflect.ValueOf(got).FieldByName(f.field), reflect.ValueOf(defaults).FieldByName(f.field)
			if !reflect.DeepEqual(g.Interface(), want.Interface()) {
				t.Errorf("README shows --%s defaulting to %q, DefaultConfig's %s is %v", name, shown[i][1], f.field, want)
			}
		}
	}
	if rows < 5 {
		t.Fatalf("found %d rows with defaults in the README's flag table; has its shape changed?", rows)
	}
}

// TestShippedPlaceholderTokenIsRefused: deploy/systemd/switchboard.env and
// deploy/kubernetes/secret.yaml ship a placeholder for
// SWITCHBOARD_API_TOKEN. It used to be a valid token
// (REPLACE-WITH-A-TOKEN-OF-16-TO-512-CHARACTERS): a node installed without
// editing that line started with an admin token printed in the public
// repository. The placeholder must stop start-up, naming --api-token.
func TestShippedPlaceholderTokenIsRefused(t *testing.T) {
	shipped := map[string]string{}
	data, err := os.ReadFile("../../deploy/systemd/switchboard.env")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && k == "SWITCHBOARD_API_TOKEN" {
			shipped["deploy/systemd/switchboard.env"] = v
		}
	}
	data, err = os.ReadFile("../../deploy/kubernetes/secret.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "SWITCHBOARD_API_TOKEN:"); ok {
			shipped["deploy/kubernetes/secret.yaml"] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	for _, file := range []string{"deploy/systemd/switchboard.env", "deploy/kubernetes/secret.yaml"} {
		tok, ok := shipped[file]
		if !ok {
			t.Errorf("%s: no SWITCHBOARD_API_TOKEN line (this test checks its placeholder)", file)
			continue
		}
		cfg, _, err := parseRun(nil, envMap(map[string]string{"SWITCHBOARD_API_TOKEN": tok}))
		if err == nil {
			t.Errorf("%s: the shipped placeholder token %q is accepted as the admin token", file, cfg.APIToken)
		} else if !strings.Contains(err.Error(), "--api-token") {
			t.Errorf("%s: the placeholder is refused, but not for the token: %v", file, err)
		}
	}
	if a, b := shipped["deploy/systemd/switchboard.env"], shipped["deploy/kubernetes/secret.yaml"]; a != b {
		t.Errorf("the placeholders differ: %q (systemd) and %q (kubernetes)", a, b)
	}
}

// TestParseRunFlagGivenTwice: --peers (a list) given twice used to keep
// only the last value: the first peer was dropped without a word. A flag
// that is not repeatable, given twice on the command line, is refused with
// one line naming it; repeatable flags add up, and a flag still wins over
// its environment variable.
func TestParseRunFlagGivenTwice(t *testing.T) {
	cfg, _, err := parseRun([]string{"--federation", "--insecure-skip-verify",
		"--peers", "dc2.example.net:8443", "--peers", "dc3.example.net:8443"}, noEnv)
	if err == nil {
		t.Fatalf("--peers given twice: accepted, peers %q (dc2 dropped in silence)", cfg.Peers)
	}
	if want := "--peers: given twice; a list is comma-separated"; !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("--peers given twice: %q, want one line beginning %q", err, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "127.0.0.1:1", "--listen", "127.0.0.1:2"}, "--listen: given twice; it takes one value"},
		{[]string{"--federation", "--peers", "a:1", "--federation=false"}, "--federation: given twice"},
		{[]string{"--ring-services", "delivery", "--ring-services", "forward"}, "--ring-services: given twice; a list is comma-separated"},
		{[]string{"--name", "a", "--name", "a"}, "--name: given twice"},
	} {
		if _, _, err := parseRun(tc.args, noEnv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	// Two flags given twice: one line each.
	_, _, err = parseRun([]string{"--name", "a", "--name", "b", "--zone", "z", "--zone", "y"}, noEnv)
	if err == nil || strings.Count(err.Error(), "\n") != 1 || !strings.Contains(err.Error(), "--name:") || !strings.Contains(err.Error(), "--zone:") {
		t.Errorf("--name and --zone given twice: %v, want one line for each", err)
	}
	// A repeatable flag adds up; the flag wins over its variable.
	cfg, _, err = parseRun([]string{"--route", "1=a", "--route", "2=b", "--listen", "127.0.0.1:2"},
		envMap(map[string]string{"SWITCHBOARD_LISTEN": "127.0.0.1:1"}))
	if err != nil || len(cfg.Routes) != 2 || cfg.Listen != "127.0.0.1:2" {
		t.Errorf("routes %v, listen %q, %v; want two routes and the flag's listen", cfg.Routes, cfg.Listen, err)
	}
}

// TestParseRunBooleanFlagWithValueApart: `--federation false` (the way
// every other flag takes its value) stopped start-up with a line naming no
// flag: `unexpected argument "false": run takes only flags`. It names the
// flag and the way to give its value now.
func TestParseRunBooleanFlagWithValueApart(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--federation", "false"}, "--federation: a boolean flag takes its value as --federation=false"},
		{[]string{"--insecure-skip-verify", "true", "--federation"}, "--insecure-skip-verify: a boolean flag takes its value as --insecure-skip-verify=true"},
		{[]string{"--smpp-tls", "false"}, "--smpp-tls: a boolean flag takes its value as --smpp-tls=false"},
		{[]string{"-federation", "0"}, "--federation: a boolean flag takes its value as --federation=0"},
		// Not a boolean's value, or not after a boolean flag: as before.
		{[]string{"--federation", "extra"}, `unexpected argument "extra": run takes only flags`},
		{[]string{"--federation=true", "false"}, `unexpected argument "false": run takes only flags`},
		{[]string{"--", "false"}, `unexpected argument "false": run takes only flags`},
		{[]string{"false"}, `unexpected argument "false": run takes only flags`},
	} {
		_, _, err := parseRun(tc.args, noEnv)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestMinFreeSpaceBoundIsDocumented: the largest percentage `run --help`
// and docs/operations.md give for --min-free-space is the flag's: it is
// taken, and a larger one is refused. (Neither once gave a bound.)
func TestMinFreeSpaceBoundIsDocumented(t *testing.T) {
	var help, stderr strings.Builder
	mainCode([]string{"run", "--help"}, &help, &stderr, func(string) (string, bool) { return "", false })
	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	bound := regexp.MustCompile("from `?0%`? to `?([0-9.]+)%")
	for _, src := range []struct{ name, text string }{
		{"run --help", help.String()},
		{"docs/operations.md", string(ops)},
	} {
		var line string
		for l := range strings.SplitSeq(src.text, "\n") {
			if strings.Contains(l, "--min-free-space") && strings.Contains(l, "507") {
				line = l
				break
			}
		}
		m := bound.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("%s: --min-free-space's line gives no bound of its percentage (from 0%% to N%%): %q", src.name, line)
			continue
		}
		if _, err := space.ParseReserve(m[1] + "%"); err != nil {
			t.Errorf("%s: gives %s%% as --min-free-space's largest, which the flag refuses: %v", src.name, m[1], err)
		}
		if _, err := space.ParseReserve(m[1] + ".01%"); err == nil {
			t.Errorf("%s: gives %s%% as --min-free-space's largest, but the flag takes %s.01%%", src.name, m[1], m[1])
		}
	}
}
