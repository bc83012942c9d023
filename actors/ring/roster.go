package ring

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Roster is what an instance knows of its site's members and the
// capabilities each announced (messages.RingMember.Capabilities): the
// members of the last assignment applied, and, for Hold after they were
// last seen, the members of earlier ones and of the assignment stored
// when the instance started. A member missing from the assignment may be
// alive and come back with its ranges: a new master lists only itself
// at first, and a member dropped after a pause joins again. A capability
// that such a member lacks is lacking until it comes back announcing it,
// or Hold has passed. Safe for concurrent use: the coordinator applies,
// every submit asks.
type Roster struct {
	mu      sync.RWMutex
	hold    time.Duration
	members map[string]rostered
	known   bool
}

// rostered is a member as last seen: its capabilities, when, and whether
// the last assignment applied lists it.
type rostered struct {
	caps    []string
	at      time.Time
	current bool
}

// NewRoster returns a roster that knows nothing yet (Lacking says so
// until Seed or Apply), holding absent members for hold.
func NewRoster(hold time.Duration) *Roster {
	return &Roster{hold: hold, members: map[string]rostered{}}
}

// Seed takes what the store held when the instance started (st): the
// members of the stored assignment as seen at now, none of them current
// (those that are alive join the new master soon), and the members its
// master stored as absent (persistence.RingState.Absent) as that master
// last saw them, each counting until Hold after that, not after now.
// self is left out: this instance is what it is now, whatever its earlier
// run announced (the first assignment says so).
func (r *Roster) Seed(st persistence.RingState, self string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range st.Members {
		if _, ok := r.members[m.InstanceID]; !ok && m.InstanceID != self {
			r.members[m.InstanceID] = rostered{caps: slices.Clone(m.Capabilities), at: now}
		}
	}
	for _, a := range st.Absent {
		if m, ok := r.members[a.InstanceID]; a.InstanceID != self && (!ok || m.at.Before(a.LastSeen) && !m.current) {
			r.members[a.InstanceID] = rostered{caps: slices.Clone(a.Capabilities), at: a.LastSeen}
		}
	}
	r.known = true
}

// forgotten reports whether m no longer counts at now: missing from the
// assignment applied for Hold since it was last seen.
func (r *Roster) forgotten(m rostered, now time.Time) bool {
	return !m.current && now.Sub(m.at) >= r.hold
}

// Missing are the members the roster still counts at now that ms (an
// assignment about to be published) does not list, with when each was
// last seen (now for those of the assignment applied): what the store
// keeps beside the assignment (persistence.RingState.Absent), for the
// instances that start meanwhile.
func (r *Roster) Missing(ms []messages.RingMember, now time.Time) []persistence.AbsentMember {
	r.mu.RLock()
	defer r.mu.RUnlock()
	listed := make(map[string]bool, len(ms))
	for _, m := range ms {
		listed[m.InstanceID] = true
	}
	var out []persistence.AbsentMember
	for id, m := range r.members {
		if listed[id] || r.forgotten(m, now) {
			continue
		}
		at := m.at
		if m.current {
			at = now
		}
		out = append(out, persistence.AbsentMember{InstanceID: id, Capabilities: slices.Clone(m.caps), LastSeen: at})
	}
	slices.SortFunc(out, func(a, b persistence.AbsentMember) int { return strings.Compare(a.InstanceID, b.InstanceID) })
	return out
}

// Apply takes the members of an assignment applied at now: they are the
// current ones, as they announce themselves now; the others are kept as
// they were last seen.
func (r *Roster) Apply(ms []messages.RingMember, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, m := range r.members {
		switch {
		case m.current:
			m.current, m.at = false, now
			r.members[id] = m
		case r.forgotten(m, now):
			delete(r.members, id)
		}
	}
	for _, m := range ms {
		r.members[m.InstanceID] = rostered{caps: slices.Clone(m.Capabilities), at: now, current: true}
	}
	r.known = true
}

// Lacking are the members (sorted) that do not announce capability c:
// those of the last assignment applied, and the others seen less than
// Hold before now; those absent longer are forgotten. known is false
// before anything was seeded or applied.
func (r *Roster) Lacking(c string, now time.Time) (ids []string, known bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for id, m := range r.members {
		if slices.Contains(m.caps, c) || r.forgotten(m, now) {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, r.known
}
