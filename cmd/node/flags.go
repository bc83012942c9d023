package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/actors/discovery"
	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/space"
	"github.com/switchboard-dev/switchboard/telemetry"
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
	name string
	// field is the path of the Config field the flag sets, as a
	// *field.Error names it ("" for the log options): the flag sets that
	// field, shows its default, and names the Config's errors about it.
	field      string
	arg        string // placeholder in the usage text
	usage      string
	repeatable bool
	// boolean flags may be given without a value (--federation).
	boolean bool
	set     func(cfg *switchboard.Config, lo *logOptions, v string) error
	// shown, when set, is how an error shows a value of the flag: without
	// the password it may hold (flag errors go to logs and journals).
	shown func(v string) string
	// def returns the default shown in the usage text ("" shows none).
	def func(cfg switchboard.Config, lo logOptions) string
}

// envName is the environment variable of a flag: --delivery-max-attempts ->
// SWITCHBOARD_DELIVERY_MAX_ATTEMPTS.
func envName(flagName string) string {
	return "SWITCHBOARD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// runFlags lists the flags of `switchboard run` in usage order: the node's,
// federation's, the ring's, then the log's.
// Each default shown is switchboard.DefaultConfig's (the reasons are
// there); a usage text says what the flag means, not its default.
var runFlags = []runFlag{
	hostNamed(stringFlag("name", "Name", "NAME", "this controller's federation name (default: host name)")),
	hostNamed(stringFlag("instance-id", "InstanceID", "ID", "this instance among the instances of one site (default: host name)")),
	stringFlag("listen", "Listen", "ADDR", "HTTPS address of the API, /healthz, federation and web UI (must not be empty)"),
	stringFlag("metrics-listen", "MetricsListen", "ADDR", "plain HTTP address of /metrics (empty: none)"),
	stringFlag("smpp-listen", "SMPPListen", "ADDR", "SMPP v3.4 address ESMEs bind to with an SMPP account (empty: none; docs/smpp.md)"),
	boolFlag("smpp-tls", "SMPPTLS", "the SMPP listener speaks TLS with the node's certificate"),
	secret(repeatable(valueFlag("smpp-account", "SMPPAccounts", "SYSTEM_ID=PASSWORD",
		"SMPP account an ESME binds with, held in memory beside 'switchboard credentials add NAME --smpp' (password 1-8 characters; makes a credential required); repeatable",
		addSMPPAccount, nil)), false),
	intFlag("smpp-window", "SMPPWindow", "an ESME's requests awaiting their answer on one SMPP session; one more is ESME_RTHROTTLED"),
	stringFlag("data-dir", "DataDir", "DIR", "embedded store and generated dev certificates"),
	stringFlag("postgres", "Postgres", "DSN", "Postgres DSN; when set, the store is Postgres instead of embedded"),
	stringFlag("tls-cert", "TLSCert", "FILE", "PEM certificate; with --tls-key empty too, a self-signed one is made in --data-dir"),
	stringFlag("tls-key", "TLSKey", "FILE", "PEM private key of --tls-cert"),
	stringFlag("tls-ca", "TLSCA", "FILE", "CA bundle: verify peers and require their client certificates on /api/federation/*"),
	stringFlag("api-token", "APIToken", "TOKEN", "when set, non-federation /api/* calls need 'Authorization: Bearer TOKEN' (one admin credential; 16-512 printable ASCII characters without blanks)"),
	stringFlag("api-token-file", "APITokenFile", "FILE", "read --api-token from FILE, its one line (keeps it out of the process list); re-read on SIGHUP and on change"),
	stringFlag("credentials", "Credentials", "FILE", "credentials file (named, hashed tokens with roles; 'switchboard credentials'); re-read on SIGHUP and on change"),
	valueFlag("redact", "Redact", "off|on", "on: mask numbers (first 5 digits kept) and drop message bodies in logs and the audit trail",
		func(_ string, v string) (string, error) {
			switch v = strings.ToLower(v); v {
			case switchboard.RedactOff, switchboard.RedactOn:
				return v, nil
			}
			return "", errors.New("must be off or on")
		}, showString),
	durationFlag("audit-retention", "AuditRetention", "the audit trail is kept this long, apart from messages (0: forever)"),
	repeatable(valueFlag("route", "Routes", "PREFIX=FRONTEND", "initial route: destination prefix (digits) to frontend name; repeatable",
		addRoute, nil)),
	secret(repeatable(valueFlag("frontend", "Webhooks", "NAME=URL",
		"webhook (https://..., or http://... in clear, credentials included) or smpp (smpp://system_id:password@host:port?...) frontend registered at start; repeatable",
		addWebhook, nil)), true),
	durationFlag("delivery-retry-min", "DeliveryRetryMin", "first local delivery retry wait (doubling, jittered)"),
	durationFlag("delivery-retry-max", "DeliveryRetryMax", "longest local delivery retry wait"),
	intFlag("delivery-max-attempts", "DeliveryMaxAttempts", "delivery attempts before a message is failed (dead-lettered)"),
	durationFlag("message-validity", "MessageValidity", "a message undelivered this long after acceptance is failed (expired)"),
	durationFlag("webhook-timeout", "WebhookTimeout", "bound on one webhook POST, an in-process frontend's reply and an smpp frontend's submit (each submit_sm_resp); a timeout is a retry"),
	durationFlag("smpp-reconnect-min", "SMPPReconnectMin", "first wait of an smpp frontend before it dials its SMSC again (doubling, jittered)"),
	durationFlag("smpp-reconnect-max", "SMPPReconnectMax", "longest wait of an smpp frontend before it dials its SMSC again"),
	durationFlag("shutdown-timeout", "ShutdownTimeout", "bound on a graceful stop after SIGINT or SIGTERM"),
	intFlag("max-pending-submits", "MaxPendingSubmits", "submits queued at the intake before new ones get 429"),
	durationFlag("retention", "Retention", "a delivered message is purged this long after its delivery (0: kept forever)"),
	durationFlag("retention-failed", "RetentionFailed", "a failed or forward_failed message is purged this long after it failed (0: kept forever)"),
	stringFlag("cdr-file", "CDRFile", "FILE", "append each message's final record (JSON lines) here before it can be purged"),
	valueFlag("cdr-rotate-size", "CDRRotateBytes", "SIZE", "rotate --cdr-file when it would grow past this size",
		func(_ int64, v string) (int64, error) { return space.ParseSize(v) }, space.FormatSize),
	valueFlag("min-free-space", "MinFreeSpace", "SIZE|N%",
		"below this free space on --data-dir's file system new submits and forwards get 507 (a size, or a percentage from 0% to 90%; embedded store only: with --postgres only the server's no-space errors refuse them)",
		func(_ space.Reserve, v string) (space.Reserve, error) { return space.ParseReserve(v) }, space.Reserve.String),
	stringFlag("nats-url", "NatsURL", "URL", "NATS server(s) of the delivery bus, nats://host:4222[,...] (empty: no bus; needs --postgres)"),
	stringFlag("nats-creds", "NatsCreds", "FILE", "NATS credentials file for --nats-url"),
	stringFlag("nats-stream", "NatsStream", "NAME", "JetStream stream of the delivery bus (default: SWITCHBOARD_<name>; one another site made is not used)"),
	stringFlag("nats-storage", "NatsStorage", "KIND", "where the bus's stream keeps its messages: memory or file (default: memory; the outbox is the durable record)"),
	stringFlag("otlp-endpoint", "OTLPEndpoint", "URL", "OpenTelemetry collector, OTLP/HTTP base URL: metrics and traces are pushed there (the OTEL_EXPORTER_OTLP_* variables work too; this flag wins)"),
	stringFlag("trace-url", "TraceURL", "URL", "web UI link to a message's trace, {trace_id} replaced, e.g. https://jaeger.example/trace/{trace_id}"),
	boolFlag("federation", "Federation", "master switch: discover and contact peers, serve the federation API"),
	valueFlag("peers", "Peers", "HOST:PORT,...",
		fmt.Sprintf("static peers (port defaults to %d); with --federation, give these or --dns-srv", discovery.DefaultAPIPort),
		func(_ []string, v string) ([]string, error) { return discovery.ParsePeers(v, discovery.DefaultAPIPort) }, nil),
	stringFlag("dns-srv", "DNSSRV", "NAME", "SRV name to discover peers by, e.g. _smsc._tcp.example.com"),
	stringFlag("dns-server", "DNSServer", "HOST:PORT", "DNS server to ask (default: the system resolver)"),
	durationFlag("dns-poll-interval", "DNSPollInterval", "re-resolve --dns-srv (and re-identify peers) this often"),
	durationFlag("health-interval", "HealthInterval", "health exchange with every known peer"),
	durationFlag("registry-interval", "RegistryInterval", "frontend registry exchange with every healthy peer"),
	durationFlag("forward-retry-interval", "ForwardRetryInterval", "forward worker tick"),
	intFlag("forward-max-retries", "ForwardMaxRetries", "ticks a message may wait forward_queued before forward_failed"),
	durationFlag("http-timeout", "HTTPTimeout", "bound on every outbound HTTP request to a peer (a batch of several: each)"),
	intFlag("api-port", "APIPort", "port of an SRV target whose record port is 0"),
	boolFlag("insecure-skip-verify", "InsecureSkipVerify", "development only: federate without verifying peers (logged as a warning)"),
	stringFlag("ring-role", "RingRole", "ROLE", "master, slave, index (StatefulSet ordinal: 0 is master) or auto (Postgres advisory lock)"),
	stringFlag("ring-master", "RingMaster", "URL", "a slave's master, https://host:port (default: the address the master published in the store)"),
	stringFlag("ring-address", "RingAddress", "HOST:PORT", "where the site's other instances reach this one (default: --listen, or $POD_IP / host name with its port)"),
	stringFlag("cluster", "Cluster", "NAME", "cluster of this instance; a master admits slaves of its own cluster only"),
	stringFlag("region", "Region", "NAME", "region of this instance; a master admits slaves of its own region only"),
	stringFlag("zone", "Zone", "NAME", "zone of this instance (shown in the ring status)"),
	valueFlag("ring-services", "RingServices", "KIND,...", "work this instance does: delivery, forward (a slave's must be a subset of its master's; under --ring-role auto an instance lacking one never leads)",
		func(_ []string, v string) ([]string, error) { return splitList(v), nil },
		func(s []string) string { return strings.Join(s, ",") }),
	durationFlag("ring-publish-interval", "RingPublishInterval", "the master republishes the assignment this often; a member silent for two loses its ranges"),
	intFlag("ring-reconnect-max-attempts", "RingReconnectMaxAttempts", "failed calls in a row to the master before a slave exits non-zero"),
	durationFlag("ring-reconnect-backoff-min", "RingReconnectBackoffMin", "first wait before calling an unreachable master again (doubling)"),
	durationFlag("ring-reconnect-backoff-max", "RingReconnectBackoffMax", "longest wait before calling an unreachable master again"),
	valueFlag("ring-reconnect-jitter", "RingReconnectJitter", "FRACTION", "up to this fraction (0-1) is taken off each reconnect wait",
		func(_ float64, v string) (float64, error) {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, errors.New("must be a number between 0 and 1")
			}
			return f, nil
		},
		func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }),
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

// configField is cfg's field at path (its names separated by '.'). The
// path and T are the flag table's: a wrong one panics, and the flag tests
// run every flag.
func configField[T any](cfg *switchboard.Config, path string) *T {
	v := reflect.ValueOf(cfg).Elem()
	for name := range strings.SplitSeq(path, ".") {
		v = v.FieldByName(name)
	}
	return v.Addr().Interface().(*T)
}

// valueFlag is a flag that sets the Config field at path to what parse
// makes of a value (old is the field's value so far: a repeatable flag
// adds to it), and whose usage shows the default format makes of
// DefaultConfig's value of the field (nil format, or "": none shown).
func valueFlag[T any](name, path, arg, usage string, parse func(old T, v string) (T, error), format func(T) string) runFlag {
	f := runFlag{
		name: name, field: path, arg: arg, usage: usage,
		set: func(c *switchboard.Config, _ *logOptions, v string) error {
			p := configField[T](c, path)
			n, err := parse(*p, v)
			if err != nil {
				return err
			}
			*p = n
			return nil
		},
	}
	if format != nil {
		f.def = func(c switchboard.Config, _ logOptions) string { return format(*configField[T](&c, path)) }
	}
	return f
}

func showString(s string) string { return s }

func stringFlag(name, path, arg, usage string) runFlag {
	return valueFlag(name, path, arg, usage, func(_ string, v string) (string, error) { return v, nil }, showString)
}

// hostNamed is a flag whose default is the host name: its usage says so
// rather than show this machine's.
func hostNamed(f runFlag) runFlag {
	f.def = nil
	return f
}

// secret is f whose values hold a password after their first '=': an
// error shows NAME=URL with the URL's password, or ID=PASSWORD with the
// password, replaced by messages.RedactedPassword.
func secret(f runFlag, url bool) runFlag {
	f.shown = func(v string) string {
		name, rest, ok := strings.Cut(v, "=")
		switch {
		case !ok && !url:
			// A piece of the environment's list, split at a comma the
			// password held: its tail.
			return messages.RedactedPassword
		case !ok:
			return v
		case url:
			return name + "=" + messages.RedactURL(rest)
		default:
			return name + "=" + messages.RedactedPassword
		}
	}
	return f
}

func repeatable(f runFlag) runFlag {
	f.repeatable = true
	return f
}

func durationFlag(name, path, usage string) runFlag {
	return valueFlag(name, path, "DURATION", usage, func(_ time.Duration, v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, errors.New("must be a duration such as 90s, 5m or 1h30m")
		}
		return d, nil
	}, formatDuration)
}

func intFlag(name, path, usage string) runFlag {
	return valueFlag(name, path, "N", usage, func(_ int, v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, errors.New("must be an integer")
		}
		return n, nil
	}, strconv.Itoa)
}

func boolFlag(name, path, usage string) runFlag {
	f := valueFlag(name, path, "BOOL", usage, func(_ bool, v string) (bool, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, errors.New("must be true or false")
		}
		return b, nil
	}, strconv.FormatBool)
	f.boolean = true
	return f
}

// addRoute parses PREFIX=FRONTEND and adds it to routes. The prefix and
// name are checked here, not only by Config.Validate, so that the error
// shows the whole value and where it came from; a prefix given twice is
// refused rather than silently won by the last one.
func addRoute(routes []switchboard.RouteSpec, v string) ([]switchboard.RouteSpec, error) {
	prefix, frontend, ok := strings.Cut(v, "=")
	prefix, frontend = strings.TrimSpace(prefix), strings.TrimSpace(frontend)
	switch {
	case !ok || prefix == "" || frontend == "":
		return nil, errors.New("must be PREFIX=FRONTEND, e.g. 4478=smpp-uk")
	case !messages.ValidPrefix(prefix):
		return nil, fmt.Errorf("prefix %q must be 1-20 digits", prefix)
	case !switchboard.ValidName(frontend):
		return nil, fmt.Errorf("frontend %q is not a valid name (1-63 letters, digits, '.', '_', '-')", frontend)
	}
	for _, r := range routes {
		if r.Prefix == prefix {
			return nil, fmt.Errorf("prefix %q is already routed to %q", prefix, r.Frontend)
		}
	}
	return append(routes, switchboard.RouteSpec{Prefix: prefix, Frontend: frontend}), nil
}

// addWebhook parses NAME=URL (the URL may itself contain '=') and adds it
// to hooks.
func addWebhook(hooks []switchboard.WebhookSpec, v string) ([]switchboard.WebhookSpec, error) {
	name, u, ok := strings.Cut(v, "=")
	name, u = strings.TrimSpace(name), strings.TrimSpace(u)
	switch {
	case !ok || name == "" || u == "":
		return nil, errors.New("must be NAME=URL, e.g. hook=https://example.com/sms or smsc=smpp://acme:secret@smsc.example:2775")
	case !switchboard.ValidName(name):
		return nil, fmt.Errorf("name %q is not a valid name (1-63 letters, digits, '.', '_', '-')", name)
	}
	if _, err := (switchboard.WebhookSpec{Name: name, URL: u}).Frontend(); err != nil {
		return nil, err
	}
	for _, w := range hooks {
		if w.Name == name {
			return nil, fmt.Errorf("frontend %q is given twice", name)
		}
	}
	return append(hooks, switchboard.WebhookSpec{Name: name, URL: u}), nil
}

// addSMPPAccount parses SYSTEM_ID=PASSWORD (the password may hold '=')
// and adds it to accounts.
func addSMPPAccount(accounts []switchboard.SMPPAccount, v string) ([]switchboard.SMPPAccount, error) {
	id, pw, ok := strings.Cut(v, "=")
	id = strings.TrimSpace(id)
	if !ok || id == "" {
		return nil, errors.New("must be SYSTEM_ID=PASSWORD, e.g. esme1=pw123456")
	}
	a := switchboard.SMPPAccount{SystemID: id, Password: pw}
	if err := a.Check(); err != nil {
		return nil, err
	}
	for _, o := range accounts {
		if o.SystemID == id {
			return nil, fmt.Errorf("system_id %q given twice", id)
		}
	}
	return append(accounts, a), nil
}

// rawValue collects a flag's values from the command line; parseRun
// interprets them afterwards, so that every bad value gets the same message
// whether it came from the command line or the environment.
type rawValue struct {
	vals       []string
	repeatable bool
	boolean    bool
	// twice is set when a flag that is not repeatable is given more than
	// once: parseRun refuses that rather than keep one of the values in
	// silence (--peers a --peers b would run with b only).
	twice bool
}

// IsBoolFlag lets package flag accept a boolean flag without a value.
func (r *rawValue) IsBoolFlag() bool { return r.boolean }

func (r *rawValue) String() string { return strings.Join(r.vals, ",") }

func (r *rawValue) Set(v string) error {
	if r.repeatable {
		r.vals = append(r.vals, v)
		return nil
	}
	r.twice = r.twice || len(r.vals) > 0
	r.vals = []string{v}
	return nil
}

// onceEach makes the flags of fs that take a value, but for the repeatable
// ones named, count how often they are set, and returns the error of those
// given more than once, to call after fs.Parse: as run does, a command that
// takes a flag's last value drops the first in silence ('credentials add
// --role operator --role admin' added an admin; 'certs init --nodes a
// --nodes b' made b's certificate alone). A boolean given twice is harmless.
func onceEach(fs *flag.FlagSet, repeatable ...string) func() error {
	var counts []*countedValue
	fs.VisitAll(func(f *flag.Flag) {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); (ok && b.IsBoolFlag()) || slices.Contains(repeatable, f.Name) {
			return
		}
		c := &countedValue{Value: f.Value, name: f.Name}
		f.Value = c
		counts = append(counts, c)
	})
	return func() error {
		var errs []error
		for _, c := range counts {
			if c.n > 1 {
				errs = append(errs, errTakesOne(c.name))
			}
		}
		return errors.Join(errs...)
	}
}

// countedValue is a flag's value that counts its settings.
type countedValue struct {
	flag.Value
	name string
	n    int
}

func (c *countedValue) Set(v string) error {
	c.n++
	return c.Value.Set(v)
}

// boolValueApart reports whether the first of the left arguments of args
// (the last left of them) is a boolean's value given apart from its flag
// (--federation false), and that flag's name: package flag takes a
// boolean flag's value only as --federation=false, and stops at "false".
func boolValueApart(args []string, left int) (string, bool) {
	i := len(args) - left
	if i == 0 {
		return "", false
	}
	if _, err := strconv.ParseBool(args[i]); err != nil {
		return "", false
	}
	name, ok := strings.CutPrefix(args[i-1], "-")
	name = strings.TrimPrefix(name, "-")
	if !ok || name == "" || strings.ContainsAny(name, "=") {
		return "", false
	}
	for _, f := range runFlags {
		if f.name == name {
			return name, f.boolean
		}
	}
	return "", false
}

// isList reports whether f sets a list (a comma-separated value) without
// being repeatable, as --peers does.
func (f runFlag) isList() bool {
	if f.field == "" || f.repeatable {
		return false
	}
	v := reflect.ValueOf(switchboard.Config{})
	for name := range strings.SplitSeq(f.field, ".") {
		v = v.FieldByName(name)
	}
	return v.Kind() == reflect.Slice
}

// givenTwice is the error of the flags given more than once on the command
// line that are not repeatable, one line each.
func givenTwice(raws []*rawValue) error {
	var errs []error
	for i, f := range runFlags {
		switch {
		case !raws[i].twice:
		case f.isList():
			errs = append(errs, fmt.Errorf("--%s: given twice; a list is comma-separated (--%s a,b)", f.name, f.name))
		default:
			errs = append(errs, errTakesOne(f.name))
		}
	}
	return errors.Join(errs...)
}

// errTakesOne is the error of a flag that takes one value given more than
// once: every command of the binary refuses that rather than keep its last
// value in silence.
func errTakesOne(name string) error {
	return fmt.Errorf("--%s: given twice; it takes one value", name)
}

// parseRun turns the arguments of `switchboard run` and the environment into
// a validated Config (Logger still nil) and the log options.
//
// Each flag takes its value from the command line if given there, else from
// SWITCHBOARD_<FLAG> if set (even to ""), else from
// switchboard.DefaultConfig(). A repeatable flag's environment value is a
// comma-separated list. A flag that is not repeatable given twice on the
// command line is refused. The error, if any, has one line per problem, each
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
		if name, ok := boolValueApart(args, fs.NArg()); ok {
			return cfg, lo, fmt.Errorf("--%s: a boolean flag takes its value as --%s=%s", name, name, fs.Arg(0))
		}
		return cfg, lo, fmt.Errorf("unexpected argument %q: run takes only flags (see 'switchboard run -h')", fs.Arg(0))
	}
	if err := givenTwice(raws); err != nil {
		return cfg, lo, err
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
				if f.shown != nil {
					v = f.shown(v)
				}
				errs = append(errs, fmt.Errorf("--%s: invalid value %q: %v%s", f.name, v, err, fromSuffix(source)))
				break
			}
		}
	}
	if len(errs) > 0 {
		return cfg, lo, errors.Join(errs...)
	}
	if err := errors.Join(cfg.Validate(), runOnlyErrors(cfg)); err != nil {
		return cfg, lo, annotateSources(flagErrors(err), fromEnv)
	}
	return cfg, lo, nil
}

// runOnlyErrors are the problems of cfg that the library takes from an
// embedder but the command does not: an empty Listen, which an embedding
// program uses to serve Node.Handler itself, leaves a node run by the
// command without its HTTPS API, /healthz or web UI (an unset template
// variable, SWITCHBOARD_LISTEN=, would do it in silence).
func runOnlyErrors(cfg switchboard.Config) error {
	if cfg.Listen == "" && !cfg.Federation { // with federation Validate says so
		return field.Errorf("Listen", "must not be empty: it serves the HTTPS API, /healthz and the web UI")
	}
	return nil
}

// parseStart is parseRun, then the files the flags name read and checked
// (Config.Preflight): everything `switchboard run` checks before anything
// opens.
func parseStart(args []string, env lookupEnv) (switchboard.Config, logOptions, error) {
	cfg, lo, err := parseRun(args, env)
	if err != nil {
		return cfg, lo, err
	}
	return cfg, lo, flagErrors(cfg.Preflight())
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

// flagFields maps the path of each Config field a flag sets to the flag.
var flagFields = func() map[string]string {
	m := make(map[string]string, len(runFlags))
	for _, f := range runFlags {
		if f.field != "" {
			m[f.field] = "--" + f.name
		}
	}
	return m
}()

// flagErrors is err of the library (Config.Validate, New, Start) with each
// Config field it names named by its flag instead ("DeliveryRetryMax:
// must be at least DeliveryRetryMin" -> "--delivery-retry-max: must be at
// least --delivery-retry-min"). A field no flag sets keeps its name.
//
// A bad OTEL_* variable of the process (telemetry.EnvError, which the
// library reports under OTLPEndpoint) is named by the variable alone: its
// error is not --otlp-endpoint's.
func flagErrors(err error) error {
	return field.Rename(envVariables(err), field.Map(flagFields))
}

// envVariables is err with each field error that is a bad OTEL_* variable
// of the process replaced by that variable's error.
func envVariables(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list := j.Unwrap()
		out := make([]error, len(list))
		for i, e := range list {
			out[i] = envVariables(e)
		}
		return errors.Join(out...)
	}
	var env *telemetry.EnvError
	if fe, ok := err.(*field.Error); ok && errors.As(fe.Err, &env) {
		return env
	}
	return err
}

// annotateSources adds "(from SWITCHBOARD_X)" to each of flagErrors' field
// errors whose flag came from the environment, so that an operator knows
// where to look; an error that names other flags too ("--retention: ...
// shorter than ... --forward-max-retries ...") lists the variable of each
// of them that came from there ("(from SWITCHBOARD_RETENTION,
// SWITCHBOARD_FORWARD_MAX_RETRIES)"). It returns the errors one a line.
func annotateSources(err error, fromEnv map[string]string) error {
	var out []error
	var add func(error)
	add = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, inner := range j.Unwrap() {
				add(inner)
			}
			return
		}
		var fe *field.Error
		if errors.As(e, &fe) {
			var vars []string
			for _, f := range append([]string{fe.Field}, fe.Refs()...) {
				if env := fromEnv[strings.TrimPrefix(f, "--")]; env != "" && !slices.Contains(vars, env) {
					vars = append(vars, env)
				}
			}
			if len(vars) > 0 {
				e = fmt.Errorf("%w%s", e, fromSuffix(strings.Join(vars, ", ")))
			}
		}
		out = append(out, e)
	}
	add(err)
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
(within --shutdown-timeout; a second signal exits at once, except the
first one repeated within a second, as timeout(1) does).

Every flag can also be set in the environment variable shown in brackets;
repeatable flags take a comma-separated list there. The command line wins.
Only the flags marked repeatable may be given more than once.

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
		arg := " " + f.arg
		if f.boolean {
			arg = "[=" + f.arg + "]" // --federation or --federation=false, never --federation false
		}
		fmt.Fprintf(tw, "  --%s%s\t%s [%s]\n", f.name, arg, usage, envName(f.name))
	}
	tw.Flush()
}
