package switchboard

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// TestStoreRefusalOfAReadIsBadInput: a read the store refuses for its
// input (persistence.ErrInvalid) is answered invalid_request (400), not
// unavailable (503, "retry"): a source key that is not its own NumberKey
// once got "the message store is unavailable" and an error log per request.
func TestStoreRefusalOfAReadIsBadInput(t *testing.T) {
	cfg := sqlite.DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "switchboard.db")
	store, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	n := &Node{log: slog.New(slog.DiscardHandler), store: store}
	n.serving.Store(&n.store) // as Start does
	g := &gateway{n: n}
	for _, q := range []persistence.ListQuery{
		{Limit: 10, Source: persistence.NumberMatch{Key: " +5"}},
		{Limit: 10, State: "lost"},
	} {
		_, err := g.Messages(context.Background(), q)
		var e *messages.Error
		if !errors.As(err, &e) || e.Code != messages.CodeInvalidRequest {
			t.Errorf("Messages(%+v): %v, want an invalid_request error", q, err)
		}
	}
	if _, err := g.Messages(context.Background(), persistence.ListQuery{Limit: 10}); err != nil {
		t.Errorf("a valid query: %v", err)
	}
}
