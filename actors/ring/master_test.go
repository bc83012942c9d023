package ring

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

const interval = 30 * time.Second

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func joinDoc(id string) messages.RingJoin {
	j := masterDoc()
	j.InstanceID, j.Address = id, id+":7000"
	return j
}

func newTestMaster(stored persistence.RingState) *Master {
	return NewMaster(MasterConfig{Self: masterDoc(), PublishInterval: interval}, stored)
}

// publish runs Next at now and, when it has an assignment, publishes it
// and applies it on the master itself.
func publish(t *testing.T, m *Master, now time.Time) (messages.RingAssignment, bool) {
	t.Helper()
	a, ok := m.Next(now)
	if ok {
		m.Published(now, a)
		m.Applied(a.Epoch)
		checkAssignment(t, a)
	}
	return a, ok
}

func checkAssignment(t *testing.T, a messages.RingAssignment) {
	t.Helper()
	got := make(map[string]rs)
	var ids []string
	for _, mb := range a.Members {
		got[mb.InstanceID] = mb.Ranges
		ids = append(ids, mb.InstanceID)
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("members not sorted: %v", ids)
	}
	checkPartition(t, got, ids)
	if a.Master != "ring-0" || a.MasterAddress != "ring-0:7000" || a.Cluster != "us" || a.Region != "east" {
		t.Fatalf("assignment header: %+v", a)
	}
}

func memberIDs(a messages.RingAssignment) []string {
	var ids []string
	for _, mb := range a.Members {
		ids = append(ids, mb.InstanceID)
	}
	return ids
}

func rangesOf(a messages.RingAssignment, id string) rs {
	for _, mb := range a.Members {
		if mb.InstanceID == id {
			return mb.Ranges
		}
	}
	return nil
}

func TestMasterJoinPublishCoverage(t *testing.T) {
	m := newTestMaster(persistence.RingState{})
	if m.Coverage() != 0 || !m.NextCheck(t0).Equal(t0) {
		t.Fatal("before any publish: coverage 0 and a publish due now")
	}
	a, ok := publish(t, m, t0)
	if !ok || a.Epoch != 1 || !slices.Equal(memberIDs(a), []string{"ring-0"}) || m.Coverage() != 1 {
		t.Fatalf("first publish: %+v coverage %v", a, m.Coverage())
	}
	if _, ok := publish(t, m, t0); ok {
		t.Fatal("nothing changed, yet a new assignment")
	}

	now := t0.Add(time.Second)
	if err := m.Join(now, joinDoc("ring-1")); err != nil {
		t.Fatal(err)
	}
	if !m.NextCheck(now).Equal(now) {
		t.Fatal("a join makes a publish due now")
	}
	a, ok = publish(t, m, now)
	if !ok || a.Epoch != 2 || !slices.Equal(memberIDs(a), []string{"ring-0", "ring-1"}) {
		t.Fatalf("after join: %+v", a)
	}
	if got := m.Coverage(); got < 0.49 || got > 0.51 {
		t.Fatalf("only the master holds epoch 2: coverage %v", got)
	}
	if len(m.Subscribed()) != 0 {
		t.Fatalf("subscribed %v before any poll", m.Subscribed())
	}
	if !m.PollOpened(now, "ring-1", 1) || m.Coverage() > 0.51 {
		t.Fatal("a poll with the old epoch confirms nothing")
	}
	if !slices.Equal(m.Subscribed(), []string{"ring-1"}) {
		t.Fatalf("subscribed %v while ring-1 polls", m.Subscribed())
	}
	m.PollClosed(now, "ring-1")
	if len(m.Subscribed()) != 0 {
		t.Fatalf("subscribed %v after ring-1's poll closed", m.Subscribed())
	}
	if !m.PollOpened(now, "ring-1", 2) || m.Coverage() != 1 {
		t.Fatalf("confirmed by all: coverage %v", m.Coverage())
	}
	if m.Reassignments() != 1 {
		t.Fatalf("reassignments = %d, want 1 (ring-1's range)", m.Reassignments())
	}
	// Polls keep it a member: a republish later changes nothing.
	if _, ok := publish(t, m, now.Add(10*interval)); ok {
		t.Fatal("a polling, confirmed member was dropped")
	}
	if !m.NextCheck(now).IsZero() {
		t.Fatalf("nothing pending, NextCheck = %v", m.NextCheck(now))
	}
	// The same document again: no new epoch.
	if err := m.Join(now, joinDoc("ring-1")); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Next(now); ok {
		t.Fatal("a rejoin with the same document bumped the epoch")
	}
	// A changed document: a new epoch.
	j := joinDoc("ring-1")
	j.Services = []string{messages.ServiceForward}
	if err := m.Join(now, j); err != nil {
		t.Fatal(err)
	}
	if a, ok := publish(t, m, now); !ok || a.Epoch != 3 {
		t.Fatalf("services changed: %+v %v", a, ok)
	}
}

func TestMasterDropsSilentMember(t *testing.T) {
	m := newTestMaster(persistence.RingState{})
	m.Join(t0, joinDoc("ring-1"))
	m.Join(t0, joinDoc("ring-2"))
	a, _ := publish(t, m, t0)
	m.PollOpened(t0, "ring-1", a.Epoch)
	m.PollOpened(t0, "ring-2", a.Epoch)
	if m.Coverage() != 1 {
		t.Fatalf("coverage %v", m.Coverage())
	}
	gone := rangesOf(a, "ring-2")
	closed := t0.Add(time.Second)
	m.PollClosed(closed, "ring-2")
	grace := min(interval, 5*time.Second)
	if got := m.NextCheck(closed); !got.Equal(closed.Add(grace)) {
		t.Fatalf("NextCheck = %v, want the grace deadline %v", got, closed.Add(grace))
	}
	if _, ok := publish(t, m, closed.Add(grace-time.Millisecond)); ok {
		t.Fatal("dropped within grace")
	}
	b, ok := publish(t, m, closed.Add(grace))
	if !ok || b.Epoch != a.Epoch+1 || !slices.Equal(memberIDs(b), []string{"ring-0", "ring-1"}) {
		t.Fatalf("silent member not dropped: %+v", b)
	}
	if !Inside(gone, append(rangesOf(b, "ring-0"), rangesOf(b, "ring-1")...)) ||
		!Inside(rangesOf(a, "ring-0"), rangesOf(b, "ring-0")) || !Inside(rangesOf(a, "ring-1"), rangesOf(b, "ring-1")) {
		t.Fatalf("only the dropped member's ranges may move: %+v -> %+v", a, b)
	}
	if m.PollOpened(closed.Add(grace), "ring-2", a.Epoch) {
		t.Fatal("a dropped member's poll must be refused (join again)")
	}
}

func TestMasterDropsUnconfirmedMember(t *testing.T) {
	m := newTestMaster(persistence.RingState{})
	m.Join(t0, joinDoc("ring-1"))
	a, _ := publish(t, m, t0)
	m.PollOpened(t0, "ring-1", a.Epoch)
	m.Join(t0, joinDoc("ring-2"))
	b, _ := publish(t, m, t0)
	m.PollOpened(t0, "ring-2", b.Epoch)
	// ring-1 keeps polling, but with the epoch before.
	now := t0
	for now.Before(t0.Add(2 * interval)) {
		if _, ok := publish(t, m, now); ok {
			t.Fatalf("dropped at %v, before two intervals", now.Sub(t0))
		}
		m.PollClosed(now, "ring-1")
		m.PollOpened(now, "ring-1", a.Epoch)
		now = now.Add(interval / 2)
	}
	if got := m.NextCheck(t0); !got.Equal(t0.Add(2 * interval)) {
		t.Fatalf("NextCheck = %v", got)
	}
	c, ok := publish(t, m, now)
	if !ok || !slices.Equal(memberIDs(c), []string{"ring-0", "ring-2"}) {
		t.Fatalf("a member stuck on an old epoch stays: %+v", c)
	}
}

func TestMasterLeaveAndRefusal(t *testing.T) {
	m := newTestMaster(persistence.RingState{})
	m.Join(t0, joinDoc("ring-1"))
	a, _ := publish(t, m, t0)

	bad := joinDoc("ring-2")
	bad.Cluster = "eu"
	err := m.Join(t0, bad)
	var r *Refusal
	if !errors.As(err, &r) || r.Code != CodeClusterMismatch {
		t.Fatalf("Join = %v, want a cluster refusal", err)
	}
	if err := m.Join(t0, joinDoc("ring-0")); !errors.As(err, &r) || r.Code != CodeBadJoin {
		t.Fatalf("a join with the master's id: %v", err)
	}
	if _, ok := m.Next(t0); ok {
		t.Fatal("a refused join changed the membership")
	}
	if m.PollOpened(t0, "ring-2", 0) {
		t.Fatal("a refused joiner is a member")
	}

	m.Leave(t0, "ring-1")
	b, ok := publish(t, m, t0)
	if !ok || b.Epoch != a.Epoch+1 || !slices.Equal(memberIDs(b), []string{"ring-0"}) {
		t.Fatalf("leave not at once: %+v", b)
	}
	m.Leave(t0, "ring-0") // the master never leaves its own ring
	if _, ok := m.Next(t0); ok {
		t.Fatal("the master left its own ring")
	}
}

func TestMasterFailoverFromStoredState(t *testing.T) {
	// The old master ring-9 published epoch 7 for ring-0, ring-1 and
	// ring-2, then died; ring-0 takes over.
	old := Assign(nil, []string{"ring-0", "ring-1", "ring-2"})
	stored := persistence.RingState{Epoch: 7, Master: "ring-9", MasterAddress: "ring-9:7000"}
	for _, id := range []string{"ring-0", "ring-1", "ring-2"} {
		stored.Members = append(stored.Members, messages.RingMember{InstanceID: id, Services: both, Ranges: old[id]})
	}
	m := newTestMaster(stored)
	a, ok := publish(t, m, t0)
	if !ok || a.Epoch != 8 || !slices.Equal(rangesOf(a, "ring-0"), Whole) || len(a.Members) != 1 {
		t.Fatalf("first publish of the new master: %+v", a)
	}
	// ring-2 comes back first: it gets its stored ranges back and ring-0
	// keeps its own.
	m.Join(t0, joinDoc("ring-2"))
	b, _ := publish(t, m, t0)
	if b.Epoch != 9 || !Inside(old["ring-2"], rangesOf(b, "ring-2")) || !Inside(old["ring-0"], rangesOf(b, "ring-0")) {
		t.Fatalf("ring-2 back: %+v, stored %v", b, old)
	}
	// ring-1 comes back: exactly the stored split again.
	m.Join(t0, joinDoc("ring-1"))
	c, _ := publish(t, m, t0)
	for id, want := range old {
		if got := rangesOf(c, id); !slices.Equal(got, want) {
			t.Fatalf("epoch %d: %s has %v, stored %v", c.Epoch, id, got, want)
		}
	}
	if c.Epoch != 10 {
		t.Fatalf("epoch %d, want 10", c.Epoch)
	}
}

func TestMasterFailoverAllBackAtOnce(t *testing.T) {
	old := Assign(Assign(nil, []string{"x", "ring-0", "ring-1", "ring-2"}), []string{"ring-0", "ring-1", "ring-2"})
	stored := persistence.RingState{Epoch: 7, Master: "ring-1"}
	for id, r := range old {
		stored.Members = append(stored.Members, messages.RingMember{InstanceID: id, Services: both, Ranges: r})
	}
	m := newTestMaster(stored)
	publish(t, m, t0)
	m.Join(t0, joinDoc("ring-1"))
	m.Join(t0, joinDoc("ring-2"))
	b, _ := publish(t, m, t0)
	if b.Epoch != 9 {
		t.Fatalf("epoch %d", b.Epoch)
	}
	for id, want := range old {
		if got := rangesOf(b, id); !slices.Equal(got, want) {
			t.Fatalf("%s has %v, stored %v", id, got, want)
		}
	}
}

// TestMasterRefusesADuplicateInstance: while a member is subscribed, a
// join under its id from another address is refused; once its call has
// ended (a restarted instance), the join is taken.
func TestMasterRefusesADuplicateInstance(t *testing.T) {
	m := newTestMaster(persistence.RingState{})
	if err := m.Join(t0, joinDoc("ring-1")); err != nil {
		t.Fatal(err)
	}
	publish(t, m, t0)
	m.PollOpened(t0, "ring-1", m.Current().Epoch)
	twin := joinDoc("ring-1")
	twin.Address = "elsewhere:7000"
	var r *Refusal
	if err := m.Join(t0, twin); !errors.As(err, &r) || r.Code != CodeDuplicate {
		t.Fatalf("join of a twin: %v", err)
	}
	if err := m.Join(t0, joinDoc("ring-1")); err != nil {
		t.Fatalf("the member joining again from its own address: %v", err)
	}
	m.PollClosed(t0.Add(time.Second), "ring-1")
	if err := m.Join(t0.Add(time.Second), twin); err != nil {
		t.Fatalf("join after the old call ended: %v", err)
	}
}

// TestMasterRebasePublishesOverAnotherAssignment: after Rebase (another
// master's assignment is stored over this one's view) the next assignment
// is numbered above the stored epoch and is due even though the membership
// did not change; it keeps the members and ranges of this master's own,
// and once published nothing more is due.
func TestMasterRebasePublishesOverAnotherAssignment(t *testing.T) {
	m := newTestMaster(persistence.RingState{})
	if err := m.Join(t0, joinDoc("ring-1")); err != nil {
		t.Fatal(err)
	}
	m.PollOpened(t0, "ring-1", 0)
	before, ok := publish(t, m, t0)
	if !ok || before.Epoch != 1 {
		t.Fatalf("first publish: %+v, %v", before, ok)
	}
	if _, ok := m.Next(t0); ok {
		t.Fatal("a publish due without a change")
	}

	m.Rebase(7)
	if !m.NextCheck(t0).Equal(t0) {
		t.Fatal("after Rebase no publish is due now")
	}
	if m.Current().Epoch != 1 {
		t.Fatalf("Rebase changed the current assignment: epoch %d", m.Current().Epoch)
	}
	a, ok := publish(t, m, t0)
	if !ok || a.Epoch != 8 {
		t.Fatalf("after Rebase(7): %+v, %v; want epoch 8", a, ok)
	}
	for _, id := range []string{"ring-0", "ring-1"} {
		if !slices.Equal(rangesOf(a, id), rangesOf(before, id)) {
			t.Errorf("%s's ranges moved: %v, were %v", id, rangesOf(a, id), rangesOf(before, id))
		}
	}
	if _, ok := m.Next(t0); ok {
		t.Fatal("a publish due after the rebased one was published")
	}
}

// TestMasterCarriesCapabilities: each member's capabilities (the master's
// own from its config) are in the assignment, sorted and without
// duplicates; a member of an earlier version announces none, and a
// roster that applies the assignment names it. The member coming back with them (upgraded) is a changed
// document: a new epoch, after which nobody lacks them.
func TestMasterCarriesCapabilities(t *testing.T) {
	self := masterDoc()
	self.Capabilities = []string{messages.CapMessageClass, messages.CapForwardBatch, messages.CapMessageClass}
	m := NewMaster(MasterConfig{Self: self, PublishInterval: interval}, persistence.RingState{})
	if err := m.Join(t0, joinDoc("ring-1")); err != nil { // an earlier version: no capabilities
		t.Fatal(err)
	}
	a, ok := publish(t, m, t0)
	if !ok {
		t.Fatal("no assignment")
	}
	want := []string{messages.CapForwardBatch, messages.CapMessageClass}
	if got := a.Members[0].Capabilities; !slices.Equal(got, want) {
		t.Fatalf("the master's capabilities %v, want %v", got, want)
	}
	if got := a.Members[1].Capabilities; got != nil {
		t.Fatalf("ring-1 announced none, the assignment says %v", got)
	}
	if got := lackingIn(a, messages.CapMessageClass); !slices.Equal(got, []string{"ring-1"}) {
		t.Fatalf("lacking message_class: %v, want [ring-1]", got)
	}
	if got := lackingIn(a, messages.CapForwardBatch); !slices.Equal(got, []string{"ring-1"}) {
		t.Fatalf("lacking forward_batch: %v, want [ring-1]", got)
	}

	now := t0.Add(time.Second)
	m.PollOpened(now, "ring-1", a.Epoch)
	j := joinDoc("ring-1")
	j.Capabilities = []string{messages.CapMessageClass}
	if err := m.Join(now, j); err != nil {
		t.Fatal(err)
	}
	b, ok := publish(t, m, now)
	if !ok || b.Epoch != a.Epoch+1 {
		t.Fatalf("ring-1 came back with capabilities: %+v %v, want epoch %d", b, ok, a.Epoch+1)
	}
	if got := lackingIn(b, messages.CapMessageClass); got != nil {
		t.Fatalf("lacking message_class after the upgrade: %v", got)
	}
	if !slices.Equal(rangesOf(b, "ring-1"), rangesOf(a, "ring-1")) {
		t.Fatal("a changed document moved ranges")
	}
	if _, ok := m.Next(now); ok {
		t.Fatal("the same capabilities again bumped the epoch")
	}
}

// lackingIn are the members of a that lack capability c, as a roster that
// applied a names them.
func lackingIn(a messages.RingAssignment, c string) []string {
	r := NewRoster(0)
	r.Apply(a.Members, t0)
	ids, _ := r.Lacking(c, t0)
	return ids
}
