package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/polltest"
)

// gate is a Sync that can be held shut: while shut, syncs wait; each sync
// records the -wal file's size when it began (what it makes durable).
type gate struct {
	mu     sync.Mutex
	open   chan struct{} // closed while the gate is open
	synced atomic.Int64  // size covered by the last sync that returned
	calls  atomic.Int64
	fail   atomic.Pointer[error]
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gate) sync(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	<-open
	g.calls.Add(1)
	if p := g.fail.Load(); p != nil {
		return *p
	}
	if err := SyncData(f); err != nil {
		return err
	}
	g.synced.Store(fi.Size())
	return nil
}

// openGated opens a store at path whose syncs go through g; checkpoints are
// off, so the WAL only grows and a cut at a synced size is a power cut.
func openGated(t *testing.T, path string, g *gate, onFatal func(error)) *Store {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Path, cfg.Sync, cfg.Checkpoint, cfg.OnFatal = path, g.sync, -1, onFatal
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		g.release()
		if err := s.Close(); err != nil && !errors.Is(err, persistence.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func pending(id string) persistence.NewMessage {
	return persistence.NewMessage{ID: id, State: messages.StatePending, Frontend: "fe", Detail: "accepted",
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe"}}
}

// returns reports whether f returns within d (f keeps running otherwise).
func returns(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// deleteGone deletes the message "gone" with its work, as a purge would.
func deleteGone(ctx context.Context, tx querier) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE message_id = 'gone'`); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE id = 'gone'`)
	return err
}

// awaitGoneCommitted waits until a reader no longer sees "gone" (the
// delete committed, whether or not it is synced).
func awaitGoneCommitted(t *testing.T, s *Store) {
	t.Helper()
	polltest.Until(t, 10*time.Second, "the delete's commit", func() bool {
		var n int
		_ = s.rdb.QueryRow(`SELECT count(*) FROM messages WHERE id = 'gone'`).Scan(&n)
		return n == 0
	})
}

// verdictOnGone starts a write that fails with ErrNotFound when it reads
// no "gone" (a verdict on what it read) and returns its answer's channel.
func verdictOnGone(ctx context.Context, s *Store) chan error {
	verdict := make(chan error, 1)
	go func() {
		verdict <- s.write(ctx, "verdict", func(tx querier) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM messages WHERE id = 'gone'`).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return persistence.ErrNotFound
			}
			return nil
		})
	}()
	return verdict
}

// TestNothingLeavesBeforeItsSync holds the WAL's sync back: a write whose
// commit is not durable does not return, and neither does a read that may
// see it (a duplicate submit's answer is built from such a read), until
// the sync is let through. Batches meanwhile still execute.
func TestNothingLeavesBeforeItsSync(t *testing.T) {
	g := newGate()
	s := withFE(t, openGated(t, filepath.Join(t.TempDir(), "s.db"), g, nil))
	ctx := context.Background()
	if _, err := s.Accept(ctx, time.Now(), []persistence.NewMessage{pending("before"), pending("gone")}); err != nil {
		t.Fatal(err)
	}

	g.shut()
	accepted := make(chan error, 1)
	go func() {
		_, err := s.Accept(ctx, time.Now(), []persistence.NewMessage{pending("held")})
		accepted <- err
	}()
	// The commit happens (a reader sees the row) while its sync is held.
	polltest.Until(t, 10*time.Second, "the held commit", func() bool {
		var n int
		_ = s.rdb.QueryRow(`SELECT count(*) FROM messages WHERE id = 'held'`).Scan(&n)
		return n == 1
	})
	select {
	case err := <-accepted:
		t.Fatalf("Accept returned (%v) before its commit was synced", err)
	case <-time.After(200 * time.Millisecond):
	}
	for name, read := range map[string]func(){
		"GetMessage":   func() { _, _ = s.GetMessage(ctx, "held") },
		"ListMessages": func() { _, _ = s.ListMessages(ctx, persistence.ListQuery{Limit: 10}) },
		"Stats":        func() { _, _ = s.Stats(ctx) },
		"Accept of the same id": func() {
			_, _ = s.Accept(ctx, time.Now(), []persistence.NewMessage{pending("held")})
		},
	} {
		if returns(100*time.Millisecond, read) {
			t.Errorf("%s returned while the commit it may see was not durable", name)
		}
	}
	// A later write executes (and commits) while the first one's sync is
	// held. It deletes a message, as a purge does: a read that no longer
	// finds it is an answer built from that commit too (a 404).
	ran := make(chan struct{})
	later := make(chan error, 1)
	go func() {
		later <- s.write(ctx, "later", func(tx querier) error {
			close(ran)
			if err := deleteGone(ctx, tx); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO routes (prefix, frontend, updated_at) VALUES ('9', 'fe', 0)`)
			return err
		})
	}()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a write queued behind a held sync did not execute")
	}
	awaitGoneCommitted(t, s)
	if returns(100*time.Millisecond, func() { _, _ = s.GetMessage(ctx, "gone") }) {
		t.Error("GetMessage answered not found while the commit that deleted the message was not durable")
	}
	// So is a write's verdict on what it read: a write that fails (alone
	// in its transaction, which is rolled back) because the message is
	// gone.
	verdict := verdictOnGone(ctx, s)
	var verdictErr error
	answered := false
	select {
	case verdictErr = <-verdict:
		answered = true
		t.Errorf("a write answered %v while the commit it read was not durable", verdictErr)
	case <-time.After(200 * time.Millisecond):
	}
	select {
	case err := <-later:
		t.Fatalf("the later write returned (%v) before its sync", err)
	case <-time.After(100 * time.Millisecond):
	}

	g.release()
	if err := <-accepted; err != nil {
		t.Fatalf("Accept after the sync: %v", err)
	}
	if err := <-later; err != nil {
		t.Errorf("the later write: %v", err)
	}
	if m, err := s.GetMessage(ctx, "held"); err != nil || m.ID != "held" {
		t.Errorf("GetMessage after the sync: %v", err)
	}
	if _, err := s.GetMessage(ctx, "gone"); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("GetMessage of the deleted message after the sync: %v, want ErrNotFound", err)
	}
	if !answered {
		verdictErr = <-verdict
	}
	if !errors.Is(verdictErr, persistence.ErrNotFound) {
		t.Errorf("the write's verdict after the sync: %v, want ErrNotFound", verdictErr)
	}
}

// TestPowerCutLosesNothingAnswered writes from several goroutines, cuts
// the WAL back to what the last sync covered while syncs are held (what a
// power cut leaves: kill -9 would keep the page cache), and opens the copy:
// every write that returned is there.
func TestPowerCutLosesNothingAnswered(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	g := newGate()
	s := withFE(t, openGated(t, path, g, nil))
	ctx := context.Background()

	var mu sync.Mutex
	var answered []string
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%04d", w, i)
				if _, err := s.Accept(ctx, time.Now(), []persistence.NewMessage{pending(id)}); err != nil {
					return // the store closed under us at the end
				}
				mu.Lock()
				answered = append(answered, id)
				mu.Unlock()
			}
		}()
	}
	polltest.Until(t, 10*time.Second, "some answered writes", func() bool { mu.Lock(); defer mu.Unlock(); return len(answered) > 200 })
	g.shut()
	polltest.Until(t, 10*time.Second, "a commit held back", func() bool { return s.commitSeq.Load() > s.wal.synced.Load() })
	mu.Lock()
	done := append([]string(nil), answered...)
	mu.Unlock()

	// The power cut: the database as it is, the WAL as far as synced.
	cut := filepath.Join(t.TempDir(), "cut.db")
	copyFile(t, path, cut, -1)
	copyFile(t, path+"-wal", cut+"-wal", g.synced.Load())
	close(stop)
	g.release()
	wg.Wait()

	after := withFE(t, openAt(t, cut, nil))
	for _, id := range done {
		if _, err := after.GetMessage(ctx, id); err != nil {
			t.Fatalf("answered write %s lost in the power cut: %v", id, err)
		}
	}
	st, err := after.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d answered before the cut, %d pending after it", len(done), st.ByState[messages.StatePending])
}

func copyFile(t *testing.T, from, to string, size int64) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader = in
	if size >= 0 {
		r = io.LimitReader(in, size)
	}
	if _, err := io.Copy(out, r); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFailedSyncStopsTheStore: the writes waiting for a failed sync fail,
// OnFatal is told, and every later write fails without retrying the sync.
func TestFailedSyncStopsTheStore(t *testing.T) {
	g := newGate()
	fatal := make(chan error, 1)
	s := withFE(t, openGated(t, filepath.Join(t.TempDir(), "s.db"), g, func(err error) { fatal <- err }))
	ctx := context.Background()
	boom := errors.New("disk on fire")
	g.fail.Store(&boom)
	if _, err := s.Accept(ctx, time.Now(), []persistence.NewMessage{pending("x")}); err == nil || !errors.Is(err, errBroken) {
		t.Fatalf("Accept whose sync failed: %v, want the store broken", err)
	}
	select {
	case err := <-fatal:
		if !errors.Is(err, errBroken) {
			t.Errorf("OnFatal(%v), want the store broken", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnFatal not called")
	}
	calls := g.calls.Load()
	if _, err := s.Accept(ctx, time.Now(), []persistence.NewMessage{pending("y")}); err == nil {
		t.Error("a write after the failed sync succeeded")
	}
	if _, err := s.GetMessage(ctx, "x"); err == nil {
		t.Error("a read after the failed sync succeeded")
	}
	if g.calls.Load() != calls {
		t.Error("the failed sync was retried")
	}
}

// TestWritesShareTransactions: writes queued while the writer is busy
// commit together, and a job that fails rolls back only itself.
func TestWritesShareTransactions(t *testing.T) {
	g := newGate()
	s := withFE(t, openGated(t, filepath.Join(t.TempDir(), "s.db"), g, nil))
	registered := s.commitSeq.Load() // withFE's
	ctx := context.Background()
	// A job that holds the writer until the others are queued.
	hold, running := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.write(ctx, "hold", func(querier) error { close(running); <-hold; return nil })
	}()
	<-running
	released := false
	defer func() {
		if !released {
			close(hold) // a failed wait below must not leave the writer held
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 7 {
				errs[i] = s.write(ctx, "fails", func(tx querier) error {
					if _, err := tx.ExecContext(ctx, `INSERT INTO routes (prefix, frontend, updated_at) VALUES ('7', 'fe', 0)`); err != nil {
						return err
					}
					return errors.New("this job fails after writing")
				})
				return
			}
			_, errs[i] = s.Accept(ctx, time.Now(), []persistence.NewMessage{pending(fmt.Sprint("m", i))})
		}()
	}
	polltest.Until(t, 10*time.Second, "the writes to queue", func() bool { return len(s.jobs) == 20 })
	close(hold)
	released = true
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if (err != nil) != (i == 7) {
			t.Errorf("write %d: %v", i, err)
		}
	}
	if n := s.commitSeq.Load() - registered; n != 1 {
		t.Errorf("%d commits for a held write and 20 queued behind it, want 1 (they join its batch)", n)
	}
	if routes, err := s.Routes(ctx); err != nil || len(routes) != 0 {
		t.Errorf("routes %v, %v: the failed job's insert must be rolled back", routes, err)
	}
	if st, err := s.Stats(ctx); err != nil || st.ByState[messages.StatePending] != 19 {
		t.Errorf("pending %d, %v; want the 19 other writes", st.ByState[messages.StatePending], err)
	}
}

// TestBackgroundWriteGoesBehind: a background write (the cleaner's batch)
// queued before other writes runs after them, in the next transaction,
// and the writes that queue while it runs join that transaction.
func TestBackgroundWriteGoesBehind(t *testing.T) {
	g := newGate()
	s := withFE(t, openGated(t, filepath.Join(t.TempDir(), "s.db"), g, nil))
	registered := s.commitSeq.Load() // withFE's
	ctx := context.Background()
	var mu sync.Mutex
	var order []string
	ran := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, name)
	}
	hold, running := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 5)
	go func() {
		errs <- s.write(ctx, "hold", func(querier) error { ran("hold"); close(running); <-hold; return nil })
	}()
	<-running
	// A failed wait below must not leave the writer held.
	releaseHold := sync.OnceFunc(func() { close(hold) })
	defer releaseHold()
	bHold, bRunning := make(chan struct{}), make(chan struct{})
	releaseB := sync.OnceFunc(func() { close(bHold) })
	defer releaseB()
	go func() {
		errs <- s.writeBehind(ctx, "background", func(querier) error { ran("background"); close(bRunning); <-bHold; return nil })
	}()
	polltest.Until(t, 10*time.Second, "the background write to queue", func() bool { return len(s.jobs) == 1 })
	for i, name := range []string{"f1", "f2"} {
		go func() {
			errs <- s.write(ctx, name, func(querier) error { ran(name); return nil })
		}()
		n := i + 2 // the background write and those before this one
		polltest.Until(t, 10*time.Second, name+" to queue", func() bool { return len(s.jobs) == n })
	}
	releaseHold()
	select {
	case <-bRunning:
	case <-time.After(10 * time.Second):
		t.Fatal("the background write never ran")
	}
	go func() {
		errs <- s.write(ctx, "f3", func(querier) error { ran("f3"); return nil })
	}()
	// Only f3 is queued now: f1 and f2 ran before the background write.
	polltest.Until(t, 10*time.Second, "f3 alone to queue", func() bool { return len(s.jobs) == 1 })
	releaseB()
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(order, " "); got != "hold f1 f2 background f3" {
		t.Errorf("writes ran as %q, want hold f1 f2 background f3 (the background write behind those queued with it)", got)
	}
	if n := s.commitSeq.Load() - registered; n != 2 {
		t.Errorf("%d commits, want 2: hold with f1 and f2, then the background write with f3 (queued while it ran)", n)
	}
}

// TestFirstJobFailsAlone: the first job of a transaction runs without a
// savepoint; when it fails after writing, its writes are rolled back and
// the job queued behind it commits in the transaction begun again.
func TestFirstJobFailsAlone(t *testing.T) {
	g := newGate()
	s := withFE(t, openGated(t, filepath.Join(t.TempDir(), "s.db"), g, nil))
	registered := s.commitSeq.Load() // withFE's
	ctx := context.Background()
	hold, running := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.write(ctx, "fails", func(tx querier) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO routes (prefix, frontend, updated_at) VALUES ('1', 'fe', 0)`); err != nil {
				return err
			}
			close(running)
			<-hold
			return errors.New("this job fails after writing")
		})
	}()
	<-running
	next := make(chan error, 1)
	go func() {
		_, err := s.Accept(ctx, time.Now(), []persistence.NewMessage{pending("after")})
		next <- err
	}()
	polltest.Until(t, 10*time.Second, "the second write to queue", func() bool { return len(s.jobs) == 1 })
	close(hold)
	if err := <-held; err == nil {
		t.Error("the failing job reported no error")
	}
	if err := <-next; err != nil {
		t.Errorf("the write behind it: %v", err)
	}
	if n := s.commitSeq.Load() - registered; n != 1 {
		t.Errorf("%d commits, want 1", n)
	}
	if routes, err := s.Routes(ctx); err != nil || len(routes) != 0 {
		t.Errorf("routes %v, %v: the failed job's insert must be rolled back", routes, err)
	}
	if _, err := s.GetMessage(ctx, "after"); err != nil {
		t.Errorf("the write behind the failed one: %v", err)
	}
}

// TestWALStaysBounded: a -wal file that grew (here: a long read held a
// snapshot while commits went on, so no checkpoint could copy past it) is
// truncated once it is past WALLimit and the checkpoints can catch up. A
// PASSIVE checkpoint alone would leave it at its size (and under steady
// traffic never start it over: see checkpointLoop).
func TestWALStaysBounded(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "wal.db")
	cfg.Checkpoint = 5 * time.Millisecond
	cfg.WALLimit = 256 << 10
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	withFE(t, s)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	accept := func(prefix string, n int) {
		for i := range n {
			m := persistence.NewMessage{ID: fmt.Sprintf("%s-%05d", prefix, i), State: messages.StatePending, Frontend: "fe",
				Body: strings.Repeat("b", 500), Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: "fe"}}
			if _, err := s.Accept(ctx, now, []persistence.NewMessage{m}); err != nil {
				t.Fatal(err)
			}
		}
	}
	walSize := func() int64 {
		fi, err := os.Stat(cfg.Path + "-wal")
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	// A read that holds its snapshot while 300 commits go on.
	rtx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := rtx.QueryRowContext(ctx, `SELECT count(*) FROM messages`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	accept("held", 300)
	grown := walSize()
	if grown < 1<<20 {
		t.Fatalf("the -wal file is %d bytes after 300 commits behind a held read, want it grown past 1 MiB", grown)
	}
	_ = rtx.Rollback()
	// The read ended: the checkpoints copy everything, and the file is cut
	// back, while commits go on.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; walSize() > 2*cfg.WALLimit; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the -wal file is still %d bytes (was %d), limit %d", walSize(), grown, cfg.WALLimit)
		}
		accept(fmt.Sprintf("after-%d", i), 5)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFailedSyncWithholdsVerdicts: when the sync a verdict waits for
// fails, the verdict (not found, from a delete that was never made
// durable) does not leave: the read and the write that saw the delete
// report the store broken instead.
func TestFailedSyncWithholdsVerdicts(t *testing.T) {
	g := newGate()
	s := withFE(t, openGated(t, filepath.Join(t.TempDir(), "s.db"), g, nil))
	ctx := context.Background()
	if _, err := s.Accept(ctx, time.Now(), []persistence.NewMessage{pending("gone")}); err != nil {
		t.Fatal(err)
	}
	g.shut()
	boom := errors.New("disk on fire")
	g.fail.Store(&boom)
	deleted := make(chan error, 1)
	go func() {
		deleted <- s.write(ctx, "delete", func(tx querier) error { return deleteGone(ctx, tx) })
	}()
	awaitGoneCommitted(t, s)
	read := make(chan error, 1)
	go func() { _, err := s.GetMessage(ctx, "gone"); read <- err }()
	verdict := verdictOnGone(ctx, s)
	time.Sleep(100 * time.Millisecond) // let both reach their wait
	g.release()
	for name, ch := range map[string]chan error{"the delete": deleted, "GetMessage": read, "the verdict": verdict} {
		select {
		case err := <-ch:
			if !errors.Is(err, errBroken) || errors.Is(err, persistence.ErrNotFound) {
				t.Errorf("%s after the failed sync: %v, want the store broken", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not return after the failed sync", name)
		}
	}
}

// TestWriteRacingCloseIsAnswered: a write that passed the closed check
// just before Close, and whose job went into the queue after the writer's
// last look at it, is answered ErrClosed rather than left waiting.
func TestWriteRacingCloseIsAnswered(t *testing.T) {
	s := withFE(t, openGated(t, filepath.Join(t.TempDir(), "s.db"), newGate(), nil))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// As if check() had passed before Close: the send and the closing
	// case are both ready, and either may win; both must end.
	s.closed.Store(false)
	defer s.closed.Store(true)
	for range 50 {
		if !returns(5*time.Second, func() {
			if err := s.write(context.Background(), "racing", func(querier) error { return nil }); !errors.Is(err, persistence.ErrClosed) {
				t.Errorf("a write racing Close: %v, want ErrClosed", err)
			}
		}) {
			t.Fatal("a write racing Close was never answered")
		}
	}
}

// TestCancelledCallerFailsOnlyItself: a caller whose context ends while
// its job's statement runs does not interrupt that statement (SQLite would
// roll the whole shared transaction back, every other job's work with
// it): the jobs it shares the transaction with commit.
func TestCancelledCallerFailsOnlyItself(t *testing.T) {
	s := withFE(t, openGated(t, filepath.Join(t.TempDir(), "s.db"), newGate(), nil))
	ctx := context.Background()
	// A job holds the writer so that the others queue into one round.
	hold, running := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.write(ctx, "hold", func(querier) error {
			close(running)
			<-hold
			return nil
		})
	}()
	<-running
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Accept(ctx, time.Now(), []persistence.NewMessage{pending(fmt.Sprint("m", i))})
		}()
	}
	polltest.Until(t, 10*time.Second, "the accepts queued", func() bool { return len(s.jobs) == len(errs) })
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	long := make(chan error, 1)
	go func() {
		long <- s.write(cctx, "long", func(tx querier) error {
			time.AfterFunc(20*time.Millisecond, cancel) // while the statement runs
			_, err := tx.ExecContext(cctx, `INSERT INTO routes (prefix, frontend, updated_at)
				WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 200000) SELECT 'p'||x, 'fe', 0 FROM c`)
			return err
		})
	}()
	polltest.Until(t, 10*time.Second, "the long job queued", func() bool { return len(s.jobs) == len(errs)+1 })
	close(hold)
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatalf("the holding job: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("accept %d, in the round of a job whose caller gave up: %v", i, err)
		}
	}
	if err := <-long; err != nil {
		t.Errorf("the long job ran to its end and stands: %v", err)
	}
	for i := range errs {
		if _, err := s.GetMessage(ctx, fmt.Sprint("m", i)); err != nil {
			t.Errorf("m%d: %v", i, err)
		}
	}
}

// TestBrokenStoreClosesWithoutCheckpoint: once an fsync failed, closing
// the store does not checkpoint its WAL into the database (the last
// connection to close would, and delete the WAL): frames whose sync failed
// must not be copied through a descriptor that reports success. The WAL
// stays, the database file is as it was, and the restart reads back what
// the disk holds.
func TestBrokenStoreClosesWithoutCheckpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	g := newGate()
	cfg := DefaultConfig()
	cfg.Path, cfg.Sync, cfg.Checkpoint = path, g.sync, -1
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Accept(ctx, time.Now(), []persistence.NewMessage{pending("synced")}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk on fire")
	g.fail.Store(&boom)
	if _, err := s.Accept(ctx, time.Now(), []persistence.NewMessage{pending("unsynced")}); err == nil {
		t.Fatal("an accept whose sync failed succeeded")
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Logf("close of the broken store: %v", err)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("the WAL is gone after the broken store closed (checkpointed and deleted): %v", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("the database file changed as the broken store closed: the WAL was checkpointed into it")
	}
}
