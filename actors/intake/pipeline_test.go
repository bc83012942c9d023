package intake

import (
	"fmt"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func TestPipelineBoundsCommitsInFlight(t *testing.T) {
	p := Pipeline{Depth: 2, MaxBatch: 3}
	if _, _, ok := p.Take(); ok {
		t.Fatal("a batch from an empty pipeline")
	}
	for i := range 7 {
		s, _ := submit(fmt.Sprint(i), "44")
		p.Submit(s)
	}
	if !p.Full() {
		t.Error("7 queued with MaxBatch 3: not full")
	}
	var sizes []int
	for {
		e, _, ok := p.Take()
		if !ok {
			break
		}
		sizes = append(sizes, len(e))
	}
	if fmt.Sprint(sizes) != "[3 3]" {
		t.Fatalf("batches %v, want two of 3 (Depth 2), the rest waiting", sizes)
	}
	p.Done()
	e, reports, ok := p.Take()
	if !ok || len(e) != 1 || len(reports) != 0 {
		t.Fatalf("after a commit ended: %d entries, ok %v", len(e), ok)
	}
	p.Statuses(&messages.ApplyStatuses{From: "b", Reports: []messages.StatusReport{{ID: "x", Status: messages.ReportFailed, Reason: "gone"}}})
	p.Done()
	e, reports, ok = p.Take()
	if !ok || len(e) != 0 || len(reports) != 1 || reports[0].updates[0].Result != persistence.ResultFailed {
		t.Fatalf("a report alone makes a batch: %d entries, %+v", len(e), reports)
	}
	if p.Forwards(&messages.AcceptForwards{}) {
		t.Error("an empty forward request queued")
	}
}
