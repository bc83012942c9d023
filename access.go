package switchboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/switchboard/atomicfile"
	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
)

// The node's credentials (docs/operations.md, "Credentials"): APIToken
// (or APITokenFile), one admin, plus the Credentials file or, without
// one, the store's credentials (a site on Postgres keeps them there, so one
// revocation reaches every instance). The gateway asks for the current Set
// on every call; the node replaces it when a source changes: on Reload
// (SIGHUP), and when a check every WatchInterval finds the file changed or
// the store's credentials different. A source that cannot be read, or a
// file that does not parse, keeps what it last gave (never fewer checks
// because of an error) and is logged, while the others are applied: a
// revocation never waits for another source to be fixed. A stored
// credential that is invalid is left out, loudly, but still makes a
// credential required.

// Values of Config.Redact.
const (
	RedactOff = "off"
	RedactOn  = "on"
)

// validateAccess checks the access settings.
func (c Config) validateAccess() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, field.Errorf(path, format, args...))
	}
	switch {
	case c.APIToken != "" && c.APITokenFile != "":
		bad("APITokenFile", "given with %s; give the token one way", field.Ref("APIToken"))
	case c.APIToken != "" && !auth.ValidToken(c.APIToken):
		// The rule of APITokenFile's token and the credentials' (the
		// token is not shown: it is a secret).
		bad("APIToken", "must be %s, got %d characters", auth.TokenRule, len(c.APIToken))
	}
	if c.Credentials != "" && c.Postgres != "" {
		bad("Credentials", "with %s the credentials live in the database, so that one revocation reaches every instance: "+
			"add them with 'switchboard credentials add --postgres DSN'", field.Ref("Postgres"))
	}
	if c.Redact != RedactOff && c.Redact != RedactOn {
		bad("Redact", "must be off or on, got %q", c.Redact)
	}
	if c.AuditRetention < 0 {
		bad("AuditRetention", "must not be negative (0 keeps the audit trail forever), got %v", c.AuditRetention)
	} else if c.AuditRetention > MaxKeep {
		bad("AuditRetention", "must be at most %s (0 keeps the audit trail forever), got %v", maxKeepText, c.AuditRetention)
	}
	if c.WatchInterval <= 0 {
		bad("WatchInterval", "must be positive, got %v", c.WatchInterval)
	}
	return errs
}

// preflightAccess reads the token file and the credentials file as the
// node will at start, so that a bad one stops start-up naming its field.
func (c Config) preflightAccess() []error {
	var errs []error
	if c.APITokenFile != "" {
		if _, err := readTokenFile(c.APITokenFile); err != nil {
			errs = append(errs, field.Wrap("APITokenFile", err))
		}
	}
	if c.Credentials != "" {
		if _, _, err := readCredentialsFile(c.Credentials); err != nil {
			errs = append(errs, field.Wrap("Credentials", err))
		}
	}
	return errs
}

// readTokenFile reads an API token: the file's one line.
func readTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(data))
	switch {
	case tok == "":
		return "", fmt.Errorf("%s is empty", path)
	case !auth.ValidToken(tok):
		return "", fmt.Errorf("%s: the token must be one line of %s", path, auth.TokenRule)
	}
	return tok, nil
}

// readCredentialsFile reads and parses the credentials file; sum is its
// content's hash (what the watch compares). A file that does not exist
// is refused: a typo in the flag must not run a node nobody can call.
func readCredentialsFile(path string) (auth.File, [32]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return auth.File{}, [32]byte{}, err
	}
	f, err := auth.ParseFile(data)
	if err != nil {
		return auth.File{}, [32]byte{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, sha256.Sum256(data), nil
}

// credentials is the node's httpapi.Credentials.
type credentials struct {
	n   *Node
	set atomic.Pointer[auth.Set]
	// token is the --api-token (or --api-token-file's) in force, "" when
	// none: a ring member sends it to its master (ringToken).
	token atomic.Pointer[string]

	mu sync.Mutex // one load at a time
	// sum is the hash of the token file and the credentials file as last
	// loaded without an error: the watch reloads when it changes.
	sum [32]byte
	// Each source's value as it last loaded: a source that cannot be
	// read keeps it, and the others are applied (a revocation in the
	// credentials file goes through while the token file is bad, and a
	// rotated token while the credentials file is).
	fileToken string                // --api-token-file's token
	listed    []messages.Credential // the credentials file's, or the store's valid ones
	storeRows bool                  // whether the store holds any credential row, valid or not
	// invalid is the store's invalid rows as last read, by their
	// problem: each is logged when first found, not at each read (every
	// WatchInterval).
	invalid map[string]bool
}

var _ httpapi.Credentials = (*credentials)(nil)

// Current implements httpapi.Credentials.
func (c *credentials) Current() *auth.Set { return c.set.Load() }

// sourcesSum hashes the files the credentials come from, a file that
// cannot be read by its error (so that it counts as changed when it
// comes back). The store's credentials are compared as a set instead.
func (c *credentials) sourcesSum() [32]byte {
	h := sha256.New()
	for _, path := range []string{c.n.cfg.APITokenFile, c.n.cfg.Credentials} {
		if path == "" {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			data = []byte("unreadable: " + err.Error())
		}
		h.Write(data)
		h.Write([]byte{0})
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// load reads every source and puts the new Set in force. why names what
// asked for it (start, reload, a change seen by the watch). A source that
// cannot be read, or does not parse, keeps its value as it last loaded
// and is reported in the error; the others are applied. At start there is
// no such value: an error stops it.
func (c *credentials) load(ctx context.Context, why string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.n.cfg
	sum := c.sourcesSum()
	var errs []error
	token := cfg.APIToken
	if cfg.APITokenFile != "" {
		if t, err := readTokenFile(cfg.APITokenFile); err != nil {
			errs = append(errs, field.Wrap("APITokenFile", err))
		} else {
			c.fileToken = t
		}
		token = c.fileToken
	}
	if cfg.Credentials != "" {
		if f, _, err := readCredentialsFile(cfg.Credentials); err != nil {
			errs = append(errs, field.Wrap("Credentials", err))
		} else {
			c.listed = f.Credentials
		}
	} else if rows, err := c.n.store.Credentials(ctx); err != nil {
		errs = append(errs, fmt.Errorf("the store's credentials: %w", err))
	} else {
		c.listed, c.storeRows = c.validStored(rows), len(rows) > 0
	}
	old := c.set.Load()
	if old == nil && len(errs) > 0 {
		return errors.Join(errs...)
	}
	// A credentials file requires a credential even when it holds none;
	// any stored row does too, valid or not: a node whose rows are all
	// invalid lets no one in (but --api-token), rather than everyone.
	required := token != "" || cfg.Credentials != "" || c.storeRows || len(cfg.SMPPAccounts) > 0
	// The flags' SMPP accounts first: one hides a listed credential of
	// its name (NewSet keeps the first).
	creds := make([]messages.Credential, 0, len(cfg.SMPPAccounts)+len(c.listed)+1)
	for _, a := range cfg.SMPPAccounts {
		creds = append(creds, a.credential())
	}
	creds = append(creds, c.listed...)
	if token != "" {
		creds = append(creds, httpapi.TokenCredential(token))
	}
	next := auth.NewSet(creds, required)
	if len(errs) == 0 {
		c.sum = sum
	}
	if c.n.api != nil {
		// Long-polls the new credentials do not let in end first: none is
		// given work once they are in force.
		c.n.api.ChangeCredentials(next, func() { c.set.Store(next) })
	} else {
		c.set.Store(next)
	}
	if c.n.smppIn != nil {
		// SMPP sessions bound as an account the new credentials no
		// longer let bind are unbound, as the API's calls stop.
		c.n.smppIn.CredentialsChanged(next)
	}
	c.token.Store(&token)
	c.report(old, next, why)
	return errors.Join(errs...)
}

// validStored is the store's credentials the node takes: checked by the
// store on the way in, a row an older or foreign writer left invalid is
// left out, loudly: logged when first found (c.mu held).
func (c *credentials) validStored(rows []messages.Credential) []messages.Credential {
	valid := make([]messages.Credential, 0, len(rows))
	invalid := map[string]bool{}
	for _, cr := range rows {
		if err := cr.Validate(); err != nil {
			why := err.Error()
			if !c.invalid[why] {
				c.n.log.Error("a stored credential is invalid and is ignored", "err", err)
			}
			invalid[why] = true
			continue
		}
		valid = append(valid, cr)
	}
	c.invalid = invalid
	return valid
}

// ringToken is the admin token this instance's ring calls carry to its
// master: a master without --tls-ca requires one (docs/ring.md).
func (c *credentials) ringToken() string {
	if t := c.token.Load(); t != nil {
		return *t
	}
	return ""
}

// report logs what changed, and records in the audit trail the changes of
// the credentials file and the rotations of the --api-token-file's token
// (a store's changes are recorded by whoever made them, in the
// transaction that made them). At start the file's changes are those
// since the node last recorded it (seen): made while it was stopped, or
// before its first start; the token file's are not known then.
func (c *credentials) report(old, next *auth.Set, why string) {
	log := c.n.log.With("component", "credentials")
	if old == nil {
		switch {
		case next.Open():
			log.Warn("no API token and no credentials: the API answers anyone who reaches it (" + c.openHint() + ")")
		default:
			log.Info("credentials loaded", "credentials", next.Len(), "source", c.source())
		}
		if c.n.cfg.Credentials == "" {
			return
		}
		old, why = c.seen(next), "start: changed while the node was stopped"
	} else if !old.Open() && next.Open() {
		log.Warn("the credentials are gone: the API now answers anyone who reaches it, as an admin ("+c.openHint()+")",
			"why", why, "source", c.source())
	}
	added, removed := old.Diff(next)
	if len(added) == 0 && len(removed) == 0 {
		return
	}
	log.Info("credentials changed", "why", why, "source", c.source(), "added", added, "removed", removed, "credentials", next.Len())
	now := c.n.clock.Now()
	var entries []messages.AuditEntry
	for _, list := range []struct {
		action string
		names  []string
	}{{messages.AuditCredentialRevoke, removed}, {messages.AuditCredentialAdd, added}} {
		for _, name := range list.names {
			actor, remote := "credentials-file", c.n.cfg.Credentials
			switch {
			case name == messages.ReservedCredential && c.n.cfg.APITokenFile != "":
				// A rotation of the token file's token (--api-token's
				// changes only with a restart).
				actor, remote = "api-token-file", c.n.cfg.APITokenFile
			case c.notOfTheFile(name) || c.n.cfg.Credentials == "":
				continue // --smpp-account, the store's: recorded by no one here
			}
			// The role of the credential added, or of the one revoked.
			from := next
			if list.action == messages.AuditCredentialRevoke {
				from = old
			}
			detail := ""
			if cr, ok := from.Credential(name); ok {
				detail = "role " + string(cr.Role)
			}
			entries = append(entries, messages.AuditEntry{At: now, Actor: actor, Remote: remote + " (" + why + ")",
				Action: list.action, Target: name, Detail: detail})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.n.audit(ctx, entries...)
	if c.n.cfg.Credentials != "" {
		c.remember(next)
	}
}

// seenFile, in DataDir, holds the credentials file's credentials as the
// node last recorded them (in the file's format, mode 0600), so that what
// the file gains or loses while the node is stopped is recorded at its
// next start. It is written after the records: a crash between the two
// records a change twice, never not at all. Without DataDir (an
// embedder's own store) there is none, and every credential of the file
// is recorded as added at each start.
const seenFile = "credentials-seen.json"

func (c *credentials) seenPath() string {
	if c.n.cfg.DataDir == "" {
		return ""
	}
	return filepath.Join(c.n.cfg.DataDir, seenFile)
}

// notOfTheFile reports whether the credential named name comes from the
// flags (--api-token, --smpp-account), not the credentials file: it is
// neither recorded in the audit trail as the file's nor kept in seenFile.
func (c *credentials) notOfTheFile(name string) bool {
	return name == messages.ReservedCredential ||
		slices.ContainsFunc(c.n.cfg.SMPPAccounts, func(a SMPPAccount) bool { return a.SystemID == name })
}

// seen is the credentials as the node last recorded them, with next's
// credentials of the flags (not the file's). None when it never did: each
// credential of the file is then recorded as added.
func (c *credentials) seen(next *auth.Set) *auth.Set {
	var creds []messages.Credential
	if path := c.seenPath(); path != "" {
		data, err := os.ReadFile(path)
		var f auth.File
		if err == nil {
			f, err = auth.ParseFile(data)
		}
		switch {
		case err == nil:
			creds = f.Credentials
		case !errors.Is(err, os.ErrNotExist):
			c.n.log.Warn("the credentials last recorded cannot be read: every credential of the file is recorded as added",
				"component", "credentials", "path", path, "err", err)
		}
	}
	creds = slices.DeleteFunc(creds, func(cr messages.Credential) bool { return c.notOfTheFile(cr.Name) })
	for _, name := range next.Names() {
		if cr, _ := next.Credential(name); c.notOfTheFile(name) {
			creds = append(creds, cr)
		}
	}
	return auth.NewSet(creds, true)
}

// remember writes next's credentials of the file to seenFile.
func (c *credentials) remember(next *auth.Set) {
	path := c.seenPath()
	if path == "" {
		return
	}
	var f auth.File
	for _, name := range next.Names() {
		if cr, _ := next.Credential(name); !c.notOfTheFile(name) {
			f.Credentials = append(f.Credentials, cr)
		}
	}
	if err := atomicfile.Write(path, f.Format(), 0o600); err != nil {
		c.n.log.Warn("the credentials recorded cannot be kept: those the file has now are recorded again at the next start",
			"component", "credentials", "path", path, "err", err)
	}
}

// openHint says what gives an open node credentials: the store's can be
// edited only on Postgres (switchboard credentials --postgres); the
// embedded store's only through the API, which needs one first.
func (c *credentials) openHint() string {
	if c.n.store != nil && c.n.store.Kind() == "postgres" {
		return "give --api-token or --credentials, or add one to the database: switchboard credentials add NAME --role admin --postgres DSN"
	}
	return "give --api-token, or a --credentials file: switchboard credentials add NAME --role admin --credentials FILE makes one"
}

func (c *credentials) source() string {
	if c.n.cfg.Credentials != "" {
		return c.n.cfg.Credentials
	}
	return "store"
}

// check is the watch's look at the sources: a file whose content changed,
// or the store's credentials (read every time: a query of a small table).
func (c *credentials) check(ctx context.Context) error {
	if c.n.cfg.Credentials == "" {
		return c.load(ctx, "store")
	}
	sum := c.sourcesSum()
	c.mu.Lock()
	same := bytes.Equal(sum[:], c.sum[:])
	c.mu.Unlock()
	if same {
		return nil
	}
	return c.load(ctx, "file changed")
}
