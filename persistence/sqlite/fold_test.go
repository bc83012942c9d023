package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/storetest"
)

// TestFoldWithinATransactionKeepsLastAt: see storetest.FoldWithinATransaction.
func TestFoldWithinATransactionKeepsLastAt(t *testing.T) {
	ctx := context.Background()
	s := withFE(t, openAt(t, filepath.Join(t.TempDir(), "s.db"), nil))
	storetest.FoldWithinATransaction(t, s, "fe", func(now time.Time, id string, decide func(*persistence.Loaded, *persistence.Changes)) error {
		return s.write(ctx, "test", func(tx querier) error {
			l := persistence.NewLoaded()
			if err := load(ctx, tx, l, []string{id}, false); err != nil {
				return err
			}
			c := persistence.NewChanges(now)
			decide(l, c)
			return writeChanges(ctx, tx, c)
		})
	})
}
