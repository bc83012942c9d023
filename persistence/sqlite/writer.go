package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	sqlitedriver "modernc.org/sqlite"
)

// The writer: every write of the store is a job for one goroutine, which
// runs the jobs queued while it was busy in one transaction (each job in a
// savepoint of its own, so that one job's failure rolls back only that job)
// and commits. SQLite then only writes the commit's frames to the -wal file
// (synchronous=NORMAL): a second goroutine, the syncer, makes them durable
// with an fsync of that file while the writer already runs the next batch.
// A job is answered when the sync that covers its commit has returned;
// reads wait likewise for the commits they may have seen (awaitSynced). See
// the package doc for why this is as durable as synchronous=FULL.

// maxJobs bounds the jobs of one transaction (64): the batch of a burst,
// small enough that one transaction stays in the milliseconds.
const maxJobs = 64

// job is one write of the store: fn runs in the shared transaction.
// A background job (writeBehind) runs after the jobs queued with it.
type job struct {
	ctx        context.Context
	fn         func(tx querier) error
	background bool
	err        error
	done       chan struct{}
}

// commit is one committed (or failed) transaction handed to the syncer;
// seq is its number (see Store.commitSeq).
type commit struct {
	seq  uint64
	jobs []*job
}

// errBroken wraps the error that stopped the store: an fsync failed, so
// what the store holds on disk is not known (retrying an fsync can report
// success without the data). The node must stop; a restart recovers from
// what the disk has.
var errBroken = errors.New("the write-ahead log could not be made durable; the store stopped")

// syncer is the WAL file's durability: its own descriptor of the -wal file
// and the position reached.
type syncer struct {
	path string
	sync func(*os.File) error
	file *os.File
	// synced is the number of the last commit made durable; seq of the
	// store's commits count from 1.
	synced atomic.Uint64
	// wakeMu guards wake, closed (and replaced) after each sync.
	wakeMu sync.Mutex
	wake   chan struct{}
}

// write runs fn in the writer's next transaction and returns once that
// transaction is durable (or failed). fn must use only tx and ctx.
func (s *Store) write(ctx context.Context, op string, fn func(tx querier) error) error {
	return s.queue(ctx, op, &job{ctx: ctx, fn: fn, done: make(chan struct{})})
}

// writeBehind is write for upkeep that no caller waits on (the cleaner's
// batches, Compact): the writer runs it after the other jobs queued with
// it have committed, and takes the jobs that queue meanwhile into its
// transaction, so that a submit waits for such a job only when it comes
// while the job runs, never because the job was queued first.
func (s *Store) writeBehind(ctx context.Context, op string, fn func(tx querier) error) error {
	return s.queue(ctx, op, &job{ctx: ctx, fn: fn, background: true, done: make(chan struct{})})
}

// queue hands j to the writer and waits for its answer.
func (s *Store) queue(ctx context.Context, op string, j *job) error {
	if err := s.check(op); err != nil {
		return err
	}
	select {
	case s.jobs <- j:
	case <-s.closing:
		return fmt.Errorf("sqlite: %s: %w", op, errClosedOr(s.broken()))
	}
	select {
	case <-j.done:
	case <-s.syncDone:
		// The store closed: a job queued after the writer's last look at
		// its queue (Close came between check and the send, and the send
		// won the select) is never run, and answered here.
		select {
		case <-j.done:
		default:
			return fmt.Errorf("sqlite: %s: %w", op, errClosedOr(s.broken()))
		}
	}
	if j.err != nil {
		return s.fail(ctx, op, j.err)
	}
	return nil
}

// writeLoop is the writer goroutine: it takes every job queued (up to
// maxJobs), runs them in one transaction and commits; the syncer makes that
// commit durable while the writer already runs the next batch. A
// background job among them (writeBehind) is put behind: it begins the
// next transaction, which the jobs queued while it runs join. It ends
// when closing is closed, failing the jobs still queued, and then closes
// commits.
//
// (Holding the transaction open until the syncer is free, so that one sync
// cycle's jobs share one commit, was tried: the commit's own time then no
// longer overlaps the previous sync, and every figure of the bench lost.)
func (s *Store) writeLoop() {
	defer close(s.commits)
	// behind is a background job put behind the jobs queued with it: it
	// begins the next transaction.
	var behind *job
	for {
		var b *batch
		// add runs j in this round's transaction, or puts it behind.
		add := func(j *job) {
			if j.background && behind == nil {
				behind = j
				return
			}
			if b == nil {
				b = s.begin()
			}
			b.run(j)
		}
		if j := behind; j != nil {
			behind = nil
			b = s.begin()
			b.run(j)
		} else {
			select {
			case j := <-s.jobs:
				add(j)
			case <-s.closing:
				s.failQueued()
				return
			}
		}
	more:
		for b == nil || len(b.jobs) < maxJobs {
			select {
			case j := <-s.jobs:
				add(j)
			default:
				break more
			}
		}
		if b != nil {
			s.commit(b)
		}
	}
}

// failQueued answers the jobs still queued when the store closes.
func (s *Store) failQueued() {
	for {
		select {
		case j := <-s.jobs:
			j.err = errClosedOr(s.broken())
			close(j.done)
		default:
			return
		}
	}
}

// batch is the writer's transaction and the jobs run in it.
type batch struct {
	s      *Store
	tx     *sql.Tx
	ctxTx  cachedTx
	missed []string
	jobs   []*job
	ok     int   // jobs whose work stands
	err    error // the transaction is lost (or never began): every job fails
}

// begin opens a transaction (BEGIN IMMEDIATE on the writer connection).
func (s *Store) begin() *batch {
	b := &batch{s: s}
	b.open()
	return b
}

// open begins the batch's transaction.
func (b *batch) open() {
	if b.err = b.s.broken(); b.err != nil {
		return
	}
	if b.tx, b.err = b.s.wdb.BeginTx(context.Background(), nil); b.err != nil {
		b.tx = nil
		return
	}
	b.ctxTx = cachedTx{tx: b.tx, stmts: b.s.stmts, missed: &b.missed}
}

// run runs j in the open transaction, in a savepoint of its own once other
// work stands in it, so that its failure rolls back only its own work.
func (b *batch) run(j *job) {
	b.jobs = append(b.jobs, j)
	if b.err != nil {
		return
	}
	if err := j.ctx.Err(); err != nil {
		j.err = err
		return
	}
	ctx := context.Background()
	if b.ok == 0 {
		// Nothing stands in the transaction yet, so the job needs no
		// savepoint (two statements fewer for a commit of one job): if it
		// fails, the transaction is rolled back and begun again.
		if j.err = j.fn(b.ctxTx); j.err == nil {
			b.ok++
			return
		}
		_ = b.tx.Rollback() // SQLite may have rolled it back already
		b.open()
		return
	}
	if _, err := b.ctxTx.ExecContext(ctx, "SAVEPOINT job"); err != nil {
		b.err = err
		return
	}
	if j.err = j.fn(b.ctxTx); j.err == nil {
		if _, err := b.ctxTx.ExecContext(ctx, "RELEASE job"); err != nil {
			b.err = err
			return
		}
		b.ok++
		return
	}
	// SQLite rolls a whole transaction back itself after some errors (a
	// full disk, an I/O error); then the savepoint is gone, and so is every
	// job's work.
	_, err := b.ctxTx.ExecContext(ctx, "ROLLBACK TO job")
	if err == nil {
		_, err = b.ctxTx.ExecContext(ctx, "RELEASE job")
	}
	if err != nil {
		b.err = fmt.Errorf("transaction lost after a failed write (%v): %w", j.err, err)
	}
}

// commit ends the batch: its commit goes to the syncer, which answers the
// jobs once it is durable. A batch that failed or holds no work that
// stands is rolled back; its jobs' errors may be verdicts on what they
// read (a message not found, a conflict), so, like a read's answer, they
// wait until the commits before are durable (at once when they are).
func (s *Store) commit(b *batch) {
	if b.err != nil || b.ok == 0 {
		if b.tx != nil {
			_ = b.tx.Rollback()
		}
		for _, j := range b.jobs {
			if b.err != nil && j.err == nil {
				j.err = b.err
			}
		}
		if seq := s.commitSeq.Load(); s.wal.synced.Load() < seq {
			s.commits <- commit{seq: seq, jobs: b.jobs}
			return
		}
		for _, j := range b.jobs {
			close(j.done)
		}
		return
	}
	// The number is taken before COMMIT: a reader whose snapshot holds
	// this commit reads it afterwards and waits for its sync.
	seq := s.commitSeq.Add(1)
	if err := b.tx.Commit(); err != nil {
		for _, j := range b.jobs {
			if j.err == nil {
				j.err = err
			}
		}
	}
	// Statements this transaction parsed are kept prepared for the next.
	// A failure here costs only speed.
	if err := s.stmts.prepare(context.Background(), b.missed); err != nil {
		s.log.Debug("statement not cached", "err", err)
	}
	s.commits <- commit{seq: seq, jobs: b.jobs}
}

// syncLoop is the syncer goroutine: it makes each commit durable with one
// fsync of the -wal file (several commits that came meanwhile share one),
// then answers their jobs. A failed fsync stops the store for good.
func (s *Store) syncLoop() {
	defer close(s.syncDone)
	for c := range s.commits {
		batch := []commit{c}
	more:
		for {
			select {
			case c, ok := <-s.commits:
				if !ok {
					break more
				}
				batch = append(batch, c)
			default:
				break more
			}
		}
		// A batch whose commits are all synced already (the jobs of a
		// rolled-back transaction waiting for the commits before them)
		// needs no sync of its own.
		err := s.broken()
		if err == nil && s.wal.synced.Load() < batch[len(batch)-1].seq {
			if err = s.wal.syncFile(); err != nil {
				err = fmt.Errorf("%w: %v", errBroken, err)
				s.stop(err)
			}
		}
		// The synced position moves before the jobs are answered: a job's
		// caller that reads next finds its own commit synced at once
		// instead of waiting for this goroutine to get round to it.
		if err == nil {
			s.wal.advance(batch[len(batch)-1].seq)
		} else {
			s.wal.advance(0) // wake the readers: they see the store broken
		}
		// A failed sync replaces every job's own error too: an error may
		// be a verdict on what the job read (not found), which must not
		// leave now that what it read may not be on disk.
		for _, c := range batch {
			for _, j := range c.jobs {
				if err != nil {
					j.err = err
				}
				close(j.done)
			}
		}
	}
}

// stop breaks the store: every later write fails with err, and OnFatal
// is told once.
func (s *Store) stop(err error) {
	if s.brokenErr.CompareAndSwap(nil, &err) {
		s.log.Error("store stopped", "err", err)
		if s.onFatal != nil {
			go s.onFatal(err)
		}
	}
}

// broken is the error that stopped the store, or nil.
func (s *Store) broken() error {
	if p := s.brokenErr.Load(); p != nil {
		return *p
	}
	return nil
}

// errClosedOr is err, or ErrClosed when there is none.
func errClosedOr(err error) error {
	if err != nil {
		return err
	}
	return errStoreClosed
}

// awaitSynced returns once every commit a read that has just ended may
// have seen is durable (nothing that depends on store state leaves the
// process before that), or with the error that broke the store.
func (s *Store) awaitSynced(ctx context.Context) error {
	target := s.commitSeq.Load()
	for {
		if s.wal.synced.Load() >= target {
			return nil
		}
		if err := s.broken(); err != nil {
			return err
		}
		s.wal.wakeMu.Lock()
		wake := s.wal.wake
		s.wal.wakeMu.Unlock()
		// Looked at again with the channel in hand: a sync, or the failed
		// one that broke the store, may have come since the looks above,
		// and the channel it closed is not this one.
		if s.wal.synced.Load() >= target {
			return nil
		}
		if err := s.broken(); err != nil {
			return err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// openWAL opens the syncer's descriptor of the -wal file (which the
// writer's connection has created) and makes its directory entry durable.
func openWAL(dbPath string, sync func(*os.File) error) (*syncer, error) {
	w := &syncer{path: dbPath + "-wal", sync: sync, wake: make(chan struct{})}
	f, err := os.Open(w.path)
	if err != nil {
		return nil, err
	}
	w.file = f
	if err := syncDir(filepath.Dir(dbPath)); err != nil {
		_ = f.Close()
		return nil, err
	}
	return w, nil
}

// syncFile makes the -wal file durable. The file SQLite writes is the one
// opened (SQLite keeps it while a connection is open; were it ever replaced,
// the new one is opened and its directory synced too).
func (w *syncer) syncFile() error {
	if cur, err := os.Stat(w.path); err == nil {
		if old, err := w.file.Stat(); err == nil && !os.SameFile(cur, old) {
			f, err := os.Open(w.path)
			if err != nil {
				return err
			}
			_ = w.file.Close()
			w.file = f
			if err := syncDir(filepath.Dir(w.path)); err != nil {
				return err
			}
		}
	}
	return w.sync(w.file)
}

// advance records that the commits up to seq are durable (0: none more)
// and wakes the readers waiting.
func (w *syncer) advance(seq uint64) {
	if seq > w.synced.Load() {
		w.synced.Store(seq)
	}
	w.wakeMu.Lock()
	close(w.wake)
	w.wake = make(chan struct{})
	w.wakeMu.Unlock()
}

func (w *syncer) close() error { return w.file.Close() }

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkpointLoop copies the WAL into the database every interval while
// commits come, on a connection of its own, so that the writer never
// stops for a checkpoint (a PASSIVE checkpoint runs beside readers and the
// writer; it syncs the WAL before it copies and the database after).
//
// A PASSIVE checkpoint never starts the WAL over: SQLite writes from the
// start of the file again only when a checkpoint has copied every frame
// and no reader still reads one, which steady traffic (commits every few
// milliseconds, polls reading between them) seldom leaves room for. The
// file then grows without bound: the retention soak saw 800 MB of WAL
// beside a 4 MB database after two minutes at 300 messages a second. So
// once it is past walLimit (Config.WALLimit) the checkpointer truncates it
// (TRUNCATE), trying at each interval until it finds no reader in the
// way: its connection has no busy wait, so a long reader (a backup, a
// big page of a list) never makes it hold the writer back; when it gets
// through, the PASSIVE checkpoints before it have copied nearly
// everything, and the writer waits only for the rest.
func (s *Store) checkpointLoop(interval time.Duration, walLimit int64) {
	defer close(s.checkpointDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		}
		seq := s.commitSeq.Load()
		if seq == last || s.broken() != nil {
			continue
		}
		last = seq
		if err := s.checkpoint(context.Background()); err != nil && !s.closed.Load() {
			s.log.Warn("checkpoint failed", "err", flatten(err))
			continue
		}
		if fi, err := os.Stat(s.wal.path); err == nil && fi.Size() > walLimit {
			// It answers (busy, log frames, checkpointed frames): busy 1
			// when readers were in the way; it is tried again next time.
			var busy, frames, done int64
			err := s.checkpointed(s.cdb.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done))
			if err != nil && !s.closed.Load() {
				s.log.Warn("checkpoint failed", "mode", "truncate", "err", flatten(err))
			}
		}
	}
}

// checkpoint copies what the WAL holds into the database, beside readers
// and the writer (PASSIVE), on the checkpointer's connection. A store whose
// checkpoints were disabled (Config.Checkpoint < 0) has none and does
// nothing.
func (s *Store) checkpoint(ctx context.Context) error {
	if s.cdb == nil {
		return nil
	}
	_, err := s.cdb.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
	return s.checkpointed(err)
}

// checkpointed is err, the answer of a checkpoint; one that says SQLite's
// own fsync failed (of the WAL before it copies, or of the database after)
// stops the store as the syncer's does: what the disk holds is not known
// (an fsync tried again can report success without the data).
func (s *Store) checkpointed(err error) error {
	var se *sqlitedriver.Error
	if errors.As(err, &se) && (se.Code() == sqliteIOErrFsync || se.Code() == sqliteIOErrDirFsync) {
		err = fmt.Errorf("%w: a checkpoint: %v", errBroken, err)
		s.stop(err)
	}
	return err
}
