// Package sqlitetest opens an embedded store for a test, in the test's
// temporary directory, closed by the test's cleanup (after its deferred
// calls: actors that use the store stop first). It is for tests only;
// production code never imports it.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// Open opens a store with the default configuration in a temporary
// directory of t.
func Open(t testing.TB) *sqlite.Store {
	t.Helper()
	cfg := sqlite.DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "store.db")
	st, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("sqlitetest: open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
