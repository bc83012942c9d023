package retention

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// A record's final_at is the message's last transition: receipts an SMSC
// sent after it (history entries in the same final state) are not one.
func TestRecordFinalAtSkipsReceipts(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	h := func(s messages.State, d time.Duration) messages.HistoryEntry {
		return messages.HistoryEntry{State: s, At: t0.Add(d)}
	}
	cases := []struct {
		name string
		hist []messages.HistoryEntry
		want time.Duration
	}{
		{"delivered", []messages.HistoryEntry{h(messages.StatePending, 0), h(messages.StateDelivered, time.Second)}, time.Second},
		{"receipts after", []messages.HistoryEntry{h(messages.StatePending, 0), h(messages.StateDelivered, time.Second),
			h(messages.StateDelivered, time.Minute), h(messages.StateDelivered, time.Hour)}, time.Second},
		{"retries", []messages.HistoryEntry{h(messages.StatePending, 0), h(messages.StateRetry, time.Second),
			h(messages.StateRetry, 2*time.Second), h(messages.StateFailed, 3*time.Second)}, 3 * time.Second},
	}
	for _, c := range cases {
		r := RecordOf("n", messages.Message{ID: "m", History: c.hist}, t0)
		if !r.FinalAt.Equal(t0.Add(c.want)) {
			t.Errorf("%s: final_at %v, want %v", c.name, r.FinalAt.Sub(t0), c.want)
		}
	}
}

// fullFile is a record file on a disk with room for room more bytes (-1:
// any): a write past it lands in part and fails with ENOSPC, as on a full
// disk. noCut makes Truncate fail too (an append-only file, say).
type fullFile struct {
	*os.File
	room  int64
	noCut bool
}

func (f *fullFile) Write(b []byte) (int, error) {
	if f.room < 0 || int64(len(b)) <= f.room {
		n, err := f.File.Write(b)
		if f.room >= 0 {
			f.room -= int64(n)
		}
		return n, err
	}
	n, err := f.File.Write(b[:f.room])
	f.room -= int64(n)
	if err == nil {
		err = syscall.ENOSPC
	}
	return n, err
}

func (f *fullFile) Truncate(size int64) error {
	if f.noCut {
		return syscall.EPERM
	}
	return f.File.Truncate(size)
}

// openFull opens path like OpenRecords does, as a fullFile.
func openFull(room int64, noCut bool) func(string) (recordFile, error) {
	return func(path string) (recordFile, error) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			return nil, err
		}
		return &fullFile{File: f, room: room, noCut: noCut}, nil
	}
}

// testRecord is a delivered message's record.
func testRecord(id string, now time.Time) Record {
	return RecordOf("n", messages.Message{ID: id, Body: "a body of a few words", State: messages.StateDelivered,
		History: []messages.HistoryEntry{{State: messages.StatePending, At: now}, {State: messages.StateDelivered, At: now}}}, now)
}

// readRecordLines reads a record file: the records of its valid lines by
// id, and how many lines are not a record.
func readRecordLines(t *testing.T, path string) (recs map[string]Record, bad int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs = map[string]Record{}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Record != RecordKind {
			bad++
			continue
		}
		recs[r.ID] = r
	}
	return recs, bad
}

// A batch whose records the disk took only in part (ENOSPC) is cut off
// the file, so that the batch written again once there is room starts on
// a line of its own: every record of a batch Append accepted (the cleaner
// purges those messages) is a valid line. When the part left behind
// cannot be cut, the next batch starts on a new line: the part is one bad
// line and no record is glued to it.
func TestRecordsFailedWriteLosesNoRecord(t *testing.T) {
	for _, c := range []struct {
		name  string
		noCut bool
		bad   int // lines not a record at the end
	}{
		{"cut back", false, 0},
		{"cannot cut", true, 2}, // the two failed writes' parts
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cdr")
			r := openRecords(t, path, 1<<20)
			now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
			purged := map[string]bool{}
			appendBatch := func(ids ...string) error {
				recs := make([]Record, len(ids))
				for i, id := range ids {
					recs[i] = testRecord(id, now)
				}
				n, err := r.Append(recs, now)
				for _, id := range ids[:n] {
					purged[id] = true
				}
				return err
			}
			if err := appendBatch("m0"); err != nil {
				t.Fatal(err)
			}
			disk := &fullFile{File: r.f.(*os.File), room: 100, noCut: c.noCut}
			r.f = disk
			if err := appendBatch("m1", "m2"); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("a batch on a full disk: %v, want ENOSPC", err)
			}
			disk.room = 50 // a little room: the retry fails in part too
			if err := appendBatch("m1", "m2"); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("the retry on a full disk: %v, want ENOSPC", err)
			}
			disk.room = -1 // space is back
			if err := appendBatch("m1", "m2"); err != nil {
				t.Fatalf("once there is room: %v", err)
			}
			if err := appendBatch("m3"); err != nil {
				t.Fatal(err)
			}
			recs, bad := readRecordLines(t, path)
			for id := range purged {
				if _, ok := recs[id]; !ok {
					t.Errorf("%s was accepted (and would be purged) but has no valid record line", id)
				}
			}
			if bad != c.bad {
				t.Errorf("%d lines are not a record, want %d", bad, c.bad)
			}
		})
	}
}

// A batch written whole whose sync failed is cut off too: nothing of a
// failed Append is taken as written.
func TestRecordsFailedSyncIsCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cdr")
	r := openRecords(t, path, 1<<20)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	r.f = &syncFails{File: r.f.(*os.File)}
	if _, err := r.Append([]Record{testRecord("m1", now)}, now); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a failed sync: %v, want EIO", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("after a failed sync the file has %d bytes (%v), want 0", fi.Size(), err)
	}
}

type syncFails struct{ *os.File }

func (syncFails) Sync() error { return syscall.EIO }

// A rotation whose new file cannot be opened (no descriptor left, say)
// leaves no file behind: the next Append opens it and writes, and Close
// is clean whether or not one did.
func TestRecordsReopenAfterFailedRotation(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T) (r *Records, path string, openFails *int) {
		path = filepath.Join(t.TempDir(), "cdr")
		r = openRecords(t, path, 800)
		if _, err := r.Append([]Record{testRecord("a", now)}, now); err != nil {
			t.Fatal(err)
		}
		openFails = new(int)
		*openFails = 1
		r.openFile = func(p string) (recordFile, error) {
			if *openFails > 0 {
				*openFails--
				return nil, syscall.EMFILE
			}
			return openAppend(p)
		}
		if n, err := r.Append([]Record{testRecord("b", now), testRecord("c", now)}, now); n != 0 || !errors.Is(err, syscall.EMFILE) {
			t.Fatalf("a rotation that cannot open the new file: %d written, %v; want 0, EMFILE", n, err)
		}
		return r, path, openFails
	}
	t.Run("append resumes", func(t *testing.T) {
		r, path, _ := setup(t)
		for i, ids := range [][]string{{"b", "c"}, {"d"}, {"e"}} {
			at := now.Add(time.Duration(i+1) * time.Second)
			recs := make([]Record, len(ids))
			for j, id := range ids {
				recs[j] = testRecord(id, at)
			}
			if _, err := r.Append(recs, at); err != nil {
				t.Fatalf("append %v after the open failed: %v", ids, err)
			}
		}
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		asides, _ := filepath.Glob(path + ".*")
		got := map[string]bool{}
		for _, p := range append(asides, path) {
			recs, bad := readRecordLines(t, p)
			if bad > 0 {
				t.Errorf("%s: %d lines are not a record", p, bad)
			}
			for id := range recs {
				got[id] = true
			}
		}
		for _, id := range []string{"a", "b", "c", "d", "e"} {
			if !got[id] {
				t.Errorf("no record of %s in %v", id, append(asides, path))
			}
		}
	})
	t.Run("close", func(t *testing.T) {
		r, _, _ := setup(t)
		if err := r.Close(); err != nil {
			t.Errorf("close after a failed reopen: %v", err)
		}
	})
	t.Run("open keeps failing", func(t *testing.T) {
		r, _, openFails := setup(t)
		*openFails = 2
		for range 2 {
			if _, err := r.Append([]Record{testRecord("b", now)}, now); !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("append while the file cannot be opened: %v, want EMFILE", err)
			}
		}
		if _, err := r.Append([]Record{testRecord("b", now)}, now); err != nil {
			t.Errorf("append once it can be opened: %v", err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})

	// A rename that fails keeps the file open as it was; the next Append
	// rotates.
	t.Run("rename fails", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "cdr")
		r := openRecords(t, path, 800)
		if _, err := r.Append([]Record{testRecord("a", now)}, now); err != nil {
			t.Fatal(err)
		}
		r.rename = func(string, string) error { return syscall.EACCES }
		if n, err := r.Append([]Record{testRecord("b", now)}, now); n != 0 || !errors.Is(err, syscall.EACCES) {
			t.Fatalf("a rotation whose rename fails: %d written, %v; want 0, EACCES", n, err)
		}
		r.rename = os.Rename
		if _, err := r.Append([]Record{testRecord("b", now)}, now); err != nil {
			t.Fatalf("append once the rename works: %v", err)
		}
		aside := path + "." + now.Format("20060102T150405.000000000Z")
		if recs, bad := readRecordLines(t, aside); len(recs) != 1 || recs["a"].ID != "a" || bad != 0 {
			t.Errorf("the rotated file has %d records and %d bad lines, want a alone", len(recs), bad)
		}
		if recs, bad := readRecordLines(t, path); len(recs) != 1 || recs["b"].ID != "b" || bad != 0 {
			t.Errorf("the new file has %d records and %d bad lines, want b alone", len(recs), bad)
		}
	})
}

// A crash in the middle of an Append leaves part of a line at the end of
// the file (its messages were not purged, so their records come again):
// the file opened after the restart is cut back to its last whole line
// before the next batch, which then starts on a line of its own.
func TestRecordsAfterACrashMidLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cdr")
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	whole, err := json.Marshal(testRecord("m0", now))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(append(whole, '\n'), `{"record":"switchboard.cdr.v1","id":"m1","sou`...), 0o640); err != nil {
		t.Fatal(err)
	}
	r := openRecords(t, path, 1<<20)
	if _, err := r.Append([]Record{testRecord("m1", now), testRecord("m2", now)}, now); err != nil {
		t.Fatal(err)
	}
	recs, bad := readRecordLines(t, path)
	for _, id := range []string{"m0", "m1", "m2"} {
		if _, ok := recs[id]; !ok {
			t.Errorf("%s has no valid record line", id)
		}
	}
	if bad != 0 {
		t.Errorf("%d lines are not a record: the part the crash left was not cut", bad)
	}
}

// TestOpenRecordsRefusesAnotherFile: a file there that holds something
// else than records (the node's own database named by mistake), or that
// is no regular file (a device, a pipe), is refused and left as it is; one a crash left with its first line cut
// short is taken, as are the record line's start and no file.
func TestOpenRecordsRefusesAnotherFile(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"database":     "SQLite format 3\x00\x10\x00\x02\x02\x00@  \n\x00\x00\x00tail",
		"a blank line": "\n" + `{"record":"switchboard.cdr.v1"}` + "\n",
		"other json":   `{"kind":"other"}` + "\n",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		r, err := OpenRecords(path, 1<<20)
		if err == nil {
			_ = r.Close()
			t.Errorf("%s: opened as a record file", name)
		} else if !strings.Contains(err.Error(), "holds something else than call records") {
			t.Errorf("%s: %v, want it named as no record file", name, err)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Errorf("%s: the file became %q", name, got)
		}
	}
	// A device cannot hold records: a sync fails on it, and a rotation
	// would rename it aside (a pipe: TestOpenRecordsRefusesAPipe).
	refuseIrregular(t, os.DevNull)
	for name, content := range map[string]string{"empty": "", "cut short": `{"record":"swi`} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		openRecords(t, path, 1<<20)
	}
	openRecords(t, filepath.Join(dir, "new"), 1<<20)
}

// refuseIrregular wants OpenRecords to refuse path as no regular file.
func refuseIrregular(t *testing.T, path string) {
	t.Helper()
	r, err := OpenRecords(path, 1<<20)
	if err == nil {
		_ = r.Close()
		t.Errorf("%s: opened as a record file", path)
	} else if !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("%s: %v, want it named as no regular file", path, err)
	}
}

// openRecords opens the record file at path for a test, closed when the
// test ends (a Close of its own before that is fine).
func openRecords(t *testing.T, path string, rotateBytes int64) *Records {
	t.Helper()
	r, err := OpenRecords(path, rotateBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// recordFiles reads the record file at path and the files rotated from
// it: how many valid lines each record id has over all of them, and each
// file's size and count of records. Every line must be a record. The file
// at path may be missing (a rotation that could not open the new one).
func recordFiles(t *testing.T, path string) (lines map[string]int, sizes map[string]int64, counts map[string]int) {
	t.Helper()
	asides, err := filepath.Glob(path + ".*")
	if err != nil {
		t.Fatal(err)
	}
	lines, sizes, counts = map[string]int{}, map[string]int64{}, map[string]int{}
	for _, p := range append(asides, path) {
		b, err := os.ReadFile(p)
		if p == path && errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes[p] = int64(len(b))
		for line := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
			if line == "" {
				continue
			}
			var r Record
			if err := json.Unmarshal([]byte(line), &r); err != nil || r.Record != RecordKind {
				t.Errorf("%s: a line is not a record: %.40q", p, line)
				continue
			}
			lines[r.ID]++
			counts[p]++
		}
	}
	return lines, sizes, counts
}

// testRecords are delivered messages' records, of ids prefix0, prefix1...
func testRecords(prefix string, n int, now time.Time) []Record {
	recs := make([]Record, n)
	for i, id := range ids(prefix, n) {
		recs[i] = testRecord(id, now)
	}
	return recs
}

// A batch that does not fit in the file is split across rotations, all
// at the same now: no file grows past the rotate size, except one that
// holds a single record larger than it, and every record is in one file
// once.
func TestRecordsBatchSplitAcrossRotations(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	line := recordLineSize(t, now)
	for _, c := range []struct {
		name        string
		rotateBytes int64
		batch       int
		files       int
	}{
		{"two records a file", 2*line + line/2, 7, 4}, // the first record, then 7 more
		{"records larger than the size", line / 2, 3, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cdr")
			r := openRecords(t, path, c.rotateBytes)
			if _, err := r.Append(testRecords("a", 1, now), now); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Append(testRecords("b", c.batch, now), now); err != nil {
				t.Fatal(err)
			}
			lines, sizes, counts := recordFiles(t, path)
			for p, size := range sizes {
				if size > c.rotateBytes && counts[p] > 1 {
					t.Errorf("%s has %d bytes in %d records, past the rotate size %d", filepath.Base(p), size, counts[p], c.rotateBytes)
				}
			}
			if len(sizes) != c.files {
				t.Errorf("%d files, want %d", len(sizes), c.files)
			}
			for _, id := range append([]string{"a0"}, ids("b", c.batch)...) {
				if lines[id] != 1 {
					t.Errorf("%s is in %d lines, want 1", id, lines[id])
				}
			}
		})
	}
}

// recordLineSize is the length of a testRecord's line.
func recordLineSize(t *testing.T, now time.Time) int64 {
	t.Helper()
	b, err := json.Marshal(testRecord("b0", now))
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b)) + 1
}

// ids are prefix0 ... prefix<n-1>.
func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// A split batch whose rotation fails after its first part is synced says
// that part is written (its messages may be purged) and the rest is not:
// the rest appended again leaves every record in one line, once.
func TestRecordsSplitBatchFailsAfterAPart(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	line := recordLineSize(t, now)
	path := filepath.Join(t.TempDir(), "cdr")
	r := openRecords(t, path, 2*line+line/2)
	r.openFile = func(string) (recordFile, error) { return nil, syscall.EMFILE } // the rotation's new file
	recs := testRecords("b", 5, now)
	n, err := r.Append(recs, now)
	if n != 2 || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("a split batch whose rotation cannot open the new file: %d written, %v; want the first 2, EMFILE", n, err)
	}
	r.openFile = openAppend
	if m, err := r.Append(recs[n:], now); m != len(recs)-n || err != nil {
		t.Fatalf("the rest: %d written, %v; want %d", m, err, len(recs)-n)
	}
	lines, _, _ := recordFiles(t, path)
	for _, id := range ids("b", len(recs)) {
		if lines[id] != 1 {
			t.Errorf("%s is in %d lines, want 1", id, lines[id])
		}
	}
}

// crashFile is a record file on a disk that stops (a crash) once left
// bytes are written, over every file that shares left: the write that
// crosses it lands in part, and nothing after it reaches the disk (the
// writer is abandoned there, no cut-back runs).
type crashFile struct {
	*os.File
	left *int64
}

var errCrash = errors.New("crashed")

func (f crashFile) Write(b []byte) (int, error) {
	if *f.left < 0 {
		return 0, errCrash
	}
	n, err := f.File.Write(b[:min(int64(len(b)), *f.left)])
	*f.left -= int64(n)
	if err == nil && n < len(b) {
		*f.left, err = -1, errCrash
	}
	return n, err
}

func (f crashFile) Sync() error {
	if *f.left < 0 {
		return errCrash
	}
	return f.File.Sync()
}

func (f crashFile) Truncate(size int64) error {
	if *f.left < 0 {
		return errCrash
	}
	return f.File.Truncate(size)
}

// A crash at any byte of a batch split across rotations loses no record:
// the batch appended again after the restart (its messages were not
// purged) leaves every record in a valid line, and no file past the
// rotate size but one holding a single record. The records synced before
// the crash are there twice, as after a crash between a batch and its
// purge (readers drop repeats by id and final_at).
func TestRecordsCrashInASplitBatch(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	line := recordLineSize(t, now)
	rotate := 2*line + line/2
	recs := testRecords("b", 5, now)
	for budget := int64(0); budget < 5*line; budget += line / 3 {
		path := filepath.Join(t.TempDir(), "cdr")
		r := openRecords(t, path, rotate)
		if _, err := r.Append(testRecords("a", 1, now), now); err != nil {
			t.Fatal(err)
		}
		left := budget
		r.openFile = func(p string) (recordFile, error) {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
			if err != nil {
				return nil, err
			}
			return crashFile{File: f, left: &left}, nil
		}
		r.f = crashFile{File: r.f.(*os.File), left: &left}
		if n, err := r.Append(recs, now); err == nil {
			t.Fatalf("budget %d: the batch was written whole (%d)", budget, n)
		}
		after := openRecords(t, path, rotate) // the restart
		if n, err := after.Append(recs, now.Add(time.Minute)); n != len(recs) || err != nil {
			t.Fatalf("budget %d: the batch again after the restart: %d written, %v", budget, n, err)
		}
		lines, sizes, counts := recordFiles(t, path)
		for p, size := range sizes {
			if size > rotate && counts[p] > 1 {
				t.Errorf("budget %d: %s has %d bytes in %d records, past the rotate size %d", budget, filepath.Base(p), size, counts[p], rotate)
			}
		}
		if lines["a0"] != 1 {
			t.Errorf("budget %d: a0 is in %d lines, want 1", budget, lines["a0"])
		}
		for _, id := range ids("b", len(recs)) {
			if lines[id] < 1 || lines[id] > 2 {
				t.Errorf("budget %d: %s is in %d lines, want 1 (2 when synced before the crash)", budget, id, lines[id])
			}
		}
	}
}

// A record file the operator (or logrotate) moved or removed kept getting
// the records through the handle the node held: those of a removed file
// were lost with it, and a moved one grew on where nobody looked for it
// (SIGHUP does not reopen it). Append follows the path: the next batch
// goes into a new file there; one truncated in place (copytruncate) is
// reopened too, so that its size is the file's.
func TestRecordsFollowAMovedOrRemovedFile(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		move func(path string) error
		old  string // where the first batch is found after the move ("" gone)
	}{
		{"renamed", func(p string) error { return os.Rename(p, p+".1") }, ".1"},
		{"removed", os.Remove, ""},
		{"truncated", func(p string) error { return os.Truncate(p, 0) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cdr")
			r := openRecords(t, path, 1<<20)
			if _, err := r.Append([]Record{testRecord("a", now)}, now); err != nil {
				t.Fatal(err)
			}
			if err := tc.move(path); err != nil {
				t.Fatal(err)
			}
			if n, err := r.Append([]Record{testRecord("b", now), testRecord("c", now)}, now); n != 2 || err != nil {
				t.Fatalf("append after the file was %s: %d, %v", tc.name, n, err)
			}
			recs, bad := readRecordLines(t, path)
			if len(recs) != 2 || recs["b"].ID != "b" || recs["c"].ID != "c" || bad != 0 {
				t.Errorf("after the file was %s, %s holds %d records (%d bad lines): %v; want b and c", tc.name, path, len(recs), bad, recs)
			}
			if tc.old != "" {
				if old, bad := readRecordLines(t, path+tc.old); len(old) != 1 || old["a"].ID != "a" || bad != 0 {
					t.Errorf("the file moved aside holds %v (%d bad lines); want a alone", old, bad)
				}
			}
		})
	}
}

// A file of something else put at the moved file's path is refused as at
// start: nothing is written into it, and the batch waits.
func TestRecordsRefuseAnotherFileAtTheMovedPath(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "cdr")
	r := openRecords(t, path, 1<<20)
	if _, err := r.Append([]Record{testRecord("a", now)}, now); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("SQLite format 3\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Append([]Record{testRecord("b", now)}, now); n != 0 || err == nil {
		t.Fatalf("append with another file at the path: %d, %v; want it refused", n, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "SQLite format 3\x00" {
		t.Errorf("the other file was written into: %q", b)
	}
}

// The mode the operator gave the record file (0644, say, for a shipper
// of another user to read it) was lost at the first rotation: the new file
// was made 0640, and the shipper got "permission denied" from then on.
// A file the node makes in place of one it held, rotated aside or moved
// away by logrotate, takes that file's mode; the first keeps the default.
func TestRecordsNewFileKeepsTheMode(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	line := recordLineSize(t, now)
	for _, tc := range []struct {
		name string
		next func(r *Records, path string) error
	}{
		{"rotated", func(r *Records, _ string) error {
			_, err := r.Append([]Record{testRecord("b", now)}, now)
			return err
		}},
		{"moved", func(r *Records, path string) error {
			if err := os.Rename(path, path+".1"); err != nil {
				return err
			}
			_, err := r.Append([]Record{testRecord("b", now)}, now)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cdr")
			r := openRecords(t, path, line) // one record a file (made 0640, less the umask)
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Append([]Record{testRecord("a", now)}, now); err != nil {
				t.Fatal(err)
			}
			if err := tc.next(r, path); err != nil {
				t.Fatal(err)
			}
			if recs, _ := readRecordLines(t, path); recs["b"].ID != "b" {
				t.Fatalf("%s holds %v, want b", path, recs)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("the file made after the one %s: mode %v (%v), want 0644 as the operator gave that one", tc.name, fi.Mode(), err)
			}
		})
	}
}
