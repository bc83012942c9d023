package lock_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/persistence/lock"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/persistence/postgres"
	"github.com/switchboard-dev/switchboard/polltest"
)

// TestPostgres: the keeper on the Postgres elector (two stores, as two
// processes of a site), on the wall clock: a held lock is waited for and
// given up on, taken once its holder releases it, taken again when the
// server ends the session that held it, and released by Keep.
func TestPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	open := func() *postgres.Store {
		st, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, Logger: slog.New(slog.DiscardHandler), MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	keeper := func(st *postgres.Store, p lock.Policy) *lock.Keeper {
		k, err := lock.New(lock.Config{Elector: st, Name: "instance/p", Clock: clock.Real{}, Policy: p,
			Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, b := open(), open()

	ha, err := keeper(a, nil).Take(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Given up on while a holds it.
	var waits int
	_, err = keeper(b, steps{10 * time.Millisecond, 10 * time.Millisecond}).Take(t.Context(), func(time.Duration) { waits++ })
	var le *lock.Error
	if !errors.As(err, &le) || !errors.Is(err, lock.ErrHeld) || le.Attempts != 3 || waits != 2 {
		t.Fatalf("Take of a held lock: %v after %d waits", err, waits)
	}

	// Waited for, and taken once a lets it go.
	kb := keeper(b, steps{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond,
		time.Second, time.Second, time.Second, time.Second, time.Second, time.Second})
	out, waiting := take(t.Context(), kb)
	<-waiting
	if err := ha.Release(); err != nil {
		t.Fatal(err)
	}
	got := <-out
	if got.err != nil {
		t.Fatalf("Take after the holder released it: %v", got.err)
	}

	// The server ends b's session: Keep takes the lock again.
	sessions := pgtest.WatchSessions(t, dsn)
	key := postgres.LockKey(sessions.Schema, "instance/p")
	holder := func() int32 { return sessions.Holder(key) }
	old := holder()
	if old == 0 {
		t.Fatal("no session holds the lock")
	}
	ctx, cancel := context.WithCancel(t.Context())
	kept := make(chan error, 1)
	go func() { kept <- kb.Keep(ctx, got.h) }()
	sessions.End(old)
	polltest.Until(t, 20*time.Second, "the lock taken again by another session", func() bool {
		pid := holder()
		return pid != 0 && pid != old
	})
	cancel()
	if err := <-kept; err != nil {
		t.Fatalf("Keep: %v", err)
	}
	if pid := holder(); pid != 0 {
		t.Fatalf("session %d holds the lock after Keep released it", pid)
	}
}
