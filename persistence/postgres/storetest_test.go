package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
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

// SeedCredential implements storetest.CredentialSeeder.
func (s seedingStore) SeedCredential(ctx context.Context, c messages.Credential) error {
	_, err := s.pool.Exec(ctx, "INSERT INTO credentials (name, role, token_sha256, created_at) VALUES ($1, $2, $3, $4)",
		c.Name, string(c.Role), c.TokenHash, norm(c.CreatedAt))
	return err
}

// Recount implements storetest.Recounter.
func (s seedingStore) Recount(ctx context.Context) (counted, maintained persistence.Counts, err error) {
	if s.closed.Load() {
		return nil, nil, persistence.ErrClosed
	}
	counted, maintained = persistence.Counts{}, persistence.Counts{}
	b := &pgx.Batch{}
	b.Queue(`SELECT 'state', state, count(*) FROM messages GROUP BY state
		UNION ALL SELECT kind, target, count(*) FROM outbox GROUP BY kind, target`).Query(scanCounts(counted))
	b.Queue(readCountsSQL).Query(scanCounts(maintained))
	err = s.pool.SendBatch(ctx, b).Close()
	return counted, maintained, err
}

// Orphans implements storetest.ReferenceChecker.
func (s seedingStore) Orphans(ctx context.Context) ([]string, error) {
	if s.closed.Load() {
		return nil, persistence.ErrClosed
	}
	rows, err := s.pool.Query(ctx, storetest.OrphansSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// UnholdHistory implements storetest.HistoryRewinder.
func (s seedingStore) UnholdHistory(ctx context.Context, id string, keep int) error {
	for _, q := range storetest.UnholdHistorySQL(keep) {
		if _, err := s.pool.Exec(ctx, q, id); err != nil {
			return err
		}
	}
	return nil
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store {
		return seedingStore{open(t, pgtest.DSN(t))}
	})
}
