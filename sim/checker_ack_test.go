package sim

import (
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestCheckCountsAnyHandOverAfterAConfirmedAck: a message handed over
// again after a confirmed ack is a duplicate (pull) or a redelivery
// (push, by the incarnation that had the "delivered" answer), whatever
// the later hand-over's answer: acked, unknown (its answer lost) or
// offered (a retry answer, 503). Hand-overs before the confirmed ack, or
// by another incarnation, are not.
func TestCheckCountsAnyHandOverAfterAConfirmedAck(t *testing.T) {
	sub := []Submit{{ID: "a", Node: "n1", Frontend: "f1", Outcome: Accepted}}
	origin := map[string]messages.State{"a": messages.StateDelivered}
	pull := func(a AckOutcome) Delivery {
		return Delivery{ID: "a", Frontend: "f1", Node: "n2", Ack: a, Kind: KindPull}
	}
	push := func(by string, a AckOutcome) Delivery {
		return Delivery{ID: "a", Frontend: "f1", Node: "n2", Ack: a, Push: true, By: by, Kind: KindWebhook}
	}
	for _, later := range []AckOutcome{Acked, AckUnknown, Offered} {
		if r := Check(History{Submits: sub, Origin: origin, Deliveries: []Delivery{pull(Acked), pull(later)}}); r.Duplicated != 1 {
			t.Errorf("pull: acked (confirmed), then handed over again (%s): duplicated=%d, want 1", later, r.Duplicated)
		}
		if r := Check(History{Submits: sub, Origin: origin, Deliveries: []Delivery{push("n2#1", Acked), push("n2#1", later)}}); r.Redelivered != 1 {
			t.Errorf("push: answered delivered to n2#1, then handed again by n2#1 (%s): redelivered=%d, want 1", later, r.Redelivered)
		}
	}
	clean := [][]Delivery{
		{pull(Offered), pull(AckUnknown), pull(Acked)},
		{push("n2#1", Offered), push("n2#1", AckUnknown), push("n2#1", Acked)},
		{push("n2#1", Acked), push("n2#2", Offered), push("n2#1/store1", Acked)},
	}
	for _, ds := range clean {
		if r := Check(History{Submits: sub, Origin: origin, Deliveries: ds}); !r.OK() {
			t.Errorf("%+v: %+v, want OK", ds, r)
		}
	}
}
