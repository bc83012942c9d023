// Command switchboard runs a Switchboard node (a store-and-forward message
// controller) and the tools around it. It is built from ./cmd/node as
// bin/switchboard.
//
// Subcommands:
//
//	switchboard run [flags]                        run a node until SIGINT or SIGTERM
//	switchboard certs init --dir D --nodes a,b,c   write a CA and a certificate per node (mutual TLS)
//	switchboard credentials add|list|revoke        the node's credentials (file or database)
//	switchboard version                            print the version
//	switchboard help [COMMAND]                     print help (also -h, --help)
//
// and the admin CLI, a client of a node's HTTPS API (docs/cli.md):
//
//	switchboard messages list|show|resubmit        the message queue
//	switchboard peers                              federation peers and their health
//	switchboard ring                               the site's token ring
//	switchboard routes list|set|delete             the routing table
//	switchboard frontends list|set|delete          this node's frontends
//	switchboard status                             counts by state and queue depths
//
// The admin commands take --addr, --token, --ca, --insecure, --timeout and
// --json, or SWITCHBOARD_ADDR, SWITCHBOARD_API_TOKEN, SWITCHBOARD_CA,
// SWITCHBOARD_INSECURE and SWITCHBOARD_TIMEOUT.
//
// Every flag of run can also be set in the environment as SWITCHBOARD_<FLAG>,
// upper case with dashes as underscores (--delivery-max-attempts ->
// SWITCHBOARD_DELIVERY_MAX_ATTEMPTS); repeatable flags (--route, --frontend)
// take a comma-separated list there. A flag on the command line wins over
// the environment; for a repeatable flag, any use on the command line
// replaces the whole environment list.
//
// Exit codes: 0 on success and after a stop asked for by a signal; 1 when
// the node fails (start-up, a fatal actor failure, an unclean stop, a second
// signal while stopping, the first one repeated within a second aside) or a
// command fails; 2 for usage and configuration errors, which are printed as
// one line each, naming the flag, and for a configuration the node finds
// cannot work once it runs (switchboard.ErrConfig).
//
// The command wires flags and the environment into switchboard.Config and
// runs switchboard.Node; it exports nothing. See the switchboard package for
// embedding a node in another program.
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version = "dev"

// lookupEnv is os.LookupEnv, injected so that tests can supply their own
// environment.
type lookupEnv func(key string) (string, bool)

func main() {
	os.Exit(mainCode(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

// mainCode runs the subcommand named by args[0] and returns the exit code.
// A command whose output could not all be written (stdout a file on a full
// disk) has failed, whatever it did besides: a script that reads the output
// must not take a cut one, with exit code 0, for the whole.
func mainCode(args []string, stdout, stderr io.Writer, env lookupEnv) int {
	out := &outputWriter{w: stdout}
	code := commandCode(args, out, stderr, env)
	if code == 0 && out.err != nil {
		fmt.Fprintf(stderr, "switchboard: the output could not be written: %v\n", out.err)
		return 1
	}
	return code
}

// outputWriter is stdout, keeping the first write error: the commands print
// with fmt.Fprint*, whose errors they do not check each.
type outputWriter struct {
	w   io.Writer
	err error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil && o.err == nil {
		o.err = err
	}
	return n, err
}

// commandCode runs the subcommand named by args[0] and returns its exit code.
func commandCode(args []string, stdout, stderr io.Writer, env lookupEnv) int {
	if len(args) == 0 {
		printUsage(stderr)
		return 2
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		return runCommand(rest, stdout, stderr, env)
	case "certs":
		return certsCommand(rest, stdout, stderr)
	case "backup":
		return backupCommand(rest, stdout, stderr, env)
	case "credentials":
		return credentialsCommand(rest, stdout, stderr, env)
	case "messages", "peers", "ring", "routes", "frontends", "status":
		return cliMain(cmd, rest, stdout, stderr, env)
	case "version", "-version", "--version":
		if len(rest) == 1 && isHelpFlag(rest[0]) {
			printUsage(stdout)
			return 0
		}
		if len(rest) > 0 {
			fmt.Fprintf(stderr, "switchboard: version takes no arguments\n")
			return 2
		}
		fmt.Fprintf(stdout, "switchboard %s\n", version)
		return 0
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			switch rest[0] {
			case "run":
				printRunUsage(stdout)
				return 0
			case "certs":
				printCertsUsage(stdout)
				return 0
			case "backup":
				printBackupUsage(stdout)
				return 0
			case "credentials":
				printCredentialsUsage(stdout)
				return 0
			case "admin":
				printCLIUsage(stdout)
				return 0
			case "version", "help":
				// Listed among the commands; the general help is theirs.
				printUsage(stdout)
				return 0
			}
			if t := cliTopicNamed(rest[0]); t != nil {
				if t.cmd != nil {
					printCommandUsage(stdout, t.cmd)
				} else {
					printTopicUsage(stdout, t)
				}
				return 0
			}
			// As an unknown command: a script's typo must not pass.
			fmt.Fprintf(stderr, "switchboard: unknown help topic %q\n\n", rest[0])
			printUsage(stderr)
			return 2
		}
		printUsage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "switchboard: unknown command %q\n\n", cmd)
		printUsage(stderr)
		return 2
	}
}

// isHelpFlag reports whether arg asks for help, as -h and --help do for
// every command.
func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: switchboard <command> [arguments]

Switchboard is a federated store-and-forward message controller.

Commands:
  run [flags]                        run a node until SIGINT or SIGTERM
  certs init --dir D --nodes a,b,c   write a CA and one certificate per node (mutual TLS)
  backup --to FILE [--data-dir D]    an online copy of the embedded store
  credentials add|list|revoke        the node's credentials (its --credentials file or its database)
  version                            print the version
  help [COMMAND]                     print this help, or a command's

Admin commands, talking to a node's HTTPS API (see 'switchboard help admin'):
  messages list|show|resubmit        the message queue
  peers                              federation peers and their health
  ring                               the site's ring: role, master, epoch, coverage, members
  routes list|set|delete             the routing table
  frontends list|set|delete          this node's frontends
  status                             counts by state and queue depths

Every flag of run can also be set in the environment as SWITCHBOARD_<FLAG>
(--delivery-max-attempts -> SWITCHBOARD_DELIVERY_MAX_ATTEMPTS); the command line wins.
Run 'switchboard run -h' for the flags.
`)
}
