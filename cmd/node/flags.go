package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/actors/discovery"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/space"
)

// logOptions are the run flags that shape the logger rather than the node.
type logOptions struct {
	Level  slog.Level
	Format string // "auto", "text" or "json"
}

func defaultLogOptions() logOptions {
	return logOptions{Level: slog.LevelInfo, Format: "auto"}
}

// runFlag is one flag of `switchboard run`. set parses one value into cfg
// or lo and returns only the reason a value is bad ("must be an integer");
// parseRun adds the flag, the value and where it came from.
type runFlag struct {
	name       string
	arg        string // placeholder in the usage text
	usage      string
	repeatable bool
	// boolean flags may be given without a value (--federation).
	boolean bool
	set     func(cfg *switchboard.Config, lo *logOptions, v string) error
	// def returns the default shown in the usage text ("" shows none).
	def func(cfg switchboard.Config, lo logOptions) string
}

// envName is the environment variable of a flag: --delivery-max-attempts ->
// SWITCHBOARD_DELIVERY_MAX_ATTEMPTS.
func envName(flagName string) string {
	return "SWITCHBOARD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// runFlags lists the flags of `switchboard run` in usage order: the
// non-federation flags of the contract, then the node settings beyond it.
var runFlags = []runFlag{
	stringFlag("name", "NAME", "this controller's federation name (default: host name)",
		func(c *switchboard.Config) *string { return &c.Name }, false),
	stringFlag("instance-id", "ID", "this instance among the instances of one site (default: host name)",
		func(c *switchboard.Config) *string { return &c.InstanceID }, false),
	stringFlag("listen", "ADDR", "HTTPS address of the API, federation and web UI (empty: none)",
		func(c *switchboard.Config) *string { return &c.Listen }, true),
	stringFlag("metrics-listen", "ADDR", "plain HTTP address of /metrics (empty: none)",
		func(c *switchboard.Config) *string { return &c.MetricsListen }, true),
	stringFlag("smpp-listen", "ADDR", "SMPP v3.4 address ESMEs bind to with an SMPP account (empty: none; docs/smpp.md)",
		func(c *switchboard.Config) *string { return &c.SMPPListen }, false),
	boolFlag("smpp-tls", "the SMPP listener speaks TLS with the node's certificate",
		func(c *switchboard.Config) *bool { return &c.SMPPTLS }),
	intFlag("smpp-window", "an ESME's requests awaiting their answer on one SMPP session; one more is ESME_RTHROTTLED",
		func(c *switchboard.Config) *int { return &c.SMPPWindow }),
	stringFlag("data-dir", "DIR", "embedded store and generated dev certificates",
		func(c *switchboard.Config) *string { return &c.DataDir }, true),
	stringFlag("postgres", "DSN", "Postgres DSN; when set, the store is Postgres instead of embedded",
		func(c *switchboard.Config) *string { return &c.Postgres }, false),
	stringFlag("tls-cert", "FILE", "PEM certificate; with --tls-key empty too, a self-signed one is made in --data-dir",
		func(c *switchboard.Config) *string { return &c.TLSCert }, false),
	stringFlag("tls-key", "FILE", "PEM private key of --tls-cert",
		func(c *switchboard.Config) *string { return &c.TLSKey }, false),
	stringFlag("tls-ca", "FILE", "CA bundle: verify peers and require their client certificates on /api/federation/*",
		func(c *switchboard.Config) *string { return &c.TLSCA }, false),
	stringFlag("api-token", "TOKEN", "when set, non-federation /api/* calls need 'Authorization: Bearer TOKEN' (one admin credential)",
		func(c *switchboard.Config) *string { return &c.APIToken }, false),
	stringFlag("api-token-file", "FILE", "read --api-token from FILE (keeps it out of the process list); re-read on SIGHUP",
		func(c *switchboard.Config) *string { return &c.APITokenFile }, false),
	stringFlag("credentials", "FILE", "credentials file (named, hashed tokens with roles; 'switchboard credentials'); re-read on SIGHUP and on change",
		func(c *switchboard.Config) *string { return &c.Credentials }, false),
	{
		name: "redact", arg: "off|on", usage: "on: mask numbers (first 5 digits kept) and drop message bodies in logs and the audit trail",
		set: func(c *switchboard.Config, _ *logOptions, v string) error {
			switch v = strings.ToLower(v); v {
			case switchboard.RedactOff, switchboard.RedactOn:
				c.Redact = v
				return nil
			}
			return errors.New("must be off or on")
		},
		def: func(c switchboard.Config, _ logOptions) string { return c.Redact },
	},
	durationFlag("audit-retention", "the audit trail is kept this long, apart from messages (0: forever)",
		func(c *switchboard.Config) *time.Duration { return &c.AuditRetention }),
	{
		name: "route", arg: "PREFIX=FRONTEND", repeatable: true,
		usage: "initial route: destination prefix (digits) to frontend name; repeatable",
		set:   setRoute,
	},
	{
		name: "frontend", arg: "NAME=URL", repeatable: true,
		usage: "webhook (https://...) or smpp (smpp://system_id:password@host:port?...) frontend registered at start; repeatable",
		set:   setWebhook,
	},
	durationFlag("delivery-retry-min", "first local delivery retry wait (doubling, jittered)",
		func(c *switchboard.Config) *time.Duration { return &c.DeliveryRetryMin }),
	durationFlag("delivery-retry-max", "longest local delivery retry wait",
		func(c *switchboard.Config) *time.Duration { return &c.DeliveryRetryMax }),
	intFlag("delivery-max-attempts", "delivery attempts before a message is failed (dead-lettered)",
		func(c *switchboard.Config) *int { return &c.DeliveryMaxAttempts }),
	durationFlag("message-validity", "a message undelivered this long after acceptance is failed (expired)",
		func(c *switchboard.Config) *time.Duration { return &c.MessageValidity }),
	durationFlag("webhook-timeout", "bound on one webhook POST; a timeout is a retry",
		func(c *switchboard.Config) *time.Duration { return &c.WebhookTimeout }),
	durationFlag("smpp-reconnect-min", "first wait of an smpp frontend before it dials its SMSC again (doubling, jittered)",
		func(c *switchboard.Config) *time.Duration { return &c.SMPPReconnectMin }),
	durationFlag("smpp-reconnect-max", "longest wait of an smpp frontend before it dials its SMSC again",
		func(c *switchboard.Config) *time.Duration { return &c.SMPPReconnectMax }),
	durationFlag("shutdown-timeout", "bound on a graceful stop after SIGINT or SIGTERM",
		func(c *switchboard.Config) *time.Duration { return &c.ShutdownTimeout }),
	intFlag("max-pending-submits", "submits queued at the intake before new ones get 429",
		func(c *switchboard.Config) *int { return &c.MaxPendingSubmits }),
	durationFlag("retention", "a delivered message is purged this long after its delivery (0: kept forever)",
		func(c *switchboard.Config) *time.Duration { return &c.Retention }),
	durationFlag("retention-failed", "a failed or forward_failed message is purged this long after it failed (0: kept forever)",
		func(c *switchboard.Config) *time.Duration { return &c.RetentionFailed }),
	stringFlag("cdr-file", "FILE", "append each message's final record (JSON lines) here before it can be purged",
		func(c *switchboard.Config) *string { return &c.CDRFile }, false),
	sizeFlag("cdr-rotate-size", "rotate --cdr-file when it would grow past this size",
		func(c *switchboard.Config) *int64 { return &c.CDRRotateBytes }),
	{
		name: "min-free-space", arg: "SIZE|N%",
		usage: "below this free space on --data-dir's file system new submits and forwards get 507 (a size or a percentage)",
		set: func(c *switchboard.Config, _ *logOptions, v string) error {
			r, err := space.ParseReserve(v)
			c.MinFreeSpace = r
			return err
		},
		def: func(c switchboard.Config, _ logOptions) string { return c.MinFreeSpace.String() },
	},
	stringFlag("nats-url", "URL", "NATS server(s) of the delivery bus, nats://host:4222[,...] (empty: no bus; needs --postgres)",
		func(c *switchboard.Config) *string { return &c.NatsURL }, false),
	stringFlag("nats-creds", "FILE", "NATS credentials file for --nats-url",
		func(c *switchboard.Config) *string { return &c.NatsCreds }, false),
	stringFlag("nats-stream", "NAME", "JetStream stream of the delivery bus (default: SWITCHBOARD_<name>)",
		func(c *switchboard.Config) *string { return &c.NatsStream }, false),
	stringFlag("otlp-endpoint", "URL", "OpenTelemetry collector, OTLP/HTTP base URL: metrics and traces are pushed there (the OTEL_EXPORTER_OTLP_* variables work too; this flag wins)",
		func(c *switchboard.Config) *string { return &c.OTLPEndpoint }, false),
	stringFlag("trace-url", "URL", "web UI link to a message's trace, {trace_id} replaced, e.g. https://jaeger.example/trace/{trace_id}",
		func(c *switchboard.Config) *string { return &c.TraceURL }, false),
	boolFlag("federation", "master switch: discover and contact peers, serve the federation API",
		func(c *switchboard.Config) *bool { return &c.Federation }),
	{
		name: "peers", arg: "HOST:PORT,...", usage: "static peers (port defaults to 8443); used when --dns-srv is empty",
		set: setPeers,
	},
	stringFlag("dns-srv", "NAME", "SRV name to discover peers by, e.g. _smsc._tcp.example.com",
		func(c *switchboard.Config) *string { return &c.DNSSRV }, false),
	stringFlag("dns-server", "HOST:PORT", "DNS server to ask (default: the system resolver)",
		func(c *switchboard.Config) *string { return &c.DNSServer }, false),
	durationFlag("dns-poll-interval", "re-resolve --dns-srv (and re-identify peers) this often",
		func(c *switchboard.Config) *time.Duration { return &c.DNSPollInterval }),
	durationFlag("health-interval", "health exchange with every known peer",
		func(c *switchboard.Config) *time.Duration { return &c.HealthInterval }),
	durationFlag("registry-interval", "frontend registry exchange with every healthy peer",
		func(c *switchboard.Config) *time.Duration { return &c.RegistryInterval }),
	durationFlag("forward-retry-interval", "forward worker tick",
		func(c *switchboard.Config) *time.Duration { return &c.ForwardRetryInterval }),
	intFlag("forward-max-retries", "ticks a message may wait forward_queued before forward_failed",
		func(c *switchboard.Config) *int { return &c.ForwardMaxRetries }),
	durationFlag("http-timeout", "bound on every outbound peer call",
		func(c *switchboard.Config) *time.Duration { return &c.HTTPTimeout }),
	intFlag("api-port", "port of an SRV target whose record port is 0",
		func(c *switchboard.Config) *int { return &c.APIPort }),
	boolFlag("insecure-skip-verify", "development only: federate without verifying peers (logged as a warning)",
		func(c *switchboard.Config) *bool { return &c.InsecureSkipVerify }),
	stringFlag("ring-role", "ROLE", "master, slave, index (StatefulSet ordinal: 0 is master) or auto (Postgres advisory lock)",
		func(c *switchboard.Config) *string { return &c.RingRole }, true),
	stringFlag("ring-master", "URL", "a slave's master, https://host:port (default: the address the master published in the store)",
		func(c *switchboard.Config) *string { return &c.RingMaster }, false),
	stringFlag("ring-address", "HOST:PORT", "where the site's other instances reach this one (default: --listen, or $POD_IP / host name with its port)",
		func(c *switchboard.Config) *string { return &c.RingAddress }, false),
	stringFlag("cluster", "NAME", "cluster of this instance; a master admits slaves of its own cluster only",
		func(c *switchboard.Config) *string { return &c.Cluster }, false),
	stringFlag("region", "NAME", "region of this instance; a master admits slaves of its own region only",
		func(c *switchboard.Config) *string { return &c.Region }, false),
	stringFlag("zone", "NAME", "zone of this instance (shown in the ring status)",
		func(c *switchboard.Config) *string { return &c.Zone }, false),
	{
		name: "ring-services", arg: "KIND,...", usage: "work this instance does: delivery, forward (a slave's must be a subset of its master's)",
		set: func(c *switchboard.Config, _ *logOptions, v string) error {
			c.RingServices = splitList(v)
			return nil
		},
		def: func(c switchboard.Config, _ logOptions) string { return strings.Join(c.RingServices, ",") },
	},
	durationFlag("ring-publish-interval", "the master republishes the assignment this often; a member silent for two loses its ranges",
		func(c *switchboard.Config) *time.Duration { return &c.RingPublishInterval }),
	intFlag("ring-reconnect-max-attempts", "failed calls in a row to the master before a slave exits non-zero",
		func(c *switchboard.Config) *int { return &c.RingReconnectMaxAttempts }),
	durationFlag("ring-reconnect-backoff-min", "first wait before calling an unreachable master again (doubling)",
		func(c *switchboard.Config) *time.Duration { return &c.RingReconnectBackoffMin }),
	durationFlag("ring-reconnect-backoff-max", "longest wait before calling an unreachable master again",
		func(c *switchboard.Config) *time.Duration { return &c.RingReconnectBackoffMax }),
	{
		name: "ring-reconnect-jitter", arg: "FRACTION", usage: "up to this fraction (0-1) is taken off each reconnect wait",
		set: func(c *switchboard.Config, _ *logOptions, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return errors.New("must be a number between 0 and 1")
			}
			c.RingReconnectJitter = f
			return nil
		},
		def: func(c switchboard.Config, _ logOptions) string {
			return strconv.FormatFloat(c.RingReconnectJitter, 'g', -1, 64)
		},
	},
	{
		name: "log-level", arg: "LEVEL", usage: "debug, info, warn or error",
		set: func(_ *switchboard.Config, lo *logOptions, v string) error {
			l, ok := logLevels[strings.ToLower(v)]
			if !ok {
				return errors.New("must be one of debug, info, warn, error")
			}
			lo.Level = l
			return nil
		},
		def: func(_ switchboard.Config, lo logOptions) string { return strings.ToLower(lo.Level.String()) },
	},
	{
		name: "log-format", arg: "FORMAT", usage: "auto (colour text on a terminal, JSON otherwise), text or json",
		set: func(_ *switchboard.Config, lo *logOptions, v string) error {
			switch f := strings.ToLower(v); f {
			case "auto", "text", "json":
				lo.Format = f
				return nil
			}
			return errors.New("must be one of auto, text, json")
		},
		def: func(_ switchboard.Config, lo logOptions) string { return lo.Format },
	},
}

var logLevels = map[string]slog.Level{
	"debug":   slog.LevelDebug,
	"info":    slog.LevelInfo,
	"warn":    slog.LevelWarn,
	"warning": slog.LevelWarn,
	"error":   slog.LevelError,
}

func stringFlag(name, arg, usage string, field func(*switchboard.Config) *string, showDefault bool) runFlag {
	f := runFlag{
		name: name, arg: arg, usage: usage,
		set: func(c *switchboard.Config, _ *logOptions, v string) error {
			*field(c) = v
			return nil
		},
	}
	if showDefault {
		f.def = func(c switchboard.Config, _ logOptions) string { return *field(&c) }
	}
	return f
}

func durationFlag(name, usage string, field func(*switchboard.Config) *time.Duration) runFlag {
	return runFlag{
		name: name, arg: "DURATION", usage: usage,
		set: func(c *switchboard.Config, _ *logOptions, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return errors.New("must be a duration such as 90s, 5m or 1h30m")
			}
			*field(c) = d
			return nil
		},
		def: func(c switchboard.Config, _ logOptions) string { return formatDuration(*field(&c)) },
	}
}

func intFlag(name, usage string, field func(*switchboard.Config) *int) runFlag {
	return runFlag{
		name: name, arg: "N", usage: usage,
		set: func(c *switchboard.Config, _ *logOptions, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return errors.New("must be an integer")
			}
			*field(c) = n
			return nil
		},
		def: func(c switchboard.Config, _ logOptions) string { return strconv.Itoa(*field(&c)) },
	}
}

func sizeFlag(name, usage string, field func(*switchboard.Config) *int64) runFlag {
	return runFlag{
		name: name, arg: "SIZE", usage: usage,
		set: func(c *switchboard.Config, _ *logOptions, v string) error {
			n, err := space.ParseSize(v)
			if err != nil {
				return err
			}
			*field(c) = n
			return nil
		},
		def: func(c switchboard.Config, _ logOptions) string { return space.FormatSize(*field(&c)) },
	}
}

func boolFlag(name, usage string, field func(*switchboard.Config) *bool) runFlag {
	return runFlag{
		name: name, arg: "BOOL", usage: usage, boolean: true,
		set: func(c *switchboard.Config, _ *logOptions, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("must be true or false")
			}
			*field(c) = b
			return nil
		},
		def: func(c switchboard.Config, _ logOptions) string { return strconv.FormatBool(*field(&c)) },
	}
}

// setPeers parses --peers: a comma-separated list whose entries default to
// port 8443.
func setPeers(c *switchboard.Config, _ *logOptions, v string) error {
	peers, err := discovery.ParsePeers(v, 8443)
	if err != nil {
		return err
	}
	c.Peers = peers
	return nil
}

// setRoute parses PREFIX=FRONTEND. The prefix and name are checked here, not
// only by Config.Validate, so that the error shows the whole value and where
// it came from; a prefix given twice is refused rather than silently won by
// the last one.
func setRoute(c *switchboard.Config, _ *logOptions, v string) error {
	prefix, frontend, ok := strings.Cut(v, "=")
	prefix, frontend = strings.TrimSpace(prefix), strings.TrimSpace(frontend)
	switch {
	case !ok || prefix == "" || frontend == "":
		return errors.New("must be PREFIX=FRONTEND, e.g. 4478=smpp-uk")
	case !messages.ValidPrefix(prefix):
		return fmt.Errorf("prefix %q must be 1-20 digits", prefix)
	case !switchboard.ValidName(frontend):
		return fmt.Errorf("frontend %q is not a valid name (1-63 letters, digits, '.', '_', '-')", frontend)
	}
	for _, r := range c.Routes {
		if r.Prefix == prefix {
			return fmt.Errorf("prefix %q is already routed to %q", prefix, r.Frontend)
		}
	}
	c.Routes = append(c.Routes, switchboard.RouteSpec{Prefix: prefix, Frontend: frontend})
	return nil
}

// setWebhook parses NAME=URL (the URL may itself contain '=').
func setWebhook(c *switchboard.Config, _ *logOptions, v string) error {
	name, u, ok := strings.Cut(v, "=")
	name, u = strings.TrimSpace(name), strings.TrimSpace(u)
	switch {
	case !ok || name == "" || u == "":
		return errors.New("must be NAME=URL, e.g. hook=https://example.com/sms or smsc=smpp://acme:secret@smsc.example:2775")
	case !switchboard.ValidName(name):
		return fmt.Errorf("name %q is not a valid name (1-63 letters, digits, '.', '_', '-')", name)
	}
	if _, err := (switchboard.WebhookSpec{Name: name, URL: u}).Frontend(); err != nil {
		return err
	}
	for _, w := range c.Webhooks {
		if w.Name == name {
			return fmt.Errorf("frontend %q is given twice", name)
		}
	}
	c.Webhooks = append(c.Webhooks, switchboard.WebhookSpec{Name: name, URL: u})
	return nil
}

// rawValue collects a flag's values from the command line; parseRun
// interprets them afterwards, so that every bad value gets the same message
// whether it came from the command line or the environment.
type rawValue struct {
	vals       []string
	repeatable bool
	boolean    bool
}

// IsBoolFlag lets package flag accept a boolean flag without a value.
func (r *rawValue) IsBoolFlag() bool { return r.boolean }

func (r *rawValue) String() string { return strings.Join(r.vals, ",") }

func (r *rawValue) Set(v string) error {
	if r.repeatable {
		r.vals = append(r.vals, v)
	} else {
		r.vals = []string{v} // the last one wins, as with package flag
	}
	return nil
}

// parseRun turns the arguments of `switchboard run` and the environment into
// a validated Config (Logger still nil) and the log options.
//
// Each flag takes its value from the command line if given there, else from
// SWITCHBOARD_<FLAG> if set (even to ""), else from
// switchboard.DefaultConfig(). A repeatable flag's environment value is a
// comma-separated list. The error, if any, has one line per problem, each
// naming its flag ("--delivery-max-attempts: invalid value "x": must be an
// integer"), with " (from SWITCHBOARD_...)" when the value came from the
// environment; flag.ErrHelp is returned for -h.
func parseRun(args []string, env lookupEnv) (switchboard.Config, logOptions, error) {
	cfg := switchboard.DefaultConfig()
	cfg.Version = version
	lo := defaultLogOptions()

	fs := flag.NewFlagSet("switchboard run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	raws := make([]*rawValue, len(runFlags))
	for i, f := range runFlags {
		raws[i] = &rawValue{repeatable: f.repeatable, boolean: f.boolean}
		fs.Var(raws[i], f.name, f.usage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, lo, err
		}
		return cfg, lo, fmt.Errorf("%s (see 'switchboard run -h')", flagSyntaxError(err))
	}
	if fs.NArg() > 0 {
		return cfg, lo, fmt.Errorf("unexpected argument %q: run takes only flags (see 'switchboard run -h')", fs.Arg(0))
	}

	var errs []error
	fromEnv := make(map[string]string) // flag name -> variable it came from
	for i, f := range runFlags {
		vals, source := raws[i].vals, ""
		if len(vals) == 0 {
			v, ok := env(envName(f.name))
			if !ok {
				continue
			}
			source = envName(f.name)
			fromEnv[f.name] = source
			if f.repeatable {
				vals = splitList(v)
			} else {
				vals = []string{v}
			}
		}
		for _, v := range vals {
			if err := f.set(&cfg, &lo, v); err != nil {
				errs = append(errs, fmt.Errorf("--%s: invalid value %q: %v%s", f.name, v, err, fromSuffix(source)))
				break
			}
		}
	}
	if len(errs) > 0 {
		return cfg, lo, errors.Join(errs...)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, lo, annotateSources(err, fromEnv)
	}
	return cfg, lo, nil
}

// parseStart is parseRun, then the files the flags name read and checked
// (Config.Preflight): everything `switchboard run` checks before anything
// opens.
func parseStart(args []string, env lookupEnv) (switchboard.Config, logOptions, error) {
	cfg, lo, err := parseRun(args, env)
	if err != nil {
		return cfg, lo, err
	}
	return cfg, lo, cfg.Preflight()
}

// flagSyntaxError rewrites package flag's messages about the command line
// itself into this command's "--flag: problem" form.
func flagSyntaxError(err error) string {
	msg := err.Error()
	for prefix, problem := range map[string]string{
		"flag provided but not defined: -": "unknown flag",
		"flag needs an argument: -":        "needs a value",
	} {
		if name, ok := strings.CutPrefix(msg, prefix); ok {
			return "--" + name + ": " + problem
		}
	}
	return msg
}

func fromSuffix(envVar string) string {
	if envVar == "" {
		return ""
	}
	return " (from " + envVar + ")"
}

// annotateSources adds "(from SWITCHBOARD_X)" to each of Config.Validate's
// "--x: ..." errors whose flag came from the environment, so that an
// operator knows where to look.
func annotateSources(err error, fromEnv map[string]string) error {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		msg := e.Error()
		if rest, ok := strings.CutPrefix(msg, "--"); ok {
			if name, _, ok := strings.Cut(rest, ":"); ok && fromEnv[name] != "" {
				e = fmt.Errorf("%w%s", e, fromSuffix(fromEnv[name]))
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// splitList splits an environment list on commas, trimming blanks and
// dropping empty items (so "a, b," is [a b]).
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// formatDuration prints 1m0s as 1m and 24h0m0s as 24h.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func printRunUsage(w io.Writer) {
	defaults := switchboard.DefaultConfig()
	lo := defaultLogOptions()
	fmt.Fprint(w, `Usage: switchboard run [flags]

Runs a Switchboard node until SIGINT or SIGTERM, then stops it gracefully
(within --shutdown-timeout; a second signal exits at once).

Every flag can also be set in the environment variable shown in brackets;
repeatable flags take a comma-separated list there. The command line wins.

Flags:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range runFlags {
		usage := f.usage
		if f.def != nil {
			if d := f.def(defaults, lo); d != "" {
				usage += fmt.Sprintf(" (default %s)", d)
			}
		}
		fmt.Fprintf(tw, "  --%s %s\t%s [%s]\n", f.name, f.arg, usage, envName(f.name))
	}
	tw.Flush()
}
