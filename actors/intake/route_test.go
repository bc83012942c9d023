package intake

import (
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

func TestRouteEntries(t *testing.T) {
	table := NewTable([]messages.Route{{Prefix: "44", Frontend: "uk"}, {Prefix: "46", Frontend: "se"}},
		[]messages.Frontend{{Name: "uk", Mode: messages.ModePull}})
	table.SetRemote(func(fe string) (string, bool, bool) { return "peer-b", fe == "se", fe == "se" })
	r := router{table: table, node: "a", newID: func() string { return "generated" }}

	s, _ := submit("", "447700")
	nm, err := r.entryMessage(entry{sub: s}, t0)
	if err != nil || nm.ID != "generated" || nm.Work.Kind != persistence.WorkDelivery || nm.Work.Target != "uk" ||
		nm.State != messages.StatePending || nm.DestSMSC != "a" {
		t.Errorf("local: %+v, %v", nm, err)
	}
	s, _ = submit("f", "46700")
	nm, err = r.entryMessage(entry{sub: s}, t0)
	if err != nil || nm.Work.Kind != persistence.WorkForward || nm.Work.Target != "peer-b" || nm.DestSMSC != "peer-b" {
		t.Errorf("remote: %+v, %v", nm, err)
	}
	s, _ = submit("n", "33")
	if _, err := r.entryMessage(entry{sub: s}, t0); !isMiss(err) {
		t.Errorf("no route: %v, want a miss", err)
	}
	fwd := &forwardReq{m: &messages.AcceptForwards{From: "c", Forwards: []messages.Forward{
		{ID: "x", DestSMSC: "a", Frontend: "uk"}, {ID: "y", DestSMSC: "z", Frontend: "uk"}, {ID: "w", DestSMSC: "a", Frontend: "se"},
	}}}
	nm, err = r.entryMessage(entry{fwd: fwd, idx: 0}, t0)
	if err != nil || nm.ReportTo != "c" || nm.Work.Target != "uk" {
		t.Errorf("forward: %+v, %v", nm, err)
	}
	for i := 1; i < 3; i++ {
		if _, err := r.entryMessage(entry{fwd: fwd, idx: i}, t0); !isMiss(err) {
			t.Errorf("forward %d: %v, want not_our_frontend", i, err)
		}
	}
}

// TestRouteForwardTheSiteDoesNotTake: a peer's forward whose options the
// site does not take now (Config.Site) is refused with its answer; one
// the site takes is routed as usual.
func TestRouteForwardTheSiteDoesNotTake(t *testing.T) {
	table := NewTable(nil, []messages.Frontend{{Name: "uk", Mode: messages.ModePull}})
	refusal := messages.Errorf(messages.CodeUnavailable, "old lacks message_class")
	r := router{table: table, node: "a", site: func(o messages.Options) error {
		if o.MessageClass != nil {
			return refusal
		}
		return nil
	}}
	fwd := &forwardReq{m: &messages.AcceptForwards{From: "c", Forwards: []messages.Forward{
		{ID: "x", DestSMSC: "a", Frontend: "uk", Options: messages.Options{MessageClass: messages.Class(0)}},
		{ID: "y", DestSMSC: "a", Frontend: "uk"},
	}}}
	if _, err := r.entryMessage(entry{fwd: fwd, idx: 0}, t0); err != refusal {
		t.Errorf("a forward with a class: %v, want %v", err, refusal)
	}
	if nm, err := r.entryMessage(entry{fwd: fwd, idx: 1}, t0); err != nil || nm.Work.Target != "uk" {
		t.Errorf("a forward without one: %+v, %v", nm, err)
	}
}
