package ring

import (
	"cmp"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Owners says who works which ranges of service under a: each member works
// its own ranges for the services it has; the ranges of a member that
// lacks service are worked by the master (a.Master). When the master lacks
// service too (Admit keeps members' services a subset of the master's, so
// then nobody has it) those ranges have no owner and are left out: a gap
// nobody may claim. Ranges are normalized per owner.
func Owners(a messages.RingAssignment, service string) map[string][]messages.TokenRange {
	masterHas := true // a master missing from Members is taken to have every service
	for _, m := range a.Members {
		if m.InstanceID == a.Master {
			masterHas = slices.Contains(m.Services, service)
		}
	}
	raw := make(map[string][]messages.TokenRange)
	for _, m := range a.Members {
		owner := m.InstanceID
		if !slices.Contains(m.Services, service) {
			if !masterHas {
				continue
			}
			owner = a.Master
		}
		raw[owner] = append(raw[owner], m.Ranges...)
	}
	out := make(map[string][]messages.TokenRange, len(raw))
	for id, rs := range raw {
		if n := Normalize(rs); n != nil {
			out[id] = n
		}
	}
	return out
}

// Grant is what instanceID works for service under a, normalized (nil when
// nothing).
func Grant(a messages.RingAssignment, instanceID, service string) []messages.TokenRange {
	return Owners(a, service)[instanceID]
}

// State is a as stored: the owners of every service of messages.AllServices
// (ordered by service in that order, then by range), the members as given
// (copied) and PublishedAt now.
func State(a messages.RingAssignment, now time.Time) persistence.RingState {
	s := persistence.RingState{
		Epoch:         a.Epoch,
		Master:        a.Master,
		MasterAddress: a.MasterAddress,
		Members:       copyMembers(a.Members),
		PublishedAt:   now,
	}
	for _, svc := range messages.AllServices {
		var owners []persistence.RangeOwner
		for id, rs := range Owners(a, svc) {
			for _, r := range rs {
				owners = append(owners, persistence.RangeOwner{Service: svc, Range: r, Owner: id})
			}
		}
		slices.SortFunc(owners, func(x, y persistence.RangeOwner) int {
			return cmp.Or(cmp.Compare(x.Range.Lo, y.Range.Lo), cmp.Compare(x.Owner, y.Owner))
		})
		s.Owners = append(s.Owners, owners...)
	}
	return s
}

// FromState is the assignment s stores. The store keeps no cluster and
// region (every member shares the master's), so the caller supplies them.
func FromState(s persistence.RingState, cluster, region string) messages.RingAssignment {
	return messages.RingAssignment{
		Epoch:         s.Epoch,
		Master:        s.Master,
		MasterAddress: s.MasterAddress,
		Cluster:       cluster,
		Region:        region,
		Members:       copyMembers(s.Members),
	}
}

// copyMembers deep-copies ms so that callers never share slices.
func copyMembers(ms []messages.RingMember) []messages.RingMember {
	if ms == nil {
		return nil
	}
	out := make([]messages.RingMember, len(ms))
	for i, m := range ms {
		m.Services = slices.Clone(m.Services)
		m.Ranges = slices.Clone(m.Ranges)
		m.Capabilities = slices.Clone(m.Capabilities)
		out[i] = m
	}
	return out
}
