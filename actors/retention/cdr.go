package retention

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// RecordKind names the format of a call record line.
const RecordKind = "switchboard.cdr.v1"

// Record is one message's final record: a line of the call record file
// (JSON), written before the message can be purged. docs/operations.md
// describes each field. The body is not in it (content is not kept past
// the message); its length is.
type Record struct {
	Record            string                  `json:"record"`
	Node              string                  `json:"node"`
	ID                string                  `json:"id"`
	SourceMSISDN      string                  `json:"source_msisdn"`
	DestinationMSISDN string                  `json:"destination_msisdn"`
	SourceSMSC        string                  `json:"source_smsc"`
	DestSMSC          string                  `json:"dest_smsc"`
	Frontend          string                  `json:"frontend"`
	Peer              string                  `json:"peer,omitempty"`
	State             messages.State          `json:"state"`
	Reason            string                  `json:"reason,omitempty"`
	Attempts          int                     `json:"attempts"`
	BodyBytes         int                     `json:"body_bytes"`
	CreatedAt         time.Time               `json:"created_at"`
	FinalAt           time.Time               `json:"final_at"`
	WrittenAt         time.Time               `json:"written_at"`
	History           []messages.HistoryEntry `json:"history"`
}

// RecordOf is m's record on node, written at now. Peer is the node the
// message was forwarded to, or else the one it came from ("" when it never
// crossed a node); FinalAt is its last transition (its history may end
// with receipts, which are not transitions).
func RecordOf(node string, m messages.Message, now time.Time) Record {
	r := Record{Record: RecordKind, Node: node, ID: m.ID, SourceMSISDN: m.SourceMSISDN, DestinationMSISDN: m.DestinationMSISDN,
		SourceSMSC: m.SourceSMSC, DestSMSC: m.DestSMSC, Frontend: m.Frontend, State: m.State, Reason: m.Reason,
		Attempts: m.Attempts, BodyBytes: len(m.Body) + len(m.Binary), CreatedAt: m.CreatedAt, FinalAt: m.UpdatedAt, WrittenAt: now.UTC(),
		History: m.History}
	if n := len(m.History); n > 0 {
		// The entries after the last transition (an SMSC's receipts, in
		// the state they found) are not transitions.
		for n > 1 && m.History[n-2].State == m.History[n-1].State && m.History[n-1].State.Final() {
			n--
		}
		r.FinalAt = m.History[n-1].At
	}
	switch {
	case m.DestSMSC != "" && m.DestSMSC != node:
		r.Peer = m.DestSMSC
	case m.SourceSMSC != "" && m.SourceSMSC != node:
		r.Peer = m.SourceSMSC
	}
	if r.History == nil {
		r.History = []messages.HistoryEntry{}
	}
	return r
}

// Records appends call records to a file, one JSON line each, and makes
// them durable before Append returns. It follows the path: a file moved
// aside or removed by the operator is followed by a new one at the path
// (Append checks before each batch). A record that would take the file
// past RotateBytes goes into a new one: the file is renamed to
// PATH.<UTC time> first (rotated files are the operator's to ship and
// remove). A batch is split across as many files as it needs, so no file
// is larger than RotateBytes, except one that holds a single record
// larger than that alone. It is used by one goroutine (the cleaner's).
//
// A failed Append leaves the file as it was before the part of the batch
// it was writing: the cleaner purges nothing of that part (nor of what
// follows it) and writes its records again, so a piece of it left behind
// (a full disk takes half a line) would have the retried batch's first
// record glued to it, an invalid line, and that message purged with no
// record. See Append.
type Records struct {
	path        string
	rotateBytes int64
	// openFile opens the file at path for appending (os.OpenFile), and
	// rename renames it aside (os.Rename); tests give ones that fail.
	openFile func(path string) (recordFile, error)
	rename   func(from, to string) error
	// f is nil when a reopen failed (during a rotation): the next Append
	// opens the file again.
	f recordFile
	// size is the file's size as far as writes tell; good is where its
	// last whole write ends, what a failed write is cut back to. They
	// differ only while a failed write's bytes could not be cut.
	size, good int64
	// midLine: the bytes past good end inside a line, so the next write
	// must start with a newline if they cannot be cut first.
	midLine bool
	// mode is the mode of the file last held (0: none yet), that a file
	// made in its place takes (open): the operator may have given it one a
	// shipper of another user needs (0644), and a new file made 0640 at
	// each rotation would shut that shipper out from then on.
	mode fs.FileMode
}

// recordFile is what Records needs of its file (an *os.File).
type recordFile interface {
	Write(b []byte) (int, error)
	Chmod(mode os.FileMode) error
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
}

// OpenRecords opens (creating when missing) the record file at path. A
// file there that holds something else than call records is refused
// (CheckRecordFile).
func OpenRecords(path string, rotateBytes int64) (*Records, error) {
	if rotateBytes <= 0 {
		return nil, fmt.Errorf("call records: rotate size %d must be positive", rotateBytes)
	}
	r := &Records{path: path, rotateBytes: rotateBytes, openFile: openAppend, rename: os.Rename}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// recordStart is how every line of a record file begins: its first field
// (Record.Record), as json.Marshal writes it.
var recordStart = []byte(`{"record":"` + RecordKind + `"`)

// CheckRecordFile reports an error when the file at path is there, not
// empty, and does not begin as a record line does (or as much of one as
// a crash in the first write left): it holds something else, the node's
// own database, a certificate, another program's log, named by mistake.
// Opened as a record file, its bytes after its last newline would be
// taken for a line a crash left half written and cut off, and records
// appended to it: a database named so was corrupt after the first batch.
// It reports one too when the file there is no regular file (a device
// such as /dev/null, a pipe such as /dev/stdout's in a container, a
// socket): a sync fails on it, so every batch failed and nothing was ever
// purged, and a rotation renamed the device aside and made a plain file
// in its place; a pipe's open waits for its other end, so it is looked at
// before it is opened. A missing or empty file passes (a new one is begun
// there).
func CheckRecordFile(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("call records: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("call records: %s is not a regular file but %s: records are synced, and the file renamed aside to rotate it, which only a regular file allows", path, fileKind(fi.Mode()))
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("call records: %w", err)
	}
	defer f.Close()
	head := make([]byte, len(recordStart))
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("call records: %w", err)
	}
	if !bytes.Equal(head[:n], recordStart[:n]) {
		return fmt.Errorf("call records: %s holds something else than call records (it does not begin with %s): name a new file, or one this node wrote", path, recordStart)
	}
	return nil
}

// fileKind names the kind of file that is not a regular one.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

func openAppend(path string) (recordFile, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
}

// open opens the file at the path, refusing one that holds something else
// (CheckRecordFile): at start, and when the file was moved or removed,
// since another program may have put one there.
func (r *Records) open() error {
	if err := CheckRecordFile(r.path); err != nil {
		return err
	}
	_, err := os.Lstat(r.path)
	made := errors.Is(err, fs.ErrNotExist)
	f, err := r.openFile(r.path)
	if err != nil {
		return fmt.Errorf("call records: %w", err)
	}
	// A file made in place of one held (rotated aside, or moved away by
	// logrotate) takes its mode. The records wait for nothing on it: a
	// mode that cannot be set leaves the default.
	if made && r.mode != 0 {
		_ = f.Chmod(r.mode)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("call records: %w", err)
	}
	r.f, r.size, r.good, r.midLine = f, fi.Size(), fi.Size(), false
	// A crash in the middle of an Append may have left part of a line at
	// the end: it is cut off with the next Append (its records are written
	// again, since their messages were not purged), or ended first.
	if end, err := lastLineEnd(r.path, fi.Size()); err == nil && end < fi.Size() {
		r.good, r.midLine = end, true
	}
	return syncDir(filepath.Dir(r.path))
}

// lastLineEnd is the offset just past the last newline among the first
// size bytes of the file at path (0 when there is none).
func lastLineEnd(path string, size int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for end := size; end > 0; {
		start := max(0, end-int64(len(buf)))
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && n < int(end-start) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// Append writes the records in order and syncs them, and returns how many
// of them, from the first, are durable: all of them when err is nil. A
// batch that does not fit in the file is split: the records that fit are
// written and synced, the file is rotated, and the rest go on in the new
// one. On an error, the records of the parts synced before it (those
// before the n returned) are durable and may be purged; the others must
// not be taken as written (the caller appends them again later): the part
// being written is cut back off the file. When even that fails, the next
// Append cuts it first, and when it still cannot, starts on a new line, so
// that the piece left behind is a line of its own and no record is glued
// to it.
func (r *Records) Append(recs []Record, now time.Time) (n int, err error) {
	// buf holds the lines one after the other: the i-th is
	// buf[at[i]:at[i+1]].
	var buf []byte
	at := make([]int, 1, len(recs)+1)
	for _, rec := range recs {
		line, err := json.Marshal(rec)
		if err != nil {
			return 0, fmt.Errorf("call records: %w", err)
		}
		buf = append(append(buf, line...), '\n')
		at = append(at, len(buf))
	}
	if err := r.follow(); err != nil {
		return 0, err
	}
	for n < len(recs) {
		if r.f == nil {
			if err := r.open(); err != nil {
				return n, err
			}
		}
		r.cut()
		if r.size > 0 && r.size+int64(at[n+1]-at[n]) > r.rotateBytes {
			if err := r.rotate(now); err != nil {
				return n, err
			}
		}
		// The records that fit in the file, and at least one: a record
		// larger than RotateBytes goes whole into a file of its own.
		end := n + 1
		for end < len(recs) && r.size+int64(at[end+1]-at[n]) <= r.rotateBytes {
			end++
		}
		if err := r.write(buf[at[n]:at[end]]); err != nil {
			return n, err
		}
		n = end
	}
	return n, nil
}

// follow closes the file when it is no longer the one at the path: the
// operator (or logrotate) moved it aside or removed it, or cut it to
// nothing in place (copytruncate). The next write opens the file at the
// path then, creating it (open): records appended through the old handle
// would go to a file nobody looks for, or be lost with one removed. What
// a failed write left on the old file is cut off it first, if it can be.
// A path that cannot be looked at (a directory not
// searchable for the moment) leaves the file as it is.
func (r *Records) follow() error {
	if r.f == nil {
		return nil
	}
	held, err := r.f.Stat()
	if err != nil {
		return nil
	}
	at, err := os.Stat(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil
	case os.SameFile(at, held) && held.Size() >= r.good:
		return nil
	}
	r.cut()
	r.mode = held.Mode().Perm()
	// Every record in the old file was synced by the write that put it
	// there, so an error closing it loses nothing.
	_ = r.f.Close()
	r.f = nil
	return nil
}

// write appends whole lines to the file and syncs it. On an error they are
// cut off it again (see cut).
func (r *Records) write(lines []byte) error {
	if r.midLine {
		lines = append([]byte{'\n'}, lines...)
	}
	n, err := r.f.Write(lines)
	r.size += int64(n)
	if err == nil {
		err = r.f.Sync()
	}
	if err != nil {
		if n > 0 {
			r.midLine = lines[n-1] != '\n'
		}
		r.cut()
		return fmt.Errorf("call records: %w", err)
	}
	r.good, r.midLine = r.size, false
	return nil
}

// cut takes off what a failed write left past the last whole write, if it
// can (shrinking a file needs no free space). The next successful write's
// sync makes the cut durable.
func (r *Records) cut() {
	if r.size > r.good && r.f.Truncate(r.good) == nil {
		r.size, r.midLine = r.good, false
	}
}

// rotate renames the file aside and opens a new one. A failed rename
// leaves the file open as it was (the next Append tries again). When the
// new file cannot be opened, r.f is nil and the next Append opens it.
func (r *Records) rotate(now time.Time) error {
	aside, err := r.asideName(now)
	if err == nil {
		err = r.rename(r.path, aside)
	}
	if err != nil {
		return fmt.Errorf("call records: rotate: %w", err)
	}
	if fi, err := r.f.Stat(); err == nil {
		r.mode = fi.Mode().Perm()
	}
	// Every record in the old file was synced by the write that put it
	// there, so an error closing it loses nothing.
	_ = r.f.Close()
	r.f = nil
	return r.open()
}

// asideName is the name the file is rotated to: PATH.<now, UTC>, or the
// first nanosecond after it no file has. A batch split across several
// files rotates more than once at the same now, and a rename onto a name
// taken would replace that rotated file and lose its records.
func (r *Records) asideName(now time.Time) (string, error) {
	for t := now.UTC(); ; t = t.Add(time.Nanosecond) {
		name := r.path + "." + t.Format("20060102T150405.000000000Z")
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return name, nil
		} else if err != nil {
			return "", err
		}
	}
}

// Close closes the file (nothing when a reopen had failed).
func (r *Records) Close() error {
	if r.f == nil {
		return nil
	}
	f := r.f
	r.f = nil
	return f.Close()
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("call records: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("call records: %w", err)
	}
	return nil
}
