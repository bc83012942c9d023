package intake

import (
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Kicks: after a commit or a resubmit, the intake wakes the workers of the
// work it wrote that is due for a claim, each once.

// kickList collects the work whose workers a commit or a resubmit wakes,
// each once, in the order first met.
type kickList struct {
	seen map[persistence.WorkSpec]bool
	work []persistence.WorkSpec
}

// add wakes the worker of work written for a message now in state:
// delivery work always, forward work only for a pending message (one
// forward_queued waits for its peer to be healthy again).
func (k *kickList) add(work persistence.WorkSpec, state messages.State) {
	key := persistence.WorkSpec{Kind: work.Kind, Target: work.Target}
	if k.seen[key] || (key.Kind != persistence.WorkDelivery && state != messages.StatePending) {
		return
	}
	if k.seen == nil {
		k.seen = map[persistence.WorkSpec]bool{}
	}
	k.seen[key] = true
	k.work = append(k.work, key)
}

// kickPlan is whom the intake wakes for work: the workers of the
// frontends with delivery work (through the frontend supervisor) and of
// the peers with forward work (through the peers actor).
type kickPlan struct{ frontends, peers []string }

// planKicks plans the kicks for work, in its order.
func planKicks(work []persistence.WorkSpec) kickPlan {
	var k kickPlan
	for _, w := range work {
		if w.Kind == persistence.WorkDelivery {
			k.frontends = append(k.frontends, w.Target)
		} else {
			k.peers = append(k.peers, w.Target)
		}
	}
	return k
}

// relay reports whether the bus's relay is woken too: delivery work was
// written, and the bus takes from the store what was written unrelayed.
func (k kickPlan) relay() bool { return len(k.frontends) > 0 }
