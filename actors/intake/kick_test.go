package intake

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// TestKickList: the work written wakes each worker once, in the order
// first met, but not that of a forward queued for a peer that is not
// healthy.
func TestKickList(t *testing.T) {
	delivery := func(target string, due time.Time) persistence.WorkSpec {
		return persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: target, DueAt: due}
	}
	forward := persistence.WorkSpec{Kind: persistence.WorkForward, Target: "peer-b", DueAt: t0}
	type add struct {
		work  persistence.WorkSpec
		state messages.State
	}
	cases := []struct {
		name string
		adds []add
		want []string
	}{
		{name: "none"},
		{name: "one worker once", adds: []add{{delivery("uk", t0), messages.StatePending}, {delivery("uk", t0.Add(time.Hour)), messages.StatePending}},
			want: []string{"delivery/uk"}},
		{name: "in the order first met", adds: []add{{delivery("se", t0), messages.StatePending}, {forward, messages.StatePending}, {delivery("uk", t0), messages.StatePending}, {delivery("se", t0), messages.StatePending}},
			want: []string{"delivery/se", "forward/peer-b", "delivery/uk"}},
		{name: "a queued forward waits for its peer", adds: []add{{forward, messages.StateForwardQueued}}},
		{name: "and does not keep a pending one from its kick", adds: []add{{forward, messages.StateForwardQueued}, {forward, messages.StatePending}},
			want: []string{"forward/peer-b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var kl kickList
			for _, a := range c.adds {
				kl.add(a.work, a.state)
			}
			var got []string
			for _, w := range kl.work {
				if !w.DueAt.IsZero() {
					t.Errorf("kick %+v carries a time: one key per worker", w)
				}
				got = append(got, fmt.Sprintf("%s/%s", w.Kind, w.Target))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("kicks %q, want %q", got, c.want)
			}
		})
	}
}

// TestPlanKicks: delivery work wakes its frontend's worker and the bus's
// relay, forward work its peer's worker.
func TestPlanKicks(t *testing.T) {
	delivery := func(target string) persistence.WorkSpec {
		return persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: target}
	}
	forward := func(target string) persistence.WorkSpec {
		return persistence.WorkSpec{Kind: persistence.WorkForward, Target: target}
	}
	cases := []struct {
		name             string
		work             []persistence.WorkSpec
		frontends, peers []string
		relay            bool
	}{
		{name: "none"},
		{name: "deliveries", work: []persistence.WorkSpec{delivery("uk"), delivery("se")}, frontends: []string{"uk", "se"}, relay: true},
		{name: "forwards", work: []persistence.WorkSpec{forward("b"), forward("c")}, peers: []string{"b", "c"}},
		{name: "both", work: []persistence.WorkSpec{forward("b"), delivery("uk")}, frontends: []string{"uk"}, peers: []string{"b"}, relay: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := planKicks(c.work)
			if !slices.Equal(k.frontends, c.frontends) || !slices.Equal(k.peers, c.peers) || k.relay() != c.relay {
				t.Errorf("planKicks = frontends %q, peers %q, relay %v; want %q, %q, %v",
					k.frontends, k.peers, k.relay(), c.frontends, c.peers, c.relay)
			}
		})
	}
}
