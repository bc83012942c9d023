package switchboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/actors/discovery"
	"github.com/switchboard-dev/switchboard/actors/forward"
	"github.com/switchboard-dev/switchboard/actors/retention"
	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/postgres"
	"github.com/switchboard-dev/switchboard/persistence/space"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
	"github.com/switchboard-dev/switchboard/smsc"
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

// SMPPAccount is an SMPP account of the flags (--smpp-account
// system_id=password).
type SMPPAccount struct {
	SystemID string
	Password string
}

// Config is everything a Node needs. Start from DefaultConfig, which holds
// every default with its reason; New validates. The command's run flags
// set the fields above "Embedding only" (`switchboard run -h` shows each
// one's default from here), and an error of Validate, New or Start that is
// about a field is a *field.Error naming it by its name here.
type Config struct {
	// Name is this controller's federation name.
	Name string
	// InstanceID names this process among the instances of one site. It
	// owns the outbox leases this instance takes, so that a restart takes
	// them back at once.
	InstanceID string

	// Listen is the HTTPS address of the API and web UI.
	// Empty: no listener (an embedder can mount Node.Handler itself; the
	// run command refuses it, and federation needs Listen or Listener).
	Listen string
	// MetricsListen is the plain HTTP address of /metrics.
	// Empty: no metrics listener.
	MetricsListen string

	// SMPPListen is the address ESMEs bind to with SMPP v3.4
	// (docs/smpp.md, "Inbound"). Empty: no SMPP listener.
	SMPPListen string
	// SMPPTLS makes the SMPP listener speak TLS with the node's
	// certificate (that of TLSCert, or the self-signed one), reloaded as
	// the HTTPS listener's is.
	SMPPTLS bool
	// SMPPWindow is how many of an ESME's requests may await their answer
	// on one session; one more is answered ESME_RTHROTTLED.
	SMPPWindow int
	// SMPPAccounts are SMPP accounts given at start (--smpp-account
	// system_id=password): held in memory beside the credentials, each a
	// client credential flagged smpp that binds as the stored ones do
	// (`switchboard credentials add NAME --smpp`); none is stored. One
	// hides a credential of the file or the store of the same name.
	SMPPAccounts []SMPPAccount

	// DataDir holds the embedded store and generated certificates.
	DataDir string
	// Postgres, when set, is the DSN of the Postgres store, used instead
	// of the embedded one.
	Postgres string

	// TLSCert and TLSKey are PEM files. Both empty: a self-signed
	// certificate is generated in DataDir.
	TLSCert, TLSKey string
	// TLSCA is a CA bundle for mutual TLS between peers; webhook calls
	// trust it too, besides the system roots.
	TLSCA string

	// APIToken, when set, is required as a Bearer token on /api/*.
	APIToken string

	// Who may do what (docs/api.md, "Roles"; docs/operations.md, "Credentials").

	// APITokenFile holds the API token instead of APIToken, so that it
	// stays out of the process list; it is read at start, again on
	// Reload, and when it changes (the watch, every WatchInterval).
	APITokenFile string
	// Credentials is the credentials file: named tokens with roles,
	// re-read on Reload (SIGHUP) and when it changes. Without it the
	// credentials are the store's (a site's shared store; the CLI's
	// `switchboard credentials` edits either).
	Credentials string
	// Redact (RedactOff or RedactOn) masks numbers and drops message
	// bodies in logs and the audit trail.
	Redact string
	// AuditRetention keeps the audit trail this long; it is never purged
	// with messages. 0 keeps it forever.
	AuditRetention time.Duration
	// WatchInterval is how often the credentials (the file, or the
	// store's) and the TLS files are checked for changes; each check is a
	// stat-sized read or one small query.
	WatchInterval time.Duration

	// Routes and Webhooks are applied at start: they win, and each stored
	// entry they change (one the API changed since, say) is logged at
	// warn with both values; none is overwritten in silence. Each entry
	// they write is in the audit trail (route.put, frontend.put, actor
	// "flags"), as the API's changes are. They are
	// stored, so they also survive without being given again. A webhook
	// whose delivery bus consumer would be another frontend's
	// (bus.OwnConsumer) is refused: by Validate beside another webhook,
	// by Start beside a stored frontend.
	Routes   []RouteSpec
	Webhooks []WebhookSpec

	// DeliveryRetryMin and DeliveryRetryMax bound the delivery backoff:
	// the wait doubles from min per attempt up to max, jittered into
	// [wait/2, wait].
	DeliveryRetryMin, DeliveryRetryMax time.Duration
	// DeliveryMaxAttempts is how many delivery attempts a message gets
	// before it is failed (dead-lettered).
	DeliveryMaxAttempts int
	// MessageValidity is how long after acceptance an undelivered message
	// is failed with reason expired.
	MessageValidity time.Duration
	// WebhookTimeout bounds one webhook POST, an in-process frontend's
	// reply, and an smpp frontend's submit (its dial and bind, its pacing
	// and each submit_sm_resp); a timeout is a retry.
	WebhookTimeout time.Duration
	// SMPPReconnectMin and SMPPReconnectMax bound the wait of an smpp
	// frontend before it dials its SMSC again after a failed dial or bind
	// or a lost link: doubling from min per failure in a row up to max,
	// up to half of each wait taken off at random.
	SMPPReconnectMin, SMPPReconnectMax time.Duration
	// SMPPReceiptWait, when not 0, is how long an smpp frontend holds a
	// receipt whose SMSC message id names no stored message yet (its
	// verdict not committed yet, here or on another instance) before it
	// counts it unknown, instead of 30 s (docs/smpp.md). Not a flag: for
	// tests and embedders.
	SMPPReceiptWait time.Duration
	// ShutdownTimeout bounds a graceful stop: in-flight requests and
	// commits get this long before the node stops regardless.
	ShutdownTimeout time.Duration
	// MaxPendingSubmits is the admission bound of the intake: beyond it a
	// submit gets 429 with Retry-After instead of queueing without limit.
	MaxPendingSubmits int

	// Retention keeps a delivered message this long after it was
	// delivered, then purges it with its history, outbox and ledger rows
	// (its record lives on in CDRFile). A client's id deduplicates its
	// submits for as long as the message is kept. 0 keeps them forever.
	// With Federation, it and RetentionFailed are at least
	// RedeliveryHorizon.
	Retention time.Duration
	// RetentionFailed does the same for failed and forward_failed
	// messages. A forwarded message whose peer never reports is purged
	// MessageValidity + RetentionFailed after it was forwarded (the
	// peer's validity ended its delivery long before). 0 keeps them forever.
	RetentionFailed time.Duration
	// CDRFile, when set, gets each message's final record (a JSON line)
	// before the message can be purged; see docs/operations.md.
	CDRFile string
	// CDRRotateBytes rotates CDRFile when it would grow past this size.
	CDRRotateBytes int64
	// MinFreeSpace is the free space kept on DataDir's file system: below
	// it new submits and forwards get 507 storage_full, so that what is
	// left lets outcomes, status reports and the retention cleaner go on
	// committing. A write that fails for lack of space (the embedded
	// store or Postgres) refuses new work for a few seconds too. See
	// package persistence/space.
	MinFreeSpace space.Reserve

	// NatsURL, when set, puts delivery on the NATS JetStream bus (shared
	// store only, see docs/nats.md): the outbox stays the durable record
	// and the ledger the exactly-once barrier.
	NatsURL string
	// NatsCreds is the NATS credentials file.
	NatsCreds string
	// NatsStream is the bus's stream; empty is SWITCHBOARD_<Name> with
	// the characters a stream name may not hold replaced (bus.StreamName),
	// the same for names that differ only in them: a stream whose
	// metadata names another site is not used (bus.ErrOtherSite,
	// docs/nats.md).
	NatsStream string
	// NatsStorage is where the bus's stream keeps its messages, "memory"
	// or "file"; empty is memory (bus.Config.Storage).
	NatsStorage string

	// OTLPEndpoint is the OpenTelemetry collector's OTLP/HTTP base URL:
	// the registry's metrics and the messages' spans are pushed there.
	// Empty leaves it to the standard OTEL_EXPORTER_OTLP_* variables;
	// with none set nothing is pushed and tracing costs nothing
	// (docs/observability.md).
	OTLPEndpoint string
	// OTLPInterval, when not 0, is how often metrics are pushed and spans
	// sent in batches, instead of OTEL_METRIC_EXPORT_INTERVAL (60s) and
	// OTEL_BSP_SCHEDULE_DELAY (5s). Not a flag: for tests and embedders.
	OTLPInterval time.Duration
	// TraceURL is the web UI's link to a message's trace, with {trace_id}
	// replaced, e.g. https://jaeger.example/trace/{trace_id}; empty shows
	// the trace id without a link.
	TraceURL string

	// Federation is the master switch: when false no peer is discovered
	// or contacted and the federation API refuses every caller.
	Federation bool
	// InsecureSkipVerify federates without verifying peers (development
	// only, logged as a warning at start and every hour). Federation
	// needs it or TLSCA.
	InsecureSkipVerify bool
	// Peers are static peer addresses host:port. With federation on, the
	// peers come from Peers or from DNSSRV: Validate refuses both.
	Peers []string
	// DNSSRV is the SRV name to discover peers by.
	DNSSRV string
	// DNSServer is the DNS server host:port to ask; empty is the system
	// resolver.
	DNSServer string
	// DNSPollInterval is how often peers are re-resolved.
	DNSPollInterval time.Duration
	// HealthInterval is the period of the health exchange with every
	// known peer; a peer that missed three is unhealthy.
	HealthInterval time.Duration
	// RegistryInterval is the period of the registry exchange with
	// healthy peers (a peer turning healthy is asked at once).
	RegistryInterval time.Duration
	// ForwardRetryInterval is the forward worker's tick.
	ForwardRetryInterval time.Duration
	// ForwardMaxRetries is how many ticks a message spends forward_queued
	// before it is forward_failed.
	ForwardMaxRetries int
	// HTTPTimeout bounds every outbound HTTP request to a peer; a batch of
	// forwards or reports split into several requests gives each its
	// own, and the whole call at most forward.CallTimeout (twice it).
	HTTPTimeout time.Duration
	// APIPort is the port of an SRV target whose record says 0.
	APIPort int

	// Version is reported by /api/status.
	Version string

	// The ring of a multi-instance site (docs/ring.md).

	// RingRole is master, slave, index or auto. auto elects the master
	// by a Postgres advisory lock; with the embedded store an instance is
	// always its own master.
	RingRole string
	// RingMaster is the master's URL for a slave (https://host:port);
	// empty reads the address the master published in the shared store.
	RingMaster string
	// RingAddress is host:port where the other instances of the site
	// reach this one. Empty: the Listen address when it names a host,
	// else $POD_IP or the host name with the Listen port.
	RingAddress string
	// Cluster, Region and Zone place the instance: a master admits only
	// slaves of its own cluster and region; the zone is shown in the ring
	// status.
	Cluster, Region, Zone string
	// RingServices are the kinds of work this instance does
	// (messages.AllServices); a slave's must be a subset of its master's.
	RingServices []string
	// RingPublishInterval is how often the master republishes the
	// assignment; a member silent for two of them loses its ranges.
	RingPublishInterval time.Duration
	// RingReconnectMaxAttempts is how many failed calls in a row a slave
	// makes to its master before it exits non-zero.
	RingReconnectMaxAttempts int
	// RingReconnectBackoffMin/Max bound the wait between those calls,
	// doubling from min; RingReconnectJitter takes up to that fraction off
	// each wait so slaves do not call in step (ring.Reconnect).
	RingReconnectBackoffMin, RingReconnectBackoffMax time.Duration
	RingReconnectJitter                              float64

	// Embedding only (no flags).

	// Logger receives all logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the node's metrics; nil creates a fresh one
	// (see Node.Registry). The node unregisters its collectors from a
	// registry given here when it stops or its Start fails.
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
	// Listen would) on it instead of binding Listen. The node owns it
	// from Start on: it closes it when it stops, and when Start fails,
	// wherever it failed (a Start after Stop, refused, included). The sim
	// harness gives each node an in-memory one.
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

// DefaultConfig returns the defaults, each with its reason. A default that
// a sub-package's own configuration holds is taken from there.
func DefaultConfig() Config {
	host := defaultName()
	fwd := forward.DefaultPolicy()
	disc := discovery.DefaultConfig()
	reconnect := ring.DefaultReconnect()
	return Config{
		// The host name (made a valid name): a restart on the same host is
		// the same instance and takes its leases back at once.
		Name:       host,
		InstanceID: host,

		// Every interface, on the port peers assume (discovery.DefaultAPIPort).
		Listen: net.JoinHostPort("", strconv.Itoa(discovery.DefaultAPIPort)),
		// Every interface, on a port of its own: /metrics is plain HTTP
		// and served apart from the API.
		MetricsListen: ":9568",
		SMPPWindow:    smsc.DefaultConfig().Window,
		// Beside the working directory.
		DataDir: "./data",

		Redact: RedactOff,
		// A year: what telecom audits usually ask for.
		AuditRetention: 365 * 24 * time.Hour,
		// A second: a revocation takes effect within a second everywhere.
		WatchInterval: time.Second,

		// A minute: a frontend blip rarely lasts longer.
		DeliveryRetryMin: time.Minute,
		// 8 minutes: the 5 attempts below then span about 15 minutes.
		DeliveryRetryMax:    8 * time.Minute,
		DeliveryMaxAttempts: 5,
		// 24 hours: the SMS validity period convention.
		MessageValidity: 24 * time.Hour,
		// 10 seconds: a webhook that has not answered by then is retried
		// rather than waited for.
		WebhookTimeout: 10 * time.Second,
		// A second: a restarted SMSC is back in seconds.
		SMPPReconnectMin: time.Second,
		// A minute: an SMSC down for long is not hammered.
		SMPPReconnectMax: time.Minute,
		// 30 seconds: inside Kubernetes' default grace period.
		ShutdownTimeout: 30 * time.Second,
		// About a second of peak ingest.
		MaxPendingSubmits: 10000,

		// A day: SMS centres keep a delivered message for a day.
		Retention: 24 * time.Hour,
		// A week for an operator to look at the dead letters.
		RetentionFailed: 7 * 24 * time.Hour,
		// 64 MiB: a few hundred thousand records a file.
		CDRRotateBytes: 64 << 20,
		// 256 MiB: minutes of full-rate writes; the cleaner's deletes need
		// WAL room.
		MinFreeSpace: space.Reserve{Bytes: 256 << 20},

		DNSPollInterval: disc.PollInterval,
		// 10 seconds: a peer that missed three is unhealthy after ~30 s.
		HealthInterval: 10 * time.Second,
		// 15 seconds: a registry change reaches the peers within that
		// (a peer turning healthy is asked at once).
		RegistryInterval:     15 * time.Second,
		ForwardRetryInterval: fwd.RetryInterval,
		ForwardMaxRetries:    fwd.MaxRetries,
		HTTPTimeout:          httpapi.DefaultPeerClientConfig().Timeout,
		APIPort:              disc.APIPort,
		Version:              "dev",

		// auto: one configuration for every instance of a site.
		RingRole:     messages.RoleAuto,
		RingServices: append([]string(nil), messages.AllServices...),
		// 30 seconds: a member silent for a minute loses its ranges.
		RingPublishInterval:      30 * time.Second,
		RingReconnectMaxAttempts: reconnect.MaxAttempts,
		RingReconnectBackoffMin:  reconnect.Min,
		RingReconnectBackoffMax:  reconnect.Max,
		RingReconnectJitter:      reconnect.Jitter,
	}
}

// Validate reports every problem in c, each a *field.Error naming its
// field (a command names its flags instead with field.Rename). The
// problems are joined with errors.Join, one line each.
func (c Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, field.Errorf(path, format, args...))
	}
	if !messages.ValidName(c.Name) {
		bad("Name", "%q is not a valid name (1-63 letters, digits, '.', '_', '-')", c.Name)
	}
	if !messages.ValidName(c.InstanceID) {
		bad("InstanceID", "%q is not a valid name (1-63 letters, digits, '.', '_', '-')", c.InstanceID)
	}
	for _, l := range []struct{ path, addr string }{{"Listen", c.Listen}, {"MetricsListen", c.MetricsListen}} {
		if l.addr == "" {
			continue
		}
		if err := checkHostPort(l.addr, true); err != nil {
			bad(l.path, "%v", err)
		}
	}
	if c.Listen != "" && c.Listen == c.MetricsListen && !strings.HasSuffix(c.Listen, ":0") {
		bad("MetricsListen", "%q is %s too; they need addresses of their own", c.MetricsListen, field.Ref("Listen"))
	}
	if c.Store == nil && c.Postgres == "" && c.DataDir == "" {
		bad("DataDir", "must not be empty when %s is not set", field.Ref("Postgres"))
	}
	if c.Store == nil && c.Postgres == "" && strings.Contains(c.DataDir, "?") {
		// The embedded store refused it only as it opened, after the
		// listeners (exit 1, restarted over and over): its driver reads
		// what follows a '?' as its own parameters.
		bad("DataDir", "%q holds a '?', which the embedded store's path may not", c.DataDir)
	}
	if c.Store == nil && c.Postgres != "" {
		pc := postgres.DefaultConfig()
		pc.DSN = c.Postgres
		if err := pc.Validate(); err != nil {
			// The parse error can quote the DSN, password included.
			bad("Postgres", "does not parse as a connection string (key=value ...) or a postgres:// URL")
		}
	}
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		bad("TLSCert", "given without %s; they must be given together", field.Ref("TLSKey"))
	case c.TLSCert == "" && c.TLSKey != "":
		bad("TLSKey", "given without %s; they must be given together", field.Ref("TLSCert"))
	}
	prefixes := map[string]bool{}
	for _, r := range c.Routes {
		if prefixes[r.Prefix] {
			bad("Routes", "prefix %q given twice", r.Prefix)
		}
		prefixes[r.Prefix] = true
		if !messages.ValidPrefix(r.Prefix) {
			bad("Routes", "prefix %q must be 1-20 digits", r.Prefix)
		}
		if !messages.ValidName(r.Frontend) {
			bad("Routes", "frontend %q is not a valid name", r.Frontend)
		}
	}
	hooks := map[string]bool{}
	var hookNames []string
	for _, w := range c.Webhooks {
		if hooks[w.Name] {
			bad("Webhooks", "name %q given twice", w.Name)
		} else if err := bus.OwnConsumer(w.Name, hookNames); err != nil {
			bad("Webhooks", "%v", err) // as PUT /api/frontends refuses it
		}
		hooks[w.Name] = true
		hookNames = append(hookNames, w.Name)
		if !messages.ValidName(w.Name) {
			bad("Webhooks", "name %q is not a valid name", w.Name)
		}
		if _, err := w.Frontend(); err != nil {
			bad("Webhooks", "%s: %v", w.Name, err)
		}
	}
	if c.DeliveryRetryMin <= 0 {
		bad("DeliveryRetryMin", "must be positive, got %v", c.DeliveryRetryMin)
	}
	if c.DeliveryRetryMax < c.DeliveryRetryMin {
		bad("DeliveryRetryMax", "must be at least %s (%v), got %v", field.Ref("DeliveryRetryMin"), c.DeliveryRetryMin, c.DeliveryRetryMax)
	}
	if c.SMPPReconnectMin <= 0 {
		bad("SMPPReconnectMin", "must be positive, got %v", c.SMPPReconnectMin)
	}
	if c.SMPPReconnectMax < c.SMPPReconnectMin {
		bad("SMPPReconnectMax", "must be at least %s (%v), got %v", field.Ref("SMPPReconnectMin"), c.SMPPReconnectMin, c.SMPPReconnectMax)
	}
	if c.DeliveryMaxAttempts < 1 {
		bad("DeliveryMaxAttempts", "must be at least 1, got %d", c.DeliveryMaxAttempts)
	}
	if c.MessageValidity <= 0 {
		bad("MessageValidity", "must be positive, got %v", c.MessageValidity)
	} else if c.MessageValidity > MaxKeep {
		bad("MessageValidity", "must be at most %s, got %v", maxKeepText, c.MessageValidity)
	}
	if c.WebhookTimeout <= 0 {
		bad("WebhookTimeout", "must be positive, got %v", c.WebhookTimeout)
	}
	if c.ShutdownTimeout <= 0 {
		bad("ShutdownTimeout", "must be positive, got %v", c.ShutdownTimeout)
	}
	if c.MaxPendingSubmits < 1 {
		bad("MaxPendingSubmits", "must be at least 1, got %d", c.MaxPendingSubmits)
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

// RedeliveryHorizon is how long after its origin first sent a message to
// a peer it may still send it there: the first call's bound (a message is
// queued for its peer when that call fails, at most that late), the
// forward retries of ForwardMaxRetries x ForwardRetryInterval after it,
// and the last call's bound. A call's bound is forward.CallTimeout, twice
// HTTPTimeout (a batch split into several requests, each bounded by
// HTTPTimeout: the message may be in the last). A federating node keeps a
// message it received at least that long (Validate refuses a shorter
// Retention or RetentionFailed with Federation), so that a forward repeated because its answer was lost
// finds it (and is answered as a duplicate) instead of being accepted and
// delivered again. It is this node's flags: the peers of a federation are
// expected to run the same forward settings (docs/operations.md).
//
// It never wraps: past a time.Duration's range it is the longest duration.
// Validate keeps the forward wait within forward.MaxWaitLimit and
// HTTPTimeout within MaxHTTPTimeout, so a valid Config's horizon is exact.
func (c Config) RedeliveryHorizon() time.Duration {
	wait, ok := forward.TotalWait(c.ForwardMaxRetries, c.ForwardRetryInterval)
	if !ok && wait != 0 {
		return math.MaxInt64
	}
	if c.HTTPTimeout > math.MaxInt64/2 {
		return math.MaxInt64
	}
	call := forward.CallTimeout(c.HTTPTimeout)
	h := wait
	for range 2 {
		if call > 0 && h > math.MaxInt64-call {
			return math.MaxInt64
		}
		h += call
	}
	return h
}

// MaxHTTPTimeout is the longest HTTPTimeout Validate takes: a day, far
// past any peer call worth waiting for, so that the redelivery horizon
// it adds to cannot overflow.
const MaxHTTPTimeout = 24 * time.Hour

// forwardWaitErrs checks that ForwardMaxRetries x ForwardRetryInterval
// (how long a message may wait forward_queued) is a duration and at most
// forward.MaxWaitLimit: a product that wrapped (2147483647 x 5s is
// negative, 3689348815 x 5s is 1.29s) failed queued messages at once and
// passed the retention check.
func (c Config) forwardWaitErrs() []error {
	if c.ForwardMaxRetries < 1 || c.ForwardRetryInterval <= 0 {
		return nil // refused as not positive
	}
	if c.ForwardRetryInterval > forward.MaxWaitLimit {
		return []error{field.Errorf("ForwardRetryInterval", "%v is longer than %s, the most a message may wait forward_queued",
			c.ForwardRetryInterval, forward.MaxWaitLimitText)}
	}
	if w, ok := forward.TotalWait(c.ForwardMaxRetries, c.ForwardRetryInterval); !ok || w > forward.MaxWaitLimit {
		return []error{field.Errorf("ForwardMaxRetries", "%d x %s %v is longer than %s, the most a message may wait forward_queued",
			c.ForwardMaxRetries, field.Ref("ForwardRetryInterval"), c.ForwardRetryInterval, forward.MaxWaitLimitText)}
	}
	return nil
}

// MaxKeep is the longest MessageValidity and retention: a forwarded
// message is kept MessageValidity + RetentionFailed, a sum that must
// stay a duration (two longer ones wrapped to a negative one).
const (
	MaxKeep     = 100 * 365 * 24 * time.Hour
	maxKeepText = "100 years"
)

// validateRetention checks the retention settings against the redelivery
// horizon of the forward settings, on a federating node: one without
// Federation has no peer to send a message again (its federation API
// refuses every caller), so any retention is its own.
func (c Config) validateRetention() []error {
	var errs []error
	horizon := c.RedeliveryHorizon()
	// A horizon out of range is refused as such (forwardWaitErrs,
	// HTTPTimeout's bound); compared with it, every retention would be
	// refused for a reason that is not the retention's.
	horizonOK := len(c.forwardWaitErrs()) == 0 && c.HTTPTimeout <= MaxHTTPTimeout
	for _, r := range []struct {
		path string
		d    time.Duration
	}{{"Retention", c.Retention}, {"RetentionFailed", c.RetentionFailed}} {
		switch {
		case r.d < 0:
			errs = append(errs, field.Errorf(r.path, "must not be negative (0 keeps messages forever), got %v", r.d))
		case r.d > MaxKeep:
			errs = append(errs, field.Errorf(r.path, "must be at most %s (0 keeps messages forever), got %v", maxKeepText, r.d))
		case r.d > 0 && c.Federation && horizonOK && r.d < horizon:
			errs = append(errs, field.Errorf(r.path, "%v is shorter than a peer may still send a message again "+
				"(%s %d x %s %v + 4 x %s %v = %v): a forward repeated after its purge would be delivered twice", r.d,
				field.Ref("ForwardMaxRetries"), c.ForwardMaxRetries, field.Ref("ForwardRetryInterval"), c.ForwardRetryInterval,
				field.Ref("HTTPTimeout"), c.HTTPTimeout, horizon))
		}
	}
	if c.MinFreeSpace.Bytes < 0 || !(c.MinFreeSpace.Percent >= 0 && c.MinFreeSpace.Percent <= 90) { // NaN is neither
		errs = append(errs, field.Errorf("MinFreeSpace", "must be a size or a percentage from 0%% to 90%%, got %s", c.MinFreeSpace))
	}
	if c.CDRRotateBytes <= 0 {
		errs = append(errs, field.Errorf("CDRRotateBytes", "must be positive, got %d", c.CDRRotateBytes))
	}
	return errs
}

// validateFederation checks the federation settings. Intervals are
// checked even with federation off, so a typo is caught before it matters.
func (c Config) validateFederation() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, field.Errorf(path, format, args...))
	}
	for _, d := range []struct {
		path string
		v    time.Duration
	}{
		{"DNSPollInterval", c.DNSPollInterval}, {"HealthInterval", c.HealthInterval},
		{"RegistryInterval", c.RegistryInterval}, {"ForwardRetryInterval", c.ForwardRetryInterval},
		{"HTTPTimeout", c.HTTPTimeout},
	} {
		if d.v <= 0 {
			bad(d.path, "must be positive, got %v", d.v)
		}
	}
	if c.ForwardMaxRetries < 1 {
		bad("ForwardMaxRetries", "must be at least 1, got %d", c.ForwardMaxRetries)
	}
	errs = append(errs, c.forwardWaitErrs()...)
	if c.HTTPTimeout > MaxHTTPTimeout {
		bad("HTTPTimeout", "must be at most %v, got %v", MaxHTTPTimeout, c.HTTPTimeout)
	}
	if c.APIPort < 1 || c.APIPort > 65535 {
		bad("APIPort", "must be 1-65535, got %d", c.APIPort)
	}
	for _, p := range c.Peers {
		if err := checkHostPort(p, false); err != nil {
			bad("Peers", "%v", err)
		}
	}
	if c.DNSServer != "" {
		if err := checkHostPort(c.DNSServer, false); err != nil {
			bad("DNSServer", "%v", err)
		}
	}
	if c.DNSSRV != "" {
		if err := discovery.SRVNameError(c.DNSSRV); err != nil {
			bad("DNSSRV", "%v", err)
		}
	}
	if !c.Federation {
		return errs
	}
	if c.Listen == "" && c.Listener == nil {
		// Peers reach a node only there: with no listener it would call
		// them but never be called (forwards to it, health, registry).
		bad("Listen", "federation needs an address peers reach this node at (empty: no listener)")
	}
	noPeers := c.DNSSRV == "" && len(c.Peers) == 0
	noCA := c.TLSCA == "" && !c.InsecureSkipVerify && c.Transport == nil
	if noPeers && noCA {
		// Federation switched on alone: one line saying what it lacks,
		// rather than one a flag.
		bad("Federation", "needs %s or %s, and %s (a CA for mutual TLS; or %s, for development only)",
			field.Ref("Peers"), field.Ref("DNSSRV"), field.Ref("TLSCA"), field.Ref("InsecureSkipVerify"))
		return errs
	}
	switch {
	case c.DNSSRV != "" && len(c.Peers) > 0:
		bad("DNSSRV", "give either %s or %s, not both", field.Ref("DNSSRV"), field.Ref("Peers"))
	case noPeers:
		bad("Peers", "federation needs %s or %s", field.Ref("Peers"), field.Ref("DNSSRV"))
	}
	switch {
	case noCA:
		bad("TLSCA", "federation needs a CA for mutual TLS (or %s, for development only)", field.Ref("InsecureSkipVerify"))
	case c.TLSCA != "" && c.TLSCert == "":
		bad("TLSCA", "federation with a CA needs %s and %s signed by it (a self-signed certificate cannot be verified by peers)",
			field.Ref("TLSCert"), field.Ref("TLSKey"))
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
// certificate and key load and match (and, with a CA bundle, the
// certificate names the node), the CA bundle holds certificates,
// the data directory is a directory the node can write in or can make
// (it is not made here: see preflightDataDir), and the call
// records file is a file, or missing in a directory that exists. The command
// runs it before anything opens, so that a bad file stops start-up with
// one line naming its flag (exit 2) instead of after the store was opened
// and migrated.
func (c Config) Preflight() error {
	var errs []error
	if c.TLSCert != "" {
		pair, err := certs.LoadKeyPair(c.TLSCert, c.TLSKey)
		if err == nil && c.TLSCA != "" {
			// With a CA, peers hold the certificate to the node's name.
			err = certs.MustName(c.TLSCert, pair.Leaf, c.Name)
		}
		if err != nil {
			errs = append(errs, field.Wrap("TLSCert", err))
		}
	}
	if c.TLSCA != "" {
		if _, err := certs.LoadPool(c.TLSCA); err != nil {
			errs = append(errs, field.Wrap("TLSCA", err))
		}
	}
	errs = append(errs, c.preflightAccess()...)
	// The data directory holds the embedded store and the self-signed
	// certificate.
	if c.DataDir != "" && (c.Store == nil && c.Postgres == "" || c.TLSCert == "") {
		use := dataDirUse{holds: certs.SelfSignedCertName, room: certRoom} // the self-signed certificate alone
		if c.Store == nil && c.Postgres == "" {
			use = dataDirUse{holds: "switchboard.db", room: newDataDirRoom, writes: true}
		}
		if err := preflightDataDir(c.DataDir, use); err != nil {
			errs = append(errs, field.Wrap("DataDir", err))
		}
	}
	if c.CDRFile != "" {
		errs = append(errs, c.preflightCDRFile()...)
	}
	return errors.Join(errs...)
}

// dataDirUse is what the node keeps in its data directory: the file whose
// presence says it has started there before (holds), and the free space
// its first start needs there (room).
type dataDirUse struct {
	holds string
	room  uint64
	// writes: the node writes holds (the store), not only reads it.
	writes bool
}

// preflightDataDir checks that dir is a directory the node can write in,
// or, when it does not exist yet, that the node can make it: its nearest
// existing ancestor is a directory it can write in. It makes nothing that
// stays (a directory made and removed at once is the probe, as truthful
// for root, a read-only mount or /proc as for anyone), so that a start
// refused for another flag leaves no data directory behind; the node makes
// it as it starts.
//
// A full file system is no reason to refuse a data directory the node has
// used (it holds use.holds): the node serves what it holds and refuses new
// work with 507 until space comes back (a restart on a full disk must not
// stop for good, exit 2 being no reason to restart). One still to be made,
// or made but not used yet (systemd's StateDirectory, a volume mounted
// empty), has nothing to serve, and the node could not write its first
// files there: it failed at start (exit 1, the certificate's or the
// store's write, restarted over and over), so it is refused here, naming
// the cause, unless its file system has use.room free.
func preflightDataDir(dir string, use dataDirUse) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("%s is a file, not a directory", dir)
	case err == nil:
		err := probeWritable(dir)
		if err != nil && !noRoom(err) {
			return fmt.Errorf("%s is not writable: %w", dir, err)
		}
		if _, serr := os.Stat(filepath.Join(dir, use.holds)); serr == nil {
			if !use.writes {
				return nil
			}
			// A store restored or copied by another user (root, whose
			// backup is its own, mode 0600) failed at start with SQLite's
			// "unable to open database file": exit 1, restarted over and over.
			// Its lock too (sqlite.LockSuffix), there once a node ran: one
			// left by a node run as root, mode 0600, stopped the node's own
			// user at every start.
			for _, f := range []string{use.holds, use.holds + sqlite.LockSuffix} {
				path := filepath.Join(dir, f)
				if _, serr := os.Stat(path); serr != nil {
					continue
				}
				if err := openWritable(path); err != nil {
					return fmt.Errorf("%s cannot be opened for writing: %w (the node's user must own it; a restored store too)", path, err)
				}
			}
			return nil
		}
		return roomFor(fmt.Sprintf("cannot start in %s, which holds no %s yet", dir, use.holds), dir, use.room, err)
	case !statMissing(err):
		return err
	}
	parent := filepath.Dir(dir)
	for {
		fi, err := os.Stat(parent)
		switch {
		case err == nil && !fi.IsDir():
			return fmt.Errorf("cannot make %s: %s is a file, not a directory", dir, parent)
		case err == nil:
			err := probeWritable(parent)
			if err != nil && !noRoom(err) {
				return fmt.Errorf("cannot make %s in %s: %w", dir, parent, err)
			}
			return roomFor(fmt.Sprintf("cannot make %s in %s", dir, parent), parent, use.room, err)
		case !statMissing(err):
			return fmt.Errorf("cannot make %s: %w", dir, err)
		}
		next := filepath.Dir(parent)
		if next == parent {
			return fmt.Errorf("cannot make %s: %w", dir, err)
		}
		parent = next
	}
}

// roomFor refuses a data directory the node has not used yet (what, the
// refusal's start) when the probe of at (the directory, or the parent it
// is to be made in) found no room (probed: the probe's error) or at's
// file system has less than room free.
func roomFor(what, at string, room uint64, probed error) error {
	if probed != nil {
		return fmt.Errorf("%s: %w", what, probed)
	}
	if free, _, err := space.Usage(at); err == nil && free < room {
		return fmt.Errorf("%s: its file system has %d bytes free, the node's first start needs %s", what, free, space.FormatSize(int64(room)))
	}
	return nil
}

// newDataDirRoom is the free space the embedded store's first start needs
// in its data directory (see preflightDataDir): a new store (160 KiB once
// migrated) and the self-signed certificate (1 KiB), with room for the
// store's first writes: 1 MiB. certRoom is what the certificate alone
// needs (a Postgres node without --tls-cert): 64 KiB.
const (
	newDataDirRoom = 1 << 20
	certRoom       = 64 << 10
)

// statMissing reports whether err of a stat says the path is not there: it
// does not exist, or a part of it is not a directory.
func statMissing(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// noRoom reports whether err says the file system is full (or the user's
// quota used up): writable, but not now.
func noRoom(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// probeWritable makes a directory in dir and removes it: whether the node
// can make its files and directories there.
func probeWritable(dir string) error {
	probe, err := os.MkdirTemp(dir, ".switchboard-probe-")
	if err != nil {
		return withoutPath(err)
	}
	return os.Remove(probe)
}

// preflightCDRFile checks that the call records file can be what the
// cleaner opens at start: a file (made when missing) in a directory that
// exists and the node can write, none of the files the node keeps in its data directory (they
// may not be there yet), and, when there, one that holds call records
// (retention.CheckRecordFile).
func (c Config) preflightCDRFile() []error {
	path, dir := c.CDRFile, filepath.Dir(c.CDRFile)
	for _, own := range c.dataDirFiles() {
		if samePath(path, own) {
			return []error{field.Errorf("CDRFile", "%s is the node's own %s: call records need a file of their own", path, own)}
		}
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return []error{field.Errorf("CDRFile", "%s is a directory, not a file", path)}
		}
		if err := retention.CheckRecordFile(path); err != nil {
			return []error{field.Wrap("CDRFile", err)}
		}
		if err := openWritable(path); err != nil {
			return []error{field.Errorf("CDRFile", "%s: %w", path, err)}
		}
	} else {
		fi, err := os.Stat(dir)
		switch {
		case err != nil:
			return []error{field.Errorf("CDRFile", "the directory of %s: %w", path, err)}
		case !fi.IsDir():
			return []error{field.Errorf("CDRFile", "the directory of %s, %s, is not a directory", path, dir)}
		}
	}
	// The node makes the file there at start, after the store: one it
	// cannot make stopped it then (exit 1, the store made and migrated,
	// restarted over and over by systemd). A file there already is renamed
	// aside there at its first rotation, and made again after logrotate
	// moved it: in a directory the node cannot write (systemd's
	// ReadWritePaths= naming the file alone) it ran until then, days maybe,
	// and from then on purged nothing. A full file system still makes an
	// empty file.
	if err := probeWritable(dir); err != nil && !noRoom(err) {
		return []error{field.Errorf("CDRFile", "the directory of %s, %s, is not writable: %w", path, dir, err)}
	}
	return nil
}

// openWritable opens the file at path for writing, as the node will, and
// closes it: whether the node's user may write it (a file made or restored
// by root, say, it may not).
func openWritable(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return withoutPath(err)
	}
	return f.Close()
}

// withoutPath is err without the path an *os.PathError names: the path
// is the caller's to say.
func withoutPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// dataDirFiles are the files the node keeps in its data directory: the
// embedded store's (its database and the files SQLite keeps beside it)
// and the self-signed certificate's.
func (c Config) dataDirFiles() []string {
	if c.DataDir == "" {
		return nil
	}
	var names []string
	if c.Store == nil && c.Postgres == "" {
		names = append(names, "switchboard.db", "switchboard.db-wal", "switchboard.db-shm", "switchboard.db-journal", "switchboard.db"+sqlite.LockSuffix)
	}
	if c.TLSCert == "" {
		names = append(names, certs.SelfSignedCertName, certs.SelfSignedKeyName)
	}
	for i, n := range names {
		names[i] = filepath.Join(c.DataDir, n)
	}
	return names
}

// samePath reports whether a and b name one file: the same file when both
// are there (a link to it too), else the same path once their directories'
// links are resolved.
func samePath(a, b string) bool {
	if fa, err := os.Stat(a); err == nil {
		fb, err := os.Stat(b)
		return err == nil && os.SameFile(fa, fb)
	}
	return resolved(a) == resolved(b)
}

// resolved is path made absolute, its directory's links resolved when the
// directory is there.
func resolved(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
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
