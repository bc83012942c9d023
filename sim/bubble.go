package sim

import (
	"errors"
	"flag"
	"io"
	"os"
	"reflect"
	"regexp"
	"testing"
	"testing/synctest"
	"time"
)

// Every run happens inside a testing/synctest bubble: a fake clock that
// starts at 2000-01-01 and advances only when every goroutine of the run
// is durably blocked (on a channel, a timer, a sleep), so minutes of the
// nodes' production intervals pass in the wall time their work takes. A
// bubble whose goroutines are all blocked with no timer pending is a
// deadlock, and synctest fails the run; every goroutine a run starts must
// have ended when it returns.
//
// synctest needs a *testing.T. Tests have one (RunIn); a program
// (cmd/sim) gets one from Main.

// RunIn runs one sim in a bubble, as t's subtest name: the report of Run,
// or ok false when the bubble failed (a deadlock, a goroutine left
// behind; t's output says which).
func RunIn(t *testing.T, name string, seed int64, opts Options) (rep Report, err error, ok bool) {
	begin := time.Now()
	ok = t.Run(name, func(t *testing.T) {
		synctest.Test(t, func(*testing.T) {
			rep, err = Run(seed, opts)
			// Goroutines that end on a timer after the nodes stopped
			// (protoactor's dead-letter throttle) need the clock to move:
			// once this function returns it no longer does, and any
			// goroutine left then fails the run. A minute of virtual time
			// costs nothing; a goroutine that never ends still fails it.
			time.Sleep(time.Minute)
		})
	})
	rep.Wall = time.Since(begin)
	return rep, err, ok
}

// Main runs body with a *testing.T in a program that is not a test
// binary, through testing.MainStart (meant for go test's generated
// mains and not covered by the Go 1 promise: its signature is the one of
// the Go release go.mod names). The testing package's own lines (PASS,
// FAIL, a failed bubble's report) go to stderr; body writes to out, the
// process's standard output. It returns body's exit code, or 2 when the
// testing package failed body's test (a bubble that deadlocked).
func Main(out io.Writer, body func(t *testing.T, out io.Writer) int) int {
	code := 2
	tests := []testing.InternalTest{{Name: "sim", F: func(t *testing.T) { code = body(t, out) }}}
	m := testing.MainStart(testDeps{}, tests, nil, nil, nil)
	// The testing flags are registered on the command line's flag set;
	// the program parses its own flags, so none reach them.
	if err := flag.CommandLine.Parse(nil); err != nil {
		return 2
	}
	stdout := os.Stdout
	os.Stdout = os.Stderr
	defer func() { os.Stdout = stdout }()
	if m.Run() != 0 && code == 0 {
		code = 2
	}
	return code
}

// testDeps is what testing.MainStart needs of a test binary's main: no
// profiles, coverage or fuzzing.
type testDeps struct{}

var errNotSupported = errors.New("sim: not supported outside go test")

func (testDeps) ImportPath() string { return "github.com/switchboard-dev/switchboard/cmd/sim" }
func (testDeps) ModulePath() string { return "github.com/switchboard-dev/switchboard" }
func (testDeps) MatchString(pat, str string) (bool, error) {
	return regexp.MatchString(pat, str)
}
func (testDeps) SetPanicOnExit0(bool)                        {}
func (testDeps) StartCPUProfile(io.Writer) error             { return errNotSupported }
func (testDeps) StopCPUProfile()                             {}
func (testDeps) StartTestLog(io.Writer)                      {}
func (testDeps) StopTestLog() error                          { return nil }
func (testDeps) WriteProfileTo(string, io.Writer, int) error { return errNotSupported }
func (testDeps) CoordinateFuzzing(time.Duration, int64, time.Duration, int64, int, []corpusEntry, []reflect.Type, string, string) error {
	return errNotSupported
}
func (testDeps) RunFuzzWorker(func(corpusEntry) error) error { return errNotSupported }
func (testDeps) ReadCorpus(string, []reflect.Type) ([]corpusEntry, error) {
	return nil, errNotSupported
}
func (testDeps) CheckCorpus([]any, []reflect.Type) error { return nil }
func (testDeps) ResetCoverage()                          {}
func (testDeps) SnapshotCoverage()                       {}
func (testDeps) InitRuntimeCoverage() (string, func(string, string) (string, error), func() float64) {
	return "", nil, nil
}

// corpusEntry is the testing package's corpus entry (an alias of this
// struct there).
type corpusEntry = struct {
	Parent     string
	Path       string
	Data       []byte
	Values     []any
	Generation int
	IsSeed     bool
}
