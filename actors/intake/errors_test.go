package intake

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// TestErrorsAnswered: what the intake's callers are told when the store or
// the intake fails them: a code they branch on, and what failed.
func TestErrorsAnswered(t *testing.T) {
	cases := []struct {
		name string
		err  error
		code string
		says string
	}{
		{"a commit on a full store", commitError(persistence.ErrNoSpace), messages.CodeStorageFull, "no room"},
		{"a commit on a full store, wrapped", commitError(fmt.Errorf("write: %w", persistence.ErrNoSpace)), messages.CodeStorageFull, "no room"},
		{"a commit that failed otherwise", commitError(errors.New("disk on fire")), messages.CodeUnavailable, "retry with the same id"},
		{"a store call", storeError("put route", errors.New("connection refused")), messages.CodeUnavailable, "(put route)"},
		// Postgres refuses NUL or bytes not UTF-8 (an embedder's id or
		// name): the same call fails the same way again.
		{"a store call refused for its input", storeError("delete route", fmt.Errorf("postgres: %w", persistence.ErrInvalid)), messages.CodeInvalidRequest, "(delete route)"},
		{"a restart", restarted(), messages.CodeUnavailable, "restarted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var me *messages.Error
			if !errors.As(c.err, &me) || me.Code != c.code || !strings.Contains(me.Message, c.says) {
				t.Errorf("%v, want %s saying %q", c.err, c.code, c.says)
			}
		})
	}
}
