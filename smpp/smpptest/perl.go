// Package smpptest holds what tests of SMPP need: Perl's Net::SMPP scripts
// (a peer written by others) and an SMSC of this package's Session that a
// test steers. Test-only: production code never imports it.
package smpptest

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// NeedNetSMPP makes sure Perl's Net::SMPP (Debian's libnet-smpp-perl,
// which `make test` installs) is there: the interop tests need a peer
// written by others. Outside CI a missing module skips them, saying why;
// in CI (CI set) it fails them.
func NeedNetSMPP(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("perl", "-MNet::SMPP", "-e", "1").CombinedOutput(); err != nil {
		msg := "Perl's Net::SMPP is missing (apt-get install libnet-smpp-perl, or make test): " + strings.TrimSpace(string(out))
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; in CI this test fails instead")
	}
}

// Script runs a Perl script (its path) and returns a reader of its output
// lines and a wait function, which fails the test unless the script ends
// with exit 0 within 40 s and returns its standard error. A script still
// running when the test ends is killed.
func Script(t *testing.T, path string, args ...string) (*bufio.Scanner, func() string) {
	t.Helper()
	cmd := exec.Command("perl", append([]string{path}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var rest bytes.Buffer
	sc := bufio.NewScanner(io.TeeReader(out, &rest))
	wait := func() string {
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v\n%s", path, err, stderr.String())
			}
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("%s did not end\n%s", path, stderr.String())
		}
		return stderr.String()
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return sc, wait
}

// Expect reads the script's next lines and compares them.
func Expect(t *testing.T, sc *bufio.Scanner, want ...string) {
	t.Helper()
	for _, w := range want {
		if !sc.Scan() {
			t.Fatalf("the script ended before %q: %v", w, sc.Err())
		}
		if got := sc.Text(); got != w {
			t.Fatalf("script printed\n %q\nwant\n %q", got, w)
		}
	}
}

// ExpectMatch reads the script's next line, which must match re, and
// returns its submatches.
func ExpectMatch(t *testing.T, sc *bufio.Scanner, re *regexp.Regexp) []string {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("the script ended before a line matching %q: %v", re, sc.Err())
	}
	m := re.FindStringSubmatch(sc.Text())
	if m == nil {
		t.Fatalf("script printed\n %q\nwant a line matching\n %q", sc.Text(), re)
	}
	return m
}
