package postgres

import (
	"context"
	"testing"

	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/persistence/storetest"
)

// seedingStore is the Store with the suite's LedgerSeeder hook: it writes a
// ledger entry straight into the table, a state the interface alone cannot
// build.
type seedingStore struct{ *Store }

func (s seedingStore) SeedLedger(ctx context.Context, e persistence.LedgerEntry) error {
	_, err := s.pool.Exec(ctx, "INSERT INTO ledger (message_id, kind, target, result, at, detail) VALUES ($1, $2, $3, $4, $5, $6)",
		e.MessageID, string(e.Kind), e.Target, string(e.Result), norm(e.At), e.Detail)
	return err
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store {
		return seedingStore{open(t, pgtest.DSN(t))}
	})
}
