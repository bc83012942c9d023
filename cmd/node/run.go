package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
	"github.com/mattn/go-isatty"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/persistence/postgres"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// stopGrace is how long past --shutdown-timeout the command still waits for
// Node.Stop to return before it gives up and exits 1: Stop should honour its
// context, but a stuck stop must not keep a process manager waiting forever.
var stopGrace = 5 * time.Second

// runCommand is `switchboard run`.
func runCommand(args []string, stdout, stderr io.Writer, env lookupEnv) int {
	// The SIGHUP handler comes first: systemctl reload (the unit's
	// ExecReload) or a certificate renewal hook may send one while the
	// flags and their files are read, and Go's default action for it would
	// end the process. One that comes before the node exists is logged
	// once the logger is made and has nothing more to do: the node reads
	// the credentials and TLS files as it starts. One before this line
	// (the runtime's start and the package inits, milliseconds) still ends
	// the process; the systemd unit restarts it (RestartForceExitStatus=
	// SIGHUP: Restart=on-failure alone takes it for a clean end).
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	defer signal.Stop(hups)

	cfg, lo, err := parseStart(args, env)
	if errors.Is(err, flag.ErrHelp) {
		printRunUsage(stdout)
		return 0
	}
	if err != nil {
		printErrorLines(stderr, err)
		return 2
	}
	logger := newLogger(stderr, lo, isTerminal(stderr), noColor(env))
	// For libraries that log through package log or slog's default.
	slog.SetDefault(logger)
	cfg.Logger = logger

	n, err := switchboard.New(cfg)
	if err != nil {
		// parseRun validated cfg already; New can only disagree if Validate
		// does, so treat it as the configuration error it is.
		printErrorLines(stderr, flagErrors(err))
		return 2
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case <-hups:
		logger.Info("SIGHUP during start-up: nothing to reload yet; the node reads the credentials and the TLS files as it starts")
	default:
	}
	go reloadOnHangup(n, logger, hups)
	defer func() {
		signal.Stop(hups) // no delivery after it returns: closing is safe
		close(hups)
	}()
	return runNode(n, cfg, logger, sigs, time.Now)
}

// reloadOnHangup reloads the node's credentials and certificates on each
// SIGHUP (a node not started yet, or stopping, says so and goes on).
func reloadOnHangup(n *switchboard.Node, logger *slog.Logger, hups <-chan os.Signal) {
	for range hups {
		logger.Info("SIGHUP: reloading the credentials and the TLS files")
		if err := n.Reload(); err != nil {
			logger.Warn("reload incomplete; what could not be read stays as it was", "err", err)
		}
	}
}

// node is what runNode needs of *switchboard.Node (an interface so that the
// lifecycle is tested with a fake).
type node interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	Fatal() <-chan error
	Addr() string
	MetricsAddr() string
}

// repeatWindow is how long after the signal that began the stop the same
// signal again is taken for a repeat of it rather than a second request:
// coreutils timeout (and other supervisors) signal the process and then
// its process group, so a node run under them gets SIGTERM twice at once.
const repeatWindow = time.Second

// stopSignal is the signal that began the stop, and when it came.
type stopSignal struct {
	sig os.Signal
	at  time.Time
	now func() time.Time
}

func (s *stopSignal) record(sig os.Signal) { s.sig, s.at = sig, s.now() }

// repeat reports whether sig is the stop's own signal again within
// repeatWindow of it: ignored. Any other signal, or the same one later,
// asks for the exit at once.
func (s *stopSignal) repeat(sig os.Signal) bool {
	return s.sig != nil && sig == s.sig && s.now().Sub(s.at) < repeatWindow
}

// runNode starts n, waits for a signal or a fatal error, stops n and
// returns the exit code: 0 after a signal and a clean stop, 1 when start-up,
// the node or the stop fails, or when a second signal cuts the stop short
// (the first one repeated within repeatWindow is not a second; now is the
// clock that tells).
func runNode(n node, cfg switchboard.Config, logger *slog.Logger, sigs <-chan os.Signal, now func() time.Time) int {
	startCtx, cancelStart := context.WithCancel(context.Background())
	defer cancelStart()
	started := make(chan error, 1)
	go func() { started <- n.Start(startCtx) }()

	first := &stopSignal{now: now}
	var err error
	select {
	case err = <-started:
	case sig := <-sigs:
		// Do not wait for a slow start-up (say, an unreachable Postgres)
		// before honouring the signal.
		first.record(sig)
		logger.Info("signal received during start-up; stopping", "signal", sig.String())
		cancelStart()
	wait:
		for {
			select {
			case err = <-started:
				break wait
			case sig := <-sigs:
				if repeated(logger, first, sig, "second signal; exiting at once") {
					continue
				}
				return 1
			}
		}
		if err != nil {
			logger.Info("start-up interrupted", "err", flagErrors(err))
			return 0
		}
		return stopNode(n, cfg, logger, sigs, first, 0)
	}
	if err != nil {
		logger.Error("node failed to start", "err", flagErrors(err))
		return failureCode(err)
	}

	logger.Info("node started",
		"name", cfg.Name,
		"instance_id", cfg.InstanceID,
		"version", cfg.Version,
		"addr", n.Addr(),
		"metrics_addr", n.MetricsAddr(),
		"store", storeKind(cfg),
	)

	code := 0
	select {
	case sig := <-sigs:
		first.record(sig)
		logger.Info("signal received; stopping", "signal", sig.String(), "timeout", cfg.ShutdownTimeout)
	case err := <-n.Fatal():
		logger.Error("node failed; stopping", "err", flagErrors(err), "timeout", cfg.ShutdownTimeout)
		code = failureCode(err)
	}
	return stopNode(n, cfg, logger, sigs, first, code)
}

// failureCode is the exit code of a node that failed (its start, or
// later: Fatal), or of a command's opening of its store, with err: 2, a
// configuration error (which the unit does not restart), when only an
// operator can change it: the --postgres search_path names a schema that
// the role may neither create nor use, the embedded store was migrated by
// a newer version (sqlite.ErrSchemaNewer: a downgrade), or the
// configuration cannot work (switchboard.ErrConfig, found once the node
// runs). 1 otherwise: a restart may succeed.
func failureCode(err error) int {
	if errors.Is(err, postgres.ErrSearchPath) || errors.Is(err, sqlite.ErrSchemaNewer) || errors.Is(err, switchboard.ErrConfig) {
		return 2
	}
	return 1
}

// repeated reports whether sig is first's repeat, to be ignored (logged
// as such); otherwise it is a second signal, logged with second, and the
// caller exits.
func repeated(logger *slog.Logger, first *stopSignal, sig os.Signal, second string) bool {
	if first.repeat(sig) {
		logger.Info("the same signal again within a second; taken for a repeat (a second signal later exits at once)",
			"signal", sig.String())
		return true
	}
	logger.Error(second, "signal", sig.String())
	return false
}

// stopNode stops n within cfg.ShutdownTimeout and returns code, or 1 if the
// stop fails or a second signal arrives first (not first's repeated).
func stopNode(n node, cfg switchboard.Config, logger *slog.Logger, sigs <-chan os.Signal, first *stopSignal, code int) int {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop(ctx) }()
	giveUp := time.NewTimer(cfg.ShutdownTimeout + stopGrace)
	defer giveUp.Stop()

	for {
		select {
		case err := <-stopped:
			if err != nil {
				logger.Error("node did not stop cleanly", "err", err)
				return 1
			}
			logger.Info("node stopped")
			return code
		case sig := <-sigs:
			if repeated(logger, first, sig, "second signal; exiting without waiting for the stop") {
				continue
			}
			return 1
		case <-giveUp.C:
			logger.Error("node did not stop in time; exiting", "timeout", cfg.ShutdownTimeout)
			return 1
		}
	}
}

// storeKind names the store for the start-up log without revealing the
// Postgres DSN, which may hold a password.
func storeKind(cfg switchboard.Config) string {
	switch {
	case cfg.Store != nil:
		return "embedder-provided"
	case cfg.Postgres != "":
		return "postgres"
	default:
		return "sqlite:" + cfg.DataDir
	}
}

// newLogger builds the process logger: tint text (colour only in "auto" on
// a terminal without NO_COLOR), or slog's JSON handler. Every error it
// logs names flags, not Config fields (flagAttr): the node's own lines
// too, such as the watch's warnings about a file it re-reads.
func newLogger(w io.Writer, lo logOptions, terminal, noColor bool) *slog.Logger {
	var h slog.Handler
	switch {
	case lo.Format == "json" || (lo.Format == "auto" && !terminal):
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lo.Level, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			return flagAttr(groups, durationString(groups, a))
		}})
	case lo.Format == "text":
		// Full timestamps: plain text usually ends up in a file.
		h = tint.NewTextHandler(w, &tint.Options{Level: lo.Level, NoColor: true, TimeFormat: "2006-01-02T15:04:05.000Z07:00", ReplaceAttr: flagAttr})
	default: // auto on a terminal
		h = tint.NewTextHandler(w, &tint.Options{Level: lo.Level, NoColor: noColor, TimeFormat: time.TimeOnly + ".000", ReplaceAttr: flagAttr})
	}
	return slog.New(h)
}

// flagAttr is an error with each Config field it names named by its flag
// (flagErrors): the library logs the errors of its Config, which speak of
// fields to an embedder ("APITokenFile: open ..."), and the operator of
// the binary knows the flags ("--api-token-file: open ...").
func flagAttr(_ []string, a slog.Attr) slog.Attr {
	if err, ok := a.Value.Any().(error); ok && a.Value.Kind() == slog.KindAny {
		a.Value = slog.AnyValue(flagErrors(err))
	}
	return a
}

// durationString writes a duration as Go prints it ("30s", "1m30s")
// rather than slog's JSON default of integer nanoseconds
// ("timeout":30000000000), which nobody reads at a glance.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// noColor honours the NO_COLOR convention (https://no-color.org).
func noColor(env lookupEnv) bool {
	v, ok := env("NO_COLOR")
	return ok && v != ""
}

// printErrorLines prints err one line per line, each prefixed with the
// command name: one line per problem, naming its flag (docs/operations.md).
func printErrorLines(w io.Writer, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		if line != "" {
			fmt.Fprintf(w, "switchboard: %s\n", line)
		}
	}
}
