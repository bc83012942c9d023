package postgres

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
)

// leaderWait bounds the waits for a lost lock to be noticed or freed.
const leaderWait = 15 * time.Second

// tryLead calls TryLead and fails the test on error.
func tryLead(t *testing.T, s *Store, name string) persistence.Leadership {
	t.Helper()
	l, err := s.TryLead(t.Context(), name)
	if err != nil {
		t.Fatalf("TryLead(%q): %v", name, err)
	}
	return l
}

// leadEventually polls TryLead until it gives the lock.
func leadEventually(t *testing.T, s *Store, name string) persistence.Leadership {
	t.Helper()
	deadline := time.Now().Add(leaderWait)
	for time.Now().Before(deadline) {
		if l := tryLead(t, s, name); l != nil {
			return l
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	t.Fatalf("TryLead(%q) never got the free lock", name)
	return nil
}

func wantLost(t *testing.T, l persistence.Leadership) {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(leaderWait):
		t.Fatal("Lost() not closed")
	}
}

func wantHeld(t *testing.T, l persistence.Leadership) {
	t.Helper()
	select {
	case <-l.Lost():
		t.Fatal("Lost() closed while the lock is held")
	default:
	}
}

// contested opens two stores on dsn: a takes the lock "master", b cannot.
func contested(t *testing.T, dsn string) (a, b *Store, la persistence.Leadership) {
	t.Helper()
	a, b = open(t, dsn), open(t, dsn)
	if la = tryLead(t, a, "master"); la == nil {
		t.Fatal("the first TryLead did not get the free lock")
	}
	if lb := tryLead(t, b, "master"); lb != nil {
		t.Fatal("a second session got a held lock")
	}
	return a, b, la
}

func TestTryLeadRelease(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b, la := contested(t, dsn)
	if l2 := tryLead(t, a, "other"); l2 == nil {
		t.Fatal("another name is another lock")
	} else if err := l2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, la)

	if err := la.Release(t.Context()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantLost(t, la)
	if err := la.Release(t.Context()); err != nil {
		t.Errorf("a second Release: %v", err)
	}
	lb := tryLead(t, b, "master")
	if lb == nil {
		t.Fatal("the lock is not free after Release")
	}
	wantHeld(t, lb)

	// Close gives the lock up.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	wantLost(t, lb)
	if l := leadEventually(t, a, "master"); l == nil {
		t.Fatal("unreachable")
	}
	if _, err := b.TryLead(t.Context(), "master"); err == nil {
		t.Error("TryLead on a closed store succeeded")
	}
}

func TestLeadershipLostWithItsConnection(t *testing.T) {
	dsn := pgtest.DSN(t)
	_, b, la := contested(t, dsn)

	killer, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = killer.Close(context.Background()) }()
	pid := la.(*leadership).conn.PgConn().PID()
	var killed bool
	if err := killer.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, killed, err)
	}

	wantLost(t, la)
	if lb := leadEventually(t, b, "master"); lb == nil {
		t.Fatal("unreachable")
	}
	if err := la.Release(t.Context()); err != nil {
		t.Logf("Release after the loss: %v", err) // the connection is gone; nothing to give up
	}
}

// TestLeadershipSessionKeepalives: the lock's session has the server probe
// its client (sessionKeepalives), so a holder whose host dies silently frees
// the lock in seconds, not in the operating system's two hours.
func TestLeadershipSessionKeepalives(t *testing.T) {
	s := open(t, pgtest.DSN(t))
	l := tryLead(t, s, "master")
	if l == nil {
		t.Fatal("TryLead did not get the free lock")
	}
	defer func() { _ = l.Release(context.Background()) }()
	conn := l.(*leadership).conn
	var tcp bool
	if err := conn.QueryRow(t.Context(), "SELECT inet_client_addr() IS NOT NULL").Scan(&tcp); err != nil {
		t.Fatal(err)
	}
	for name, want := range sessionKeepalives {
		var got string
		if err := conn.QueryRow(t.Context(), "SELECT current_setting($1)", name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !tcp {
			want = "0" // Postgres ignores them on a Unix socket and shows 0
		}
		if got != want {
			t.Errorf("%s = %s on the lock's session, want %s (tcp %v)", name, got, want, tcp)
		}
	}
}

// TestPublishRingAsksTheDatabaseForTheLock: a publication under a
// leadership of the store is confirmed by the server's locks, not by the
// leadership's Lost channel: once its session has ended (and another
// session took the lock) it is refused, and so is a leadership that names
// another session (the same process id, a later start) or another lock,
// each with Lost still open.
func TestPublishRingAsksTheDatabaseForTheLock(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b, la := contested(t, dsn)
	held := la.(*leadership)
	alone := func(epoch uint64) persistence.RingState {
		return persistence.RingState{Epoch: epoch, Master: "a", Owners: []persistence.RangeOwner{
			{Service: messages.ServiceDelivery, Range: messages.TokenRange{Lo: 0, Hi: math.MaxUint64}, Owner: "a"},
		}}
	}
	if err := a.PublishRing(t.Context(), la, 0, alone(1)); err != nil {
		t.Fatalf("PublishRing under the held lock: %v", err)
	}
	// forged is a leadership that the store's own would be, with Lost open.
	forged := func(key int64, pid int32, started time.Time) *leadership {
		return &leadership{name: "master", key: key, pid: pid, started: started, lost: make(chan struct{})}
	}
	var schema string
	if err := a.pool.QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*leadership{
		"a later session with the holder's process id": forged(held.key, held.pid, held.started.Add(time.Microsecond)),
		"another lock of the holder's session":         forged(LockKey(schema, "other"), held.pid, held.started),
	} {
		if err := a.PublishRing(t.Context(), l, 1, alone(2)); !errors.Is(err, persistence.ErrLeadershipLost) {
			t.Errorf("%s: PublishRing = %v, want ErrLeadershipLost", name, err)
		}
	}

	killer, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = killer.Close(context.Background()) }()
	if _, err := killer.Exec(t.Context(), "SELECT pg_terminate_backend($1)", held.pid); err != nil {
		t.Fatal(err)
	}
	lb := leadEventually(t, b, "master")
	defer func() { _ = lb.Release(context.Background()) }()
	if err := a.PublishRing(t.Context(), forged(held.key, held.pid, held.started), 1, alone(2)); !errors.Is(err, persistence.ErrLeadershipLost) {
		t.Errorf("the ended session, Lost open: PublishRing = %v, want ErrLeadershipLost", err)
	}
	if err := a.PublishRing(t.Context(), la, 1, alone(2)); !errors.Is(err, persistence.ErrLeadershipLost) {
		t.Errorf("the ended session's leadership: PublishRing = %v, want ErrLeadershipLost", err)
	}
	if err := b.PublishRing(t.Context(), lb, 1, alone(2)); err != nil {
		t.Errorf("PublishRing under the next holder's lock: %v", err)
	}
}
