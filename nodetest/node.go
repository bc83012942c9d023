package nodetest

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/apiclient"
	"github.com/switchboard-dev/switchboard/nodetest/freeport"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
)

// binaryPackage is the package of the switchboard binary.
const binaryPackage = "github.com/switchboard-dev/switchboard/cmd/node"

// ReadyTimeout bounds a start: the node must answer /readyz 200 within it.
const ReadyTimeout = 60 * time.Second

// StopTimeout bounds a graceful stop.
const StopTimeout = 60 * time.Second

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary builds the switchboard binary once per test binary and returns
// its path. A test binary that calls it removes it with Main.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "switchboard-e2e-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "switchboard")
		out, err := exec.Command("go", "build", "-o", binPath, binaryPackage).CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// Main runs the tests and then removes the binary Binary built: a test
// binary's TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// FreeAddr is a loopback address with a port free at the time of the
// call, for a node started later with --listen (a restarted node keeps
// it): freeport.Loopback, from below the kernel's ephemeral range, so that
// no other connection is given the port before the node binds it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// DevCerts runs the binary's `certs init` for nodes (comma-separated)
// into dir/certs and returns that directory and a pool that trusts its CA.
func DevCerts(t testing.TB, bin, dir, nodes string) (string, *x509.CertPool) {
	t.Helper()
	certDir := filepath.Join(dir, "certs")
	if out, err := exec.Command(bin, "certs", "init", "--dir", certDir, "--nodes", nodes).CombinedOutput(); err != nil {
		t.Fatalf("certs init: %v\n%s", err, out)
	}
	caPEM, err := os.ReadFile(filepath.Join(certDir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no certificate in %s", filepath.Join(certDir, "ca.pem"))
	}
	return certDir, pool
}

// Env is the environment of the node's process: the test's, without the
// SWITCHBOARD_ variables a developer may have set.
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHBOARD_") {
			env = append(env, kv)
		}
	}
	return env
}

// Node is the binary run with Args (plus a run's extra flags) and a
// client of its API. Each Start is a new run; the logs (stderr) of every
// run are kept.
type Node struct {
	*Client
	T    testing.TB
	Bin  string
	Args []string

	proc *process
	runs []*logtest.Buffer
}

// NewNode is a node of the binary bin run with args (not started), with a
// client of its API through api.
func NewNode(t testing.TB, bin string, api *apiclient.Client, args ...string) *Node {
	return &Node{Client: NewClient(t, api), T: t, Bin: bin, Args: args}
}

// Start runs the binary with Args and extra and waits until the node
// answers /readyz 200; a node that exits first or is not ready within
// ReadyTimeout fails the test.
func (n *Node) Start(extra ...string) {
	n.T.Helper()
	logs := &logtest.Buffer{}
	cmd := exec.Command(n.Bin, append(slices.Clone(n.Args), extra...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, logs
	cmd.Env = Env()
	if err := cmd.Start(); err != nil {
		n.T.Fatal(err)
	}
	p := &process{cmd: cmd, logs: logs, done: make(chan error, 1), exited: make(chan struct{})}
	go func() { p.done <- cmd.Wait(); close(p.exited) }()
	n.proc = p
	n.runs = append(n.runs, logs)
	deadline := time.Now().Add(ReadyTimeout)
	for {
		if n.API.Ready(context.Background()) {
			return
		}
		select {
		case err := <-p.done:
			n.T.Fatalf("node exited during start: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			n.T.Fatalf("node not ready after %v\n%s", ReadyTimeout, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Started reports whether the node was started at least once.
func (n *Node) Started() bool { return n.proc != nil }

// Kill sends SIGKILL and waits until the process is gone.
func (n *Node) Kill() {
	n.T.Helper()
	if err := n.proc.cmd.Process.Kill(); err != nil {
		n.T.Fatal(err)
	}
	<-n.proc.done
}

// Stop sends SIGINT and expects a clean exit 0.
func (n *Node) Stop() {
	n.T.Helper()
	n.Interrupt()
	n.WaitStopped()
}

// Interrupt asks the node to stop (see WaitStopped).
func (n *Node) Interrupt() {
	n.T.Helper()
	n.Signal(os.Interrupt)
}

// Signal sends sig to the process.
func (n *Node) Signal(sig os.Signal) {
	n.T.Helper()
	if err := n.proc.cmd.Process.Signal(sig); err != nil {
		n.T.Fatal(err)
	}
}

// WaitStopped expects a clean exit 0 within StopTimeout.
func (n *Node) WaitStopped() {
	n.T.Helper()
	select {
	case err := <-n.proc.done:
		if err != nil {
			n.T.Fatalf("graceful stop: %v\n%s", err, n.proc.logs.String())
		}
	case <-time.After(StopTimeout):
		n.T.Fatalf("node did not stop within %v of SIGINT", StopTimeout)
	}
}

// End kills the process unless it is gone already, and waits until it is
// (a test's cleanup). It does nothing before the first Start.
func (n *Node) End() {
	if n.proc == nil {
		return
	}
	select {
	case <-n.proc.exited:
	default:
		_ = n.proc.cmd.Process.Kill()
		<-n.proc.exited
	}
}

// Exited is closed once the current run's process is gone.
func (n *Node) Exited() <-chan struct{} { return n.proc.exited }

// ProcessState is the state of the current run's exited process (nil while
// it runs).
func (n *Node) ProcessState() *os.ProcessState { return n.proc.cmd.ProcessState }

// Pid is the current run's process id.
func (n *Node) Pid() int { return n.proc.cmd.Process.Pid }

// Logs is what the current run has logged so far.
func (n *Node) Logs() string { return n.proc.logs.String() }

// RunLogs are the logs of every run so far, the first run's first.
func (n *Node) RunLogs() []string {
	out := make([]string, len(n.runs))
	for i, l := range n.runs {
		out[i] = l.String()
	}
	return out
}

// process is one run of the binary.
type process struct {
	cmd  *exec.Cmd
	logs *logtest.Buffer
	done chan error
	// exited is closed once the process is gone (done is read only once).
	exited chan struct{}
}
