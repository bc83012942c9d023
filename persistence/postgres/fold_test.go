package postgres

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/persistence/storetest"
)

// TestFoldWithinATransactionKeepsLastAt: see storetest.FoldWithinATransaction.
func TestFoldWithinATransactionKeepsLastAt(t *testing.T) {
	s := withFE(t, open(t, pgtest.DSN(t)))
	storetest.FoldWithinATransaction(t, s, "fe", func(now time.Time, id string, decide func(*persistence.Loaded, *persistence.Changes)) error {
		p := decidePart(now, []string{id}, decide)
		b := &pgx.Batch{}
		p.queue(b)
		return s.inTx(t.Context(), b, func(tx pgx.Tx) error { return p.run(t.Context(), tx) })
	})
}
