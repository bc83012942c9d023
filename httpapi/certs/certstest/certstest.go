// Package certstest rotates a node's certificate in tests: a new one from
// the same CA, put in place the way a deployment tool does. Test-only:
// never imported by production code.
package certstest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/httpapi/certs"
)

// Reissue writes a new certificate for node, signed by the CA of caDir
// (its ca.pem and ca.key, as certs.InitCA writes them), to certFile and
// keyFile: made aside, then renamed into place, key first. A reload in
// between sees a pair that does not match and keeps the old one until the
// certificate follows.
func Reissue(t testing.TB, caDir, certFile, keyFile, node string) {
	t.Helper()
	other := t.TempDir()
	for _, f := range []string{"ca.pem", "ca.key"} {
		data, err := os.ReadFile(filepath.Join(caDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(other, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := certs.InitCA(other, []string{node}, time.Now()); err != nil {
		t.Fatal(err)
	}
	newCert, newKey := certs.NodeFiles(other, node)
	Replace(t, [2]string{newKey, keyFile}, [2]string{newCert, certFile})
}

// Replace puts a copy of each pair's first file in place of its second,
// in order: written aside, then renamed into place, as a deployment tool
// does, so that a reload never reads a file half written.
func Replace(t testing.TB, pairs ...[2]string) {
	t.Helper()
	for _, p := range pairs {
		data, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1]+".new", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p[1]+".new", p[1]); err != nil {
			t.Fatal(err)
		}
	}
}
