package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// CheckUpgradeFrom0001 checks a store opened on a database its schema 0001
// wrote (before the ledger had kinds of work) holding a delivered message id
// whose ledger entry for target has the detail "acked": the entry must now
// be a delivery entry, with no forward entry beside it, and the message not
// queued for a peer; no ring is published yet.
func CheckUpgradeFrom0001(t testing.TB, s persistence.Store, id, target string) {
	t.Helper()
	ctx := context.Background()
	e, err := s.Ledger(ctx, persistence.WorkDelivery, id, target)
	if err != nil || e.Result != persistence.ResultDelivered || e.Detail != "acked" || e.Kind != persistence.WorkDelivery {
		t.Errorf("Ledger after the upgrade = %+v, %v; want the delivery entry", e, err)
	}
	if _, err := s.Ledger(ctx, persistence.WorkForward, id, target); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("forward ledger after the upgrade: %v, want ErrNotFound", err)
	}
	if r, err := s.Ring(ctx); err != nil || r.Epoch != 0 || len(r.Owners) != 0 || r.Members != nil || !r.PublishedAt.IsZero() {
		t.Errorf("Ring after the upgrade = %+v, %v; want none", r, err)
	}
	m, err := s.GetMessage(ctx, id)
	if err != nil || m.QueuedAt != nil || m.State != messages.StateDelivered {
		t.Errorf("message after the upgrade = %+v, %v", m, err)
	}
}
