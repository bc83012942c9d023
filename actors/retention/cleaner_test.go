package retention

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// stepClock moves only when the test fires its next timer.
type stepClock struct {
	now    time.Time
	timers []*stepTimer
}

type stepTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (k *stepClock) Now() time.Time { return k.now }

func (k *stepClock) AfterFunc(d time.Duration, f func()) func() bool {
	t := &stepTimer{at: k.now.Add(d), f: f}
	k.timers = append(k.timers, t)
	return func() bool {
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// next moves the time to the earliest pending timer and fires it; false
// when none is pending.
func (k *stepClock) next() bool {
	i := -1
	for j, t := range k.timers {
		if !t.stopped && (i < 0 || t.at.Before(k.timers[i].at)) {
			i = j
		}
	}
	if i < 0 {
		return false
	}
	t := k.timers[i]
	k.timers = append(k.timers[:i], k.timers[i+1:]...)
	t.stopped = true
	k.now = later(k.now, t.at)
	t.f()
	return true
}

// backlogStore has eligible messages past their retention, more than any
// batch takes; it counts the cleaner's calls.
type backlogStore struct {
	persistence.Store
	eligible                                     int64
	counts, purgeables, purges, audits, compacts int
	purged                                       int
	// spare is how many compact steps give something back (8 MiB each);
	// shortCompacts counts the steps asked for short of space.
	spare, shortCompacts int
}

func (s *backlogStore) CountPurgeable(context.Context, persistence.PurgeRequest) (int64, error) {
	s.counts++
	return s.eligible, nil
}

func (s *backlogStore) Purgeable(_ context.Context, req persistence.PurgeRequest) ([]messages.Message, error) {
	s.purgeables++
	out := make([]messages.Message, min(int64(req.Limit), s.eligible))
	for i := range out {
		out[i] = messages.Message{ID: fmt.Sprint("m", s.purged+i), State: messages.StateDelivered}
	}
	return out, nil
}

func (s *backlogStore) Purge(_ context.Context, req persistence.PurgeRequest, ids []string) ([]persistence.Purged, error) {
	s.purges++
	n := int64(req.Limit)
	if ids != nil {
		n = int64(len(ids))
	}
	n = min(n, s.eligible)
	out := make([]persistence.Purged, n)
	for i := range out {
		out[i] = persistence.Purged{ID: fmt.Sprint("m", s.purged+i), State: messages.StateDelivered}
	}
	s.eligible -= n
	s.purged += int(n)
	return out, nil
}

func (s *backlogStore) PurgeAudit(context.Context, time.Time, int) (int64, error) {
	s.audits++
	return 0, nil
}

func (s *backlogStore) Compact(_ context.Context, short bool) (int64, error) {
	s.compacts++
	if short {
		s.shortCompacts++
	}
	if s.spare == 0 {
		return 0, nil
	}
	s.spare--
	return 8 << 20, nil
}

// switchLeader is a ring master the test hands over; it counts the asks.
type switchLeader struct {
	master bool
	asked  int
}

func (l *switchLeader) Master() bool {
	l.asked++
	return l.master
}

// cleanerRig is a Cleaner driven by hand: step fires its next wake-up.
type cleanerRig struct {
	c       *Cleaner
	clk     *stepClock
	store   *backlogStore
	leader  *switchLeader
	metrics *Metrics
}

func newCleanerRig(t *testing.T, eligible int64, records *Records) *cleanerRig {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r := &cleanerRig{clk: &stepClock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)},
		store: &backlogStore{eligible: eligible}, leader: &switchLeader{master: true}, metrics: m}
	p, err := NewCleaner(Config{Node: "n", Store: r.store, Clock: r.clk, Logger: slog.New(slog.DiscardHandler), Metrics: m,
		Policy: Policy{Retention: 24 * time.Hour, AuditRetention: 365 * 24 * time.Hour}, Records: records, Leader: r.leader, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.c = p().(*Cleaner)
	// The wake-up's message is step's call of woke.
	r.c.wake = clock.NewWakeup(r.clk, func(uint64) {})
	r.c.wake.Schedule(r.clk.now) // as on Started
	return r
}

// step fires the cleaner's next wake-up and runs it (as Receive does).
func (r *cleanerRig) step(t *testing.T) {
	t.Helper()
	if !r.clk.next() {
		t.Fatal("the cleaner has no wake-up pending")
	}
	r.c.woke()
}

func (r *cleanerRig) gauge() float64 { return testutil.ToFloat64(r.metrics.eligible) }

// While call records cannot be written (a full disk), every batch fails,
// and each failure ends its pass: the next pass, an interval later, counts
// the backlog again (the eligible gauge grows with it, which
// SwitchboardRetentionBehind needs), asks whether this instance still
// leads, and runs the upkeep (the audit purge, Compact). Once records can
// be written, purging resumes.
func TestCleanerFailingBatchEndsItsPass(t *testing.T) {
	recs, disk := fullRecords(t)
	r := newCleanerRig(t, 200_000, recs)
	interval := r.c.cfg.Policy.Interval()
	const passes = 6
	prev := r.clk.now
	for i := range passes {
		r.store.eligible += 10_000 // the backlog grows meanwhile
		r.step(t)
		if i > 0 && r.clk.now.Sub(prev) < max(interval, r.c.cfg.Pacer.Backoff) {
			t.Errorf("pass %d came %v after the last, want at least %v", i, r.clk.now.Sub(prev), max(interval, r.c.cfg.Pacer.Backoff))
		}
		prev = r.clk.now
		if r.c.inPass {
			t.Fatalf("pass %d: a failed batch did not end its pass", i)
		}
		if got := r.gauge(); got != float64(r.store.eligible) {
			t.Errorf("pass %d: the eligible gauge reads %v, want the backlog %d", i, got, r.store.eligible)
		}
	}
	if r.store.counts != passes || r.leader.asked != passes || r.store.compacts != passes || r.store.audits != passes {
		t.Errorf("over %d failing passes: %d counts, %d asks of the leader, %d compacts, %d audit purges; want %d each",
			passes, r.store.counts, r.leader.asked, r.store.compacts, r.store.audits, passes)
	}
	if r.store.purges != 0 {
		t.Errorf("%d purges without call records", r.store.purges)
	}
	disk.room = -1 // space is back
	r.step(t)
	if r.store.purges != 1 || !r.c.inPass {
		t.Errorf("once records can be written: %d purges, in a pass %v; want the pass under way", r.store.purges, r.c.inPass)
	}
}

// A master that is handed over in the middle of a pass purges no further
// batch: the cleaner asks before each one, not only at a pass's start.
// Leading again starts a new pass (a new count).
func TestCleanerStopsMidPassWhenNoLongerMaster(t *testing.T) {
	r := newCleanerRig(t, 1_000_000, nil)
	r.step(t)
	r.step(t)
	if r.store.purges != 2 || !r.c.inPass {
		t.Fatalf("a backlog: %d batches, in a pass %v; want 2 and the pass going on", r.store.purges, r.c.inPass)
	}
	r.leader.master = false
	for range 3 {
		r.step(t)
	}
	if r.store.purges != 2 {
		t.Errorf("after the handover %d more batches were purged", r.store.purges-2)
	}
	if r.c.inPass || r.gauge() != 0 || r.store.compacts != 0 {
		t.Errorf("after the handover: in a pass %v, gauge %v, %d compacts; want no pass, 0, none", r.c.inPass, r.gauge(), r.store.compacts)
	}
	if r.leader.asked != 5 {
		t.Errorf("the leader was asked %d times in 5 wake-ups", r.leader.asked)
	}
	r.leader.master = true
	r.step(t)
	if r.store.counts != 2 || r.store.purges != 3 {
		t.Errorf("leading again: %d counts, %d batches; want a new pass (2, 3)", r.store.counts, r.store.purges)
	}
}

// A master replaced while its records cannot be written does not purge
// once they can: its next pass asks first, and it no longer leads (else
// two instances would purge, and both write records).
func TestCleanerReplacedDuringFailureDoesNotPurge(t *testing.T) {
	recs, disk := fullRecords(t)
	r := newCleanerRig(t, 200_000, recs)
	r.step(t)
	r.step(t)
	r.leader.master = false
	disk.room = -1
	for range 5 {
		r.step(t)
	}
	if r.store.purges != 0 {
		t.Errorf("a replaced master purged %d batches once its records could be written", r.store.purges)
	}
}

// fullRecords is a record file on a disk with no room left (fullFile:
// room -1 gives it back), closed when the test ends.
func fullRecords(t *testing.T) (*Records, *fullFile) {
	t.Helper()
	recs := openRecords(t, filepath.Join(t.TempDir(), "cdr"), 1<<30)
	disk := &fullFile{File: recs.f.(*os.File), room: 0}
	recs.f = disk
	return recs, disk
}

// TestCleanerCompactsWithinALongPass: a pass through a backlog larger
// than hours of batches runs the store's compact (Postgres folds its
// counters' deltas, which every count sums) an interval apart, not only
// when it ends.
func TestCleanerCompactsWithinALongPass(t *testing.T) {
	r := newCleanerRig(t, 1<<40, nil)
	r.c.pacer.MinPause = 10 * time.Second // few batches an interval: the test's steps
	start := r.clk.now
	interval := r.c.cfg.Policy.Interval()
	for r.clk.now.Sub(start) < 3*interval {
		r.step(t)
		if !r.c.inPass {
			t.Fatalf("the pass ended at %v with a backlog left", r.clk.now.Sub(start))
		}
	}
	if r.store.compacts < 2 {
		t.Fatalf("%d compacts in %v of one pass (interval %v), want one an interval", r.store.compacts, r.clk.now.Sub(start), interval)
	}
}

// TestCleanerGivesSpaceBackAtOnceWhileShort: while the node is short of
// space (it refuses new work for want of it) the upkeep's compact goes on
// step after step, asking the store for all it can give back, and passes
// come every second; otherwise one step a pass, a minute apart at the
// day-long defaults (8 MiB a minute: half an hour to give back the 256
// MiB the node waits for).
func TestCleanerGivesSpaceBackAtOnceWhileShort(t *testing.T) {
	r := newCleanerRig(t, 0, nil)
	short := false
	r.c.cfg.Short = func() bool { return short }
	r.store.spare = 100
	r.step(t)
	if r.store.compacts != 1 || r.store.shortCompacts != 0 {
		t.Fatalf("not short: %d compact steps (%d short), want 1 (0)", r.store.compacts, r.store.shortCompacts)
	}
	at := r.clk.now
	short = true
	r.step(t)
	if got := r.clk.now.Sub(at); got != r.c.cfg.Policy.Interval() {
		t.Fatalf("the pass came %v after the last, want the policy's interval %v", got, r.c.cfg.Policy.Interval())
	}
	if r.store.shortCompacts != shortSteps {
		t.Fatalf("short of space: %d compact steps asked short, want %d in one upkeep", r.store.shortCompacts, shortSteps)
	}
	at = r.clk.now
	r.step(t)
	if got := r.clk.now.Sub(at); got != ShortInterval {
		t.Errorf("short of space, the next pass came %v after the last, want %v", got, ShortInterval)
	}
	if r.store.spare != 0 || r.store.compacts != 1+shortSteps+36 {
		t.Errorf("%d compact steps, %d left to give back; want %d, none", r.store.compacts, r.store.spare, 1+shortSteps+36)
	}
}

// A batch whose call records were split across a rotation that then
// failed purges the messages whose records were synced before it, and
// only those: the others wait for the next pass.
func TestCleanerPurgesWhatItsRecordsHold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cdr")
	recs := openRecords(t, path, 4096)
	recs.openFile = func(string) (recordFile, error) { return nil, syscall.EMFILE } // the rotation's new file
	r := newCleanerRig(t, 200_000, recs)
	r.step(t)
	written, _, _ := recordFiles(t, path)
	if len(written) == 0 || r.store.purged != len(written) {
		t.Fatalf("%d messages purged, %d records written before the rotation failed; want as many, more than 0", r.store.purged, len(written))
	}
	for _, id := range ids("m", r.store.purged) {
		if written[id] != 1 {
			t.Errorf("%s was purged but is in %d record lines", id, written[id])
		}
	}
	if r.c.inPass {
		t.Error("the failed batch did not end its pass")
	}
}

// TestCleanerShortOfSpaceWithFailingRecordsCountsAtItsInterval: short of
// space, passes come every ShortInterval; but a full disk is when call
// records cannot be written, every batch fails, and each failed pass was
// followed by a new count of the backlog (up to CountCap rows) after the
// pacer's 5 s backoff, freeing nothing. After a failure the next pass
// comes the policy's interval after the last, as when not short.
func TestCleanerShortOfSpaceWithFailingRecordsCountsAtItsInterval(t *testing.T) {
	recs, _ := fullRecords(t)
	r := newCleanerRig(t, 200_000, recs)
	r.c.cfg.Short = func() bool { return true }
	interval := r.c.cfg.Policy.Interval()
	start := r.clk.now
	for range 20 {
		r.step(t)
	}
	took := r.clk.now.Sub(start)
	if r.store.purges != 0 {
		t.Fatalf("%d purges without call records", r.store.purges)
	}
	if want := int(took/interval) + 1; r.store.counts > want {
		t.Errorf("short of space with records that cannot be written: %d counts of the backlog (each up to CountCap rows) and %d compact steps in %v, none of which purged anything; want at most %d (one an interval of %v)",
			r.store.counts, r.store.compacts, took, want, interval)
	}
}
