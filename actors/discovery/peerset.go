package discovery

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/switchboard-dev/switchboard/messages"
)

// PeerUp and PeerGone are the effects of discovery, sent to the sink as
// *PeerUp and *PeerGone. They are the messages package's types (the peers
// supervisor switches on *messages.PeerUp and *messages.PeerGone), named
// here so that readers of discovery find them.
type (
	// PeerUp: Node is a peer at these instances (sorted by address): a new
	// peer, or a known one whose instances changed.
	PeerUp = messages.PeerUp
	// PeerGone: no listed address reports Node any more.
	PeerGone = messages.PeerGone
)

// Effect is *PeerUp or *PeerGone.
type Effect = any

// Reason says why an address was refused.
type Reason string

// Refusal reasons (docs/federation.md, the identity rules).
const (
	// RefusedOwnNode: the address reports our own node name (with SRV
	// discovery every node lists itself; this is expected there).
	RefusedOwnNode Reason = "own_node"
	// RefusedDuplicate: another address reports the same node and
	// instance_id and is kept: one that answered this poll before one that
	// only keeps a remembered identity, then the earlier in address order.
	RefusedDuplicate Reason = "duplicate_instance"
	// RefusedInvalid: the identity document is not valid (bad name or
	// protocol version).
	RefusedInvalid Reason = "invalid_identity"
)

// Refusal is an address that answered but is not used. Plain data.
type Refusal struct {
	Address    string
	Reason     Reason
	Node       string
	InstanceID string
	// Kept is the address that serves the instance (RefusedDuplicate).
	Kept string
	// Detail explains RefusedInvalid.
	Detail string
}

// Peer is one peer: a node and its instances, sorted by address.
type Peer struct {
	Node      string
	Instances []messages.PeerInstance
}

// Outcome is what one Apply changed.
type Outcome struct {
	// Effects are one *PeerUp or *PeerGone per changed node, by node name.
	Effects []Effect
	// Refused are the refusals that are new or different since the last
	// Apply, by address: log these (a refusal that persists is not repeated).
	Refused []Refusal
}

// PeerSet is the pure core of discovery: it remembers the identity each
// listed address last reported and derives the peer set from them. It has
// no clock, goroutines or I/O; the zero value is not usable (NewPeerSet).
type PeerSet struct {
	self   string
	listed []string
	ids    map[string]messages.Identity
	// answered: the address answered the last poll that asked it (its
	// identity is current, not only remembered).
	answered map[string]bool
	peers    map[string][]messages.PeerInstance
	refused  map[string]Refusal
}

// NewPeerSet returns an empty set for a node named self.
func NewPeerSet(self string) *PeerSet {
	return &PeerSet{
		self:     self,
		ids:      map[string]messages.Identity{},
		answered: map[string]bool{},
		peers:    map[string][]messages.PeerInstance{},
		refused:  map[string]Refusal{},
	}
}

// Apply takes one full poll, one that asked every listed address: listed is
// every address listed now (any order, duplicates ignored) and learned the
// identities that addresses answered in this poll. An address missing from
// learned (its call failed) keeps the identity it reported last: a peer that
// is down stays a peer, so that messages keep queueing for it; but of two
// addresses reporting one {node, instance_id}, one that answered is kept
// before one that did not. An address no longer listed is forgotten. It
// returns the changes against the previous Apply or Retry.
func (s *PeerSet) Apply(listed []string, learned map[string]messages.Identity) Outcome {
	return s.apply(normalize(listed), learned, true)
}

// Retry takes a retry poll, one that asked only some of the listed
// addresses (Unidentified): learned are the identities they answered. The
// listed addresses stay those of the last Apply, and the addresses not
// asked keep whether they answered the last poll that asked them.
func (s *PeerSet) Retry(learned map[string]messages.Identity) Outcome {
	return s.apply(s.listed, learned, false)
}

// apply is Apply (full: every listed address was asked) and Retry.
func (s *PeerSet) apply(listed []string, learned map[string]messages.Identity, full bool) Outcome {
	s.listed = listed
	ids := make(map[string]messages.Identity, len(s.listed))
	answered := make(map[string]bool, len(s.listed))
	for _, a := range s.listed {
		if id, ok := learned[a]; ok {
			ids[a], answered[a] = id, true
		} else if id, ok := s.ids[a]; ok {
			ids[a], answered[a] = id, !full && s.answered[a]
		}
	}
	s.ids, s.answered = ids, answered

	peers := map[string][]messages.PeerInstance{}
	refused := map[string]Refusal{}
	first := map[[2]string]string{} // {node, instance} -> address that has it
	for _, a := range s.keepOrder() {
		id, ok := s.ids[a]
		if !ok {
			continue
		}
		r := Refusal{Address: a, Node: id.Node, InstanceID: id.InstanceID}
		key := [2]string{id.Node, id.InstanceID}
		switch err := id.Validate(); {
		case err != nil:
			r.Reason, r.Detail = RefusedInvalid, err.Error()
		case id.Node == s.self:
			r.Reason = RefusedOwnNode
		case first[key] != "":
			r.Reason, r.Kept = RefusedDuplicate, first[key]
		default:
			first[key] = a
			peers[id.Node] = append(peers[id.Node], messages.PeerInstance{Address: a, InstanceID: id.InstanceID})
			continue
		}
		refused[a] = r
	}
	for _, is := range peers {
		slices.SortFunc(is, func(x, y messages.PeerInstance) int { return compareAddr(x.Address, y.Address) })
	}

	var out Outcome
	nodes := slices.Sorted(maps.Keys(peers))
	for n := range s.peers {
		if _, ok := peers[n]; !ok {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		now, isPeer := peers[n]
		before, wasPeer := s.peers[n]
		switch {
		case !isPeer:
			out.Effects = append(out.Effects, &PeerGone{Node: n})
		case !wasPeer || !slices.Equal(before, now):
			out.Effects = append(out.Effects, &PeerUp{Node: n, Instances: slices.Clone(now)})
		}
	}
	for _, a := range s.listed {
		if r, ok := refused[a]; ok && s.refused[a] != r {
			out.Refused = append(out.Refused, r)
		}
	}
	s.peers, s.refused = peers, refused
	return out
}

// keepOrder returns the listed addresses in the order that decides which of
// two addresses reporting one {node, instance_id} is kept: the addresses
// that answered the last poll that asked them first, then those that only
// keep a remembered identity, each group in address order. A remembered
// identity is what the address said before; an address that stopped
// answering (a broken IPv4 path, an old address still in DNS) must not hold
// the instance against one that answers.
func (s *PeerSet) keepOrder() []string {
	out := make([]string, 0, len(s.listed))
	for _, a := range s.listed {
		if s.answered[a] {
			out = append(out, a)
		}
	}
	for _, a := range s.listed {
		if !s.answered[a] {
			out = append(out, a)
		}
	}
	return out
}

// Listed returns the addresses of the last Apply, in address order.
func (s *PeerSet) Listed() []string { return slices.Clone(s.listed) }

// Unidentified returns the listed addresses that never answered, in
// address order: they are asked again sooner than the others.
func (s *PeerSet) Unidentified() []string {
	var out []string
	for _, a := range s.listed {
		if _, ok := s.ids[a]; !ok {
			out = append(out, a)
		}
	}
	return out
}

// Peers returns the peer set, by node name.
func (s *PeerSet) Peers() []Peer {
	out := make([]Peer, 0, len(s.peers))
	for _, n := range slices.Sorted(maps.Keys(s.peers)) {
		out = append(out, Peer{Node: n, Instances: slices.Clone(s.peers[n])})
	}
	return out
}

// Refusals returns the refused addresses, in address order.
func (s *PeerSet) Refusals() []Refusal {
	out := make([]Refusal, 0, len(s.refused))
	for _, a := range s.listed {
		if r, ok := s.refused[a]; ok {
			out = append(out, r)
		}
	}
	return out
}

// Clone returns an independent copy (the actor keeps one across restarts).
func (s *PeerSet) Clone() *PeerSet {
	c := &PeerSet{
		self:     s.self,
		listed:   slices.Clone(s.listed),
		ids:      maps.Clone(s.ids),
		answered: maps.Clone(s.answered),
		peers:    make(map[string][]messages.PeerInstance, len(s.peers)),
		refused:  maps.Clone(s.refused),
	}
	for n, is := range s.peers {
		c.peers[n] = slices.Clone(is)
	}
	return c
}

// normalize returns addrs without duplicates, in address order.
func normalize(addrs []string) []string {
	out := slices.Clone(addrs)
	slices.SortFunc(out, compareAddr)
	return slices.Compact(out)
}

// compareAddr orders addresses: IP addresses numerically (IPv4 before
// IPv6, then by port), before host names, which are in string order. Among
// addresses that answered (or among those that did not), the order decides
// which of two addresses reporting one instance is kept.
func compareAddr(a, b string) int {
	pa, errA := netip.ParseAddrPort(a)
	pb, errB := netip.ParseAddrPort(b)
	switch {
	case errA == nil && errB == nil:
		return pa.Compare(pb)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return cmp.Compare(strings.ToLower(a), strings.ToLower(b))
}
