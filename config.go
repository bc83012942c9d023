package switchboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/actors/discovery"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/postgres"
	"github.com/switchboard-dev/switchboard/persistence/space"
	"github.com/switchboard-dev/switchboard/transport"
)

// RouteSpec is an initial route (--route PREFIX=FRONTEND).
type RouteSpec struct {
	Prefix   string
	Frontend string
}

// WebhookSpec is a frontend registered at start (--frontend NAME=URL): a
// webhook (http(s) URL) or an smpp frontend (smpp:// or smpps:// URL, its
// password in the URL).
type WebhookSpec struct {
	Name string
	URL  string
}

// Frontend is the frontend w registers (an smpp URL's password as its
// secret), or why its URL is not one.
func (w WebhookSpec) Frontend() (messages.Frontend, error) {
	fe := messages.Frontend{Name: w.Name, Mode: messages.ModeWebhook, URL: w.URL}
	if strings.HasPrefix(w.URL, "smpp://") || strings.HasPrefix(w.URL, "smpps://") {
		fe.Mode = messages.ModeSMPP
		var err error
		if fe, err = fe.Normalized(); err != nil {
			return fe, err
		}
		if err := fe.Validate(); err != nil {
			return fe, err
		}
		return fe, nil
	}
	return fe, messages.ValidWebhookURL(w.URL)
}

// Config is everything a Node needs. Start from DefaultConfig; New validates.
// Each field names the flag of `switchboard run` that sets it.
type Config struct {
	// Name is this controller's federation name (--name). Default: host name.
	Name string
	// InstanceID names this process among the instances of one site
	// (--instance-id). It owns the outbox leases this instance takes, so that
	// a restart takes them back at once. Default: host name.
	InstanceID string

	// Listen is the HTTPS address of the API and web UI (--listen).
	// Empty: no listener (an embedder can mount Node.Handler itself).
	Listen string
	// MetricsListen is the plain HTTP address of /metrics (--metrics-listen).
	// Empty: no metrics listener.
	MetricsListen string

	// SMPPListen is the address ESMEs bind to with SMPP v3.4
	// (--smpp-listen; docs/smpp.md, "Inbound"). Empty: no SMPP listener.
	SMPPListen string
	// SMPPTLS makes the SMPP listener speak TLS with the node's
	// certificate (--smpp-tls; that of --tls-cert, or the self-signed
	// one), reloaded as the HTTPS listener's is.
	SMPPTLS bool
	// SMPPWindow is how many of an ESME's requests may await their answer
	// on one session (--smpp-window 64: an ESME's usual window of 10 with
	// room for the parts of long messages, which wait for their last
	// part); one more is answered ESME_RTHROTTLED.
	SMPPWindow int

	// DataDir holds the embedded store and generated certificates (--data-dir).
	DataDir string
	// Postgres, when set, selects the Postgres store (--postgres DSN).
	Postgres string

	// TLSCert and TLSKey are PEM files (--tls-cert, --tls-key). Both empty: a
	// self-signed certificate is generated in DataDir.
	TLSCert, TLSKey string
	// TLSCA is a CA bundle for mutual TLS between peers (--tls-ca); webhook
	// calls trust it too, besides the system roots.
	TLSCA string

	// APIToken, when set, is required as a Bearer token on /api/* (--api-token).
	APIToken string

	// Who may do what (docs/api.md, "Roles"; docs/operations.md, "Credentials").

	// APITokenFile holds the API token instead of APIToken
	// (--api-token-file), so that it stays out of the process list; it is
	// read at start and again on Reload.
	APITokenFile string
	// Credentials is the credentials file (--credentials): named tokens with
	// roles, re-read on Reload (SIGHUP) and when it changes. Without it the
	// credentials are the store's (a site's shared store; the CLI's
	// `switchboard credentials` edits either).
	Credentials string
	// Redact masks numbers and drops message bodies in logs and the audit
	// trail (--redact off|on).
	Redact string
	// AuditRetention keeps the audit trail this long (--audit-retention
	// 8760h: a year, what telecom audits usually ask for); it is never
	// purged with messages. 0 keeps it forever.
	AuditRetention time.Duration
	// WatchInterval is how often the credentials (the file, or the
	// store's) and the TLS files are checked for changes (1s: a revocation
	// takes effect within a second everywhere; each check is a stat-sized
	// read or one small query).
	WatchInterval time.Duration

	// Routes and Webhooks are applied at start (--route, --frontend): the
	// flags win, and each stored entry they change (one the API changed
	// since, say) is logged at warn with both values; none is overwritten
	// in silence. They are stored, so they also survive without the flags.
	Routes   []RouteSpec
	Webhooks []WebhookSpec

	// DeliveryRetryMin and DeliveryRetryMax bound the delivery backoff
	// (--delivery-retry-min 1m, --delivery-retry-max 8m): the wait doubles
	// from min per attempt up to max, jittered into [wait/2, wait].
	DeliveryRetryMin, DeliveryRetryMax time.Duration
	// DeliveryMaxAttempts is how many delivery attempts a message gets before
	// it is failed (dead-lettered) (--delivery-max-attempts 5).
	DeliveryMaxAttempts int
	// MessageValidity is how long after acceptance an undelivered message is
	// failed with reason expired (--message-validity 24h).
	MessageValidity time.Duration
	// WebhookTimeout bounds one webhook POST (--webhook-timeout 10s); a
	// timeout is a retry.
	WebhookTimeout time.Duration
	// SMPPReconnectMin and SMPPReconnectMax bound the wait of an smpp
	// frontend before it dials its SMSC again after a failed dial or bind
	// or a lost link (--smpp-reconnect-min 1s, --smpp-reconnect-max 1m):
	// doubling from min per failure in a row up to max, up to half of each
	// wait taken off at random.
	SMPPReconnectMin, SMPPReconnectMax time.Duration
	// ShutdownTimeout bounds a graceful stop (--shutdown-timeout 30s): in-flight
	// requests and commits get this long before the node stops regardless.
	ShutdownTimeout time.Duration
	// MaxPendingSubmits is the admission bound of the intake: beyond it a
	// submit gets 429 with Retry-After instead of queueing without limit
	// (--max-pending-submits 10000).
	MaxPendingSubmits int

	// Retention keeps a delivered message this long after it was
	// delivered, then purges it with its history, outbox and ledger rows
	// (--retention 24h: SMS centres keep a delivered message for a day;
	// its record lives on in CDRFile). A client's id deduplicates its
	// submits for as long as the message is kept. 0 keeps them forever.
	Retention time.Duration
	// RetentionFailed does the same for failed and forward_failed
	// messages (--retention-failed 168h: a week for an operator to look at
	// the dead letters). A forwarded message whose peer never reports is
	// purged MessageValidity + RetentionFailed after it was forwarded (the
	// peer's validity ended its delivery long before). 0 keeps them forever.
	RetentionFailed time.Duration
	// CDRFile, when set, gets each message's final record (a JSON line)
	// before the message can be purged (--cdr-file); see docs/operations.md.
	CDRFile string
	// CDRRotateBytes rotates CDRFile when it would grow past this size
	// (--cdr-rotate-size 64MiB: a few hundred thousand records a file).
	CDRRotateBytes int64
	// MinFreeSpace is the free space kept on DataDir's file system
	// (--min-free-space 256MiB): below it new submits and forwards get
	// 507 storage_full, so that what is left lets outcomes, status reports
	// and the retention cleaner go on committing. A write that fails for
	// lack of space (the embedded store or Postgres) refuses new work for
	// a few seconds too. See package persistence/space.
	MinFreeSpace space.Reserve

	// NatsURL, when set, puts delivery on the NATS JetStream bus
	// (--nats-url; shared store only, see docs/nats.md): the outbox stays
	// the durable record and the ledger the exactly-once barrier.
	NatsURL string
	// NatsCreds is the NATS credentials file (--nats-creds).
	NatsCreds string
	// NatsStream is the bus's stream (--nats-stream); empty is
	// SWITCHBOARD_<Name> with the characters a stream name may not hold
	// replaced (bus.StreamName).
	NatsStream string

	// OTLPEndpoint is the OpenTelemetry collector's OTLP/HTTP base URL
	// (--otlp-endpoint): the registry's metrics and the messages' spans
	// are pushed there. Empty leaves it to the standard
	// OTEL_EXPORTER_OTLP_* variables; with none set nothing is pushed
	// and tracing costs nothing (docs/observability.md).
	OTLPEndpoint string
	// OTLPInterval, when not 0, is how often metrics are pushed and spans
	// sent in batches, instead of OTEL_METRIC_EXPORT_INTERVAL (60s) and
	// OTEL_BSP_SCHEDULE_DELAY (5s). Not a flag: for tests and embedders.
	OTLPInterval time.Duration
	// TraceURL is the web UI's link to a message's trace (--trace-url),
	// with {trace_id} replaced, e.g. https://jaeger.example/trace/{trace_id};
	// empty shows the trace id without a link.
	TraceURL string

	// Federation is the master switch (--federation): when false no peer is
	// discovered or contacted and the federation API refuses every caller.
	Federation bool
	// InsecureSkipVerify federates without verifying peers
	// (--insecure-skip-verify; development only, logged as a warning at
	// start and every hour). Federation needs it or --tls-ca.
	InsecureSkipVerify bool
	// Peers are static peer addresses host:port (--peers; port defaults to
	// 8443). Used when DNSSRV is empty.
	Peers []string
	// DNSSRV is the SRV name to discover peers by (--dns-srv).
	DNSSRV string
	// DNSServer is the DNS server host:port to ask (--dns-server); empty is
	// the system resolver.
	DNSServer string
	// DNSPollInterval is how often peers are re-resolved (--dns-poll-interval
	// 30s: a new data centre shows up within half a minute, and DNS is
	// asked twice a minute).
	DNSPollInterval time.Duration
	// HealthInterval is the health exchange with every known peer
	// (--health-interval 10s: unhealthy after three misses, ~30 s).
	HealthInterval time.Duration
	// RegistryInterval is the registry exchange with healthy peers
	// (--registry-interval 15s; a peer turning healthy is asked at once).
	RegistryInterval time.Duration
	// ForwardRetryInterval is the forward worker's tick
	// (--forward-retry-interval 5s).
	ForwardRetryInterval time.Duration
	// ForwardMaxRetries is how many ticks a message spends forward_queued
	// before it is forward_failed (--forward-max-retries 50, ~4 min).
	ForwardMaxRetries int
	// HTTPTimeout bounds every outbound peer call (--http-timeout 5s).
	HTTPTimeout time.Duration
	// APIPort is the port of an SRV target whose record says 0 (--api-port).
	APIPort int

	// Version is reported by /api/status.
	Version string

	// The ring of a multi-instance site (docs/ring.md).

	// RingRole is master, slave, index or auto (--ring-role auto). auto
	// elects the master by a Postgres advisory lock; with the embedded
	// store an instance is always its own master.
	RingRole string
	// RingMaster is the master's URL for a slave (--ring-master
	// https://host:port); empty reads the address the master published in
	// the shared store.
	RingMaster string
	// RingAddress is host:port where the other instances of the site reach
	// this one (--ring-address). Empty: the --listen address when it names
	// a host, else $POD_IP or the host name with the --listen port.
	RingAddress string
	// Cluster, Region and Zone place the instance (--cluster, --region,
	// --zone): a master admits only slaves of its own cluster and region;
	// the zone is shown in the ring status.
	Cluster, Region, Zone string
	// RingServices are the kinds of work this instance does
	// (--ring-services delivery,forward); a slave's must be a subset of its
	// master's.
	RingServices []string
	// RingPublishInterval is how often the master republishes the
	// assignment (--ring-publish-interval 30s); a member silent for two of
	// them loses its ranges.
	RingPublishInterval time.Duration
	// RingReconnectMaxAttempts is how many failed calls in a row a slave
	// makes to its master before it exits non-zero
	// (--ring-reconnect-max-attempts 10: with the backoff below about a
	// minute, longer than a master's failover).
	RingReconnectMaxAttempts int
	// RingReconnectBackoffMin/Max bound the wait between those calls
	// (--ring-reconnect-backoff-min 2s, --ring-reconnect-backoff-max 6s),
	// doubling from min; RingReconnectJitter takes up to that fraction off
	// each wait (--ring-reconnect-jitter 0.5) so slaves do not call in step.
	RingReconnectBackoffMin, RingReconnectBackoffMax time.Duration
	RingReconnectJitter                              float64

	// Embedding only (no flags).

	// Logger receives all logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the node's metrics; nil creates a fresh one
	// (see Node.Registry).
	Registry *prometheus.Registry
	// Store, when set, is used instead of opening one from DataDir/Postgres.
	// The node does not close a store it was given.
	Store persistence.Store
	// Clock drives every actor's time; nil is the wall clock.
	Clock clock.Clock
	// Transport, when set, carries every outbound peer call instead of the
	// HTTPS peer client (the sim harness's in-memory network). When it also
	// implements transport.Ring it carries the ring's calls too.
	Transport transport.Peer
	// Listener, when set, serves the HTTPS API (with the node's TLS, as
	// Listen would) on it instead of binding Listen; the node closes it
	// when it stops. The sim harness gives each node an in-memory one.
	Listener net.Listener
	// Dial, when set, opens every outbound connection of the node (peer
	// and ring calls, webhook deliveries) instead of a TCP dial; TLS runs
	// over what it returns. The sim harness dials its in-memory network.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Intercept, when set, wraps the HTTPS API's handler (the sim harness
	// injects request faults there: a request lost, run twice, or whose
	// answer is lost after it ran).
	Intercept func(http.Handler) http.Handler
	// Elector, when set, elects the ring master instead of the store (the
	// sim harness's instances share an embedded store, which cannot).
	Elector persistence.Elector
	// DeadLetterThrottle is how often the actor system logs dead letters
	// (messages to stopped actors); 0 is protoactor's default, 1s. The
	// throttle's goroutine lives that long after the last dead letter, so
	// harnesses that check for leaked goroutines after stopping nodes set
	// it small.
	DeadLetterThrottle time.Duration
}

// DefaultConfig returns the defaults of the contract.
func DefaultConfig() Config {
	host := defaultName()
	return Config{
		Name:                 host,
		InstanceID:           host,
		Listen:               ":8443",
		MetricsListen:        ":9568",
		SMPPWindow:           64,
		DataDir:              "./data",
		DeliveryRetryMin:     time.Minute,     // a frontend blip rarely lasts longer
		DeliveryRetryMax:     8 * time.Minute, // 5 attempts then span ~15 min
		DeliveryMaxAttempts:  5,
		MessageValidity:      24 * time.Hour, // SMS validity period convention
		WebhookTimeout:       10 * time.Second,
		SMPPReconnectMin:     time.Second,      // a restarted SMSC is back in seconds
		SMPPReconnectMax:     time.Minute,      // an SMSC down for long is not hammered
		ShutdownTimeout:      30 * time.Second, // inside Kubernetes' default grace period
		MaxPendingSubmits:    10000,            // ~ a second of peak ingest
		Retention:            24 * time.Hour,
		RetentionFailed:      7 * 24 * time.Hour,
		CDRRotateBytes:       64 << 20,
		MinFreeSpace:         space.Reserve{Bytes: 256 << 20}, // minutes of full-rate writes; the cleaner's deletes need WAL room
		Redact:               RedactOff,
		AuditRetention:       365 * 24 * time.Hour,
		WatchInterval:        time.Second,
		DNSPollInterval:      30 * time.Second,
		HealthInterval:       10 * time.Second,
		RegistryInterval:     15 * time.Second,
		ForwardRetryInterval: 5 * time.Second,
		ForwardMaxRetries:    50,
		HTTPTimeout:          5 * time.Second, // a peer slower than this is treated as down
		APIPort:              8443,
		Version:              "dev",

		RingRole:                 messages.RoleAuto,
		RingServices:             append([]string(nil), messages.AllServices...),
		RingPublishInterval:      30 * time.Second,
		RingReconnectMaxAttempts: 10,
		RingReconnectBackoffMin:  2 * time.Second,
		RingReconnectBackoffMax:  6 * time.Second,
		RingReconnectJitter:      0.5,
	}
}

// Validate reports every problem in c, each naming its flag.
func (c Config) Validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	if !messages.ValidName(c.Name) {
		bad("name", "%q is not a valid name (1-63 letters, digits, '.', '_', '-')", c.Name)
	}
	if !messages.ValidName(c.InstanceID) {
		bad("instance-id", "%q is not a valid name (1-63 letters, digits, '.', '_', '-')", c.InstanceID)
	}
	for flag, addr := range map[string]string{"listen": c.Listen, "metrics-listen": c.MetricsListen} {
		if addr == "" {
			continue
		}
		if err := checkHostPort(addr, true); err != nil {
			bad(flag, "%v", err)
		}
	}
	if c.Listen != "" && c.Listen == c.MetricsListen && !strings.HasSuffix(c.Listen, ":0") {
		bad("metrics-listen", "%q is --listen too; they need addresses of their own", c.MetricsListen)
	}
	if c.Store == nil && c.Postgres == "" && c.DataDir == "" {
		bad("data-dir", "must not be empty when --postgres is not set")
	}
	if c.Store == nil && c.Postgres != "" {
		pc := postgres.DefaultConfig()
		pc.DSN = c.Postgres
		if err := pc.Validate(); err != nil {
			// The parse error can quote the DSN, password included.
			bad("postgres", "does not parse as a connection string (key=value ...) or a postgres:// URL")
		}
	}
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		bad("tls-cert", "given without --tls-key; they must be given together")
	case c.TLSCert == "" && c.TLSKey != "":
		bad("tls-key", "given without --tls-cert; they must be given together")
	}
	prefixes := map[string]bool{}
	for _, r := range c.Routes {
		if prefixes[r.Prefix] {
			bad("route", "prefix %q given twice", r.Prefix)
		}
		prefixes[r.Prefix] = true
		if !messages.ValidPrefix(r.Prefix) {
			bad("route", "prefix %q must be 1-20 digits", r.Prefix)
		}
		if !messages.ValidName(r.Frontend) {
			bad("route", "frontend %q is not a valid name", r.Frontend)
		}
	}
	hooks := map[string]bool{}
	for _, w := range c.Webhooks {
		if hooks[w.Name] {
			bad("frontend", "name %q given twice", w.Name)
		}
		hooks[w.Name] = true
		if !messages.ValidName(w.Name) {
			bad("frontend", "name %q is not a valid name", w.Name)
		}
		if _, err := w.Frontend(); err != nil {
			bad("frontend", "%s: %v", w.Name, err)
		}
	}
	if c.DeliveryRetryMin <= 0 {
		bad("delivery-retry-min", "must be positive, got %v", c.DeliveryRetryMin)
	}
	if c.DeliveryRetryMax < c.DeliveryRetryMin {
		bad("delivery-retry-max", "must be at least --delivery-retry-min (%v), got %v", c.DeliveryRetryMin, c.DeliveryRetryMax)
	}
	if c.SMPPReconnectMin <= 0 {
		bad("smpp-reconnect-min", "must be positive, got %v", c.SMPPReconnectMin)
	}
	if c.SMPPReconnectMax < c.SMPPReconnectMin {
		bad("smpp-reconnect-max", "must be at least --smpp-reconnect-min (%v), got %v", c.SMPPReconnectMin, c.SMPPReconnectMax)
	}
	if c.DeliveryMaxAttempts < 1 {
		bad("delivery-max-attempts", "must be at least 1, got %d", c.DeliveryMaxAttempts)
	}
	if c.MessageValidity <= 0 {
		bad("message-validity", "must be positive, got %v", c.MessageValidity)
	}
	if c.WebhookTimeout <= 0 {
		bad("webhook-timeout", "must be positive, got %v", c.WebhookTimeout)
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown-timeout", "must be positive, got %v", c.ShutdownTimeout)
	}
	if c.MaxPendingSubmits < 1 {
		bad("max-pending-submits", "must be at least 1, got %d", c.MaxPendingSubmits)
	}
	errs = append(errs, c.validateRetention()...)
	errs = append(errs, c.validateAccess()...)
	errs = append(errs, c.validateFederation()...)
	errs = append(errs, c.validateRing()...)
	errs = append(errs, c.validateBus()...)
	errs = append(errs, c.validateTelemetry()...)
	errs = append(errs, c.validateSMPP()...)
	return errors.Join(errs...)
}

// RedeliveryHorizon is how long after a message was first queued for a
// peer its origin may still send it there: the forward retries of
// ForwardMaxRetries x ForwardRetryInterval, plus the last call's
// HTTPTimeout. A node keeps a message it received at least that long, so
// that a forward repeated because its answer was lost finds it (and is
// answered as a duplicate) instead of being accepted and delivered again.
func (c Config) RedeliveryHorizon() time.Duration {
	return time.Duration(c.ForwardMaxRetries)*c.ForwardRetryInterval + c.HTTPTimeout
}

// validateRetention checks the retention flags against the redelivery
// horizon of the forward flags.
func (c Config) validateRetention() []error {
	var errs []error
	horizon := c.RedeliveryHorizon()
	for flag, d := range map[string]time.Duration{"retention": c.Retention, "retention-failed": c.RetentionFailed} {
		switch {
		case d < 0:
			errs = append(errs, fmt.Errorf("--%s: must not be negative (0 keeps messages forever), got %v", flag, d))
		case d > 0 && d < horizon:
			errs = append(errs, fmt.Errorf("--%s: %v is shorter than a peer may still send a message again "+
				"(--forward-max-retries %d x --forward-retry-interval %v + --http-timeout %v = %v): "+
				"a forward repeated after its purge would be delivered twice", flag, d,
				c.ForwardMaxRetries, c.ForwardRetryInterval, c.HTTPTimeout, horizon))
		}
	}
	if c.MinFreeSpace.Bytes < 0 || c.MinFreeSpace.Percent < 0 || c.MinFreeSpace.Percent > 90 {
		errs = append(errs, fmt.Errorf("--min-free-space: must be a size or a percentage from 0%% to 90%%, got %s", c.MinFreeSpace))
	}
	if c.CDRRotateBytes <= 0 {
		errs = append(errs, fmt.Errorf("--cdr-rotate-size: must be positive, got %d", c.CDRRotateBytes))
	}
	return errs
}

// validateFederation checks the federation flags. Intervals are checked
// even with federation off, so a typo is caught before it matters.
func (c Config) validateFederation() []error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	for flag, d := range map[string]time.Duration{
		"dns-poll-interval": c.DNSPollInterval, "health-interval": c.HealthInterval,
		"registry-interval": c.RegistryInterval, "forward-retry-interval": c.ForwardRetryInterval,
		"http-timeout": c.HTTPTimeout,
	} {
		if d <= 0 {
			bad(flag, "must be positive, got %v", d)
		}
	}
	if c.ForwardMaxRetries < 1 {
		bad("forward-max-retries", "must be at least 1, got %d", c.ForwardMaxRetries)
	}
	if c.APIPort < 1 || c.APIPort > 65535 {
		bad("api-port", "must be 1-65535, got %d", c.APIPort)
	}
	for _, p := range c.Peers {
		if err := checkHostPort(p, false); err != nil {
			bad("peers", "%v", err)
		}
	}
	if c.DNSServer != "" {
		if err := checkHostPort(c.DNSServer, false); err != nil {
			bad("dns-server", "%v", err)
		}
	}
	if !c.Federation {
		return errs
	}
	switch {
	case c.DNSSRV != "" && len(c.Peers) > 0:
		bad("dns-srv", "give either --dns-srv or --peers, not both")
	case c.DNSSRV == "" && len(c.Peers) == 0:
		bad("peers", "federation needs --peers or --dns-srv")
	}
	switch {
	case c.TLSCA == "" && !c.InsecureSkipVerify && c.Transport == nil:
		bad("tls-ca", "federation needs a CA for mutual TLS (or --insecure-skip-verify, for development only)")
	case c.TLSCA != "" && c.TLSCert == "":
		bad("tls-ca", "federation with a CA needs --tls-cert and --tls-key signed by it (a self-signed certificate cannot be verified by peers)")
	}
	return errs
}

// checkHostPort reports why addr is not host:port: a host name or an IP
// address (for a listen address also empty: every interface) and a port
// from 1 to 65535 (for a listen address also 0: any free port).
func checkHostPort(addr string, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if !(listen && host == "") && !discovery.ValidHost(host) {
		return fmt.Errorf("%q: %q is not a host name or IP address", addr, host)
	}
	low := 1
	if listen {
		low = 0
	}
	if p, err := strconv.Atoi(port); err != nil || p < low || p > 65535 {
		return fmt.Errorf("%q: port %q is not a number from %d to 65535", addr, port, low)
	}
	return nil
}

// Preflight checks what Validate cannot without reading files: the TLS
// certificate and key load and match, the CA bundle holds certificates,
// and the data directory, when it exists, is a directory. The command
// runs it before anything opens, so that a bad file stops start-up with
// one line naming its flag (exit 2) instead of after the store was opened
// and migrated.
func (c Config) Preflight() error {
	var errs []error
	if c.TLSCert != "" {
		if _, err := certs.LoadKeyPair(c.TLSCert, c.TLSKey); err != nil {
			errs = append(errs, fmt.Errorf("--tls-cert: %v", err))
		}
	}
	if c.TLSCA != "" {
		if _, err := certs.LoadPool(c.TLSCA); err != nil {
			errs = append(errs, fmt.Errorf("--tls-ca: %v", err))
		}
	}
	errs = append(errs, c.preflightAccess()...)
	if c.Store == nil && c.Postgres == "" && c.DataDir != "" {
		if fi, err := os.Stat(c.DataDir); err == nil && !fi.IsDir() {
			errs = append(errs, fmt.Errorf("--data-dir: %s is a file, not a directory", c.DataDir))
		}
	}
	return errors.Join(errs...)
}

// ValidName reports whether s can name a node, instance or frontend (see
// messages.ValidName).
func ValidName(s string) bool { return messages.ValidName(s) }

// defaultName is the host name made into a valid name: its first label,
// with characters a name cannot hold replaced by '-' ("switchboard" when
// nothing usable is left). A Kubernetes pod name (ring-0) stays as it is.
func defaultName() string {
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	b := []byte(host)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			b[i] = '-'
		}
	}
	name := strings.TrimLeft(string(b), "-_")
	if len(name) > 63 {
		name = name[:63]
	}
	if !messages.ValidName(name) {
		return "switchboard"
	}
	return name
}
