package persistence

import (
	"errors"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestKnownResults: an Accept that failed after its insert committed knows
// the fate of the entries whose id it created or found, and of those whose
// frontend it found gone; every other entry is Unread, a StoredOnly one
// too (its lookup may not have been read), where AcceptResults, which
// expects the whole answer, refuses. Partial makes them a PartialAccept
// when something was created, and is the store's error alone otherwise.
func TestKnownResults(t *testing.T) {
	local := func(id, fe string) NewMessage {
		return NewMessage{ID: id, Body: "b", State: messages.StatePending, Work: &WorkSpec{Kind: WorkDelivery, Target: fe}}
	}
	batch := []NewMessage{
		local("made", "fe"), local("made", "fe"), // created, and its repeat
		{ID: "lookup", Body: "b", StoredOnly: true},
		local("found", "fe"),    // taken, and read
		local("unread", "fe"),   // taken, and not read
		local("gone", "old-fe"), // its frontend found gone
	}
	plan := PlanAccept(batch)
	created := map[string]messages.Message{"made": {ID: "made", State: messages.StatePending}}
	stored := map[string]messages.Message{"found": {ID: "found", Body: "b", State: messages.StateDelivered}}
	unknown := map[string]bool{"old-fe": true}
	if _, err := AcceptResults(plan, batch, created, stored, nil, nil, unknown); err == nil {
		t.Fatal("AcceptResults answered an entry neither created nor found")
	}
	got := KnownResults(plan, batch, created, stored, nil, nil, unknown)
	want := []struct{ created, unread, gone bool }{{true, false, false}, {}, {unread: true}, {}, {unread: true}, {gone: true}}
	for i, w := range want {
		if g := got[i]; g.Created != w.created || g.Unread != w.unread || g.FrontendGone != w.gone || g.Absent {
			t.Errorf("entry %d (%s): %+v, want created %v unread %v frontend gone %v", i, batch[i].ID, g, w.created, w.unread, w.gone)
		}
	}
	if got[1].Message.ID != "made" || got[3].Message.State != messages.StateDelivered {
		t.Errorf("the repeat and the stored entry: %+v, %+v", got[1], got[3])
	}

	errRead := errors.New("connection lost")
	var p *PartialAccept
	if err := Partial(got, errRead); !errors.As(err, &p) || !errors.Is(err, errRead) || len(p.Accepted) != len(batch) {
		t.Fatalf("Partial with a created entry: %v", err)
	}
	if err := Partial(KnownResults(plan, batch, nil, stored, nil, nil, unknown), errRead); err != errRead {
		t.Fatalf("Partial with nothing created: %v, want the error alone", err)
	}
}
