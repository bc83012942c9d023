package main

// The admin CLI: switchboard messages|peers|routes|frontends|status, a client
// of a node's HTTPS API (docs/api.md). This file holds what every command
// shares: the common flags and their environment variables, the parsing of
// a command line, the API client's setup (package apiclient) and the mapping
// of failures to hints and exit codes; cli_commands.go holds the commands.
// docs/cli.md is the operator's guide.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/messages"
)

const (
	// cliDefaultAddr is the node on this host with run's default --listen.
	cliDefaultAddr = "localhost:8443"
	// cliDefaultPort is the port of an --addr given without one (run's
	// default --listen port).
	cliDefaultPort = "8443"
	// cliDefaultTimeout bounds one API call: 30s is the node's own bound on
	// a request (httpapi.Config.RequestTimeout), so the CLI does not give up
	// on an answer the node may still give. A bulk resubmit gets ten times
	// as long, as the node gives it.
	cliDefaultTimeout = 30 * time.Second
)

// cliFlag is one flag of a CLI command. env, when set, is the environment
// variable read when the flag is not on the command line.
type cliFlag struct {
	name    string
	arg     string // placeholder in the usage text; "" for a boolean flag
	usage   string
	env     string
	boolean bool
}

// commonFlags are accepted by every CLI command. --token's variable is
// SWITCHBOARD_API_TOKEN, the one `switchboard run` reads for --api-token, so
// one environment serves the node and the CLI.
var commonFlags = []cliFlag{
	{name: "addr", arg: "ADDR", env: "SWITCHBOARD_ADDR",
		usage: "the node's API: HOST[:PORT] (port 8443) or an https:// URL (default " + cliDefaultAddr + ")"},
	{name: "token", arg: "TOKEN", env: "SWITCHBOARD_API_TOKEN",
		usage: "API token: the node's --api-token, or a credential's token (its role decides what the command may do); sent as 'Authorization: Bearer TOKEN'"},
	{name: "ca", arg: "FILE", env: "SWITCHBOARD_CA",
		usage: "PEM CA bundle or certificate to trust for the node, e.g. DATA_DIR/selfsigned.pem (default: system roots)"},
	{name: "insecure", env: "SWITCHBOARD_INSECURE", boolean: true,
		usage: "development only: do not verify the node's certificate (--ca is then ignored)"},
	{name: "timeout", arg: "DURATION", env: "SWITCHBOARD_TIMEOUT",
		usage: "bound on each API call (default " + formatDuration(cliDefaultTimeout) + ")"},
	{name: "json", boolean: true,
		usage: "print the API's JSON documents as received, one per line, instead of tables"},
}

// cliCommand is one leaf command, e.g. `messages list`.
type cliCommand struct {
	name     string // "messages list"
	summary  string // one line for the lists of commands
	synopsis string // arguments after the name in the usage line
	about    string // what it does, shown by -h
	flags    []cliFlag
	run      func(inv *cliInvocation) error
}

// cliTopic is a first word of the CLI: a group of verbs (messages, routes,
// frontends) with a default verb, or a single command (peers, status).
type cliTopic struct {
	name  string
	about string
	verbs []*cliCommand
	def   string      // verb run when none is given
	cmd   *cliCommand // for a topic without verbs
}

func (t *cliTopic) verb(name string) *cliCommand {
	for _, c := range t.verbs {
		if strings.TrimPrefix(c.name, t.name+" ") == name {
			return c
		}
	}
	return nil
}

func cliTopicNamed(name string) *cliTopic {
	for _, t := range cliTopics {
		if t.name == name {
			return t
		}
	}
	return nil
}

// cliMain runs `switchboard <topic> [verb] [arguments]` and returns the exit
// code: 0 success, 1 the node refused or could not be reached, 2 usage.
func cliMain(topic string, args []string, stdout, stderr io.Writer, env lookupEnv) int {
	t := cliTopicNamed(topic)
	if t.cmd != nil {
		return runCLICommand(t.cmd, args, stdout, stderr, env)
	}
	verb := t.def
	if len(args) > 0 {
		switch a := args[0]; {
		case a == "help" || a == "-h" || a == "-help" || a == "--help":
			printTopicUsage(stdout, t)
			return 0
		case !strings.HasPrefix(a, "-"):
			verb, args = a, args[1:]
		}
	}
	c := t.verb(verb)
	if c == nil {
		fmt.Fprintf(stderr, "switchboard: unknown %s command %q\n\n", t.name, verb)
		printTopicUsage(stderr, t)
		return 2
	}
	return runCLICommand(c, args, stdout, stderr, env)
}

// usageError is a problem with the command line or the CLI's environment:
// exit code 2. Each line names the flag or argument at fault.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// hinted is an error with a line on what to do about it, when the CLI can
// tell.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() }
func (h *hinted) Unwrap() error { return h.err }

// cliInvocation is one command being run: its options, flag values,
// positional arguments, output streams and API client.
type cliInvocation struct {
	cmd    *cliCommand
	json   bool
	args   []string
	vals   map[string]*rawValue
	stdout io.Writer
	stderr io.Writer
	api    *apiClient
}

// value is the last value of one of the command's own flags ("" if unset).
func (inv *cliInvocation) value(name string) string {
	v := inv.vals[name]
	if v == nil || len(v.vals) == 0 {
		return ""
	}
	return v.vals[len(v.vals)-1]
}

func (inv *cliInvocation) given(name string) bool {
	v := inv.vals[name]
	return v != nil && len(v.vals) > 0
}

// boolValue is a boolean flag of the command; a bad value is a usage error.
func (inv *cliInvocation) boolValue(name string) (bool, error) {
	if !inv.given(name) {
		return false, nil
	}
	b, err := strconv.ParseBool(inv.value(name))
	if err != nil {
		return false, usageErrorf("--%s: invalid value %q: must be true or false", name, inv.value(name))
	}
	return b, nil
}

// runCLICommand parses args for c, builds the API client and runs c.
func runCLICommand(c *cliCommand, args []string, stdout, stderr io.Writer, env lookupEnv) int {
	inv, err := parseCLI(c, args, env)
	if errors.Is(err, flag.ErrHelp) {
		printCommandUsage(stdout, c)
		return 0
	}
	if err == nil {
		inv.stdout, inv.stderr = stdout, stderr
		defer inv.api.close()
		err = c.run(inv)
	}
	return reportCLIError(stderr, c, err)
}

// reportCLIError prints err (if any) and returns the exit code.
func reportCLIError(stderr io.Writer, c *cliCommand, err error) int {
	var ue *usageError
	var ae *apiclient.Error
	var h *hinted
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		printErrorLines(stderr, ue.err)
		fmt.Fprintf(stderr, "switchboard: see 'switchboard %s -h'\n", c.name)
		return 2
	case errors.As(err, &ae):
		printErrorLines(stderr, err)
		if errors.As(err, &h) {
			fmt.Fprintln(stderr, "switchboard: "+h.hint)
		}
		return 1
	default:
		printErrorLines(stderr, err)
		return 1
	}
}

// parseCLI parses the command line of c. Flags may come before, between and
// after the positional arguments; "--" ends the flags.
func parseCLI(c *cliCommand, args []string, env lookupEnv) (*cliInvocation, error) {
	fs := flag.NewFlagSet("switchboard "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	vals := make(map[string]*rawValue)
	flags := append(append([]cliFlag(nil), commonFlags...), c.flags...)
	for _, f := range flags {
		vals[f.name] = &rawValue{boolean: f.boolean}
		fs.Var(vals[f.name], f.name, f.usage)
	}
	var pos []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageErrorf("%s", cliFlagError(err))
		}
		left := fs.Args()
		if endedByDashes(rest, left) {
			pos = append(pos, left...)
			break
		}
		if len(left) == 0 {
			break
		}
		pos = append(pos, left[0])
		rest = left[1:]
	}
	// A flag that takes a value, given twice, is refused as run refuses
	// it: keeping the last value would drop the first in silence, and
	// 'messages list --state failed --state retry' listed the retry
	// messages alone, as if none had failed. A boolean twice is harmless.
	var twice []error
	for _, f := range flags {
		if vals[f.name].twice && !f.boolean {
			twice = append(twice, errTakesOne(f.name))
		}
	}
	if len(twice) > 0 {
		return nil, &usageError{errors.Join(twice...)}
	}

	inv := &cliInvocation{cmd: c, args: pos, vals: vals}
	opts, err := commonOptions(vals, env)
	if err != nil {
		return nil, err
	}
	inv.json = opts.json
	inv.api, err = newAPIClient(opts)
	if err != nil {
		return nil, err
	}
	return inv, nil
}

// endedByDashes reports whether the flag parse that left rest stopped at a
// "--" (which package flag consumes): the element of args just before rest.
func endedByDashes(args, rest []string) bool {
	i := len(args) - len(rest) - 1
	return i >= 0 && args[i] == "--"
}

// cliFlagError rewrites package flag's messages into "--flag: problem".
func cliFlagError(err error) string {
	msg := err.Error()
	// invalid boolean value "x" for -json: parse error
	if rest, ok := strings.CutPrefix(msg, "invalid boolean value "); ok {
		if val, name, ok := strings.Cut(rest, " for -"); ok {
			name, _, _ = strings.Cut(name, ":")
			return fmt.Sprintf("--%s: invalid value %s: must be true or false", name, val)
		}
	}
	return flagSyntaxError(err)
}

// cliOptions are the values of the common flags.
type cliOptions struct {
	base     *url.URL
	token    string
	ca       string
	insecure bool
	json     bool
	timeout  time.Duration
}

// commonOptions reads the common flags, each from the command line or else
// its environment variable, and reports every bad value.
func commonOptions(vals map[string]*rawValue, env lookupEnv) (cliOptions, error) {
	opts := cliOptions{timeout: cliDefaultTimeout}
	addr := cliDefaultAddr
	var errs []error
	for _, f := range commonFlags {
		v, source := "", ""
		if raw := vals[f.name]; len(raw.vals) > 0 {
			v = raw.vals[len(raw.vals)-1]
		} else if f.env != "" {
			var ok bool
			if v, ok = env(f.env); !ok {
				continue
			}
			source = f.env
		} else {
			continue
		}
		bad := func(why string) {
			errs = append(errs, fmt.Errorf("--%s: invalid value %q: %s%s", f.name, v, why, fromSuffix(source)))
		}
		switch f.name {
		case "addr":
			addr = v
		case "token":
			opts.token = v
		case "ca":
			opts.ca = v
		case "insecure", "json":
			b, err := strconv.ParseBool(v)
			if err != nil {
				bad("must be true or false")
				continue
			}
			if f.name == "json" {
				opts.json = b
			} else {
				opts.insecure = b
			}
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				bad("must be a positive duration such as 10s or 2m")
				continue
			}
			opts.timeout = d
		}
	}
	base, err := parseCLIAddr(addr)
	if err != nil {
		source := ""
		if len(vals["addr"].vals) == 0 && addr != cliDefaultAddr {
			source = "SWITCHBOARD_ADDR"
		}
		errs = append(errs, fmt.Errorf("--addr: invalid value %q: %v%s", addr, err, fromSuffix(source)))
	}
	opts.base = base
	if strings.ContainsAny(opts.token, "\r\n") {
		errs = append(errs, errors.New("--token: must be one line"))
	}
	if len(errs) > 0 {
		return opts, &usageError{errors.Join(errs...)}
	}
	return opts, nil
}

// parseCLIAddr turns --addr into the API's base URL. HOST or HOST:PORT means
// https on that port (8443 when none is given); a URL keeps its scheme
// (https, or http behind a TLS-terminating proxy), its port (the scheme's
// default when none) and its path as a prefix.
func parseCLIAddr(addr string) (*url.URL, error) {
	if addr == "" {
		return nil, errors.New("must not be empty")
	}
	if !strings.Contains(addr, "://") {
		host := addr
		if _, _, err := net.SplitHostPort(addr); err != nil {
			host = net.JoinHostPort(strings.Trim(addr, "[]"), cliDefaultPort)
		}
		addr = "https://" + host
	}
	u, err := url.Parse(addr)
	switch {
	case err != nil:
		return nil, errors.New("must be HOST[:PORT] or an https:// URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Errorf("scheme %q: must be https (or http behind a proxy)", u.Scheme)
	case u.Hostname() == "":
		return nil, errors.New("has no host")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, errors.New("must be HOST[:PORT] or a URL without user, query or fragment")
	case strings.HasSuffix(u.Host, ":"):
		// "HOST:" would dial the scheme's port, 443, not the 8443 that a
		// HOST without a port gets: an empty port is a typo (HOST:$PORT
		// with PORT unset), not a choice.
		return nil, errors.New("the port after ':' is empty")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %q must be from 1 to 65535", p)
		}
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// apiClient is the CLI's use of the API client: each call bounded by
// --timeout, and its failures explained in terms of the CLI's flags.
type apiClient struct {
	*apiclient.Client
	token   string
	timeout time.Duration
}

func newAPIClient(opts cliOptions) (*apiClient, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case opts.insecure:
		tlsCfg.InsecureSkipVerify = true
	case opts.ca != "":
		trust, err := apiclient.TrustFile(opts.ca, "")
		var perr *os.PathError
		switch {
		case errors.As(err, &perr):
			return nil, usageErrorf("--ca: cannot read %s: %v", opts.ca, perr.Err)
		case err != nil:
			return nil, usageErrorf("--ca: %v", err)
		}
		tlsCfg = trust
	}
	c := apiclient.New(apiclient.Config{Base: opts.base, Token: opts.token, TLS: tlsCfg})
	return &apiClient{Client: c, token: opts.token, timeout: opts.timeout}, nil
}

func (c *apiClient) close() { c.Close() }

// call sends one request (body JSON-encoded unless nil) within timeout
// and returns the body of a 2xx answer as received.
func (c *apiClient) call(method, path string, query url.Values, body any, timeout time.Duration) ([]byte, error) {
	return c.doJSON(method, path, query, body, nil, timeout)
}

// getJSON calls GET path and decodes the answer into out; it returns the
// raw body too (for --json).
func (c *apiClient) getJSON(path string, query url.Values, out any) ([]byte, error) {
	return c.doJSON(http.MethodGet, path, query, nil, out, c.timeout)
}

func (c *apiClient) doJSON(method, path string, query url.Values, body, out any, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	data, err := c.Send(ctx, method, path, query, body, out)
	if err != nil {
		return nil, c.explain(err, timeout)
	}
	return data, nil
}

// explain adds to a failed call what to do about it: a hint for the usual
// refusals, and for a node that could not be asked, which address failed
// and why.
func (c *apiClient) explain(err error, timeout time.Duration) error {
	var ae *apiclient.Error
	var ne *apiclient.NoAnswerError
	switch {
	case errors.As(err, &ae):
		hint := ""
		switch ae.Code {
		case messages.CodeUnauthorized:
			hint = "give the node's API token with --token or SWITCHBOARD_API_TOKEN"
			if c.token != "" {
				hint = "the token given (--token or SWITCHBOARD_API_TOKEN) is not the node's --api-token nor a credential's token: check it"
			}
		case messages.CodeForbidden:
			hint = "the credential of --token may not do this: use one with a role the message names ('switchboard credentials list' shows the roles)"
		case "":
			if base := c.Base(); base.Scheme == "http" && ae.Status == http.StatusBadRequest && strings.Contains(ae.Message, "HTTPS server") {
				// Go's HTTPS server answers a plain HTTP request so.
				base.Scheme = "https"
				hint = "the node speaks HTTPS: use --addr " + base.String() + " (or just " + base.Host + ")"
			}
		}
		if hint != "" {
			return &hinted{err: err, hint: hint}
		}
		return err
	case errors.As(err, &ne):
		return c.connError(ne, timeout)
	}
	return err
}

// connError explains why the node could not be asked, with a hint for the
// usual causes.
func (c *apiClient) connError(ne *apiclient.NoAnswerError, timeout time.Duration) error {
	var (
		verr *tls.CertificateVerificationError
		herr x509.HostnameError
		rerr tls.RecordHeaderError
	)
	var hint string
	err := ne.Err
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s %s: no answer within %s (--timeout)", ne.Method, ne.URL, formatDuration(timeout))
	case errors.As(err, &herr):
		hint = " (the node's certificate is not for this host name: use the name it was issued for in --addr)"
	case errors.As(err, &verr):
		hint = " (trust the node's certificate with --ca FILE, e.g. its DATA_DIR/selfsigned.pem, or use --insecure in development)"
	case errors.As(err, &rerr):
		hint = " (the address does not speak TLS: is it the node's --listen address?)"
	case errors.Is(err, http.ErrSchemeMismatch):
		// net/http turns the RecordHeaderError of an HTTP server's answer
		// into this error: the likely slip is the node's metrics port.
		hint = " (the address speaks plain HTTP, not TLS: is it the node's --metrics-listen? The API is on its --listen)"
	}
	return fmt.Errorf("cannot reach the node at %s: %s %s: %v%s", c.Base().Host, ne.Method, ne.URL, err, hint)
}

// writeAPIDoc prints one API document as received, on one line.
func writeAPIDoc(w io.Writer, data []byte) {
	data = bytes.TrimRight(data, "\n")
	w.Write(data)
	io.WriteString(w, "\n")
}

// newCLITable is the tabwriter of every table: columns two spaces apart.
func newCLITable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// tableCell makes a value safe for one table cell: "-" when empty, and quoted
// when it holds control characters (tabs or newlines would break the table;
// escape sequences in a message body must not reach the terminal) or
// bidirectional controls (U+202E and its kin, which the node lets through
// in a body or a frontend's answer, make a terminal draw the rest of the
// line right to left: a row would read otherwise than it is).
func tableCell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.ContainsFunc(s, unsafeInCell) {
		return strconv.Quote(s)
	}
	return s
}

func unsafeInCell(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// tableTime prints a time in RFC 3339, UTC, to the second.
func tableTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func tableTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return tableTime(*t)
}

// printCommandUsage is the -h text of one command.
func printCommandUsage(w io.Writer, c *cliCommand) {
	fmt.Fprintf(w, "Usage: switchboard %s", c.name)
	if c.synopsis != "" {
		fmt.Fprintf(w, " %s", c.synopsis)
	}
	fmt.Fprintf(w, " [common flags]\n\n%s\n", strings.TrimSpace(c.about))
	if len(c.flags) > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		printCLIFlags(w, c.flags)
	}
	fmt.Fprint(w, "\nCommon flags:\n")
	printCLIFlags(w, commonFlags)
}

func printCLIFlags(w io.Writer, flags []cliFlag) {
	tw := newCLITable(w)
	for _, f := range flags {
		env := ""
		if f.env != "" {
			env = " [" + f.env + "]"
		}
		fmt.Fprintf(tw, "  --%s %s\t%s%s\n", f.name, f.arg, f.usage, env)
	}
	tw.Flush()
}

// printTopicUsage is the -h text of a topic with verbs.
func printTopicUsage(w io.Writer, t *cliTopic) {
	fmt.Fprintf(w, "Usage: switchboard %s <command> [arguments] [common flags]\n\n%s\n\nCommands:\n", t.name, t.about)
	tw := newCLITable(w)
	for _, c := range t.verbs {
		verb := strings.TrimPrefix(c.name, t.name+" ")
		def := ""
		if verb == t.def {
			def = " (the default)"
		}
		fmt.Fprintf(tw, "  %s %s\t%s%s\n", verb, c.synopsis, c.summary, def)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun 'switchboard %s <command> -h' for a command's flags.\n", t.name)
}

// printCLIUsage lists the CLI's commands and common flags.
func printCLIUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: switchboard <command> [arguments] [common flags]

The admin commands talk to a node's HTTPS API and print tables, or the API's
JSON documents with --json. Exit codes: 0 success, 1 the node refused (its
error code and message are printed) or could not be reached, 2 usage.

Commands:
`)
	tw := newCLITable(w)
	for _, t := range cliTopics {
		if t.cmd != nil {
			fmt.Fprintf(tw, "  %s %s\t%s\n", t.name, t.cmd.synopsis, t.cmd.summary)
			continue
		}
		for _, c := range t.verbs {
			fmt.Fprintf(tw, "  %s %s\t%s\n", c.name, c.synopsis, c.summary)
		}
	}
	tw.Flush()
	fmt.Fprint(w, "\nCommon flags (also after the arguments):\n")
	printCLIFlags(w, commonFlags)
}
