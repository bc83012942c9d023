package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// TestCheckOriginDeliveredWithoutItsDestinationsReport: a message of a
// remote frontend that its origin holds delivered although it applied no
// report of its delivery from its destination disagrees, even when the
// frontend acked it and the destination holds it delivered. An origin
// that marks a message delivered as soon as its peer accepts the forward
// (forwarded -> delivered without the peer's delivery_status) ends in
// those final states whenever the delivery succeeds: before this check
// such a node passed every seed (--seeds 3 --seed 928 --nodes 5
// --duration 4m).
func TestCheckOriginDeliveredWithoutItsDestinationsReport(t *testing.T) {
	delivered := messages.StateDelivered
	h := History{
		Submits: []Submit{
			{ID: "a", Node: "n1", Target: "n2", Frontend: "n2-f0", Outcome: Accepted},
			{ID: "b", Node: "n1", Target: "n2", Frontend: "n2-f0", Outcome: Accepted},
			{ID: "c", Node: "n1", Target: "n1", Frontend: "n1-f0", Outcome: Accepted},
		},
		Deliveries: []Delivery{
			{ID: "a", Frontend: "n2-f0", Node: "n2", Ack: Acked},
			{ID: "b", Frontend: "n2-f0", Node: "n2", Ack: Acked},
			{ID: "c", Frontend: "n1-f0", Node: "n1", Ack: Acked},
		},
		Origin:   map[string]messages.State{"a": delivered, "b": delivered, "c": delivered},
		Dest:     map[string]Stored{"a": {State: delivered}, "b": {State: delivered}, "c": {State: delivered}},
		Reported: map[string]bool{"a": false, "b": true},
	}
	r := Check(h)
	if r.Disagreeing != 1 {
		t.Fatalf("disagreeing=%d, want 1 (a: delivered at n1 with no report from n2): %v", r.Disagreeing, r.Details)
	}
	if want := "disagreeing: a delivered at its origin n1, which applied no report"; len(r.Details) != 1 || !strings.HasPrefix(r.Details[0], want) {
		t.Fatalf("details %q, want one starting %q", r.Details, want)
	}
	// A history that did not record reports is not judged on them.
	h.Reported = nil
	if r := Check(h); !r.OK() {
		t.Fatalf("without reports recorded: %+v, want OK", r)
	}
}

// TestClaimLogCountsOnlyAppliedDeliveredReports: only a delivered report
// that the store applied (not one refused, already recorded, failed, or
// in a call that failed) made its message delivered.
func TestClaimLogCountsOnlyAppliedDeliveredReports(t *testing.T) {
	l := newClaimLog()
	u := func(id string, r persistence.Result) persistence.StatusUpdate {
		return persistence.StatusUpdate{ID: id, From: "n2", Result: r}
	}
	l.reported([]persistence.StatusUpdate{u("a", persistence.ResultDelivered), u("b", persistence.ResultDelivered), u("c", persistence.ResultFailed)},
		[]persistence.Completion{persistence.Applied, persistence.AlreadyRecorded, persistence.Applied}, nil, 1, 2)
	l.reported([]persistence.StatusUpdate{u("d", persistence.ResultDelivered)}, nil, errors.New("disk I/O error"), 3, 4)
	for id, want := range map[string]bool{"a": true, "b": false, "c": false, "d": false} {
		if got := l.reportedBy(id, "n2"); got != want {
			t.Errorf("%s: reported delivered by n2 = %v, want %v", id, got, want)
		}
	}
	if l.reportedBy("a", "n3") {
		t.Errorf("a: reported delivered by n3, which never reported it")
	}
}
