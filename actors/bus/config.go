package bus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
	"github.com/switchboard-dev/switchboard/messages"
)

// Config is what the bus needs. Start from DefaultConfig.
type Config struct {
	// URL is the NATS server or servers, comma-separated.
	URL string
	// Creds is a NATS credentials file; empty: none.
	Creds string
	// TLSCA, TLSCert and TLSKey, when set, are used for a TLS server
	// (tls:// or wss://, the scheme in any case: usesTLS) and only then:
	// the node's own CA bundle (trusted beside the system roots),
	// certificate and key.
	TLSCA, TLSCert, TLSKey string
	// Stream is the JetStream stream (the node gives StreamName of its
	// site when none is configured). Its subjects are Stream.<frontend>.
	Stream string
	// Site is the site's name, recorded in the metadata of the stream the
	// bus makes (SiteMetadata): a stream another site's name is recorded
	// in is refused (ErrOtherSite). Empty: none recorded or checked.
	Site string
	// Storage is where the stream keeps its messages: "memory" (the
	// default) or "file". The outbox is the durable record either way; a
	// server that restarts loses a memory stream's messages, and the
	// instance that makes the stream again relays the site's undone work
	// again (docs/nats.md).
	Storage string
	// Name names this connection on the server (the instance id).
	Name   string
	Logger *slog.Logger

	// AckWait is how long a consumer waits for an ack before it hands a
	// message out again (30s: long enough for a webhook's timeout and the
	// commit after it; a worker touches what it holds every AckWait/3).
	AckWait time.Duration
	// MaxAckPending bounds the messages out at once per frontend, all
	// instances together (4096: a push frontend takes MaxInFlight, 32, per
	// instance, and a pull frontend's polls up to 1000 per claim; see
	// docs/nats.md for sizing).
	MaxAckPending int
	// MaxDeliver is JetStream's own limit of deliveries per message, a
	// backstop only: the node's delivery attempts are the limit, recorded
	// in the store (the dead letter) before the message is termed. A
	// message past MaxDeliver stays in the stream and raises an advisory;
	// its work stays in the outbox, where the message's validity ends it.
	MaxDeliver int
	// PublishTimeout bounds one publish round (5s): a row the stream did
	// not confirm within it is given back and published again by a later
	// round, with the same Nats-Msg-Id.
	PublishTimeout time.Duration
	// RelayBatch is the most rows one relay round publishes (256).
	RelayBatch int
	// RelaySweep is how often the relay looks for unrelayed work it was
	// not told of (1s): work other instances committed while the bus was
	// down, or left behind when they died. Its own commits kick it.
	RelaySweep time.Duration
	// DegradeAfter is how many publishes in a row the stream took none of
	// (with the connection up) make the bus degraded (3): not Up, so the
	// intake writes its work unrelayed and the workers claim from the
	// store, until a publish succeeds. One lost answer or one refused
	// batch is not enough; three, each given back to the outbox, say the
	// stream is not taking work, and the store path then delivers within
	// its idle poll instead of the backstop's 10 s.
	DegradeAfter int
	// CheckEvery is how often the bus checks its connection and its
	// stream, and reads its consumers' counts for the metrics (5s).
	CheckEvery time.Duration
}

// DefaultConfig returns the defaults (URL, Stream and Name left empty).
func DefaultConfig() Config {
	return Config{
		Storage:        StorageMemory,
		AckWait:        30 * time.Second,
		MaxAckPending:  4096,
		MaxDeliver:     1000,
		PublishTimeout: 5 * time.Second,
		RelayBatch:     256,
		RelaySweep:     time.Second,
		DegradeAfter:   3,
		CheckEvery:     5 * time.Second,
	}
}

// DuplicateWindow is the stream's duplicate window: the span within which
// a row published again (its first publish was taken, but its answer was
// lost: the relay gave the row back and a later round, after the relay's
// backoff of at most 5 s, publishes it again) is dropped as a copy. Two
// minutes, JetStream's own default, covers that many times over; a copy
// past it would be harmless anyway (the ledger and the row's lease are the
// barrier), only work.
func (c Config) DuplicateWindow() time.Duration { return 2 * time.Minute }

// validCreds reports why the file at path is no NATS user credentials
// file (a user JWT and a user NKey seed, as nsc writes them). One that
// is not was taken at start, and the bus stayed down for good with
// nothing but "not connected" to say why.
func validCreds(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	jwt, err := nkeys.ParseDecoratedJWT(data)
	if err == nil && (jwt == "" || jwt == string(data) || strings.ContainsAny(jwt, " \n")) {
		err = errors.New("no user JWT in it")
	}
	if err == nil {
		_, err = nkeys.ParseDecoratedUserNKey(data)
	}
	if err != nil {
		return fmt.Errorf("%s holds no NATS user credentials (a user JWT and its NKey seed, as nsc generate creds writes): %w", path, err)
	}
	return nil
}

// Validate reports every problem, each a *field.Error naming its field.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.URL) == "" {
		errs = append(errs, field.Errorf("URL", "must not be empty"))
	} else if err := ValidURL(c.URL); err != nil {
		errs = append(errs, field.Wrap("URL", err))
	}
	if c.Creds != "" {
		if err := validCreds(c.Creds); err != nil {
			errs = append(errs, field.Wrap("Creds", err))
		}
	}
	if _, err := storageType(c.Storage); err != nil {
		errs = append(errs, field.Wrap("Storage", err))
	}
	if err := ValidStream(c.Stream); err != nil {
		errs = append(errs, field.Wrap("Stream", err))
	}
	if c.AckWait <= 0 || c.MaxAckPending <= 0 || c.MaxDeliver <= 0 || c.PublishTimeout <= 0 ||
		c.RelayBatch <= 0 || c.RelaySweep <= 0 || c.DegradeAfter <= 0 || c.CheckEvery <= 0 {
		errs = append(errs, errors.New("bus: AckWait, MaxAckPending, MaxDeliver, PublishTimeout, RelayBatch, RelaySweep, DegradeAfter and CheckEvery must be positive"))
	}
	return errors.Join(errs...)
}

// ValidURL reports why u is not a list of NATS server URLs: comma-separated
// items, each [scheme://]host[:port] with scheme nats (the default, as the
// client takes it), tls, ws or wss, a host and, when given, a port from 1
// to 65535 (user info allowed, no path but "/"). It is checked before
// anything opens: the client would only refuse it when it dials, after the
// store was opened and migrated. An error names the item as RedactURL
// shows it: start-up errors are printed and logged.
func ValidURL(u string) error {
	n := 0
	ws := map[bool]bool{}
	for item := range strings.SplitSeq(u, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		n++
		shown := redactServer(item)
		p, err := url.Parse(serverURL(item))
		if err != nil {
			return fmt.Errorf("%q is not a URL: want nats://host:4222 (or tls://, ws://, wss://)", shown)
		}
		switch p.Scheme {
		case "nats", "tls":
			ws[false] = true
		case "ws", "wss":
			ws[true] = true
		default:
			return fmt.Errorf("%q: scheme %q is not nats, tls, ws or wss", shown, p.Scheme)
		}
		if p.Hostname() == "" {
			return fmt.Errorf("%q names no host", shown)
		}
		if port := p.Port(); port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("%q: port %q is not a number from 1 to 65535", shown, port)
			}
		}
		if (p.Path != "" && p.Path != "/") || p.RawQuery != "" || p.Fragment != "" {
			return fmt.Errorf("%q: a server URL has no path, query or fragment", shown)
		}
	}
	if n == 0 {
		return errors.New("names no server")
	}
	if len(ws) > 1 {
		return errors.New("mixes websocket (ws://, wss://) and plain (nats://, tls://) servers")
	}
	return nil
}

// usesTLS reports whether a server of u, a list as ValidURL takes it, is
// a TLS one: tls://, or a websocket over TLS (wss://), the scheme in any
// case, as the client takes it (it parses each URL, which lower-cases the
// scheme). A look for "tls://" alone left the CA and the client
// certificate off for TLS:// and wss://, and the server's certificate was
// checked against the system roots only (unknown authority).
func usesTLS(u string) bool {
	for item := range strings.SplitSeq(u, ",") {
		p, err := url.Parse(serverURL(strings.TrimSpace(item)))
		if err == nil && (p.Scheme == "tls" || p.Scheme == "wss") {
			return true
		}
	}
	return false
}

// serverURL is one server of a URL list as the client takes it: a bare
// host:port is nats://host:port.
func serverURL(item string) string {
	if !strings.Contains(item, "://") {
		return "nats://" + item
	}
	return item
}

// RedactURL is u, a list of servers as ValidURL takes it, as the node shows
// and logs it (GET /readyz, GET /api/status, log lines, start-up errors):
// each server's password replaced by messages.RedactedPassword, and so is
// a user without a password, which the client sends as the server's token.
// Each server is trimmed of blanks; a list without user info is returned
// as given.
func RedactURL(u string) string {
	items := strings.Split(u, ",")
	for i, item := range items {
		items[i] = redactServer(strings.TrimSpace(item))
	}
	return strings.Join(items, ",")
}

// redactSecrets is s, a client's error, with the secrets of u (a list
// of servers as RedactURL takes it) replaced as RedactURL replaces them,
// should the error quote a server's URL.
func redactSecrets(s, u string) string {
	for item := range strings.SplitSeq(u, ",") {
		p, err := url.Parse(serverURL(strings.TrimSpace(item)))
		if err != nil || p.User == nil {
			continue
		}
		secret, has := p.User.Password()
		if !has {
			secret = p.User.Username() // a token
		}
		if secret != "" {
			s = strings.ReplaceAll(s, secret, messages.RedactedPassword)
		}
	}
	return s
}

// redactServer is RedactURL of one server, in the form it was given (a
// bare host:port stays bare).
func redactServer(item string) string {
	full := serverURL(item)
	p, err := url.Parse(full)
	switch {
	case err != nil:
		// Without what could be its user info.
		return messages.RedactURL(item)
	case p.User == nil:
		return item
	}
	if _, has := p.User.Password(); has {
		full = messages.RedactURL(full)
	} else {
		p.User = url.User(messages.RedactedPassword) // a token
		full = p.String()
	}
	if !strings.Contains(item, "://") {
		full = strings.TrimPrefix(full, "nats://")
	}
	return full
}

// The stream's storage kinds (Config.Storage).
const (
	StorageMemory = "memory"
	StorageFile   = "file"
)

// storageType is JetStream's storage of a Config.Storage.
func storageType(s string) (jetstream.StorageType, error) {
	switch s {
	case StorageMemory:
		return jetstream.MemoryStorage, nil
	case StorageFile:
		return jetstream.FileStorage, nil
	}
	return 0, fmt.Errorf("%q is not a storage: want %s or %s", s, StorageMemory, StorageFile)
}

// StreamName is the default stream of a site: SWITCHBOARD_<name>, with
// each character a stream name may not hold ('.', '*', '>', '/', '\\',
// white space) replaced by '_'.
func StreamName(site string) string {
	return "SWITCHBOARD_" + strings.Map(func(r rune) rune {
		if badStreamRune(r) {
			return '_'
		}
		return r
	}, site)
}

// badStreamRune reports whether a stream name may not hold r.
func badStreamRune(r rune) bool { return strings.ContainsRune(".*>/\\", r) || r <= ' ' || r == 0x7f }

// ValidStream reports whether s may name a stream (and prefix subjects).
func ValidStream(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case len(s) > 200:
		return fmt.Errorf("%q is longer than 200 characters", s)
	case strings.IndexFunc(s, badStreamRune) >= 0:
		return fmt.Errorf("%q holds a character a stream name may not ('.', '*', '>', '/', '\\', white space)", s)
	}
	return nil
}

// Subject is the subject of a frontend's delivery work in stream:
// <stream>.<frontend>, the frontend as SubjectToken gives it.
func Subject(stream, frontend string) string { return stream + "." + SubjectToken(frontend) }

// SubjectToken is a frontend's part of its subject. A frontend name may
// hold '.', which splits a subject into tokens, and a name whose dots
// leave a token empty ("fe.", "a..b": names a node accepts) would make an
// invalid subject, on which every publish and fetch fails. Such a name
// (or any name with a character outside letters, digits, '_', '-' and
// dots between them) is one token: each byte outside letters, digits,
// '_' and '-' is written ~XX (hex), so "fe." is "fe~2E". No name a node
// accepts holds '~', so an escaped token is never another name's, and
// the escape is one to one. Every other name, dotted or not, keeps the
// subject it always had: a running site's stream holds messages on it.
func SubjectToken(frontend string) string {
	plain := frontend != ""
	for part := range strings.SplitSeq(frontend, ".") {
		if part == "" || strings.IndexFunc(part, func(r rune) bool { return !plainSubjectRune(r) }) >= 0 {
			plain = false
			break
		}
	}
	if plain {
		return frontend
	}
	var b strings.Builder
	for i := range len(frontend) {
		if c := frontend[i]; c < utf8.RuneSelf && plainSubjectRune(rune(c)) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "~%02X", c)
		}
	}
	return b.String()
}

// plainSubjectRune reports whether a subject token may hold r as it is.
func plainSubjectRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// ConsumerName is the durable consumer of a frontend, shared by every
// instance of the site. A frontend name may hold '.', which a consumer
// name may not: it is replaced, and a hash of the name keeps "a.b" and
// "a_b" apart.
func ConsumerName(frontend string) string {
	safe := strings.ReplaceAll(frontend, ".", "_")
	if safe == frontend {
		return "delivery_" + frontend
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(frontend))
	return fmt.Sprintf("delivery_%s_%08x", safe, h.Sum32())
}

// OwnConsumer refuses frontend name when its consumer (ConsumerName) is
// one of others' (name itself aside): "a.b" and "a_b_108bf50c" are both
// valid names and map to one consumer, whose filter the last worker to
// make it set, so each frontend's worker fetched the other's work and its
// own piled up unfetched (delivered by the backstop, late). Every way a
// frontend is registered asks it (the API's PUT, --frontend), whether the
// bus runs or not, so that a site can turn it on later.
func OwnConsumer(name string, others []string) error {
	c := ConsumerName(name)
	for _, other := range others {
		if other != name && ConsumerName(other) == c {
			return fmt.Errorf("frontend name %q would share its delivery bus consumer (%s) with frontend %q: choose another name", name, c, other)
		}
	}
	return nil
}

// options are the client's options: reconnect for good (a bus that is down
// is waited for, never given up, a server that refuses the credentials
// too: by default the client gives up after the same authorization error
// twice, and the bus stayed down after the server's users were put right),
// and the credentials and TLS given.
func (c Config) options(handlers ...nats.Option) []nats.Option {
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.IgnoreAuthErrorAbort(),
	}
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if usesTLS(c.URL) {
		// Only for a TLS server: a CA given for federation must not make
		// the client demand TLS of a plain nats:// server.
		if c.TLSCA != "" {
			opts = append(opts, rootCAs(c.TLSCA))
		}
		if c.TLSCert != "" && c.TLSKey != "" {
			opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
		}
	}
	return append(opts, handlers...)
}

// rootCAs is nats.RootCAs with the system roots beside file: the server
// may have a public CA's certificate (a hosted NATS) while --tls-ca is the
// federation's own CA (docs/nats.md). As nats.RootCAs, it reads file at
// each connect and refuses, at Open, one that holds no certificate.
func rootCAs(file string) nats.Option {
	return func(o *nats.Options) error {
		load := func() (*x509.CertPool, error) {
			tc, err := certs.ClientConfig("", "", file, false)
			if err != nil {
				return nil, err
			}
			return tc.RootCAs, nil
		}
		if _, err := load(); err != nil {
			return err
		}
		if o.TLSConfig == nil {
			o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		o.RootCAsCB, o.Secure = load, true
		return nil
	}
}
