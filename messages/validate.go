package messages

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	prefixRE = regexp.MustCompile(`^[0-9]{1,20}$`)
	msisdnRE = regexp.MustCompile(`^\+?[0-9]{1,20}$`)
	idRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
)

// Limits of message fields.
const (
	// MaxSourceLen allows alphanumeric sender ids and long numbers.
	MaxSourceLen = 32
	// MaxBodyLen bounds a message body in bytes; the 1 MiB request limit is
	// the outer bound, this one keeps rows reasonable (a long concatenated
	// SMS is well under 64 KiB).
	MaxBodyLen = 64 << 10
)

// ValidName reports whether s can name a node, instance or frontend: 1-63
// letters, digits, '.', '_' or '-', starting with a letter or digit.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// ValidPrefix reports whether s is a route prefix: 1-20 digits.
func ValidPrefix(s string) bool { return prefixRE.MatchString(s) }

// ValidID reports whether s can be a client-chosen message id: 1-128 of
// letters, digits, '.', '_', ':' or '-', starting with a letter or digit
// (ids appear in URL paths).
func ValidID(s string) bool { return idRE.MatchString(s) }

// RoutingDigits returns the digits a destination is routed by (without a
// leading '+'), or false when dest is not 1-20 digits.
func RoutingDigits(dest string) (string, bool) {
	if !msisdnRE.MatchString(dest) {
		return "", false
	}
	return strings.TrimPrefix(dest, "+"), true
}

// SearchableSource reports whether a search of its own value finds a
// message with source s. The stores compare a source without its leading
// '+' with the search's key, NumberKey, which also drops the blanks around
// it: a source with a blank at either end (" Bank", "ACME "), or right
// after its '+' ("+ 5", whose key " 5" is not a key), or nothing but '+',
// would be stored as given and never found.
func SearchableSource(s string) bool {
	key := NumberKey(s)
	return key != "" && strings.TrimLeft(s, "+") == key && NumberKey(key) == key
}

// ValidWebhookURL reports why u cannot be a webhook frontend's URL: not
// http(s), no host, a port not from 1 to 65535. Its
// password, or its user without a password, may not be RedactedPassword:
// that is what the API shows in its place, and a URL read back from the
// API and put again would overwrite the real one with it.
func ValidWebhookURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", RedactURL(u))
	}
	// url.Parse takes any digits for a port: 0 and 99999 would be stored,
	// and every call to the frontend fail ("invalid port").
	if port := p.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %s is not from 1 to 65535", RedactURL(u), port)
		}
	}
	if pw, ok := p.User.Password(); ok && pw == RedactedPassword {
		return fmt.Errorf("the password %q is what the API shows in place of the real one: give the real password", RedactedPassword)
	}
	if _, ok := p.User.Password(); !ok && p.User != nil && p.User.Username() == RedactedPassword {
		return fmt.Errorf("the user %q is what the API shows in place of the real one: give the real user (an API key)", RedactedPassword)
	}
	return nil
}

// RedactedPassword stands for a URL's password wherever the node shows or
// records the URL (url.URL.Redacted's placeholder).
const RedactedPassword = "xxxxx"

// RedactURL is raw with its password, if it has one, replaced by
// RedactedPassword: the form of a frontend's URL in every API answer,
// audit record and log line. An http(s) URL's user without a password is
// replaced too: that is where a service's API key goes (basic auth with
// the key as the user), as the delivery bus takes a NATS URL's user for a
// token; so is the user of a URL without a scheme ("//KEY@host/login", a
// redirect's Location relative to the webhook's scheme). Other URLs
// without a password are returned as given (an smpp
// frontend's user is its system_id); one that does not parse is returned
// without what could be its userinfo.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if at := strings.LastIndex(raw, "@"); at >= 0 {
			return RedactedPassword + "@" + raw[at+1:]
		}
		return raw
	}
	if _, has := u.User.Password(); has {
		return u.Redacted()
	}
	if u.User != nil && (u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "") {
		u.User = url.User(RedactedPassword)
		return u.String()
	}
	return raw
}

// Validate reports the first problem of a submission as an invalid_request
// *Error naming the field. Its times are checked against each other here
// and against the clock by Options.CheckTimes, at acceptance.
func (s Submission) Validate() error { return s.validate(true) }

// validate is Validate; searchable asks for a source a search finds
// (SearchableSource). A forward's message was accepted by its origin, and
// one of a version before that rule may hold such a source: it is taken as
// it is, not failed at its peer in a rolling upgrade.
func (s Submission) validate(searchable bool) error {
	switch {
	case s.ID != "" && !ValidID(s.ID):
		return Errorf(CodeInvalidRequest, "id %q: 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", s.ID)
	case s.SourceMSISDN == "":
		return Errorf(CodeInvalidRequest, "source_msisdn is required")
	case len(s.SourceMSISDN) > MaxSourceLen || !utf8.ValidString(s.SourceMSISDN) || strings.ContainsFunc(s.SourceMSISDN, unicode.IsControl):
		return Errorf(CodeInvalidRequest, "source_msisdn must be at most %d printable characters", MaxSourceLen)
	case searchable && !SearchableSource(s.SourceMSISDN):
		return Errorf(CodeInvalidRequest, "source_msisdn %q: no blank at either end or after a leading '+' (a search for it would never find it)", s.SourceMSISDN)
	case s.DestinationMSISDN == "":
		return Errorf(CodeInvalidRequest, "destination_msisdn is required")
	case !msisdnRE.MatchString(s.DestinationMSISDN):
		return Errorf(CodeInvalidRequest, "destination_msisdn %q must be 1-20 digits with an optional leading '+'", s.DestinationMSISDN)
	}
	if err := s.validateBody(s.Body); err != nil {
		return err
	}
	if err := s.validateClass(); err != nil {
		return err
	}
	return s.validateTimes()
}

// Validate reports what is wrong with a frontend registration.
func (f Frontend) Validate() error {
	switch {
	case !ValidName(f.Name):
		return Errorf(CodeInvalidRequest, "frontend name %q: 1-63 letters, digits, '.', '_' or '-'", f.Name)
	case !f.Mode.Valid():
		return Errorf(CodeInvalidRequest, "mode %q: must be pull, webhook or smpp", f.Mode)
	case f.Mode == ModeWebhook:
		if err := ValidWebhookURL(f.URL); err != nil {
			return Errorf(CodeInvalidRequest, "url: %v", err)
		}
	case f.Mode == ModeSMPP:
		return f.validateSMPP()
	case f.URL != "":
		return Errorf(CodeInvalidRequest, "url is only for webhook and smpp frontends")
	}
	switch {
	case f.Secret == "":
	case f.Mode != ModeWebhook:
		return Errorf(CodeInvalidRequest, "secret is only for webhook frontends (it signs the node's calls)")
	case len(f.Secret) < MinWebhookSecret || len(f.Secret) > MaxWebhookSecret || strings.ContainsFunc(f.Secret, func(r rune) bool { return r <= ' ' || r > '~' }):
		return Errorf(CodeInvalidRequest, "secret: %d-%d printable ASCII characters without blanks (e.g. 32 random bytes in hex)", MinWebhookSecret, MaxWebhookSecret)
	}
	return nil
}

// Bounds of a webhook secret: at least 16 characters (a guessable secret
// signs nothing), at most 256.
const (
	MinWebhookSecret = 16
	MaxWebhookSecret = 256
)
