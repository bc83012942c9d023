package retention

import (
	"encoding/json"
	"fmt"
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
// them durable before Append returns. When the file would grow past
// RotateBytes it is renamed to PATH.<UTC time> first and a new one begun
// (rotated files are the operator's to ship and remove). It is used by one
// goroutine (the cleaner's).
type Records struct {
	path        string
	rotateBytes int64
	f           *os.File
	size        int64
}

// OpenRecords opens (creating when missing) the record file at path.
func OpenRecords(path string, rotateBytes int64) (*Records, error) {
	if rotateBytes <= 0 {
		return nil, fmt.Errorf("call records: rotate size %d must be positive", rotateBytes)
	}
	r := &Records{path: path, rotateBytes: rotateBytes}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Records) open() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("call records: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("call records: %w", err)
	}
	r.f, r.size = f, fi.Size()
	return syncDir(filepath.Dir(r.path))
}

// Append writes the records and syncs the file. On an error nothing may
// be taken as written (the caller purges nothing); a part of a line may
// be left at the end of the file, and the next Append starts on a new
// line.
func (r *Records) Append(recs []Record, now time.Time) error {
	if len(recs) == 0 {
		return nil
	}
	var buf []byte
	for _, rec := range recs {
		line, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("call records: %w", err)
		}
		buf = append(append(buf, line...), '\n')
	}
	if r.size > 0 && r.size+int64(len(buf)) > r.rotateBytes {
		if err := r.rotate(now); err != nil {
			return err
		}
	}
	n, err := r.f.Write(buf)
	r.size += int64(n)
	if err == nil {
		err = r.f.Sync()
	}
	if err != nil {
		// Whatever part of the batch landed is an incomplete last line: end
		// it, so that the next batch's first record is a line of its own.
		if n > 0 {
			if m, _ := r.f.Write([]byte("\n")); m > 0 {
				r.size++
			}
		}
		return fmt.Errorf("call records: %w", err)
	}
	return nil
}

// rotate renames the file aside and opens a new one.
func (r *Records) rotate(now time.Time) error {
	aside := r.path + "." + now.UTC().Format("20060102T150405.000000000Z")
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("call records: %w", err)
	}
	if err := os.Rename(r.path, aside); err != nil {
		// Keep appending to the file we have rather than stop.
		if err2 := r.open(); err2 != nil {
			return err2
		}
		return fmt.Errorf("call records: rotate: %w", err)
	}
	return r.open()
}

// Close closes the file.
func (r *Records) Close() error { return r.f.Close() }

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
