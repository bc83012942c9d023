package postgres

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/persistence"
)

const (
	// leaderCheckInterval is how often a held leadership checks its
	// connection (1 s): a lock lost with a broken connection is noticed
	// within about this plus leaderCheckTimeout.
	leaderCheckInterval = time.Second
	// leaderCheckTimeout bounds one check (5 s): a connection that cannot
	// answer SELECT 1 in that time is as good as lost, and its lock with it
	// as far as the holder can tell (a cancelled query may cost the
	// connection). Long enough to ride out a slow moment of the server.
	leaderCheckTimeout = 5 * time.Second
	// leaderCloseTimeout bounds unlocking and closing the connection when a
	// leadership ends without a context of its own (Store.Close), in
	// seconds (5 s). Closing the connection frees the lock anyway.
	leaderCloseTimeout = 5 * time.Second
)

// sessionKeepalives are the server's TCP keepalive settings of a lock's
// session (idle 5 s, then a probe every 2 s, 3 unanswered: ~11 s). A holder
// whose host dies or is cut off without closing its connection sends
// nothing more; the server ends the session, and frees the lock for the
// next master, only when TCP notices: with the operating system's defaults
// (tcp_keepalives_idle 0: Linux's two hours) that would leave the site
// without a master, and the dead holder's ranges frozen, for over two
// hours. The holder's own side gives up much sooner (leaderCheckTimeout).
// The pool's sessions have them too, unless the DSN sets its own (Open),
// so that the server also frees the slots and locks of a dead instance's
// other sessions in seconds (see orphanSettings).
var sessionKeepalives = map[string]string{
	"tcp_keepalives_idle":     "5",
	"tcp_keepalives_interval": "2",
	"tcp_keepalives_count":    "3",
}

var _ persistence.Elector = (*Store)(nil)

// LockKey is the advisory lock key of the elector's lock name (the ring
// master's, "instance/<id>") in schema: a 64-bit FNV-1a
// hash of "switchboard:"+schema+":"+name. Advisory locks belong to the
// whole database, so the schema (where this store's tables are) is part of
// the key: stores in other schemas of the database (other sites, parallel
// tests) do not compete for the same lock, and other users of advisory
// locks are unlikely to collide with it. pg_locks shows it split in two,
// (classid::bigint << 32) | objid::bigint with objsubid 1: with the key, a
// query there finds the session that holds a lock (the tests do).
func LockKey(schema, name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("switchboard:" + schema + ":" + name))
	return int64(h.Sum64())
}

// sessionSQL reads what a lock's session is known by: the schema (part of
// the lock's key) and the session itself, its backend's process id and
// start, which together name it among every session the server has had
// (a process id alone may come back for a later one).
const sessionSQL = `
SELECT current_schema(), pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`

// TryLead implements persistence.Elector: a session advisory lock on a
// connection of its own (not the pool's: a pooled connection goes back and
// forth between callers, and the lock is the session's). The lock lasts
// while that connection does.
func (s *Store) TryLead(ctx context.Context, name string) (persistence.Leadership, error) {
	const op = "try lead"
	if name == "" {
		return nil, errors.New("postgres: try lead: empty name")
	}
	if s.closed.Load() {
		return nil, s.fail(op, persistence.ErrClosed)
	}
	cc := s.pool.Config().ConnConfig.Copy()
	for k, v := range sessionKeepalives {
		cc.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, s.fail(op, err)
	}
	var (
		schema  string
		pid     int32
		started time.Time
	)
	if err := conn.QueryRow(ctx, sessionSQL).Scan(&schema, &pid, &started); err != nil {
		closeConn(conn)
		return nil, s.fail(op, err)
	}
	key := LockKey(schema, name)
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got); err != nil || !got {
		closeConn(conn)
		if err != nil {
			return nil, s.fail(op, err)
		}
		return nil, nil
	}
	l := &leadership{store: s, name: name, key: key, conn: conn, pid: pid, started: started,
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	s.leadersMu.Lock()
	if s.closed.Load() {
		s.leadersMu.Unlock()
		closeConn(conn)
		return nil, s.fail(op, persistence.ErrClosed)
	}
	if s.leaders == nil {
		s.leaders = map[*leadership]bool{}
	}
	s.leaders[l] = true
	s.leadersMu.Unlock()
	go l.watch()
	s.log.Info("leadership taken", "name", name)
	return l, nil
}

// releaseLeaders releases every leadership still held (Store.Close).
func (s *Store) releaseLeaders() {
	s.leadersMu.Lock()
	held := make([]*leadership, 0, len(s.leaders))
	for l := range s.leaders {
		held = append(held, l)
	}
	s.leadersMu.Unlock()
	for _, l := range held {
		ctx, cancel := context.WithTimeout(context.Background(), leaderCloseTimeout)
		_ = l.Release(ctx)
		cancel()
	}
}

// leadership is a held advisory lock. watch owns the connection until it
// returns; then end (once) unlocks and closes it.
type leadership struct {
	store *Store
	name  string
	key   int64
	conn  *pgx.Conn
	// pid and started name the session that holds the lock (sessionSQL),
	// so that a transaction on another connection can confirm it holds
	// the lock still (heldSQL).
	pid     int32
	started time.Time

	lost     chan struct{} // closed when the lock is lost or released
	stop     chan struct{} // closed to stop watch
	done     chan struct{} // closed when watch has returned
	stopOnce sync.Once
	endOnce  sync.Once
	endErr   error
}

// Lost implements persistence.Leadership.
func (l *leadership) Lost() <-chan struct{} { return l.lost }

// Release implements persistence.Leadership. It is idempotent.
func (l *leadership) Release(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	return l.end(ctx, true)
}

// watch checks the connection every leaderCheckInterval until stopped or
// the check fails; then the lock counts as lost.
func (l *leadership) watch() {
	defer close(l.done)
	t := time.NewTicker(leaderCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), leaderCheckTimeout)
		_, err := l.conn.Exec(ctx, "SELECT 1")
		cancel()
		if err != nil {
			l.store.log.Warn("leadership lost", "name", l.name, "err", err.Error())
			ctx, cancel := context.WithTimeout(context.Background(), leaderCloseTimeout)
			_ = l.end(ctx, false)
			cancel()
			return
		}
	}
}

// end gives the lock up (unlock when asked and the connection still works),
// closes the connection and Lost, once; the first call's error sticks.
func (l *leadership) end(ctx context.Context, unlock bool) error {
	l.endOnce.Do(func() {
		if unlock && !l.conn.IsClosed() {
			if _, err := l.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", l.key); err != nil {
				l.endErr = l.store.fail("release leadership", err)
			}
		}
		l.endErr = errors.Join(l.endErr, l.conn.Close(ctx))
		close(l.lost)
		l.store.leadersMu.Lock()
		delete(l.store.leaders, l)
		l.store.leadersMu.Unlock()
		if unlock {
			l.store.log.Info("leadership released", "name", l.name)
		}
	})
	return l.endErr
}

// closeConn closes a connection that holds nothing worth waiting for.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), leaderCloseTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}
