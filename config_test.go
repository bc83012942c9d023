package switchboard_test

import (
	"errors"
	"math"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/field"
)

// TestValidateNamesConfigFields: an embedder's bad Config is refused with
// errors naming its fields (a *field.Error each), in the Config's names and
// never a flag's, those the node takes from a sub-package's configuration
// (the bus's, the ring's reconnect policy) included.
func TestValidateNamesConfigFields(t *testing.T) {
	for _, tc := range []struct {
		field string
		set   func(*switchboard.Config)
		want  string
	}{
		{"Name", func(c *switchboard.Config) { c.Name = "bad name!" }, "Name: \"bad name!\" is not a valid name"},
		{"MetricsListen", func(c *switchboard.Config) { c.Listen, c.MetricsListen = "127.0.0.1:1", "127.0.0.1:1" }, "is Listen too"},
		{"DeliveryRetryMax", func(c *switchboard.Config) { c.DeliveryRetryMax = time.Second },
			"DeliveryRetryMax: must be at least DeliveryRetryMin (1m0s), got 1s"},
		{"Retention", func(c *switchboard.Config) {
			c.Federation, c.InsecureSkipVerify, c.Peers, c.Retention = true, true, []string{"b:8443"}, time.Minute
		},
			"(ForwardMaxRetries 50 x ForwardRetryInterval 5s + 4 x HTTPTimeout 5s = 4m30s)"},
		{"NatsStream", func(c *switchboard.Config) { c.NatsStream = "S" }, "NatsStream: given without NatsURL"},
		{"NatsStream", func(c *switchboard.Config) {
			c.Postgres, c.NatsURL, c.NatsStream = "postgres://db/x", "nats://n:4222", "a.b"
		},
			"NatsStream: \"a.b\" holds a character a stream name may not"},
		{"RingReconnectBackoffMax", func(c *switchboard.Config) { c.RingReconnectBackoffMax = time.Second },
			"RingReconnectBackoffMax: must be at least RingReconnectBackoffMin (2s), got 1s"},
		{"RingReconnectMaxAttempts", func(c *switchboard.Config) { c.RingReconnectMaxAttempts = 0 }, "must be at least 1"},
		{"OTLPEndpoint", func(c *switchboard.Config) { c.OTLPEndpoint = "http://" }, "OTLPEndpoint: \"http://\" names no host"},
		{"RingRole", func(c *switchboard.Config) { c.RingRole = "slave" }, "RingRole: slave needs Postgres"},
		{"Peers", func(c *switchboard.Config) { c.Federation, c.InsecureSkipVerify = true, true }, "federation needs Peers or DNSSRV"},
		{"WatchInterval", func(c *switchboard.Config) { c.WatchInterval = 0 }, "WatchInterval: must be positive"},
		{"Listen", func(c *switchboard.Config) {
			c.Federation, c.InsecureSkipVerify, c.Peers, c.Listen = true, true, []string{"b:8443"}, ""
		}, "Listen: federation needs an address peers reach this node at"},
		{"ForwardMaxRetries", func(c *switchboard.Config) { c.ForwardMaxRetries = 3689348815 },
			"ForwardMaxRetries: 3689348815 x ForwardRetryInterval 5s is longer than 10 years"},
		{"ForwardMaxRetries", func(c *switchboard.Config) { c.ForwardMaxRetries = 2147483647 }, "is longer than 10 years"},
		{"HTTPTimeout", func(c *switchboard.Config) { c.HTTPTimeout = math.MaxInt64 }, "HTTPTimeout: must be at most 24h"},
		// Their sum is how long a forwarded message is kept: it must not wrap.
		{"MessageValidity", func(c *switchboard.Config) { c.MessageValidity = 200 * 365 * 24 * time.Hour },
			"MessageValidity: must be at most 100 years"},
		{"RetentionFailed", func(c *switchboard.Config) { c.RetentionFailed = 200 * 365 * 24 * time.Hour },
			"RetentionFailed: must be at most 100 years"},
		{"AuditRetention", func(c *switchboard.Config) { c.AuditRetention = -time.Hour }, "AuditRetention: must not be negative"},
		{"DataDir", func(c *switchboard.Config) { c.DataDir = "/srv/a?b" }, `DataDir: "/srv/a?b" holds a '?'`},
		{"MinFreeSpace", func(c *switchboard.Config) { c.MinFreeSpace.Percent = math.NaN() }, "MinFreeSpace: must be a size or a percentage from 0% to 90%, got NaN%"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := switchboard.DefaultConfig()
			tc.set(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			var fe *field.Error
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("errors.As found %+v, want the field %s", fe, tc.field)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "--") {
				t.Errorf("error %q names a flag", err)
			}
		})
	}
}

// TestValidateErrorsNameExistingFields: every field a Config's errors
// name, as the field at fault or in the text, is a field of Config, so
// that a command can name each by its flag. The Config is wrong in every
// way Validate checks at once.
func TestValidateErrorsNameExistingFields(t *testing.T) {
	// The process's OTEL_* variables are checked too: their errors are
	// OTLPEndpoint's, naming the variable.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")
	t.Setenv("OTEL_TRACES_SAMPLER", "always-on")
	cfgs := []func(*switchboard.Config){
		func(c *switchboard.Config) {
			c.Name, c.InstanceID, c.Listen, c.MetricsListen, c.SMPPListen = "-", "-", "x", "x", "x"
			c.SMPPWindow, c.DataDir, c.TLSCert, c.APIToken, c.APITokenFile, c.Redact = 0, "", "c.pem", "a b", "f", "x"
			c.AuditRetention, c.WatchInterval = -1, 0
			c.Routes = []switchboard.RouteSpec{{Prefix: "x", Frontend: "-"}, {Prefix: "x", Frontend: "-"}}
			c.Webhooks = []switchboard.WebhookSpec{{Name: "-", URL: "ftp://x"}, {Name: "-", URL: "ftp://x"}}
			c.DeliveryRetryMin, c.DeliveryRetryMax, c.DeliveryMaxAttempts, c.MessageValidity = 0, -1, 0, 0
			c.WebhookTimeout, c.SMPPReconnectMin, c.SMPPReconnectMax, c.ShutdownTimeout, c.MaxPendingSubmits = 0, 0, -1, 0, 0
			c.Retention, c.RetentionFailed, c.CDRRotateBytes = -1, time.Second, 0
			c.MinFreeSpace.Percent = 99
			c.NatsStream, c.NatsCreds, c.OTLPEndpoint, c.TraceURL = "S", "f", "x", "x"
			c.Federation, c.Peers, c.DNSSRV, c.DNSServer = true, []string{"x"}, "_s._tcp.x", "x"
			c.DNSPollInterval, c.HealthInterval, c.RegistryInterval, c.ForwardRetryInterval = 0, 0, 0, 0
			c.ForwardMaxRetries, c.HTTPTimeout, c.APIPort = 0, 0, 0
			c.RingRole, c.RingMaster, c.RingAddress, c.Cluster, c.Region, c.Zone = "index", "ftp://x", "x", "-", "-", "-"
			c.RingServices, c.RingPublishInterval = []string{"x", "x"}, 0
			c.RingReconnectMaxAttempts, c.RingReconnectBackoffMin, c.RingReconnectBackoffMax, c.RingReconnectJitter = 0, 0, -1, 2
		},
		func(c *switchboard.Config) {
			c.Postgres, c.NatsURL, c.NatsStream, c.NatsCreds = "postgres://db/x", "nats://n:4222", "a.b", "/nonexistent"
			c.TLSKey, c.Credentials, c.APIToken, c.APITokenFile = "k.pem", "c.json", "t", "f"
			c.Federation, c.TLSCA, c.RingRole = true, "ca.pem", "bogus"
			c.Listen, c.MetricsListen, c.SMPPListen, c.RingServices = "127.0.0.1:1", "127.0.0.1:1", "127.0.0.1:1", nil
		},
	}
	config := reflect.TypeFor[switchboard.Config]()
	named := map[string]bool{}
	for _, set := range cfgs {
		cfg := switchboard.DefaultConfig()
		set(&cfg)
		field.Rename(cfg.Validate(), func(path string) string {
			named[path] = true
			return path
		})
	}
	if len(named) < 50 {
		t.Errorf("the errors name only %d fields", len(named))
	}
	for path := range named {
		if _, ok := config.FieldByName(path); !ok {
			t.Errorf("an error names %q, which is no field of Config", path)
		}
	}
	cfg := switchboard.DefaultConfig()
	cfg.Name, cfg.DataDir = "n", t.TempDir()
	err := cfg.Validate()
	for _, want := range []string{`OTLPEndpoint: the process's OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318"`, `OTLPEndpoint: the process's OTEL_TRACES_SAMPLER: "always-on" is not a sampler`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad OTEL_* variables: Validate: %v; want an error %q", err, want)
		}
	}
}

// TestRedeliveryHorizonDoesNotWrap: retries x interval + 4 x the timeout
// past a Duration's range is the longest duration, never a wrapped one (a
// negative horizon let every retention pass its check).
func TestRedeliveryHorizonDoesNotWrap(t *testing.T) {
	for _, tc := range []struct {
		retries  int
		interval time.Duration
		timeout  time.Duration
	}{
		{2147483647, 5 * time.Second, 5 * time.Second},
		{3689348815, 5 * time.Second, 5 * time.Second},
		{1, time.Second, math.MaxInt64 / 2},
		{math.MaxInt, time.Nanosecond, time.Second},
	} {
		cfg := switchboard.DefaultConfig()
		cfg.ForwardMaxRetries, cfg.ForwardRetryInterval, cfg.HTTPTimeout = tc.retries, tc.interval, tc.timeout
		if h := cfg.RedeliveryHorizon(); h != math.MaxInt64 {
			t.Errorf("%d x %v + 4 x %v: horizon %v, want the longest duration", tc.retries, tc.interval, tc.timeout, h)
		}
	}
	cfg := switchboard.DefaultConfig()
	if h, want := cfg.RedeliveryHorizon(), 4*time.Minute+30*time.Second; h != want {
		t.Errorf("default horizon %v, want %v", h, want)
	}
}

// TestEmptyListenForEmbedders: an embedder may run a node without a
// listener (it serves Node.Handler itself), and a federating one with a
// Listener of its own instead of Listen.
func TestEmptyListenForEmbedders(t *testing.T) {
	cfg := switchboard.DefaultConfig()
	cfg.Listen = ""
	if err := cfg.Validate(); err != nil {
		t.Errorf("no listener: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg.Federation, cfg.InsecureSkipVerify, cfg.Peers, cfg.Listener = true, true, []string{"b:8443"}, ln
	if err := cfg.Validate(); err != nil {
		t.Errorf("federation with a Listener: %v", err)
	}
}
