package messages

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SMPPBind is how an smpp frontend binds to its SMSC.
type SMPPBind string

// Bind types of an smpp frontend: a transmitter only submits; a
// transceiver also receives the SMSC's delivery receipts on the same
// connection.
const (
	BindTransmitter SMPPBind = "transmitter"
	BindTransceiver SMPPBind = "transceiver"
)

// SMPPLong is how an smpp frontend sends a text too long for one SMS.
type SMPPLong string

// Long-message methods: parts behind a concatenation header (UDH), or the
// whole text in one submit_sm's message_payload.
const (
	LongUDH     SMPPLong = "udh"
	LongPayload SMPPLong = "payload"
)

// SMPPOptions are an smpp frontend's settings, read from its URL
// (docs/smpp.md): smpp://system_id[:password]@host:port?option=value&...
// (smpps://, or tls=true, over TLS). The password is kept as the
// frontend's Secret.
type SMPPOptions struct {
	SystemID string
	Addr     string // host:port
	TLS      bool
	// TLSCA, when set, is a PEM file of the CAs that sign the SMSC's
	// certificate (else the system's roots).
	TLSCA      string
	Bind       SMPPBind
	SystemType string
	// Window is the most submit_sm outstanding on the connection, and the
	// most of the SMSC's requests (its receipts) awaiting their answer.
	Window int
	// Rate is the frontend's submits per second, shared by the site's
	// instances (0: unlimited).
	Rate float64
	// Receipts asks the SMSC for a receipt of each message's final outcome
	// (registered_delivery 1).
	Receipts bool
	Long     SMPPLong
	// SourceTON/NPI and DestTON/NPI, when set (>= 0), override the ones
	// the frontend derives from the numbers.
	SourceTON, SourceNPI, DestTON, DestNPI int
	// EnquireLink is the keepalive interval.
	EnquireLink time.Duration
}

// The bounds of an smpp frontend's settings.
const (
	MaxSMPPSystemID   = 15 // octets, SMPP v3.4 5.2.1
	MaxSMPPPassword   = 8
	MaxSMPPSystemType = 12
	MaxSMPPWindow     = 1000
	DefaultSMPPWindow = 10
	// DefaultSMPPEnquireLink is 30 s: common SMSC practice, inside the
	// idle timeouts of firewalls and NATs.
	DefaultSMPPEnquireLink = 30 * time.Second
)

var smppParams = []string{"bind", "system_type", "window", "rate", "tps", "receipts", "long", "source_ton", "source_npi",
	"dest_ton", "dest_npi", "enquire_link", "tls", "tls_ca"}

// ParseSMPPURL reads an smpp frontend's URL (without its password: see
// Frontend.Normalized) and reports every problem of it. CONTRACT.md's
// names are taken too: tps is rate (both given, they must agree), and
// tls=true is smpps:// (tls=false with smpps:// is a contradiction).
func ParseSMPPURL(raw string) (SMPPOptions, error) {
	o := SMPPOptions{Bind: BindTransceiver, Window: DefaultSMPPWindow, Receipts: true, Long: LongUDH,
		SourceTON: -1, SourceNPI: -1, DestTON: -1, DestNPI: -1, EnquireLink: DefaultSMPPEnquireLink}
	u, err := url.Parse(raw)
	if err != nil {
		return o, fmt.Errorf("%q is not a URL", RedactURL(raw)) // its password kept out
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch u.Scheme {
	case "smpp":
	case "smpps":
		o.TLS = true
	default:
		bad("scheme %q: must be smpp or smpps", u.Scheme)
	}
	if u.User != nil {
		o.SystemID = u.User.Username()
		if _, has := u.User.Password(); has {
			bad("the password goes in the frontend's secret, not in its stored URL")
		}
	}
	switch {
	case o.SystemID == "":
		bad("system_id (the URL's user) is required")
	case len(o.SystemID) > MaxSMPPSystemID || !smppPrintable(o.SystemID):
		bad("system_id %q: 1-%d printable ASCII characters", o.SystemID, MaxSMPPSystemID)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		bad("host:port %q: a host and a port are required (SMSCs listen on 2775 or 3550 as a rule)", u.Host)
	}
	o.Addr = u.Host
	if u.Path != "" && u.Path != "/" {
		bad("path %q: an smpp URL has none", u.Path)
	}
	q := u.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(smppParams, k) {
			bad("unknown option %q (options: %s)", k, strings.Join(smppParams, ", "))
		} else if len(q[k]) > 1 {
			bad("option %q given %d times", k, len(q[k]))
		}
	}
	get := func(k string) (string, bool) { v, ok := q[k]; return strings.Join(v, ""), ok }
	if v, ok := get("bind"); ok {
		o.Bind = SMPPBind(v)
		if o.Bind != BindTransmitter && o.Bind != BindTransceiver {
			bad("bind %q: transmitter or transceiver", v)
		}
	}
	if v, ok := get("system_type"); ok {
		o.SystemType = v
		if len(v) > MaxSMPPSystemType || !smppPrintable(v) {
			bad("system_type %q: at most %d printable ASCII characters", v, MaxSMPPSystemType)
		}
	}
	if v, ok := get("window"); ok {
		n, err := strconv.Atoi(v)
		o.Window = n
		if err != nil || n < 1 || n > MaxSMPPWindow {
			bad("window %q: 1-%d submit_sm outstanding", v, MaxSMPPWindow)
		}
	}
	rate, hasRate := get("rate")
	if hasRate {
		r, err := strconv.ParseFloat(rate, 64)
		o.Rate = r
		if err != nil || r < 0 || r > 1e6 || r != r {
			bad("rate %q: submits per second, 0 (unlimited) to 1000000", rate)
		}
	}
	if v, ok := get("tps"); ok {
		r, err := strconv.ParseFloat(v, 64)
		switch {
		case err != nil || r < 0 || r > 1e6 || r != r:
			bad("tps %q: submits per second (the rate's other name), 0 (unlimited) to 1000000", v)
		case hasRate && r != o.Rate:
			bad("tps and rate: one setting under two names, given %q and %q", v, rate)
		}
		o.Rate = r
	}
	if v, ok := get("receipts"); ok {
		b, err := strconv.ParseBool(v)
		o.Receipts = b
		if err != nil {
			bad("receipts %q: true or false", v)
		}
	}
	if v, ok := get("long"); ok {
		o.Long = SMPPLong(v)
		if o.Long != LongUDH && o.Long != LongPayload {
			bad("long %q: udh or payload", v)
		}
	}
	for _, f := range []struct {
		k string
		p *int
	}{{"source_ton", &o.SourceTON}, {"source_npi", &o.SourceNPI}, {"dest_ton", &o.DestTON}, {"dest_npi", &o.DestNPI}} {
		if v, ok := get(f.k); ok {
			n, err := strconv.Atoi(v)
			*f.p = n
			if err != nil || n < 0 || n > 255 {
				bad("%s %q: 0-255", f.k, v)
			}
		}
	}
	if v, ok := get("enquire_link"); ok {
		d, err := time.ParseDuration(v)
		o.EnquireLink = d
		if err != nil || d < time.Second || d > time.Hour {
			bad("enquire_link %q: a duration from 1s to 1h", v)
		}
	}
	if v, ok := get("tls"); ok {
		switch {
		case v == "true":
			o.TLS = true
		case v != "false":
			bad("tls %q: true or false", v)
		case o.TLS:
			bad("smpps:// and tls=false: one says TLS, the other not")
		}
	}
	if v, ok := get("tls_ca"); ok {
		o.TLSCA = v
		if !o.TLS || v == "" {
			bad("tls_ca: a PEM file's path, with TLS only (smpps:// or tls=true)")
		}
	}
	if o.Bind == BindTransmitter && o.Receipts {
		if _, asked := get("receipts"); asked {
			bad("receipts: a transmitter bind receives no receipts (bind=transceiver)")
		}
		o.Receipts = false
	}
	return o, errors.Join(errs...)
}

// smppPrintable reports whether s is printable ASCII (a C-Octet string's
// characters as SMSCs accept them).
func smppPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Normalized is f as it is stored: an smpp frontend's password, given in
// its URL (smpp://id:password@...), moves to its Secret. A URL that is
// not one is left for Validate to refuse.
func (f Frontend) Normalized() (Frontend, error) {
	if f.Mode != ModeSMPP {
		return f, nil
	}
	u, err := url.Parse(f.URL)
	if err != nil || u.User == nil {
		return f, nil
	}
	pw, has := u.User.Password()
	if !has {
		return f, nil
	}
	if f.Secret != "" {
		return f, Errorf(CodeInvalidRequest, "url: a password in the URL and a secret: give one")
	}
	u.User = url.User(u.User.Username())
	f.URL, f.Secret = u.String(), pw
	return f, nil
}

// validateSMPP reports what is wrong with an smpp frontend.
func (f Frontend) validateSMPP() error {
	if _, err := ParseSMPPURL(f.URL); err != nil {
		return Errorf(CodeInvalidRequest, "url: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if len(f.Secret) > MaxSMPPPassword || !smppPrintable(f.Secret) {
		return Errorf(CodeInvalidRequest, "password (the secret of an smpp frontend): at most %d printable ASCII characters (SMPP v3.4)", MaxSMPPPassword)
	}
	return nil
}
