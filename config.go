package switchboard

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/actors/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// RouteSpec is an initial route (--route PREFIX=FRONTEND).
type RouteSpec struct {
	Prefix   string
	Frontend string
}

// WebhookSpec is a webhook frontend registered at start (--frontend NAME=URL).
type WebhookSpec struct {
	Name string
	URL  string
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

	// Routes and Webhooks are applied at start (--route, --frontend); they
	// are stored, so they also survive without the flags.
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
	// ShutdownTimeout bounds a graceful stop (--shutdown-timeout 30s): in-flight
	// requests and commits get this long before the node stops regardless.
	ShutdownTimeout time.Duration
	// MaxPendingSubmits is the admission bound of the intake: beyond it a
	// submit gets 429 with Retry-After instead of queueing without limit
	// (--max-pending-submits 10000).
	MaxPendingSubmits int

	// Version is reported by /api/status.
	Version string

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
}

// DefaultConfig returns the defaults of the contract.
func DefaultConfig() Config {
	host := defaultName()
	return Config{
		Name:                host,
		InstanceID:          host,
		Listen:              ":8443",
		MetricsListen:       ":9568",
		DataDir:             "./data",
		DeliveryRetryMin:    time.Minute,     // a frontend blip rarely lasts longer
		DeliveryRetryMax:    8 * time.Minute, // 5 attempts then span ~15 min
		DeliveryMaxAttempts: 5,
		MessageValidity:     24 * time.Hour, // SMS validity period convention
		WebhookTimeout:      10 * time.Second,
		ShutdownTimeout:     30 * time.Second, // inside Kubernetes' default grace period
		MaxPendingSubmits:   10000,            // ~ a second of peak ingest
		Version:             "dev",
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
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad(flag, "%q is not host:port", addr)
		}
	}
	if c.Store == nil && c.Postgres == "" && c.DataDir == "" {
		bad("data-dir", "must not be empty when --postgres is not set")
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
		if err := messages.ValidWebhookURL(w.URL); err != nil {
			bad("frontend", "%s: %v", w.Name, err)
		}
	}
	if c.DeliveryRetryMin <= 0 {
		bad("delivery-retry-min", "must be positive, got %v", c.DeliveryRetryMin)
	}
	if c.DeliveryRetryMax < c.DeliveryRetryMin {
		bad("delivery-retry-max", "must be at least --delivery-retry-min (%v), got %v", c.DeliveryRetryMin, c.DeliveryRetryMax)
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
