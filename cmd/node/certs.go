package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
)

// certsCommand is `switchboard certs <subcommand>`.
func certsCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printCertsUsage(stderr)
		return 2
	}
	switch args[0] {
	case "init":
		return certsInit(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		printCertsUsage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "switchboard: unknown certs command %q\n\n", args[0])
		printCertsUsage(stderr)
		return 2
	}
}

// certsInit is `switchboard certs init --dir D --nodes a,b,c`. It prints the
// path of every file it wrote, one per line.
func certsInit(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("switchboard certs init", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "", "")
	nodeList := fs.String("nodes", "", "")
	twice := onceEach(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCertsUsage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "switchboard: %v (see 'switchboard certs -h')\n", err)
		return 2
	}
	var errs []error
	if err := twice(); err != nil {
		errs = append(errs, err)
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q (see 'switchboard certs -h')", fs.Arg(0)))
	}
	if *dir == "" {
		errs = append(errs, errors.New("--dir: required"))
	}
	nodes := splitList(*nodeList)
	if len(nodes) == 0 {
		errs = append(errs, errors.New("--nodes: required: a comma-separated list of node names"))
	}
	for _, n := range nodes {
		if !switchboard.ValidName(n) {
			errs = append(errs, fmt.Errorf("--nodes: invalid value %q: not a valid name (1-63 letters, digits, '.', '_', '-')", n))
		}
	}
	if len(errs) > 0 {
		printErrorLines(stderr, errors.Join(errs...))
		return 2
	}

	caCert, caKey := certs.CAFiles(*dir)
	_, statErr := os.Stat(caCert)
	reuse := statErr == nil
	if err := certs.InitCA(*dir, nodes, time.Now()); err != nil {
		printErrorLines(stderr, err)
		return 1
	}
	if reuse {
		fmt.Fprintf(stderr, "switchboard: signed with the existing CA %s\n", caCert)
	} else {
		fmt.Fprintln(stdout, caCert)
		fmt.Fprintln(stdout, caKey)
	}
	for _, n := range nodes {
		certFile, keyFile := certs.NodeFiles(*dir, n)
		fmt.Fprintln(stdout, certFile)
		fmt.Fprintln(stdout, keyFile)
	}
	return 0
}

func printCertsUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: switchboard certs init --dir DIR --nodes NAME[,NAME...]

Writes a CA (ca.pem, ca.key) and, for each node, NAME.pem and NAME.key into
DIR: ECDSA P-256 certificates with CN=NAME, DNS names NAME and localhost, IP
addresses 127.0.0.1 and ::1, valid for server and client authentication. Use
them with 'switchboard run --tls-cert DIR/NAME.pem --tls-key DIR/NAME.key
--tls-ca DIR/ca.pem' for mutual TLS between peers.

If DIR already holds ca.pem and ca.key, that CA signs the new certificates,
so nodes can be added later. Existing node files are never overwritten:
remove NAME.pem and NAME.key to reissue. Keys are written with mode 0600.
Prints the path of each file written.

Flags:
  --dir DIR      directory to write to (created 0700 if missing); required
  --nodes LIST   comma-separated node names; required
`)
}
