package discovery

import (
	"reflect"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

func ident(node, instance string) messages.Identity {
	return messages.Identity{Node: node, InstanceID: instance, ProtocolVersion: messages.ProtocolVersion}
}

func inst(addr, id string) messages.PeerInstance {
	return messages.PeerInstance{Address: addr, InstanceID: id}
}

func TestPeerSet(t *testing.T) {
	const (
		a = "10.0.0.1:8443"
		b = "10.0.0.2:8443"
		c = "10.0.0.10:8443" // after b in address order, before it as a string
		d = "[2001:db8::1]:8443"
	)
	type poll struct {
		// retry: a retry poll (Retry(learned), listed unused) instead of
		// a full one (Apply).
		retry   bool
		listed  []string
		learned map[string]messages.Identity
		// want
		effects []Effect
		refused []Refusal
		peers   []Peer
		unknown []string
	}
	cases := []struct {
		name  string
		polls []poll
	}{
		{"one address one peer", []poll{{
			listed: []string{a}, learned: map[string]messages.Identity{a: ident("alpha", "1")},
			effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}}},
			peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
		}}},
		{"several addresses of one node are one peer, instances by address", []poll{{
			listed:  []string{c, d, a},
			learned: map[string]messages.Identity{a: ident("alpha", "1"), c: ident("alpha", "2"), d: ident("alpha", "3")},
			effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1"), inst(c, "2"), inst(d, "3")}}},
			peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1"), inst(c, "2"), inst(d, "3")}}},
		}}},
		{"effects in node order", []poll{{
			listed:  []string{a, b},
			learned: map[string]messages.Identity{a: ident("zulu", "1"), b: ident("alpha", "1")},
			effects: []Effect{
				&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(b, "1")}},
				&PeerUp{Node: "zulu", Instances: []messages.PeerInstance{inst(a, "1")}},
			},
			peers: []Peer{{"alpha", []messages.PeerInstance{inst(b, "1")}}, {"zulu", []messages.PeerInstance{inst(a, "1")}}},
		}}},
		{"own node refused", []poll{{
			listed:  []string{a, b},
			learned: map[string]messages.Identity{a: ident("self", "1"), b: ident("alpha", "1")},
			effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(b, "1")}}},
			refused: []Refusal{{Address: a, Reason: RefusedOwnNode, Node: "self", InstanceID: "1"}},
			peers:   []Peer{{"alpha", []messages.PeerInstance{inst(b, "1")}}},
		}}},
		{"duplicate instance: the second in address order is refused", []poll{{
			listed:  []string{c, b},
			learned: map[string]messages.Identity{b: ident("alpha", "1"), c: ident("alpha", "1")},
			effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(b, "1")}}},
			refused: []Refusal{{Address: c, Reason: RefusedDuplicate, Node: "alpha", InstanceID: "1", Kept: b}},
			peers:   []Peer{{"alpha", []messages.PeerInstance{inst(b, "1")}}},
		}}},
		{"duplicate instance: an address that answers beats one that only remembers", []poll{
			{
				// The host moves from a to b; only a is listed yet.
				listed: []string{a}, learned: map[string]messages.Identity{a: ident("alpha", "1")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
			},
			{
				// Both listed; a (earlier in address order) no longer answers, b does.
				listed: []string{a, b}, learned: map[string]messages.Identity{b: ident("alpha", "1")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(b, "1")}}},
				refused: []Refusal{{Address: a, Reason: RefusedDuplicate, Node: "alpha", InstanceID: "1", Kept: b}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(b, "1")}}},
			},
			{
				// Neither answers: both keep what they said last, and
				// address order decides again.
				listed:  []string{a, b},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}}},
				refused: []Refusal{{Address: b, Reason: RefusedDuplicate, Node: "alpha", InstanceID: "1", Kept: a}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
			},
		}},
		{"duplicate instance: a dual-stack host whose IPv4 path broke is used through IPv6", []poll{
			{
				listed: []string{d, a}, learned: map[string]messages.Identity{a: ident("alpha", "1"), d: ident("alpha", "1")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}}},
				refused: []Refusal{{Address: d, Reason: RefusedDuplicate, Node: "alpha", InstanceID: "1", Kept: a}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
			},
			{
				listed: []string{d, a}, learned: map[string]messages.Identity{d: ident("alpha", "1")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(d, "1")}}},
				refused: []Refusal{{Address: a, Reason: RefusedDuplicate, Node: "alpha", InstanceID: "1", Kept: d}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(d, "1")}}},
			},
			{
				// IPv4 answers again: both answer, address order decides.
				listed: []string{d, a}, learned: map[string]messages.Identity{a: ident("alpha", "1"), d: ident("alpha", "1")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}}},
				refused: []Refusal{{Address: d, Reason: RefusedDuplicate, Node: "alpha", InstanceID: "1", Kept: a}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
			},
		}},
		{"duplicate instance: a retry poll does not count the addresses it did not ask as silent", []poll{
			{
				listed: []string{a, b}, learned: map[string]messages.Identity{a: ident("alpha", "1")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
				unknown: []string{b},
			},
			{
				// Only b (unidentified) is asked; a answered the last poll
				// that asked it and stays the kept address.
				retry: true, learned: map[string]messages.Identity{b: ident("alpha", "1")},
				refused: []Refusal{{Address: b, Reason: RefusedDuplicate, Node: "alpha", InstanceID: "1", Kept: a}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
			},
			{
				// The next full poll: a is silent, b answers.
				listed: []string{a, b}, learned: map[string]messages.Identity{b: ident("alpha", "1")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(b, "1")}}},
				refused: []Refusal{{Address: a, Reason: RefusedDuplicate, Node: "alpha", InstanceID: "1", Kept: b}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(b, "1")}}},
			},
			{
				// A retry poll (nothing to ask) keeps b: it answered last.
				retry: true,
				peers: []Peer{{"alpha", []messages.PeerInstance{inst(b, "1")}}},
			},
		}},
		{"instances stay in address order when answering addresses are taken first", []poll{
			{
				listed: []string{a, c}, learned: map[string]messages.Identity{a: ident("alpha", "1"), c: ident("alpha", "3")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1"), inst(c, "3")}}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1"), inst(c, "3")}}},
			},
			{
				// a does not answer, c does: no change.
				listed: []string{a, c}, learned: map[string]messages.Identity{c: ident("alpha", "3")},
				peers: []Peer{{"alpha", []messages.PeerInstance{inst(a, "1"), inst(c, "3")}}},
			},
		}},
		{"same instance id on different nodes is fine", []poll{{
			listed:  []string{a, b},
			learned: map[string]messages.Identity{a: ident("alpha", "0"), b: ident("beta", "0")},
			effects: []Effect{
				&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "0")}},
				&PeerUp{Node: "beta", Instances: []messages.PeerInstance{inst(b, "0")}},
			},
			peers: []Peer{{"alpha", []messages.PeerInstance{inst(a, "0")}}, {"beta", []messages.PeerInstance{inst(b, "0")}}},
		}}},
		{"invalid identity refused", []poll{{
			listed:  []string{a},
			learned: map[string]messages.Identity{a: {Node: "alpha", InstanceID: "1", ProtocolVersion: 9}},
			refused: []Refusal{{Address: a, Reason: RefusedInvalid, Node: "alpha", InstanceID: "1",
				Detail: "invalid_request: identity: protocol_version 9, this node speaks 1"}},
			peers: []Peer{},
		}}},
		{"unanswered address is no peer and is retried", []poll{{
			listed: []string{a, b}, learned: map[string]messages.Identity{b: ident("beta", "1")},
			effects: []Effect{&PeerUp{Node: "beta", Instances: []messages.PeerInstance{inst(b, "1")}}},
			peers:   []Peer{{"beta", []messages.PeerInstance{inst(b, "1")}}},
			unknown: []string{a},
		}}},
		{"failed identity call keeps the last identity", []poll{
			{
				listed: []string{a}, learned: map[string]messages.Identity{a: ident("alpha", "1")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
			},
			{listed: []string{a}, peers: []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}}},
		}},
		{"an address no longer listed is dropped; a node with none left is gone", []poll{
			{
				listed:  []string{a, b},
				learned: map[string]messages.Identity{a: ident("alpha", "1"), b: ident("beta", "1")},
				effects: []Effect{
					&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}},
					&PeerUp{Node: "beta", Instances: []messages.PeerInstance{inst(b, "1")}},
				},
				peers: []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}, {"beta", []messages.PeerInstance{inst(b, "1")}}},
			},
			{
				listed:  []string{a},
				effects: []Effect{&PeerGone{Node: "beta"}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
			},
			{
				// Listed again: its old identity was forgotten, it must answer.
				listed:  []string{a, b},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
				unknown: []string{b},
			},
		}},
		{"instances change: PeerUp again; unchanged: nothing", []poll{
			{
				listed: []string{a}, learned: map[string]messages.Identity{a: ident("alpha", "1")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
			},
			{
				listed: []string{a, b}, learned: map[string]messages.Identity{a: ident("alpha", "1"), b: ident("alpha", "2")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1"), inst(b, "2")}}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1"), inst(b, "2")}}},
			},
			{
				listed: []string{b, a}, learned: map[string]messages.Identity{a: ident("alpha", "1"), b: ident("alpha", "2")},
				peers: []Peer{{"alpha", []messages.PeerInstance{inst(a, "1"), inst(b, "2")}}},
			},
			{
				// The instance at b restarted with a new id.
				listed: []string{a, b}, learned: map[string]messages.Identity{b: ident("alpha", "3")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1"), inst(b, "3")}}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1"), inst(b, "3")}}},
			},
		}},
		{"an address that now reports another node moves it", []poll{
			{
				listed: []string{a}, learned: map[string]messages.Identity{a: ident("alpha", "1")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
			},
			{
				listed: []string{a}, learned: map[string]messages.Identity{a: ident("beta", "1")},
				effects: []Effect{&PeerGone{Node: "alpha"}, &PeerUp{Node: "beta", Instances: []messages.PeerInstance{inst(a, "1")}}},
				peers:   []Peer{{"beta", []messages.PeerInstance{inst(a, "1")}}},
			},
		}},
		{"refusals are reported once per change", []poll{
			{
				listed: []string{a}, learned: map[string]messages.Identity{a: ident("self", "1")},
				refused: []Refusal{{Address: a, Reason: RefusedOwnNode, Node: "self", InstanceID: "1"}},
				peers:   []Peer{},
			},
			{listed: []string{a}, learned: map[string]messages.Identity{a: ident("self", "1")}, peers: []Peer{}},
			{
				listed: []string{a}, learned: map[string]messages.Identity{a: ident("self", "2")},
				refused: []Refusal{{Address: a, Reason: RefusedOwnNode, Node: "self", InstanceID: "2"}},
				peers:   []Peer{},
			},
			{listed: []string{}, peers: []Peer{}},
			{
				// Gone and back: reported again.
				listed: []string{a}, learned: map[string]messages.Identity{a: ident("self", "2")},
				refused: []Refusal{{Address: a, Reason: RefusedOwnNode, Node: "self", InstanceID: "2"}},
				peers:   []Peer{},
			},
		}},
		{"the duplicate becomes the instance when the first goes", []poll{
			{
				listed:  []string{a, b},
				learned: map[string]messages.Identity{a: ident("alpha", "1"), b: ident("alpha", "1")},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}}},
				refused: []Refusal{{Address: b, Reason: RefusedDuplicate, Node: "alpha", InstanceID: "1", Kept: a}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
			},
			{
				listed:  []string{b},
				effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(b, "1")}}},
				peers:   []Peer{{"alpha", []messages.PeerInstance{inst(b, "1")}}},
			},
		}},
		{"identities of addresses not listed are ignored", []poll{{
			listed: []string{a}, learned: map[string]messages.Identity{b: ident("beta", "1")},
			peers: []Peer{}, unknown: []string{a},
		}}},
		{"duplicate listing is one address", []poll{{
			listed: []string{a, a}, learned: map[string]messages.Identity{a: ident("alpha", "1")},
			effects: []Effect{&PeerUp{Node: "alpha", Instances: []messages.PeerInstance{inst(a, "1")}}},
			peers:   []Peer{{"alpha", []messages.PeerInstance{inst(a, "1")}}},
		}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewPeerSet("self")
			for i, p := range tc.polls {
				var out Outcome
				if p.retry {
					out = s.Retry(p.learned)
				} else {
					out = s.Apply(p.listed, p.learned)
				}
				if !reflect.DeepEqual(out.Effects, p.effects) {
					t.Errorf("poll %d: effects %s, want %s", i, show(out.Effects), show(p.effects))
				}
				if !reflect.DeepEqual(out.Refused, p.refused) {
					t.Errorf("poll %d: refused %+v, want %+v", i, out.Refused, p.refused)
				}
				if got := s.Peers(); !reflect.DeepEqual(got, p.peers) {
					t.Errorf("poll %d: peers %+v, want %+v", i, got, p.peers)
				}
				if got := s.Unidentified(); !reflect.DeepEqual(got, p.unknown) {
					t.Errorf("poll %d: unidentified %v, want %v", i, got, p.unknown)
				}
			}
		})
	}
}

func TestPeerSetCloneIsIndependent(t *testing.T) {
	s := NewPeerSet("self")
	s.Apply([]string{"10.0.0.1:1"}, map[string]messages.Identity{"10.0.0.1:1": ident("alpha", "1")})
	c := s.Clone()
	s.Apply(nil, nil)
	if got := c.Peers(); len(got) != 1 || got[0].Node != "alpha" {
		t.Fatalf("clone changed with the original: %+v", got)
	}
	// The clone still knows alpha's identity: a failed call keeps it.
	if out := c.Apply([]string{"10.0.0.1:1"}, nil); len(out.Effects) != 0 {
		t.Fatalf("clone: %s", show(out.Effects))
	}
}

func TestCompareAddr(t *testing.T) {
	ordered := []string{"10.0.0.2:1", "10.0.0.2:2", "10.0.0.10:1", "[::1]:1", "[2001:db8::1]:1", "a.example:1", "B.example:1"}
	for i := range ordered {
		for j := range ordered {
			got := compareAddr(ordered[i], ordered[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if (got < 0) != (want < 0) || (got > 0) != (want > 0) {
				t.Errorf("compareAddr(%s, %s) = %d, want sign %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func show(es []Effect) string {
	s := "["
	for _, e := range es {
		switch e := e.(type) {
		case *PeerUp:
			s += " up " + e.Node
			for _, i := range e.Instances {
				s += " " + i.Address + "=" + i.InstanceID
			}
			s += ";"
		case *PeerGone:
			s += " gone " + e.Node + ";"
		}
	}
	return s + " ]"
}
