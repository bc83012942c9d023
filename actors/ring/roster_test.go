package ring

import (
	"slices"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// TestRoster: the roster names the members lacking a capability: those
// of the assignment applied, and those missing from it (seeded from the
// stored assignment, or dropped from a later one) until Hold after they
// were last seen, or until they come back announcing it. Before anything
// is seeded or applied nothing is known.
func TestRoster(t *testing.T) {
	const c = messages.CapMessageClass
	hold := time.Minute
	member := func(id string, caps ...string) messages.RingMember {
		return messages.RingMember{InstanceID: id, Capabilities: caps}
	}
	check := func(r *Roster, at time.Time, want []string, what string) {
		t.Helper()
		got, known := r.Lacking(c, at)
		if !known || !slices.Equal(got, want) {
			t.Errorf("%s: lacking %v (known %v), want %v", what, got, known, want)
		}
	}

	r := NewRoster(hold)
	if _, known := r.Lacking(c, t0); known {
		t.Fatal("known before anything was seeded or applied")
	}
	// Started on a store whose last assignment lists an old member: a
	// new master lists only itself at first, and old may come back.
	r.Seed(persistence.RingState{Members: []messages.RingMember{member("new", c), member("old")}}, "self", t0)
	r.Apply([]messages.RingMember{member("new", c)}, t0.Add(time.Second))
	check(r, t0.Add(30*time.Second), []string{"old"}, "old missing from the new master's first assignment")
	check(r, t0.Add(hold), nil, "old missing for Hold")

	// A member in the assignment lacks it as long as it is there, and for
	// Hold after it was last seen.
	r.Apply([]messages.RingMember{member("new", c), member("old")}, t0.Add(2*time.Minute))
	check(r, t0.Add(10*time.Minute), []string{"old"}, "old a member")
	dropped := t0.Add(11 * time.Minute)
	r.Apply([]messages.RingMember{member("new", c)}, dropped)
	check(r, dropped.Add(hold-time.Second), []string{"old"}, "old dropped a moment ago")
	check(r, dropped.Add(hold), nil, "old dropped Hold ago")

	// Back announcing it (upgraded): at once nobody lacks it.
	r.Apply([]messages.RingMember{member("new", c), member("old")}, dropped.Add(time.Second))
	r.Apply([]messages.RingMember{member("new", c), member("old", c)}, dropped.Add(2*time.Second))
	check(r, dropped.Add(2*time.Second), nil, "old back upgraded")

	// A store no ring published to: known at once, nobody lacking.
	fresh := NewRoster(hold)
	fresh.Seed(persistence.RingState{}, "self", t0)
	check(fresh, t0, nil, "a fresh store")
}

// TestRosterMissingAndSeed: what a master stores beside an
// assignment (Missing: the members it still counts that the assignment
// does not list, with when each was last seen) is what an instance that
// starts meanwhile seeds from (Seed): each counts until Hold after
// it was last seen, not after the seed.
func TestRosterMissingAndSeed(t *testing.T) {
	const c = messages.CapMessageClass
	hold := time.Minute
	master := NewRoster(hold)
	master.Apply([]messages.RingMember{{InstanceID: "m", Capabilities: []string{c}}, {InstanceID: "old"}}, t0)
	dropped := t0.Add(10 * time.Second)
	abs := master.Missing([]messages.RingMember{{InstanceID: "m", Capabilities: []string{c}}}, dropped)
	if len(abs) != 1 || abs[0].InstanceID != "old" || !abs[0].LastSeen.Equal(dropped) || len(abs[0].Capabilities) != 0 {
		t.Fatalf("Missing = %+v, want old last seen at the drop", abs)
	}
	master.Apply([]messages.RingMember{{InstanceID: "m", Capabilities: []string{c}}}, dropped)
	if got := master.Missing([]messages.RingMember{{InstanceID: "m"}}, dropped.Add(hold)); len(got) != 0 {
		t.Fatalf("Missing after Hold = %+v, want none", got)
	}

	started := NewRoster(hold)
	started.Seed(persistence.RingState{Absent: abs}, "self", dropped.Add(30*time.Second))
	if ids, known := started.Lacking(c, dropped.Add(30*time.Second)); !known || !slices.Equal(ids, []string{"old"}) {
		t.Fatalf("an instance started 30 s after the drop: lacking %v (known %v), want [old]", ids, known)
	}
	if ids, _ := started.Lacking(c, dropped.Add(hold)); len(ids) != 0 {
		t.Fatalf("Hold after the drop, not after the seed: lacking %v, want none", ids)
	}
}
